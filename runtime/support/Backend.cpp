//===- Backend.cpp - shared parts of the backends -------------------------===//

#include "mla/Runtime/Backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

using namespace mla;
using namespace mla::rt;

LoadedKernel::~LoadedKernel() = default;
Backend::~Backend() = default;

Expected<const void *> LaunchBuffers::pointer(std::string_view name) const {
  const std::pair<std::string_view, const void *> buffers[] = {
      {arg::kQ, q},
      {arg::kKV, kv},
      {arg::kKVScale, kvScale},
      {arg::kQoIndptr, qoIndptr},
      {arg::kKVIndptr, kvIndptr},
      {arg::kKVIndices, kvIndices},
      {arg::kKVLastPageLen, kvLastPageLen},
      {arg::kWorkItems, workItems},
      {arg::kItemIndptr, itemIndptr},
      {arg::kWorkUnits, workUnits},
      {arg::kWorkgroupUnits, workgroupUnitIndptr},
      {arg::kPlanStatus, planStatus},
      {arg::kOut, out},
      {arg::kLse, lse},
      {arg::kPartialOut, partialOut},
      {arg::kPartialLse, partialLse}};
  for (auto [argName, ptr] : buffers)
    if (argName == name)
      return ptr;
  return fail(Status::InvalidArtifact,
              "invalid artifact: unknown kernel argument '", name, "'");
}

Expected<int64_t> LaunchBuffers::resolve(std::string_view entry) const {
  return resolveDim(entry, {{dim::kTokens, numTokens},
                            {dim::kKVRows, numKVRows},
                            {dim::kKVIndices, numKVIndices},
                            {dim::kSeqsPlusOne, numSeqs + 1},
                            {dim::kSequences, numSeqs},
                            {dim::kWorkItems, numWorkItems},
                            {dim::kWorkUnits, numWorkUnits},
                            {dim::kCombineSlices, combineSlices}});
}

Expected<PackedLaunch> mla::rt::packLaunch(const ArtifactKernel &kernel,
                                           const LaunchBuffers &buffers) {
  PackedLaunch packed;
  packed.kernargBytes = kernel.kernargBytes;
  packed.kernarg.assign((kernel.kernargBytes + 7) / 8, 0);
  auto *kernarg = reinterpret_cast<uint8_t *>(packed.kernarg.data());
  for (const ArtifactKernelArg &arg : kernel.args) {
    auto ptr = buffers.pointer(arg.name);
    if (!ptr)
      return ptr.takeError();
    std::vector<int64_t> words = {reinterpret_cast<int64_t>(*ptr),
                                  reinterpret_cast<int64_t>(*ptr), 0};
    std::vector<int64_t> sizes;
    for (const std::string &d : arg.dims) {
      auto size = buffers.resolve(d);
      if (!size)
        return size.takeError();
      sizes.push_back(*size);
    }
    std::vector<int64_t> strides(sizes.size());
    int64_t stride = 1;
    for (size_t i = sizes.size(); i-- > 0;) {
      strides[i] = stride;
      stride *= sizes[i];
    }
    words.insert(words.end(), sizes.begin(), sizes.end());
    words.insert(words.end(), strides.begin(), strides.end());
    if (words.size() != arg.fields.size())
      return fail(Status::InvalidArtifact, "invalid artifact: argument ",
                  arg.name, " of ", kernel.name, " has ", arg.fields.size(),
                  " kernarg fields for ", words.size(), " descriptor words");
    for (size_t w = 0; w < words.size(); ++w) {
      auto [offset, size] = arg.fields[w];
      if (offset < 0 || (size != 4 && size != 8) ||
          offset + size > kernel.kernargBytes)
        return fail(Status::InvalidArtifact,
                    "invalid artifact: kernarg field of ", arg.name,
                    " out of the kernarg segment");
      std::memcpy(kernarg + offset, &words[w], size); // little endian
    }
  }
  for (int i = 0; i < 3; ++i) {
    auto size = buffers.resolve(kernel.grid[i]);
    if (!size)
      return size.takeError();
    packed.grid[i] = static_cast<unsigned>(*size);
  }
  return packed;
}

bool LaunchBuffers::runs(const ArtifactKernel &kernel) const {
  bool isPlan = kernel.name == kernel::kPlan;
  if (planOnly)
    return isPlan;
  if (isPlan)
    return devicePlan;
  return kernel.name != kernel::kCombine || combines;
}

Error Backend::allocate(size_t bytes, void **ptr) {
  // Aligned like device allocations, so vector loads of the lane functions
  // see what a GPU would.
  *ptr = std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
  if (!*ptr)
    return fail(Status::Internal, "out of host memory (", bytes, " bytes)");
  return Error::success();
}

Error Backend::release(void *ptr) {
  std::free(ptr);
  return Error::success();
}

Error Backend::copyToDevice(void *dst, const void *src, size_t bytes) {
  if (bytes)
    std::memcpy(dst, src, bytes);
  return Error::success();
}

Error Backend::copyToHost(void *dst, const void *src, size_t bytes) {
  if (bytes)
    std::memcpy(dst, src, bytes);
  return Error::success();
}

Error Backend::synchronize(void *) { return Error::success(); }

Error Backend::modelKVTraffic(bool) {
  return fail(Status::InvalidArgument,
              "only the emu backend models cache traffic");
}

Error Backend::checkHazards(bool) {
  return fail(Status::InvalidArgument,
              "only the emu backend checks LDS hazards");
}

Error Backend::scheduleSeed(uint64_t) {
  return fail(Status::InvalidArgument, "only the emu backend schedules lanes");
}

Expected<KVTraffic> Backend::kvTraffic() const {
  return fail(Status::InvalidArgument,
              "only the emu backend models cache traffic");
}

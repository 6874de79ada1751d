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
                            {dim::kWorkUnits, numWorkUnits}});
}

bool LaunchBuffers::runs(const ArtifactKernel &kernel) const {
  bool isPlan = kernel.name == kernel::kPlan;
  return planOnly ? isPlan : devicePlan || !isPlan;
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

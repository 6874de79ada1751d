//===- Backend.cpp - shared parts of the backends -------------------------===//

#include "Backend.h"

#include "mla/Runtime/Status.h"

#include "llvm/ADT/StringSwitch.h"

#include <cstdlib>
#include <cstring>

using namespace mla;
using namespace mla::rt;

LoadedKernel::~LoadedKernel() = default;
Backend::~Backend() = default;

llvm::Expected<const void *>
LaunchBuffers::pointer(llvm::StringRef name) const {
  const void *ptr = llvm::StringSwitch<const void *>(name)
                        .Case("q", q)
                        .Case("kv", kv)
                        .Case("kv_scale", kvScale)
                        .Case("qo_indptr", qoIndptr)
                        .Case("kv_indptr", kvIndptr)
                        .Case("work_items", workItems)
                        .Case("item_indptr", itemIndptr)
                        .Case("out", out)
                        .Case("lse", lse)
                        .Case("partial_out", partialOut)
                        .Case("partial_lse", partialLse)
                        .Default(reinterpret_cast<const void *>(-1));
  if (ptr == reinterpret_cast<const void *>(-1))
    return statusError(Status::InvalidArtifact,
                       "invalid artifact: unknown kernel argument '" + name +
                           "'");
  return ptr;
}

llvm::Expected<int64_t> LaunchBuffers::resolve(llvm::StringRef entry) const {
  return resolveDim(entry, {{dim::kTokens, numTokens},
                            {dim::kKVRows, numKVRows},
                            {dim::kSeqsPlusOne, numSeqs + 1},
                            {dim::kSequences, numSeqs},
                            {dim::kWorkItems, numWorkItems}});
}

llvm::Error Backend::allocate(size_t bytes, void **ptr) {
  // Aligned like device allocations, so vector loads of the lane functions
  // see what a GPU would.
  *ptr = std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
  if (!*ptr)
    return statusError(Status::Internal,
                       "out of host memory (" + llvm::Twine(bytes) + " bytes)");
  return llvm::Error::success();
}

llvm::Error Backend::release(void *ptr) {
  std::free(ptr);
  return llvm::Error::success();
}

llvm::Error Backend::copyToDevice(void *dst, const void *src, size_t bytes) {
  if (bytes)
    std::memcpy(dst, src, bytes);
  return llvm::Error::success();
}

llvm::Error Backend::copyToHost(void *dst, const void *src, size_t bytes) {
  if (bytes)
    std::memcpy(dst, src, bytes);
  return llvm::Error::success();
}

llvm::Error Backend::synchronize(void *) { return llvm::Error::success(); }

llvm::Error Backend::modelKVTraffic(bool) {
  return statusError(Status::InvalidArgument,
                     "only the emu backend models cache traffic");
}

llvm::Error Backend::checkHazards(bool) {
  return statusError(Status::InvalidArgument,
                     "only the emu backend checks LDS hazards");
}

llvm::Error Backend::scheduleSeed(uint64_t) {
  return statusError(Status::InvalidArgument,
                     "only the emu backend schedules lanes");
}

llvm::Expected<KVTraffic> Backend::kvTraffic() const {
  return statusError(Status::InvalidArgument,
                     "only the emu backend models cache traffic");
}

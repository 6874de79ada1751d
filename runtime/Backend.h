//===- Backend.h - what the C API needs from a backend ----------*- C++ -*-===//
//
// Internal to the runtime: a backend owns device memory and turns an
// artifact into a loaded kernel; a loaded kernel launches one decode on
// caller-owned buffers. The C API (runtime.h) validates everything before a
// backend sees it.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_BACKEND_H
#define MLA_RUNTIME_BACKEND_H

#include "mla/Emu/CacheTraffic.h"
#include "mla/Runtime/Artifact.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <string>

namespace mla::rt {

/// The buffers and sizes of one launch, already checked against the plan.
struct LaunchBuffers {
  const void *q = nullptr, *kv = nullptr, *kvScale = nullptr;
  const int32_t *qoIndptr = nullptr, *kvIndptr = nullptr;
  const int32_t *workItems = nullptr, *itemIndptr = nullptr; // the work list
  void *out = nullptr;
  float *lse = nullptr;
  float *partialOut = nullptr, *partialLse = nullptr; // the workspace
  int64_t numSeqs = 0, numTokens = 0, numKVRows = 0, numWorkItems = 0;

  /// The buffer a kernel argument of the artifact names.
  llvm::Expected<const void *> pointer(llvm::StringRef argName) const;
  /// The value of a dim:: size symbol.
  llvm::Expected<int64_t> resolve(llvm::StringRef entry) const;
};

/// The emu backend's cache-traffic model (mla_kv_traffic).
using KVTraffic = emu::CacheTraffic;

class LoadedKernel {
public:
  virtual ~LoadedKernel();
  virtual llvm::Error launch(const LaunchBuffers &buffers, void *stream) = 0;
};

class Backend {
public:
  virtual ~Backend();
  /// The chip the backend runs ("gfx950", "host").
  virtual std::string arch() const = 0;
  /// Whether launches read the plan's work list and workspace; the cpu
  /// backend's reference lowering plans for itself.
  virtual bool usesWorkList() const { return true; }
  virtual llvm::Expected<std::unique_ptr<LoadedKernel>>
  load(const Artifact &artifact) = 0;

  /// The cache-traffic model; only the emu backend has one.
  virtual llvm::Error modelKVTraffic(bool enable);
  virtual llvm::Expected<KVTraffic> kvTraffic() const;
  /// The emu's LDS hazard checks and lane schedule (mla_emu_check_hazards,
  /// mla_emu_schedule_seed); only the emu backend has them.
  virtual llvm::Error checkHazards(bool enable);
  virtual llvm::Error scheduleSeed(uint64_t seed);

  // Device memory; host memory unless overridden.
  virtual llvm::Error allocate(size_t bytes, void **ptr);
  virtual llvm::Error release(void *ptr);
  virtual llvm::Error copyToDevice(void *dst, const void *src, size_t bytes);
  virtual llvm::Error copyToHost(void *dst, const void *src, size_t bytes);
  virtual llvm::Error synchronize(void *stream);
};

std::unique_ptr<Backend> createEmuBackend();
std::unique_ptr<Backend> createCpuBackend();
/// Loads the HIP library and opens GPU `device`; BackendUnavailable when
/// there is no library or no such device.
llvm::Expected<std::unique_ptr<Backend>> createHipBackend(int device);

} // namespace mla::rt

#endif // MLA_RUNTIME_BACKEND_H

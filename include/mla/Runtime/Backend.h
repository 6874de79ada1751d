//===- Backend.h - what the C API needs from a backend ----------*- C++ -*-===//
//
// Internal to the runtime: a backend owns device memory and turns an
// artifact into a loaded kernel; a loaded kernel launches one decode on
// caller-owned buffers. The C API (runtime.h) validates everything before a
// backend sees it. The hip and cuda backends live in the runtime; the emu and cpu
// backends, which JIT-compile MLIR, live in libMLARuntimeJit, which the
// runtime loads when such a context is created (kJitEntryPoint).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_BACKEND_H
#define MLA_RUNTIME_BACKEND_H

#include "mla/Emu/CacheTraffic.h"
#include "mla/Runtime/Artifact.h"

#include "mla/Runtime/Status.h"

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mla::rt {

/// The buffers and sizes of one launch, already checked against the plan.
struct LaunchBuffers {
  const void *q = nullptr, *kv = nullptr, *kvScale = nullptr;
  const int32_t *qoIndptr = nullptr, *kvIndptr = nullptr;
  const int32_t *kvIndices = nullptr, *kvLastPageLen = nullptr; // paged
  // The work list: items, their indptr per sequence, the persistent grid's
  // schedule, and (device plans) the plan kernel's status word.
  int32_t *workItems = nullptr, *itemIndptr = nullptr;
  int32_t *workUnits = nullptr, *workgroupUnitIndptr = nullptr;
  int32_t *planStatus = nullptr;
  void *out = nullptr;
  float *lse = nullptr;
  float *partialOut = nullptr, *partialLse = nullptr; // the workspace
  int64_t numSeqs = 0, numTokens = 0, numKVRows = 0, numWorkItems = 0;
  int64_t numWorkUnits = 0;
  /// Whether the combine runs: a device plan always (its items are
  /// unknown at launch), a host plan where a sequence has items to merge
  /// (WorkList::needsCombine).
  bool combines = true;
  /// The combine grid's column slices (mla::combineSlices); at least 1.
  int64_t combineSlices = 1;
  /// A device plan: the plan kernel writes the work list before the partial
  /// kernel reads it; otherwise the host planner wrote it.
  bool devicePlan = false;
  /// Only the plan kernel (mla_launch_plan_kernel).
  bool planOnly = false;
  int64_t pageSize = 0, numKVIndices = 0; // paged: P and kv_indptr[B]

  /// The buffer a kernel argument of the artifact names.
  rt::Expected<const void *> pointer(std::string_view argName) const;
  /// The value of a dim:: size symbol.
  rt::Expected<int64_t> resolve(std::string_view entry) const;
  /// Whether this launch runs `kernel`: the plan kernel only for a device
  /// plan, the combine only where it has items to merge.
  bool runs(const ArtifactKernel &kernel) const;
};

/// One kernel's launch as a GPU driver takes it: the kernarg buffer laid
/// out as the artifact's kernarg fields say (every memref descriptor word:
/// allocated and aligned pointer, offset 0, sizes, row-major strides) and
/// the grid; a zero grid means nothing to launch.
struct PackedLaunch {
  std::vector<uint64_t> kernarg; // kernel.kernargBytes, rounded up to 8
  size_t kernargBytes = 0;
  std::array<unsigned, 3> grid = {0, 0, 0};
  bool empty() const { return grid[0] == 0 || grid[1] == 0 || grid[2] == 0; }
};
Expected<PackedLaunch> packLaunch(const ArtifactKernel &kernel,
                                  const LaunchBuffers &buffers);
/// The order an artifact's kernels launch in: plan (device plans only),
/// partial, combine (the artifact lists partial, combine, plan).
constexpr size_t kKernelLaunchOrder[] = {2, 0, 1};

/// The emu backend's cache-traffic model (mla_kv_traffic).
using KVTraffic = emu::CacheTraffic;

class LoadedKernel {
public:
  virtual ~LoadedKernel();
  virtual Error launch(const LaunchBuffers &buffers, void *stream) = 0;
};

class Backend {
public:
  virtual ~Backend();
  /// The chip the backend runs ("gfx950", "host").
  virtual std::string arch() const = 0;
  /// Whether launches read the plan's work list and workspace; the cpu
  /// backend's reference lowering plans for itself.
  virtual bool usesWorkList() const { return true; }
  virtual Expected<std::unique_ptr<LoadedKernel>>
  load(const Artifact &artifact) = 0;

  /// The cache-traffic model; only the emu backend has one.
  virtual Error modelKVTraffic(bool enable);
  virtual Expected<KVTraffic> kvTraffic() const;
  /// The emu's LDS hazard checks and lane schedule (mla_emu_check_hazards,
  /// mla_emu_schedule_seed); only the emu backend has them.
  virtual Error checkHazards(bool enable);
  virtual Error scheduleSeed(uint64_t seed);

  // Device memory; host memory unless overridden.
  virtual Error allocate(size_t bytes, void **ptr);
  virtual Error release(void *ptr);
  virtual Error copyToDevice(void *dst, const void *src, size_t bytes);
  virtual Error copyToHost(void *dst, const void *src, size_t bytes);
  virtual Error synchronize(void *stream);
};

/// Loads the HIP library and opens GPU `device`; BackendUnavailable when
/// there is no library or no such device.
Expected<std::unique_ptr<Backend>> createHipBackend(int device);
/// Loads the CUDA driver (libcuda.so.1) and opens GPU `device` through its
/// primary context; BackendUnavailable when there is no driver or device.
Expected<std::unique_ptr<Backend>> createCudaBackend(int device);

/// The JIT backends (libMLARuntimeJit).
enum class JitBackendKind { Emu, Cpu };
/// Loads libMLARuntimeJit (next to libMLARuntime, or $MLA_JIT_LIBRARY) and
/// creates a backend; BackendUnavailable when the library is not installed.
Expected<std::unique_ptr<Backend>> createJitBackend(JitBackendKind kind);

/// What libMLARuntimeJit exports: `extern "C" Backend *<kJitEntryPoint>(int
/// kind, int abiVersion)`, a new backend or null when the versions differ.
constexpr const char *kJitEntryPoint = "mla_jit_backend_create";
/// Bumped whenever Backend, LoadedKernel, LaunchBuffers or Artifact change
/// layout: the runtime and the JIT library are built together.
constexpr int kJitAbiVersion = 2;

} // namespace mla::rt

#endif // MLA_RUNTIME_BACKEND_H

//===- Runtime.h - lanes as fibers for the emu backend ----------*- C++ -*-===//
//
// Runs one workgroup of a lane function (from mla-gpu-to-emu): every lane is
// a fiber (ucontext) that yields at barriers and at wave-level operations;
// the last lane of a wave to reach an MFMA, shuffle, LDS DMA or
// memory_counter_wait computes it for all 64 lanes. An LDS DMA is in flight
// until a wait retires it (vmcnt semantics: the wave's DMAs retire in issue
// order); every LDS access is checked against the hazard model
// (LdsHazards.h). A workgroup whose lanes wait on each other forever, or
// disagree on the next wave operation, is an error, not a hang.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_EMU_RUNTIME_H
#define MLA_EMU_RUNTIME_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mla::emu {

/// Symbols the lane functions call, for the JIT.
std::vector<std::pair<std::string, void *>> runtimeSymbols();

/// Calls a JIT-compiled lane function in its packed form: `words` are the
/// descriptors of its arguments (kernel arguments, then workgroup memory),
/// `ctx` the lane's handle.
void callLane(void (*packedFn)(void **), const std::vector<void *> &words,
              int64_t ctx);

/// Called with the source of each lane's part of an LDS DMA.
using DmaObserver = std::function<void(const void *src, int64_t bytes)>;

/// How a workgroup runs.
struct WorkgroupOptions {
  /// The workgroup's LDS as one block (its buffers lie inside): LDS accesses
  /// and DMAs outside it are errors; hazards are reported as offsets in it.
  char *lds = nullptr;
  int64_t ldsBytes = 0;
  /// Report LDS hazards (races, reads of DMAs in flight) as errors.
  bool checkHazards = true;
  /// 0: lanes run in id order. Otherwise the seed of a random order: lanes
  /// are shuffled at every scheduling round and may yield at any LDS access.
  uint64_t scheduleSeed = 0;
  /// If given, sees the global bytes every lane of every LDS DMA reads.
  const DmaObserver *dma = nullptr;
  /// The launch's workgroups in x, y and z (what gpu.grid_dim reads).
  std::array<int64_t, 3> grid = {1, 1, 1};
};

class WorkgroupRunner {
public:
  explicit WorkgroupRunner(int numThreads);
  ~WorkgroupRunner();

  /// Runs `lane(ctx)` for every thread of workgroup `blockId`; `ctx` is the
  /// handle the lane passes back to the runtime calls.
  llvm::Error run(std::array<int64_t, 3> blockId,
                  const std::function<void(int64_t ctx)> &lane,
                  const WorkgroupOptions &options);

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace mla::emu

#endif // MLA_EMU_RUNTIME_H

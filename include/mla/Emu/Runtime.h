//===- Runtime.h - lanes as fibers for the emu backend ----------*- C++ -*-===//
//
// Runs one workgroup of a lane function (from mla-gpu-to-emu): every lane is
// a fiber (ucontext) that yields at barriers and at wave-level operations;
// the last lane of a wave to reach an MFMA, shuffle or LDS DMA computes it
// for all 64 lanes. A workgroup whose lanes wait on each other forever, or
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

/// Called with the source of each lane's part of an LDS DMA.
using DmaObserver = std::function<void(const void *src, int64_t bytes)>;

class WorkgroupRunner {
public:
  explicit WorkgroupRunner(int numThreads);
  ~WorkgroupRunner();

  /// Runs `lane(ctx)` for every thread of workgroup `blockId`; `ctx` is the
  /// handle the lane passes back to the runtime calls. `dma`, if given, sees
  /// the global bytes every lane of every LDS DMA reads.
  llvm::Error run(std::array<int64_t, 3> blockId,
                  const std::function<void(int64_t ctx)> &lane,
                  const DmaObserver *dma = nullptr);

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace mla::emu

#endif // MLA_EMU_RUNTIME_H

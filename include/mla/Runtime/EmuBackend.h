//===- EmuBackend.h - run the gfx950 kernels on the CPU ---------*- C++ -*-===//
//
// The `emu` backend: compiles mla.decode with the gfx950 pipeline up to the
// MFMA level, turns the kernels into host lane functions (mla-gpu-to-emu),
// JIT-compiles them and launches them like a GPU would — the runtime's split
// planner picks the work list, every workgroup's 256 lanes run as fibers with
// exact MFMA semantics, then the combine kernel merges the partials.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_EMUBACKEND_H
#define MLA_RUNTIME_EMUBACKEND_H

#include "mla/Runtime/CpuBackend.h"

namespace mla {

class EmuKernel {
public:
  ~EmuKernel();
  /// `sig.splits` forces that many work items per sequence (-1: planner).
  static llvm::Expected<std::unique_ptr<EmuKernel>>
  compile(const KernelSignature &sig, bool dumpIR = false);

  /// Runs the kernels on `problem`: `out` bf16 bits [T, H, Dv], `lse` f32.
  llvm::Error run(const DecodeProblem &problem, std::vector<uint16_t> &out,
                  std::vector<float> &lse);

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace mla

#endif // MLA_RUNTIME_EMUBACKEND_H

//===- CpuBackend.h - run mla.decode on the host ----------------*- C++ -*-===//
//
// The `cpu` backend: wraps one mla.decode in a function over memrefs, lowers it
// with the registered mla-decode-to-cpu pipeline and runs it in-process
// through MLIR's ExecutionEngine. One compiled kernel serves every problem of
// the same format and head dimensions.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_CPUBACKEND_H
#define MLA_RUNTIME_CPUBACKEND_H

#include "mla/Runtime/Problem.h"

#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <vector>

namespace mla {

/// Which registered host pipeline compiles the kernel.
enum class HostPipeline {
  Decompose, // mla-decode-to-cpu: whole-sequence softmax (the reference path)
  Split,     // mla-decode-split-to-cpu: planned split-KV, tiles, combine
};

struct KernelSignature {
  CacheFormat format;
  int64_t numHeads, qkDim, vDim;
  double smScale = 0.0; // 0: the op's default
  HostPipeline pipeline = HostPipeline::Decompose;
  // Split pipeline only.
  std::string target = "gfx950"; // the chip the work list is planned for
  int64_t kvTile = 0;            // 0: the config's choice
  int64_t splits = -1;           // -1: balanced planner; N: N items per sequence
  // emu only, testing only: a deliberately wrong MFMA operand layout.
  bool testCorruptLayout = false;
};

/// The MLIR source of the host entry point `mla_decode` for `sig`.
std::string buildHostModuleSource(const KernelSignature &sig);

class CpuKernel {
public:
  ~CpuKernel();
  /// Parses, lowers and JIT-compiles the kernel for `sig`. When `irDump` is
  /// set, the IR after every pass is printed to it.
  static llvm::Expected<std::unique_ptr<CpuKernel>>
  compile(const KernelSignature &sig, bool dumpIR = false);

  /// Runs the kernel: `out` receives bf16 bits [T, H, Dv], `lse` f32 [T, H].
  llvm::Error run(const DecodeProblem &problem, std::vector<uint16_t> &out,
                  std::vector<float> &lse);

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace mla

#endif // MLA_RUNTIME_CPUBACKEND_H

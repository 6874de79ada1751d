//===- HostModule.h - one decode configuration as a host function -*- C++ -*-===//
//
// A compiled configuration starts as one mla.decode wrapped in a host
// function over memrefs (`mla_decode`, C interface): the reference (cpu)
// form of an artifact, and the input of the gfx950 and emu pipelines.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_COMPILER_HOSTMODULE_H
#define MLA_COMPILER_HOSTMODULE_H

#include "mla/ABI.h"
#include "mla/Target/KnownTargets.h"

#include <string>

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
  std::string target = defaultTargetName().str(); // the chip kernels and work lists are for
  int64_t kvTile = 0;            // 0: the config's choice
  int64_t splits = -1;           // -1: balanced planner; N: N items per sequence
  // gfx950 kernels (emu, hip): 0 = all H heads in one block.
  int64_t headsPerWorkgroup = 0;
  // emu only, testing only: a deliberately wrong MFMA operand layout.
  bool testCorruptLayout = false;
  // emu only, testing only: a synchronization bug (mla-to-gpu test-hazard).
  std::string testHazard;
};

/// The MLIR source of the host entry point `mla_decode` for `sig`.
std::string buildHostModuleSource(const KernelSignature &sig);

} // namespace mla

#endif // MLA_COMPILER_HOSTMODULE_H

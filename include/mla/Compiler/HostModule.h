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
#include "mla/Transforms/Passes.h"

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
  /// The reference form's pipeline (the cpu backend).
  HostPipeline pipeline = HostPipeline::Decompose;
  /// Target, splits, tile and the other config choices: every form is
  /// compiled with the same (the decomposition ignores them).
  DecodePipelineOptions config;
};

/// The MLIR source of the host entry point `mla_decode` for `sig`.
std::string buildHostModuleSource(const KernelSignature &sig);

} // namespace mla

#endif // MLA_COMPILER_HOSTMODULE_H

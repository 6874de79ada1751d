//===- HostModule.h - one decode configuration as a host function -*- C++ -*-===//
//
// A compiled configuration starts as one mla.decode wrapped in a host
// function over memrefs (`mla_decode`, C interface): the reference (cpu)
// form of an artifact, and the input of the gfx950 and emu pipelines. The
// op is the user's own (copied with its location and attributes), not
// regenerated text.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_COMPILER_HOSTMODULE_H
#define MLA_COMPILER_HOSTMODULE_H

#include "mla/ABI.h"
#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

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
  /// > 0: a paged cache of this many rows per page (a power of two, at
  /// most 256); 0: contiguous.
  int64_t pageSize = 0;
  /// The reference form's pipeline (the cpu backend).
  HostPipeline pipeline = HostPipeline::Decompose;
  /// Target, splits, tile and the other config choices: every form is
  /// compiled with the same (the decomposition ignores them).
  DecodePipelineOptions config;
};

/// The host entry point `mla_decode` (C interface, memrefs in the
/// runtime's argument order) around a copy of `op` — its location,
/// attributes and types — computing both results: the reference form of
/// an artifact and the input of the gfx950 and emu pipelines.
mlir::OwningOpRef<mlir::ModuleOp> buildHostModule(DecodeOp op);

/// A module holding one function with the mla.decode `sig` describes, for
/// a decode known only by its signature.
mlir::OwningOpRef<mlir::ModuleOp> buildDecodeModule(mlir::MLIRContext &ctx,
                                                    const KernelSignature &sig);

} // namespace mla

#endif // MLA_COMPILER_HOSTMODULE_H

//===- Passes.h - mla passes and pipelines ----------------------*- C++ -*-===//
//
// Declarations of every mla pass (generated from Passes.td) and of the
// pipeline builders an embedding compiler calls.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TRANSFORMS_PASSES_H
#define MLA_TRANSFORMS_PASSES_H

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mla {

#define GEN_PASS_DECL
#include "mla/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "mla/Transforms/Passes.h.inc"

/// Options of the host (cpu backend) pipeline.
struct DecodeToCPUPipelineOptions
    : public mlir::PassPipelineOptions<DecodeToCPUPipelineOptions> {};

/// mla.decode -> decomposed upstream ops -> bufferized loops -> LLVM dialect,
/// ready for MLIR's ExecutionEngine. Functions are expected to carry
/// `llvm.emit_c_interface` if called from C++.
void buildDecodeToCPUPipeline(mlir::OpPassManager &pm,
                              const DecodeToCPUPipelineOptions &options);

/// Registers every mla pass and pipeline with the global registry.
void registerMLAPassesAndPipelines();

} // namespace mla

#endif // MLA_TRANSFORMS_PASSES_H

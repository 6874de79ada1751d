//===- Embedding.h - the mla compiler as a library --------------*- C++ -*-===//
//
// What an ML compiler needs to lower mla.decode inside its own IR: register
// the dialects, build the gfx950 pipeline (buildDecodeToGFX950Pipeline in
// mla/Transforms/Passes.h, configured by DecodePipelineOptions) into its own
// pass manager, and translate the lowered module to a code object and launch
// description in memory — or compile an mla.decode straight into a runtime
// artifact. Errors are MLIR diagnostics
// at the op or module concerned; nothing here exits or prints.
// docs/embedding.md walks through a consumer.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_COMPILER_EMBEDDING_H
#define MLA_COMPILER_EMBEDDING_H

#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Compiler/ArtifactCompiler.h"
#include "mla/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"

#include <string>
#include <vector>

namespace mla {

/// The mla dialect, every dialect the pipelines create, their external
/// interfaces (bufferization) and the LLVM IR translations.
void registerDialects(mlir::DialectRegistry &registry);

/// A context with the dialects of registerDialects loaded. Under TSan it
/// runs no thread pool: TSan cannot see the synchronization inside
/// Debian's uninstrumented libMLIR and reported its workers racing (the
/// concurrent-launch test's JIT, mla-compile making the tests' artifacts).
void prepareContext(mlir::MLIRContext &context);

/// Translates the gpu.module of a module lowered to the ROCDL level into a
/// code object, in memory.
mlir::FailureOr<CodeObject> translateToCodeObject(mlir::ModuleOp module);

/// Compiles the configuration of `op` (format, heads, widths, softmax
/// scale) into runtime artifact bytes with every form the target supports,
/// configured by `options` as the pipelines are (stopAt is ignored).
mlir::FailureOr<std::string>
compileDecodeArtifact(DecodeOp op, const DecodePipelineOptions &options = {});

} // namespace mla

#endif // MLA_COMPILER_EMBEDDING_H

//===- ArtifactCompiler.h - compile one configuration to an artifact -*- C++ -*-===//
//
// Builds every form of one mla.decode configuration the target supports —
// the gfx950 code object, the emu lane functions of the same kernels, the
// reference host function — and the launch metadata that ties the code
// object's kernarg layout to named, shaped arguments (docs/artifact.md).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_COMPILER_ARTIFACTCOMPILER_H
#define MLA_COMPILER_ARTIFACTCOMPILER_H

#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Runtime/Artifact.h"
#include "mla/Compiler/HostModule.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

namespace mla {

/// Which device forms to build (the reference form is always built).
struct ArtifactForms {
  /// The target's own code: the gfx950 code object, or sm_90a PTX.
  bool gfx950 = true;
  bool emu = true;
  /// Print the IR after every pass to stderr, the reference lowering too.
  bool printIR = false;
};

/// Compiles the user's `op` (a copy of it, so diagnostics point at its
/// location) into an artifact, every form with `config`. The gfx950 and emu
/// forms are built when asked for and the target has GPU kernels; the
/// reference form always, with the host `pipeline` (the split pipeline
/// takes `config` too).
llvm::Expected<Artifact> compileArtifact(DecodeOp op,
                                         const DecodePipelineOptions &config,
                                         HostPipeline pipeline,
                                         ArtifactForms forms = {});

/// The same for a decode known by its signature (mla-run --generate).
llvm::Expected<Artifact> compileArtifact(const KernelSignature &sig,
                                         ArtifactForms forms = {});

/// A code object (or PTX) and how to launch its kernels.
struct CodeObject {
  std::string chip;
  std::string hsaco;                   // ELF bytes, loadable by hipModuleLoadData
  std::string ptx;                     // PTX text, loadable by cuModuleLoadData
  std::vector<ArtifactKernel> kernels; // names, grids, blocks, kernarg layout
};

/// Translates the one gpu.module of a module lowered to the ROCDL level into
/// a code object with its launch description, in memory.
llvm::Expected<CodeObject> compileCodeObject(mlir::ModuleOp module);
/// The same for a module lowered to the NVVM level: PTX, whose kernel
/// parameters are the descriptor words, 8 bytes each.
llvm::Expected<CodeObject> compilePTX(mlir::ModuleOp module);

/// The configuration an mla.decode computes: cache format, heads, widths,
/// softmax scale. An error when the head count or width is dynamic.
llvm::Expected<KernelSignature> signatureOf(DecodeOp op);

} // namespace mla

#endif // MLA_COMPILER_ARTIFACTCOMPILER_H

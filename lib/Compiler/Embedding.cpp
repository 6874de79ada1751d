//===- Embedding.cpp - the mla compiler as a library ----------------------===//

#include "mla/Compiler/Embedding.h"

#include "mla/Support/StatusError.h"

#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

using namespace mla;

void mla::registerDialects(mlir::DialectRegistry &registry) {
  registry.insert<MLADialect>();
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  registerBufferizationInterfaces(registry);
  mlir::registerAllToLLVMIRTranslations(registry);
}

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MLA_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) && !defined(MLA_TSAN)
#define MLA_TSAN 1
#endif

void mla::prepareContext(mlir::MLIRContext &context) {
  mlir::DialectRegistry registry;
  registerDialects(registry);
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();
#ifdef MLA_TSAN
  // TSan cannot see the synchronization inside Debian's uninstrumented
  // libMLIR: its thread pool's workers are reported racing (the JIT
  // backends' contexts and mla-compile's alike, docs/reliability.md).
  context.disableMultithreading();
#endif
}

mlir::FailureOr<CodeObject> mla::translateToCodeObject(mlir::ModuleOp module) {
  auto codeObject = compileCodeObject(module);
  if (!codeObject) {
    std::string message;
    takeStatus(codeObject.takeError(), message);
    return module.emitError(message);
  }
  return std::move(*codeObject);
}

mlir::FailureOr<std::string>
mla::compileDecodeArtifact(DecodeOp op, const DecodePipelineOptions &options) {
  auto artifact = compileArtifact(op, options, HostPipeline::Decompose);
  if (!artifact) {
    std::string message;
    takeStatus(artifact.takeError(), message);
    return op.emitError(message);
  }
  return serializeArtifact(*artifact);
}

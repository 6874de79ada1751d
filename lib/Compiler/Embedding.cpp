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

void mla::prepareContext(mlir::MLIRContext &context) {
  mlir::DialectRegistry registry;
  registerDialects(registry);
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();
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

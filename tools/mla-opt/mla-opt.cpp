//===- mla-opt.cpp - the mla pass driver ----------------------------------===//
//
// mlir-opt with the mla dialect, every mla pass and pipeline, and the upstream
// dialects and passes the pipelines go through. An input with no IR in it is
// an error here (mlir-opt would silently print an empty module), so that a
// truncated or empty file in a build never passes unnoticed.
//
//===----------------------------------------------------------------------===//

#include "mla/Support/Version.h"
#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace mlir;

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  registerAllPasses();
  mla::registerMLAPassesAndPipelines();

  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registry.insert<mla::MLADialect>();
  mla::registerBufferizationInterfaces(registry);

  mla::setVersionPrinter("mla-opt");
  auto [inputFilename, outputFilename] =
      registerAndParseCLIOptions(argc, argv, "mla pass driver", registry);
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();

  std::string errorMessage;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(inputFilename, &errorMessage);
  if (!input) {
    llvm::WithColor::error(llvm::errs(), "mla-opt") << errorMessage << "\n";
    return 1;
  }
  if (input->getBuffer().find_first_not_of(" \t\r\n") == StringRef::npos) {
    llvm::WithColor::error(llvm::errs(), "mla-opt")
        << "input '" << inputFilename << "' holds no IR (empty file)\n";
    return 1;
  }
  auto output = openOutputFile(outputFilename, &errorMessage);
  if (!output) {
    llvm::WithColor::error(llvm::errs(), "mla-opt") << errorMessage << "\n";
    return 1;
  }
  if (failed(MlirOptMain(output->os(), std::move(input), registry, config)))
    return 1;
  output->keep();
  return 0;
}

//===- mla-compile.cpp - compile an mla.decode into an artifact -----------===//
//
// Reads a module holding one mla.decode, takes its configuration (cache
// format, heads, widths, softmax scale) and writes the artifact the runtime
// loads: the gfx950 code object, the emu form and the reference form with
// their launch metadata (docs/artifact.md).
//
//===----------------------------------------------------------------------===//

#include "mla/Support/Version.h"
#include "mla/Compiler/ArtifactCompiler.h"
#include "mla/Compiler/ConfigFlags.h"
#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Compiler/Embedding.h"
#include "mla/Support/PhaseLog.h"
#include "mla/Support/StatusError.h"
#include "mla/Target/KnownTargets.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/WithColor.h"

using namespace mla;
namespace cl = llvm::cl;

static cl::OptionCategory category("mla-compile options");
static cl::opt<std::string> inputPath(cl::Positional, cl::desc("<input.mlir>"),
                                      cl::Required, cl::cat(category));
static cl::opt<std::string> outputPath("o", cl::desc("Output artifact"),
                                       cl::value_desc("FILE"), cl::Required,
                                       cl::cat(category));
static ConfigFlags config(category);
static cl::opt<bool> noEmu("no-emu", cl::desc("Leave out the emu form"),
                           cl::cat(category));
static cl::opt<bool> noGFX950("no-gfx950",
                              cl::desc("Leave out the gfx950 code object"),
                              cl::cat(category));

static cl::opt<bool> verbose(
    "verbose",
    cl::desc("Print each phase with its time on stderr; on by default when "
             "stderr is a terminal"),
    cl::cat(category));

static PhaseLog phases("mla-compile");

static int fail(const llvm::Twine &msg) {
  phases.interrupt();
  llvm::WithColor::error(llvm::errs(), "mla-compile") << msg << "\n";
  return 1;
}

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  mla::setVersionPrinter("mla-compile");
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "mla-compile: compile one mla.decode into a runtime artifact\n");
  phases.enable(verbose);

  mlir::MLIRContext context;
  prepareContext(context);
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  auto file = llvm::MemoryBuffer::getFileOrSTDIN(inputPath);
  if (!file)
    return fail("cannot read '" + inputPath + "': " + file.getError().message());
  sourceMgr.AddNewSourceBuffer(std::move(*file), llvm::SMLoc());
  auto module = mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;
  llvm::SmallVector<DecodeOp> decodes;
  module->walk([&](DecodeOp op) { decodes.push_back(op); });
  if (decodes.size() != 1) {
    mlir::emitError(module->getLoc())
        << "an artifact holds one mla.decode configuration; the input has "
        << decodes.size();
    return 1;
  }
  DecodeOp op = decodes.front();
  DecodePipelineOptions options = config.options();
  ArtifactForms forms;
  forms.emu = !noEmu;
  forms.gfx950 = !noGFX950;
  auto artifact = [&] {
    auto phase = phases.phase(
        "compiling " + stringifyKVFormat(op.getKvFormat()) + " H=" +
        llvm::Twine(op.getNumHeads()) + " for " + options.target.getValue() +
        (forms.gfx950 ? " (gfx950 code object, " : " (") +
        (forms.emu ? "emu form, " : "") + "reference form)");
    return compileArtifact(op, options, HostPipeline::Decompose, forms);
  }();
  // The compiler's diagnostics name the line of the input they are about.
  if (!artifact) {
    std::string message;
    takeStatus(artifact.takeError(), message);
    return fail(message);
  }
  if ((forms.emu || forms.gfx950) && artifact->kernels.empty())
    llvm::WithColor::warning(llvm::errs(), "mla-compile")
        << "target '" << artifact->chip
        << "' has no gfx950 kernels: the artifact holds the reference form "
           "only\n";
  if (rt::Error err = writeArtifactFile(*artifact, outputPath))
    return fail(err.message());
  return 0;
}

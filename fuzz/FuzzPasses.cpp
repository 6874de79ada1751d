//===- FuzzPasses.cpp - the config and split passes on any valid module ---===//
//
// mla-opt runs its passes on whatever module parses and verifies: each
// must end in diagnostics, never a crash, on any of them (no mla op,
// several decodes, decodes nested in regions, odd shapes and configs).
// Dialects load as in mla-opt, on use, in a fresh context per input, so a
// pass that builds attributes of a dialect it does not declare is caught
// (mla-select-config did). The kernel builders are left out: a kernel
// takes too long for a fuzzing run.
//
//===----------------------------------------------------------------------===//

#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace {
/// The pipelines each verified input goes through (textual, as mla-opt
/// takes them).
constexpr const char *kPipelines[] = {
    "mla-select-config,mla-split-kv,mla-tile,mla-lower-combine",
    "mla-select-config{target=sm_90a splits=3},mla-split-kv",
    "mla-decompose",
};
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static bool registered = (mla::registerMLAPassesAndPipelines(), true);
  (void)registered;
  DialectRegistry registry;
  registry.insert<mla::MLADialect, func::FuncDialect, arith::ArithDialect,
                  scf::SCFDialect, tensor::TensorDialect>();
  // The lexer reads up to a terminating NUL, as every file buffer has.
  std::string text(reinterpret_cast<const char *>(data), size);
  for (const char *pipeline : kPipelines) {
    MLIRContext context(registry, MLIRContext::Threading::DISABLED);
    // Diagnostics are expected; printing them would only slow the search.
    ScopedDiagnosticHandler quiet(&context,
                                  [](Diagnostic &) { return success(); });
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(text, ParserConfig(&context));
    if (!module || failed(verify(*module)))
      return 0;
    PassManager pm(&context);
    if (failed(parsePassPipeline(pipeline, pm)))
      __builtin_trap(); // the harness's own pipelines must parse
    (void)pm.run(*module);
  }
  return 0;
}

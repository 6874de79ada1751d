//===- FuzzMlir.cpp - the MLIR parser and the mla verifiers ---------------===//
//
// mla-opt, mla-compile and the embedding API take MLIR text from users:
// any text must parse into a module that verifies, or give diagnostics —
// never crash in the dialect's parsers (#mla.config, #mla.target, the ops'
// custom syntax) or verifiers. Seeds are the dialect's tests and examples;
// mlir.dict holds its keywords.
//
//===----------------------------------------------------------------------===//

#include "mla/Dialect/MLA/IR/MLADialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

using namespace mlir;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static MLIRContext *context = [] {
    DialectRegistry registry;
    registry.insert<mla::MLADialect, func::FuncDialect, arith::ArithDialect,
                    tensor::TensorDialect>();
    auto *ctx = new MLIRContext(registry, MLIRContext::Threading::DISABLED);
    ctx->loadAllAvailableDialects();
    // Diagnostics are expected; printing them would only slow the search.
    ctx->getDiagEngine().registerHandler([](Diagnostic &) { return success(); });
    return ctx;
  }();
  ParserConfig config(context);
  // The lexer reads up to a terminating NUL, as every file buffer has.
  std::string text(reinterpret_cast<const char *>(data), size);
  OwningOpRef<Operation *> op = parseSourceString(text, config);
  if (op)
    (void)verify(*op);
  return 0;
}

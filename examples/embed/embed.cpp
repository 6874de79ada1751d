//===- embed.cpp - lower mla.decode inside a compiler's own module --------===//
//
// What an ML compiler does with the installed package: it builds its own
// function around an mla.decode (here a softmax-temperature op before it and
// a call to its own runtime hook after it), lowers the module with the
// gfx950 pipeline in its own pass manager, takes the code object from memory,
// and runs the same decode on the emu backend through the runtime.
//
// Usage: embed-decode OUT_DIR   (writes OUT_DIR/decode.hsaco)
//
//===----------------------------------------------------------------------===//

#include "mla/Compiler/Embedding.h"
#include "mla/Tools/Problem.h"
#include "mla/Tools/Reference.h"
#include "mla/runtime.hpp"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>

using namespace mlir;

/// func @attention_decode(q, kv, scale, qo_indptr, kv_indptr) -> (out, lse):
/// the consumer's own ops around one mla.decode.
static OwningOpRef<ModuleOp> buildModule(MLIRContext &ctx) {
  OpBuilder b(&ctx);
  Location loc = b.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  int64_t dyn = ShapedType::kDynamic;
  auto qType = RankedTensorType::get({dyn, 16, 576}, b.getBF16Type());
  auto kvType =
      RankedTensorType::get({dyn, 576}, b.getType<Float8E4M3FNType>());
  auto scaleType = RankedTensorType::get({1}, b.getF32Type());
  auto indptrType = RankedTensorType::get({dyn}, b.getI32Type());
  auto outType = RankedTensorType::get({dyn, 16, 512}, b.getBF16Type());
  auto lseType = RankedTensorType::get({dyn, 16}, b.getF32Type());

  // The consumer's runtime hook, called with the log-sum-exp.
  auto hook = func::FuncOp::create(b, loc, "record_lse",
                                   b.getFunctionType({lseType}, {}));
  hook.setPrivate();
  auto fn = func::FuncOp::create(
      b, loc, "attention_decode",
      b.getFunctionType({qType, kvType, scaleType, indptrType, indptrType},
                        {outType, lseType}));
  Block *body = fn.addEntryBlock();
  b.setInsertionPointToStart(body);
  // A temperature on the per-tensor KV scale: the consumer's own op.
  Value temperature = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(scaleType, b.getF32FloatAttr(1.0f)));
  Value scale = arith::MulFOp::create(b, loc, body->getArgument(2), temperature);
  auto decode = mla::DecodeOp::create(
      b, loc, outType, lseType, body->getArgument(0),
      body->getArgument(1), body->getArgument(3), body->getArgument(4), scale,
      mla::KVFormatAttr::get(&ctx, mla::KVFormat::fp8),
      b.getI64IntegerAttr(512), FloatAttr());
  func::CallOp::create(b, loc, hook, ValueRange{decode.getResult(1)});
  func::ReturnOp::create(b, loc, decode.getResults());
  return module;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 1;
  }
  DialectRegistry registry;
  mla::registerDialects(registry);
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();

  OwningOpRef<ModuleOp> module = buildModule(ctx);
  if (failed(verify(*module)))
    return 1;
  OwningOpRef<ModuleOp> original = module->clone();

  // Our pass manager, with the gfx950 pipeline in it.
  PassManager pm(&ctx);
  mla::DecodePipelineOptions options;
  options.target = "gfx950";
  mla::buildDecodeToGFX950Pipeline(pm, options);
  if (failed(pm.run(*module)))
    return 1;

  // The consumer's ops are still there, untouched, around the lowered decode.
  int muls = 0, calls = 0;
  module->walk([&](arith::MulFOp) { ++muls; });
  module->walk([&](func::CallOp call) { calls += call.getCallee() == "record_lse"; });
  llvm::outs() << "consumer ops after the pipeline: arith.mulf " << muls
               << ", call @record_lse " << calls << "\n";
  if (muls != 1 || calls != 1)
    return 1;

  // The code object, in memory.
  FailureOr<mla::CodeObject> codeObject = mla::translateToCodeObject(*module);
  if (failed(codeObject))
    return 1;
  llvm::outs() << "code object for " << codeObject->chip << ": "
               << codeObject->hsaco.size() << " bytes\n";
  for (const mla::ArtifactKernel &kernel : codeObject->kernels)
    llvm::outs() << "  kernel " << kernel.name << " block " << kernel.block[0]
                 << " lds " << kernel.ldsBytes << " B, kernarg "
                 << kernel.kernargBytes << " B, grid (" << kernel.grid[0]
                 << ", " << kernel.grid[1] << ", " << kernel.grid[2] << ")\n";
  std::string error;
  std::string path = std::string(argv[1]) + "/decode.hsaco";
  auto file = openOutputFile(path, &error);
  if (!file) {
    llvm::errs() << error << "\n";
    return 1;
  }
  file->os() << codeObject->hsaco;
  file->keep();

  // The same decode on the emu backend, through the runtime.
  mla::DecodeOp decode;
  original->walk([&](mla::DecodeOp op) { decode = op; });
  FailureOr<std::string> artifact = mla::compileDecodeArtifact(decode);
  if (failed(artifact))
    return 1;
  mla::GenerateOptions gen;
  gen.format = mla::CacheFormat::FP8;
  gen.kvLens = {200, 33, 520};
  gen.qLen = 2;
  auto problem = mla::generateProblem(gen);
  if (!problem) {
    llvm::errs() << llvm::toString(problem.takeError()) << "\n";
    return 1;
  }
  try {
    namespace rt = mla::runtime;
    rt::Context context(MLA_BACKEND_EMU);
    rt::Kernel kernel =
        rt::Kernel::fromMemory(context, artifact->data(), artifact->size());
    rt::Plan plan(kernel, problem->qoIndptr, problem->kvIndptr);
    mla_plan_info info = plan.info();
    std::vector<uint8_t> workList = plan.workList();
    std::vector<uint8_t> workspace(info.workspace_bytes);
    std::vector<uint16_t> out(problem->numTokens * 16 * 512);
    std::vector<float> lse(problem->numTokens * 16);
    mla_decode_args args{};
    args.q = problem->q.data();
    args.kv = problem->kv.data();
    args.kv_scale = &problem->fp8Scale;
    args.qo_indptr = problem->qoIndptr.data();
    args.kv_indptr = problem->kvIndptr.data();
    args.work_list = workList.data();
    args.out = out.data();
    args.lse = lse.data();
    args.workspace = workspace.data();
    args.workspace_bytes = workspace.size();
    args.num_seqs = info.num_seqs;
    args.num_tokens = info.num_tokens;
    args.num_kv_rows = info.num_kv_rows;
    rt::launch(kernel, plan, args); // emu memory is host memory
    context.synchronize();

    mla::Tolerance tol = mla::defaultTolerance(mla::CacheFormat::FP8);
    tol.maxRelErr = 5e-3;
    mla::ErrorReport report = mla::compareWithReference(
        mla::referenceDecode(*problem), out, lse, tol);
    llvm::outs() << llvm::format("emu: rel_err=%.3e lse_max_abs_err=%.3e\n",
                                 report.relErr, report.lseMaxAbsErr);
    bool pass = report.passed(tol);
    llvm::outs() << (pass ? "PASS" : "FAIL") << "\n";
    return pass ? 0 : 2;
  } catch (const mla::runtime::Error &e) {
    llvm::errs() << "runtime: " << e.what() << "\n";
    return 1;
  }
}

//===- LowerMathToNVVM.cpp - f32 math ops -> NVPTX approximations ---------===//
//
// See the pass description (Passes.td): exp2/exp/log2/log/fma on f32 become
// the NVPTX instructions directly, so no libdevice is needed.
//
//===----------------------------------------------------------------------===//

#include "mla/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mla {
#define GEN_PASS_DEF_MLALOWERMATHTONVVMPASS
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;

namespace {
constexpr double kLog2E = 1.4426950408889634, kLn2 = 0.6931471805599453;

Value intrinsic(PatternRewriter &rewriter, Location loc, StringRef name,
                Value x) {
  return LLVM::CallIntrinsicOp::create(rewriter, loc, x.getType(),
                                       rewriter.getStringAttr(name),
                                       ValueRange{x})
      .getResult(0);
}

Value scaled(PatternRewriter &rewriter, Location loc, Value x, double c) {
  Value k = arith::ConstantOp::create(rewriter, loc, rewriter.getF32FloatAttr(c));
  return arith::MulFOp::create(rewriter, loc, x, k);
}

/// `op` (f32 only) becomes `build(operand)`.
template <typename Op>
struct F32Rewrite : OpRewritePattern<Op> {
  using Build = Value (*)(PatternRewriter &, Location, Value);
  F32Rewrite(MLIRContext *ctx, Build build)
      : OpRewritePattern<Op>(ctx), build(build) {}
  LogicalResult matchAndRewrite(Op op,
                                PatternRewriter &rewriter) const override {
    if (!op.getType().isF32())
      return failure();
    rewriter.replaceOp(op, build(rewriter, op.getLoc(), op.getOperand()));
    return success();
  }
  Build build;
};

Value exp2(PatternRewriter &r, Location loc, Value x) {
  return intrinsic(r, loc, "llvm.nvvm.ex2.approx.ftz.f32", x);
}
Value exp(PatternRewriter &r, Location loc, Value x) {
  return exp2(r, loc, scaled(r, loc, x, kLog2E));
}
Value log2(PatternRewriter &r, Location loc, Value x) {
  return intrinsic(r, loc, "llvm.nvvm.lg2.approx.ftz.f", x);
}
Value log(PatternRewriter &r, Location loc, Value x) {
  return scaled(r, loc, log2(r, loc, x), kLn2);
}

struct FmaRewrite : OpRewritePattern<math::FmaOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::FmaOp op,
                                PatternRewriter &rewriter) const override {
    if (!getElementTypeOrSelf(op.getType()).isF32())
      return failure();
    auto contract = arith::FastMathFlags::contract;
    Value product = arith::MulFOp::create(rewriter, op.getLoc(), op.getA(),
                                          op.getB(), contract);
    rewriter.replaceOpWithNewOp<arith::AddFOp>(op, product, op.getC(),
                                               contract);
    return success();
  }
};

struct MLALowerMathToNVVMPass
    : public mla::impl::MLALowerMathToNVVMPassBase<MLALowerMathToNVVMPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    RewritePatternSet patterns(ctx);
    patterns.add<F32Rewrite<math::Exp2Op>>(ctx, exp2);
    patterns.add<F32Rewrite<math::ExpOp>>(ctx, exp);
    patterns.add<F32Rewrite<math::Log2Op>>(ctx, log2);
    patterns.add<F32Rewrite<math::LogOp>>(ctx, log);
    patterns.add<FmaRewrite>(ctx);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace

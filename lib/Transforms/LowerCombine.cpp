//===- LowerCombine.cpp - mla.combine -> upstream ops ---------------------===//
//
// The lse-weighted merge of each sequence's work items, as linalg reductions
// over the sequence's partial slots. Items that saw nothing carry lse = -inf
// and weigh exactly 0; a token whose items all saw nothing gets zeros / -inf.
//
//===----------------------------------------------------------------------===//

#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Transforms/Passes.h"

#include "InputLevel.h"
#include "LoweringBuilder.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"

namespace mla {
#define GEN_PASS_DEF_MLALOWERCOMBINEPASS
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

namespace {
class CombineLowering : public LoweringBuilder {
public:
  CombineLowering(CombineOp op, OpBuilder &b)
      : LoweringBuilder(b, op.getLoc()), op(op) {
    auto partialOut = op.getPartialOut().getType();
    numHeads = partialOut.getDimSize(2);
    vDim = partialOut.getDimSize(3);
  }

  SmallVector<Value> run() {
    Type bf16 = b.getBF16Type();
    bool withLse = static_cast<bool>(op.getLse());
    Value c1 = cIndex(1);
    OpFoldResult heads = attr(numHeads), dv = attr(vDim);
    OpFoldResult numTokens =
        dimOf(op.getOut().getType(), 0, op.getNumTokens());
    SmallVector<Value> inits = {filled(
        {numTokens, heads, dv}, bf16,
        arith::ConstantOp::create(b, loc, b.getFloatAttr(bf16, 0.0)))};
    if (withLse)
      inits.push_back(filled({numTokens, heads}, f32, cF32(kNegInf)));
    Value numSeqs = arith::SubIOp::create(
        b, loc, tensor::DimOp::create(b, loc, op.getQoIndptr(), cIndex(0)), c1);

    auto loop = scf::ForOp::create(
        b, loc, cIndex(0), numSeqs, c1, inits,
        [&](OpBuilder &lb, Location, Value seq, ValueRange carried) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(lb.getInsertionBlock());
          Value next = arith::AddIOp::create(b, loc, seq, c1);
          Value firstItem = loadIndex(op.getItemIndptr(), seq);
          Value numItems = arith::SubIOp::create(
              b, loc, loadIndex(op.getItemIndptr(), next), firstItem);
          Value qBegin = loadIndex(op.getQoIndptr(), seq);
          Value qLen = arith::SubIOp::create(
              b, loc, loadIndex(op.getQoIndptr(), next), qBegin);
          Value outs = slice(op.getPartialOut(),
                             {firstItem, attr(0), attr(0), attr(0)},
                             {numItems, qLen, heads, dv});
          Value lses = slice(op.getPartialLse(), {firstItem, attr(0), attr(0)},
                             {numItems, qLen, heads});

          // Loops (t, h, j) over the sequence's items j.
          AffineMap lseMap = map(3, {2, 0, 1});
          Value maxLse =
              rowMax(lses, filled({qLen, heads}, f32, cF32(kNegInf)), lseMap);
          // w_j = exp(lse_j - m), laid out [j, t, h] like the partials.
          AffineMap id3 = identity(3), maxMap = map(3, {1, 2});
          Value weights = generic(
              empty({numItems, qLen, heads}, f32), {lses, maxLse},
              {id3, maxMap, id3}, {kPar, kPar, kPar},
              [&](OpBuilder &nb, Location nl, ValueRange a) {
                Value shift = guardedShift(nb, nl, a[1]);
                linalg::YieldOp::create(
                    nb, nl,
                    ValueRange{math::ExpOp::create(
                        nb, nl, arith::SubFOp::create(nb, nl, a[0], shift))});
              });
          Value weightSum =
              rowSum(weights, filled({qLen, heads}, f32, cF32(0.0)), lseMap);
          // Loops (t, h, j, e): sum_j w_j * out_j.
          Value merged = generic(
              filled({qLen, heads, dv}, f32, cF32(0.0)), {weights, outs},
              {map(4, {2, 0, 1}), map(4, {2, 0, 1, 3}), map(4, {0, 1, 3})},
              {kPar, kPar, kRed, kPar},
              [&](OpBuilder &nb, Location nl, ValueRange a) {
                Value prod = arith::MulFOp::create(nb, nl, a[0], a[1]);
                linalg::YieldOp::create(
                    nb, nl,
                    ValueRange{arith::AddFOp::create(nb, nl, a[2], prod)});
              });
          Value outTile = normalize(merged, weightSum, {qLen, heads, dv}, bf16);
          SmallVector<Value> results = {
              insert(outTile, carried[0], {qBegin, attr(0), attr(0)},
                     {qLen, heads, dv})};
          if (withLse)
            results.push_back(insert(logSumExp(maxLse, weightSum, {qLen, heads}),
                                     carried[1], {qBegin, attr(0)},
                                     {qLen, heads}));
          scf::YieldOp::create(b, loc, results);
        });
    return SmallVector<Value>(loop.getResults());
  }

private:
  CombineOp op;
  int64_t numHeads, vDim;
};

struct MLALowerCombinePass
    : public mla::impl::MLALowerCombinePassBase<MLALowerCombinePass> {
  void runOnOperation() override {
    if (failed(requireSplitLevel(getOperation(), getArgument())))
      return signalPassFailure();
    SmallVector<CombineOp> ops;
    getOperation()->walk([&](CombineOp op) { ops.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (CombineOp op : ops) {
      rewriter.setInsertionPoint(op);
      rewriter.replaceOp(op, CombineLowering(op, rewriter).run());
    }
  }
};
} // namespace

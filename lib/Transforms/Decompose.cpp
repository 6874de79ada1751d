//===- Decompose.cpp - mla.decode -> upstream ops -------------------------===//
//
// The reference lowering of `mla.decode` used by the cpu backend: a loop over
// sequences, and per sequence plain linalg ops for dequantization, Q·Kᵀ,
// causal mask, softmax and P·V. It is written for clarity, not speed: it
// materializes the whole score matrix of a sequence. The GPU path tiles and
// splits instead (mla-split-kv and later passes).
//
//===----------------------------------------------------------------------===//

#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Transforms/Passes.h"

#include "KVDecoding.h"
#include "LoweringBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

#include <limits>

namespace mla {
#define GEN_PASS_DEF_MLADECOMPOSEPASS
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

namespace {
/// Emits the op-by-op decomposition of one mla.decode.
class DecodeDecomposer : public LoweringBuilder {
public:
  DecodeDecomposer(DecodeOp op, OpBuilder &b)
      : LoweringBuilder(b, op.getLoc()), op(op), numHeads(op.getNumHeads()),
        qkDim(op.getQKHeadDim()), vDim(op.getVHeadDim()) {}

  /// Returns the replacement values for the op's results.
  SmallVector<Value> run();

private:
  /// Dequantizes `kvLen` cache rows starting at `kvBegin` to f32 [kvLen, Dqk].
  Value dequantizeRows(Value kvBegin, Value kvLen);

  DecodeOp op;
  int64_t numHeads, qkDim, vDim;
};

Value DecodeDecomposer::dequantizeRows(Value kvBegin, Value kvLen) {
  int64_t rowWidth = op.getKv().getType().getDimSize(1);
  SmallVector<OpFoldResult> offsets = {kvBegin, b.getIndexAttr(0)};
  SmallVector<OpFoldResult> strides(2, b.getIndexAttr(1));
  Value rows = tensor::ExtractSliceOp::create(
      b, loc, op.getKv(), offsets, {kvLen, b.getIndexAttr(rowWidth)}, strides);
  Value init = tensor::EmptyOp::create(
      b, loc, ArrayRef<OpFoldResult>{kvLen, b.getIndexAttr(qkDim)}, f32);
  KVDecoder decoder(b, loc, op.getKvFormat(), op.getKvScale());
  AffineMap id = b.getMultiDimIdentityMap(2);
  if (op.getKvFormat() != KVFormat::mxfp4)
    return generic(init, rows, {id, id}, {kPar, kPar},
                   [&](OpBuilder &nb, Location nl, ValueRange args) {
                     linalg::YieldOp::create(
                         nb, nl, decoder.decode(nb, nl, args[0], {}, {}));
                   });
  // Element (p, j) lives in byte j/2 of row p and is scaled by block j/32.
  Value scales = tensor::ExtractSliceOp::create(
      b, loc, op.getKvScale(), offsets, {kvLen, b.getIndexAttr(qkDim / 32)},
      strides);
  AffineExpr p = b.getAffineDimExpr(0), j = b.getAffineDimExpr(1);
  AffineMap byteMap = AffineMap::get(2, 0, {p, j.floorDiv(2)}, b.getContext());
  AffineMap scaleMap = AffineMap::get(2, 0, {p, j.floorDiv(32)}, b.getContext());
  return generic(init, ValueRange{rows, scales}, {byteMap, scaleMap, id},
                 {kPar, kPar}, [&](OpBuilder &nb, Location nl, ValueRange args) {
                   Value col = linalg::IndexOp::create(nb, nl, 1);
                   linalg::YieldOp::create(
                       nb, nl, decoder.decode(nb, nl, args[0], args[1], col));
                 });
}

SmallVector<Value> DecodeDecomposer::run() {
  Type bf16 = b.getBF16Type();
  bool withLse = static_cast<bool>(op.getLse());
  Value q = op.getQ();
  Value c0 = cIndex(0), c1 = cIndex(1);
  const double negInf = kNegInf;
  Value numTokens = tensor::DimOp::create(b, loc, q, 0);
  OpFoldResult heads = b.getIndexAttr(numHeads);

  // Tokens outside every sequence keep zeros / -inf, like empty sequences.
  SmallVector<Value> inits = {
      filled({numTokens, heads, b.getIndexAttr(vDim)}, bf16,
             arith::ConstantOp::create(b, loc, b.getFloatAttr(bf16, 0.0)))};
  if (withLse)
    inits.push_back(filled({numTokens, heads}, f32, cF32(negInf)));

  Value numSeqs = arith::SubIOp::create(
      b, loc, tensor::DimOp::create(b, loc, op.getQoIndptr(), 0), c1);
  double smScale = op.getEffectiveSmScale();

  auto loop = scf::ForOp::create(
      b, loc, c0, numSeqs, c1, inits,
      [&](OpBuilder &lb, Location, Value seq, ValueRange iterArgs) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(lb.getInsertionBlock());
        Value next = arith::AddIOp::create(b, loc, seq, c1);
        Value qBegin = loadIndex(op.getQoIndptr(), seq);
        Value qLen = arith::SubIOp::create(
            b, loc, loadIndex(op.getQoIndptr(), next), qBegin);
        Value kvBegin = loadIndex(op.getKvIndptr(), seq);
        Value kvLen = arith::SubIOp::create(
            b, loc, loadIndex(op.getKvIndptr(), next), kvBegin);

        Value qRows = tensor::ExtractSliceOp::create(
            b, loc, q,
            ArrayRef<OpFoldResult>{qBegin, b.getIndexAttr(0), b.getIndexAttr(0)},
            ArrayRef<OpFoldResult>{qLen, heads, b.getIndexAttr(qkDim)},
            SmallVector<OpFoldResult>(3, b.getIndexAttr(1)));
        Value keys = dequantizeRows(kvBegin, kvLen);

        // Scores s[t, h, p] = sum_d q[t, h, d] * k[p, d], loops (t, h, p, d).
        Value scores = generic(
            filled({qLen, heads, kvLen}, f32, cF32(0.0)), {qRows, keys},
            {map(4, {0, 1, 3}), map(4, {2, 3}), map(4, {0, 1, 2})},
            {kPar, kPar, kPar, kRed},
            [&](OpBuilder &nb, Location nl, ValueRange a) {
              Value qv = arith::ExtFOp::create(nb, nl, f32, a[0]);
              Value prod = arith::MulFOp::create(nb, nl, qv, a[1]);
              linalg::YieldOp::create(
                  nb, nl, ValueRange{arith::AddFOp::create(nb, nl, a[2], prod)});
            });

        // Scale and causal mask: token t sees p < kv_len - (q_len - 1 - t).
        AffineMap id3 = b.getMultiDimIdentityMap(3);
        Value visibleEnd = arith::SubIOp::create(
            b, loc, kvLen, arith::SubIOp::create(b, loc, qLen, c1));
        Value scale = cF32(smScale), ninf = cF32(negInf);
        Value masked = generic(
            scores, ValueRange{}, {id3}, {kPar, kPar, kPar},
            [&](OpBuilder &nb, Location nl, ValueRange a) {
              Value t = linalg::IndexOp::create(nb, nl, 0);
              Value p = linalg::IndexOp::create(nb, nl, 2);
              Value end = arith::AddIOp::create(nb, nl, visibleEnd, t);
              Value visible = arith::CmpIOp::create(
                  nb, nl, arith::CmpIPredicate::slt, p, end);
              Value s = arith::MulFOp::create(nb, nl, a[0], scale);
              linalg::YieldOp::create(
                  nb, nl,
                  ValueRange{arith::SelectOp::create(nb, nl, visible, s, ninf)});
            });

        // Row max; a fully masked row has max -inf and is shifted by 0 so that
        // exp gives 0 instead of exp(-inf - -inf) = NaN.
        AffineMap rowMap = map(3, {0, 1});
        Value rowMax = generic(
            filled({qLen, heads}, f32, ninf), masked, {id3, rowMap},
            {kPar, kPar, kRed}, [&](OpBuilder &nb, Location nl, ValueRange a) {
              linalg::YieldOp::create(
                  nb, nl,
                  ValueRange{arith::MaximumFOp::create(nb, nl, a[0], a[1])});
            });
        Value probs = generic(
            masked, rowMax, {rowMap, id3}, {kPar, kPar, kPar},
            [&](OpBuilder &nb, Location nl, ValueRange a) {
              Value shift = guardedShift(nb, nl, a[0]);
              Value e = math::ExpOp::create(
                  nb, nl, arith::SubFOp::create(nb, nl, a[1], shift));
              linalg::YieldOp::create(nb, nl, e);
            });
        // The row sum accumulates in f64: over tens of thousands of positions
        // an f32 running sum drifts by ~1e-4 in the lse.
        Type f64 = b.getF64Type();
        Value rowSum = generic(
            filled({qLen, heads}, f64,
                   arith::ConstantOp::create(b, loc, b.getF64FloatAttr(0.0))),
            probs, {id3, rowMap}, {kPar, kPar, kRed},
            [&](OpBuilder &nb, Location nl, ValueRange a) {
              Value p64 = arith::ExtFOp::create(nb, nl, f64, a[0]);
              linalg::YieldOp::create(
                  nb, nl, ValueRange{arith::AddFOp::create(nb, nl, p64, a[1])});
            });

        // o[t, h, e] = sum_p p[t, h, p] * v[p, e], v = first Dv key columns;
        // loops (t, h, p, e) keep the innermost access contiguous.
        Value values = tensor::ExtractSliceOp::create(
            b, loc, keys, ArrayRef<OpFoldResult>{b.getIndexAttr(0), b.getIndexAttr(0)},
            ArrayRef<OpFoldResult>{kvLen, b.getIndexAttr(vDim)},
            SmallVector<OpFoldResult>(2, b.getIndexAttr(1)));
        Value acc = generic(
            filled({qLen, heads, b.getIndexAttr(vDim)}, f32, cF32(0.0)),
            {probs, values},
            {map(4, {0, 1, 2}), map(4, {2, 3}), map(4, {0, 1, 3})},
            {kPar, kPar, kRed, kPar},
            [&](OpBuilder &nb, Location nl, ValueRange a) {
              Value prod = arith::MulFOp::create(nb, nl, a[0], a[1]);
              linalg::YieldOp::create(
                  nb, nl, ValueRange{arith::AddFOp::create(nb, nl, a[2], prod)});
            });

        // Normalize; a row that saw nothing has sum 0 and yields 0.
        Value outTile = generic(
            tensor::EmptyOp::create(
                b, loc,
                ArrayRef<OpFoldResult>{qLen, heads, b.getIndexAttr(vDim)}, bf16),
            {acc, rowSum}, {id3, rowMap, id3}, {kPar, kPar, kPar},
            [&](OpBuilder &nb, Location nl, ValueRange a) {
              Value zero =
                  arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(0.0));
              Value sum = arith::TruncFOp::create(nb, nl, f32, a[1]);
              Value isEmpty = arith::CmpFOp::create(
                  nb, nl, arith::CmpFPredicate::OEQ, sum, zero);
              Value o = arith::SelectOp::create(
                  nb, nl, isEmpty, zero,
                  arith::DivFOp::create(nb, nl, a[0], sum));
              linalg::YieldOp::create(
                  nb, nl, ValueRange{arith::TruncFOp::create(nb, nl, bf16, o)});
            });

        SmallVector<Value> results;
        results.push_back(tensor::InsertSliceOp::create(
            b, loc, outTile, iterArgs[0],
            ArrayRef<OpFoldResult>{qBegin, b.getIndexAttr(0), b.getIndexAttr(0)},
            ArrayRef<OpFoldResult>{qLen, heads, b.getIndexAttr(vDim)},
            SmallVector<OpFoldResult>(3, b.getIndexAttr(1))));
        if (withLse) {
          AffineMap id2 = b.getMultiDimIdentityMap(2);
          Value lseTile = generic(
              tensor::EmptyOp::create(b, loc,
                                      ArrayRef<OpFoldResult>{qLen, heads}, f32),
              {rowMax, rowSum}, {id2, id2, id2}, {kPar, kPar},
              [&](OpBuilder &nb, Location nl, ValueRange a) {
                Value zero =
                    arith::ConstantOp::create(nb, nl, nb.getF64FloatAttr(0.0));
                Value isEmpty = arith::CmpFOp::create(
                    nb, nl, arith::CmpFPredicate::OEQ, a[1], zero);
                Value l64 = arith::AddFOp::create(
                    nb, nl, math::LogOp::create(nb, nl, a[1]),
                    arith::ExtFOp::create(nb, nl, f64, a[0]));
                Value l = arith::TruncFOp::create(nb, nl, f32, l64);
                Value minusInf = arith::ConstantOp::create(
                    nb, nl, nb.getF32FloatAttr(negInf));
                linalg::YieldOp::create(
                    nb, nl,
                    ValueRange{arith::SelectOp::create(nb, nl, isEmpty, minusInf, l)});
              });
          results.push_back(tensor::InsertSliceOp::create(
              b, loc, lseTile, iterArgs[1],
              ArrayRef<OpFoldResult>{qBegin, b.getIndexAttr(0)},
              ArrayRef<OpFoldResult>{qLen, heads},
              SmallVector<OpFoldResult>(2, b.getIndexAttr(1))));
        }
        scf::YieldOp::create(b, loc, results);
      });
  return SmallVector<Value>(loop.getResults());
}

struct MLADecomposePass
    : public mla::impl::MLADecomposePassBase<MLADecomposePass> {
  void runOnOperation() override {
    SmallVector<DecodeOp> ops;
    getOperation()->walk([&](DecodeOp op) { ops.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (DecodeOp op : ops) {
      rewriter.setInsertionPoint(op);
      SmallVector<Value> replacements = DecodeDecomposer(op, rewriter).run();
      rewriter.replaceOp(op, replacements);
    }
  }
};
} // namespace

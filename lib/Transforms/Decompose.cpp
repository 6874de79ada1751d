//===- Decompose.cpp - mla.decode -> upstream ops -------------------------===//
//
// The reference lowering of `mla.decode` used by the cpu backend: a loop over
// sequences, and per sequence plain linalg ops for dequantization, Q·Kᵀ,
// causal mask, softmax and P·V. It is written for clarity, not speed: it
// materializes the whole score matrix of a sequence. The split level tiles
// instead (mla-split-kv, mla-tile).
//
//===----------------------------------------------------------------------===//

#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Transforms/Passes.h"

#include "CacheRows.h"
#include "KVDecoding.h"
#include "LoweringBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

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
  /// The same for the positions of a sequence in a paged cache.
  Value dequantizePages(const CacheRows &cache, Value first, Value kvLen);

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

Value DecodeDecomposer::dequantizePages(const CacheRows &cache, Value first,
                                        Value kvLen) {
  Value init = tensor::EmptyOp::create(
      b, loc, ArrayRef<OpFoldResult>{kvLen, b.getIndexAttr(qkDim)}, f32);
  KVDecoder decoder(b, loc, op.getKvFormat(), op.getKvScale());
  return generic(init, ValueRange{}, {b.getMultiDimIdentityMap(2)},
                 {kPar, kPar}, [&](OpBuilder &nb, Location nl, ValueRange) {
                   Value pos = linalg::IndexOp::create(nb, nl, 0);
                   Value col = linalg::IndexOp::create(nb, nl, 1);
                   Value row = cache.row(nb, nl, first, pos);
                   linalg::YieldOp::create(
                       nb, nl, cache.element(nb, nl, decoder, row, col));
                 });
}

SmallVector<Value> DecodeDecomposer::run() {
  Type bf16 = b.getBF16Type();
  bool withLse = static_cast<bool>(op.getLse());
  Value q = op.getQ();
  Value c0 = cIndex(0), c1 = cIndex(1);
  OpFoldResult numTokens = dimOf(op.getOut().getType(), 0,
                                 tensor::DimOp::create(b, loc, q, 0));
  OpFoldResult heads = attr(numHeads);

  // Tokens outside every sequence keep zeros / -inf, like empty sequences.
  SmallVector<Value> inits = {
      filled({numTokens, heads, attr(vDim)}, bf16,
             arith::ConstantOp::create(b, loc, b.getFloatAttr(bf16, 0.0)))};
  if (withLse)
    inits.push_back(filled({numTokens, heads}, f32, cF32(kNegInf)));

  Value numSeqs = arith::SubIOp::create(
      b, loc, tensor::DimOp::create(b, loc, op.getQoIndptr(), 0), c1);
  double smScale = op.getEffectiveSmScale();
  CacheRows cache(b, loc, op);

  auto loop = scf::ForOp::create(
      b, loc, c0, numSeqs, c1, inits,
      [&](OpBuilder &lb, Location, Value seq, ValueRange iterArgs) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(lb.getInsertionBlock());
        Value next = arith::AddIOp::create(b, loc, seq, c1);
        Value qBegin = loadIndex(op.getQoIndptr(), seq);
        Value qLen = arith::SubIOp::create(
            b, loc, loadIndex(op.getQoIndptr(), next), qBegin);
        CacheRows::Sequence sequence = cache.sequence(b, loc, seq);
        Value kvBegin = sequence.first, kvLen = sequence.length;

        Value qRows = slice(q, {qBegin, attr(0), attr(0)},
                            {qLen, heads, attr(qkDim)});
        Value keys = cache.paged() ? dequantizePages(cache, kvBegin, kvLen)
                                   : dequantizeRows(kvBegin, kvLen);

        Value scores = qkScores(qRows, keys, {qLen, heads, kvLen});

        // Scale and causal mask: token t sees p < kv_len - (q_len - 1 - t).
        Value visibleEnd = arith::SubIOp::create(
            b, loc, kvLen, arith::SubIOp::create(b, loc, qLen, c1));
        Value scale = cF32(smScale), ninf = cF32(kNegInf);
        Value masked = generic(
            scores, ValueRange{}, {identity(3)}, {kPar, kPar, kPar},
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

        // A fully masked row has max -inf and is shifted by 0 (no NaN). The
        // row sum accumulates in f64: over tens of thousands of positions an
        // f32 running sum drifts by ~1e-4 in the lse.
        Value max = rowMax(masked, filled({qLen, heads}, f32, ninf));
        Value probs = expShifted(masked, max);
        Type f64 = b.getF64Type();
        Value sum = rowSum(
            probs, filled({qLen, heads}, f64,
                          arith::ConstantOp::create(b, loc,
                                                    b.getF64FloatAttr(0.0))));

        // Values are the first Dv columns of the dequantized rows.
        Value values = slice(keys, {attr(0), attr(0)}, {kvLen, attr(vDim)});
        Value acc = pvAccumulate(
            probs, values,
            filled({qLen, heads, attr(vDim)}, f32, cF32(0.0)));
        Value outTile = normalize(acc, sum, {qLen, heads, attr(vDim)}, bf16);

        SmallVector<Value> results = {
            insert(outTile, iterArgs[0], {qBegin, attr(0), attr(0)},
                   {qLen, heads, attr(vDim)})};
        if (withLse)
          results.push_back(insert(logSumExp(max, sum, {qLen, heads}),
                                   iterArgs[1], {qBegin, attr(0)},
                                   {qLen, heads}));
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

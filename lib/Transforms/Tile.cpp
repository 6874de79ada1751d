//===- Tile.cpp - mla.partial_decode -> KV tiles with online softmax ------===//
//
// L2 -> loops: each work item walks its KV range in tiles of config.kv_tile
// rows with a running max, running sum and rescaled accumulator (online
// softmax), so no score row longer than a tile ever exists. Tiles have a
// static shape: the rows past the item's end are clamped on load and masked
// to -inf, which is also how the GPU kernel treats its tail tile.
//
//===----------------------------------------------------------------------===//

#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Transforms/Passes.h"

#include "CacheRows.h"
#include "InputLevel.h"
#include "KVDecoding.h"
#include "LoweringBuilder.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"

namespace mla {
#define GEN_PASS_DEF_MLATILEPASS
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

namespace {
class PartialDecodeTiler : public LoweringBuilder {
public:
  PartialDecodeTiler(PartialDecodeOp op, OpBuilder &b)
      : LoweringBuilder(b, op.getLoc()), op(op), numHeads(op.getNumHeads()),
        qkDim(op.getQKHeadDim()), vDim(op.getVHeadDim()),
        tile(op.getConfig().getKvTile()) {}

  SmallVector<Value> run();

private:
  /// One work item: its partial output [q_len, H, Dv] and lse [q_len, H].
  std::pair<Value, Value> emitItem(Value seq, Value begin, Value end,
                                   const CacheRows &cache,
                                   const KVDecoder &decoder);
  /// The f32 [tile, Dqk] tile of the sequence's positions `tileStart + p`,
  /// clamped to `lastPos` (the sequence's first row or page entry is
  /// `first`).
  Value gatherTile(const CacheRows &cache, Value first, Value tileStart,
                   Value lastPos, const KVDecoder &decoder);

  PartialDecodeOp op;
  int64_t numHeads, qkDim, vDim, tile;
};

Value PartialDecodeTiler::gatherTile(const CacheRows &cache, Value first,
                                     Value tileStart, Value lastPos,
                                     const KVDecoder &decoder) {
  return generic(
      empty({attr(tile), attr(qkDim)}, f32), ValueRange{}, {identity(2)},
      {kPar, kPar}, [&](OpBuilder &nb, Location nl, ValueRange) {
        Value p = linalg::IndexOp::create(nb, nl, 0);
        Value col = linalg::IndexOp::create(nb, nl, 1);
        Value pos = arith::MinSIOp::create(
            nb, nl, arith::AddIOp::create(nb, nl, tileStart, p), lastPos);
        Value row = cache.row(nb, nl, first, pos);
        linalg::YieldOp::create(nb, nl,
                                cache.element(nb, nl, decoder, row, col));
      });
}

std::pair<Value, Value>
PartialDecodeTiler::emitItem(Value seq, Value begin, Value end,
                             const CacheRows &cache,
                             const KVDecoder &decoder) {
  Value c1 = cIndex(1);
  Value next = arith::AddIOp::create(b, loc, seq, c1);
  Value qBegin = loadIndex(op.getQoIndptr(), seq);
  Value qLen = arith::SubIOp::create(
      b, loc, loadIndex(op.getQoIndptr(), next), qBegin);
  CacheRows::Sequence sequence = cache.sequence(b, loc, seq);
  Value first = sequence.first, kvLen = sequence.length;
  Value qRows = slice(op.getQ(), {qBegin, attr(0), attr(0)},
                      {qLen, attr(numHeads), attr(qkDim)});
  // Token t sees the positions before visibleEnd + t.
  Value visibleEnd = arith::SubIOp::create(
      b, loc, kvLen, arith::SubIOp::create(b, loc, qLen, c1));
  // The item's last position; an empty item runs no tile, so it is never
  // read.
  Value lastPos = arith::SubIOp::create(b, loc, end, c1);

  OpFoldResult heads = attr(numHeads);
  Type f64 = b.getF64Type();
  SmallVector<Value> inits = {
      filled({qLen, heads}, f32, cF32(kNegInf)),            // running max
      // The running sum is f64: over tens of thousands of rows an f32 sum
      // drifts by >1e-4 in the lse (measured at kv_len 32768, one item).
      filled({qLen, heads}, f64,
             arith::ConstantOp::create(b, loc, b.getF64FloatAttr(0.0))),
      filled({qLen, heads, attr(vDim)}, f32, cF32(0.0))};   // accumulator
  double smScale = op.getEffectiveSmScale();

  auto tileLoop = scf::ForOp::create(
      b, loc, begin, end, cIndex(tile), inits,
      [&](OpBuilder &lb, Location, Value tileStart, ValueRange carried) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(lb.getInsertionBlock());
        Value runMax = carried[0], runSum = carried[1], acc = carried[2];
        Value keys = gatherTile(cache, first, tileStart, lastPos, decoder);

        Value scores = qkScores(qRows, keys, {qLen, heads, attr(tile)});

        // Scale; mask the tail (pos >= end) and the causal future.
        Value scale = cF32(smScale), ninf = cF32(kNegInf);
        AffineMap id3 = identity(3), rowMap = map(3, {0, 1}), id2 = identity(2);
        Value masked = generic(
            scores, ValueRange{}, {id3}, {kPar, kPar, kPar},
            [&](OpBuilder &nb, Location nl, ValueRange a) {
              Value t = linalg::IndexOp::create(nb, nl, 0);
              Value p = linalg::IndexOp::create(nb, nl, 2);
              Value pos = arith::AddIOp::create(nb, nl, tileStart, p);
              Value inItem = arith::CmpIOp::create(
                  nb, nl, arith::CmpIPredicate::slt, pos, end);
              Value causal = arith::CmpIOp::create(
                  nb, nl, arith::CmpIPredicate::slt, pos,
                  arith::AddIOp::create(nb, nl, visibleEnd, t));
              Value visible = arith::AndIOp::create(nb, nl, inItem, causal);
              Value s = arith::MulFOp::create(nb, nl, a[0], scale);
              linalg::YieldOp::create(
                  nb, nl,
                  ValueRange{arith::SelectOp::create(nb, nl, visible, s, ninf)});
            });

        // m' = max(m, max_p s); a = exp(m - m'); p = exp(s - m').
        Value newMax = rowMax(masked, runMax);
        Value rescale = generic(
            empty({qLen, heads}, f32), {runMax, newMax}, {id2, id2, id2},
            {kPar, kPar}, [&](OpBuilder &nb, Location nl, ValueRange a) {
              Value shift = guardedShift(nb, nl, a[1]);
              linalg::YieldOp::create(
                  nb, nl,
                  ValueRange{math::ExpOp::create(
                      nb, nl, arith::SubFOp::create(nb, nl, a[0], shift))});
            });
        Value probs = expShifted(masked, newMax);

        // l' = a * l + sum_p p (in f64).
        Value scaledSum = generic(
            empty({qLen, heads}, f64), {runSum, rescale}, {id2, id2, id2},
            {kPar, kPar}, [&](OpBuilder &nb, Location nl, ValueRange a) {
              Value a64 = arith::ExtFOp::create(nb, nl, f64, a[1]);
              linalg::YieldOp::create(
                  nb, nl, ValueRange{arith::MulFOp::create(nb, nl, a[0], a64)});
            });
        Value newSum = rowSum(probs, scaledSum);

        // acc' = a * acc + p · V, V = the first Dv columns of the tile.
        Value scaledAcc = generic(
            acc, rescale, {rowMap, id3}, {kPar, kPar, kPar},
            [&](OpBuilder &nb, Location nl, ValueRange a) {
              linalg::YieldOp::create(
                  nb, nl, ValueRange{arith::MulFOp::create(nb, nl, a[1], a[0])});
            });
        Value values = slice(keys, {attr(0), attr(0)}, {attr(tile), attr(vDim)});
        Value newAcc = pvAccumulate(probs, values, scaledAcc);
        scf::YieldOp::create(b, loc, ValueRange{newMax, newSum, newAcc});
      });

  // out = acc / l and lse = m + log l; an item a token sees nothing of
  // (l = 0) gives zeros and -inf.
  Value runMax = tileLoop.getResult(0), runSum = tileLoop.getResult(1),
        acc = tileLoop.getResult(2);
  Value out = normalize(acc, runSum, {qLen, heads, attr(vDim)}, f32);
  Value lse = logSumExp(runMax, runSum, {qLen, heads});
  return {out, lse};
}

SmallVector<Value> PartialDecodeTiler::run() {
  Value items = op.getWorkItems();
  Value numItems = tensor::DimOp::create(b, loc, items, cIndex(0));
  OpFoldResult heads = attr(numHeads);
  OpFoldResult maxTokens = attr(kMaxQueryTokens);
  SmallVector<Value> inits = {
      filled({dimOf(op.getPartialOut().getType(), 0, numItems), maxTokens,
              heads, attr(vDim)},
             f32, cF32(0.0)),
      filled({dimOf(op.getPartialLse().getType(), 0, numItems), maxTokens,
              heads},
             f32, cF32(kNegInf))};
  // Decode tables are built once, outside every loop.
  KVDecoder decoder(b, loc, op.getKvFormat(), op.getKvScale());
  CacheRows cache(b, loc, op);

  auto itemLoop = scf::ForOp::create(
      b, loc, cIndex(0), numItems, cIndex(1), inits,
      [&](OpBuilder &lb, Location, Value item, ValueRange carried) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(lb.getInsertionBlock());
        Value seq = loadIndex(items, {item, cIndex(0)});
        Value begin = loadIndex(items, {item, cIndex(1)});
        Value end = loadIndex(items, {item, cIndex(2)});
        Value slot = loadIndex(items, {item, cIndex(3)});
        auto [out, lse] = emitItem(seq, begin, end, cache, decoder);
        Value qLen = tensor::DimOp::create(b, loc, out, cIndex(0));
        Value partialOut =
            insert(out, carried[0], {slot, attr(0), attr(0), attr(0)},
                   {attr(1), qLen, heads, attr(vDim)});
        Value partialLse = insert(lse, carried[1], {slot, attr(0), attr(0)},
                                  {attr(1), qLen, heads});
        scf::YieldOp::create(b, loc, ValueRange{partialOut, partialLse});
      });
  return SmallVector<Value>(itemLoop.getResults());
}

struct MLATilePass : public mla::impl::MLATilePassBase<MLATilePass> {
  void runOnOperation() override {
    if (failed(requireSplitLevel(getOperation(), getArgument())))
      return signalPassFailure();
    SmallVector<PartialDecodeOp> ops;
    getOperation()->walk([&](PartialDecodeOp op) { ops.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (PartialDecodeOp op : ops) {
      rewriter.setInsertionPoint(op);
      rewriter.replaceOp(op, PartialDecodeTiler(op, rewriter).run());
    }
  }
};
} // namespace

//===- PartialKernelSoftmax.cpp - online softmax, P to LDS ----------------===//
//
// Per-lane code over the wave's own scores: in LDS (bf16), lane 4·r + q of
// a wave takes a quarter of row r (one head) of the tile rows it scored; in
// registers (fp8, mxfp4), lane 16·q + r holds head r's rows 4·q .. 4·q + 3
// of each 16 the wave scored, as the QK MFMAs left them — with 32-row
// groups, for each of the wave's two fragments (heads r and 16 + r). In the
// item's last tiles scores are masked to the work item's rows and the
// token's causal limit (the KV loop runs whole tiles unmasked); the
// running max and sum move in the exp2 domain; P goes to the row group's P
// buffer in the plan's encoding, the rows' rescale factors to the wave's
// row-factor buffer. The waves of a row group exchange only their rows'
// maxima (through LDS, behind one barrier) and exponentiate and sum their
// share of the columns.
//
//===----------------------------------------------------------------------===//

#include "GFX950Kernels.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mla;

namespace {
constexpr double kFp8Max = 448.0;
} // namespace

SmallVector<int64_t, 2> PartialKernel::rowLaneOffsets() const {
  // The four lanes of a row: lane ^ 1, ^ 2 (scores from LDS) or ^ 16, ^ 32.
  if (strategy.qk == QKPath::ScaledMfma)
    return {16, 32};
  return {1, 2};
}

PartialKernel::LaneColumns PartialKernel::laneColumns(OpBuilder &b) {
  KernelBuilder k{b, loc};
  int64_t cols = plan.kvRowsPerWave() / 4;
  if (strategy.qk == QKPath::ScaledMfma)
    return {k.add(rows.kvRowBase, k.mul(rows.quarter, k.idx(4))), cols, 4, 16};
  return {k.add(rows.kvRowBase, k.mul(rows.quarter, k.idx(cols))), cols, cols,
          cols};
}

Value PartialKernel::tileScores(OpBuilder &b, Value tileStart, Value laneScores,
                                const LaneColumns &columns, bool masked,
                                int64_t f) {
  KernelBuilder k{b, loc};
  Type f32 = b.getF32Type(), i32 = b.getI32Type();
  int64_t cols = columns.count;
  auto vt = VectorType::get({cols}, f32);
  Value s =
      laneScores
          ? laneScores
          : vector::LoadOp::create(
                b, loc, vt, lds.scores,
                ValueRange{rows.rowGroup, fragmentRow(b, f), columns.start})
                .getResult();
  s = arith::MulFOp::create(
      b, loc, s, vector::BroadcastOp::create(b, loc, vt, scoreScale));
  if (!masked)
    return s;
  // Column j is visible while j < min(item end, causal end) - its first
  // position: one 32-bit compare per column (positions fit: the planner
  // refuses sequences over 2^31 - 1 positions).
  Value end = toI32(b, k.minS(item.end, rows.visibleEnd));
  Value first = toI32(b, k.add(tileStart, columns.start));
  Value limit = arith::SubIOp::create(b, loc, end, first);
  auto i32Vec = VectorType::get({cols}, i32);
  SmallVector<int32_t> offsets(cols);
  for (int64_t e = 0; e < cols; ++e)
    offsets[e] = static_cast<int32_t>(columns.offset(e));
  Value offset = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(i32Vec, ArrayRef<int32_t>(offsets)));
  Value visible =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, offset,
                            vector::BroadcastOp::create(b, loc, i32Vec, limit));
  return arith::SelectOp::create(
      b, loc, visible, s, vector::BroadcastOp::create(b, loc, vt, negInf));
}

SmallVector<PartialKernel::SoftmaxState, 2>
PartialKernel::emitSoftmax(OpBuilder &b, Value tileStart, ValueRange laneScores,
                           ArrayRef<SoftmaxState> running, bool masked) {
  KernelBuilder k{b, loc};
  // The wave's share of the tile's columns: the rows it scored (all of
  // them unless its row group splits the tile). Each lane keeps a partial
  // sum over its columns (the epilogue adds a row's lanes, then the row
  // group's waves) and writes its part of the group's P.
  LaneColumns columns = laneColumns(b);
  int64_t fragments = plan.fragments();
  SmallVector<Value, 2> scores, ownMax;
  for (int64_t f = 0; f < fragments; ++f) {
    scores.push_back(tileScores(b, tileStart,
                                laneScores.empty() ? Value() : laneScores[f],
                                columns, masked, f));
    ownMax.push_back(
        k.laneReduce(vector::ReductionOp::create(
                         b, loc, vector::CombiningKind::MAXIMUMF, scores[f]),
                     rowLaneOffsets(), /*isMax=*/true));
  }
  SmallVector<Value, 2> tileMax =
      plan.wavesPerRowGroup() > 1 ? emitRowGroupMax(b, ownMax) : ownMax;
  SmallVector<SoftmaxState, 2> next;
  for (int64_t f = 0; f < fragments; ++f)
    next.push_back(
        emitFragmentSoftmax(b, scores[f], tileMax[f], running[f], columns, f));
  return next;
}

PartialKernel::SoftmaxState
PartialKernel::emitFragmentSoftmax(OpBuilder &b, Value s, Value tileMax,
                                   SoftmaxState running,
                                   const LaneColumns &columns, int64_t f) {
  KernelBuilder k{b, loc};
  Type f32 = b.getF32Type();
  Value newMax = k.fmax(running.max, tileMax);
  // A row that has seen nothing yet (max -inf) shifts by the lowest finite
  // float, not by -inf: its scores and running max, all -inf, still give
  // exp2 = 0, and a finite (or NaN) max passes unchanged. One maximum, not
  // a compare and a select.
  Value shift = arith::MaximumFOp::create(
      b, loc, newMax, k.f32(-std::numeric_limits<float>::max()));
  auto vt = VectorType::get({columns.count}, f32);
  Value p = math::Exp2Op::create(
      b, loc,
      arith::SubFOp::create(b, loc, s,
                            vector::BroadcastOp::create(b, loc, vt, shift)));
  // Each lane sums its own columns: the epilogue adds the row's lanes.
  Value tileSum =
      vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, p);
  Value rescale = math::Exp2Op::create(
      b, loc, arith::SubFOp::create(b, loc, running.max, shift));
  Value newSum = k.fadd(k.fmul(running.sum, rescale), tileSum);
  emitPStore(b, p, columns, f);
  memref::StoreOp::create(b, loc, rescale, lds.rowFactors,
                          ValueRange{rows.wave, fragmentRow(b, f)});
  return {newMax, newSum};
}

SmallVector<Value, 2> PartialKernel::emitRowGroupMax(OpBuilder &b,
                                                     ArrayRef<Value> ownMax) {
  // The four lanes of a row hold the same maximum and store it alike; all
  // fragments' go out behind one barrier.
  for (auto [f, max] : llvm::enumerate(ownMax))
    memref::StoreOp::create(
        b, loc, max, lds.tileMaxima,
        ValueRange{rows.rowGroup, fragmentRow(b, f), rows.part});
  if (testHazard != "drop-max-barrier")
    gpu::BarrierOp::create(b, loc);
  int64_t split = plan.wavesPerRowGroup();
  SmallVector<Value, 2> tileMax;
  for (int64_t f = 0; f < static_cast<int64_t>(ownMax.size()); ++f) {
    Value maxima = vector::LoadOp::create(
        b, loc, VectorType::get({split}, b.getF32Type()), lds.tileMaxima,
        ValueRange{rows.rowGroup, fragmentRow(b, f), c0});
    tileMax.push_back(vector::ReductionOp::create(
        b, loc, vector::CombiningKind::MAXIMUMF, maxima));
  }
  return tileMax;
}

void PartialKernel::emitPStore(OpBuilder &b, Value p,
                               const LaneColumns &columns, int64_t f) {
  KernelBuilder k{b, loc};
  Type fp8 = b.getType<Float8E4M3FNType>();
  auto vt = cast<VectorType>(p.getType());
  int64_t cols = vt.getDimSize(0);
  // Each run of the lane's columns to its place in the row group's P.
  auto store = [&](Value values, Value part) {
    for (int64_t first = 0; first < cols; first += columns.run) {
      Value run = values;
      if (columns.run < cols)
        run = vector::ExtractStridedSliceOp::create(
            b, loc, values, ArrayRef<int64_t>{first},
            ArrayRef<int64_t>{columns.run}, ArrayRef<int64_t>{1});
      Value col = k.add(columns.start, k.idx(columns.offset(first)));
      vector::StoreOp::create(
          b, loc, run, lds.p,
          ValueRange{rows.rowGroup, part, fragmentRow(b, f), col});
    }
  };
  if (strategy.p == PEncoding::Bf16TwoParts) {
    // p ≈ hi + lo in bf16 (PEncoding): 16 significant bits.
    auto pType = VectorType::get({cols}, pvType(b));
    Value pHi = arith::TruncFOp::create(b, loc, pType, p);
    Value residual = arith::SubFOp::create(
        b, loc, p, arith::ExtFOp::create(b, loc, vt, pHi));
    store(pHi, c0);
    store(arith::TruncFOp::create(b, loc, pType, residual), c1);
  } else {
    // P in two fp8 parts, p·448 ≈ hi + lo/16: one fp8 part alone keeps 3
    // mantissa bits, which costs ~2e-2 relative error in the output.
    auto p8Type = VectorType::get({cols}, fp8);
    Value scaledP = arith::MulFOp::create(
        b, loc, p, vector::BroadcastOp::create(b, loc, vt, k.f32(kFp8Max)));
    Value pHi = arith::TruncFOp::create(b, loc, p8Type, scaledP);
    Value residual = arith::MulFOp::create(
        b, loc,
        arith::SubFOp::create(b, loc, scaledP,
                              arith::ExtFOp::create(b, loc, vt, pHi)),
        vector::BroadcastOp::create(b, loc, vt, k.f32(16.0)));
    Value pLo = arith::TruncFOp::create(b, loc, p8Type, residual);
    store(pHi, c0);
    store(pLo, c1);
  }
}

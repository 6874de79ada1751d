//===- PartialKernelSoftmax.cpp - online softmax, P to LDS ----------------===//
//
// Per-lane code over the wave's own scores in LDS: lane 4·r + q of a wave
// takes a quarter of row r (one head) of the tile rows it scored. In the
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

Value PartialKernel::tileScores(OpBuilder &b, Value tileStart, Value colStart,
                                int64_t cols, bool masked) {
  KernelBuilder k{b, loc};
  Type f32 = b.getF32Type(), i32 = b.getI32Type();
  auto vt = VectorType::get({cols}, f32);
  Value s = vector::LoadOp::create(
      b, loc, vt, lds.scores, ValueRange{rows.rowGroup, rows.row, colStart});
  s = arith::MulFOp::create(
      b, loc, s, vector::BroadcastOp::create(b, loc, vt, scoreScale));
  if (!masked)
    return s;
  // Column j is visible while j < min(item end, causal end) - its first
  // position: one 32-bit compare per column (positions fit: the planner
  // refuses sequences over 2^31 - 1 positions).
  Value end = toI32(b, k.minS(item.end, rows.visibleEnd));
  Value first = toI32(b, k.add(tileStart, colStart));
  Value limit = arith::SubIOp::create(b, loc, end, first);
  auto i32Vec = VectorType::get({cols}, i32);
  SmallVector<int32_t> steps(cols);
  for (int64_t j = 0; j < cols; ++j)
    steps[j] = static_cast<int32_t>(j);
  Value step = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(i32Vec, ArrayRef<int32_t>(steps)));
  Value visible = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::slt, step,
      vector::BroadcastOp::create(b, loc, i32Vec, limit));
  return arith::SelectOp::create(
      b, loc, visible, s, vector::BroadcastOp::create(b, loc, vt, negInf));
}

PartialKernel::SoftmaxState PartialKernel::emitSoftmax(OpBuilder &b,
                                                       Value tileStart,
                                                       SoftmaxState running,
                                                       bool masked) {
  KernelBuilder k{b, loc};
  Type f32 = b.getF32Type();
  // The wave's share of the tile's columns: the rows it scored (all of
  // them unless its row group splits the tile). Each wave keeps a partial
  // sum over its share (the epilogue adds them) and writes its part of the
  // group's P.
  int64_t cols = plan.kvRowsPerWave() / 4;
  Value colStart = k.add(rows.kvRowBase, k.mul(rows.quarter, k.idx(cols)));
  Value s = tileScores(b, tileStart, colStart, cols, masked);
  Value ownMax = k.laneReduce(
      vector::ReductionOp::create(b, loc,
                                  vector::CombiningKind::MAXIMUMF, s),
      {1, 2}, /*isMax=*/true);
  Value tileMax =
      plan.wavesPerRowGroup() > 1 ? emitRowGroupMax(b, ownMax) : ownMax;
  Value newMax = k.fmax(running.max, tileMax);
  // A row that has seen nothing yet (max -inf) shifts by the lowest finite
  // float, not by -inf: its scores and running max, all -inf, still give
  // exp2 = 0, and a finite (or NaN) max passes unchanged. One maximum, not
  // a compare and a select.
  Value shift = arith::MaximumFOp::create(
      b, loc, newMax, k.f32(-std::numeric_limits<float>::max()));
  auto vt = VectorType::get({cols}, f32);
  Value p = math::Exp2Op::create(
      b, loc,
      arith::SubFOp::create(b, loc, s,
                            vector::BroadcastOp::create(b, loc, vt, shift)));
  Value tileSum = k.laneReduce(
      vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, p),
      {1, 2}, /*isMax=*/false);
  Value rescale = math::Exp2Op::create(
      b, loc, arith::SubFOp::create(b, loc, running.max, shift));
  Value newSum = k.fadd(k.fmul(running.sum, rescale), tileSum);
  emitPStore(b, p, colStart);
  memref::StoreOp::create(b, loc, rescale, lds.rowFactors,
                          ValueRange{rows.wave, rows.row});
  return {newMax, newSum};
}

Value PartialKernel::emitRowGroupMax(OpBuilder &b, Value ownMax) {
  // The four lanes of a row hold the same maximum and store it alike.
  memref::StoreOp::create(b, loc, ownMax, lds.tileMaxima,
                          ValueRange{rows.rowGroup, rows.row, rows.part});
  if (testHazard != "drop-max-barrier")
    gpu::BarrierOp::create(b, loc);
  int64_t split = plan.wavesPerRowGroup();
  Value maxima = vector::LoadOp::create(
      b, loc, VectorType::get({split}, b.getF32Type()), lds.tileMaxima,
      ValueRange{rows.rowGroup, rows.row, c0});
  return vector::ReductionOp::create(b, loc, vector::CombiningKind::MAXIMUMF,
                                     maxima);
}

void PartialKernel::emitPStore(OpBuilder &b, Value p, Value colStart) {
  KernelBuilder k{b, loc};
  Type fp8 = b.getType<Float8E4M3FNType>();
  auto vt = cast<VectorType>(p.getType());
  int64_t cols = vt.getDimSize(0);
  if (strategy.p == PEncoding::F32) {
    // mxfp4 ScaledP: PV scales P per V block, then rounds it to bf16.
    vector::StoreOp::create(b, loc, p, lds.p,
                            ValueRange{rows.rowGroup, c0, rows.row, colStart});
  } else if (strategy.p == PEncoding::Bf16) {
    // P in bf16 keeps 8 mantissa bits: one part is enough.
    Value pBf16 = arith::TruncFOp::create(
        b, loc, VectorType::get({cols}, pvType(b)), p);
    vector::StoreOp::create(b, loc, pBf16, lds.p,
                            ValueRange{rows.rowGroup, c0, rows.row, colStart});
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
    vector::StoreOp::create(b, loc, pHi, lds.p,
                            ValueRange{rows.rowGroup, c0, rows.row, colStart});
    vector::StoreOp::create(b, loc, pLo, lds.p,
                            ValueRange{rows.rowGroup, c1, rows.row, colStart});
  }
}

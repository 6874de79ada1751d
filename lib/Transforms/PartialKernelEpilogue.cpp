//===- PartialKernelEpilogue.cpp - normalize, write out or partials -------===//
//
// out = acc / l (fp8: acc · kv_scale / (448 · l)), l the sum of the row
// group's waves' parts; lse = (m + log2 l) · ln 2;
// a row that saw nothing (l = 0) gives zeros and -inf. A sequence with a
// single work item is final here: the kernel writes bf16 output and lse
// directly (the combine kernel skips it); otherwise it writes the item's
// partials.
//
//===----------------------------------------------------------------------===//

#include "GFX950Kernels.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mla;

namespace {
constexpr int64_t kRowsPerWave = PartialKernelPlan::kRowsPerWave;
constexpr double kFp8Max = 448.0;
} // namespace

Value PartialKernel::emitRowSum(OpBuilder &b, Value lanePartialSum) {
  KernelBuilder k{b, loc};
  // The softmax kept a sum per lane, over its columns: add the row's four
  // lanes once here, not every tile.
  Value partialSum =
      k.laneReduce(lanePartialSum, rowLaneOffsets(), /*isMax=*/false);
  int64_t split = plan.wavesPerRowGroup();
  if (split == 1)
    return partialSum;
  // The waves of a row group summed their own columns: add the parts
  // through the row-factor buffer (each wave's own, free after the loop).
  memref::StoreOp::create(b, loc, partialSum, lds.rowFactors,
                          ValueRange{rows.wave, rows.row});
  gpu::BarrierOp::create(b, loc);
  Value firstWave = k.mul(rows.rowGroup, k.idx(split));
  Value sum = k.load(lds.rowFactors, {firstWave, rows.row});
  for (int64_t part = 1; part < split; ++part)
    sum = k.fadd(sum, k.load(lds.rowFactors,
                             {k.add(firstWave, k.idx(part)), rows.row}));
  // Every wave has its parts before any overwrites them with factors.
  gpu::BarrierOp::create(b, loc);
  return sum;
}

void PartialKernel::emitEpilogue(OpBuilder &b, scf::ForOp loop) {
  KernelBuilder k{b, loc};
  Value runMax = loop.getResult(0);
  Value runSum = emitRowSum(b, loop.getResult(1));
  Value seen = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, runSum,
                                     k.f32(0.0));
  // fp8's P went in as p·448 and V still carries the per-tensor scale.
  Value inverse =
      strategy.p == PEncoding::Fp8TwoParts
          ? arith::DivFOp::create(b, loc, kvScale,
                                  k.fmul(runSum, k.f32(kFp8Max)))
          : arith::DivFOp::create(b, loc, k.f32(1.0), runSum);
  Value factor =
      arith::SelectOp::create(b, loc, seen, inverse, k.f32(0.0));
  memref::StoreOp::create(b, loc, factor, lds.rowFactors,
                          ValueRange{rows.wave, rows.row});
  gpu::BarrierOp::create(b, loc);
  Value out =
      arith::MulFOp::create(b, loc, loop.getResult(2), readRowFactors(b));
  Value lse = arith::SelectOp::create(
      b, loc, seen,
      k.fmul(k.fadd(runMax, math::Log2Op::create(b, loc, runSum)),
             k.f32(0.6931471805599453)),
      negInf);

  // A sequence with a single work item is final here: write bf16 output and
  // lse directly (the combine kernel skips it); otherwise write the partials.
  Value seqItems = k.sub(k.loadIndex(args.itemIndptr, {k.add(item.seq, c1)}),
                         k.loadIndex(args.itemIndptr, {item.seq}));
  Value direct = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                       seqItems, c1);
  Value headBase = k.mul(rows.headGroup, k.idx(kRowsPerWave));
  // One lane per row writes lse: the first quarter of the row group's
  // first wave.
  Value firstQuarter =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, rows.quarter, c0);
  if (rows.firstPart)
    firstQuarter = arith::AndIOp::create(b, loc, rows.firstPart, firstQuarter);
  auto storeLse = [&](Value mem, ValueRange indices) {
    scf::IfOp::create(b, loc, firstQuarter, [&](OpBuilder &jb, Location) {
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPoint(jb.getInsertionBlock(), jb.getInsertionPoint());
      memref::StoreOp::create(b, loc, lse, mem, indices);
      scf::YieldOp::create(b, loc);
    });
  };
  scf::IfOp::create(b, loc, rows.isRealRow, [&](OpBuilder &ib, Location) {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(ib.getInsertionBlock(), ib.getInsertionPoint());
    scf::IfOp::create(
        b, loc, direct,
        [&](OpBuilder &db, Location) {
          OpBuilder::InsertionGuard g2(b);
          b.setInsertionPoint(db.getInsertionBlock(), db.getInsertionPoint());
          Value outBf16 = arith::TruncFOp::create(
              b, loc,
              VectorType::get({kRowsPerWave, plan.vColumnsPerWave()},
                              b.getBF16Type()),
              out);
          vector::TransferWriteOp::create(b, loc, outBf16, args.out,
                                          ValueRange{rows.tokenRow, headBase,
                                                     rows.vColBase},
                                          ArrayRef<bool>{true, true});
          storeLse(args.lse, {rows.tokenRow, rows.head});
          scf::YieldOp::create(b, loc);
        },
        [&](OpBuilder &pb, Location) {
          OpBuilder::InsertionGuard g2(b);
          b.setInsertionPoint(pb.getInsertionBlock(), pb.getInsertionPoint());
          vector::TransferWriteOp::create(b, loc, out, args.partialOut,
                                          ValueRange{item.slot, rows.token,
                                                     headBase, rows.vColBase},
                                          ArrayRef<bool>{true, true});
          storeLse(args.partialLse, {item.slot, rows.token, rows.head});
          scf::YieldOp::create(b, loc);
        });
    scf::YieldOp::create(b, loc);
  });
}

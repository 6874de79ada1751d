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

SmallVector<Value, 2>
PartialKernel::emitRowSums(OpBuilder &b, ArrayRef<Value> lanePartialSums) {
  KernelBuilder k{b, loc};
  // The softmax kept a sum per lane, over its columns: add the row's four
  // lanes once here, not every tile.
  SmallVector<Value, 2> sums;
  for (Value partial : lanePartialSums)
    sums.push_back(k.laneReduce(partial, rowLaneOffsets(), /*isMax=*/false));
  int64_t split = plan.wavesPerRowGroup();
  if (split == 1)
    return sums;
  // The waves of a row group summed their own columns: add the parts
  // through the row-factor buffer (each wave's own, free after the loop).
  for (auto [f, sum] : llvm::enumerate(sums))
    memref::StoreOp::create(b, loc, sum, lds.rowFactors,
                            ValueRange{rows.wave, fragmentRow(b, f)});
  gpu::BarrierOp::create(b, loc);
  Value firstWave = k.mul(rows.rowGroup, k.idx(split));
  for (int64_t f = 0; f < static_cast<int64_t>(sums.size()); ++f) {
    Value row = fragmentRow(b, f);
    Value sum = k.load(lds.rowFactors, {firstWave, row});
    for (int64_t part = 1; part < split; ++part)
      sum = k.fadd(
          sum, k.load(lds.rowFactors, {k.add(firstWave, k.idx(part)), row}));
    sums[f] = sum;
  }
  // Every wave has its parts before any overwrites them with factors.
  gpu::BarrierOp::create(b, loc);
  return sums;
}

void PartialKernel::emitEpilogue(OpBuilder &b, scf::ForOp loop) {
  KernelBuilder k{b, loc};
  int64_t fragments = plan.fragments();
  RunningState final = RunningState::unpack(loop.getResults(), fragments);
  SmallVector<Value, 2> partialSums;
  for (const SoftmaxState &state : final.softmax)
    partialSums.push_back(state.sum);
  SmallVector<Value, 2> sums = emitRowSums(b, partialSums);
  SmallVector<Value, 2> lses;
  for (int64_t f = 0; f < fragments; ++f) {
    Value runSum = sums[f];
    Value seen = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT,
                                       runSum, k.f32(0.0));
    // fp8's P went in as p·448 and V still carries the per-tensor scale.
    Value inverse = strategy.p == PEncoding::Fp8TwoParts
                        ? arith::DivFOp::create(b, loc, kvScale,
                                                k.fmul(runSum, k.f32(kFp8Max)))
                        : arith::DivFOp::create(b, loc, k.f32(1.0), runSum);
    Value factor = arith::SelectOp::create(b, loc, seen, inverse, k.f32(0.0));
    memref::StoreOp::create(b, loc, factor, lds.rowFactors,
                            ValueRange{rows.wave, fragmentRow(b, f)});
    lses.push_back(arith::SelectOp::create(
        b, loc, seen,
        k.fmul(
            k.fadd(final.softmax[f].max, math::Log2Op::create(b, loc, runSum)),
            k.f32(0.6931471805599453)),
        negInf));
  }
  gpu::BarrierOp::create(b, loc);
  int64_t chunks = plan.accChunks();
  for (int64_t f = 0; f < fragments; ++f) {
    SmallVector<Value, 4> out;
    for (int64_t c = 0; c < chunks; ++c)
      out.push_back(arith::MulFOp::create(b, loc, final.acc[f * chunks + c],
                                          readRowFactors(b, f)));
    emitFragmentStores(b, out, lses[f], f);
  }
}

void PartialKernel::emitFragmentStores(OpBuilder &b, ArrayRef<Value> out,
                                       Value lse, int64_t f) {
  KernelBuilder k{b, loc};
  // A sequence with a single work item is final here: write bf16 output and
  // lse directly (the combine kernel skips it); otherwise write the partials.
  Value seqItems = k.sub(k.loadIndex(args.itemIndptr, {k.add(item.seq, c1)}),
                         k.loadIndex(args.itemIndptr, {item.seq}));
  Value direct = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                       seqItems, c1);
  Value headBase = fragmentFirstHead(b, f);
  Value head = k.add(headBase, rows.row);
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
          auto bf16Type = VectorType::get(
              {kRowsPerWave, plan.accChunkColumns()}, b.getBF16Type());
          for (auto [c, chunk] : llvm::enumerate(out)) {
            Value outBf16 = arith::TruncFOp::create(b, loc, bf16Type, chunk);
            vector::TransferWriteOp::create(
                b, loc, outBf16, args.out,
                ValueRange{rows.tokenRow, headBase, chunkColumn(b, c)},
                ArrayRef<bool>{true, true});
          }
          storeLse(args.lse, {rows.tokenRow, head});
          scf::YieldOp::create(b, loc);
        },
        [&](OpBuilder &pb, Location) {
          OpBuilder::InsertionGuard g2(b);
          b.setInsertionPoint(pb.getInsertionBlock(), pb.getInsertionPoint());
          for (auto [c, chunk] : llvm::enumerate(out))
            vector::TransferWriteOp::create(
                b, loc, chunk, args.partialOut,
                ValueRange{item.slot, rows.token, headBase, chunkColumn(b, c)},
                ArrayRef<bool>{true, true});
          storeLse(args.partialLse, {item.slot, rows.token, head});
          scf::YieldOp::create(b, loc);
        });
    scf::YieldOp::create(b, loc);
  });
}

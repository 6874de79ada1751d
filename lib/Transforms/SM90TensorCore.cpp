//===- SM90TensorCore.cpp - sm_90a: QK and PV on mma.sync -----------------===//
//
// Both contractions run on `mma.sync.aligned.m16n8k16.row.col.f32.bf16`
// from the bf16 operands in shared memory. Lane 4 g + t of a warp holds, of
// a 16 x 16 A fragment, rows g and g + 8 at columns 2 t, 2 t + 1 and
// 2 t + 8, 2 t + 9; of a 16 x 8 B fragment (k x n), column g at rows
// 2 t, 2 t + 1 and 2 t + 8, 2 t + 9; of the 16 x 8 accumulator, rows g and
// g + 8 at columns 2 t, 2 t + 1.
//
// QK: A = the block's 16 Q rows, B = Kᵀ: n-blocks of 8 tile rows, each
// scored by kWarps / (kv_tile / 8) warps that split Dqk's k-steps and add
// their partials through shared memory. PV: A = P (16 x kv_tile, bf16),
// B = the tile's first Dv columns: each warp owns Dv n-blocks w, w + 8, ...
//
//===----------------------------------------------------------------------===//

#include "SM90Kernels.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mla;

namespace {
constexpr int64_t kLanes = SM90KernelPlan::kLanesPerRow;
constexpr int64_t kWarps = SM90KernelPlan::kWarps;

/// Two bf16 values as the i32 an mma fragment register holds (the first in
/// the low half).
Value packPair(OpBuilder &b, Location loc, Value pair) {
  auto asI32 = vector::BitCastOp::create(
      b, loc, VectorType::get({1}, b.getI32Type()), pair);
  return vector::ExtractOp::create(b, loc, asI32, ArrayRef<int64_t>{0});
}
} // namespace

Value SM90PartialKernel::loadPair(OpBuilder &b, Value mem, Value row,
                                  Value col) {
  auto type = VectorType::get({2}, b.getBF16Type());
  Value pair = vector::LoadOp::create(b, loc, type, mem, ValueRange{row, col},
                                      /*nontemporal=*/false, llvm::Align(4));
  return packPair(b, loc, pair);
}

SmallVector<Value> SM90PartialKernel::mma(OpBuilder &b, ArrayRef<Value> a,
                                          ArrayRef<Value> bFrag,
                                          ArrayRef<Value> c) {
  Type f32 = b.getF32Type();
  auto result = LLVM::LLVMStructType::getLiteral(b.getContext(),
                                                 {f32, f32, f32, f32});
  Value d = NVVM::MmaOp::create(
      b, loc, result, a, bFrag, c, ArrayRef<int64_t>{16, 8, 16},
      std::nullopt, std::nullopt,
      std::array<NVVM::MMATypes, 2>{NVVM::MMATypes::bf16,
                                    NVVM::MMATypes::bf16},
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                     NVVM::MMALayout::col});
  SmallVector<Value> out;
  for (int64_t i = 0; i < 4; ++i)
    out.push_back(LLVM::ExtractValueOp::create(b, loc, d, i));
  return out;
}

void SM90PartialKernel::emitScoreMma(OpBuilder &b) {
  KernelBuilder k{b, loc};
  Value g = thread.group, t2 = k.mul(thread.pair, k.idx(2));
  int64_t parts = plan.warpsPerScoreBlock();
  Value block = k.rem(thread.warp, k.idx(plan.scoreBlocks()));
  Value part = k.div(thread.warp, k.idx(plan.scoreBlocks()));
  Value tileRow = k.add(k.mul(block, k.idx(8)), g);
  Value g8 = k.add(g, k.idx(8));
  SmallVector<Value> zeros(4, k.f32(0.0));
  auto loop = scf::ForOp::create(
      b, loc, part, k.idx(plan.kSteps()), k.idx(parts), zeros,
      [&](OpBuilder &lb, Location, Value step, ValueRange c) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(lb.getInsertionBlock());
        Value d = k.add(k.mul(step, k.idx(16)), t2);
        Value d8 = k.add(d, k.idx(8));
        SmallVector<Value> a = {loadPair(b, smem.q, g, d),
                                loadPair(b, smem.q, g8, d),
                                loadPair(b, smem.q, g, d8),
                                loadPair(b, smem.q, g8, d8)};
        SmallVector<Value> kFrag = {loadPair(b, smem.tile, tileRow, d),
                                    loadPair(b, smem.tile, tileRow, d8)};
        scf::YieldOp::create(b, loc, mma(b, a, kFrag, llvm::to_vector(c)));
      });
  Value col = k.add(k.mul(block, k.idx(8)), t2);
  Value col1 = k.add(col, c1);
  Value rows[] = {g, g, g8, g8};
  Value cols[] = {col, col1, col, col1};
  for (int64_t i = 0; i < 4; ++i)
    memref::StoreOp::create(b, loc, loop.getResult(i), smem.partialScores,
                            ValueRange{part, rows[i], cols[i]});
}

SmallVector<Value> SM90PartialKernel::emitScores(OpBuilder &b,
                                                 Value tileStart) {
  KernelBuilder k{b, loc};
  // Position tileStart + c is visible while it is before both the item's
  // end and the token's causal end.
  Value end = k.minS(item.end, thread.visibleEnd);
  SmallVector<Value> scores;
  for (int64_t j = 0; j < plan.tileRowsPerLane(); ++j) {
    Value col = k.add(thread.lane, k.idx(kLanes * j));
    Value sum = k.load(smem.partialScores, {c0, thread.row, col});
    for (int64_t part = 1; part < plan.warpsPerScoreBlock(); ++part)
      sum = k.fadd(sum,
                   k.load(smem.partialScores, {k.idx(part), thread.row, col}));
    Value visible = k.lessThan(k.add(tileStart, col), end);
    scores.push_back(arith::SelectOp::create(b, loc, visible,
                                             k.fmul(sum, scoreScale), negInf));
  }
  return scores;
}

SmallVector<Value> SM90PartialKernel::emitOutputMma(OpBuilder &b,
                                                    ValueRange acc) {
  KernelBuilder k{b, loc};
  Type bf16 = b.getBF16Type();
  Value g = thread.group, t2 = k.mul(thread.pair, k.idx(2));
  Value g8 = k.add(g, k.idx(8));
  Value factorG = k.load(smem.factors, {g});
  Value factorG8 = k.load(smem.factors, {g8});
  SmallVector<Value> next;
  for (auto [i, a] : llvm::enumerate(acc))
    next.push_back(k.fmul(a, (i % 4) < 2 ? factorG : factorG8));
  for (int64_t kk = 0; kk < tile / 16; ++kk) {
    Value p0 = k.add(t2, k.idx(16 * kk)), p8 = k.add(p0, k.idx(8));
    SmallVector<Value> a = {
        loadPair(b, smem.p, g, p0), loadPair(b, smem.p, g8, p0),
        loadPair(b, smem.p, g, p8), loadPair(b, smem.p, g8, p8)};
    for (int64_t j = 0; j < plan.outputBlocksPerWarp(); ++j) {
      // Column g of the warp's j-th n-block (blocks past Dv read its last
      // column; their results are not stored).
      Value block = k.add(thread.warp, k.idx(kWarps * j));
      Value col = k.minS(k.add(k.mul(block, k.idx(8)), g), k.idx(vDim - 1));
      auto pair = [&](Value row) {
        Value lo = k.load(smem.tile, {row, col});
        Value hi = k.load(smem.tile, {k.add(row, c1), col});
        Value v = vector::FromElementsOp::create(
            b, loc, VectorType::get({2}, bf16), ValueRange{lo, hi});
        return packPair(b, loc, v);
      };
      SmallVector<Value> vFrag = {pair(p0), pair(p8)};
      SmallVector<Value> c(next.begin() + 4 * j, next.begin() + 4 * j + 4);
      SmallVector<Value> d = mma(b, a, vFrag, c);
      std::copy(d.begin(), d.end(), next.begin() + 4 * j);
    }
  }
  return next;
}

void SM90PartialKernel::emitOutputStores(OpBuilder &b, ValueRange acc,
                                         Value direct) {
  KernelBuilder k{b, loc};
  Value g = thread.group, t2 = k.mul(thread.pair, k.idx(2));
  for (int64_t half = 0; half < 2; ++half) {
    Value row = half == 0 ? g : k.add(g, k.idx(8));
    Value factor = k.load(smem.factors, {row});
    Value rowIndex = k.add(item.firstRow, row);
    Value token = k.div(rowIndex, k.idx(numHeads));
    Value head = k.rem(rowIndex, k.idx(numHeads));
    Value tokenRow = k.add(item.qBegin, token);
    for (int64_t j = 0; j < plan.outputBlocksPerWarp(); ++j) {
      Value block = k.add(thread.warp, k.idx(kWarps * j));
      Value stored = arith::AndIOp::create(
          b, loc, k.lessThan(rowIndex, item.numRows),
          k.lessThan(block, k.idx(plan.outputBlocks())));
      ifThen(b, loc, stored, [&] {
        for (int64_t e = 0; e < 2; ++e) {
          Value col = k.add(k.add(k.mul(block, k.idx(8)), t2), k.idx(e));
          Value v = k.fmul(acc[4 * j + 2 * half + e], factor);
          scf::IfOp::create(
              b, loc, direct,
              [&](OpBuilder &db, Location) {
                OpBuilder::InsertionGuard guard(b);
                b.setInsertionPoint(db.getInsertionBlock(),
                                    db.getInsertionPoint());
                Value narrow =
                    arith::TruncFOp::create(b, loc, b.getBF16Type(), v);
                memref::StoreOp::create(b, loc, narrow, args.out,
                                        ValueRange{tokenRow, head, col});
                scf::YieldOp::create(b, loc);
              },
              [&](OpBuilder &pb, Location) {
                OpBuilder::InsertionGuard guard(b);
                b.setInsertionPoint(pb.getInsertionBlock(),
                                    pb.getInsertionPoint());
                memref::StoreOp::create(
                    b, loc, v, args.partialOut,
                    ValueRange{item.slot, token, head, col});
                scf::YieldOp::create(b, loc);
              });
        }
      });
    }
  }
}

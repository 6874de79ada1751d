//===- SM90WarpgroupMma.cpp - sm_90a: bf16 PV on warpgroup MMA -----------===//
//
// bf16 caches: O^T = V^T · P^T by `wgmma.mma_async m64n16k16.f32.bf16.bf16`,
// M = 64 columns of Dv, N = the block's 16 rows, K = 16 tile rows a step.
// The tensor cores read both operands from shared memory where they lie:
// V^T from the stage (64 Dv values a 128-byte row, "MN-major", in the
// 128-byte swizzle), P^T from P (K-major, rows of kv_tile values in the
// swizzle of their width), so a tile's PV is 2·(Dv / 128) instructions a
// warpgroup, with no ldmatrix and no register copy of V. Each warpgroup
// owns half of Dv's 64-column blocks; its accumulators are O's transpose
// (lane 4 g + t of warp w holds Dv columns 16 w + g (+ 8) at rows 2 t
// (+ 1) (+ 8)).
//
//===----------------------------------------------------------------------===//

#include "SM90Kernels.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mla;

namespace {
/// f32 accumulators a thread holds of one m64n16 block.
constexpr int64_t kBlockAccumulators = 8;

/// wgmma's shared-memory layouts (a descriptor's bits 62-63).
enum class Swizzle : int64_t {
  None = 0,
  Bytes128 = 1,
  Bytes64 = 2,
  Bytes32 = 3
};

Swizzle swizzleOfRowBytes(int64_t rowBytes) {
  return rowBytes == 128  ? Swizzle::Bytes128
         : rowBytes == 64 ? Swizzle::Bytes64
                          : Swizzle::Bytes32;
}

/// A shared-memory matrix descriptor: the start address (bits 0-13), the
/// leading and stride byte offsets (16-29, 32-45), each in 16-byte units,
/// and the layout (62-63). The start is the 18-bit shared-window address
/// of `base`'s first byte plus `offsetBytes` (a block's shared memory is
/// under 2^18 bytes). Without swizzle the offsets step between 8 x 16-byte
/// core matrices along K (leading) and M or N (stride); an MN-major
/// operand in the 128-byte swizzle steps between 64-value atoms along M
/// (leading) and 8-row groups along K (stride); a K-major one in a swizzle
/// between 8-row groups along M or N (stride), K within the swizzle's rows.
Value matrixDescriptor(OpBuilder &b, Location loc, Value base,
                       Value offsetBytes, int64_t leadingBytes,
                       int64_t strideBytes, Swizzle swizzle) {
  KernelBuilder k{b, loc};
  Type i64 = b.getI64Type();
  auto constant = [&](int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v))
        .getResult();
  };
  Value address = k.add(
      memref::ExtractAlignedPointerAsIndexOp::create(b, loc, base),
      offsetBytes);
  Value start = arith::ShRUIOp::create(
      b, loc,
      arith::AndIOp::create(
          b, loc, arith::IndexCastOp::create(b, loc, i64, address),
          constant(0x3FFFF)),
      constant(4));
  int64_t fields = (leadingBytes >> 4) << 16 | (strideBytes >> 4) << 32 |
                   static_cast<int64_t>(swizzle) << 62;
  return arith::OrIOp::create(b, loc, start, constant(fields));
}
} // namespace

SmallVector<Value> SM90PartialKernel::emitOutputWgmma(OpBuilder &b,
                                                      ValueRange acc) {
  KernelBuilder k{b, loc};
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type();
  int64_t blocks = plan.outputMBlocksPerWarpgroup();
  constexpr int64_t rowBytes = SM90KernelPlan::kSwizzleBytes;
  // The rows' rescale factors: the thread's rows 8 j + 2 t + e.
  Value t2 = k.mul(thread.pair, k.idx(2));
  SmallVector<Value> factors;
  for (int64_t j = 0; j < 2; ++j)
    for (int64_t e = 0; e < 2; ++e)
      factors.push_back(
          k.load(smem.factors, {k.add(t2, k.idx(8 * j + e))}));
  SmallVector<Value> scaled;
  for (auto [i, a] : llvm::enumerate(acc)) {
    int64_t r = i % kBlockAccumulators;
    scaled.push_back(k.fmul(a, factors[2 * (r / 4) + r % 2]));
  }
  // The warpgroup's first 64-column block of Dv (a slab of the stage).
  Value warpgroup = k.div(thread.warp, k.idx(4));
  Value firstBlock = k.mul(warpgroup, k.idx(blocks));
  Value stageBytes = k.idx(plan.stageBytes());
  SmallVector<Type> fields(kBlockAccumulators, f32);
  auto accType = LLVM::LLVMStructType::getLiteral(ctx, fields);
  auto bf16 = NVVM::WGMMATypesAttr::get(ctx, NVVM::WGMMATypes::bf16);
  auto one = NVVM::WGMMAScaleInAttr::get(ctx, NVVM::WGMMAScaleIn::one);
  auto shape = NVVM::MMAShapeAttr::get(ctx, SM90KernelPlan::kWgmmaM,
                                       SM90KernelPlan::kFragmentRows,
                                       SM90KernelPlan::kWgmmaK);
  NVVM::WgmmaFenceAlignedOp::create(b, loc);
  SmallVector<Value> results;
  for (int64_t m = 0; m < blocks; ++m) {
    Value d = LLVM::UndefOp::create(b, loc, accType);
    for (int64_t r = 0; r < kBlockAccumulators; ++r)
      d = LLVM::InsertValueOp::create(b, loc, d,
                                      scaled[kBlockAccumulators * m + r], r);
    // A 64-column block of Dv is a slab of the stage.
    Value slab = k.mul(k.add(firstBlock, k.idx(m)), k.idx(plan.slabBytes()));
    for (int64_t step = 0; step < tile / SM90KernelPlan::kWgmmaK; ++step) {
      // A = V^T (M = Dv, MN-major, swizzled): the step's 16 rows are two
      // 8-row groups of 1024 bytes.
      Value vOffset =
          k.add(k.add(k.mul(computeStage, stageBytes), slab),
                k.idx(SM90KernelPlan::kWgmmaK * step * rowBytes));
      Value vDesc = matrixDescriptor(
          b, loc, smem.stages, vOffset, plan.slabBytes(),
          SM90KernelPlan::kSwizzleAlignment, Swizzle::Bytes128);
      // B = P^T (K-major) in its swizzle: the step's 16 columns 32 bytes
      // into each row, 8-row groups a group apart; P's parts one after the
      // other, each a wgmma on the same V^T.
      for (int64_t part = 0; part < plan.pParts(); ++part) {
        Value pDesc =
            matrixDescriptor(b, loc, smem.p,
                             k.idx(part * plan.pPartBytes() +
                                   2 * SM90KernelPlan::kWgmmaK * step),
                             SM90KernelPlan::kCoreBytes, plan.pRowGroupBytes(),
                             swizzleOfRowBytes(plan.pRowBytes()));
        d = NVVM::WgmmaMmaAsyncOp::create(
            b, loc, accType, d, vDesc, pDesc, shape, bf16, bf16,
            NVVM::WGMMATypesAttr::get(ctx, NVVM::WGMMATypes::f32),
            NVVM::WGMMAScaleOutAttr::get(ctx, NVVM::WGMMAScaleOut::one), one,
            one, NVVM::MMALayoutAttr::get(ctx, NVVM::MMALayout::col),
            NVVM::MMALayoutAttr::get(ctx, NVVM::MMALayout::col),
            NVVM::MMAIntOverflowAttr());
      }
    }
    results.push_back(d);
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
  SmallVector<Value> next;
  for (Value d : results)
    for (int64_t r = 0; r < kBlockAccumulators; ++r)
      next.push_back(LLVM::ExtractValueOp::create(b, loc, d, r));
  return next;
}

void SM90PartialKernel::emitTransposedOutputStores(OpBuilder &b,
                                                   ValueRange acc,
                                                   Value direct) {
  KernelBuilder k{b, loc};
  int64_t blocks = plan.outputMBlocksPerWarpgroup();
  Value t2 = k.mul(thread.pair, k.idx(2));
  Value warpgroup = k.div(thread.warp, k.idx(4));
  Value firstColumn = k.add(
      k.mul(k.mul(warpgroup, k.idx(blocks)), k.idx(SM90KernelPlan::kWgmmaM)),
      k.add(k.mul(k.rem(thread.warp, k.idx(4)), k.idx(16)), thread.group));
  // Final rows to out as bf16, else to the item's partials; one branch for
  // the choice, one a row for whether it is real.
  auto stores = [&](bool final) {
    return [&, final](OpBuilder &bb, Location) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(bb.getInsertionBlock(), bb.getInsertionPoint());
      for (int64_t j = 0; j < 2; ++j)
        for (int64_t e = 0; e < 2; ++e) {
          OutputRow row = outputRow(b, k.add(t2, k.idx(8 * j + e)));
          ifThen(b, loc, row.isReal, [&] {
            for (int64_t m = 0; m < blocks; ++m)
              for (int64_t h = 0; h < 2; ++h) {
                Value value =
                    k.fmul(acc[kBlockAccumulators * m + 4 * j + 2 * h + e],
                           row.factor);
                Value col = k.add(
                    firstColumn, k.idx(SM90KernelPlan::kWgmmaM * m + 8 * h));
                if (final)
                  memref::StoreOp::create(
                      b, loc,
                      arith::TruncFOp::create(b, loc, b.getBF16Type(), value),
                      args.out, row.outIndices(col));
                else
                  memref::StoreOp::create(b, loc, value, args.partialOut,
                                          row.partialIndices(col));
              }
          });
        }
      scf::YieldOp::create(b, loc);
    };
  };
  scf::IfOp::create(b, loc, direct, stores(true), stores(false));
}

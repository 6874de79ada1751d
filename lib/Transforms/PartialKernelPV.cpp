//===- PartialKernelPV.cpp - acc = acc·rescale + P·V ----------------------===//
//
// Per format (the plan's PVPath): fp8 and bf16 contract P with V straight
// from the KV tile (V = the first Dv columns); mxfp4 decodes V into bf16
// half tiles first. P comes in two parts (PEncoding: bf16 hi + lo, fp8's
// lo scaled by 2^-4 in the MFMA), both on each V fragment. All are
// wave-level `vector.contract`s that mla-lower-to-mfma distributes over the
// lanes. Each wave computes its share of the Dv columns (all of them unless
// its row group splits them).
//
//===----------------------------------------------------------------------===//

#include "GFX950Kernels.h"

#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mla;

namespace {
constexpr int64_t kThreads = PartialKernelPlan::kThreads;
constexpr int64_t kRowsPerWave = PartialKernelPlan::kRowsPerWave;
constexpr int64_t kVHalfRows = PartialKernelPlan::kVHalfRows;

} // namespace

Value PartialKernel::emitTilePV(OpBuilder &b, Value stage, Value acc, int64_t f,
                                int64_t c) {
  Type elem = elemType(b);
  auto pTileType = VectorType::get({kRowsPerWave, kTileRows}, elem);
  auto vTileType = VectorType::get({kTileRows, plan.accChunkColumns()}, elem);
  auto readP = [&](Value part) {
    return vector::TransferReadOp::create(
        b, loc, pTileType, lds.p,
        ValueRange{rows.rowGroup, part,
                   arith::ConstantIndexOp::create(b, loc, kRowsPerWave * f),
                   c0},
        padElem, ArrayRef<bool>{true, true});
  };
  auto readV = [&] {
    return vector::TransferReadOp::create(
        b, loc, vTileType, lds.kvTiles,
        ValueRange{stage, c0, chunkColumn(b, c)}, padElem,
        ArrayRef<bool>{true, true});
  };
  // Operands are created in a fixed order (C++ leaves argument evaluation
  // order open).
  Value pHiTile = readP(c0);
  Value vTile = readV();
  Value newAcc =
      vector::ContractionOp::create(b, loc, pHiTile, vTile, acc, pvMaps, iters);
  // P's lo part accumulates into the same registers on the same V (the
  // MFMA pass runs both parts per V fragment); fp8's holds 16·(p·448 -
  // hi), its LHS scaled by 2^-4 (a scaled MFMA).
  Value pLoTile = readP(c1);
  auto lo = vector::ContractionOp::create(b, loc, pLoTile, vTile, newAcc,
                                          pvMaps, iters);
  if (strategy.p == PEncoding::Fp8TwoParts)
    lo->setAttr(MLADialect::kLhsExp2AttrName, b.getI64IntegerAttr(-4));
  return lo;
}

/// mxfp4 PV: V's block scales run along the 512 columns, not along the tile
/// rows PV sums over, so they cannot go in the MFMA's scale slot. Each half
/// of the tile (32 rows) is decoded by the workgroup into bf16 in LDS —
/// exact: E2M1 · 2^(e - 127) fits bf16 — and multiplied with P's two bf16
/// parts by bf16 MFMAs. Cost per 64-row tile at Dv = 512: 128 decoded values per
/// thread, two extra barriers, 32 KiB of LDS.
SmallVector<Value> PartialKernel::emitDecodedPV(OpBuilder &b, Value stage,
                                                ArrayRef<Value> accs) {
  SmallVector<Value> acc(accs);
  KernelBuilder k{b, loc};
  Value tid = rows.tid;
  Type i32 = b.getI32Type(), bf16 = b.getBF16Type();
  // The half tile's 32-value blocks, dealt to the threads in runs of
  // consecutive blocks (Dv = 512: two per thread, a quarter row).
  int64_t rowBlocks = vDim / 32, blocks = kVHalfRows * rowBlocks;
  int64_t perThread = (blocks + kThreads - 1) / kThreads;
  auto fp4x8 = VectorType::get({8}, b.getType<Float4E2M1FNType>());
  auto bf16x2 = VectorType::get({2}, bf16);
  auto bf16x8 = VectorType::get({8}, bf16);
  // One block of 32 E2M1 values (16 bytes, low nibble = even element) to
  // bf16 times its E8M0 scale, stored at decoded_v[row, col..col+31]: the chip's
  // scaled conversion turns byte `idx` of a 32-bit word into elements
  // 2·idx and 2·idx + 1, exactly (v_cvt_scalef32_pk_bf16_fp4; e2m1 · 2^k
  // fits bf16). Each word's 8 values are stored at once, which keeps few
  // of them live.
  auto decodeBlock = [&](Value bytes, Value scale, Value row, Value col) {
    Value words = vector::BitCastOp::create(
        b, loc, VectorType::get({4}, i32), bytes);
    for (int64_t w = 0; w < 4; ++w) {
      Value word = vector::FromElementsOp::create(
          b, loc, VectorType::get({1}, i32),
          ValueRange{vector::ExtractOp::create(b, loc, words,
                                               ArrayRef<int64_t>{w})});
      Value codes = vector::BitCastOp::create(b, loc, fp4x8, word);
      Value values = arith::ConstantOp::create(
          b, loc, DenseElementsAttr::get(bf16x8, b.getFloatAttr(bf16, 0.0)));
      for (int64_t idx = 0; idx < 4; ++idx) {
        Value pair = amdgpu::ScaledExtPackedOp::create(b, loc, bf16x2, codes,
                                                       scale, idx);
        values = vector::InsertStridedSliceOp::create(
            b, loc, pair, values, ArrayRef<int64_t>{2 * idx},
            ArrayRef<int64_t>{1});
      }
      vector::StoreOp::create(b, loc, values, lds.decodedV,
                              ValueRange{row, k.add(col, k.idx(8 * w))});
    }
  };
  auto pHalfType = VectorType::get({kRowsPerWave, kVHalfRows}, bf16);
  auto vHalfType = VectorType::get({kVHalfRows, plan.accChunkColumns()}, bf16);
  Value padBf16 = arith::ConstantOp::create(b, loc, b.getFloatAttr(bf16, 0.0));
  for (int64_t half = 0; half < kTileRows / kVHalfRows; ++half) {
    if (half > 0) // the previous half's MFMAs are done with the buffer
      gpu::BarrierOp::create(b, loc);
    for (int64_t j = 0; j < perThread; ++j) {
      Value firstOfThread = k.mul(tid, k.idx(perThread));
      Value blockIdx = k.add(firstOfThread, k.idx(j));
      Value vRow = k.div(blockIdx, k.idx(rowBlocks));
      Value colBlock = k.rem(blockIdx, k.idx(rowBlocks));
      Value col = k.mul(colBlock, k.idx(32));
      auto decode = [&](OpBuilder &bb) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(bb.getInsertionBlock(), bb.getInsertionPoint());
        Value tileRow = k.add(k.idx(half * kVHalfRows), vRow);
        Value bytes = vector::LoadOp::create(
            b, loc, VectorType::get({16}, b.getI8Type()), lds.kvTiles,
            ValueRange{stage, tileRow, k.div(col, k.idx(2))});
        Value scale = tileScaleAsF32(
            k, stage, tileRow, k.div(col, k.idx(32)));
        decodeBlock(bytes, scale, vRow, col);
      };
      if (blocks % kThreads == 0) {
        decode(b);
      } else {
        // Fewer blocks than threads x runs (Dv not a multiple of 256).
        auto inRange = scf::IfOp::create(b, loc, k.lessThan(blockIdx,
                                                            k.idx(blocks)));
        OpBuilder thenBuilder = inRange.getThenBodyBuilder();
        decode(thenBuilder);
      }
      // One block's 32 values at a time: decoding several at once would
      // outgrow the register file.
      amdgpu::SchedBarrierOp::create(b, loc,
                                     amdgpu::sched_barrier_opt_enum::none);
    }
    gpu::BarrierOp::create(b, loc);
    // P's two bf16 parts (PEncoding), one MFMA chain on each V fragment;
    // a column chunk's V fragments feed every fragment of rows.
    auto readP = [&](int64_t f, Value part) {
      return vector::TransferReadOp::create(
          b, loc, pHalfType, lds.p,
          ValueRange{rows.rowGroup, part, k.idx(kRowsPerWave * f),
                     k.idx(half * kVHalfRows)},
          padBf16, ArrayRef<bool>{true, true});
    };
    SmallVector<std::pair<Value, Value>> pParts;
    for (int64_t f = 0; f < plan.fragments(); ++f) {
      Value pHi = readP(f, c0);
      pParts.push_back({pHi, readP(f, c1)});
    }
    int64_t chunks = plan.accChunks();
    for (int64_t c = 0; c < chunks; ++c) {
      Value vTile = vector::TransferReadOp::create(
          b, loc, vHalfType, lds.decodedV, ValueRange{c0, chunkColumn(b, c)},
          padBf16, ArrayRef<bool>{true, true});
      for (auto [f, parts] : llvm::enumerate(pParts)) {
        Value &a = acc[f * chunks + c];
        a = vector::ContractionOp::create(b, loc, parts.first, vTile, a, pvMaps,
                                          iters);
        a = vector::ContractionOp::create(b, loc, parts.second, vTile, a,
                                          pvMaps, iters);
      }
    }
  }
  return acc;
}

Value PartialKernel::tileScaleAsF32(KernelBuilder &k, Value stage,
                                    Value tileRow, Value block) {
  OpBuilder &b = k.b;
  // 2^(s - 127) from the E8M0 bits s: the bits shifted into an f32's
  // exponent (s = 0 gives 0 instead of 2^-127, s = 255 gives inf).
  Value code = arith::BitcastOp::create(
      b, loc, b.getI8Type(), loadTileScale(k, stage, tileRow, block));
  Value bits = arith::ExtUIOp::create(b, loc, b.getI32Type(), code);
  Value shift = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(23));
  Value shifted = arith::ShLIOp::create(b, loc, bits, shift);
  return arith::BitcastOp::create(b, loc, b.getF32Type(), shifted);
}

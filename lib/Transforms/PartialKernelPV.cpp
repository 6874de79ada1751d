//===- PartialKernelPV.cpp - acc = acc·rescale + P·V ----------------------===//
//
// Per format (the plan's PVPath): fp8 and bf16 contract P with V straight
// from the KV tile (V = the first Dv columns; fp8's P in two parts, the lo
// part scaled by 2^-4 in the MFMA); mxfp4 either decodes V into bf16 half
// tiles first, or (ScaledP) reads E2M1 V from the tile with transposed
// nibble loads and moves V's block scales onto P. The first two are
// wave-level `vector.contract`s that mla-lower-to-mfma distributes over the
// lanes; ScaledP issues its MFMAs itself on the accumulator's lane form.
// Each wave computes its share of the Dv columns (all of them unless its
// row group splits them).
//
//===----------------------------------------------------------------------===//

#include "GFX950Kernels.h"

#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/ROCDLDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mla;

namespace {
constexpr int64_t kThreads = PartialKernelPlan::kThreads;
constexpr int64_t kRowsPerWave = PartialKernelPlan::kRowsPerWave;
constexpr int64_t kVHalfRows = PartialKernelPlan::kVHalfRows;

/// Lane `lane` of each row of 16 lanes, broadcast to its row (DPP
/// row_newbcast, gfx90a and later). With full row and bank masks and
/// bound_ctrl the backend folds it into the instruction that uses it.
Value broadcastFromRowLane(OpBuilder &b, Location loc, Value v, int64_t lane) {
  constexpr int32_t kRowNewBcast = 0x150;
  Value old = LLVM::PoisonOp::create(b, loc, v.getType());
  return ROCDL::DPPUpdateOp::create(b, loc, v.getType(), old, v,
                                    kRowNewBcast + lane, /*rowMask=*/0xf,
                                    /*bankMask=*/0xf, /*boundCtrl=*/true);
}

/// An i32 of eight E2M1 codes as eight bf16 at scale 1 (exact), two an
/// instruction (v_cvt_scalef32_pk_bf16_fp4).
Value e2m1WordAsBf16(OpBuilder &b, Location loc, Value word) {
  Type bf16 = b.getBF16Type();
  auto bf16x8 = VectorType::get({8}, bf16);
  Value packed = vector::BitCastOp::create(
      b, loc, VectorType::get({8}, b.getType<Float4E2M1FNType>()),
      vector::FromElementsOp::create(
          b, loc, VectorType::get({1}, b.getI32Type()), ValueRange{word}));
  Value one = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0));
  Value values = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(bf16x8, b.getFloatAttr(bf16, 0.0)));
  for (int64_t j = 0; j < 4; ++j) {
    Value pair = amdgpu::ScaledExtPackedOp::create(
        b, loc, VectorType::get({2}, bf16), packed, one, j);
    values = vector::InsertStridedSliceOp::create(
        b, loc, pair, values, ArrayRef<int64_t>{2 * j}, ArrayRef<int64_t>{1});
  }
  return values;
}
} // namespace

Value PartialKernel::emitPV(OpBuilder &b, Value stage, Value acc, int64_t f,
                            int64_t c) {
  // mxfp4's paths serve one fragment a wave (the plan's rows_per_wave 16).
  switch (strategy.pv) {
  case PVPath::DecodedHalfTiles:
    return emitDecodedPV(b, stage, acc);
  case PVPath::ScaledP:
    return emitScaledPPV(b, stage, acc);
  case PVPath::FromTile:
    break;
  }
  return emitTilePV(b, stage, acc, f, c);
}

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
  if (strategy.p == PEncoding::Fp8TwoParts) {
    // P's lo part holds 16·(p·448 - hi): it accumulates into the same
    // registers with the LHS scaled by 2^-4 (a scaled MFMA), on the same V
    // (the MFMA pass runs both parts per V fragment).
    Value pLoTile = readP(c1);
    auto lo = vector::ContractionOp::create(b, loc, pLoTile, vTile, newAcc,
                                            pvMaps, iters);
    lo->setAttr(MLADialect::kLhsExp2AttrName, b.getI64IntegerAttr(-4));
    newAcc = lo;
  }
  return newAcc;
}

/// mxfp4 PV: V's block scales run along the 512 columns, not along the tile
/// rows PV sums over, so they cannot go in the MFMA's scale slot. Each half
/// of the tile (32 rows) is decoded by the workgroup into bf16 in LDS —
/// exact: E2M1 · 2^(e - 127) fits bf16 — and multiplied with P (bf16) by
/// bf16 MFMAs. Cost per 64-row tile at Dv = 512: 128 decoded values per
/// thread, two extra barriers, 32 KiB of LDS.
Value PartialKernel::emitDecodedPV(OpBuilder &b, Value stage, Value acc) {
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
  auto vHalfType = VectorType::get({kVHalfRows, plan.vColumnsPerWave()}, bf16);
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
    Value pTile = vector::TransferReadOp::create(
        b, loc, pHalfType, lds.p,
        ValueRange{rows.rowGroup, c0, c0, k.idx(half * kVHalfRows)}, padBf16,
        ArrayRef<bool>{true, true});
    Value vTile = vector::TransferReadOp::create(
        b, loc, vHalfType, lds.decodedV, ValueRange{c0, rows.vColBase},
        padBf16, ArrayRef<bool>{true, true});
    acc = vector::ContractionOp::create(b, loc, pTile, vTile, acc, pvMaps,
                                        iters);
  }
  return acc;
}

/// mxfp4 without a decoded copy of V. O[h][d] = sum_r P[h][r] · s[r][d/32]
/// · e[r][d]: per 32-column block of V the wave multiplies its P rows by
/// the rows' block scales (f32, exact: powers of two) and rounds to bf16,
/// while V's E2M1 codes e come from the tile as they are, by transposed
/// nibble loads (ds_read_b64_tr_b4), converted to bf16 at scale 1 (exact).
/// In each 64 tile rows (a 128-row tile has two), lane 16·kg + s names
/// row 16·kg + s and gets column s of the 16 columns at the load's byte,
/// rows 16·kg .. 16·kg + 15 as nibbles 0..15 (docs/mfma-layouts.md §6):
/// the B fragments of two 16x16x32 bf16
/// MFMAs, K-step 0 taking rows 16·kg + 0..7 and K-step 1 rows 16·kg +
/// 8..15 of each lane group; the A fragments (row s = head, the same
/// rows) come from the row group's f32 P. Every lane of a lane group needs
/// the same 16 rows' scales: lane 16·kg + s reads only its own row's (one
/// byte a block, from the tile) and the group shares them by DPP row
/// broadcasts folded into the multiplies (v_mul_f32_dpp row_newbcast),
/// instead of each lane reading all 16 from LDS. The products equal the
/// decoded path's: bf16(p · 2^k) = bf16(p) · 2^k. The accumulator is used
/// in its lane form (mla-lower-to-mfma's C/D layout: elements 4·nb + r hold
/// rows 4·kg + r of column 16·nb + s).
Value PartialKernel::emitScaledPPV(OpBuilder &b, Value stage, Value acc) {
  KernelBuilder k{b, loc};
  auto laneAccType =
      VectorType::get({plan.vColumnsPerWave() / 16 * 4}, b.getF32Type());
  Value laneAcc =
      UnrealizedConversionCastOp::create(b, loc, laneAccType, acc).getResult(0);
  Value kg = k.div(rows.lane, k.idx(16));
  // The tile's 64-row chunks in turn: lane group kg takes rows 64·chunk +
  // 16·kg .. + 15 of each.
  for (int64_t chunk = 0; chunk < kTileRows / 64; ++chunk)
    laneAcc = emitScaledPVRows(b, stage, laneAcc,
                               k.add(k.idx(64 * chunk), k.mul(kg, k.idx(16))));
  return UnrealizedConversionCastOp::create(b, loc, acc.getType(), laneAcc)
      .getResult(0);
}

Value PartialKernel::emitScaledPVRows(OpBuilder &b, Value stage, Value laneAcc,
                                      Value firstRow) {
  KernelBuilder k{b, loc};
  Type f32 = b.getF32Type(), bf16 = b.getBF16Type(), i32 = b.getI32Type();
  Type fp4 = b.getType<Float4E2M1FNType>();
  int64_t columns = plan.vColumnsPerWave();
  Value s = k.rem(rows.lane, k.idx(16));
  auto f32x16 = VectorType::get({16}, f32);
  Value firstBlock = k.div(rows.vColBase, k.idx(32));
  Value firstByte = k.div(rows.vColBase, k.idx(2));
  auto half = [&](Value v, int64_t h) {
    return vector::ExtractStridedSliceOp::create(
        b, loc, v, ArrayRef<int64_t>{8 * h}, ArrayRef<int64_t>{8},
        ArrayRef<int64_t>{1});
  };
  Value pRow = vector::LoadOp::create(
      b, loc, f32x16, lds.p, ValueRange{rows.rowGroup, c0, s, firstRow});
  Value laneRow = k.add(firstRow, s);
  // The lane's own row's scales, all blocks loaded before any is used.
  SmallVector<Value> ownScales;
  for (int64_t blk = 0; blk < columns / 32; ++blk)
    ownScales.push_back(
        tileScaleAsF32(k, stage, laneRow, k.add(firstBlock, k.idx(blk))));
  for (int64_t blk = 0; blk < columns / 32; ++blk) {
    SmallVector<Value> products;
    for (int64_t j = 0; j < 16; ++j) {
      Value p = vector::ExtractOp::create(b, loc, pRow, ArrayRef<int64_t>{j});
      products.push_back(arith::MulFOp::create(
          b, loc, p, broadcastFromRowLane(b, loc, ownScales[blk], j)));
    }
    Value pScaled = vector::FromElementsOp::create(b, loc, f32x16, products);
    Value a =
        arith::TruncFOp::create(b, loc, VectorType::get({16}, bf16), pScaled);
    Value aSteps[2] = {half(a, 0), half(a, 1)};
    for (int64_t ct = 0; ct < 2; ++ct) {
      int64_t nb = 2 * blk + ct;
      Value codes = amdgpu::TransposeLoadOp::create(
          b, loc, VectorType::get({16}, fp4), lds.kvTiles,
          ValueRange{stage, laneRow, k.add(firstByte, k.idx(8 * nb))});
      Value words =
          vector::BitCastOp::create(b, loc, VectorType::get({2}, i32), codes);
      Value block = vector::ExtractStridedSliceOp::create(
          b, loc, laneAcc, ArrayRef<int64_t>{4 * nb}, ArrayRef<int64_t>{4},
          ArrayRef<int64_t>{1});
      for (int64_t h = 0; h < 2; ++h) {
        // Word h: rows firstRow + 8h + 0..7, byte j = rows 2j and 2j + 1.
        Value word =
            vector::ExtractOp::create(b, loc, words, ArrayRef<int64_t>{h});
        block = amdgpu::MFMAOp::create(
            b, loc, block.getType(), /*m=*/16, /*n=*/16, /*k=*/32,
            /*blocks=*/1, aSteps[h], e2m1WordAsBf16(b, loc, word), block,
            /*cbsz=*/0, /*abid=*/0, amdgpu::MFMAPermB::none,
            /*reducePrecision=*/false, /*negateA=*/false, /*negateB=*/false,
            /*negateC=*/false);
      }
      laneAcc = vector::InsertStridedSliceOp::create(
          b, loc, block, laneAcc, ArrayRef<int64_t>{4 * nb},
          ArrayRef<int64_t>{1});
    }
  }
  return laneAcc;
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

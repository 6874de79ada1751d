//===- PartialKernelQK.cpp - S = Q·Kᵀ on the KV tile ----------------------===//
//
// Per format (the plan's QKPath): bf16 runs bf16 MFMAs on the wave's Q tile
// (read once, before the loop) and K as it is; fp8 and mxfp4 run scaled
// MFMAs at the MFMA level with Q resident in registers in two fp8 parts with
// per-head power-of-two scales (mxfp4 adds K's E8M0 block scales). A wave
// scores its share of the tile's rows (all of them unless its row group
// splits the tile) into its row group's score buffer in LDS.
//
//===----------------------------------------------------------------------===//

#include "GFX950Kernels.h"

#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mla;

namespace {
constexpr int64_t kRowsPerWave = PartialKernelPlan::kRowsPerWave;
} // namespace

void PartialKernel::emitQPreload(OpBuilder &b) {
  KernelBuilder k{b, loc};
  // log2(e) · sm_scale (· kv_scale for fp8) turns the raw MFMA products into
  // exp2-domain scores (mxfp4: Q's and K's scales are in the MFMAs).
  scoreScale = k.f32(op.getEffectiveSmScale() * 1.4426950408889634);
  if (strategy.qk == QKPath::ScaledMfma && !strategy.blockScales) {
    // fp8: Q's scales are in the MFMAs; K's per-tensor scale joins the
    // score scale.
    kvScale = k.load(args.kvScale, {c0});
    scoreScale = k.fmul(kvScale, scoreScale);
  }
  // fp8 and mxfp4: Q as A fragments of the scaled MFMAs (two fp8 parts with
  // a per-head power-of-two scale), in registers for the whole KV loop; Q's
  // and K's scales both go into the instructions.
  qFrags.clear();
  if (strategy.qk == QKPath::ScaledMfma)
    for (int64_t f = 0; f < plan.fragments(); ++f)
      qFrags.push_back(buildScaledQFragments(b, f));
}

void PartialKernel::emitBf16QTile(OpBuilder &b) {
  // The MFMA pass loads its fragments here, before the loop, and they stay
  // in registers: one 16-row tile a fragment.
  qTileBf16.clear();
  for (int64_t f = 0; f < plan.fragments(); ++f)
    qTileBf16.push_back(vector::TransferReadOp::create(
        b, loc, VectorType::get({kRowsPerWave, qkDim}, elemType(b)), args.q,
        ValueRange{rows.tokenRow, fragmentFirstHead(b, f), c0}, padElem,
        ArrayRef<bool>{true, true}));
}

SmallVector<Value, 2> PartialKernel::emitQK(OpBuilder &b, Value stage) {
  if (strategy.qk == QKPath::ScaledMfma)
    return emitScaledQK(b, stage);
  emitBf16QK(b, stage);
  return {};
}

/// bf16 caches: bf16 MFMAs on Q (read before the loop) and K as they are,
/// a wave-level contraction on a fragment's 16 heads x the wave's tile rows,
/// one a fragment (their K reads are the same loads).
void PartialKernel::emitBf16QK(OpBuilder &b, Value stage) {
  Type elem = elemType(b), f32 = b.getF32Type();
  int64_t kvRows = plan.kvRowsPerWave();
  auto kTileType = VectorType::get({kvRows, qkDim}, elem);
  auto sType = VectorType::get({kRowsPerWave, kvRows}, f32);
  Value sZero = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(sType, b.getF32FloatAttr(0.0)));
  for (int64_t f = 0; f < plan.fragments(); ++f) {
    Value kTile = vector::TransferReadOp::create(
        b, loc, kTileType, lds.kvTiles, ValueRange{stage, rows.kvRowBase, c0},
        padElem, ArrayRef<bool>{true, true});
    Value scores = vector::ContractionOp::create(b, loc, qTileBf16[f], kTile,
                                                 sZero, qkMaps, iters);
    vector::TransferWriteOp::create(
        b, loc, scores, lds.scores,
        ValueRange{rows.rowGroup,
                   arith::ConstantIndexOp::create(b, loc, kRowsPerWave * f),
                   rows.kvRowBase},
        ArrayRef<bool>{true, true});
  }
}

/// Lane 16·kg + i holds, per 128-wide K chunk, Q[head i][16·kg + e] (e <
/// 16) and Q[head i][64 + 16·kg + e] of the chunk — the A layout of the
/// scaled MFMA — as fp8 in two parts: q·2^-e ≈ hi + lo/16, with 2^e a power
/// of two per head (floor(log2 amax) - 7, so |q·2^-e| < 256) that the
/// instruction's A scale puts back exactly. A last chunk of 64 columns
/// (Dqk = 576: the rope part) holds their hi part in its first half and lo
/// in its second: one MFMA against K's columns repeated, not two against
/// zero padding.
PartialKernel::ScaledQFragments
PartialKernel::buildScaledQFragments(OpBuilder &b, int64_t f) {
  KernelBuilder k{b, loc};
  Value lane = rows.lane;
  Type f32 = b.getF32Type(), i32 = b.getI32Type();
  Type fp8 = b.getType<Float8E4M3FNType>(), e8m0 = b.getType<Float8E8M0FNUType>();
  Value kg = k.div(lane, k.idx(16)), li = k.rem(lane, k.idx(16));
  Value head = k.add(fragmentFirstHead(b, f), li);
  Value laneK = k.mul(kg, k.idx(16));
  auto f32x16 = VectorType::get({16}, f32);
  auto f8x16 = VectorType::get({16}, fp8);
  int64_t chunks = paddedQK / 128;
  // The lane's 16-element run of each 64 columns: run 2·c + half is half
  // `half` of chunk c (Dqk is a multiple of 64).
  SmallVector<Value> runs;
  Value amax = k.f32(0.0);
  for (int64_t base = 0; base < qkDim; base += 64) {
    Value raw = vector::LoadOp::create(
        b, loc, VectorType::get({16}, b.getBF16Type()), args.q,
        ValueRange{rows.tokenRow, head, k.add(k.idx(base), laneK)});
    Value v = arith::ExtFOp::create(b, loc, f32x16, raw);
    runs.push_back(v);
    amax = k.fmax(amax, vector::ReductionOp::create(
                            b, loc, vector::CombiningKind::MAXIMUMF,
                            math::AbsFOp::create(b, loc, v)));
  }
  // The four lanes of head i (i, i + 16, i + 32, i + 48) cover its row.
  amax = k.laneReduce(amax, {16, 32}, /*isMax=*/true);
  // E8M0 byte of 2^e: the exponent field of amax minus 7, within [5, 254]
  // (amax = 0 gives 2^-120: any scale works for zeros).
  Value expBits = arith::ShRUIOp::create(
      b, loc, arith::BitcastOp::create(b, loc, i32, amax),
      arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(23)));
  auto i32c = [&](int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v))
        .getResult();
  };
  Value byte = arith::MinSIOp::create(
      b, loc,
      arith::MaxSIOp::create(b, loc,
                             arith::SubIOp::create(b, loc, expBits, i32c(7)),
                             i32c(5)),
      i32c(254));
  auto toE8M0 = [&](Value bits) {
    return arith::BitcastOp::create(
               b, loc, e8m0,
               arith::TruncIOp::create(b, loc, b.getI8Type(), bits))
        .getResult();
  };
  ScaledQFragments frags;
  frags.scaleHi = toE8M0(byte);
  frags.scaleLo = toE8M0(arith::SubIOp::create(b, loc, byte, i32c(4)));
  // 2^-e as f32: exponent field 254 - byte.
  Value inv = arith::BitcastOp::create(
      b, loc, f32,
      arith::ShLIOp::create(b, loc,
                            arith::SubIOp::create(b, loc, i32c(254), byte),
                            i32c(23)));
  Value invVec = vector::BroadcastOp::create(b, loc, f32x16, inv);
  Value sixteen = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(f32x16, b.getF32FloatAttr(16.0)));
  SmallVector<int64_t> concat;
  for (int64_t e = 0; e < 32; ++e)
    concat.push_back(e);
  for (int64_t c = 0; c < chunks; ++c) {
    Value hiRuns[2], loRuns[2];
    bool tail = c * 128 + 64 >= qkDim;
    for (int64_t half = 0; half < (tail ? 1 : 2); ++half) {
      Value scaled = arith::MulFOp::create(b, loc, runs[2 * c + half], invVec);
      hiRuns[half] = arith::TruncFOp::create(b, loc, f8x16, scaled);
      Value residual = arith::MulFOp::create(
          b, loc,
          arith::SubFOp::create(
              b, loc, scaled,
              arith::ExtFOp::create(b, loc, f32x16, hiRuns[half])),
          sixteen);
      loRuns[half] = arith::TruncFOp::create(b, loc, f8x16, residual);
    }
    if (tail) {
      frags.tail =
          vector::ShuffleOp::create(b, loc, hiRuns[0], loRuns[0], concat);
      // Lane 16·kg + i supplies head i's scale of K block kg: blocks 0-1
      // (K 0..63) hold hi, 2-3 lo.
      frags.scaleTail = arith::SelectOp::create(
          b, loc, k.lessThan(kg, k.idx(2)), frags.scaleHi, frags.scaleLo);
      continue;
    }
    frags.hi.push_back(
        vector::ShuffleOp::create(b, loc, hiRuns[0], hiRuns[1], concat));
    frags.lo.push_back(
        vector::ShuffleOp::create(b, loc, loRuns[0], loRuns[1], concat));
  }
  return frags;
}

Value PartialKernel::fp8Fragment(OpBuilder &b, Value stage, Value tileRow,
                                 int64_t chunkBase, Value laneK) {
  KernelBuilder k{b, loc};
  auto run16 = VectorType::get({16}, b.getType<Float8E4M3FNType>());
  auto load = [&](int64_t base) {
    return vector::LoadOp::create(b, loc, run16, lds.kvTiles,
                                  ValueRange{stage, tileRow,
                                             k.add(k.idx(base), laneK)})
        .getResult();
  };
  Value runs[2] = {load(chunkBase), Value()};
  runs[1] = chunkBase + 64 >= qkDim ? runs[0] : load(chunkBase + 64);
  SmallVector<int64_t> concat;
  for (int64_t e = 0; e < 32; ++e)
    concat.push_back(e);
  return vector::ShuffleOp::create(b, loc, runs[0], runs[1], concat);
}

/// fp8 and mxfp4 QK at the MFMA level — `vector.contract` has no scaled form:
/// per 16 tile rows and 128-wide K chunk two `amdgpu.scaled_mfma 16x16x128`
/// (Q's hi and lo parts) with A = the K bytes straight from the LDS tile
/// (mxfp4: packed E2M1), each lane feeding the E8M0 scale of its own
/// 32-element K block (docs/mfma-layouts.md §2), and B = Q; a last chunk of
/// 64 columns is one MFMA, its A the 64 columns twice (against Q's hi, then
/// lo). The MFMAs compute S transposed, so the scores stay in the lanes
/// the softmax wants them in: lane 16·q + i holds Sᵀ[16·nb + 4·q + r][i],
/// head i's scores of the block's rows 4·q .. 4·q + 3, element 4·nb + r of
/// the returned vector of its fragment (head 16·f + i of the group). Each
/// K fragment feeds every fragment's MFMAs.
SmallVector<Value, 2> PartialKernel::emitScaledQK(OpBuilder &b, Value stage) {
  KernelBuilder k{b, loc};
  Value lane = rows.lane;
  Value kg = k.div(lane, k.idx(16)), li = k.rem(lane, k.idx(16));
  auto accType = VectorType::get({4}, b.getF32Type());
  Value accZero = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(accType, b.getF32FloatAttr(0.0)));
  auto i32Attr = [&](int64_t v) { return b.getI32IntegerAttr(v); };
  auto mfma = [&](ScaledKFragment aFrag, Value q, Value scaleQ, Value acc) {
    return amdgpu::ScaledMFMAOp::create(b, loc, accType, i32Attr(16),
                                        i32Attr(16), i32Attr(128), aFrag.values,
                                        q, acc, aFrag.scale, scaleQ, i32Attr(0),
                                        i32Attr(0))
        .getResult();
  };
  int64_t blocks = plan.kvRowsPerWave() / 16;
  int64_t fragments = plan.fragments();
  auto scoresType = VectorType::get({4 * blocks}, b.getF32Type());
  Value zeroScores = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(scoresType, b.getF32FloatAttr(0.0)));
  SmallVector<Value, 2> scores(fragments, zeroScores);
  int64_t wholeChunks = qkDim / 128;
  int64_t chunks = wholeChunks + (qkDim % 128 != 0 ? 1 : 0);
  for (int64_t nb = 0; nb < blocks; ++nb) {
    Value tileRow = k.add(rows.kvRowBase, k.add(k.idx(16 * nb), li));
    SmallVector<Value, 2> acc(fragments, accZero);
    for (int64_t c = 0; c < chunks; ++c) {
      ScaledKFragment kFrag = scaledKFragment(b, stage, tileRow, c * 128, kg);
      for (int64_t f = 0; f < fragments; ++f) {
        const ScaledQFragments &q = qFrags[f];
        if (c == wholeChunks) { // the last 64 columns: hi and lo in one
          acc[f] = mfma(kFrag, q.tail, q.scaleTail, acc[f]);
          continue;
        }
        // Q = hi + lo/16: two MFMAs, the second with Q's scale 2^(e-4).
        acc[f] = mfma(kFrag, q.hi[c], q.scaleHi, acc[f]);
        acc[f] = mfma(kFrag, q.lo[c], q.scaleLo, acc[f]);
      }
    }
    for (int64_t f = 0; f < fragments; ++f)
      scores[f] = vector::InsertStridedSliceOp::create(
          b, loc, acc[f], scores[f], ArrayRef<int64_t>{4 * nb},
          ArrayRef<int64_t>{1});
  }
  return scores;
}

PartialKernel::ScaledKFragment
PartialKernel::scaledKFragment(OpBuilder &b, Value stage, Value tileRow,
                               int64_t chunkBase, Value kg) {
  KernelBuilder k{b, loc};
  if (strategy.blockScales) {
    // B: 32 E2M1 values (16 bytes) of K block kg of the chunk (K 32·kg ..
    // 32·kg + 31; in a 64-wide chunk block kg % 2), with its E8M0 scale.
    Value block = chunkBase + 64 >= qkDim ? k.rem(kg, k.idx(2)) : kg;
    Value bytes = vector::LoadOp::create(
        b, loc, VectorType::get({16}, b.getI8Type()), lds.kvTiles,
        ValueRange{stage, tileRow,
                   k.add(k.idx(chunkBase / 2), k.mul(block, k.idx(16)))});
    Value values = vector::BitCastOp::create(
        b, loc, VectorType::get({32}, b.getType<Float4E2M1FNType>()), bytes);
    Value scale = loadTileScale(k, stage, tileRow,
                                k.add(k.idx(chunkBase / 32), block));
    return {values, scale};
  }
  // fp8: the per-tensor scale applies to the scores later: the B scale is 1.
  Value scale = arith::ConstantOp::create(
      b, loc, b.getType<Float8E8M0FNUType>(),
      b.getFloatAttr(b.getType<Float8E8M0FNUType>(), 1.0));
  return {fp8Fragment(b, stage, tileRow, chunkBase, k.mul(kg, k.idx(16))),
          scale};
}

Value PartialKernel::loadTileScale(KernelBuilder &k, Value stage,
                                   Value tileRow, Value block) {
  // Block b of a row is byte b % 2 of unit b / 2; unit u sits in word u.
  Value unit = k.add(k.mul(tileRow, k.idx(plan.scaleUnitsPerRow())),
                     k.div(block, k.idx(2)));
  Value byte = k.add(k.mul(unit, k.idx(4)), k.rem(block, k.idx(2)));
  return k.load(lds.tileScales, {stage, byte});
}

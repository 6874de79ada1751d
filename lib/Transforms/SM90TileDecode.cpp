//===- SM90TileDecode.cpp - sm_90a: a KV tile decoded into shared memory --===//
//
// Every cache format enters the tile exactly: bf16 is copied, an fp8 e4m3
// code (without its per-tensor scale) becomes f16 by the hardware's
// cvt.rn.f16x2.e4m3x2 (the fp8 kernel's operands are f16), an E2M1 value
// times its E8M0 block scale is a bf16 number, looked up by prmt and
// scaled by bf16x2 multiplies (sm_90a has no fp4 conversion). Tile rows
// past the item repeat its last position; their scores are masked.
//
//===----------------------------------------------------------------------===//

#include "SM90Kernels.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mla;

namespace {
constexpr int64_t kThreads = SM90KernelPlan::kThreads;
/// Bytes of a cache row each thread moves per step: one 16-byte load.
constexpr int64_t kChunk = 16;

/// prmt (default mode): byte i of the result is byte selector.nibble(i)
/// of the 8 bytes {hi, lo}.
Value permute(OpBuilder &b, Location loc, Value lo, Value hi, Value selector) {
  return NVVM::PermuteOp::create(
      b, loc, b.getI32Type(), lo, hi, selector,
      NVVM::PermuteModeAttr::get(b.getContext(), NVVM::PermuteMode::DEFAULT));
}

/// 32 E2M1 codes (16 bytes, low nibble first) times their block's E8M0
/// scale, as 32 bf16. Each E2M1 magnitude's bf16 bytes come from two
/// 8-entry tables by prmt (four values an instruction), the signs by
/// shifts, and the scale (2^(s - 127), a bf16: s = 0 gives 0, s = 255
/// infinity, as the gfx950 kernel) by bf16x2 multiplies, exactly.
Value e2m1ToBf16(OpBuilder &b, Location loc, Value bytes, Value scaleCode) {
  KernelBuilder k{b, loc};
  auto pairType = VectorType::get({2}, b.getBF16Type());
  auto i32x1 = VectorType::get({1}, b.getI32Type());
  Value words = vector::BitCastOp::create(
      b, loc, VectorType::get({4}, b.getI32Type()), bytes);
  // The scale's bf16 bits, twice.
  Value s = arith::ExtUIOp::create(b, loc, b.getI32Type(), scaleCode);
  Value half = arith::ShLIOp::create(b, loc, s, k.i32(7));
  Value scalePair = arith::OrIOp::create(
      b, loc, half, arith::ShLIOp::create(b, loc, half, k.i32(16)));
  auto asPair = [&](Value i32) {
    return vector::BitCastOp::create(
        b, loc, pairType, vector::BroadcastOp::create(b, loc, i32x1, i32));
  };
  Value scale = asPair(scalePair);
  // bf16 of 0, 0.5, 1, 1.5, 2, 3, 4, 6: high and low bytes.
  Value highLo = k.i32(0x3F3F3F00), highHi = k.i32(0x40404040);
  Value lowLo = k.i32(0xC0800000), lowHi = k.i32(0xC0804000);
  SmallVector<Value> pairs;
  for (int64_t w = 0; w < 4; ++w) {
    Value word = vector::ExtractOp::create(b, loc, words, ArrayRef<int64_t>{w});
    Value magnitudes =
        arith::AndIOp::create(b, loc, word, k.i32(0x77777777));
    for (int64_t quad = 0; quad < 2; ++quad) {
      // Values 4 quad .. 4 quad + 3: prmt reads the selector's low 16 bits.
      Value selector = quad == 0 ? magnitudes
                                 : arith::ShRUIOp::create(b, loc, magnitudes,
                                                          k.i32(16));
      Value high = permute(b, loc, highLo, highHi, selector);
      Value low = permute(b, loc, lowLo, lowHi, selector);
      for (int64_t p = 0; p < 2; ++p) {
        // Bytes (low j, high j, low j+1, high j+1) for j = 2 p.
        int64_t j = 2 * p;
        Value bits = permute(b, loc, low, high,
                             k.i32(j | (j + 4) << 4 |
                                                  (j + 1) << 8 | (j + 5) << 12));
        // The values' sign bits (bits 3 and 7 of their byte) to 15 and 31.
        int64_t v = 4 * quad + j, bit = 4 * v + 3;
        Value moved =
            bit <= 15
                ? Value(arith::ShLIOp::create(b, loc, word,
                                              k.i32(15 - bit)))
                : Value(arith::ShRUIOp::create(b, loc, word,
                                               k.i32(bit - 15)));
        Value sign0 =
            arith::AndIOp::create(b, loc, moved, k.i32(0x8000));
        Value sign1 = arith::AndIOp::create(
            b, loc,
            arith::ShLIOp::create(b, loc, word, k.i32(31 - bit - 4)),
            k.i32(0x80000000));
        bits = arith::OrIOp::create(
            b, loc, bits, arith::OrIOp::create(b, loc, sign0, sign1));
        pairs.push_back(arith::MulFOp::create(b, loc, asPair(bits), scale));
      }
    }
  }
  SmallVector<Value> values;
  for (Value pair : pairs)
    for (int64_t e = 0; e < 2; ++e)
      values.push_back(vector::ExtractOp::create(b, loc, pair, ArrayRef<int64_t>{e}));
  return vector::FromElementsOp::create(
      b, loc, VectorType::get({32}, b.getBF16Type()), values);
}

/// 16 e4m3 codes as f16 by the hardware's pairwise conversion
/// (cvt.rn.f16x2.e4m3x2: exact, e4m3 is a subset of f16).
Value fp8ToF16(OpBuilder &b, Location loc, Value codes) {
  auto pairType = VectorType::get({2}, b.getF16Type());
  SmallVector<Value> halves;
  for (int64_t i = 0; i < kChunk; i += 2) {
    Value pair = vector::ShuffleOp::create(b, loc, codes, codes,
                                           ArrayRef<int64_t>{i, i + 1});
    Value h = NVVM::ConvertF8x2ToF16x2Op::create(
        b, loc, pairType, pair, /*relu=*/false, b.getType<Float8E4M3FNType>());
    for (int64_t e = 0; e < 2; ++e)
      halves.push_back(
          vector::ExtractOp::create(b, loc, h, ArrayRef<int64_t>{e}));
  }
  return vector::FromElementsOp::create(
      b, loc, VectorType::get({kChunk}, b.getF16Type()), halves);
}

} // namespace

int64_t SM90PartialKernel::chunkValues() const {
  return format == CacheFormat::BF16 ? 8 : format == CacheFormat::FP8 ? 16 : 32;
}

int64_t SM90PartialKernel::tileChunks() const {
  return tile * (qkDim / chunkValues());
}

/// Chunk e of the tile (row-major over the tile's rows): the thread's
/// slot s holds chunk tid + 256 s; a last slot past the tile reloads the
/// tile's last chunk and is not stored.
SmallVector<Value> SM90PartialKernel::emitTileLoads(OpBuilder &b,
                                                    Value tileStart) {
  KernelBuilder k{b, loc};
  int64_t rowChunks = qkDim / chunkValues();
  int64_t slots = (tileChunks() + kThreads - 1) / kThreads;
  SmallVector<Value> loaded;
  for (int64_t slot = 0; slot < slots; ++slot) {
    Value e = k.minS(k.add(thread.tid, k.idx(kThreads * slot)),
                     k.idx(tileChunks() - 1));
    Value r = k.div(e, k.idx(rowChunks));
    Value chunk = k.rem(e, k.idx(rowChunks));
    Value pos = k.minS(k.add(tileStart, r), item.lastPos);
    Value row = cacheRow(b, pos);
    Type elem = format == CacheFormat::BF16 ? Type(b.getBF16Type())
                                            : Type(b.getI8Type());
    int64_t count = format == CacheFormat::BF16 ? 8 : kChunk;
    Value col = k.mul(chunk, k.idx(count));
    loaded.push_back(vector::LoadOp::create(
        b, loc, VectorType::get({count}, elem), args.kv, ValueRange{row, col},
        /*nontemporal=*/false, llvm::Align(kChunk)));
    if (format == CacheFormat::MXFP4)
      loaded.push_back(k.load(args.kvScale, {row, chunk}));
  }
  return loaded;
}

void SM90PartialKernel::emitTileStores(OpBuilder &b, ValueRange loaded) {
  KernelBuilder k{b, loc};
  int64_t values = chunkValues(), rowChunks = qkDim / values;
  int64_t perSlot = format == CacheFormat::MXFP4 ? 2 : 1;
  int64_t slots = static_cast<int64_t>(loaded.size()) / perSlot;
  for (int64_t slot = 0; slot < slots; ++slot) {
    Value e = k.add(thread.tid, k.idx(kThreads * slot));
    Value r = k.div(e, k.idx(rowChunks));
    Value col = k.mul(k.rem(e, k.idx(rowChunks)), k.idx(values));
    Value raw = loaded[perSlot * slot];
    auto store = [&] {
      Value v = raw;
      if (format == CacheFormat::FP8)
        v = fp8ToF16(b, loc, raw);
      else if (format == CacheFormat::MXFP4)
        v = e2m1ToBf16(b, loc, raw, loaded[perSlot * slot + 1]);
      vector::StoreOp::create(b, loc, v, smem.tile, ValueRange{r, col},
                              /*nontemporal=*/false, llvm::Align(kChunk));
    };
    if (kThreads * (slot + 1) <= tileChunks())
      store();
    else
      ifThen(b, loc, k.lessThan(e, k.idx(tileChunks())), store);
  }
}

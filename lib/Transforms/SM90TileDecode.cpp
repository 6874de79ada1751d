//===- SM90TileDecode.cpp - sm_90a: a KV tile decoded into shared memory --===//
//
// Every cache format becomes bf16 in the tile, exactly: bf16 is copied, an
// fp8 e4m3 code (without its per-tensor scale) and an E2M1 value times its
// E8M0 block scale are bf16 numbers. fp8 pairs go through the hardware's
// cvt.rn.f16x2.e4m3x2; E2M1 codes are decoded with integer operations
// (sm_90a has no fp4 conversion). Tile rows past the item repeat its last
// position; their scores are masked.
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

/// Bit operations on i32 vectors (one lane per cache value).
struct Bits {
  OpBuilder &b;
  Location loc;
  VectorType i32, f32;
  Bits(OpBuilder &b, Location loc, int64_t n)
      : b(b), loc(loc), i32(VectorType::get({n}, b.getI32Type())),
        f32(VectorType::get({n}, b.getF32Type())) {}

  Value c(int64_t v) {
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(i32, b.getI32IntegerAttr(v)));
  }
  Value andI(Value x, int64_t m) { return arith::AndIOp::create(b, loc, x, c(m)); }
  Value orI(Value x, Value y) { return arith::OrIOp::create(b, loc, x, y); }
  Value shl(Value x, int64_t s) { return arith::ShLIOp::create(b, loc, x, c(s)); }
  Value shr(Value x, int64_t s) { return arith::ShRUIOp::create(b, loc, x, c(s)); }
  Value add(Value x, int64_t v) { return arith::AddIOp::create(b, loc, x, c(v)); }
  Value ult(Value x, int64_t v) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, x, c(v));
  }
  Value eq(Value x, int64_t v) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, x, c(v));
  }
  Value select(Value cond, Value x, Value y) {
    return arith::SelectOp::create(b, loc, cond, x, y);
  }
  Value asF32(Value x) { return arith::BitcastOp::create(b, loc, f32, x); }
  Value asI32(Value x) { return arith::BitcastOp::create(b, loc, i32, x); }
  Value widen(Value bytes) { return arith::ExtUIOp::create(b, loc, i32, bytes); }

  /// E2M1 codes (the low four bits) as f32.
  Value e2m1(Value nibble) {
    Value mag = andI(nibble, 7);
    Value sign = shl(andI(nibble, 8), 28);
    // (1 + m/2) · 2^(e-1) for e >= 1; m · 0.5 for e = 0.
    Value normal = add(shl(mag, 22), 126 << 23);
    Value half = select(eq(mag, 1), c(0x3f000000), c(0));
    return asF32(orI(select(ult(mag, 2), half, normal), sign));
  }
};

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

/// 2^(s - 127) from E8M0 bits s (as the gfx950 kernel: s = 0 gives 0,
/// s = 255 infinity).
Value e8m0(OpBuilder &b, Location loc, Value code) {
  Value bits = arith::ExtUIOp::create(b, loc, b.getI32Type(), code);
  Value shift = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(23));
  Value shifted = arith::ShLIOp::create(b, loc, bits, shift);
  return arith::BitcastOp::create(b, loc, b.getF32Type(), shifted);
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
  Type bf16 = b.getBF16Type();
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
      if (format != CacheFormat::BF16) {
        Bits bits(b, loc, kChunk);
        Value codes = format == CacheFormat::MXFP4 ? bits.widen(raw) : Value();
        if (format == CacheFormat::FP8) {
          v = fp8ToF16(b, loc, raw);
        } else {
          // E2M1 pairs, low nibble first, times the chunk's block scale.
          Value lo = bits.e2m1(codes);
          Value hi = bits.e2m1(bits.shr(codes, 4));
          SmallVector<int64_t> interleave;
          for (int64_t i = 0; i < kChunk; ++i)
            interleave.append({i, kChunk + i});
          Value pairs = vector::ShuffleOp::create(b, loc, lo, hi, interleave);
          Value scale = e8m0(b, loc, loaded[perSlot * slot + 1]);
          v = arith::MulFOp::create(
              b, loc, pairs,
              vector::BroadcastOp::create(b, loc, pairs.getType(), scale));
          v = arith::TruncFOp::create(b, loc, VectorType::get({values}, bf16),
                                      v);
        }
      }
      vector::StoreOp::create(b, loc, v, smem.tile, ValueRange{r, col},
                              /*nontemporal=*/false, llvm::Align(kChunk));
    };
    if (kThreads * (slot + 1) <= tileChunks())
      store();
    else
      ifThen(b, loc, k.lessThan(e, k.idx(tileChunks())), store);
  }
}

//===- SM90TileDecode.cpp - sm_90a: a KV tile decoded into shared memory --===//
//
// A tile's cache rows reach a shared-memory stage by cp.async (16 bytes a
// copy, pipeline_stages - 1 tiles ahead; bf16's in wgmma's 128-byte
// swizzle), fp8's by cp.async.bulk (two adjacent rows a copy, completing
// on the stage's mbarrier: SM90KernelPlan::bulkCopies). Every cache format
// enters the operand tile exactly: a bf16 stage is the operand tile, an fp8
// e4m3 code (without its per-tensor scale) becomes f16 by the hardware's
// cvt.rn.f16x2.e4m3x2 (the fp8 kernel's operands are f16), an E2M1 value
// times its E8M0 block scale (and 2^-8) is a bf16 number, its bits made
// by masks and an integer multiply and scaled by bf16x2 multiplies (sm_90a
// has no fp4 conversion). Tile rows past the item repeat its last
// position; their scores are masked.
//
//===----------------------------------------------------------------------===//

#include "SM90Kernels.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mla;

namespace {
constexpr unsigned kGlobalSpace = 1, kSharedSpace = 3;
/// shared::cluster: the bulk copy's destination (the block's own shared
/// memory is part of its cluster's; PTX 8.3 has no shared::cta form).
constexpr unsigned kSharedClusterSpace = 7;
/// try_wait's suspend-time hint (ns): a waiting thread sleeps until the
/// phase completes or this passes, then tries again.
constexpr int64_t kWaitHintNs = 10'000'000;

/// Byte `offset` of `memref`'s buffer as an LLVM pointer in `addressSpace`
/// (the kernel's buffers start at their aligned pointers).
Value bytePointer(OpBuilder &b, Location loc, Value memref, Value offset,
                  unsigned addressSpace) {
  KernelBuilder k{b, loc};
  Value address = k.add(
      memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref), offset);
  return LLVM::IntToPtrOp::create(
      b, loc, LLVM::LLVMPointerType::get(b.getContext(), addressSpace),
      arith::IndexCastUIOp::create(b, loc, b.getI64Type(), address),
      LLVM::DereferenceableAttr());
}

Value isThreadZero(OpBuilder &b, Location loc, Value tid) {
  KernelBuilder k{b, loc};
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid,
                               k.idx(0));
}
/// Bytes of a cache row each thread moves per step: one 16-byte load.
constexpr int64_t kChunk = 16;

/// 32 E2M1 codes (16 bytes, low nibble first) times their block's E8M0
/// scale and 2^-kTileExponentShift, as 32 bf16 in the tile's column order
/// (SM90KernelPlan::decodedColumn: each 8 codes as v0 v4 v1 v5 v2 v6 v3
/// v7). Codes i and i + 4 of a word lie 16 bits apart, a bf16 pair's two
/// halves: one mask keeps them, one multiply by 2^6 + 2^12 moves each
/// magnitude to its half's bits 6-8 (exponent 0-3, mantissa's top bit)
/// and its sign to bit 15, one mask drops the rest: the values times
/// 2^-126, exactly (code 1, 0.5, is the subnormal 2^-127). One bf16x2
/// multiply by 2^(s - 9) (a normal bf16 for s = 0 .. 136) then scales the
/// pair, exactly where the products are normal (s >= 10; below, values
/// under 2^-126 keep fewer bits); larger scales take a second multiply by
/// 2^(s - 136) (s = 255 gives infinity). Codes 2, 3 and 6, 7 first shift
/// down a byte.
/// 17 instructions a word of 8 codes; the prmt tables took 22.
Value e2m1ToBf16(OpBuilder &b, Location loc, Value bytes, Value scaleCode) {
  KernelBuilder k{b, loc};
  Type i32 = b.getI32Type();
  auto pairType = VectorType::get({2}, b.getBF16Type());
  auto i32x1 = VectorType::get({1}, i32);
  Value words =
      vector::BitCastOp::create(b, loc, VectorType::get({4}, i32), bytes);
  auto asPair = [&](Value bits) {
    return vector::BitCastOp::create(
        b, loc, pairType, vector::BroadcastOp::create(b, loc, i32x1, bits));
  };
  auto bf16Twice = [&](Value exponentField) {
    Value half = arith::ShLIOp::create(b, loc, exponentField, k.i32(7));
    return asPair(arith::OrIOp::create(
        b, loc, half, arith::ShLIOp::create(b, loc, half, k.i32(16))));
  };
  // The pair's bits are the values times 2^-126; the tile wants them times
  // 2^(s - 127 - kShift): a factor 2^(s - 1 - kShift), whose bf16 exponent
  // field s + 126 - kShift is capped at 254 (2^127), the excess 2^(s - 1 -
  // kShift - 127) taken by a second multiply.
  constexpr int64_t kShift = SM90KernelPlan::kTileExponentShift;
  constexpr int64_t kBias = 127, kMaxField = 254;
  Value s = arith::ExtUIOp::create(b, loc, i32, scaleCode);
  Value field = arith::AddIOp::create(b, loc, s, k.i32(kBias - 1 - kShift));
  Value large = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt, field,
                                      k.i32(kMaxField));
  Value scale =
      bf16Twice(arith::MinUIOp::create(b, loc, field, k.i32(kMaxField)));
  Value excess =
      bf16Twice(arith::SubIOp::create(b, loc, field, k.i32(kMaxField - kBias)));
  SmallVector<Value> pairs;
  for (int64_t w = 0; w < 4; ++w) {
    Value word = vector::ExtractOp::create(b, loc, words, ArrayRef<int64_t>{w});
    Value high = arith::ShRUIOp::create(b, loc, word, k.i32(8));
    for (int64_t i = 0; i < 4; ++i) {
      Value source = i < 2 ? word : high;
      int64_t nibble = 4 * (i % 2);
      Value codes =
          arith::AndIOp::create(b, loc, source, k.i32(0x000F000F << nibble));
      Value moved = arith::MulIOp::create(
          b, loc, codes, k.i32((1 << (6 - nibble)) + (1 << (12 - nibble))));
      Value bits = arith::AndIOp::create(b, loc, moved, k.i32(0x81C081C0));
      pairs.push_back(arith::MulFOp::create(b, loc, asPair(bits), scale));
    }
  }
  // Scales past 136 (rare: values past 2^9 · 6): a second multiply.
  auto twice = scf::IfOp::create(
      b, loc, TypeRange(SmallVector<Type>(pairs.size(), pairType)), large,
      /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(twice.thenBlock());
    SmallVector<Value> scaled;
    for (Value pair : pairs)
      scaled.push_back(arith::MulFOp::create(b, loc, pair, excess));
    scf::YieldOp::create(b, loc, scaled);
    b.setInsertionPointToStart(twice.elseBlock());
    scf::YieldOp::create(b, loc, pairs);
  }
  SmallVector<Value> values;
  for (Value pair : twice.getResults())
    for (int64_t e = 0; e < 2; ++e)
      values.push_back(
          vector::ExtractOp::create(b, loc, pair, ArrayRef<int64_t>{e}));
  return vector::FromElementsOp::create(
      b, loc, VectorType::get({32}, b.getBF16Type()), values);
}

} // namespace

Value mla::permute(OpBuilder &b, Location loc, Value lo, Value hi,
                   Value selector) {
  return NVVM::PermuteOp::create(
      b, loc, b.getI32Type(), lo, hi, selector,
      NVVM::PermuteModeAttr::get(b.getContext(), NVVM::PermuteMode::DEFAULT));
}

std::array<Value, 2> mla::fp8WordToF16(OpBuilder &b, Location loc,
                                       Value word) {
  Value bytes = vector::BitCastOp::create(
      b, loc, VectorType::get({4}, b.getI8Type()),
      vector::BroadcastOp::create(b, loc, VectorType::get({1}, b.getI32Type()),
                                  word));
  std::array<Value, 2> pairs;
  for (int64_t p = 0; p < 2; ++p) {
    Value pair = vector::ShuffleOp::create(b, loc, bytes, bytes,
                                           ArrayRef<int64_t>{2 * p, 2 * p + 1});
    pairs[p] = NVVM::ConvertF8x2ToF16x2Op::create(
        b, loc, VectorType::get({2}, b.getF16Type()), pair, /*relu=*/false,
        b.getType<Float8E4M3FNType>());
  }
  return pairs;
}

int64_t SM90PartialKernel::chunkValues() const {
  return format == CacheFormat::BF16 ? 8 : format == CacheFormat::FP8 ? 16 : 32;
}

SM90PartialKernel::CopySlot SM90PartialKernel::copySlot(OpBuilder &b,
                                                        int64_t slot) {
  KernelBuilder k{b, loc};
  int64_t rowChunks = plan.rowChunks(), perPass = plan.copyRowsPerPass();
  Value passRow = k.div(thread.tid, k.idx(rowChunks));
  CopySlot c{k.add(passRow, k.idx(perPass * slot)),
             k.rem(thread.tid, k.idx(rowChunks)), Value()};
  // Threads past a pass's whole rows, and rows past the tile in the last
  // pass, copy nothing.
  auto require = [&](Value cond) {
    c.valid = c.valid ? arith::AndIOp::create(b, loc, c.valid, cond) : cond;
  };
  if (perPass * rowChunks < plan.threads())
    require(k.lessThan(thread.tid, k.idx(perPass * rowChunks)));
  if (perPass * (slot + 1) > tile)
    require(k.lessThan(c.row, k.idx(tile)));
  return c;
}

void SM90PartialKernel::emitSwizzledCopies(
    OpBuilder &b, Value stage, Value tileIsReal,
    llvm::function_ref<Value(Value)> cacheRowOf) {
  KernelBuilder k{b, loc};
  constexpr int64_t rows = SM90KernelPlan::kSwizzleRows;
  constexpr int64_t slabChunks = SM90KernelPlan::kSwizzleBytes / kChunk;
  int64_t warps = plan.warps();
  int64_t groups = tile / warps, passes = plan.swizzledCopyPasses();
  int64_t values = chunkValues();
  // Warp w: tile rows w + W j (W warps, a multiple of 8); lane l: chunks
  // l + 32 p, i.e. slab l / 8 + 4 p at stored chunk l % 8 ^ w % 8 (the
  // row's swizzle).
  Value lane = k.rem(thread.tid, k.idx(32));
  Value stored = arith::XOrIOp::create(b, loc, k.rem(lane, k.idx(slabChunks)),
                                       k.rem(thread.warp, k.idx(rows)));
  auto stageType = cast<MemRefType>(smem.stages.getType());
  SmallVector<OpFoldResult> offsets = {stage,
                                       Value(k.div(lane, k.idx(slabChunks))),
                                       thread.warp, stored, b.getIndexAttr(0)};
  SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1), b.getIndexAttr(passes),
                                     b.getIndexAttr(groups), b.getIndexAttr(1),
                                     b.getIndexAttr(values)};
  SmallVector<OpFoldResult> strides = {
      b.getIndexAttr(1), b.getIndexAttr(32 / slabChunks), b.getIndexAttr(warps),
      b.getIndexAttr(1), b.getIndexAttr(1)};
  // Not rank-reduced: with one pass, several unit dimensions are ambiguous.
  auto viewType = memref::SubViewOp::inferResultType(stageType, offsets,
                                                     sizes, strides);
  auto copies = [&] {
    Value destinations =
        memref::SubViewOp::create(b, loc, cast<MemRefType>(viewType),
                                  smem.stages, offsets, sizes, strides);
    auto tokenType = b.getType<nvgpu::DeviceAsyncTokenType>();
    for (int64_t group = 0; group < groups; ++group) {
      Value source = cacheRowOf(k.add(thread.warp, k.idx(warps * group)));
      for (int64_t pass = 0; pass < passes; ++pass) {
        Value chunk = k.add(lane, k.idx(32 * pass));
        auto copy = [&] {
          nvgpu::DeviceAsyncCopyOp::create(
              b, loc, tokenType, destinations,
              ValueRange{c0, k.idx(pass), k.idx(group), c0, c0}, args.kv,
              ValueRange{source, k.mul(chunk, k.idx(values))},
              b.getIndexAttr(values), /*srcElements=*/Value(),
              b.getUnitAttr());
        };
        // The last pass over a row whose chunks 32 lanes do not divide.
        if (32 * (pass + 1) > plan.rowChunks())
          ifThen(b, loc, k.lessThan(chunk, k.idx(plan.rowChunks())), copy);
        else
          copy();
      }
    }
  };
  if (tileIsReal)
    ifThen(b, loc, tileIsReal, copies);
  else
    copies();
}

SM90PartialKernel::TileCopies SM90PartialKernel::emitRowCopies(
    OpBuilder &b, Value stage, Value tileIsReal,
    llvm::function_ref<Value(Value)> cacheRowOf) {
  if (plan.swizzledStages()) {
    emitSwizzledCopies(b, stage, tileIsReal, cacheRowOf);
    return {};
  }
  KernelBuilder k{b, loc};
  // Elements of the cache (and of a stage) per 16-byte chunk.
  int64_t elements = format == CacheFormat::BF16 ? 8 : kChunk;
  auto tokenType = b.getType<nvgpu::DeviceAsyncTokenType>();
  // The thread's destinations in the stage, one view: its chunk of rows
  // passRow, passRow + rowsPerPass, ... (constant offsets from one address).
  int64_t passes = plan.copyPasses(), perPass = plan.copyRowsPerPass();
  CopySlot first = copySlot(b, 0);
  auto stageType = cast<MemRefType>(smem.stages.getType());
  SmallVector<OpFoldResult> offsets = {
      stage, first.row, Value(k.mul(first.chunk, k.idx(elements)))};
  SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1), b.getIndexAttr(passes),
                                     b.getIndexAttr(elements)};
  SmallVector<OpFoldResult> strides = {b.getIndexAttr(1),
                                       b.getIndexAttr(perPass),
                                       b.getIndexAttr(1)};
  auto viewType = memref::SubViewOp::inferRankReducedResultType(
      {passes, elements}, stageType, offsets, sizes, strides);
  Value destinations = memref::SubViewOp::create(
      b, loc, cast<MemRefType>(viewType), smem.stages, offsets, sizes, strides);
  TileCopies copies;
  for (int64_t slot = 0; slot < passes; ++slot) {
    CopySlot c = copySlot(b, slot);
    Value col = k.mul(c.chunk, k.idx(elements));
    Value copies16 = c.valid;
    if (tileIsReal)
      copies16 = copies16 ? arith::AndIOp::create(b, loc, copies16, tileIsReal)
                          : tileIsReal;
    auto copy = [&] {
      // .cg: the tile is read once, from shared memory; L1 would not help.
      nvgpu::DeviceAsyncCopyOp::create(
          b, loc, tokenType, destinations, ValueRange{k.idx(slot), c0},
          args.kv, ValueRange{cacheRowOf(c.row), col},
          b.getIndexAttr(elements),
          /*srcElements=*/Value(), b.getUnitAttr());
    };
    if (copies16)
      ifThen(b, loc, copies16, copy);
    else
      copy();
    if (format == CacheFormat::MXFP4)
      copies.scales.push_back(loadRowScale(b, c, tileIsReal, cacheRowOf));
  }
  return copies;
}

Value SM90PartialKernel::loadRowScale(
    OpBuilder &b, const CopySlot &c, Value tileIsReal,
    llvm::function_ref<Value(Value)> cacheRowOf) {
  KernelBuilder k{b, loc};
  Value row = c.valid ? k.minS(c.row, k.idx(tile - 1)) : c.row;
  auto load = [&] { return k.load(args.kvScale, {cacheRowOf(row), c.chunk}); };
  if (!tileIsReal || testHazard == "unguarded-scale-load")
    return load();
  Type i8 = b.getI8Type();
  auto ifOp = scf::IfOp::create(
      b, loc, tileIsReal,
      [&](OpBuilder &tb, Location) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(tb.getInsertionBlock(), tb.getInsertionPoint());
        scf::YieldOp::create(b, loc, load());
      },
      [&](OpBuilder &eb, Location) {
        scf::YieldOp::create(eb, loc,
                             Value(arith::ConstantOp::create(
                                 eb, loc, eb.getIntegerAttr(i8, 0))));
      });
  return ifOp.getResult(0);
}

Value SM90PartialKernel::stageBarrier(OpBuilder &b, Value stage) {
  KernelBuilder k{b, loc};
  return bytePointer(b, loc, smem.stageBarriers, k.mul(stage, k.idx(8)),
                     kSharedSpace);
}

void SM90PartialKernel::emitStageBarrierInit(OpBuilder &b, bool invalidate) {
  KernelBuilder k{b, loc};
  ifThen(b, loc, isThreadZero(b, loc, thread.tid), [&] {
    for (int64_t s = 0; s < plan.stages(); ++s) {
      Value barrier = stageBarrier(b, k.idx(s));
      if (invalidate)
        NVVM::MBarrierInvalOp::create(b, loc, barrier);
      // One arrival a phase: thread 0's, with the tile's bytes.
      NVVM::MBarrierInitOp::create(b, loc, barrier, k.i32(1),
                                   /*predicate=*/Value());
    }
    NVVM::FenceMbarrierInitOp::create(b, loc);
  });
}

void SM90PartialKernel::emitBulkTileCopies(OpBuilder &b, Value tileStart,
                                           Value stage) {
  KernelBuilder k{b, loc};
  int64_t rowBytes = plan.bulkRowBytes(), pairs = plan.bulkRowsPerWarp() / 2;
  ifThen(b, loc, k.lessThan(tileStart, item.end), [&] {
    Value barrier = stageBarrier(b, stage);
    // The phase completes when thread 0 has arrived and the tile's bytes
    // have landed, in either order (the transaction count may pass below
    // zero while the arrival is pending).
    ifThen(b, loc, isThreadZero(b, loc, thread.tid), [&] {
      NVVM::MBarrierArriveExpectTxOp::create(
          b, loc, Type(), barrier, k.i32(tile * rowBytes),
          NVVM::MemScopeKind::CTA, /*relaxed=*/false, /*predicate=*/Value());
    });
    Value lane = k.rem(thread.tid, k.idx(32));
    if (plan.rowGroups()) {
      Value groups = k.idx(tile / SM90KernelPlan::kGroupRows);
      ifThen(b, loc, k.lessThan(thread.warp, groups),
             [&] { emitRowGroupCopies(b, tileStart, stage, barrier, lane); });
      return;
    }
    ifThen(b, loc, k.lessThan(lane, k.idx(pairs)), [&] {
      emitRowPairCopies(b, tileStart, stage, barrier,
                        k.add(k.mul(thread.warp, k.idx(pairs)), lane));
    });
  });
}

void SM90PartialKernel::emitRowGroupCopies(OpBuilder &b, Value tileStart,
                                           Value stage, Value barrier,
                                           Value lane) {
  KernelBuilder k{b, loc};
  int64_t rows = SM90KernelPlan::kGroupRows;
  Value first = k.add(tileStart, k.mul(thread.warp, k.idx(rows)));
  Value groupStart = k.mul(k.add(k.mul(stage, k.idx(tile / rows)), thread.warp),
                           k.idx(plan.stageGroupBytes()));
  // One copy by lane 0 where the group's rows are the item's and lie in
  // one page; else a row a lane (a last, partial tile: the item's last
  // row again past its end).
  Value whole = k.lessThan(k.add(first, k.idx(rows - 1)), item.end);
  if (pageSize > 0 && pageSize < rows)
    whole = arith::ConstantOp::create(b, loc, b.getBoolAttr(false));
  else if (pageSize > 0)
    whole = arith::AndIOp::create(
        b, loc, whole,
        k.lessThan(k.add(k.rem(first, k.idx(pageSize)), k.idx(rows - 1)),
                   k.idx(pageSize)));
  ifThenElse(
      b, loc, whole,
      [&] {
        ifThen(b, loc, k.lessThan(lane, c1),
               [&] { emitBulkRowCopy(b, groupStart, first, rows, barrier); });
      },
      [&] {
        ifThen(b, loc, k.lessThan(lane, k.idx(rows)), [&] {
          emitBulkRowCopy(
              b, k.add(groupStart, k.mul(lane, k.idx(plan.stageRowOffset()))),
              k.add(first, lane), 1, barrier);
        });
      });
}

void SM90PartialKernel::emitRowPairCopies(OpBuilder &b, Value tileStart,
                                          Value stage, Value barrier,
                                          Value pair) {
  KernelBuilder k{b, loc};
  Value first = k.add(tileStart, k.mul(pair, k.idx(2)));
  Value pairStart = k.mul(k.add(k.mul(stage, k.idx(tile / 2)), pair),
                          k.idx(plan.stagePairBytes()));
  auto twoCopies = [&] {
    emitBulkRowCopy(b, pairStart, first, 1, barrier);
    emitBulkRowCopy(b, k.add(pairStart, k.idx(plan.stagePairRowOffset())),
                    k.add(first, c1), 1, barrier);
  };
  if (!plan.bulkPairs() || pageSize == 1) {
    twoCopies();
    return;
  }
  // One copy where both rows are the item's and lie in one page.
  Value whole = k.lessThan(first, item.lastPos);
  if (pageSize > 0)
    whole = arith::AndIOp::create(
        b, loc, whole,
        k.lessThan(k.rem(first, k.idx(pageSize)), k.idx(pageSize - 1)));
  ifThenElse(
      b, loc, whole, [&] { emitBulkRowCopy(b, pairStart, first, 2, barrier); },
      twoCopies);
}

void SM90PartialKernel::emitBulkRowCopy(OpBuilder &b, Value stageOffset,
                                        Value pos, int64_t rows,
                                        Value barrier) {
  KernelBuilder k{b, loc};
  int64_t rowBytes = plan.bulkRowBytes();
  // A last, partial tile repeats the item's last position.
  Value row = cacheRow(b, k.minS(pos, item.lastPos));
  NVVM::CpAsyncBulkGlobalToSharedClusterOp::create(
      b, loc,
      bytePointer(b, loc, smem.stages, stageOffset, kSharedClusterSpace),
      bytePointer(b, loc, args.kv, k.mul(row, k.idx(rowBytes)), kGlobalSpace),
      barrier, k.i32(rows * rowBytes), /*multicastMask=*/Value(),
      arith::ConstantOp::create(
          b, loc, b.getI64IntegerAttr(SM90KernelPlan::kStreamingL2Policy)));
}

SM90PartialKernel::TileCopies
SM90PartialKernel::emitTileCopies(OpBuilder &b, Value tileStart, Value stage) {
  KernelBuilder k{b, loc};
  if (plan.bulkCopies()) {
    emitBulkTileCopies(b, tileStart, stage);
    return {};
  }
  // A tile that lies whole within the item (and within one page) is
  // tile consecutive cache rows: one row address, the copies at constant
  // offsets from it. A last, partial tile repeats the item's last
  // position; one past the item copies nothing.
  Value whole = k.lessThan(k.add(tileStart, k.idx(tile - 1)), item.end);
  if (pageSize > 0)
    whole = arith::AndIOp::create(
        b, loc, whole,
        k.lessThan(k.add(k.rem(tileStart, k.idx(pageSize)), k.idx(tile - 1)),
                   k.idx(pageSize)));
  auto wholeTile = [&](OpBuilder &bb, Location) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(bb.getInsertionBlock(), bb.getInsertionPoint());
    Value first = cacheRow(b, tileStart);
    TileCopies copies = emitRowCopies(
        b, stage, Value(), [&](Value r) { return k.add(first, r); });
    scf::YieldOp::create(b, loc, copies.scales);
  };
  auto lastTile = [&](OpBuilder &bb, Location) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(bb.getInsertionBlock(), bb.getInsertionPoint());
    TileCopies copies =
        emitRowCopies(b, stage, k.lessThan(tileStart, item.end), [&](Value r) {
          return cacheRow(b, k.minS(k.add(tileStart, r), item.lastPos));
        });
    scf::YieldOp::create(b, loc, copies.scales);
  };
  auto split = scf::IfOp::create(b, loc, whole, wholeTile, lastTile);
  // The group by the NVVM op: the copies sit in conditionals, and nvgpu's
  // group of no tokens does not print back as it parses.
  NVVM::CpAsyncCommitGroupOp::create(b, loc);
  TileCopies copies;
  llvm::append_range(copies.scales, split.getResults());
  return copies;
}

void SM90PartialKernel::emitTileWait(OpBuilder &b) {
  if (plan.bulkCopies()) {
    KernelBuilder k{b, loc};
    NVVM::MBarrierTryWaitParityOp::create(b, loc,
                                          stageBarrier(b, computeStage),
                                          computePhase, k.i32(kWaitHintNs));
    return;
  }
  // The oldest group in flight, the step's tile; the pipeline_stages - 2
  // behind it may stay in flight.
  NVVM::CpAsyncWaitGroupOp::create(b, loc, plan.stages() - 2);
}

void SM90PartialKernel::emitTileDecode(OpBuilder &b, Value stage,
                                       ValueRange scales) {
  KernelBuilder k{b, loc};
  int64_t values = chunkValues();
  for (int64_t slot = 0; slot < plan.copyPasses(); ++slot) {
    CopySlot c = copySlot(b, slot);
    auto decode = [&] {
      // The thread's own copy: landed at its wait, no barrier needed.
      Value raw = vector::LoadOp::create(
          b, loc, VectorType::get({kChunk}, b.getI8Type()), smem.stages,
          ValueRange{stage, c.row, k.mul(c.chunk, k.idx(kChunk))},
          /*nontemporal=*/false, llvm::Align(kChunk));
      Value v = e2m1ToBf16(b, loc, raw, scales[slot]);
      // Units 4 chunk + s, each where decodedTileUnit puts it.
      constexpr int64_t unitValues = kChunk / 2;
      for (int64_t s = 0; s < values / unitValues; ++s) {
        Value unit = decodedTileUnit(
            b, k.add(k.mul(c.chunk, k.idx(values / unitValues)), k.idx(s)));
        SmallVector<int64_t> lanes;
        for (int64_t i = 0; i < unitValues; ++i)
          lanes.push_back(s * unitValues + i);
        Value part = vector::ShuffleOp::create(b, loc, v, v, lanes);
        vector::StoreOp::create(
            b, loc, part, smem.tile,
            ValueRange{c.row, k.mul(unit, k.idx(unitValues))},
            /*nontemporal=*/false, llvm::Align(kChunk));
      }
    };
    if (c.valid)
      ifThen(b, loc, c.valid, decode);
    else
      decode();
  }
}

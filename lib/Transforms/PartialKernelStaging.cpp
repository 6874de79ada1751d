//===- PartialKernelStaging.cpp - KV tiles global -> LDS ------------------===//
//
// KV tiles move global -> LDS by DMA (amdgpu.gather_to_lds, 16 bytes per
// lane; mxfp4's E8M0 scales in 2-byte units) into pipeline_stages stages,
// the next tile in flight while the current one is used. The DMA is the
// kernel's only read of the cache: every cache byte of a work item reaches
// the workgroup once, and serves as key (all Dqk columns) and value (the
// first Dv).
//
//===----------------------------------------------------------------------===//

#include "GFX950Kernels.h"

#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/ROCDLDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <functional>

using namespace mlir;
using namespace mla;

namespace {
constexpr int64_t kWaveSize = PartialKernelPlan::kWaveSize;
constexpr int64_t kWaves = PartialKernelPlan::kWaves;
constexpr int64_t kDmaBytes = PartialKernelPlan::kDmaBytes;
/// AMDGPU's address space of read-only global memory (scalar loads).
constexpr int64_t kConstantAddressSpace = 4;

/// A wave-uniform branch.
void emitIf(OpBuilder &b, Location loc, Value cond, function_ref<void()> then,
            function_ref<void()> otherwise) {
  auto ifOp = scf::IfOp::create(b, loc, cond, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  then();
  b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
  otherwise();
}
} // namespace

int64_t PartialKernel::tileBuffers() const {
  if (pageSize == 0 || pageSize >= kTileRows)
    return 1;
  // Pages of at least 64 rows: a buffer each when every DMA piece (a
  // wave's 16 bytes a lane) lies in one page, as it does for every format
  // (64 rows are a whole number of pieces of data and of scale units).
  int64_t pieceBytes = kWaveSize * kDmaBytes;
  bool piecesFitPages = pageSize * plan.rowBytes() % pieceBytes == 0 &&
                        (!strategy.blockScales ||
                         pageSize * plan.scaleUnitsPerRow() % kWaveSize == 0);
  return pageSize >= 64 && piecesFitPages ? kTileRows / pageSize : 0;
}

PartialKernel::TileRows PartialKernel::emitTileRows(OpBuilder &b,
                                                     Value tileStart) {
  TileRows tile{toI32(b, tileStart), toI32(b, item.lastPos),
                toI32(b, item.kvBegin), {}, {}};
  if (pageSize == 0) {
    // Contiguous: positions become cache rows once a tile (wave-uniform),
    // not once a load (a VALU add each).
    auto add = [&](Value x) {
      return arith::AddIOp::create(b, loc, x, tile.kvBegin).getResult();
    };
    Value first = add(tile.start), last = add(tile.lastPos);
    tile.kv.push_back(tileBuffer(b, first, last, kTileRows, args.kv));
    if (strategy.blockScales)
      tile.kvScale.push_back(
          tileBuffer(b, first, last, kTileRows, args.kvScale));
    return tile;
  }
  // Items start on tiles (the planner's invariant), so a tile lies in one
  // page or covers whole pages: each buffer holds a page's rows from the
  // tile's offset in it.
  for (int64_t p = 0; p < tileBuffers(); ++p)
    emitPageBuffer(b, tile, p);
  return tile;
}

void PartialKernel::emitPageBuffer(OpBuilder &b, TileRows &tile, int64_t p) {
  auto sub = [&](Value x, Value y) {
    return arith::SubIOp::create(b, loc, x, y).getResult();
  };
  int64_t rows = std::min(pageSize, kTileRows);
  Value first =
      arith::AddIOp::create(b, loc, tile.start, i32Const(b, p * rows));
  // The wave loads the page's id once; through the constant address space
  // it loads by the scalar unit, so the DMA's vector memory counter never
  // waits for it. A page past the item's last position (a short last
  // tile) looks its last page up and gets no rows.
  auto tableType = cast<MemRefType>(args.kvIndices.getType());
  Value table = memref::MemorySpaceCastOp::create(
      b, loc,
      MemRefType::get(tableType.getShape(), tableType.getElementType(),
                      tableType.getLayout(),
                      b.getI64IntegerAttr(kConstantAddressSpace)),
      args.kvIndices);
  Value log2P = i32Const(b, llvm::Log2_64(pageSize));
  Value looked =
      p == 0 ? first : arith::MinSIOp::create(b, loc, first, tile.lastPos);
  Value entry = arith::ShRUIOp::create(b, loc, looked, log2P);
  Value at = toIndex(b, arith::AddIOp::create(b, loc, tile.kvBegin, entry));
  Value page = clampPage(b, KernelBuilder{b, loc}.load(table, {at}));
  Value inPage =
      arith::AndIOp::create(b, loc, first, i32Const(b, pageSize - 1));
  // The page's rows bound the item's: a tile never reads past its page.
  Value rowsLeft = arith::MinSIOp::create(
      b, loc, sub(tile.lastPos, first), sub(i32Const(b, pageSize - 1), inPage));
  Value start = arith::OrIOp::create(
      b, loc, arith::ShLIOp::create(b, loc, page, log2P), inPage);
  Value last = arith::AddIOp::create(b, loc, start, rowsLeft);
  tile.kv.push_back(tileBuffer(b, start, last, rows, args.kv));
  if (strategy.blockScales)
    tile.kvScale.push_back(tileBuffer(b, start, last, rows, args.kvScale));
}

Value PartialKernel::clampPage(OpBuilder &b, Value pageId) {
  KernelBuilder k{b, loc};
  // Unsigned: a negative id clamps to the last page as well.
  Value poolRows = memref::DimOp::create(b, loc, args.kv, 0);
  Value lastPage = k.sub(k.div(poolRows, k.idx(pageSize)), c1);
  return arith::MinUIOp::create(b, loc, pageId, toI32(b, lastPage));
}

Value PartialKernel::cacheRow(OpBuilder &b, const TileRows &tile,
                              Value localRow) {
  auto add = [&](Value x, Value y) {
    return arith::AddIOp::create(b, loc, x, y).getResult();
  };
  // Rows past the item clamp to its last position (their scores are
  // masked).
  Value unclamped = add(tile.start, toI32(b, localRow));
  Value pos = arith::MinSIOp::create(b, loc, unclamped, tile.lastPos);
  // Pages smaller than a tile: each lane looks its row's page up.
  Value log2P = i32Const(b, llvm::Log2_64(pageSize));
  Value pageOfPos = arith::ShRUIOp::create(b, loc, pos, log2P);
  Value entry = add(tile.kvBegin, pageOfPos);
  Value id = KernelBuilder{b, loc}.load(args.kvIndices, {toIndex(b, entry)});
  Value pageStart = arith::ShLIOp::create(b, loc, clampPage(b, id), log2P);
  Value offset =
      arith::AndIOp::create(b, loc, pos, i32Const(b, pageSize - 1));
  Value row = arith::OrIOp::create(b, loc, pageStart, offset);
  return toIndex(b, row);
}

Value PartialKernel::tileBuffer(OpBuilder &b, Value first, Value last,
                                int64_t rows, Value cache) {
  KernelBuilder k{b, loc};
  auto type = cast<MemRefType>(cache.getType());
  int64_t rowElems = type.getDimSize(1);
  int64_t elemBytes = type.getElementTypeBitWidth() / 8;
  auto viewType = MemRefType::get(
      {rows * rowElems}, type.getElementType(),
      StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic, {1}),
      type.getMemorySpace());
  Value firstElem = k.mul(toIndex(b, first), k.idx(rowElems));
  Value view = memref::ReinterpretCastOp::create(
      b, loc, viewType, cache, OpFoldResult(firstElem),
      ArrayRef<OpFoldResult>{b.getIndexAttr(rows * rowElems)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
  // The item's rows from the first, at most the buffer's (the resource's
  // bound is 32 bits), none for a page past the item: a lane past them
  // reads zeros.
  Value rowsLeft =
      arith::MinSIOp::create(b, loc, arith::SubIOp::create(b, loc, last, first),
                             i32Const(b, rows - 1));
  if (rows < kTileRows)
    rowsLeft = arith::MaxSIOp::create(b, loc, rowsLeft, i32Const(b, -1));
  Value validBytes = arith::MulIOp::create(
      b, loc,
      arith::AddIOp::create(b, loc, rowsLeft, i32Const(b, 1)),
      i32Const(b, rowElems * elemBytes));
  // Uniform, but with pages longer than a tile the bounds fold into a
  // three-way min the backend selects in VALU (v_min3_i32): a descriptor
  // in VGPRs wraps every DMA in a readfirstlane loop. Read it back first.
  validBytes =
      ROCDL::ReadfirstlaneOp::create(b, loc, b.getI32Type(), validBytes);
  validBytes = arith::ExtUIOp::create(b, loc, b.getI64Type(), validBytes);
  return amdgpu::FatRawBufferCastOp::create(b, loc, view, validBytes,
                                            /*cacheSwizzleStride=*/Value(),
                                            /*boundsCheck=*/true,
                                            /*resetOffset=*/true);
}

void PartialKernel::emitTileRead(
    OpBuilder &b, const TileRows &tile, Value cache, ArrayRef<Value> buffers,
    Value piece, int64_t pieces, Value localRow, Value col, int64_t rowElems,
    function_ref<void(Value src, ValueRange at)> read) {
  KernelBuilder k{b, loc};
  if (buffers.empty()) // pages smaller than a tile: each lane's own page
    return read(cache, {cacheRow(b, tile, localRow), col});
  // The lane's offset in its buffer is the same every tile; the buffer is
  // the piece's (wave-uniform: a scalar branch where there are several;
  // the emu models a buffer only as a DMA's direct source).
  int64_t count = static_cast<int64_t>(buffers.size());
  int64_t rows = kTileRows / count;
  Value bufferIndex = k.div(piece, k.idx(pieces / count));
  std::function<void(int64_t)> from = [&](int64_t p) {
    Value row = p == 0 ? localRow : k.sub(localRow, k.idx(p * rows));
    auto readPage = [&] {
      read(buffers[p], {k.add(k.mul(row, k.idx(rowElems)), col)});
    };
    if (p + 1 == count)
      return readPage();
    emitIf(b, loc, k.lessThan(bufferIndex, k.idx(p + 1)), readPage,
           [&] { from(p + 1); });
  };
  from(0);
}

Value PartialKernel::toI32(OpBuilder &b, Value index) {
  return arith::IndexCastOp::create(b, loc, b.getI32Type(), index);
}

Value PartialKernel::toIndex(OpBuilder &b, Value i32) {
  return arith::IndexCastUIOp::create(b, loc, b.getIndexType(), i32);
}

Value PartialKernel::i32Const(OpBuilder &b, int64_t v) {
  return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
}

void PartialKernel::emitDataGather(OpBuilder &b, const TileRows &tile,
                                   Value stage, Value piece) {
  KernelBuilder k{b, loc};
  int64_t dmaElems = kDmaBytes / plan.elementBytes();
  int64_t rowElems = plan.rowElements();
  Value waveBase = k.mul(piece, k.idx(kWaveSize * dmaElems));
  Value lin = k.add(waveBase, k.mul(rows.lane, k.idx(dmaElems)));
  Value dstRow = k.div(waveBase, k.idx(rowElems));
  Value dstCol = k.rem(waveBase, k.idx(rowElems));
  emitTileRead(b, tile, args.kv, tile.kv, piece, plan.dataPieces(),
               k.div(lin, k.idx(rowElems)), k.rem(lin, k.idx(rowElems)),
               rowElems, [&](Value src, ValueRange at) {
                 amdgpu::GatherToLDSOp::create(
                     b, loc, src, at, lds.kvTiles,
                     ValueRange{stage, dstRow, dstCol},
                     TypeAttr::get(VectorType::get({dmaElems}, kvMemType(b))));
               });
}

void PartialKernel::emitScaleGather(OpBuilder &b, const TileRows &tile,
                                    Value stage, Value piece) {
  KernelBuilder k{b, loc};
  Value scalePiece = k.sub(piece, k.idx(plan.dataPieces()));
  Value unit = k.add(k.mul(scalePiece, k.idx(kWaveSize)), rows.lane);
  int64_t units = plan.scaleUnitsPerRow();
  emitTileRead(b, tile, args.kvScale, tile.kvScale, scalePiece,
               plan.scalePieces(), k.div(unit, k.idx(units)),
               k.mul(k.rem(unit, k.idx(units)), k.idx(2)), 2 * units,
               [&](Value src, ValueRange at) {
                 amdgpu::GatherToLDSOp::create(
                     b, loc, src, at, lds.tileScales,
                     ValueRange{stage, k.mul(scalePiece, k.idx(4 * kWaveSize))},
                     TypeAttr::get(
                         VectorType::get({2}, b.getType<Float8E8M0FNUType>())));
               });
}

/// The tile's wave-sized pieces go round-robin to the waves; mxfp4's scale
/// pieces follow the data pieces (18 + 9 pieces: waves 0-2 take 7, wave 3
/// takes 6).
void PartialKernel::emitTileDma(OpBuilder &b, Value tileStart, Value stage) {
  KernelBuilder k{b, loc};
  int64_t dataPieces = plan.dataPieces(), allPieces = plan.allPieces();
  TileRows tile = emitTileRows(b, tileStart);
  for (int64_t g = 0; g < plan.maxGathersPerWave(); ++g) {
    Value piece = k.add(k.idx(g * kWaves), rows.uniformWave);
    int64_t first = g * kWaves, last = first + kWaves - 1;
    auto anyPiece = [&] {
      if (last < dataPieces)
        return emitDataGather(b, tile, stage, piece);
      if (first >= dataPieces)
        return emitScaleGather(b, tile, stage, piece);
      // A round that mixes kinds branches on the piece's (wave-uniform).
      emitIf(b, loc, k.lessThan(piece, k.idx(dataPieces)),
             [&] { emitDataGather(b, tile, stage, piece); },
             [&] { emitScaleGather(b, tile, stage, piece); });
    };
    if (last < allPieces)
      anyPiece();
    else // the last round: only the waves with a piece left
      emitIf(b, loc, k.lessThan(piece, k.idx(allPieces)), anyPiece, [] {});
  }
}

void PartialKernel::emitTileHandoff(OpBuilder &b, Value nextStage,
                                    Value nextStart) {
  // Testing only: a wait that leaves one load of the tile in flight.
  int64_t shortWait = testHazard == "short-wait" ? 1 : 0;
  auto wait = [&](int64_t outstanding) {
    amdgpu::MemoryCounterWaitOp::create(b, loc,
                                        b.getI32IntegerAttr(outstanding),
                                        nullptr, nullptr, nullptr, nullptr);
  };
  // Put the next tile in flight, then wait for this one: the loads of the
  // next tile may stay outstanding (the fewest any wave issues).
  Value hasNext =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                            toI32(b, nextStart), toI32(b, item.end));
  scf::IfOp::create(
      b, loc, hasNext,
      [&](OpBuilder &ib, Location) {
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPoint(ib.getInsertionBlock(), ib.getInsertionPoint());
        emitTileDma(b, nextStart, nextStage);
        wait(plan.minGathersPerWave() + shortWait);
        scf::YieldOp::create(b, loc);
      },
      [&](OpBuilder &ib, Location) {
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPoint(ib.getInsertionBlock(), ib.getInsertionPoint());
        wait(shortWait);
        scf::YieldOp::create(b, loc);
      });
}

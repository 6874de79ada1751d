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
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mla;

namespace {
constexpr int64_t kWaveSize = PartialKernelPlan::kWaveSize;
constexpr int64_t kWaves = PartialKernelPlan::kWaves;
constexpr int64_t kDmaBytes = PartialKernelPlan::kDmaBytes;

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

void PartialKernel::emitDataGather(OpBuilder &b, Value firstRow, Value stage,
                                   Value piece) {
  KernelBuilder k{b, loc};
  int64_t dmaElems = kDmaBytes / plan.elementBytes();
  int64_t rowElems = plan.rowElements();
  Value waveBase = k.mul(piece, k.idx(kWaveSize * dmaElems));
  Value lin = k.add(waveBase, k.mul(rows.lane, k.idx(dmaElems)));
  // Rows past the item clamp to its last row (their scores are masked).
  Value srcRow =
      k.minS(k.add(firstRow, k.div(lin, k.idx(rowElems))), item.lastRow);
  Value srcCol = k.rem(lin, k.idx(rowElems));
  Value dstRow = k.div(waveBase, k.idx(rowElems));
  Value dstCol = k.rem(waveBase, k.idx(rowElems));
  amdgpu::GatherToLDSOp::create(
      b, loc, args.kv, ValueRange{srcRow, srcCol}, lds.kvTiles,
      ValueRange{stage, dstRow, dstCol},
      TypeAttr::get(VectorType::get({dmaElems}, kvMemType(b))));
}

void PartialKernel::emitScaleGather(OpBuilder &b, Value firstRow,
                                    Value stage, Value piece) {
  KernelBuilder k{b, loc};
  Value scalePiece = k.sub(piece, k.idx(plan.dataPieces()));
  Value unit = k.add(k.mul(scalePiece, k.idx(kWaveSize)), rows.lane);
  Value srcRow = k.minS(
      k.add(firstRow, k.div(unit, k.idx(plan.scaleUnitsPerRow()))),
      item.lastRow);
  Value srcCol =
      k.mul(k.rem(unit, k.idx(plan.scaleUnitsPerRow())), k.idx(2));
  amdgpu::GatherToLDSOp::create(
      b, loc, args.kvScale, ValueRange{srcRow, srcCol}, lds.tileScales,
      ValueRange{stage, k.mul(scalePiece, k.idx(4 * kWaveSize))},
      TypeAttr::get(VectorType::get({2}, b.getType<Float8E8M0FNUType>())));
}

/// The tile's wave-sized pieces go round-robin to the waves; mxfp4's scale
/// pieces follow the data pieces (18 + 9 pieces: waves 0-2 take 7, wave 3
/// takes 6).
void PartialKernel::emitTileDma(OpBuilder &b, Value tileStart, Value stage) {
  KernelBuilder k{b, loc};
  Value firstRow = k.add(item.kvBegin, tileStart);
  int64_t dataPieces = plan.dataPieces(), allPieces = plan.allPieces();
  for (int64_t g = 0; g < plan.maxGathersPerWave(); ++g) {
    Value piece = k.add(k.idx(g * kWaves), rows.wave);
    int64_t first = g * kWaves, last = first + kWaves - 1;
    auto anyPiece = [&] {
      if (last < dataPieces)
        return emitDataGather(b, firstRow, stage, piece);
      if (first >= dataPieces)
        return emitScaleGather(b, firstRow, stage, piece);
      // A round that mixes kinds branches on the piece's (wave-uniform).
      emitIf(b, loc, k.lessThan(piece, k.idx(dataPieces)),
             [&] { emitDataGather(b, firstRow, stage, piece); },
             [&] { emitScaleGather(b, firstRow, stage, piece); });
    };
    if (last < allPieces)
      anyPiece();
    else // the last round: only the waves with a piece left
      emitIf(b, loc, k.lessThan(piece, k.idx(allPieces)), anyPiece, [] {});
  }
}

void PartialKernel::emitTileHandoff(OpBuilder &b, Value tileIndex,
                                    Value nextStart) {
  KernelBuilder k{b, loc};
  // Testing only: a wait that leaves one load of the tile in flight.
  int64_t shortWait = testHazard == "short-wait" ? 1 : 0;
  auto wait = [&](int64_t outstanding) {
    amdgpu::MemoryCounterWaitOp::create(b, loc,
                                        b.getI32IntegerAttr(outstanding),
                                        nullptr, nullptr, nullptr, nullptr);
  };
  // Put the next tile in flight, then wait for this one: the loads of the
  // next tile may stay outstanding (the fewest any wave issues).
  Value hasNext = k.lessThan(nextStart, item.end);
  scf::IfOp::create(
      b, loc, hasNext,
      [&](OpBuilder &ib, Location) {
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPoint(ib.getInsertionBlock(), ib.getInsertionPoint());
        emitTileDma(b, nextStart, k.rem(k.add(tileIndex, c1), k.idx(kStages)));
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

//===- PartialKernel.cpp - the gfx950 partial kernel: frame and KV loop ---===//
//
// A persistent grid: the planner's schedule gives each workgroup a run of
// units, each a (work item, block of query rows), 4 waves; the
// (token, head) rows of a block of heads_per_workgroup heads go in groups of
// rows_per_wave (16, or 32: two 16-row MFMA blocks, "fragments", that
// share every K and V read of the wave) to the waves, token-major, so a
// workgroup reads each KV tile once for all its rows. With
// waves_per_row_group W > 1 a group's W waves split the work on it: each
// computes the scores of kv_tile/W of the tile's rows and the output of
// Dv/W of the columns (H = 16 at q_len 1: 16 rows, four waves busy instead
// of one); with W = 1 each wave has its own group. Waves past the rows repeat
// the last group and write nothing, so control flow stays uniform for the
// barriers. A work item's row blocks are consecutive units, scheduled on
// consecutive logical workgroups, which run in consecutive dispatch slots of
// one XCD, sharing its L2, so a cache byte comes from HBM once
// (docs/pipelines.md). The stages of the KV loop are in the files
// GFX950Kernels.h lists.
//
//===----------------------------------------------------------------------===//

#include "GFX950Kernels.h"

#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/LLVMIR/ROCDLDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;
using namespace mla;

namespace {
constexpr int64_t kWaveSize = PartialKernelPlan::kWaveSize;
constexpr int64_t kThreads = PartialKernelPlan::kThreads;
constexpr int64_t kRowsPerWave = PartialKernelPlan::kRowsPerWave;

PartialKernelShape shapeOf(PartialDecodeOp op) {
  ConfigAttr config = op.getConfig();
  return {cacheFormat(op.getKvFormat()),
          op.getNumHeads(),
          op.getQKHeadDim(),
          static_cast<int64_t>(op.getVHeadDim()),
          config.getKvTile(),
          config.getPipelineStages(),
          config.getHeadsPerWorkgroup(),
          config.getWavesPerWorkgroup(),
          config.getWavesPerRowGroup(),
          config.getRowsPerWave()};
}
} // namespace

PartialKernel::PartialKernel(PartialDecodeOp op, int64_t xcds,
                             int64_t workgroups, int64_t ldsLimit,
                             StringRef testHazard)
    : op(op), loc(op.getLoc()), plan(shapeOf(op)), strategy(plan.strategy()),
      xcds(xcds), workgroups(workgroups), ldsLimit(ldsLimit),
      testHazard(testHazard.str()) {
  numHeads = plan.shape().numHeads;
  headsPerWg = plan.shape().headsPerWorkgroup;
  qkDim = plan.shape().qkDim;
  vDim = plan.shape().vDim;
  paddedQK = plan.paddedQK();
  kTileRows = plan.shape().kvTile;
  kStages = plan.shape().pipelineStages;
  pageSize = op.getPageSize();
}

Type PartialKernel::elemType(Builder &b) const {
  return plan.isBF16() ? Type(b.getBF16Type())
                       : b.getType<Float8E4M3FNType>();
}

Type PartialKernel::kvMemType(Builder &b) const {
  return plan.isMXFP4() ? Type(b.getI8Type()) : elemType(b);
}

Type PartialKernel::pvType(Builder &b) const {
  switch (strategy.p) {
  case PEncoding::Bf16TwoParts:
    return b.getBF16Type();
  case PEncoding::Fp8TwoParts:
    return b.getType<Float8E4M3FNType>();
  }
  return {};
}

SmallVector<Type> PartialKernel::ldsTypes(Builder &b) const {
  SmallVector<Type> types;
  for (const LdsBuffer &buffer : plan.ldsBuffers()) {
    Type elem;
    switch (buffer.element) {
    case LdsElement::Cache:
      elem = kvMemType(b);
      break;
    case LdsElement::F32:
      elem = b.getF32Type();
      break;
    case LdsElement::P:
      elem = pvType(b);
      break;
    case LdsElement::BF16:
      elem = b.getBF16Type();
      break;
    case LdsElement::E8M0:
      elem = b.getType<Float8E8M0FNUType>();
      break;
    }
    types.push_back(ldsType(buffer.shape, elem));
  }
  return types;
}

PartialKernelSignature PartialKernel::signature(Builder &b) const {
  return {plan.shape().format,
          numHeads,
          qkDim,
          vDim,
          workgroups,
          pageSize,
          kvMemType(b),
          b.getType<Float8E8M0FNUType>()};
}

gpu::GPUFuncOp PartialKernel::build(OpBuilder &mb, StringRef name) {
  MLIRContext *ctx = op.getContext();
  Builder b(ctx);
  PartialKernelSignature sig = signature(b);
  SmallVector<Type> types = sig.argTypes(b);
  auto func = gpu::GPUFuncOp::create(mb, loc, name,
                                     FunctionType::get(ctx, types, {}),
                                     ldsTypes(b), TypeRange{});
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({kThreads, 1, 1}));
  // One workgroup per CU fits the LDS budget: one wave per SIMD.
  func->setAttr("rocdl.waves_per_eu", b.getI32IntegerAttr(1));
  func->setAttr("rocdl.flat_work_group_size", b.getStringAttr("256,256"));
  func->setAttr(
      MLADialect::kLaunchAttrName,
      launchAttr(b, {std::to_string(workgroups), "1", "1"}, kThreads,
                 plan.ldsBytes(), sig.argNames(), types,
                 // How many row blocks of an item are busy, for the planner.
                 {b.getNamedAttr("rows_per_workgroup",
                                 b.getI64IntegerAttr(plan.rowsPerWorkgroup())),
                  b.getNamedAttr("heads_per_block",
                                 b.getI64IntegerAttr(headsPerWg))}));
  bindArguments(func);
  OpBuilder bodyBuilder(ctx);
  bodyBuilder.setInsertionPointToStart(&func.getBody().front());
  emitBody(bodyBuilder);
  return func;
}

void PartialKernel::bindArguments(gpu::GPUFuncOp func) {
  Builder b(func.getContext());
  args = signature(b).bind(func);
  auto attributions = func.getWorkgroupAttributions();
  unsigned next = 0;
  lds = {};
  lds.kvTiles = attributions[next++];
  if (strategy.qk == QKPath::Bf16Mfma)
    lds.scores = attributions[next++];
  lds.p = attributions[next++];
  lds.rowFactors = attributions[next++];
  if (plan.wavesPerRowGroup() > 1)
    lds.tileMaxima = attributions[next++];
  if (strategy.pv == PVPath::DecodedHalfTiles)
    lds.decodedV = attributions[next++];
  if (strategy.blockScales)
    lds.tileScales = attributions[next++];
}

Value PartialKernel::emitWorkAssignment(OpBuilder &b, Value itemId,
                                        Value rowBlock) {
  KernelBuilder k{b, loc};
  item.seq = k.loadIndex(args.workItems, {itemId, c0});
  item.begin = k.loadIndex(args.workItems, {itemId, c1});
  item.end = k.loadIndex(args.workItems, {itemId, k.idx(2)});
  item.slot = k.loadIndex(args.workItems, {itemId, k.idx(3)});
  item.qBegin = k.loadIndex(args.qoIndptr, {item.seq});
  item.qLen =
      k.sub(k.loadIndex(args.qoIndptr, {k.add(item.seq, c1)}), item.qBegin);
  item.kvBegin = k.loadIndex(args.kvIndptr, {item.seq});
  item.kvLen = emitSequenceLength(b);
  // The query rows of one block of heads_per_workgroup heads, q_len·hpw of
  // them, in groups of 16 heads (token-major): the workgroup takes
  // rowGroups() consecutive groups and its waves share every KV tile.
  // Workgroups past the rows have nothing to do.
  Value headBlock = k.rem(rowBlock, k.idx(plan.headBlocks()));
  Value numGroups = k.mul(item.qLen, k.idx(plan.groupsPerToken()));
  Value firstGroup = k.mul(k.div(rowBlock, k.idx(plan.headBlocks())),
                           k.idx(plan.rowGroups()));
  Value blockHasRows = k.lessThan(firstGroup, numGroups);
  groupsOfBlock = {firstGroup, numGroups, headBlock};
  return blockHasRows;
}

void PartialKernel::emitWaveRows(OpBuilder &b) {
  KernelBuilder k{b, loc};
  auto [firstGroup, numGroups, headBlock] = groupsOfBlock;
  // A wave's group and its share of the group's work (W = 1: its own
  // group, all of the tile's rows and columns).
  int64_t split = plan.wavesPerRowGroup();
  rows.rowGroup =
      split == 1 ? rows.wave : k.div(rows.uniformWave, k.idx(split));
  Value part = split == 1 ? c0 : k.rem(rows.uniformWave, k.idx(split));
  rows.part = part;
  rows.firstPart =
      split == 1 ? Value()
                 : arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                         part, c0)
                       .getResult();
  rows.kvRowBase =
      split == 1 ? c0 : k.mul(part, k.idx(plan.kvRowsPerWave()));
  rows.vColBase =
      split == 1 ? c0 : k.mul(part, k.idx(plan.vColumnsPerWave()));
  // Waves past the block's rows repeat the last group so that every wave
  // reaches the barriers, and write nothing.
  Value group = k.add(firstGroup, rows.rowGroup);
  rows.isRealRow = k.lessThan(group, numGroups);
  Value clampedGroup = k.minS(group, k.sub(numGroups, c1));
  rows.token = k.div(clampedGroup, k.idx(plan.groupsPerToken()));
  rows.headGroup =
      k.add(k.mul(headBlock, k.idx(plan.groupsPerToken())),
            k.rem(clampedGroup, k.idx(plan.groupsPerToken())));
  rows.tokenRow = k.add(item.qBegin, rows.token);
  // Token i sees positions < kv_len - (q_len - 1 - i).
  rows.visibleEnd =
      k.add(k.sub(item.kvLen, k.sub(item.qLen, c1)), rows.token);
  // Lane roles of the softmax (GFX950Kernels.h: WaveRows).
  bool scoresInLanes = strategy.qk == QKPath::ScaledMfma;
  rows.row = scoresInLanes ? k.rem(rows.lane, k.idx(kRowsPerWave))
                           : k.div(rows.lane, k.idx(4));
  rows.quarter = scoresInLanes ? k.div(rows.lane, k.idx(kRowsPerWave))
                               : k.rem(rows.lane, k.idx(4));
}

Value PartialKernel::chunkColumn(OpBuilder &b, int64_t c) {
  KernelBuilder k{b, loc};
  return c == 0 ? rows.vColBase
                : k.add(rows.vColBase, k.idx(c * plan.accChunkColumns()));
}

Value PartialKernel::fragmentFirstHead(OpBuilder &b, int64_t f) {
  KernelBuilder k{b, loc};
  return k.add(k.mul(rows.headGroup, k.idx(plan.rowsPerWave())),
               k.idx(kRowsPerWave * f));
}

Value PartialKernel::fragmentRow(OpBuilder &b, int64_t f) {
  KernelBuilder k{b, loc};
  return f == 0 ? rows.row : k.add(rows.row, k.idx(kRowsPerWave * f));
}

PartialKernel::RunningState
PartialKernel::RunningState::unpack(ValueRange values, int64_t fragments) {
  RunningState state;
  for (int64_t f = 0; f < fragments; ++f)
    state.softmax.push_back({values[f], values[fragments + f]});
  for (Value acc : values.drop_front(2 * fragments))
    state.acc.push_back(acc);
  return state;
}

SmallVector<Value> PartialKernel::RunningState::pack() const {
  SmallVector<Value> values;
  for (const SoftmaxState &s : softmax)
    values.push_back(s.max);
  for (const SoftmaxState &s : softmax)
    values.push_back(s.sum);
  values.append(acc.begin(), acc.end());
  return values;
}

Value PartialKernel::emitSequenceLength(OpBuilder &b) {
  KernelBuilder k{b, loc};
  Value count =
      k.sub(k.loadIndex(args.kvIndptr, {k.add(item.seq, c1)}), item.kvBegin);
  if (pageSize == 0)
    return count;
  Value p = k.idx(pageSize);
  Value lastEntry = k.loadIndex(args.kvLastPageLen, {item.seq});
  Value last = arith::MaxSIOp::create(b, loc, k.minS(lastEntry, p), c1);
  Value length = k.add(k.mul(k.sub(count, c1), p), last);
  return arith::SelectOp::create(
      b, loc, k.lessThan(c0, count), length, c0);
}

void PartialKernel::emitBody(OpBuilder &b) {
  KernelBuilder k{b, loc};
  c0 = k.idx(0);
  c1 = k.idx(1);
  rows.tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  rows.wave = k.div(rows.tid, k.idx(kWaveSize));
  rows.lane = k.rem(rows.tid, k.idx(kWaveSize));
  // The same wave in an SGPR (read from the first lane once): the DMA's
  // LDS destinations, and with several waves a row group their group and
  // part, derive from it by scalar arithmetic. (A row group per wave keeps
  // the vector form, with which the bf16 H = 128 loop's LDS reads folded
  // their offsets better: docs/performance.md, 2026-12-02.)
  Value tid32 = arith::IndexCastUIOp::create(b, loc, b.getI32Type(), rows.tid);
  Value waveShift = i32Const(b, llvm::Log2_64(kWaveSize));
  Value wave32 = arith::ShRUIOp::create(b, loc, tid32, waveShift);
  rows.uniformWave = toIndex(
      b, ROCDL::ReadfirstlaneOp::create(b, loc, b.getI32Type(), wave32));
  // Logical workgroup j runs in dispatch slot j mod S of XCD j div S (S
  // slots per XCD): the hardware deals workgroup ids round-robin to the
  // XCDs (id mod xcds), so consecutive logical workgroups, which hold the
  // consecutive row blocks of a work item, run together on one XCD and
  // share its L2: a tile comes from HBM once.
  Value id = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  Value xcd = k.rem(id, k.idx(xcds));
  Value slot = k.div(id, k.idx(xcds));
  Value logical = k.add(k.mul(xcd, k.idx(workgroups / xcds)), slot);
  Value first = k.loadIndex(args.workgroupUnits, {logical});
  Value last = k.loadIndex(args.workgroupUnits, {k.add(logical, c1)});
  scf::ForOp::create(b, loc, first, last, c1, ValueRange{},
                     [&](OpBuilder &lb, Location, Value unit, ValueRange) {
                       OpBuilder::InsertionGuard g(b);
                       b.setInsertionPointToStart(lb.getInsertionBlock());
                       emitUnit(b, unit);
                       scf::YieldOp::create(b, loc);
                     });
  gpu::ReturnOp::create(b, loc);
}

void PartialKernel::emitUnit(OpBuilder &b, Value unit) {
  KernelBuilder k{b, loc};
  Value itemId = k.loadIndex(args.workUnits, {unit, c0});
  Value rowBlock = k.loadIndex(args.workUnits, {unit, c1});
  Value blockHasRows = emitWorkAssignment(b, itemId, rowBlock);
  auto blockActive =
      scf::IfOp::create(b, loc, blockHasRows, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPoint(blockActive.thenBlock()->getTerminator());
  emitWaveRows(b);
  emitQPreload(b);

  // The first tile in flight before the loop.
  item.lastPos = k.sub(item.end, c1);
  Value hasRows = k.lessThan(item.begin, item.end);
  scf::IfOp::create(b, loc, hasRows, [&](OpBuilder &ib, Location) {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(ib.getInsertionBlock(), ib.getInsertionPoint());
    emitTileDma(b, item.begin, c0);
    scf::YieldOp::create(b, loc);
  });
  scf::ForOp loop = emitKVLoop(b);
  emitEpilogue(b, loop);
  // The next unit's first DMA and stores overwrite LDS that other waves
  // may still read.
  b.setInsertionPointAfter(blockActive);
  gpu::BarrierOp::create(b, loc);
}

scf::ForOp PartialKernel::emitKVLoop(OpBuilder &b) {
  KernelBuilder k{b, loc};
  Type f32 = b.getF32Type();
  auto accType = VectorType::get({kRowsPerWave, plan.accChunkColumns()}, f32);
  zeroAcc = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(accType, b.getF32FloatAttr(0.0)));
  negInf = k.f32(-INFINITY);
  MLIRContext *ctx = b.getContext();
  AffineExpr m, n, kk;
  bindDims(ctx, m, n, kk);
  qkMaps = b.getAffineMapArrayAttr(
      {AffineMap::get(3, 0, {m, kk}, ctx), AffineMap::get(3, 0, {n, kk}, ctx),
       AffineMap::get(3, 0, {m, n}, ctx)});
  pvMaps = b.getAffineMapArrayAttr(
      {AffineMap::get(3, 0, {m, kk}, ctx), AffineMap::get(3, 0, {kk, n}, ctx),
       AffineMap::get(3, 0, {m, n}, ctx)});
  iters = b.getArrayAttr(
      {vector::IteratorTypeAttr::get(ctx, vector::IteratorType::parallel),
       vector::IteratorTypeAttr::get(ctx, vector::IteratorType::parallel),
       vector::IteratorTypeAttr::get(ctx, vector::IteratorType::reduction)});
  padElem = arith::ConstantOp::create(b, loc, b.getFloatAttr(elemType(b), 0.0));
  padF32 = k.f32(0.0);
  if (strategy.qk == QKPath::Bf16Mfma)
    emitBf16QTile(b);
  // The tiles every row sees whole run without the score mask (no
  // compares and selects a column); the item's last tiles, partial or
  // past a token's causal limit, follow in a masked copy of the step.
  RunningState start;
  for (int64_t f = 0; f < plan.fragments(); ++f) {
    start.softmax.push_back({negInf, k.f32(0.0)});
    start.acc.append(plan.accChunks(), zeroAcc);
  }
  SmallVector<Value> init = start.pack();
  Value wholeEnd = emitWholeTilesEnd(b);
  scf::ForOp whole =
      emitTileLoop(b, toI32(b, item.begin), wholeEnd, init, /*masked=*/false);
  return emitTileLoop(b, wholeEnd, toI32(b, item.end), whole.getResults(),
                      /*masked=*/true);
}

Value PartialKernel::emitWholeTilesEnd(OpBuilder &b) {
  KernelBuilder k{b, loc};
  // Token 0 sees the fewest positions: kv_len - (q_len - 1).
  Value seenByAll = k.add(k.sub(item.kvLen, item.qLen), c1);
  Value unmasked = toI32(b, k.minS(item.end, seenByAll));
  Value begin = toI32(b, item.begin);
  Value span = arith::MaxSIOp::create(
      b, loc, arith::SubIOp::create(b, loc, unmasked, begin), i32Const(b, 0));
  Value tiles = arith::DivSIOp::create(b, loc, span, i32Const(b, kTileRows));
  return arith::AddIOp::create(
      b, loc, begin,
      arith::MulIOp::create(b, loc, tiles, i32Const(b, kTileRows)));
}

scf::ForOp PartialKernel::emitTileLoop(OpBuilder &b, Value begin, Value end,
                                       ValueRange init, bool masked) {
  // i32 bounds: gfx9's scalar unit has no 64-bit signed compare, so an
  // index loop would test its bound in VALU.
  return scf::ForOp::create(
      b, loc, begin, end, i32Const(b, kTileRows), init,
      [&](OpBuilder &lb, Location, Value tileStart, ValueRange carried) {
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(lb.getInsertionBlock());
        scf::YieldOp::create(
            b, loc, emitLoopStep(b, toIndex(b, tileStart), carried, masked));
      });
}

SmallVector<Value> PartialKernel::emitLoopStep(OpBuilder &b, Value tileStart,
                                               ValueRange carried,
                                               bool masked) {
  KernelBuilder k{b, loc};
  RunningState running = RunningState::unpack(carried, plan.fragments());
  Value tileIndex = k.div(k.sub(tileStart, item.begin), k.idx(kTileRows));
  Value stage = k.rem(tileIndex, k.idx(kStages));
  Value nextStart = k.add(tileStart, k.idx(kTileRows));
  Value nextStage = k.rem(k.add(stage, c1), k.idx(kStages));
  emitTileHandoff(b, nextStage, nextStart);
  if (testHazard != "drop-tile-barrier")
    gpu::BarrierOp::create(b, loc);

  // bf16: the softmax's lanes read back the scores other lanes of their
  // wave wrote to LDS (only their own wave's: the waves of a row group
  // exchange just their rows' tile maxima, behind a barrier of the
  // softmax's own). LLVM does not order one lane's LDS store before
  // another lane's load, so a barrier does (the emu's checker sees hazards
  // between waves only). fp8 and mxfp4 keep their scores in registers.
  SmallVector<Value, 2> laneScores = emitQK(b, stage);
  if (laneScores.empty())
    gpu::BarrierOp::create(b, loc);
  RunningState next;
  next.softmax = emitSoftmax(b, tileStart, laneScores, running.softmax, masked);
  gpu::BarrierOp::create(b, loc);

  // acc = acc * rescale(row) + P · V (V = the first Dv tile columns), a
  // column chunk at a time, every fragment on it: the fragments' V reads
  // are the same loads.
  int64_t chunks = plan.accChunks();
  next.acc.resize(running.acc.size());
  auto rescaled = [&](int64_t f, int64_t c) -> Value {
    return arith::MulFOp::create(b, loc, running.acc[f * chunks + c],
                                 readRowFactors(b, f));
  };
  if (strategy.pv == PVPath::DecodedHalfTiles) {
    for (int64_t f = 0; f < plan.fragments(); ++f)
      for (int64_t c = 0; c < chunks; ++c)
        next.acc[f * chunks + c] = rescaled(f, c);
    next.acc = emitDecodedPV(b, stage, next.acc);
  } else {
    for (int64_t c = 0; c < chunks; ++c)
      for (int64_t f = 0; f < plan.fragments(); ++f)
        next.acc[f * chunks + c] = emitTilePV(b, stage, rescaled(f, c), f, c);
  }
  // The next iteration's DMA overwrites the stage other waves still read
  // for PV (fp8, bf16). mxfp4's decoded PV reads the stage
  // only while decoding V, before barriers of its own, and the score, P
  // and factor buffers are each wave's own: it needs no barrier here (the
  // emu's hazard checker proves both, test/Integration/emu-hazards.test).
  if (strategy.pv != PVPath::DecodedHalfTiles &&
      testHazard != "drop-loop-barrier")
    gpu::BarrierOp::create(b, loc);
  return next.pack();
}

Value PartialKernel::readRowFactors(OpBuilder &b, int64_t f) {
  // Row vector broadcast along the columns: (wave, row) -> (row, *).
  MLIRContext *ctx = b.getContext();
  auto rowMap = AffineMap::get(
      2, 0, {b.getAffineDimExpr(1), b.getAffineConstantExpr(0)}, ctx);
  auto accType =
      VectorType::get({kRowsPerWave, plan.accChunkColumns()}, b.getF32Type());
  return vector::TransferReadOp::create(
      b, loc, accType, lds.rowFactors,
      ValueRange{rows.wave,
                 arith::ConstantIndexOp::create(b, loc, kRowsPerWave * f)},
      padF32, rowMap, ArrayRef<bool>{true, true});
}

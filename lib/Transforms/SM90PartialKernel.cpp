//===- SM90PartialKernel.cpp - the sm_90a partial-decode kernel -----------===//
//
// See SM90Kernels.h for the layout. Synchronization: every thread copies
// (mxfp4: and decodes) part of the tile that all warps read, so a step's
// first barrier publishes its tile and frees the stage it refills; with
// bulk copies each thread waits for the tile's mbarrier phase instead, and
// the partial-score barrier frees the stage. The QK partial scores and P
// move between warps through shared memory, each behind a barrier of its
// own.
//
//===----------------------------------------------------------------------===//

#include "SM90Kernels.h"

#include "mla/ABI.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;
using namespace mla;

namespace {
constexpr int64_t kLanes = SM90KernelPlan::kLanesPerRow;
} // namespace

SM90PartialKernel::SM90PartialKernel(PartialDecodeOp op, int64_t workgroups,
                                     int64_t ldsLimit, StringRef testHazard)
    : op(op), loc(op.getLoc()),
      plan(SM90KernelShape{
          cacheFormat(op.getKvFormat()), op.getNumHeads(), op.getQKHeadDim(),
          static_cast<int64_t>(op.getVHeadDim()), op.getConfig().getKvTile(),
          op.getConfig().getHeadsPerWorkgroup(),
          op.getConfig().getWavesPerWorkgroup(),
          op.getConfig().getPipelineStages(),
          op.getConfig().getWavesPerRowGroup(),
          op.getConfig().getRowsPerWave()}),
      format(cacheFormat(op.getKvFormat())), workgroups(workgroups),
      ldsLimit(ldsLimit), numHeads(op.getNumHeads()), qkDim(op.getQKHeadDim()),
      vDim(static_cast<int64_t>(op.getVHeadDim())),
      tile(op.getConfig().getKvTile()), pageSize(op.getPageSize()),
      testHazard(testHazard.str()) {}

MemRefType SM90PartialKernel::stageType(Builder &b) const {
  // Swizzled: [stage][slab][row][stored chunk][value].
  if (plan.swizzledStages())
    return ldsType({plan.stages(), plan.slabs(), tile,
                    SM90KernelPlan::kSwizzleBytes / 16, 8},
                   operandType(b));
  switch (format) {
  case CacheFormat::BF16:
    return ldsType({plan.stages(), tile, plan.rowStride()}, operandType(b));
  case CacheFormat::FP8: // [stage][row group][byte pair]: ldmatrix's 16 bits
    return ldsType({plan.stages(), tile / plan.stageGroupRows(),
                    plan.stageGroupBytes() / 2},
                   b.getI16Type());
  case CacheFormat::MXFP4:
    break;
  }
  return ldsType({plan.stages(), tile, plan.stageRowBytes()}, b.getI8Type());
}

// The cache as its bytes (fp8 codes, E2M1 pairs, E8M0 scales): the kernel
// decodes them itself.
PartialKernelSignature SM90PartialKernel::signature(Builder &b) const {
  Type codes =
      format == CacheFormat::BF16 ? Type(b.getBF16Type()) : b.getI8Type();
  return {format,     numHeads, qkDim, vDim,
          workgroups, pageSize, codes, b.getI8Type()};
}

gpu::GPUFuncOp SM90PartialKernel::build(OpBuilder &mb, StringRef name) {
  MLIRContext *ctx = op.getContext();
  Builder b(ctx);
  PartialKernelSignature sig = signature(b);
  SmallVector<Type> types = sig.argTypes(b);
  Type f32 = b.getF32Type(), operand = operandType(b);
  // Q, the stages (bf16: the operand tiles; else the cache's bytes), the
  // decoded tile (mxfp4), the partial scores, P, the row factors. wgmma's P
  // is core matrices [row group][column group][row][value].
  constexpr int64_t core = SM90KernelPlan::kCoreRows;
  MemRefType stages = stageType(b);
  MemRefType p =
      plan.outputOnWarpgroups()
          ? ldsType({plan.pParts(), plan.rows() / core, core, tile / 8, 8},
                    operand)
          : ldsType({plan.pParts(), plan.rows(), plan.pRowStride()}, operand);
  SmallVector<Type> shared = {ldsType({plan.rows(), plan.rowStride()}, operand),
                              stages};
  if (plan.decodesTile())
    shared.push_back(ldsType({tile, plan.rowStride()}, operand));
  shared.append(
      {ldsType({plan.scoreParts(), plan.rows(), plan.partialScoreStride()},
               f32),
       p, ldsType({plan.rows()}, f32)});
  unsigned pIndex = shared.size() - 2;
  if (plan.bulkCopies())
    shared.push_back(ldsType({plan.stages()}, b.getI64Type()));
  auto func = gpu::GPUFuncOp::create(mb, loc, name,
                                     FunctionType::get(ctx, types, {}),
                                     shared, TypeRange{});
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func.setKnownBlockSizeAttr(
      b.getDenseI32ArrayAttr({int32_t(plan.threads()), 1, 1}));
  // ptxas keeps the registers within what the persistent grid's blocks per
  // SM leave each thread.
  func->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                b.getI32IntegerAttr(plan.blocksPerSM()));
  // The tile's rows are stored and Q's read in 16-byte vectors; swizzled
  // stages start on the swizzle's 1024-byte period.
  // wgmma's P on its swizzle's period.
  for (unsigned i = 0; i < shared.size(); ++i)
    func.setWorkgroupAttributionAttr(
        i, LLVM::LLVMDialect::getAlignAttrName(),
        b.getI64IntegerAttr(i == 1        ? plan.stageAlignment()
                            : i == pIndex ? plan.pAlignment()
                                          : 16));
  func->setAttr(
      MLADialect::kLaunchAttrName,
      launchAttr(b, {std::to_string(workgroups), "1", "1"}, plan.threads(),
                 plan.ldsBytes(), sig.argNames(), types,
                 {b.getNamedAttr("rows_per_workgroup",
                                 b.getI64IntegerAttr(plan.rowsPerWorkgroup())),
                  b.getNamedAttr("heads_per_block",
                                 b.getI64IntegerAttr(plan.headsPerBlock())),
                  b.getNamedAttr("waits_for_previous", b.getBoolAttr(true))}));
  bindArguments(func);
  OpBuilder bodyBuilder(ctx);
  bodyBuilder.setInsertionPointToStart(&func.getBody().front());
  emitBody(bodyBuilder);
  return func;
}

void SM90PartialKernel::bindArguments(gpu::GPUFuncOp func) {
  Builder b(func.getContext());
  args = signature(b).bind(func);
  SmallVector<Value> shared(func.getWorkgroupAttributions());
  if (!plan.decodesTile())
    shared.insert(shared.begin() + 2, Value());
  if (!plan.bulkCopies())
    shared.push_back(Value());
  smem = {shared[0], shared[1], shared[2], shared[3],
          shared[4], shared[5], shared[6]};
}

void SM90PartialKernel::emitBody(OpBuilder &b) {
  KernelBuilder k{b, loc};
  c0 = k.idx(0);
  c1 = k.idx(1);
  negInf = k.f32(-INFINITY);
  // Launched itself while the stream's previous kernel finishes (the last
  // decode's combine, the plan kernel, whatever wrote q or the cache), it
  // waits for that kernel before it reads or writes global memory.
  NVVM::GriddepcontrolOp::create(b, loc, NVVM::GridDepActionKind::wait);
  thread.tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  thread.row = k.div(thread.tid, k.idx(kLanes));
  thread.lane = k.rem(thread.tid, k.idx(kLanes));
  // The mma.sync roles: lane 4 g + t of a warp holds rows g and g + 8 and
  // columns 2 t, 2 t + 1 of each 16 x 8 fragment.
  thread.warp = k.div(thread.tid, k.idx(32));
  Value warpLane = k.rem(thread.tid, k.idx(32));
  thread.group = k.div(warpLane, k.idx(4));
  thread.pair = k.rem(warpLane, k.idx(4));
  thread.matrix = k.div(warpLane, k.idx(8));
  thread.matrixRow = k.rem(warpLane, k.idx(8));
  thread.stepRow = k.add(k.mul(k.rem(thread.matrix, k.idx(2)), k.idx(8)),
                         thread.matrixRow);
  // log2(e)·sm_scale (·kv_scale for fp8): dot products -> exp2 scores;
  // fp8's V carries the per-tensor scale into the output.
  double exp2Scale = op.getEffectiveSmScale() * 1.4426950408889634;
  scoreScale = k.f32(exp2Scale);
  outScale = k.f32(1.0);
  if (format == CacheFormat::FP8) {
    outScale = k.load(args.kvScale, {c0});
    scoreScale = k.fmul(outScale, scoreScale);
  }
  if (plan.decodesTile()) {
    // The decoded tile's values are scaled by 2^-kTileExponentShift.
    double undo = std::ldexp(1.0, SM90KernelPlan::kTileExponentShift);
    outScale = k.f32(undo);
    scoreScale = k.f32(exp2Scale * undo);
  }
  // The persistent grid: logical workgroup j runs units [indptr[j],
  // indptr[j+1]), and the plan spreads a batch's units evenly over them.
  // The hardware places blocks 0 .. SMs - 1 mostly one an SM and block
  // s + SMs mostly beside block s. Where the plan's units leave half the
  // grid idle, logical workgroups 2 s and 2 s + 1 run as blocks s and
  // s + SMs, which gives each busy block an SM (H100, fp8, 64 one-tile
  // units: the last ends 4.7 us after the first starts, not 6.6); a
  // fuller grid keeps logical workgroup j as block j, whose idle tail
  // leaves whole SMs free for the combine's first blocks (B = 32 and 64,
  // kv = 1024: 2-4% faster so; docs/performance.md). Both candidates'
  // bounds load beside the unit count: the choice adds no dependent load.
  // Blocks one an SM run logical workgroup j as block j.
  Value block = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  Value first = k.loadIndex(args.workgroupUnits, {block});
  Value last = k.loadIndex(args.workgroupUnits, {k.add(block, c1)});
  Value spreadFirst, spreadLast;
  if (plan.blocksPerSM() > 1) {
    int64_t sms = workgroups / plan.blocksPerSM();
    Value spread =
        k.add(k.mul(k.rem(block, k.idx(sms)), k.idx(plan.blocksPerSM())),
              k.div(block, k.idx(sms)));
    spreadFirst = k.loadIndex(args.workgroupUnits, {spread});
    spreadLast = k.loadIndex(args.workgroupUnits, {k.add(spread, c1)});
  }
  Value units = k.loadIndex(args.workgroupUnits, {k.idx(workgroups)});
  Value roomyGrid = k.lessThan(units, k.idx(workgroups / 2 + 1));
  if (spreadFirst) {
    // The choice also reads both loaded bounds (always true: indptr never
    // decreases), so that LLVM cannot fold the selects of loads into loads
    // from a selected address, which would wait for the unit count.
    Value choice = arith::AndIOp::create(
        b, loc, roomyGrid,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, spreadFirst,
                              spreadLast));
    first = arith::SelectOp::create(b, loc, choice, spreadFirst, first);
    last = arith::SelectOp::create(b, loc, choice, spreadLast, last);
  }
  if (plan.bulkCopies()) {
    emitStageBarrierInit(b, /*invalidate=*/false);
    gpu::BarrierOp::create(b, loc);
  }
  // The combine kernel's launch: its blocks take what SMs have free and
  // wait there for this whole grid before they read the partials
  // (buildCombineKernel's waitsForPrevious). Released at once where the
  // plan's units leave at least half the grid idle; else by each block as
  // it starts its last unit where that unit is long, as it ends otherwise
  // (an idle block at once): a grid full of units leaves only its idle
  // blocks' few SMs free, and the combine's blocks would crowd onto those
  // (H100, fp8 B = 4, kv = 8192, 256 units of 2 tiles: the combine 11.2
  // -> 6.0 us after the partial kernel), while blocks whose last units
  // end unevenly free their SMs for it one by one (mxfp4 B = 256, kv =
  // 8192: 658 -> 651 us; docs/performance.md).
  Value idle =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, first, last);
  ifThen(b, loc, arith::OrIOp::create(b, loc, roomyGrid, idle),
         [&] { emitCombineLaunch(b); });
  combineLaunch = {k.lessThan(k.idx(workgroups / 2), units), k.sub(last, c1)};
  forLoop(b, loc, first, last, c1, [&](Value unit) { emitUnit(b, unit); });
  gpu::ReturnOp::create(b, loc);
}

void SM90PartialKernel::emitCombineLaunch(OpBuilder &b) {
  NVVM::GriddepcontrolOp::create(b, loc,
                                 NVVM::GridDepActionKind::launch_dependents);
}

void SM90PartialKernel::emitUnit(OpBuilder &b, Value unit) {
  KernelBuilder k{b, loc};
  Value blockHasRows = emitWorkAssignment(b, unit);
  // The block's last unit on a full grid releases the combine's launch:
  // before its tiles where it has more than kLongUnitTiles, else after.
  Value lastOnFullGrid = arith::AndIOp::create(
      b, loc, combineLaunch.fullGrid,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, unit,
                            combineLaunch.lastUnit));
  Value length = k.sub(item.end, item.begin);
  Value longUnit = k.lessThan(k.idx(kLongUnitTiles * tile), length);
  ifThen(b, loc, arith::AndIOp::create(b, loc, lastOnFullGrid, longUnit),
         [&] { emitCombineLaunch(b); });
  // Uniform over the block: every thread reaches the same barriers.
  ifThen(b, loc, blockHasRows, [&] {
    rowScoreScale = scoreScale;
    // The first tiles' copies before Q's loads: their latencies overlap.
    SmallVector<Value> scales = emitFirstTiles(b);
    if (format == CacheFormat::FP8)
      emitScaledQLoad(b);
    else
      emitQLoad(b);
    // Bulk copies: no barrier opens a step (emitLoopStep); this one
    // publishes Q.
    if (plan.bulkCopies())
      gpu::BarrierOp::create(b, loc);
    scf::ForOp loop = emitKVLoop(b, scales);
    // Only empty groups (tiles past the item) can be in flight; none may
    // land in the next unit's stages (bulk copies: none is issued past the
    // item). The last PV has read the rescale factors the epilogue
    // overwrites.
    if (!plan.bulkCopies())
      NVVM::CpAsyncWaitGroupOp::create(b, loc, 0);
    gpu::BarrierOp::create(b, loc);
    // Every thread has waited for the unit's last tile: its mbarriers are
    // idle, and the barrier closing the unit publishes them anew.
    if (plan.bulkCopies())
      emitStageBarrierInit(b, /*invalidate=*/true);
    emitEpilogue(b, loop);
    // The next unit overwrites Q and the tile that others may still read.
    gpu::BarrierOp::create(b, loc);
  });
  Value shortUnit = k.lessThan(length, k.idx(kLongUnitTiles * tile + 1));
  ifThen(b, loc, arith::AndIOp::create(b, loc, lastOnFullGrid, shortUnit),
         [&] { emitCombineLaunch(b); });
}

Value SM90PartialKernel::emitSequenceLength(OpBuilder &b) {
  KernelBuilder k{b, loc};
  Value count =
      k.sub(k.loadIndex(args.kvIndptr, {k.add(item.seq, c1)}), item.kvBegin);
  if (pageSize == 0)
    return count;
  Value p = k.idx(pageSize);
  Value lastEntry = k.loadIndex(args.kvLastPageLen, {item.seq});
  Value lastLen = arith::MaxSIOp::create(b, loc, k.minS(lastEntry, p), c1);
  Value length = k.add(k.mul(k.sub(count, c1), p), lastLen);
  return arith::SelectOp::create(b, loc, k.lessThan(c0, count), length, c0);
}

Value SM90PartialKernel::emitWorkAssignment(OpBuilder &b, Value unit) {
  KernelBuilder k{b, loc};
  Value itemId = k.loadIndex(args.workUnits, {unit, c0});
  Value rowBlock = k.loadIndex(args.workUnits, {unit, c1});
  item.seq = k.loadIndex(args.workItems, {itemId, c0});
  item.begin = k.loadIndex(args.workItems, {itemId, c1});
  item.end = k.loadIndex(args.workItems, {itemId, k.idx(2)});
  item.slot = k.loadIndex(args.workItems, {itemId, k.idx(3)});
  item.lastPos = k.sub(item.end, c1);
  item.qBegin = k.loadIndex(args.qoIndptr, {item.seq});
  item.qLen =
      k.sub(k.loadIndex(args.qoIndptr, {k.add(item.seq, c1)}), item.qBegin);
  item.kvBegin = k.loadIndex(args.kvIndptr, {item.seq});
  item.kvLen = emitSequenceLength(b);
  // A sequence with a single work item is final at the epilogue (loaded
  // here, its latency behind the loop's).
  Value seqItems = k.sub(k.loadIndex(args.itemIndptr, {k.add(item.seq, c1)}),
                         k.loadIndex(args.itemIndptr, {item.seq}));
  item.direct =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, seqItems, c1);
  // Row blocks count the item's q_len·H rows token-major, 16 at a time.
  item.numRows = k.mul(item.qLen, k.idx(numHeads));
  item.firstRow = k.mul(rowBlock, k.idx(plan.rows()));
  // Threads past the rows repeat the last row (they reach every barrier)
  // and write nothing.
  Value rowIndex = k.add(item.firstRow, thread.row);
  thread.isReal = k.lessThan(rowIndex, item.numRows);
  Value clamped = k.minS(rowIndex, k.sub(item.numRows, c1));
  thread.token = k.div(clamped, k.idx(numHeads));
  thread.head = k.rem(clamped, k.idx(numHeads));
  thread.tokenRow = k.add(item.qBegin, thread.token);
  // Token i sees positions < kv_len - (q_len - 1 - i).
  thread.visibleEnd =
      k.add(k.sub(item.kvLen, k.sub(item.qLen, c1)), thread.token);
  return k.lessThan(item.firstRow, item.numRows);
}

SmallVector<SM90PartialKernel::QChunk>
SM90PartialKernel::loadQChunks(OpBuilder &b, Value firstChunk,
                               int64_t stride, int64_t count) {
  KernelBuilder k{b, loc};
  // Chunk e: 8 columns of row e / (Dqk / 8) of the block; rows past the
  // item repeat its last row. All loads first: they fly together.
  int64_t rowChunks = qkDim / 8, chunks = plan.rows() * rowChunks;
  SmallVector<QChunk> loaded;
  for (int64_t i = 0; i < count; ++i) {
    Value e = k.add(firstChunk, k.idx(stride * i));
    Value clamped = k.minS(e, k.idx(chunks - 1));
    Value r = k.div(clamped, k.idx(rowChunks));
    Value col = k.mul(k.rem(clamped, k.idx(rowChunks)), k.idx(8));
    Value row = k.minS(k.add(item.firstRow, r), k.sub(item.numRows, c1));
    Value token = k.add(item.qBegin, k.div(row, k.idx(numHeads)));
    Value head = k.rem(row, k.idx(numHeads));
    Value v = vector::LoadOp::create(
        b, loc, VectorType::get({8}, b.getBF16Type()), args.q,
        ValueRange{token, head, col}, /*nontemporal=*/false, llvm::Align(16));
    loaded.push_back({v, r, col, k.lessThan(e, k.idx(chunks))});
  }
  return loaded;
}

void SM90PartialKernel::emitQLoad(OpBuilder &b) {
  int64_t chunks = plan.rows() * qkDim / 8, threads = plan.threads();
  for (const QChunk &c :
       loadQChunks(b, thread.tid, threads, (chunks + threads - 1) / threads))
    ifThen(b, loc, c.valid, [&] {
      Value values = c.values;
      if (plan.decodesTile()) {
        // In the decoded tile's column order (an 8-column chunk is a group).
        SmallVector<int64_t> order;
        for (int64_t p = 0; p < SM90KernelPlan::kDecodedGroup; ++p)
          order.push_back(SM90KernelPlan::decodedColumn(p));
        values = vector::ShuffleOp::create(b, loc, values, values, order);
      }
      vector::StoreOp::create(b, loc, values, smem.q, ValueRange{c.row, c.col},
                              /*nontemporal=*/false, llvm::Align(16));
    });
}

Type SM90PartialKernel::operandType(Builder &b) const {
  return format == CacheFormat::FP8 ? Type(b.getF16Type())
                                    : Type(b.getBF16Type());
}

void SM90PartialKernel::emitScaledQLoad(OpBuilder &b) {
  KernelBuilder k{b, loc};
  Type f32 = b.getF32Type(), i32 = b.getI32Type(), f16 = b.getF16Type();
  // The thread's row's chunks lane, lane + 16, ... (each 8 columns).
  int64_t rowChunks = qkDim / 8;
  Value first = k.add(k.mul(thread.row, k.idx(rowChunks)), thread.lane);
  SmallVector<QChunk> chunks =
      loadQChunks(b, first, kLanes, (rowChunks + kLanes - 1) / kLanes);
  // The largest |q| of the row (the sign bit cleared), over its 16 threads;
  // a chunk past the row (in the next, or clamped) does not count.
  Value rowMax = k.f32(0.0);
  for (const QChunk &c : chunks) {
    Value ownRow = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                         c.row, thread.row);
    Value counts = arith::AndIOp::create(b, loc, c.valid, ownRow);
    for (int64_t i = 0; i < 8; ++i) {
      Value q = arith::ExtFOp::create(
          b, loc, f32,
          Value(vector::ExtractOp::create(b, loc, c.values,
                                          ArrayRef<int64_t>{i})));
      Value bits = arith::AndIOp::create(
          b, loc, arith::BitcastOp::create(b, loc, i32, q),
          k.i32(0x7fffffff));
      Value magnitude = arith::BitcastOp::create(b, loc, f32, bits);
      rowMax = arith::SelectOp::create(b, loc, counts,
                                       k.fmax(rowMax, magnitude), rowMax);
    }
  }
  rowMax = arith::BitcastOp::create(b, loc, i32,
                                    rowReduce(b, rowMax, /*isMax=*/true));
  // 2^(141 - e) for the max's biased exponent e, as f32 bits 141 - e + 127
  // clamped to [1, 253] (a zero row: any scale; its inverse stays finite).
  Value exponent = arith::ShRUIOp::create(b, loc, rowMax, k.i32(23));
  Value field = arith::SubIOp::create(b, loc, k.i32(268), exponent);
  field = arith::MaxSIOp::create(b, loc, field, k.i32(1));
  field = arith::MinSIOp::create(b, loc, field, k.i32(253));
  auto power = [&](Value f) {
    return arith::BitcastOp::create(
        b, loc, f32, arith::ShLIOp::create(b, loc, f, k.i32(23)));
  };
  Value scale = power(field);
  Value inverse = power(arith::SubIOp::create(b, loc, k.i32(254), field));
  rowScoreScale = k.fmul(scoreScale, inverse);
  // Within each k-step, column 4 t + e is stored where the mma reads
  // k = 2 t + e (e < 2) or 2 t + 8 + (e - 2): the k order of the K
  // fragments that ldmatrix reads from the fp8 stage (a lane's 4 bytes of
  // a row are its k = 2 t, 2 t + 1, 2 t + 8, 2 t + 9). A chunk's columns
  // 4 t .. 4 t + 3 are two f16 pairs.
  auto f16x2 = VectorType::get({2}, f16);
  for (const QChunk &c : chunks) {
    Value stored = arith::AndIOp::create(
        b, loc, c.valid,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, c.row,
                              thread.row));
    ifThen(b, loc, stored, [&] {
      Value stepStart = k.mul(k.div(c.col, k.idx(16)), k.idx(16));
      Value t0 = k.div(k.sub(c.col, stepStart), k.idx(4));
      for (int64_t p = 0; p < 4; ++p) {
        SmallVector<Value> pair;
        for (int64_t e = 0; e < 2; ++e) {
          Value q = arith::ExtFOp::create(
              b, loc, f32,
              Value(vector::ExtractOp::create(b, loc, c.values,
                                              ArrayRef<int64_t>{2 * p + e})));
          pair.push_back(
              arith::TruncFOp::create(b, loc, f16, k.fmul(q, scale)));
        }
        // Columns 4 t + 2 (p % 2) .. + 1 of t = t0 + p / 2.
        Value t = k.add(t0, k.idx(p / 2));
        Value slot = k.add(k.mul(t, k.idx(2)), k.idx(p % 2 ? 8 : 0));
        vector::StoreOp::create(
            b, loc, vector::FromElementsOp::create(b, loc, f16x2, pair),
            smem.q, ValueRange{thread.row, k.add(stepStart, slot)},
            /*nontemporal=*/false, llvm::Align(4));
      }
    });
  }
}

SmallVector<Value> SM90PartialKernel::emitFirstTiles(OpBuilder &b) {
  KernelBuilder k{b, loc};
  // The first pipeline_stages - 1 tiles in flight; each step issues the
  // next one once its stage's last reader has passed a barrier.
  SmallVector<Value> scales;
  for (int64_t s = 0; s + 1 < plan.stages(); ++s) {
    TileCopies copies =
        emitTileCopies(b, k.add(item.begin, k.idx(s * tile)), k.idx(s));
    llvm::append_range(scales, copies.scales);
  }
  return scales;
}

scf::ForOp SM90PartialKernel::emitKVLoop(OpBuilder &b, ValueRange scales) {
  KernelBuilder k{b, loc};
  SmallVector<Value> init = {negInf, k.f32(0.0)};
  for (int64_t c = 0; c < 4 * plan.outputBlocksPerWarp() * plan.rowFragments();
       ++c)
    init.push_back(k.f32(0.0));
  numAccumulators = init.size() - 2;
  llvm::append_range(init, scales);
  return scf::ForOp::create(
      b, loc, item.begin, item.end, k.idx(tile), init,
      [&](OpBuilder &lb, Location, Value tileStart, ValueRange carried) {
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(lb.getInsertionBlock());
        emitLoopStep(b, tileStart, carried);
      });
}

Value SM90PartialKernel::rowReduce(OpBuilder &b, Value v, bool isMax) {
  KernelBuilder k{b, loc};
  // A row's 16 threads are 16 consecutive lanes of one warp.
  Value width = k.i32(32);
  for (int64_t offset = 1; offset < kLanes; offset *= 2) {
    Value other = gpu::ShuffleOp::create(b, loc, v, k.i32(offset),
                                         width, gpu::ShuffleMode::XOR)
                      .getShuffleResult();
    v = isMax ? k.fmax(v, other) : k.fadd(v, other);
  }
  return v;
}

void SM90PartialKernel::emitLoopStep(OpBuilder &b, Value tileStart,
                                     ValueRange carried) {
  KernelBuilder k{b, loc};
  Value runMax = carried[0], runSum = carried[1];
  ValueRange accIn = carried.slice(2, numAccumulators);
  // mxfp4: the scales of this tile and the ones in flight behind it.
  ValueRange scaleQueue = carried.drop_front(2 + numAccumulators);
  Value stages = k.idx(plan.stages());
  Value step = k.div(k.sub(tileStart, item.begin), k.idx(tile));
  computeStage = k.rem(step, stages);
  if (plan.bulkCopies())
    computePhase = arith::IndexCastOp::create(
        b, loc, b.getI32Type(), k.rem(k.div(step, stages), k.idx(2)));
  // This tile has landed (the thread's copies, or all of it). cp.async: a
  // barrier publishes it and puts the previous step's PV, the last reader
  // of the stage refilled next, behind every thread. Bulk copies: the
  // mbarrier phase publishes it to each waiting thread, and the next
  // copies wait for the partial-score barrier, which every thread reaches
  // after its previous PV: a warp starts its QK while others finish PV.
  // Step 0 has no previous PV: its refill goes ahead of its QK, so that an
  // item's second tile lands as early as the first allows.
  emitTileWait(b);
  fenceForWarpgroups(b);
  if (!plan.bulkCopies())
    gpu::BarrierOp::create(b, loc);
  int64_t slots = format == CacheFormat::MXFP4 ? plan.copyPasses() : 0;
  if (plan.decodesTile())
    emitTileDecode(b, computeStage, scaleQueue.take_front(slots));
  // The next tile's copies, into the stage a barrier freed.
  auto nextTileCopies = [&] {
    return emitTileCopies(
        b, k.add(tileStart, k.idx((plan.stages() - 1) * tile)),
        k.rem(k.add(computeStage, k.idx(plan.stages() - 1)), stages));
  };
  TileCopies copies;
  if (!plan.bulkCopies())
    copies = nextTileCopies();
  else // step 0's refill stage has no previous PV: its copies go first
    ifThen(b, loc, k.lessThan(step, c1), [&] { nextTileCopies(); });
  if (plan.decodesTile())
    gpu::BarrierOp::create(b, loc);
  emitScoreMma(b);
  gpu::BarrierOp::create(b, loc);
  if (plan.bulkCopies())
    ifThen(b, loc, k.lessThan(c0, step), [&] { nextTileCopies(); });
  SmallVector<Value> scores = emitScores(b, tileStart);

  // Online softmax over the row's tile scores.
  Value tileMax = scores[0];
  for (size_t j = 1; j < scores.size(); ++j)
    tileMax = k.fmax(tileMax, scores[j]);
  Value newMax = k.fmax(runMax, rowReduce(b, tileMax, /*isMax=*/true));
  // A row that has seen nothing yet shifts by 0, not by -inf.
  Value empty =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, newMax, negInf);
  Value shift = arith::SelectOp::create(b, loc, empty, k.f32(0.0), newMax);
  Value tileSum = k.f32(0.0);
  // P's parts (SM90KernelPlan::pParts): p ≈ hi (+ lo).
  SmallVector<SmallVector<Value>> probabilities(plan.pParts());
  for (size_t j = 0; j < scores.size(); ++j) {
    Value p = math::Exp2Op::create(
        b, loc, arith::SubFOp::create(b, loc, scores[j], shift));
    tileSum = k.fadd(tileSum, p);
    for (auto [i, part] : llvm::enumerate(probabilities)) {
      Value rounded = arith::TruncFOp::create(b, loc, operandType(b), p);
      part.push_back(rounded);
      if (i + 1 < probabilities.size()) // what the next part keeps
        p = arith::SubFOp::create(
            b, loc, p, arith::ExtFOp::create(b, loc, b.getF32Type(), rounded));
    }
  }
  // The thread's consecutive columns of P in one store (within a core
  // matrix's row for wgmma's P: the width divides 8).
  int64_t width = scores.size();
  Value pCol = k.mul(thread.lane, k.idx(width));
  SmallVector<Value> pIndices = {thread.row, pCol};
  if (plan.outputOnWarpgroups()) {
    Value c8 = k.idx(SM90KernelPlan::kCoreRows);
    // P's swizzle (SM90KernelPlan::pRowBytes): [row / 8][row % 8][chunk ^
    // (row % 8) · rowBytes / 128 mod rowBytes / 16][value].
    Value r8 = k.rem(thread.row, c8);
    int64_t rowBytes = plan.pRowBytes();
    Value swizzle =
        k.rem(k.div(k.mul(r8, k.idx(rowBytes)), k.idx(128)),
              k.idx(rowBytes / 16));
    pIndices = {k.div(thread.row, c8), r8,
                arith::XOrIOp::create(b, loc, k.div(pCol, c8), swizzle),
                k.rem(pCol, c8)};
  }
  for (auto [part, values] : llvm::enumerate(probabilities)) {
    SmallVector<Value> indices = {k.idx(part)};
    llvm::append_range(indices, pIndices);
    vector::StoreOp::create(
        b, loc,
        vector::FromElementsOp::create(
            b, loc, VectorType::get({width}, operandType(b)), values),
        smem.p, indices, /*nontemporal=*/false, llvm::Align(2 * width));
  }
  Value rescale = math::Exp2Op::create(
      b, loc, arith::SubFOp::create(b, loc, runMax, shift));
  // Each thread keeps its own columns' share of the row's sum (the
  // rescale is the row's); the epilogue adds the shares once.
  Value newSum = k.fadd(k.fmul(runSum, rescale), tileSum);
  storeRowFactor(b, rescale);
  // P and the rescale factors of every row.
  fenceForWarpgroups(b);
  gpu::BarrierOp::create(b, loc);
  SmallVector<Value> acc = plan.outputOnWarpgroups()
                               ? emitOutputWgmma(b, accIn)
                               : emitOutputMma(b, accIn);
  SmallVector<Value> results = {newMax, newSum};
  llvm::append_range(results, acc);
  llvm::append_range(results, scaleQueue.drop_front(slots));
  llvm::append_range(results, copies.scales);
  scf::YieldOp::create(b, loc, results);
}

Value SM90PartialKernel::operandTile() const {
  return plan.decodesTile() ? smem.tile : smem.stages;
}

SmallVector<Value> SM90PartialKernel::tileIndices(OpBuilder &b,
                                                  Value rowGroup,
                                                  Value coreRow, Value chunk) {
  KernelBuilder k{b, loc};
  Value c8 = k.idx(8);
  Value row = k.add(k.mul(rowGroup, c8), coreRow);
  if (plan.swizzledStages()) {
    // Row r's chunk c: slab c / 8, stored at c % 8 ^ r % 8 (r % 8 = coreRow).
    Value stored = arith::XOrIOp::create(b, loc, k.rem(chunk, c8), coreRow);
    return {computeStage, k.div(chunk, c8), row, stored, c0};
  }
  if (plan.decodesTile())
    return {row, k.mul(decodedTileUnit(b, chunk), c8)};
  return {computeStage, row, k.mul(chunk, c8)};
}

Value SM90PartialKernel::decodedTileUnit(OpBuilder &b, Value unit) {
  KernelBuilder k{b, loc};
  return arith::XOrIOp::create(b, loc, unit,
                               k.rem(k.div(unit, k.idx(8)), k.idx(4)));
}

void SM90PartialKernel::fenceForWarpgroups(OpBuilder &b) {
  if (!plan.outputOnWarpgroups())
    return;
  // What cp.async and the threads' stores wrote (the generic proxy) is
  // visible to wgmma's reads (the async proxy) after the barrier.
  NVVM::FenceProxyOp::create(
      b, loc, NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(b.getContext(),
                                 NVVM::SharedSpace::shared_cta));
}

void SM90PartialKernel::storeRowFactor(OpBuilder &b, Value factor) {
  Value firstLane =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, thread.lane, c0);
  ifThen(b, loc, firstLane, [&] {
    memref::StoreOp::create(b, loc, factor, smem.factors,
                            ValueRange{thread.row});
  });
}

Value SM90PartialKernel::cacheRow(OpBuilder &b, Value pos) {
  KernelBuilder k{b, loc};
  if (pageSize == 0)
    return k.add(item.kvBegin, pos);
  // Page ids are clamped into the pool (unsigned: negative ones too), so a
  // bad table never reads outside it.
  Value p = k.idx(pageSize);
  Value entry = k.add(item.kvBegin, k.div(pos, p));
  Value page = k.load(args.kvIndices, {entry}); // i32
  Value pages = k.div(memref::DimOp::create(b, loc, args.kv, 0), p);
  Value lastPage = arith::IndexCastOp::create(b, loc, b.getI32Type(),
                                              k.sub(pages, c1));
  Value clamped = arith::MinUIOp::create(b, loc, page, lastPage);
  Value pageIndex =
      arith::IndexCastUIOp::create(b, loc, b.getIndexType(), clamped);
  return k.add(k.mul(pageIndex, p), k.rem(pos, p));
}

void SM90PartialKernel::emitEpilogue(OpBuilder &b, scf::ForOp loop) {
  KernelBuilder k{b, loc};
  Value runMax = loop.getResult(0);
  Value runSum = rowReduce(b, loop.getResult(1), /*isMax=*/false);
  Value seen = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, runSum,
                                     k.f32(0.0));
  // A power-of-two outScale (mxfp4's 2^kTileExponentShift) multiplies the
  // reciprocal, exactly: no full division.
  Value factor =
      plan.decodesTile()
          ? k.fmul(arith::DivFOp::create(b, loc, k.f32(1.0), runSum), outScale)
          : Value(arith::DivFOp::create(b, loc, outScale, runSum));
  factor = arith::SelectOp::create(b, loc, seen, factor, k.f32(0.0));
  Value lse = arith::SelectOp::create(
      b, loc, seen,
      k.fmul(k.fadd(runMax, math::Log2Op::create(b, loc, runSum)),
             k.f32(0.6931471805599453)),
      negInf);
  // A sequence with a single work item is final here: bf16 output and lse
  // (the combine kernel skips it); otherwise the partials.
  Value direct = item.direct;
  storeRowFactor(b, factor);
  Value firstLane =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, thread.lane, c0);
  Value writesLse = arith::AndIOp::create(b, loc, firstLane, thread.isReal);
  ifThen(b, loc, writesLse, [&] {
    scf::IfOp::create(
        b, loc, direct,
        [&](OpBuilder &db, Location) {
          OpBuilder::InsertionGuard g(b);
          b.setInsertionPoint(db.getInsertionBlock(), db.getInsertionPoint());
          memref::StoreOp::create(b, loc, lse, args.lse,
                                  ValueRange{thread.tokenRow, thread.head});
          scf::YieldOp::create(b, loc);
        },
        [&](OpBuilder &pb, Location) {
          OpBuilder::InsertionGuard g(b);
          b.setInsertionPoint(pb.getInsertionBlock(), pb.getInsertionPoint());
          memref::StoreOp::create(
              b, loc, lse, args.partialLse,
              ValueRange{item.slot, thread.token, thread.head});
          scf::YieldOp::create(b, loc);
        });
  });
  // The rows' final factors, then the accumulators in the mma layout.
  gpu::BarrierOp::create(b, loc);
  ValueRange acc = loop.getResults().slice(2, numAccumulators);
  if (plan.outputOnWarpgroups())
    emitTransposedOutputStores(b, acc, direct);
  else
    emitOutputStores(b, acc, direct);
}

//===- PlanKernel.cpp - the split planner as a kernel (device plans) ------===//
//
// A device plan (docs/runtime.md) builds the work list on the GPU from the
// device indptrs of the current batch, so that a captured graph replays
// every decode step with identical launches. The kernel computes what
// mla::planSplits computes on the host (docs/split-planning.md): the
// balanced items, their row blocks (units) and the persistent grid's
// schedule, bit for bit (unittests/DevicePlanTest.cpp compares them).
//
// One workgroup of 256 threads; thread t owns a contiguous run of the
// sequences. Four passes over them, with block-wide prefix sums in LDS in
// between: lengths and checks; item, unit and cost counts; the items and
// units; each logical workgroup's first unit (a binary search over the
// units' workgroups). A batch that does not fit the buffers it is planned
// into — an indptr not starting at 0 or decreasing, a q_len above 4, more
// tokens than q holds, more cache rows or pages than the cache or page
// table holds — is refused: the status word says why, and the work list is
// left empty, so the partial and combine kernels read and write nothing.
//
//===----------------------------------------------------------------------===//

#include "GFX950Kernels.h"

#include "mla/ABI.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <cstdint>

using namespace mlir;
using namespace mla;

namespace {
constexpr int64_t kThreads = 256;
constexpr int64_t kLog2Threads = 8;

class PlanKernel {
public:
  PlanKernel(const PlanKernelFacts &facts, OpBuilder &b, Location loc)
      : f(facts), b(b), loc(loc), k{b, loc} {}

  gpu::GPUFuncOp build(OpBuilder &mb, StringRef name);

private:
  struct Sequence {
    Value qLen, kvLen, workgroups, bad;
  };
  SmallVector<StringRef> argNames() const;
  SmallVector<Type> argTypes() const;
  Value arg(StringRef name);
  Value load(StringRef name, Value index) {
    return k.loadIndex(arg(name), {index});
  }
  void store(Value value, StringRef name, ValueRange indices) {
    Value v = arith::IndexCastOp::create(b, loc, b.getI32Type(), value);
    memref::StoreOp::create(b, loc, v, arg(name), indices);
  }
  Value select(Value cond, Value a, Value c) {
    return arith::SelectOp::create(b, loc, cond, a, c);
  }
  Value ceilDiv(Value a, Value d) {
    return k.div(k.add(a, k.sub(d, k.idx(1))), d);
  }
  /// ceil(a / d) for 0 <= a, 0 < d below 2^31 (a sequence's rows and its
  /// item sizes: the ABI's indptrs are i32), in 32 bits (KernelBuilder::div32).
  Value ceilDiv32(Value a, Value d) {
    return k.div32(k.add(a, k.sub(d, k.idx(1))), d);
  }
  Value maxS(Value a, Value c) { return arith::MaxSIOp::create(b, loc, a, c); }
  Value clamp(Value v, int64_t lo, Value hi) {
    return maxS(k.minS(v, hi), k.idx(lo));
  }
  Value flag(Value cond, int32_t bit) {
    return select(cond, k.idx(bit), k.idx(0));
  }

  Sequence emitSequence(Value seq);
  /// Runs `body(seq, carried)` over the thread's sequences.
  scf::ForOp forOwnSequences(
      ValueRange init,
      function_ref<SmallVector<Value>(Value, ValueRange)> body);
  /// Exclusive prefix sums of each value over the threads, and the totals.
  std::pair<SmallVector<Value>, SmallVector<Value>>
  emitBlockScan(ArrayRef<Value> values);
  struct Split {
    Value items, size;
  };
  /// `share`: the batch's positions a workgroup rounded up to tiles (at
  /// least one): the chunk before its minimum, and the one-tile items'
  /// size where the minimum binds (SplitOptions::fineItemsFrom).
  Split emitSplit(Value kvLen, Value share);
  void emitWrites(Value share, ArrayRef<Value> bases, Value totalCost);
  Value emitUnitWorkgroup(Value start, Value end, Value total, Value r,
                          Value rowBlocks);
  void emitWorkgroupRanges(Value ok, Value numUnits);

  const PlanKernelFacts &f;
  OpBuilder &b;
  Location loc;
  KernelBuilder k;
  gpu::GPUFuncOp func;
  Value scanBuffer, tid, numSeqs, firstSeq, endSeq;
};

SmallVector<StringRef> PlanKernel::argNames() const {
  SmallVector<StringRef> names = {arg::kQoIndptr, arg::kKVIndptr, arg::kQ};
  if (f.pageSize > 0)
    names.append({arg::kKVLastPageLen, arg::kKVIndices});
  else
    names.push_back(arg::kKV);
  names.append({arg::kWorkItems, arg::kItemIndptr, arg::kWorkUnits,
                arg::kWorkgroupUnits, arg::kPlanStatus});
  return names;
}

SmallVector<Type> PlanKernel::argTypes() const {
  Type i32 = b.getI32Type(), i8 = b.getI8Type();
  int64_t dyn = ShapedType::kDynamic;
  // q and the cache (or page table) only for their sizes: the bounds of
  // the batch.
  SmallVector<Type> types = {
      MemRefType::get({dyn}, i32), MemRefType::get({dyn}, i32),
      MemRefType::get({dyn, f.numHeads, f.qkDim}, b.getBF16Type())};
  if (f.pageSize > 0)
    types.append({MemRefType::get({dyn}, i32), MemRefType::get({dyn}, i32)});
  else
    types.push_back(MemRefType::get({dyn}, i8));
  types.append({MemRefType::get({dyn, 4}, i32), MemRefType::get({dyn}, i32),
                MemRefType::get({dyn, 3}, i32),
                MemRefType::get({f.workgroups + 1}, i32),
                MemRefType::get({1}, i32)});
  return types;
}

Value PlanKernel::arg(StringRef name) {
  SmallVector<StringRef> names = argNames();
  return func.getArgument(llvm::find(names, name) - names.begin());
}

gpu::GPUFuncOp PlanKernel::build(OpBuilder &mb, StringRef name) {
  MLIRContext *ctx = b.getContext();
  SmallVector<Type> types = argTypes();
  Type scanType = ldsType({4, kThreads}, b.getI64Type());
  func = gpu::GPUFuncOp::create(mb, loc, name,
                                FunctionType::get(ctx, types, {}),
                                TypeRange{scanType}, TypeRange{});
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({kThreads, 1, 1}));
  func->setAttr("rocdl.flat_work_group_size", b.getStringAttr("256,256"));
  func->setAttr(MLADialect::kLaunchAttrName,
                launchAttr(b, {"1", "1", "1"}, kThreads,
                           /*ldsBytes=*/4 * kThreads * 8, argNames(), types));
  b.setInsertionPointToStart(&func.getBody().front());
  scanBuffer = func.getWorkgroupAttributions()[0];
  tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value c0 = k.idx(0), c1 = k.idx(1);
  numSeqs = k.sub(memref::DimOp::create(b, loc, arg(arg::kQoIndptr), 0), c1);
  Value perThread = ceilDiv(numSeqs, k.idx(kThreads));
  firstSeq = k.minS(k.mul(tid, perThread), numSeqs);
  endSeq = k.minS(k.add(firstSeq, perThread), numSeqs);

  // Pass 1: lengths and checks; the weighted length sets the chunk.
  auto pass1 = forOwnSequences(
      {c0, c0}, [&](Value seq, ValueRange c) -> SmallVector<Value> {
        Sequence s = emitSequence(seq);
        return {k.add(c[0], k.mul(s.kvLen, s.workgroups)),
                arith::OrIOp::create(b, loc, c[1], s.bad)};
      });
  // The batch's ends, checked once against the buffers.
  Value isFirst = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid, c0);
  Value maxTokens = memref::DimOp::create(b, loc, arg(arg::kQ), 0);
  Value maxKV = memref::DimOp::create(
      b, loc, arg(f.pageSize > 0 ? arg::kKVIndices : arg::kKV), 0);
  Value startsAtZero = arith::AndIOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                            load(arg::kQoIndptr, c0), c0),
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                            load(arg::kKVIndptr, c0), c0));
  Value endBad = k.add(
      k.add(flag(arith::XOrIOp::create(b, loc, startsAtZero,
                                       arith::ConstantOp::create(
                                           b, loc, b.getBoolAttr(true))),
                 plan_status::kBadIndptr),
            flag(k.lessThan(maxTokens, load(arg::kQoIndptr, numSeqs)),
                 plan_status::kTooManyTokens)),
      flag(k.lessThan(maxKV, load(arg::kKVIndptr, numSeqs)),
           plan_status::kTooManyKVRows));
  Value myBad = arith::OrIOp::create(b, loc, pass1.getResult(1),
                                     select(isFirst, endBad, c0));
  // Status bits are summed as counts of threads that saw them.
  SmallVector<Value> bitCounts;
  for (int32_t bit : {plan_status::kBadIndptr, plan_status::kTooManyTokens,
                      plan_status::kTooManyKVRows})
    bitCounts.push_back(k.rem(k.div(myBad, k.idx(bit)), k.idx(2)));
  auto [unused, totals] = emitBlockScan(
      {pass1.getResult(0), bitCounts[0], bitCounts[1], bitCounts[2]});
  Value status = c0;
  int32_t bits[] = {plan_status::kBadIndptr, plan_status::kTooManyTokens,
                    plan_status::kTooManyKVRows};
  for (int i = 0; i < 3; ++i)
    status = k.add(status, flag(k.lessThan(c0, totals[i + 1]), bits[i]));
  Value tile = k.idx(f.kvTile);
  // The workgroups that run at once: the persistent grid.
  Value perCU = ceilDiv(maxS(totals[0], c1), k.idx(f.workgroups));
  Value share = k.mul(ceilDiv(perCU, tile), tile);

  // Pass 2: each sequence's items, units and cost; their prefix sums.
  Value overhead = k.idx(f.unitOverhead);
  auto pass2 = forOwnSequences(
      {c0, c0, c0}, [&](Value seq, ValueRange c) -> SmallVector<Value> {
        Sequence s = emitSequence(seq);
        Split split = emitSplit(s.kvLen, share);
        Value cost = k.mul(k.add(s.kvLen, k.mul(split.items, overhead)),
                           s.workgroups);
        return {k.add(c[0], split.items),
                k.add(c[1], k.mul(split.items, s.workgroups)),
                k.add(c[2], cost)};
      });
  auto [bases, sums] = emitBlockScan(
      {pass2.getResult(0), pass2.getResult(1), pass2.getResult(2)});
  Value full = arith::OrIOp::create(
      b, loc,
      k.lessThan(memref::DimOp::create(b, loc, arg(arg::kWorkItems), 0),
                 sums[0]),
      k.lessThan(memref::DimOp::create(b, loc, arg(arg::kWorkUnits), 0),
                 sums[1]));
  status = k.add(status, flag(full, plan_status::kWorkListFull));
  Value ok = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, status, c0);

  // Pass 3: the items and units, or an empty list for a refused batch.
  auto ifOk = scf::IfOp::create(b, loc, ok, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(ifOk.thenBlock()->getTerminator());
    emitWrites(share, bases, sums[2]);
    b.setInsertionPoint(ifOk.elseBlock()->getTerminator());
    forOwnSequences({}, [&](Value seq, ValueRange) -> SmallVector<Value> {
      store(c0, arg::kItemIndptr, {seq});
      return {};
    });
  }
  Value lastEntry = select(ok, sums[0], c0);
  scf::IfOp::create(b, loc, isFirst, [&](OpBuilder &ib, Location) {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(ib.getInsertionBlock(), ib.getInsertionPoint());
    store(lastEntry, arg::kItemIndptr, {numSeqs});
    store(status, arg::kPlanStatus, {c0});
    scf::YieldOp::create(b, loc);
  });
  // The units' workgroups, written above to global memory, are read by
  // other threads: a barrier orders LDS only, the fences global memory.
  LLVM::FenceOp::create(b, loc, LLVM::AtomicOrdering::release,
                        f.workgroupScope);
  gpu::BarrierOp::create(b, loc);
  LLVM::FenceOp::create(b, loc, LLVM::AtomicOrdering::acquire,
                        f.workgroupScope);
  emitWorkgroupRanges(ok, sums[1]);
  gpu::ReturnOp::create(b, loc);
  return func;
}

PlanKernel::Sequence PlanKernel::emitSequence(Value seq) {
  Value c0 = k.idx(0), c1 = k.idx(1);
  Value next = k.add(seq, c1);
  Value qLen = k.sub(load(arg::kQoIndptr, next), load(arg::kQoIndptr, seq));
  Value count = k.sub(load(arg::kKVIndptr, next), load(arg::kKVIndptr, seq));
  Value bad = arith::OrIOp::create(
      b, loc,
      arith::OrIOp::create(b, loc, k.lessThan(qLen, c0),
                           k.lessThan(k.idx(kMaxQueryTokens), qLen)),
      k.lessThan(count, c0));
  count = maxS(count, c0);
  Value kvLen = count;
  if (f.pageSize > 0) {
    // As the kernels read the table: the last page's length clamped into
    // 1..P (mla::cacheRows).
    Value p = k.idx(f.pageSize);
    Value last = clamp(load(arg::kKVLastPageLen, seq), 1, p);
    kvLen = select(k.lessThan(c0, count),
                   k.add(k.mul(k.sub(count, c1), p), last), c0);
  }
  Value tooLong = k.lessThan(k.idx(INT32_MAX), kvLen);
  kvLen = k.minS(kvLen, k.idx(INT32_MAX));
  // The row blocks with rows: H/hpb · ceil(q_len·hpb / R).
  Value q = clamp(qLen, 0, k.idx(kMaxQueryTokens));
  Value workgroups =
      k.mul(k.idx(f.numHeads / f.headsPerBlock),
            ceilDiv(k.mul(q, k.idx(f.headsPerBlock)),
                    k.idx(f.rowsPerWorkgroup)));
  Value flags = k.add(flag(bad, plan_status::kBadIndptr),
                      flag(tooLong, plan_status::kTooManyKVRows));
  return {qLen, kvLen, workgroups, flags};
}

scf::ForOp PlanKernel::forOwnSequences(
    ValueRange init, function_ref<SmallVector<Value>(Value, ValueRange)> body) {
  return scf::ForOp::create(
      b, loc, firstSeq, endSeq, k.idx(1), init,
      [&](OpBuilder &lb, Location, Value seq, ValueRange carried) {
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(lb.getInsertionBlock());
        scf::YieldOp::create(b, loc, body(seq, carried));
      });
}

std::pair<SmallVector<Value>, SmallVector<Value>>
PlanKernel::emitBlockScan(ArrayRef<Value> values) {
  // Hillis-Steele over the 256 threads, one row of the buffer per value.
  Type i64 = b.getI64Type();
  Value c0 = k.idx(0);
  SmallVector<Value> running;
  for (auto [i, v] : llvm::enumerate(values)) {
    running.push_back(v);
    Value asI64 = arith::IndexCastOp::create(b, loc, i64, v);
    memref::StoreOp::create(b, loc, asI64, scanBuffer,
                            ValueRange{k.idx(i), tid});
  }
  gpu::BarrierOp::create(b, loc);
  for (int64_t step = 0; step < kLog2Threads; ++step) {
    Value d = k.idx(int64_t(1) << step);
    Value hasLeft = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge,
                                          tid, d);
    Value left = select(hasLeft, k.sub(tid, d), tid);
    SmallVector<Value> addends;
    for (size_t i = 0; i < values.size(); ++i) {
      Value x = k.loadIndex(scanBuffer, {k.idx(i), left});
      addends.push_back(select(hasLeft, x, c0));
    }
    gpu::BarrierOp::create(b, loc);
    for (size_t i = 0; i < values.size(); ++i) {
      running[i] = k.add(running[i], addends[i]);
      Value asI64 = arith::IndexCastOp::create(b, loc, i64, running[i]);
      memref::StoreOp::create(b, loc, asI64, scanBuffer,
                              ValueRange{k.idx(i), tid});
    }
    gpu::BarrierOp::create(b, loc);
  }
  SmallVector<Value> exclusive, totals;
  for (size_t i = 0; i < values.size(); ++i) {
    exclusive.push_back(k.sub(running[i], values[i]));
    totals.push_back(k.loadIndex(scanBuffer, {k.idx(i), k.idx(kThreads - 1)}));
  }
  // The buffer is free for the next scan once every thread has its totals.
  gpu::BarrierOp::create(b, loc);
  return {exclusive, totals};
}

PlanKernel::Split PlanKernel::emitSplit(Value kvLen, Value share) {
  Value c1 = k.idx(1);
  Value tile = k.idx(f.kvTile);
  if (f.forcedSplits > 0) {
    Value n = k.idx(f.forcedSplits);
    return {n, k.mul(ceilDiv(maxS(ceilDiv32(kvLen, n), c1), tile), tile)};
  }
  // As mla::planSplits: one-tile items for a sequence the chunk already
  // cuts into fineItemsFrom or more while the minimum binds; equal items
  // on tile boundaries, trailing empties dropped.
  Value minChunk = k.idx(f.minTilesPerItem * f.kvTile);
  Value items = k.div32(kvLen, maxS(share, minChunk));
  if (f.fineItemsFrom > 0) {
    Value finer = arith::AndIOp::create(
        b, loc, k.lessThan(share, minChunk),
        k.lessThan(k.idx(f.fineItemsFrom - 1), items));
    items = arith::SelectOp::create(b, loc, finer, ceilDiv32(kvLen, share),
                                    items);
  }
  Value n = clamp(items, 1, k.idx(f.maxSplitsPerSeq));
  Value size = k.mul(ceilDiv(maxS(ceilDiv32(kvLen, n), c1), tile), tile);
  return {maxS(ceilDiv32(kvLen, size), c1), size};
}

void PlanKernel::emitWrites(Value share, ArrayRef<Value> bases,
                            Value totalCost) {
  Value c0 = k.idx(0), c1 = k.idx(1), c2 = k.idx(2), c3 = k.idx(3);
  Value overhead = k.idx(f.unitOverhead);
  forOwnSequences(
      {bases[0], bases[1], bases[2]},
      [&](Value seq, ValueRange c) -> SmallVector<Value> {
        Sequence s = emitSequence(seq);
        Split split = emitSplit(s.kvLen, share);
        store(c[0], arg::kItemIndptr, {seq});
        auto items = scf::ForOp::create(
            b, loc, c0, split.items, c1, ValueRange{c[1], c[2]},
            [&](OpBuilder &ib, Location, Value i, ValueRange ic) {
              OpBuilder::InsertionGuard g(b);
              b.setInsertionPointToStart(ib.getInsertionBlock());
              Value item = k.add(c[0], i);
              Value begin = k.minS(k.mul(i, split.size), s.kvLen);
              Value end = k.minS(k.mul(k.add(i, c1), split.size), s.kvLen);
              store(seq, arg::kWorkItems, {item, c0});
              store(begin, arg::kWorkItems, {item, c1});
              store(end, arg::kWorkItems, {item, c2});
              store(item, arg::kWorkItems, {item, c3});
              Value cost = k.add(k.sub(end, begin), overhead);
              Value costEnd = k.add(ic[1], k.mul(cost, s.workgroups));
              scf::ForOp::create(
                  b, loc, c0, s.workgroups, c1, ValueRange{},
                  [&](OpBuilder &ub, Location, Value r, ValueRange) {
                    OpBuilder::InsertionGuard g2(b);
                    b.setInsertionPointToStart(ub.getInsertionBlock());
                    Value unit = k.add(ic[0], r);
                    Value wg = emitUnitWorkgroup(ic[1], costEnd, totalCost, r,
                                                 s.workgroups);
                    store(item, arg::kWorkUnits, {unit, c0});
                    store(r, arg::kWorkUnits, {unit, c1});
                    store(wg, arg::kWorkUnits, {unit, c2});
                    scf::YieldOp::create(b, loc);
                  });
              scf::YieldOp::create(
                  b, loc, ValueRange{k.add(ic[0], s.workgroups), costEnd});
            });
        return {k.add(c[0], split.items), items.getResult(0),
                items.getResult(1)};
      });
}

Value PlanKernel::emitUnitWorkgroup(Value start, Value end, Value total,
                                    Value r, Value rowBlocks) {
  // As mla::unitWorkgroup: the item's workgroups [first, last), the part
  // on one XCD.
  Value workgroups = k.idx(f.workgroups);
  Value perXcd = k.idx(f.workgroups / f.xcds);
  Value first = k.div(k.mul(start, workgroups), total);
  Value last = maxS(k.add(first, k.idx(1)), k.div(k.mul(end, workgroups), total));
  Value xcdEnd = k.mul(k.add(k.div(first, perXcd), k.idx(1)), perXcd);
  Value hi = k.minS(last, xcdEnd);
  Value nextHi = k.minS(last, k.add(xcdEnd, perXcd));
  Value span = k.sub(hi, first);
  Value useNext = arith::AndIOp::create(
      b, loc, k.lessThan(span, rowBlocks),
      k.lessThan(span, k.sub(nextHi, xcdEnd)));
  Value lo = select(useNext, xcdEnd, first);
  span = k.sub(select(useNext, nextHi, hi), lo);
  // r < rowBlocks and span <= the grid: 32 bits.
  Value spread = k.div32(k.mul(r, span), rowBlocks);
  Value own = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, span,
                                    rowBlocks);
  return k.add(lo, select(own, r, spread));
}

void PlanKernel::emitWorkgroupRanges(Value ok, Value numUnits) {
  // Workgroup j's first unit: the first whose workgroup is >= j.
  Value c0 = k.idx(0), c1 = k.idx(1), c2 = k.idx(2);
  Value count = select(ok, numUnits, c0);
  scf::ForOp::create(
      b, loc, tid, k.idx(f.workgroups + 1), k.idx(kThreads), ValueRange{},
      [&](OpBuilder &lb, Location, Value j, ValueRange) {
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(lb.getInsertionBlock());
        Type index = b.getIndexType();
        auto search = scf::WhileOp::create(
            b, loc, TypeRange{index, index}, ValueRange{c0, count},
            [&](OpBuilder &wb, Location, ValueRange range) {
              OpBuilder::InsertionGuard g2(b);
              b.setInsertionPointToStart(wb.getInsertionBlock());
              scf::ConditionOp::create(b, loc,
                                       k.lessThan(range[0], range[1]), range);
            },
            [&](OpBuilder &wb, Location, ValueRange range) {
              OpBuilder::InsertionGuard g2(b);
              b.setInsertionPointToStart(wb.getInsertionBlock());
              Value mid = k.div(k.add(range[0], range[1]), c2);
              Value wg = k.loadIndex(arg(arg::kWorkUnits), {mid, c2});
              Value below = k.lessThan(wg, j);
              scf::YieldOp::create(
                  b, loc,
                  ValueRange{select(below, k.add(mid, c1), range[0]),
                             select(below, range[1], mid)});
            });
        store(search.getResult(0), arg::kWorkgroupUnits, {j});
        scf::YieldOp::create(b, loc);
      });
}
} // namespace

gpu::GPUFuncOp mla::buildPlanKernel(const PlanKernelFacts &facts, Location loc,
                                    OpBuilder &mb, StringRef name) {
  OpBuilder b(mb.getContext());
  return PlanKernel(facts, b, loc).build(mb, name);
}

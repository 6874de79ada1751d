//===- CombineKernel.cpp - the combine kernel (gfx950 and sm_90a) --------===//
//
// One workgroup per (sequence, head, column slice), 256 threads over its
// (token, column) outputs, merging the sequence's work items' partials by
// their log-sum-exp in one pass (mergeItems); where the outputs leave
// threads idle and the items are many, groups of threads merge shares of
// the items and fold their merges through workgroup memory
// (mergeInItemGroups). On sm_90a the runtime cuts the columns into
// slices (the grid's z, `combine_slices`) where few sequences leave the
// chip room; gfx950 runs one slice (its grid size would come from the
// dispatch packet, and no MI355X has timed the slices).
// Sequences with a single work item were written by the partial kernel and
// are skipped, and so are sequences without items (a device plan that
// refused its batch leaves every sequence so).
//
//===----------------------------------------------------------------------===//

#include "GFX950Kernels.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;
using namespace mla;

namespace {
/// A block's threads. 512 and 1024 (more item groups) merged B = 4, kv =
/// 8192 faster and every larger batch slower on an H100
/// (docs/performance.md).
constexpr int64_t kThreads = 256;
/// Items a thread loads before merging them (the merge loop's unrolling).
/// More hold more loads in flight but more registers, fewer resident
/// blocks: on an H100 8 and 16 a step were slower than 4 at B = 32 and 64,
/// kv = 1024 (docs/performance.md).
constexpr int64_t kItemsPerStep = 4;
/// The most item groups an output gets.
constexpr int64_t kMaxItemGroups = 8;

/// A merge of some items of one output: their largest lse, and the
/// weight and the weighted sum of their partials relative to it (to 0
/// while it is -inf: no item, or only empty ones).
struct MergeState {
  Value max, weight, merged;
};

/// What a merge's exponents are taken relative to: its largest lse, or 0
/// while that is -inf (no item, or only empty ones: never -inf - -inf).
Value exponentShift(OpBuilder &b, Location loc, Value max) {
  KernelBuilder k{b, loc};
  return arith::SelectOp::create(
      b, loc,
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, max,
                            k.f32(-INFINITY)),
      k.f32(0.0), max);
}

/// The merge of the items firstItem .. lastItem of one output (token,
/// head, `width` columns from col) in one pass: kItemsPerStep items a
/// step, every load of a step issued before its first use, the running
/// sums rescaled when the largest lse grows (online softmax). A step past
/// the last item loads the last one again and adds nothing for it. One
/// item a step, after a pass for the largest lse, left a partial's latency
/// on each item's path (docs/performance.md).
MergeState mergeItems(OpBuilder &b, Location loc, Value pl, Value po,
                      Value firstItem, Value lastItem, Value token, Value head,
                      Value col, Value zeros) {
  KernelBuilder k{b, loc};
  auto f32xW = cast<VectorType>(zeros.getType());
  Value negInf = k.f32(-INFINITY), finalItem = k.sub(lastItem, k.idx(1));
  auto loop = scf::ForOp::create(
      b, loc, firstItem, lastItem, k.idx(kItemsPerStep),
      ValueRange{negInf, k.f32(0.0), zeros},
      [&](OpBuilder &ib, Location, Value j, ValueRange c) {
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(ib.getInsertionBlock());
        SmallVector<Value> real, lses, outs;
        Value stepMax = c[0];
        for (int64_t u = 0; u < kItemsPerStep; ++u) {
          Value item = k.add(j, k.idx(u));
          real.push_back(u == 0 ? Value() : k.lessThan(item, lastItem));
          Value at = u == 0 ? item : k.minS(item, finalItem);
          lses.push_back(k.load(pl, {at, token, head}));
          outs.push_back(vector::LoadOp::create(
              b, loc, f32xW, po, ValueRange{at, token, head, col},
              /*nontemporal=*/false, llvm::Align(f32xW.getNumElements() * 4)));
          stepMax = k.fmax(stepMax, lses.back());
        }
        Value shift = exponentShift(b, loc, stepMax);
        auto expOf = [&](Value x) {
          return math::ExpOp::create(b, loc,
                                     arith::SubFOp::create(b, loc, x, shift));
        };
        Value rescale = expOf(c[0]);
        Value weight = k.fmul(c[1], rescale);
        Value merged =
            k.fmul(c[2], vector::BroadcastOp::create(b, loc, f32xW, rescale));
        for (int64_t u = 0; u < kItemsPerStep; ++u) {
          Value w = expOf(lses[u]);
          if (real[u])
            w = arith::SelectOp::create(b, loc, real[u], w, k.f32(0.0));
          weight = k.fadd(weight, w);
          Value term =
              k.fmul(vector::BroadcastOp::create(b, loc, f32xW, w), outs[u]);
          if (real[u])
            term = arith::SelectOp::create(b, loc, real[u], term, zeros);
          merged = k.fadd(merged, term);
        }
        scf::YieldOp::create(b, loc, ValueRange{stepMax, weight, merged});
      });
  return {loop.getResult(0), loop.getResult(1), loop.getResult(2)};
}

/// `acc` and `part` as one merge.
MergeState foldStates(OpBuilder &b, Location loc, MergeState acc,
                      MergeState part) {
  KernelBuilder k{b, loc};
  Value max = k.fmax(acc.max, part.max);
  Value shift = exponentShift(b, loc, max);
  auto scaled = [&](const MergeState &m, Value v) {
    Value factor = math::ExpOp::create(
        b, loc, arith::SubFOp::create(b, loc, m.max, shift));
    if (auto vector = dyn_cast<VectorType>(v.getType()))
      factor = vector::BroadcastOp::create(b, loc, vector, factor);
    return k.fmul(v, factor);
  };
  return {max, k.fadd(scaled(acc, acc.weight), scaled(part, part.weight)),
          k.fadd(scaled(acc, acc.merged), scaled(part, part.merged))};
}

/// Rows of the workgroup memory the item groups fold through: a thread's
/// merge at its thread index (max, weight, then the merged columns).
int64_t stateRows(int64_t width) { return 2 + width; }

void storeState(OpBuilder &b, Location loc, Value states, Value tid,
                const MergeState &m) {
  KernelBuilder k{b, loc};
  auto store = [&](Value v, int64_t row) {
    memref::StoreOp::create(b, loc, v, states, ValueRange{k.idx(row), tid});
  };
  store(m.max, 0);
  store(m.weight, 1);
  auto width = cast<VectorType>(m.merged.getType()).getNumElements();
  for (int64_t c = 0; c < width; ++c)
    store(vector::ExtractOp::create(b, loc, m.merged, ArrayRef<int64_t>{c}),
          2 + c);
}

MergeState loadState(OpBuilder &b, Location loc, Value states, Value tid,
                     VectorType f32xW) {
  KernelBuilder k{b, loc};
  auto load = [&](int64_t row) { return k.load(states, {k.idx(row), tid}); };
  SmallVector<Value> columns;
  for (int64_t c = 0; c < f32xW.getNumElements(); ++c)
    columns.push_back(load(2 + c));
  return {load(0), load(1),
          vector::FromElementsOp::create(b, loc, f32xW, columns)};
}

/// One combine block's work: the outputs of one sequence and head in one
/// column slice.
struct CombineBlock {
  Value po, pl, out, lseOut, head, tid, qBegin, firstItem, lastItem;
  /// Outputs to merge: q_len · outputsPerToken (0: nothing to merge).
  Value total;
  /// A token's outputs in this block's slice (at least 1, a divisor's
  /// safe value), and the slice's first output of a token.
  Value outputsPerToken, firstOutput;
  /// A zero vector of a thread's output width.
  Value zeros;

  int64_t width() const {
    return cast<VectorType>(zeros.getType()).getNumElements();
  }
  /// The token and first column of the block's flat output `flat`.
  std::pair<Value, Value> output(KernelBuilder &k, Value flat) const {
    Value col = k.add(firstOutput, k.rem(flat, outputsPerToken));
    return {k.div(flat, outputsPerToken), k.mul(col, k.idx(width()))};
  }
};

/// The merged output (bf16) of (token, col) and its lse; a token whose
/// items were all empty gets zeros and -inf.
void storeOutput(OpBuilder &b, Location loc, const CombineBlock &c,
                 const MergeState &m, Value token, Value col) {
  KernelBuilder k{b, loc};
  auto f32xW = cast<VectorType>(c.zeros.getType());
  Value tokenRow = k.add(c.qBegin, token);
  Value seen = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT,
                                     m.weight, k.f32(0.0));
  Value value = arith::SelectOp::create(
      b, loc, seen,
      arith::DivFOp::create(
          b, loc, m.merged,
          vector::BroadcastOp::create(b, loc, f32xW, m.weight)),
      c.zeros);
  vector::StoreOp::create(
      b, loc,
      arith::TruncFOp::create(b, loc, f32xW.clone(b.getBF16Type()), value),
      c.out, ValueRange{tokenRow, c.head, col}, /*nontemporal=*/false,
      llvm::Align(2 * f32xW.getNumElements()));
  Value firstCol =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, col, k.idx(0));
  ifThen(b, loc, firstCol, [&] {
    Value lse = arith::SelectOp::create(
        b, loc, seen, k.fadd(m.max, math::LogOp::create(b, loc, m.weight)),
        k.f32(-INFINITY));
    memref::StoreOp::create(b, loc, lse, c.lseOut,
                            ValueRange{tokenRow, c.head});
  });
}

/// Merge steps for `items` items: kItemsPerStep a step.
Value itemSteps(OpBuilder &b, Location loc, Value items) {
  KernelBuilder k{b, loc};
  return k.div(k.add(items, k.idx(kItemsPerStep - 1)), k.idx(kItemsPerStep));
}

/// Thread groups that split each output's items (a power of two, at most
/// kMaxItemGroups; uniform over the block, as the barriers need): as many
/// as the outputs leave threads for, while each gets two steps of items.
/// A group's merge pays a step's latency per kItemsPerStep items, the
/// fold through workgroup memory about one more step.
Value itemGroupCount(OpBuilder &b, Location loc, Value total, Value items) {
  KernelBuilder k{b, loc};
  Value steps = itemSteps(b, loc, items);
  Value count = k.idx(1);
  for (int64_t g = 2; g <= kMaxItemGroups; g *= 2) {
    Value fits = arith::AndIOp::create(
        b, loc, k.lessThan(k.mul(total, k.idx(g)), k.idx(kThreads + 1)),
        k.lessThan(k.idx(2 * g - 1), steps));
    count = arith::SelectOp::create(b, loc, fits, k.idx(g), count);
  }
  return count;
}

/// Every thread merges whole outputs, kThreads apart.
void mergeOutputs(OpBuilder &b, Location loc, const CombineBlock &c) {
  KernelBuilder k{b, loc};
  forLoop(b, loc, c.tid, c.total, k.idx(kThreads), [&](Value flat) {
    auto [token, col] = c.output(k, flat);
    MergeState merge = mergeItems(b, loc, c.pl, c.po, c.firstItem, c.lastItem,
                                  token, c.head, col, c.zeros);
    storeOutput(b, loc, c, merge, token, col);
  });
}

/// Group g of itemGroups merges the g-th share of each output's items (whole
/// steps); group 0 folds the groups' merges through `states` and stores.
/// itemGroupCount leaves a thread of each group for every output.
void mergeInItemGroups(OpBuilder &b, Location loc, const CombineBlock &c,
                       Value itemGroups, Value states) {
  KernelBuilder k{b, loc};
  Value c0 = k.idx(0), c1 = k.idx(1);
  auto f32xW = cast<VectorType>(c.zeros.getType());
  Value groupThreads = k.div(k.idx(kThreads), itemGroups);
  Value group = k.div(c.tid, groupThreads), slot = k.rem(c.tid, groupThreads);
  Value steps = itemSteps(b, loc, k.sub(c.lastItem, c.firstItem));
  Value groupItems =
      k.mul(k.div(k.add(steps, k.sub(itemGroups, c1)), itemGroups),
            k.idx(kItemsPerStep));
  Value groupBegin =
      k.minS(k.add(c.firstItem, k.mul(group, groupItems)), c.lastItem);
  Value groupEnd = k.minS(k.add(groupBegin, groupItems), c.lastItem);
  Value active = k.lessThan(slot, c.total);
  auto [token, col] = c.output(k, slot);
  // A thread past the outputs merges no items (and reaches the barrier).
  Value begin = arith::SelectOp::create(b, loc, active, groupBegin, groupEnd);
  MergeState own = mergeItems(b, loc, c.pl, c.po, begin, groupEnd, token,
                              c.head, col, c.zeros);
  storeState(b, loc, states, c.tid, own);
  gpu::BarrierOp::create(b, loc);
  Value folds = arith::AndIOp::create(
      b, loc, active,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, group, c0));
  ifThen(b, loc, folds, [&] {
    auto fold = scf::ForOp::create(
        b, loc, c0, itemGroups, c1,
        ValueRange{k.f32(-INFINITY), k.f32(0.0), c.zeros},
        [&](OpBuilder &ib, Location, Value g, ValueRange acc) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(ib.getInsertionBlock());
          MergeState part = loadState(
              b, loc, states, k.add(k.mul(g, groupThreads), slot), f32xW);
          MergeState sum = foldStates(b, loc, {acc[0], acc[1], acc[2]}, part);
          scf::YieldOp::create(b, loc,
                               ValueRange{sum.max, sum.weight, sum.merged});
        });
    storeOutput(b, loc, c,
                {fold.getResult(0), fold.getResult(1), fold.getResult(2)},
                token, col);
  });
}

} // namespace

gpu::GPUFuncOp mla::buildCombineKernel(CombineOp op, OpBuilder &mb,
                                       StringRef name, bool waitsForPrevious,
                                       bool columnSlices) {
  MLIRContext *ctx = op.getContext();
  Builder bb(ctx);
  Location loc = op.getLoc();
  auto partialOutType = op.getPartialOut().getType();
  int64_t numHeads = partialOutType.getDimSize(2);
  int64_t vDim = partialOutType.getDimSize(3);
  Type f32 = bb.getF32Type(), i32 = bb.getI32Type(), bf16 = bb.getBF16Type();
  int64_t dyn = ShapedType::kDynamic;
  SmallVector<Type> args = {
      MemRefType::get({dyn, kMaxQueryTokens, numHeads, vDim}, f32),
      MemRefType::get({dyn, kMaxQueryTokens, numHeads}, f32),
      MemRefType::get({dyn}, i32), MemRefType::get({dyn}, i32),
      MemRefType::get({dyn, numHeads, vDim}, bf16),
      MemRefType::get({dyn, numHeads}, f32)};
  int64_t width = vDim % 4 == 0 ? 4 : vDim % 2 == 0 ? 2 : 1;
  auto statesType = ldsType({stateRows(width), kThreads}, f32);
  auto func =
      gpu::GPUFuncOp::create(mb, loc, name, FunctionType::get(ctx, args, {}),
                             TypeRange{statesType}, TypeRange{});
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), bb.getUnitAttr());
  func.setKnownBlockSizeAttr(bb.getDenseI32ArrayAttr({kThreads, 1, 1}));
  func->setAttr("rocdl.flat_work_group_size",
                bb.getStringAttr(std::to_string(kThreads) + "," +
                                 std::to_string(kThreads)));
  func->setAttr(
      MLADialect::kLaunchAttrName,
      launchAttr(bb,
                 {std::string(dim::kSequences), std::to_string(numHeads),
                  columnSlices ? std::string(dim::kCombineSlices) : "1"},
                 kThreads,
                 /*ldsBytes=*/4 * stateRows(width) * kThreads,
                 {arg::kPartialOut, arg::kPartialLse, arg::kItemIndptr,
                  arg::kQoIndptr, arg::kOut, arg::kLse},
                 args,
                 {bb.getNamedAttr("waits_for_previous",
                                  bb.getBoolAttr(waitsForPrevious))}));

  OpBuilder b(ctx);
  b.setInsertionPointToStart(&func.getBody().front());
  KernelBuilder k{b, loc};
  Value po = func.getArgument(0), pl = func.getArgument(1),
        itemIndptr = func.getArgument(2), qoIndptr = func.getArgument(3),
        out = func.getArgument(4), lseOut = func.getArgument(5);
  Value c0 = k.idx(0), c1 = k.idx(1);
  Value seq = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  Value head = gpu::BlockIdOp::create(b, loc, gpu::Dimension::y);
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value firstItem = k.loadIndex(itemIndptr, {seq});
  Value lastItem = k.loadIndex(itemIndptr, {k.add(seq, c1)});
  Value qBegin = k.loadIndex(qoIndptr, {seq});
  Value qLen = k.sub(k.loadIndex(qoIndptr, {k.add(seq, c1)}), qBegin);
  // The indices are the launch's inputs; the partials are the previous
  // kernel's results: launched early, wait for it here.
  if (waitsForPrevious)
    NVVM::GriddepcontrolOp::create(b, loc, NVVM::GridDepActionKind::wait);
  // A sequence with one work item was written by the partial kernel.
  Value items = k.sub(lastItem, firstItem);
  Value split = k.lessThan(c1, items);
  // Each thread merges `width` consecutive outputs (token, columns) of the
  // block's head at a time: one aligned vector load of each item's
  // partials (the runtime requires the workspace and out 16-byte aligned),
  // one vector store.
  auto f32xW = VectorType::get({width}, f32);
  Value zeros = arith::ConstantOp::create(b, loc, f32xW,
                                          DenseElementsAttr::get(f32xW, 0.0f));
  Value states = func.getWorkgroupAttributions()[0];
  // The block's merge of `ownOutputs` outputs of each token from
  // `firstOutput` on.
  auto merge = [&](Value ownOutputs, Value firstOutput) {
    Value total =
        arith::SelectOp::create(b, loc, split, k.mul(qLen, ownOutputs), c0);
    CombineBlock block{po,
                       pl,
                       out,
                       lseOut,
                       head,
                       tid,
                       qBegin,
                       firstItem,
                       lastItem,
                       total,
                       k.maxS(ownOutputs, c1),
                       firstOutput,
                       zeros};
    Value itemGroups = itemGroupCount(b, loc, total, items);
    auto grouped = scf::IfOp::create(b, loc, k.lessThan(c1, itemGroups),
                                     /*withElseRegion=*/true);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(grouped.thenBlock());
    mergeInItemGroups(b, loc, block, itemGroups, states);
    b.setInsertionPointToStart(grouped.elseBlock());
    mergeOutputs(b, loc, block);
  };
  int64_t outputsPerToken = vDim / width;
  if (!columnSlices) {
    merge(k.idx(outputsPerToken), c0);
  } else {
    // Slice z of the grid's Z takes a token's outputs [first, first + n).
    // One slice (the common case) keeps the constant output count: its
    // token and column come by shifts, not by an integer division (B = 4,
    // kv = 1024 was 0.4 us slower with the division; docs/performance.md).
    Value slice = gpu::BlockIdOp::create(b, loc, gpu::Dimension::z);
    Value slices = gpu::GridDimOp::create(b, loc, gpu::Dimension::z);
    auto one = scf::IfOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, slices, c1),
        /*withElseRegion=*/true);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(one.thenBlock());
    merge(k.idx(outputsPerToken), c0);
    b.setInsertionPointToStart(one.elseBlock());
    Value sliceOutputs =
        k.div(k.add(k.idx(outputsPerToken), k.sub(slices, c1)), slices);
    Value firstOutput =
        k.minS(k.mul(slice, sliceOutputs), k.idx(outputsPerToken));
    merge(k.minS(sliceOutputs, k.sub(k.idx(outputsPerToken), firstOutput)),
          firstOutput);
  }
  gpu::ReturnOp::create(b, loc);
  return func;
}

//===- CombineKernel.cpp - the combine kernel (gfx950 and sm_90a) --------===//
//
// One workgroup per (sequence, head), 256 threads over its (token, column)
// outputs, merging the sequence's work items' partials by their
// log-sum-exp in one pass (mergeItems); sequences with a single work item
// were written by the partial kernel and are skipped, and so are sequences
// without items (a device plan that refused its batch leaves every
// sequence so).
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
constexpr int64_t kThreads = 256;
/// Items a thread loads before merging them (the merge loop's unrolling).
/// More hold more loads in flight but more registers, fewer resident
/// blocks: on an H100 8 and 16 a step were slower than 4 at B = 32 and 64,
/// kv = 1024 (docs/performance.md).
constexpr int64_t kItemsPerStep = 4;

/// A merge of some items of one output: their largest lse, and the
/// weight and the weighted sum of their partials relative to it (to 0
/// while it is -inf: no item, or only empty ones).
struct MergeState {
  Value max, weight, merged;
};

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
        // Exponents relative to the largest lse so far (0 while every item
        // was empty: never -inf - -inf).
        Value shift = arith::SelectOp::create(
            b, loc,
            arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, stepMax,
                                  negInf),
            k.f32(0.0), stepMax);
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

/// The merged output (bf16) and its lse; a token whose items were all
/// empty gets zeros and -inf.
void storeOutput(OpBuilder &b, Location loc, const MergeState &m, Value out,
                 Value lseOut, Value tokenRow, Value head, Value col) {
  KernelBuilder k{b, loc};
  auto f32xW = cast<VectorType>(m.merged.getType());
  Value zeros = arith::ConstantOp::create(b, loc, f32xW,
                                          DenseElementsAttr::get(f32xW, 0.0f));
  Value seen = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT,
                                     m.weight, k.f32(0.0));
  Value value = arith::SelectOp::create(
      b, loc, seen,
      arith::DivFOp::create(
          b, loc, m.merged,
          vector::BroadcastOp::create(b, loc, f32xW, m.weight)),
      zeros);
  vector::StoreOp::create(
      b, loc,
      arith::TruncFOp::create(b, loc, f32xW.clone(b.getBF16Type()), value), out,
      ValueRange{tokenRow, head, col}, /*nontemporal=*/false,
      llvm::Align(2 * f32xW.getNumElements()));
  Value firstCol =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, col, k.idx(0));
  ifThen(b, loc, firstCol, [&] {
    Value lse = arith::SelectOp::create(
        b, loc, seen, k.fadd(m.max, math::LogOp::create(b, loc, m.weight)),
        k.f32(-INFINITY));
    memref::StoreOp::create(b, loc, lse, lseOut, ValueRange{tokenRow, head});
  });
}

} // namespace

gpu::GPUFuncOp mla::buildCombineKernel(CombineOp op, OpBuilder &mb,
                                       StringRef name,
                                       bool waitsForPrevious) {
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
  auto func = gpu::GPUFuncOp::create(mb, loc, name,
                                     FunctionType::get(ctx, args, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), bb.getUnitAttr());
  func.setKnownBlockSizeAttr(bb.getDenseI32ArrayAttr({kThreads, 1, 1}));
  func->setAttr("rocdl.flat_work_group_size", bb.getStringAttr("256,256"));
  func->setAttr(MLADialect::kLaunchAttrName,
                launchAttr(bb,
                           {std::string(dim::kSequences),
                            std::to_string(numHeads), "1"},
                           kThreads, /*ldsBytes=*/0,
                           {arg::kPartialOut, arg::kPartialLse,
                            arg::kItemIndptr, arg::kQoIndptr, arg::kOut,
                            arg::kLse},
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
  Value split = k.lessThan(c1, k.sub(lastItem, firstItem));
  // Each thread merges `width` consecutive outputs (token, columns) of the
  // block's head at a time: one aligned vector load of each item's
  // partials (the runtime requires the workspace and out 16-byte aligned),
  // one vector store.
  int64_t groups = vDim / width;
  auto f32xW = VectorType::get({width}, f32);
  Value zeros = arith::ConstantOp::create(b, loc, f32xW,
                                          DenseElementsAttr::get(f32xW, 0.0f));
  Value total = arith::SelectOp::create(
      b, loc, split, k.mul(qLen, k.idx(groups)), c0);
  forLoop(b, loc, tid, total, k.idx(kThreads), [&](Value flat) {
    Value token = k.div(flat, k.idx(groups));
    Value col = k.mul(k.rem(flat, k.idx(groups)), k.idx(width));
    MergeState merge = mergeItems(b, loc, pl, po, firstItem, lastItem, token,
                                  head, col, zeros);
    storeOutput(b, loc, merge, out, lseOut, k.add(qBegin, token), head, col);
  });
  gpu::ReturnOp::create(b, loc);
  return func;
}

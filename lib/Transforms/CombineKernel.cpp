//===- CombineKernel.cpp - the gfx950 combine kernel ----------------------===//
//
// One workgroup per (sequence, head), 256 threads over its (token, column)
// outputs, merging the sequence's work items' partials by their
// log-sum-exp; sequences with a single work item were written by the
// partial kernel and are skipped, and so are sequences without items (a
// device plan that refused its batch leaves every sequence so).
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
  Value negInf = k.f32(-INFINITY);
  // A sequence with one work item was written by the partial kernel.
  Value split = k.lessThan(c1, k.sub(lastItem, firstItem));
  // Each thread merges `width` consecutive outputs (token, columns) of the
  // block's head at a time: one aligned vector load of each item's
  // partials (the runtime requires the workspace and out 16-byte aligned),
  // one vector store.
  int64_t width = vDim % 4 == 0 ? 4 : vDim % 2 == 0 ? 2 : 1;
  int64_t groups = vDim / width;
  auto f32xW = VectorType::get({width}, f32);
  Value total = arith::SelectOp::create(
      b, loc, split, k.mul(qLen, k.idx(groups)), c0);
  scf::ForOp::create(
      b, loc, tid, total, k.idx(kThreads), ValueRange{},
      [&](OpBuilder &lb, Location, Value flat, ValueRange) {
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(lb.getInsertionBlock());
        Value token = k.div(flat, k.idx(groups));
        Value col = k.mul(k.rem(flat, k.idx(groups)), k.idx(width));
        auto maxLoop = scf::ForOp::create(
            b, loc, firstItem, lastItem, c1, ValueRange{negInf},
            [&](OpBuilder &ib, Location, Value j, ValueRange c) {
              OpBuilder::InsertionGuard g2(b);
              b.setInsertionPointToStart(ib.getInsertionBlock());
              scf::YieldOp::create(
                  b, loc, ValueRange{k.fmax(c[0], k.load(pl, {j, token, head}))});
            });
        Value maxLse = maxLoop.getResult(0);
        Value empty = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ,
                                            maxLse, negInf);
        Value shift = arith::SelectOp::create(b, loc, empty, k.f32(0.0), maxLse);
        Value zeros = arith::ConstantOp::create(
            b, loc, f32xW, DenseElementsAttr::get(f32xW, 0.0f));
        auto sumLoop = scf::ForOp::create(
            b, loc, firstItem, lastItem, c1, ValueRange{k.f32(0.0), zeros},
            [&](OpBuilder &ib, Location, Value j, ValueRange c) {
              OpBuilder::InsertionGuard g2(b);
              b.setInsertionPointToStart(ib.getInsertionBlock());
              Value w = math::ExpOp::create(
                  b, loc,
                  arith::SubFOp::create(b, loc, k.load(pl, {j, token, head}),
                                        shift));
              Value o = vector::LoadOp::create(
                  b, loc, f32xW, po, ValueRange{j, token, head, col},
                  /*nontemporal=*/false, llvm::Align(4 * width));
              Value ws = vector::BroadcastOp::create(b, loc, f32xW, w);
              scf::YieldOp::create(
                  b, loc,
                  ValueRange{k.fadd(c[0], w), k.fadd(c[1], k.fmul(ws, o))});
            });
        Value weight = sumLoop.getResult(0), merged = sumLoop.getResult(1);
        Value seen = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT,
                                           weight, k.f32(0.0));
        Value value = arith::SelectOp::create(
            b, loc, seen,
            arith::DivFOp::create(
                b, loc, merged,
                vector::BroadcastOp::create(b, loc, f32xW, weight)),
            zeros);
        Value tokenRow = k.add(qBegin, token);
        vector::StoreOp::create(
            b, loc,
            arith::TruncFOp::create(b, loc, f32xW.clone(bf16), value), out,
            ValueRange{tokenRow, head, col}, /*nontemporal=*/false,
            llvm::Align(2 * width));
        Value firstCol = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                               col, c0);
        scf::IfOp::create(b, loc, firstCol, [&](OpBuilder &ib, Location) {
          OpBuilder::InsertionGuard g2(b);
          b.setInsertionPoint(ib.getInsertionBlock(), ib.getInsertionPoint());
          Value lse = arith::SelectOp::create(
              b, loc, seen,
              k.fadd(maxLse, math::LogOp::create(b, loc, weight)), negInf);
          memref::StoreOp::create(b, loc, lse, lseOut,
                                  ValueRange{tokenRow, head});
          scf::YieldOp::create(b, loc);
        });
        scf::YieldOp::create(b, loc);
      });
  gpu::ReturnOp::create(b, loc);
  return func;
}

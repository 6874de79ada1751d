//===- PlanSplitsBufferization.cpp - mla.plan_splits as a runtime call ----===//
//
// On the host, `mla.plan_splits` bufferizes to a call of the runtime's split
// planner (the C interface function `mla_plan_splits`), so the work list the
// compiled code uses comes from the same C++ function the runtime calls before
// a GPU launch. The call fills a buffer sized for the most items the config
// allows and returns how many it wrote; the result is a view of those rows.
//
//===----------------------------------------------------------------------===//

#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace mla;
using namespace mlir::bufferization;

namespace {
MemRefType fullyDynamic(MLIRContext *ctx, ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), ShapedType::kDynamic);
  return MemRefType::get(
      shape, IntegerType::get(ctx, 32),
      StridedLayoutAttr::get(ctx, ShapedType::kDynamic, strides));
}

/// The declaration of the runtime planner:
///   i64 mla_plan_splits(kv_indptr, work_items, item_indptr,
///                       compute_units, kv_tile, uniform_splits)
func::FuncOp getOrDeclarePlanner(Operation *op, RewriterBase &rewriter) {
  auto module = op->getParentOfType<ModuleOp>();
  if (auto fn = module.lookupSymbol<func::FuncOp>(kPlanSplitsFunctionName))
    return fn;
  MLIRContext *ctx = op->getContext();
  Type i64 = rewriter.getI64Type();
  auto type = FunctionType::get(
      ctx,
      {fullyDynamic(ctx, {ShapedType::kDynamic}),
       fullyDynamic(ctx, {ShapedType::kDynamic, 4}),
       fullyDynamic(ctx, {ShapedType::kDynamic}), i64, i64, i64},
      {i64});
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToStart(module.getBody());
  auto fn = func::FuncOp::create(rewriter, op->getLoc(),
                                 kPlanSplitsFunctionName, type);
  fn.setPrivate();
  fn->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(),
              rewriter.getUnitAttr());
  return fn;
}

struct PlanSplitsOpInterface
    : public BufferizableOpInterface::ExternalModel<PlanSplitsOpInterface,
                                                    PlanSplitsOp> {
  bool bufferizesToMemoryRead(Operation *, OpOperand &,
                              const AnalysisState &) const {
    return true;
  }
  bool bufferizesToMemoryWrite(Operation *, OpOperand &,
                               const AnalysisState &) const {
    return false;
  }
  AliasingValueList getAliasingValues(Operation *, OpOperand &,
                                      const AnalysisState &) const {
    return {};
  }
  bool bufferizesToAllocation(Operation *, Value) const { return true; }

  FailureOr<BufferLikeType>
  getBufferType(Operation *op, Value value, const BufferizationOptions &,
                const BufferizationState &, SmallVector<Value> &) const {
    MLIRContext *ctx = op->getContext();
    Type i32 = IntegerType::get(ctx, 32);
    if (value == op->getResult(0))
      return cast<BufferLikeType>(MemRefType::get(
          {ShapedType::kDynamic, 4}, i32,
          StridedLayoutAttr::get(ctx, 0, {4, 1})));
    return cast<BufferLikeType>(
        MemRefType::get({ShapedType::kDynamic}, i32));
  }

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto plan = cast<PlanSplitsOp>(op);
    Location loc = op->getLoc();
    MLIRContext *ctx = op->getContext();
    FailureOr<Value> kvIndptr =
        getBuffer(rewriter, plan.getKvIndptr(), options, state);
    if (failed(kvIndptr))
      return failure();
    func::FuncOp planner = getOrDeclarePlanner(op, rewriter);

    Type i32 = rewriter.getI32Type();
    Value c0 = arith::ConstantIndexOp::create(rewriter, loc, 0);
    Value c1 = arith::ConstantIndexOp::create(rewriter, loc, 1);
    Value length = memref::DimOp::create(rewriter, loc, *kvIndptr, c0);
    Value numSeqs = arith::SubIOp::create(rewriter, loc, length, c1);
    Value capacity = arith::MulIOp::create(
        rewriter, loc, numSeqs,
        arith::ConstantIndexOp::create(rewriter, loc,
                                       plan.getMaxItemsPerSequence()));
    Value items = memref::AllocOp::create(
        rewriter, loc, MemRefType::get({ShapedType::kDynamic, 4}, i32),
        ValueRange{capacity});
    Value itemIndptr = memref::AllocOp::create(
        rewriter, loc, MemRefType::get({ShapedType::kDynamic}, i32),
        ValueRange{length});

    ConfigAttr config = plan.getConfig();
    auto constant = [&](int64_t v) -> Value {
      return arith::ConstantOp::create(rewriter, loc, rewriter.getI64IntegerAttr(v));
    };
    SmallVector<Value> args = {
        memref::CastOp::create(rewriter, loc,
                               fullyDynamic(ctx, {ShapedType::kDynamic}),
                               *kvIndptr),
        memref::CastOp::create(rewriter, loc,
                               fullyDynamic(ctx, {ShapedType::kDynamic, 4}),
                               items),
        memref::CastOp::create(rewriter, loc,
                               fullyDynamic(ctx, {ShapedType::kDynamic}),
                               itemIndptr),
        constant(plan.getTarget().getComputeUnits()),
        constant(config.getKvTile()),
        constant(config.getSplitPolicy() == SplitPolicy::uniform
                     ? config.getSplits()
                     : 0)};
    auto call = func::CallOp::create(rewriter, loc, planner, args);
    Value numItems = arith::IndexCastOp::create(
        rewriter, loc, rewriter.getIndexType(), call.getResult(0));
    Value view = memref::SubViewOp::create(
        rewriter, loc, items, ArrayRef<OpFoldResult>{c0, c0},
        ArrayRef<OpFoldResult>{numItems, rewriter.getIndexAttr(4)},
        ArrayRef<OpFoldResult>{rewriter.getIndexAttr(1),
                               rewriter.getIndexAttr(1)});
    replaceOpWithBufferizedValues(rewriter, op, {view, itemIndptr});
    return success();
  }
};
} // namespace

void mla::registerBufferizationInterfaces(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, MLADialect *) {
    PlanSplitsOp::attachInterface<PlanSplitsOpInterface>(*ctx);
  });
}

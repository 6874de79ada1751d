//===- SplitKV.cpp - mla.decode -> plan + partial decodes + combine -------===//
//
// L1 -> L2 (flash-decoding): the KV range of every sequence is cut into the
// work items the planner chooses at run time; each item computes a partial,
// normalized result with its lse, and a combine merges the items of each
// sequence. Target-independent: the target only enters through the planner.
//
//===----------------------------------------------------------------------===//

#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Transforms/Passes.h"

#include "CacheRows.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

namespace mla {
#define GEN_PASS_DEF_MLASPLITKVPASS
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

namespace {
LogicalResult splitDecode(DecodeOp op, RewriterBase &rewriter) {
  auto target = op->getAttrOfType<TargetAttr>(MLADialect::kTargetAttrName);
  auto config = op->getAttrOfType<ConfigAttr>(MLADialect::kConfigAttrName);
  if (!target || !config)
    return op.emitOpError("needs 'mla.target' and 'mla.config' to be split: "
                          "run mla-select-config first");
  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  Type i32 = rewriter.getI32Type(), f32 = rewriter.getF32Type();
  int64_t dyn = ShapedType::kDynamic;
  int64_t heads = op.getNumHeads(), vDim = op.getVHeadDim();

  auto itemsType = RankedTensorType::get({dyn, 4}, i32);
  auto itemIndptrType = RankedTensorType::get(
      {op.getKvIndptr().getType().getDimSize(0)}, i32);
  // The planner balances positions: a paged cache's are counted from its
  // page table.
  Value positions =
      CacheRows::lengthsOnly(rewriter, loc, op).positionIndptr(rewriter, loc);
  auto plan = PlanSplitsOp::create(rewriter, loc, itemsType, itemIndptrType,
                                   positions, target, config);

  auto partialOutType =
      RankedTensorType::get({dyn, kMaxQueryTokens, heads, vDim}, f32);
  auto partialLseType =
      RankedTensorType::get({dyn, kMaxQueryTokens, heads}, f32);
  auto partial = PartialDecodeOp::create(
      rewriter, loc, partialOutType, partialLseType, op.getQ(), op.getKv(),
      op.getQoIndptr(), op.getKvIndptr(), plan.getWorkItems(), op.getKvScale(),
      op.getKvIndices(), op.getKvLastPageLen(), op.getKvFormatAttr(),
      op.getVHeadDimAttr(), op.getSmScaleAttr(), config);

  Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
  Value numTokens = tensor::DimOp::create(rewriter, loc, op.getQ(), zero);
  Type lseType = op.getLse() ? op.getLse().getType() : Type();
  auto combine = CombineOp::create(
      rewriter, loc, op.getOut().getType(), lseType, partial.getPartialOut(),
      partial.getPartialLse(), plan.getItemIndptr(), op.getQoIndptr(),
      numTokens);
  rewriter.replaceOp(op, combine->getResults());
  return success();
}

struct MLASplitKVPass : public mla::impl::MLASplitKVPassBase<MLASplitKVPass> {
  void runOnOperation() override {
    SmallVector<DecodeOp> ops;
    getOperation()->walk([&](DecodeOp op) { ops.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (DecodeOp op : ops)
      if (failed(splitDecode(op, rewriter)))
        return signalPassFailure();
  }
};
} // namespace

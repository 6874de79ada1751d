//===- WorkgroupMemoryToDynamic.cpp - shared memory as one dynamic block -===//
//
// See the pass description (Passes.td): a kernel's workgroup attributions
// become views of gpu.dynamic_shared_memory, and its launch says how many
// dynamic bytes to pass.
//
//===----------------------------------------------------------------------===//

#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace mla {
#define GEN_PASS_DEF_MLAWORKGROUPMEMORYTODYNAMICPASS
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;

namespace {
/// The attribution's alignment: its llvm.align, at least 16 bytes.
int64_t alignmentOf(gpu::GPUFuncOp func, unsigned index) {
  auto align = dyn_cast_or_null<IntegerAttr>(func.getWorkgroupAttributionAttr(
      index, LLVM::LLVMDialect::getAlignAttrName()));
  return std::max<int64_t>(16, align ? align.getInt() : 0);
}

/// The attributions as views of the dynamic block; its size in bytes.
FailureOr<int64_t> toDynamic(gpu::GPUFuncOp func) {
  ArrayRef<BlockArgument> attributions = func.getWorkgroupAttributions();
  if (attributions.empty())
    return 0;
  for (auto [index, attribution] : llvm::enumerate(attributions)) {
    auto type = cast<MemRefType>(attribution.getType());
    if (!type.hasStaticShape() || !type.getLayout().isIdentity())
      return func.emitOpError("workgroup attribution ")
             << index << " is not a static, contiguous memref: " << type;
  }
  OpBuilder b(func.getContext());
  b.setInsertionPointToStart(&func.getBody().front());
  Location loc = func.getLoc();
  auto workgroup = gpu::AddressSpaceAttr::get(func.getContext(),
                                              gpu::AddressSpace::Workgroup);
  Value base = gpu::DynamicSharedMemoryOp::create(
      b, loc,
      MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                      MemRefLayoutAttrInterface(), workgroup));
  int64_t offset = 0;
  for (auto [index, argument] : llvm::enumerate(attributions)) {
    BlockArgument attribution = argument;
    auto type = cast<MemRefType>(attribution.getType());
    offset = llvm::alignTo(offset, alignmentOf(func, index));
    Value at = arith::ConstantIndexOp::create(b, loc, offset);
    Value view = memref::ViewOp::create(b, loc, type, base, at, ValueRange{});
    attribution.replaceAllUsesWith(view);
    offset += type.getNumElements() * type.getElementTypeBitWidth() / 8;
  }
  unsigned first = func.getFirstWorkgroupAttributionIndex();
  func.getBody().front().eraseArguments(first, attributions.size());
  func->setAttr(gpu::GPUFuncOp::getNumWorkgroupAttributionsAttrName(),
                b.getI64IntegerAttr(0));
  func->removeAttr(func.getWorkgroupAttribAttrsAttrName());
  return offset;
}

struct MLAWorkgroupMemoryToDynamicPass
    : public mla::impl::MLAWorkgroupMemoryToDynamicPassBase<
          MLAWorkgroupMemoryToDynamicPass> {
  void runOnOperation() override {
    WalkResult result = getOperation()->walk([&](gpu::GPUFuncOp func) {
      if (!func.isKernel())
        return WalkResult::advance();
      FailureOr<int64_t> bytes = toDynamic(func);
      if (failed(bytes))
        return WalkResult::interrupt();
      auto launch =
          func->getAttrOfType<DictionaryAttr>(mla::MLADialect::kLaunchAttrName);
      if (launch && *bytes > 0) {
        NamedAttrList entries(launch);
        Builder b(func.getContext());
        entries.set("dynamic_lds_bytes", b.getI64IntegerAttr(*bytes));
        func->setAttr(mla::MLADialect::kLaunchAttrName,
                      entries.getDictionary(func.getContext()));
      }
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace

//===- InputLevel.cpp - passes that refuse input of an earlier level ------===//

#include "InputLevel.h"

#include "mla/Dialect/MLA/IR/MLADialect.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

using namespace mlir;

LogicalResult mla::requireSplitLevel(Operation *root, StringRef pass) {
  DecodeOp decode;
  root->walk([&](DecodeOp op) {
    decode = op;
    return WalkResult::interrupt();
  });
  if (!decode)
    return success();
  return decode.emitOpError()
         << "is not split: " << pass
         << " runs on the split level (mla.partial_decode, mla.combine); run "
            "mla-select-config and mla-split-kv first";
}

LogicalResult mla::requireKernelLevel(Operation *root, StringRef pass) {
  if (isa<gpu::GPUModuleOp>(root) || root->getParentOfType<gpu::GPUModuleOp>())
    return success();
  Operation *hostOp = nullptr;
  bool hasKernels = false;
  root->walk([&](Operation *op) {
    if (isa<gpu::GPUModuleOp>(op))
      hasKernels = true;
    else if (!hostOp && isa<DecodeOp, PartialDecodeOp, CombineOp>(op))
      hostOp = op;
  });
  if (hasKernels || !hostOp)
    return success();
  return hostOp->emitOpError()
         << "has no gpu kernels yet: " << pass
         << " lowers the kernels of a gpu.module (nested on it); run "
            "mla-to-gpu first, or --mla-decode-to-gfx950";
}

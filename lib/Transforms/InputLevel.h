//===- InputLevel.h - passes that refuse input of an earlier level -*- C++ -*-===//
//
// A lowering pass finding none of the ops it lowers is a no-op, which is
// right for a module without mla ops but wrong for one that is simply not
// there yet: `mla-to-gpu` on an unsplit mla.decode would leave it untouched
// and the next stage would fail far from the cause. These checks name the
// pass (or pipeline) to run first.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TRANSFORMS_INPUTLEVEL_H
#define MLA_TRANSFORMS_INPUTLEVEL_H

#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"

namespace mla {

/// Fails, at the first mla.decode in `root`, when `pass` (which lowers the
/// split level: partial decodes and combines) meets an unsplit decode.
mlir::LogicalResult requireSplitLevel(mlir::Operation *root,
                                      llvm::StringRef pass);

/// Fails when `pass` (which lowers gpu kernels) runs on `root` holding mla
/// ops of the host levels and no gpu.module.
mlir::LogicalResult requireKernelLevel(mlir::Operation *root,
                                       llvm::StringRef pass);

} // namespace mla

#endif // MLA_TRANSFORMS_INPUTLEVEL_H

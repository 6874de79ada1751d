//===- TranslationLevel.cpp - is a gpu.module ready to translate ----------===//

#include "mla/Target/TranslationLevel.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"

llvm::Error mla::checkTranslationLevel(mlir::gpu::GPUModuleOp module,
                                       llvm::ArrayRef<llvm::StringRef> dialects,
                                       llvm::StringRef level,
                                       llvm::StringRef finish) {
  llvm::SetVector<llvm::StringRef> unlowered;
  module.walk<mlir::WalkOrder::PreOrder>([&](mlir::Operation *op) {
    if (op != module.getOperation() &&
        !llvm::is_contained(dialects, op->getName().getDialectNamespace()))
      unlowered.insert(op->getName().getStringRef());
  });
  if (unlowered.empty())
    return llvm::Error::success();
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      "gpu.module @" + module.getName() + " is not at the " + level +
          " level (it holds " +
          llvm::join(unlowered.getArrayRef().take_front(4), ", ") +
          (unlowered.size() > 4 ? ", ..." : "") +
          "): finish the lowering with " + finish);
}

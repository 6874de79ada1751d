//===- TranslationLevel.h - is a gpu.module ready to translate --*- C++ -*-===//
//
// Both targets translate a gpu.module to LLVM IR only at their last level
// (the LLVM dialect and ROCDL or NVVM); ops of an earlier level would fail
// inside the translation with a message about the op, so the translators
// say which level is missing instead.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TARGET_TRANSLATIONLEVEL_H
#define MLA_TARGET_TRANSLATIONLEVEL_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

namespace mla {

/// Success if every op inside `module` belongs to one of `dialects` (their
/// namespaces); else an error naming up to four others, that the module is
/// not at `level`, and how to finish the lowering (`finish`).
llvm::Error checkTranslationLevel(mlir::gpu::GPUModuleOp module,
                                  llvm::ArrayRef<llvm::StringRef> dialects,
                                  llvm::StringRef level,
                                  llvm::StringRef finish);

} // namespace mla

#endif // MLA_TARGET_TRANSLATIONLEVEL_H

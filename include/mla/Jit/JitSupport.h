//===- JitSupport.h - shared setup of the JIT backends ----------*- C++ -*-===//
//
// The ExecutionEngine setup the cpu and emu backends (libMLARuntimeJit)
// share.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_JIT_JITSUPPORT_H
#define MLA_JIT_JITSUPPORT_H

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mla {

/// JIT-compiles an LLVM-dialect module at -O3 and binds `symbols` (plus the
/// C runner utils' memrefCopy) for it.
llvm::Expected<std::unique_ptr<mlir::ExecutionEngine>>
createEngine(mlir::ModuleOp module,
             const std::vector<std::pair<std::string, void *>> &symbols);

/// A memref descriptor of any rank as 64-bit words: allocated, aligned,
/// offset, sizes, strides (row-major), as the C interface expects.
std::vector<int64_t> makeDescriptor(const void *data,
                                    const std::vector<int64_t> &shape);

} // namespace mla

#endif // MLA_JIT_JITSUPPORT_H

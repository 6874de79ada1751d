//===- PTX.h - sm_90a PTX from the NVVM level -------------------*- C++ -*-===//
//
// The last step of the sm_90a pipeline: a `gpu.module` lowered to the LLVM
// and NVVM dialects becomes LLVM IR and PTX, in-process through LLVM's
// NVPTX backend (no CUDA toolkit involved); the driver JIT-compiles the PTX
// when the runtime loads it. A kernel's parameters are the memref
// descriptors' words, 8 bytes each.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TARGET_NVPTX_PTX_H
#define MLA_TARGET_NVPTX_PTX_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/Error.h"

#include <map>
#include <memory>
#include <string>

namespace mla::nvptx {

/// Whether the gpu.module carries an `#nvvm.target`.
bool isNVVMModule(mlir::gpu::GPUModuleOp module);
/// Its `#nvvm.target` chip ("sm_90a").
std::string getChip(mlir::gpu::GPUModuleOp module);

/// Translates an NVVM-level gpu.module to an LLVM module for
/// nvptx64-nvidia-cuda / its chip, optimized at -O3.
llvm::Expected<std::unique_ptr<llvm::Module>>
translateToLLVMIR(mlir::gpu::GPUModuleOp module, llvm::LLVMContext &context);

/// Runs the NVPTX backend on `module` (PTX 8.3 for sm_90a).
llvm::Expected<std::string> emitPTX(llvm::Module &module);

/// The parameter count of each `.entry` of a PTX text; an error when a
/// parameter is not 8 bytes (the runtime packs descriptor words of 8).
llvm::Expected<std::map<std::string, int64_t>>
entryParameterCounts(llvm::StringRef ptx);

} // namespace mla::nvptx

#endif // MLA_TARGET_NVPTX_PTX_H

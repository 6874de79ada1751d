//===- CodeObject.h - gfx950 code objects from the ROCDL level --*- C++ -*-===//
//
// L5 of the pipeline: a `gpu.module` lowered to the LLVM/ROCDL dialects
// becomes LLVM IR, gfx950 assembly, and an HSA code object (an ELF linked by
// LLVM's ld.lld), all in-process through LLVM's AMDGPU backend; no ROCm
// install is involved. The kernel report reads a code object back.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TARGET_AMDGPU_CODEOBJECT_H
#define MLA_TARGET_AMDGPU_CODEOBJECT_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "mla/Target/AMDGPU/LoopProfile.h"

#include "llvm/Support/Error.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mla::amdgpu {

/// The chip a gpu.module is compiled for: its `#rocdl.target` chip, or
/// gfx950 when it has none.
std::string getChip(mlir::gpu::GPUModuleOp module);

/// Translates a ROCDL-level gpu.module to an LLVM module for
/// amdgcn-amd-amdhsa / `chip`, optimized at -O3.
llvm::Expected<std::unique_ptr<llvm::Module>>
translateToLLVMIR(mlir::gpu::GPUModuleOp module, llvm::LLVMContext &context);

/// Runs the AMDGPU backend on `module`.
llvm::Expected<std::string> emitAssembly(llvm::Module &module);
llvm::Expected<std::string> emitObject(llvm::Module &module);

/// Links a relocatable object into a code object with ld.lld (-shared).
llvm::Expected<std::string> linkCodeObject(llvm::StringRef object);

/// One explicit or hidden kernel argument, as the code object's metadata
/// describes it: where it goes in the kernarg segment.
struct KernelArgMetadata {
  int64_t offset = 0, size = 0;
  std::string valueKind; // by_value, global_buffer, hidden_block_count_x, ...
};

/// A kernel's entry in the code object's AMDGPU metadata note.
struct KernelMetadata {
  std::string name;
  int64_t vgprs = 0, agprs = 0, sgprs = 0, lds = 0, scratch = 0;
  int64_t vgprSpills = 0, sgprSpills = 0, maxFlatWorkgroupSize = 0;
  int64_t wavefrontSize = 64;
  int64_t kernargSegmentSize = 0, kernargSegmentAlign = 0;
  std::vector<KernelArgMetadata> args;
};

/// Reads the kernels' metadata (NT_AMDGPU_METADATA) from a code object.
llvm::Expected<std::vector<KernelMetadata>>
readKernelMetadata(llvm::StringRef codeObject);

/// Per kernel: registers, LDS, scratch, occupancy, and instruction counts
/// (MFMA, global loads by width, LDS-DMA loads, s_waitcnt, scratch access),
/// and the main loop's profile; with `shapes` (kernel name -> what the
/// artifact says of its loop), that profile per 64 KV rows and its useful
/// MFMA share too.
llvm::Error
printKernelReport(llvm::StringRef codeObject, llvm::raw_ostream &os,
                  const std::map<std::string, LoopShape> &shapes = {});

} // namespace mla::amdgpu

#endif // MLA_TARGET_AMDGPU_CODEOBJECT_H

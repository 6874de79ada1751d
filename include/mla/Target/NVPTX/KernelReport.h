//===- KernelReport.h - what a PTX kernel uses ------------------*- C++ -*-===//
//
// `mla-translate --kernel-report` for NVIDIA targets: per `.entry` of a PTX
// text, its launch directives, shared memory, static instruction counts by
// kind and, when a ptxas is at hand ($MLA_PTXAS, else on PATH or in
// /usr/local/cuda/bin), what ptxas allocates for it (`ptxas -v`: registers,
// spills, stack, barriers) and the blocks per SM those leave. The driver
// JIT-compiles the same PTX at load, so ptxas's numbers are the kernel's.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TARGET_NVPTX_KERNELREPORT_H
#define MLA_TARGET_NVPTX_KERNELREPORT_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <map>
#include <string>

namespace mla::nvptx {

/// What `ptxas -v` says of one entry function.
struct PtxasKernelInfo {
  int64_t registers = 0, stackBytes = 0, spillStoreBytes = 0,
          spillLoadBytes = 0, sharedBytes = 0, barriers = 0;
};

/// The entries of `ptxas -v` output (its "Compiling entry function",
/// "Function properties" and "Used N registers" lines), by name.
std::map<std::string, PtxasKernelInfo> parsePtxasVerbose(llvm::StringRef text);

/// Prints the report of every entry of `ptx`. `dynamicShared`: the bytes
/// of dynamic shared memory each kernel's launch passes, where known (an
/// artifact's manifest, the module's `mla.launch`). An error if the PTX
/// has no entry or ptxas rejects it.
llvm::Error
printKernelReport(llvm::StringRef ptx, llvm::raw_ostream &os,
                  const std::map<std::string, int64_t> &dynamicShared);

} // namespace mla::nvptx

#endif // MLA_TARGET_NVPTX_KERNELREPORT_H

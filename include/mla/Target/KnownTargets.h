//===- KnownTargets.h - the one table of chip facts -------------*- C++ -*-===//
//
// Everything the compiler and the runtime know about a chip lives in this
// table: passes, the split planner and tests read it, none repeats it.
// Architecture facts (wave size, LDS, registers, matrix instructions) and SKU
// facts (CU count, bandwidth) are kept apart so that a second SKU of an
// architecture adds one row.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TARGET_KNOWNTARGETS_H
#define MLA_TARGET_KNOWNTARGETS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>

namespace mla {

/// A matrix instruction: D[M x N] += A[M x K] * B[K x N] per wave.
struct MatrixInstruction {
  llvm::StringRef name; // as the ISA spells it
  int m, n, k;
  llvm::StringRef aType, bType; // "fp8", "fp4", "bf16" (f8f6f4 forms take both fp8 and fp4)
  bool blockScaled;              // takes E8M0 scales per 32 K-elements
};

struct ArchInfo {
  llvm::StringRef arch; // "gfx950", "sm_90a", "host"
  int waveSize;
  int64_t ldsBytesPerCU;
  /// What one workgroup's statically sized workgroup memory may hold (the
  /// kernels declare theirs statically): the whole LDS on gfx950, 48 KiB of
  /// `.shared` on NVIDIA chips.
  int64_t ldsBytesPerWorkgroup;
  int vectorRegistersPerLane; // VGPR + AGPR
  /// VGPRs and AGPRs share one file (a kernel's .vgpr_count includes both).
  bool unifiedRegisterFile;
  int simdsPerCU;
  int maxWavesPerSIMD;
  /// In preference order: the first that fits the data types is used.
  llvm::ArrayRef<MatrixInstruction> matrixInstructions;
  /// A GPU pipeline builds kernels for it (gfx950: mla-to-gpu, MFMA, ROCDL
  /// and hsaco; sm_90a: mla-to-gpu, NVVM and PTX).
  bool hasGPUKernels;
  /// The emu backend runs its kernels: gfx950's with exact MFMA semantics;
  /// sm_90a's, which use generic GPU ops only, as written before NVVM.
  bool emulated;
  /// 32-bit registers per SM that resident blocks share (NVIDIA; a warp's
  /// are allocated in granules of 256, 8 a thread): the kernel report's
  /// blocks per SM by registers. 0 where unused.
  int64_t registersPerCU = 0;
};

struct TargetInfo {
  llvm::StringRef name; // the name users type: "gfx950", "mi355x", "host"
  const ArchInfo *arch;
  int computeUnits;
  int xcds;                // chiplets the CUs are spread over
  double hbmBytesPerSecond; // 0 where not meaningful
  double clockHz;           // peak engine clock; 0 where not meaningful
};

/// Looks a target up by name ("gfx950" and "mi355x" are the same chip);
/// returns null for an unknown name.
const TargetInfo *lookupTarget(llvm::StringRef name);
/// Every known target name, for diagnostics and --help.
llvm::ArrayRef<TargetInfo> knownTargets();
/// The architecture named `arch` ("gfx950"), or null.
const ArchInfo *lookupArch(llvm::StringRef arch);
/// The target tools and pipelines use when none is named.
llvm::StringRef defaultTargetName();
/// The NVIDIA target the sm_90a pipeline and the cuda backend's tools use
/// when none is named, and its architecture.
llvm::StringRef defaultNVIDIATargetName();
llvm::StringRef defaultNVIDIAArch();
/// The architecture the emu backend models (its contexts' arch).
const ArchInfo &emulatedArch();
/// Whether `arch` is an NVIDIA architecture ("sm_90a"): its kernels go
/// through NVVM to PTX instead of ROCDL to hsaco.
bool isNVIDIAArch(llvm::StringRef arch);

} // namespace mla

#endif // MLA_TARGET_KNOWNTARGETS_H

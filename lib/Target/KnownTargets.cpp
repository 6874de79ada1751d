//===- KnownTargets.cpp - the one table of chip facts ---------------------===//

#include "mla/Target/KnownTargets.h"

using namespace mla;

namespace {
// CDNA4 matrix instructions the kernels can use, in preference order: the
// 16x16x128 f8f6f4 forms first (smallest register footprint per K step for
// 16-row head groups), then the 32x32 forms, then bf16.
const MatrixInstruction gfx950Matrix[] = {
    {"v_mfma_scale_f32_16x16x128_f8f6f4", 16, 16, 128, "fp8", "fp4", true},
    {"v_mfma_f32_16x16x128_f8f6f4", 16, 16, 128, "fp8", "fp8", false},
    {"v_mfma_scale_f32_32x32x64_f8f6f4", 32, 32, 64, "fp8", "fp4", true},
    {"v_mfma_f32_32x32x64_f8f6f4", 32, 32, 64, "fp8", "fp8", false},
    {"v_mfma_f32_16x16x32_bf16", 16, 16, 32, "bf16", "bf16", false},
    {"v_mfma_f32_32x32x16_bf16", 32, 32, 16, "bf16", "bf16", false},
};

const ArchInfo gfx950 = {"gfx950",         /*waveSize=*/64,
                         /*ldsBytesPerCU=*/160 * 1024,
                         /*ldsBytesPerWorkgroup=*/160 * 1024,
                         /*vectorRegistersPerLane=*/512,
                         /*unifiedRegisterFile=*/true,
                         /*simdsPerCU=*/4, /*maxWavesPerSIMD=*/8,
                         gfx950Matrix,     /*hasGPUKernels=*/true,
                         /*emulated=*/true};
// The host runs workgroups one after another: one "CU", no workgroup memory
// limit worth modelling, no matrix instructions.
const ArchInfo host = {"host", /*waveSize=*/1, /*ldsBytesPerCU=*/0,
                       /*ldsBytesPerWorkgroup=*/0,
                       /*vectorRegistersPerLane=*/0,
                       /*unifiedRegisterFile=*/false, /*simdsPerCU=*/1,
                       /*maxWavesPerSIMD=*/1, {}, /*hasGPUKernels=*/false,
                       /*emulated=*/false};
// Hopper with its arch-specific features (wgmma, setmaxnreg): 228 KiB of
// shared memory per SM, of which a block may hold 227 KiB (dynamic shared
// memory over the 48 KiB of static `.shared`; the driver keeps 1 KiB);
// 64K 32-bit registers per SM, at most 255 per thread. The matrix
// instructions are the warp-level mma.sync forms the kernels may use.
const MatrixInstruction sm90aMatrix[] = {
    {"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", 16, 8, 16,
     "bf16", "bf16", false},
};
const ArchInfo sm90a = {"sm_90a",         /*waveSize=*/32,
                        /*ldsBytesPerCU=*/228 * 1024,
                        /*ldsBytesPerWorkgroup=*/227 * 1024,
                        /*vectorRegistersPerLane=*/255,
                        /*unifiedRegisterFile=*/false,
                        /*simdsPerCU=*/4, /*maxWavesPerSIMD=*/16,
                        sm90aMatrix,      /*hasGPUKernels=*/true,
                        /*emulated=*/true, /*registersPerCU=*/64 * 1024};
const ArchInfo *const arches[] = {&gfx950, &sm90a, &host};

const TargetInfo targets[] = {
    // MI355X: 256 CUs in 8 XCDs, 8 TB/s HBM3E, 2.4 GHz.
    {"gfx950", &gfx950, 256, 8, 8.0e12, 2.4e9},
    {"mi355x", &gfx950, 256, 8, 8.0e12, 2.4e9},
    // H200 SXM: 132 SMs, 4.8 TB/s HBM3e, 1.98 GHz boost; H100 SXM: the same
    // chip with 3.35 TB/s HBM3. "sm_90a" names the H200.
    {"sm_90a", &sm90a, 132, 1, 4.8e12, 1.98e9},
    {"h200", &sm90a, 132, 1, 4.8e12, 1.98e9},
    {"h100", &sm90a, 132, 1, 3.35e12, 1.98e9},
    {"host", &host, 1, 1, 0.0, 0.0},
};
} // namespace

const TargetInfo *mla::lookupTarget(llvm::StringRef name) {
  for (const TargetInfo &t : targets)
    if (t.name == name)
      return &t;
  return nullptr;
}

llvm::ArrayRef<TargetInfo> mla::knownTargets() { return targets; }

const ArchInfo *mla::lookupArch(llvm::StringRef arch) {
  for (const ArchInfo *a : arches)
    if (a->arch == arch)
      return a;
  return nullptr;
}

llvm::StringRef mla::defaultTargetName() { return "gfx950"; }

llvm::StringRef mla::defaultNVIDIATargetName() { return "sm_90a"; }

llvm::StringRef mla::defaultNVIDIAArch() { return sm90a.arch; }

const ArchInfo &mla::emulatedArch() { return gfx950; }

bool mla::isNVIDIAArch(llvm::StringRef arch) { return arch.starts_with("sm_"); }

// mla-translate on a ROCDL-level gpu.module: LLVM IR for amdgcn-amd-amdhsa,
// gfx950 assembly, and an HSA code object that llvm-readobj reads; the
// kernel report reads the code object back.
// RUN: rm -rf %t && mkdir -p %t
// RUN: mla-opt %s --pass-pipeline='builtin.module(gpu.module(convert-gpu-to-rocdl{chipset=gfx950 runtime=HIP}))' -o %t/rocdl.mlir
// RUN: mla-translate --mlir-to-llvmir %t/rocdl.mlir | FileCheck %s --check-prefix=LLVMIR
// RUN: mla-translate --mla-to-gfx950-asm %t/rocdl.mlir | FileCheck %s --check-prefix=ASM
// RUN: mla-translate --mla-to-hsaco %t/rocdl.mlir -o %t/k.hsaco
// RUN: llvm-readobj --file-headers %t/k.hsaco | FileCheck %s --check-prefix=ELF
// RUN: llvm-readobj --notes %t/k.hsaco | FileCheck %s --check-prefix=NOTES
// RUN: mla-translate --kernel-report %t/k.hsaco | FileCheck %s --check-prefix=REPORT

// LLVMIR: target triple = "amdgcn-amd-amdhsa"
// LLVMIR: define amdgpu_kernel void @mfma_fp8(
// LLVMIR: call <4 x float> @llvm.amdgcn.mfma.scale.f32.16x16x128.f8f6f4
// LLVMIR: "target-cpu"="gfx950"

// ASM: .amdgcn_target "amdgcn-amd-amdhsa--gfx950
// ASM-LABEL: mfma_fp8:
// ASM: v_mfma_f32_16x16x128_f8f6f4 v[{{[0-9]+:[0-9]+}}], v[{{[0-9]+:[0-9]+}}], v[{{[0-9]+:[0-9]+}}], v[{{[0-9]+:[0-9]+}}]
// ASM-NOT: scratch_
// ASM: .amdhsa_private_segment_fixed_size 0

// ELF: Format: elf64-amdgpu
// ELF: Arch: amdgcn
// ELF: OS/ABI: AMDGPU_HSA
// ELF: Type: SharedObject
// ELF: EF_AMDGPU_MACH_AMDGCN_GFX950

// NOTES: amdhsa.kernels:
// NOTES: .max_flat_workgroup_size: 256
// NOTES: .name: mfma_fp8
// NOTES: .private_segment_fixed_size: 0
// NOTES: amdhsa.target: amdgcn-amd-amdhsa--gfx950

// REPORT: kernel mfma_fp8
// REPORT-NEXT: vector_registers {{[0-9]+}} of 512 (unified file, agpr {{[0-9]+}} of them)  sgpr {{[0-9]+}}
// REPORT-NEXT: lds_bytes 0  scratch_bytes 0  spills vgpr 0 sgpr 0
// REPORT-NEXT: max_flat_workgroup_size 256  wavefront_size 64
// REPORT-NEXT: occupancy_waves_per_simd 8 (by registers)
// REPORT-NEXT: instructions global_load.dwordx4={{[0-9]+}} mfma=1 s_waitcnt={{[0-9]+}} total={{[0-9]+}}

module attributes {gpu.container_module} {
  gpu.module @kernels [#rocdl.target<chip = "gfx950">] {
    gpu.func @mfma_fp8(%a: memref<?xvector<32xf8E4M3FN>>, %b: memref<?xvector<32xf8E4M3FN>>,
                       %c: memref<?xvector<4xf32>>) kernel
        attributes {known_block_size = array<i32: 256, 1, 1>} {
      %tid = gpu.thread_id x
      %va = memref.load %a[%tid] : memref<?xvector<32xf8E4M3FN>>
      %vb = memref.load %b[%tid] : memref<?xvector<32xf8E4M3FN>>
      %vc = memref.load %c[%tid] : memref<?xvector<4xf32>>
      %d = amdgpu.mfma 16x16x128 %va * %vb + %vc blgp = none
          : vector<32xf8E4M3FN>, vector<32xf8E4M3FN>, vector<4xf32>
      memref.store %d, %c[%tid] : memref<?xvector<4xf32>>
      gpu.return
    }
  }
}

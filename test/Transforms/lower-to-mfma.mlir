// mla-lower-to-mfma on a minimal L3 kernel: one 16x16 tile contraction over
// K = 192 (a 128 chunk and a 64 remainder) of fp8 tiles in LDS, a wave tile
// written back, and exp2 on the VALU.
// RUN: mla-opt %s --pass-pipeline='builtin.module(gpu.module(mla-lower-to-mfma))' | FileCheck %s

// CHECK-LABEL: gpu.func @contract
// CHECK-NOT: vector.contract
// Lane coordinates: kg = (tid % 64) / 16, i = tid % 16.
// CHECK: %[[TID:.+]] = gpu.thread_id x
// CHECK: %[[LANE:.+]] = arith.remui %[[TID]], %c64
// CHECK: %[[KG:.+]] = arith.divui %[[LANE]], %c16
// CHECK: %[[I:.+]] = arith.remui %[[LANE]], %c16
// CHECK: %[[KOFF:.+]] = arith.muli %[[KG]], %c16
// A fragment, chunk 0: row i, K runs 16kg.. and 64 + 16kg..
// CHECK: vector.load %[[A:.+]][%[[I]], %[[KOFF]]] : memref<16x192xf8E4M3FN, #gpu.address_space<workgroup>>, vector<16xf8E4M3FN>
// CHECK: %[[K64:.+]] = arith.addi %[[KOFF]], %c64
// CHECK: vector.load %[[A]][%[[I]], %[[K64]]]
// A fragment, chunk 1 (K 128..191): the upper half stays zero.
// CHECK: %[[K128:.+]] = arith.addi %[[KOFF]], %c128
// CHECK: vector.load %[[A]][%[[I]], %[[K128]]]
// CHECK-NOT: %c192
// B fragments read rows of the (n, k) tile, then one MFMA per chunk.
// CHECK: vector.load %[[B:.+]][%{{.+}}, %[[KOFF]]] : memref<16x192xf8E4M3FN
// CHECK: amdgpu.mfma 16x16x128 %{{.+}} * %{{.+}} + %{{.+}} blgp = none : vector<32xf8E4M3FN>, vector<32xf8E4M3FN>, vector<4xf32>
// CHECK: amdgpu.mfma 16x16x128
// CHECK-NOT: amdgpu.mfma
// The D tile goes back to memory as row 4kg + r, column i (each pattern
// recomputes the lane coordinates; CSE merges them in the pipeline).
// CHECK: gpu.thread_id x
// CHECK: %[[KG2:.+]] = arith.divui %{{.+}}, %c16
// CHECK: %[[ROW0:.+]] = arith.muli %[[KG2]], %c4
// CHECK: memref.store %{{.+}}, %{{.+}}[%{{.+}}, %{{.+}}] : memref<16x16xf32, #gpu.address_space<workgroup>>
// CHECK: llvm.call_intrinsic "llvm.amdgcn.exp2"(%{{.+}}) : (f32) -> f32

gpu.module @kernels {
  gpu.func @contract(%x: memref<?xf32>)
      workgroup(%a: memref<16x192xf8E4M3FN, #gpu.address_space<workgroup>>,
                %b: memref<16x192xf8E4M3FN, #gpu.address_space<workgroup>>,
                %d: memref<16x16xf32, #gpu.address_space<workgroup>>) kernel {
    %c0 = arith.constant 0 : index
    %pad = arith.constant 0.0 : f8E4M3FN
    %ta = vector.transfer_read %a[%c0, %c0], %pad {in_bounds = [true, true]}
        : memref<16x192xf8E4M3FN, #gpu.address_space<workgroup>>, vector<16x192xf8E4M3FN>
    %tb = vector.transfer_read %b[%c0, %c0], %pad {in_bounds = [true, true]}
        : memref<16x192xf8E4M3FN, #gpu.address_space<workgroup>>, vector<16x192xf8E4M3FN>
    %zero = arith.constant dense<0.0> : vector<16x16xf32>
    %s = vector.contract {indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                           affine_map<(m, n, k) -> (n, k)>,
                                           affine_map<(m, n, k) -> (m, n)>],
                          iterator_types = ["parallel", "parallel", "reduction"],
                          kind = #vector.kind<add>} %ta, %tb, %zero
        : vector<16x192xf8E4M3FN>, vector<16x192xf8E4M3FN> into vector<16x16xf32>
    vector.transfer_write %s, %d[%c0, %c0] {in_bounds = [true, true]}
        : vector<16x16xf32>, memref<16x16xf32, #gpu.address_space<workgroup>>
    %v = memref.load %x[%c0] : memref<?xf32>
    %e = math.exp2 %v : f32
    memref.store %e, %x[%c0] : memref<?xf32>
    gpu.return
  }
}

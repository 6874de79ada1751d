// mla-lower-to-mfma: the B operand of a (k, n) tile (PV's V) comes from
// transposed LDS loads when every lane's 8 bytes are 8-byte aligned in a
// workgroup buffer; lane i = tid % 16 of K group kg = (tid % 64) / 16 names
// row 8kg + 4t + i/4, column 16nb + 4(i%4) (bf16, loads t = 0, 1), and
// receives rows 8kg + 4t + 0..3 of column 16nb + i (docs/mfma-layouts.md).
// RUN: mla-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(mla-lower-to-mfma))' | FileCheck %s

// CHECK-LABEL: gpu.func @pv_bf16
// CHECK: %[[LANE:.+]] = arith.remui %{{.+}}, %c64
// CHECK: %[[KG:.+]] = arith.divui %[[LANE]], %c16
// CHECK: %[[I:.+]] = arith.remui %[[LANE]], %c16
// CHECK: %[[KSTART:.+]] = arith.muli %[[KG]], %c8
// CHECK: %[[ROWOF:.+]] = arith.divui %[[I]], %c4
// CHECK: %[[COLOF:.+]] = arith.muli %{{.+}}, %c4
// CHECK: %[[ROW0:.+]] = arith.addi %[[KSTART]], %[[ROWOF]]
// CHECK: amdgpu.transpose_load %[[V:.+]][%{{.+}}, %{{.+}}] : memref<32x32xbf16, #gpu.address_space<workgroup>> -> vector<4xbf16>
// CHECK: amdgpu.transpose_load %[[V]]
// CHECK: amdgpu.mfma 16x16x32
// The second 16-column block: two more loads, one more MFMA.
// CHECK-COUNT-2: amdgpu.transpose_load %[[V]]
// CHECK: amdgpu.mfma 16x16x32
// CHECK-NOT: amdgpu.transpose_load
// CHECK-NOT: memref.load %[[V]]
gpu.module @kernels {
  gpu.func @pv_bf16(%out: memref<16x32xf32, #gpu.address_space<global>>)
      workgroup(%p: memref<16x32xbf16, #gpu.address_space<workgroup>>,
                %v: memref<32x32xbf16, #gpu.address_space<workgroup>>) kernel {
    %c0 = arith.constant 0 : index
    %pad = arith.constant 0.0 : bf16
    %tp = vector.transfer_read %p[%c0, %c0], %pad {in_bounds = [true, true]}
        : memref<16x32xbf16, #gpu.address_space<workgroup>>, vector<16x32xbf16>
    %tv = vector.transfer_read %v[%c0, %c0], %pad {in_bounds = [true, true]}
        : memref<32x32xbf16, #gpu.address_space<workgroup>>, vector<32x32xbf16>
    %zero = arith.constant dense<0.0> : vector<16x32xf32>
    %o = vector.contract {indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                           affine_map<(m, n, k) -> (k, n)>,
                                           affine_map<(m, n, k) -> (m, n)>],
                          iterator_types = ["parallel", "parallel", "reduction"],
                          kind = #vector.kind<add>} %tp, %tv, %zero
        : vector<16x32xbf16>, vector<32x32xbf16> into vector<16x32xf32>
    vector.transfer_write %o, %out[%c0, %c0] {in_bounds = [true, true]}
        : vector<16x32xf32>, memref<16x32xf32, #gpu.address_space<global>>
    gpu.return
  }
}

// -----

// A column index that leaves lanes 4-byte aligned only: the K runs are
// gathered element by element (ds_read_u16).
// CHECK-LABEL: gpu.func @pv_bf16_unaligned
// CHECK-NOT: amdgpu.transpose_load
// CHECK: memref.load %{{.+}} : memref<32x34xbf16, #gpu.address_space<workgroup>>
// CHECK: amdgpu.mfma 16x16x32
gpu.module @kernels {
  gpu.func @pv_bf16_unaligned(%out: memref<16x16xf32, #gpu.address_space<global>>)
      workgroup(%p: memref<16x32xbf16, #gpu.address_space<workgroup>>,
                %v: memref<32x34xbf16, #gpu.address_space<workgroup>>) kernel {
    %c0 = arith.constant 0 : index
    %c2 = arith.constant 2 : index
    %pad = arith.constant 0.0 : bf16
    %tp = vector.transfer_read %p[%c0, %c0], %pad {in_bounds = [true, true]}
        : memref<16x32xbf16, #gpu.address_space<workgroup>>, vector<16x32xbf16>
    %tv = vector.transfer_read %v[%c0, %c2], %pad {in_bounds = [true, true]}
        : memref<32x34xbf16, #gpu.address_space<workgroup>>, vector<32x16xbf16>
    %zero = arith.constant dense<0.0> : vector<16x16xf32>
    %o = vector.contract {indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                           affine_map<(m, n, k) -> (k, n)>,
                                           affine_map<(m, n, k) -> (m, n)>],
                          iterator_types = ["parallel", "parallel", "reduction"],
                          kind = #vector.kind<add>} %tp, %tv, %zero
        : vector<16x32xbf16>, vector<32x16xbf16> into vector<16x16xf32>
    vector.transfer_write %o, %out[%c0, %c0] {in_bounds = [true, true]}
        : vector<16x16xf32>, memref<16x16xf32, #gpu.address_space<global>>
    gpu.return
  }
}

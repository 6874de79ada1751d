// mla-lower-to-mfma: contractions on the same B that accumulate into each
// other (fp8 P in two parts, the lo part marked mla.lhs_exp2 = -4) share
// one scaled MFMA per B fragment when K = 64: hi fills K 0..63 (elements
// 0..15 of a lane's A), lo the K 64..127 that would be padding (elements
// 16..31), B holds the fragment twice, and the A scale goes by K block,
// from the lane that supplies it (lanes 32..63: blocks 2 and 3, lo's
// 2^-4; lanes 0..31: 1). The fragment is loaded once and dies at once.
// RUN: mla-opt %s --pass-pipeline='builtin.module(gpu.module(mla-lower-to-mfma))' | FileCheck %s

// CHECK-LABEL: gpu.func @pv_two_parts
// CHECK-DAG: %[[ONE:.+]] = arith.constant 1.000000e+00 : f8E8M0FNU
// CHECK-DAG: %[[SLO:.+]] = arith.constant 6.250000e-02 : f8E8M0FNU
// CHECK: %[[KG:.+]] = arith.divui %{{.+}}, %c16
// hi's run, then lo's run in its upper half.
// CHECK: %[[HI:.+]] = vector.load %{{.+}}[%c0,
// CHECK: %[[HIA:.+]] = vector.shuffle %{{.+}}, %{{.+}} [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 48,
// CHECK: %[[LO:.+]] = vector.load %{{.+}}[%c1,
// CHECK: %[[A:.+]] = vector.shuffle %{{.+}}, %[[HIA]] [32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
// CHECK: %[[INLO:.+]] = arith.cmpi uge, %[[KG]], %c2
// CHECK: %[[SA:.+]] = arith.select %[[INLO]], %[[SLO]], %[[ONE]] : f8E8M0FNU
// Column block 0: V's fragment from two transposed loads, in both halves.
// CHECK: amdgpu.transpose_load
// CHECK: amdgpu.transpose_load
// CHECK: %[[VHALF:.+]] = vector.shuffle %{{.+}}, %{{.+}} [16, 17, 18, 19, 20, 21, 22, 23, 0, 1, 2, 3, 4, 5, 6, 7]
// CHECK: %[[B1:.+]] = vector.shuffle %[[VHALF]], %[[VHALF]]
// CHECK: %[[B0:.+]] = vector.shuffle %[[B1]], %{{.+}} [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 48,
// CHECK: %[[B2:.+]] = vector.shuffle %[[VHALF]], %[[VHALF]]
// CHECK: %[[B:.+]] = vector.shuffle %[[B2]], %[[B0]] [32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
// CHECK: amdgpu.scaled_mfma 16x16x128 (%[[SA]][0] * %[[A]]) * (%[[ONE]][0] * %[[B]]) + %{{.+}}
// Column block 1 likewise, with the same A.
// CHECK: amdgpu.transpose_load
// CHECK: amdgpu.transpose_load
// CHECK: amdgpu.scaled_mfma 16x16x128 (%[[SA]][0] * %[[A]]) * (%[[ONE]][0] * %{{.+}}) + %{{.+}}
// CHECK-NOT: amdgpu.transpose_load
// CHECK-NOT: amdgpu.mfma
// CHECK-NOT: vector.contract
gpu.module @kernels {
  gpu.func @pv_two_parts(%out: memref<16x32xf32, #gpu.address_space<global>>)
      workgroup(%p: memref<2x16x64xf8E4M3FN, #gpu.address_space<workgroup>>,
                %v: memref<64x32xf8E4M3FN, #gpu.address_space<workgroup>>) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %pad = arith.constant 0.0 : f8E4M3FN
    %hi = vector.transfer_read %p[%c0, %c0, %c0], %pad {in_bounds = [true, true]}
        : memref<2x16x64xf8E4M3FN, #gpu.address_space<workgroup>>, vector<16x64xf8E4M3FN>
    %tv = vector.transfer_read %v[%c0, %c0], %pad {in_bounds = [true, true]}
        : memref<64x32xf8E4M3FN, #gpu.address_space<workgroup>>, vector<64x32xf8E4M3FN>
    %zero = arith.constant dense<0.0> : vector<16x32xf32>
    %o = vector.contract {indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                           affine_map<(m, n, k) -> (k, n)>,
                                           affine_map<(m, n, k) -> (m, n)>],
                          iterator_types = ["parallel", "parallel", "reduction"],
                          kind = #vector.kind<add>} %hi, %tv, %zero
        : vector<16x64xf8E4M3FN>, vector<64x32xf8E4M3FN> into vector<16x32xf32>
    %lo = vector.transfer_read %p[%c1, %c0, %c0], %pad {in_bounds = [true, true]}
        : memref<2x16x64xf8E4M3FN, #gpu.address_space<workgroup>>, vector<16x64xf8E4M3FN>
    %o2 = vector.contract {indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                            affine_map<(m, n, k) -> (k, n)>,
                                            affine_map<(m, n, k) -> (m, n)>],
                           iterator_types = ["parallel", "parallel", "reduction"],
                           kind = #vector.kind<add>} %lo, %tv, %o {mla.lhs_exp2 = -4 : i64}
        : vector<16x64xf8E4M3FN>, vector<64x32xf8E4M3FN> into vector<16x32xf32>
    vector.transfer_write %o2, %out[%c0, %c0] {in_bounds = [true, true]}
        : vector<16x32xf32>, memref<16x32xf32, #gpu.address_space<global>>
    gpu.return
  }
}

// mla-lower-to-mfma: contractions on the same B that accumulate into each
// other (fp8 P in two parts, the lo part marked mla.lhs_exp2 = -4) run back
// to back on each B fragment, so a fragment is loaded once and dies at once;
// the scaled part runs on the scaled MFMA with A scale 2^-4 and B scale 1.
// RUN: mla-opt %s --pass-pipeline='builtin.module(gpu.module(mla-lower-to-mfma))' | FileCheck %s

// CHECK-LABEL: gpu.func @pv_two_parts
// CHECK-DAG: %[[SLO:.+]] = arith.constant 6.250000e-02 : f8E8M0FNU
// CHECK-DAG: %[[ONE:.+]] = arith.constant 1.000000e+00 : f8E8M0FNU
// Column block 0: V's fragment from transposed loads, then hi, then lo.
// CHECK: amdgpu.transpose_load
// CHECK: amdgpu.transpose_load
// CHECK: %[[HI0:.+]] = amdgpu.mfma 16x16x128
// CHECK: amdgpu.scaled_mfma 16x16x128 (%[[SLO]][0] * %{{.+}}) * (%[[ONE]][0] * %{{.+}}) + %[[HI0]]
// Column block 1 likewise.
// CHECK: amdgpu.transpose_load
// CHECK: amdgpu.transpose_load
// CHECK: %[[HI1:.+]] = amdgpu.mfma 16x16x128
// CHECK: amdgpu.scaled_mfma 16x16x128 (%[[SLO]][0] * %{{.+}}) * (%[[ONE]][0] * %{{.+}}) + %[[HI1]]
// CHECK-NOT: amdgpu.transpose_load
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

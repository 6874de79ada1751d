// Round trip of the split-level ops and of the target/config attributes.
// RUN: mla-opt %s --split-input-file | mla-opt --split-input-file | FileCheck %s
// RUN: mla-opt %s --split-input-file --mlir-print-op-generic | mla-opt --split-input-file | FileCheck %s

// CHECK-LABEL: func @split_level
// CHECK: %[[ITEMS:.+]], %[[IPTR:.+]] = mla.plan_splits %{{.+}} {config = #mla.config<kv_tile = 32, heads_per_workgroup = 16, waves_per_workgroup = 4, pipeline_stages = 2, split_policy = uniform, splits = 7>, target = #mla.target<name = "tiny", arch = "gfx950", compute_units = 4, xcds = 1, wave_size = 64, lds_bytes = 65536, vector_registers = 512, hbm_gbps = 100, matrix_instructions = ["v_mfma_f32_16x16x128_f8f6f4"]>} : tensor<?xi32> -> tensor<?x4xi32>, tensor<?xi32>
// CHECK: %[[PO:.+]], %[[PL:.+]] = mla.partial_decode q({{.+}}) kv({{.+}}) scale({{.+}}) indptr({{.+}}) work(%[[ITEMS]] : tensor<?x4xi32>) {config = {{.+}}, kv_format = #mla.kv_format<fp8>} -> tensor<?x4x16x512xf32>, tensor<?x4x16xf32>
// CHECK: mla.combine partials(%[[PO]], %[[PL]] : tensor<?x4x16x512xf32>, tensor<?x4x16xf32>) indptr(%[[IPTR]], %{{.+}} : tensor<?xi32>, tensor<?xi32>) tokens(%{{.+}}) -> tensor<?x16x512xbf16>, tensor<?x16xf32>
func.func @split_level(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xf8E4M3FN>, %s: tensor<1xf32>,
                       %qo: tensor<?xi32>, %kvp: tensor<?xi32>, %t: index)
    -> (tensor<?x16x512xbf16>, tensor<?x16xf32>) {
  %items, %iptr = mla.plan_splits %kvp {
      config = #mla.config<kv_tile = 32, heads_per_workgroup = 16, waves_per_workgroup = 4,
                           pipeline_stages = 2, split_policy = uniform, splits = 7>,
      target = #mla.target<name = "tiny", arch = "gfx950", compute_units = 4, xcds = 1,
                           wave_size = 64, lds_bytes = 65536, vector_registers = 512,
                           hbm_gbps = 100, matrix_instructions = ["v_mfma_f32_16x16x128_f8f6f4"]>}
      : tensor<?xi32> -> tensor<?x4xi32>, tensor<?xi32>
  %po, %pl = mla.partial_decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xf8E4M3FN>)
      scale(%s : tensor<1xf32>) indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
      work(%items : tensor<?x4xi32>)
      {kv_format = #mla.kv_format<fp8>,
       config = #mla.config<kv_tile = 32, heads_per_workgroup = 16, waves_per_workgroup = 4,
                            pipeline_stages = 2, split_policy = uniform, splits = 7>}
      -> tensor<?x4x16x512xf32>, tensor<?x4x16xf32>
  %o, %l = mla.combine partials(%po, %pl : tensor<?x4x16x512xf32>, tensor<?x4x16xf32>)
      indptr(%iptr, %qo : tensor<?xi32>, tensor<?xi32>) tokens(%t)
      -> tensor<?x16x512xbf16>, tensor<?x16xf32>
  return %o, %l : tensor<?x16x512xbf16>, tensor<?x16xf32>
}

// -----

// A balanced config omits `splits`.
// CHECK-LABEL: func @balanced
// CHECK: mla.config = #mla.config<kv_tile = 64, heads_per_workgroup = 32, waves_per_workgroup = 4, pipeline_stages = 2, split_policy = balanced>
func.func @balanced(%q: tensor<?x32x576xbf16>, %kv: tensor<?x576xbf16>,
                    %qo: tensor<?xi32>, %kvp: tensor<?xi32>) -> tensor<?x32x512xbf16> {
  %o = mla.decode q(%q : tensor<?x32x576xbf16>) kv(%kv : tensor<?x576xbf16>)
         indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
         {kv_format = #mla.kv_format<bf16>,
          mla.config = #mla.config<kv_tile = 64, heads_per_workgroup = 32, waves_per_workgroup = 4,
                                   pipeline_stages = 2, split_policy = balanced>,
          mla.target = #mla.target<name = "gfx950", arch = "gfx950", compute_units = 256, xcds = 8,
                                   wave_size = 64, lds_bytes = 163840, vector_registers = 512,
                                   hbm_gbps = 8000, matrix_instructions = []>}
         -> tensor<?x32x512xbf16>
  return %o : tensor<?x32x512xbf16>
}

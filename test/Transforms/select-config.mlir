// mla-select-config: the target is serialized from the chip table and a
// config chosen per op; every field can be forced.
// RUN: mla-opt %s --mla-select-config | FileCheck %s --check-prefix=GFX950
// RUN: mla-opt %s --mla-select-config="target=mi355x" | FileCheck %s --check-prefix=MI355X
// RUN: mla-opt %s --mla-select-config="target=host" | FileCheck %s --check-prefix=HOST
// RUN: mla-opt %s --mla-select-config="kv-tile=32 splits=7 pipeline-stages=3 heads-per-workgroup=16 waves-per-workgroup=8" | FileCheck %s --check-prefix=FORCED
// RUN: mla-opt %s --mla-select-config="waves-per-row-group=2" | FileCheck %s --check-prefix=SPLIT2

// GFX950-LABEL: func @heads16
// At H = 16 a token's rows are one group of 16: its 4 waves share it.
// GFX950: mla.config = #mla.config<kv_tile = 64, heads_per_workgroup = 16, waves_per_workgroup = 4, pipeline_stages = 2, split_policy = balanced, waves_per_row_group = 4>
// GFX950-SAME: mla.target = #mla.target<name = "gfx950", arch = "gfx950", compute_units = 256, xcds = 8, wave_size = 64, lds_bytes = 163840, vector_registers = 512, hbm_gbps = 8000, matrix_instructions = ["v_mfma_scale_f32_16x16x128_f8f6f4", "v_mfma_f32_16x16x128_f8f6f4", "v_mfma_scale_f32_32x32x64_f8f6f4", "v_mfma_f32_32x32x64_f8f6f4", "v_mfma_f32_16x16x32_bf16", "v_mfma_f32_32x32x16_bf16"]>
// GFX950-LABEL: func @heads128
// mxfp4 at H = 128: groups of 32 rows, two waves each.
// GFX950: heads_per_workgroup = 128, waves_per_workgroup = 4, pipeline_stages = 2, split_policy = balanced, waves_per_row_group = 2, rows_per_wave = 32>
// H = 48 is no multiple of 32: the largest default group dividing it is 16.
// GFX950-LABEL: func @heads48
// GFX950: heads_per_workgroup = 48
// MI355X: name = "mi355x", arch = "gfx950", compute_units = 256
// HOST-LABEL: func @heads16
// HOST: mla.config = #mla.config<kv_tile = 64, heads_per_workgroup = 16, waves_per_workgroup = 1, pipeline_stages = 1, split_policy = balanced>
// HOST-SAME: mla.target = #mla.target<name = "host", arch = "host", compute_units = 1, xcds = 1, wave_size = 1, lds_bytes = 0, vector_registers = 0, hbm_gbps = 0, matrix_instructions = []>
// HOST-LABEL: func @heads128
// HOST: heads_per_workgroup = 128
// HOST-LABEL: func @heads48
// HOST: heads_per_workgroup = 48
// FORCED-LABEL: func @heads16
// FORCED: mla.config = #mla.config<kv_tile = 32, heads_per_workgroup = 16, waves_per_workgroup = 8, pipeline_stages = 3, split_policy = uniform, splits = 7, waves_per_row_group = 2>
// SPLIT2-LABEL: func @heads16
// SPLIT2: split_policy = balanced, waves_per_row_group = 2>
// SPLIT2-LABEL: func @heads128
// SPLIT2: split_policy = balanced, waves_per_row_group = 2>

func.func @heads16(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xf8E4M3FN>, %s: tensor<1xf32>,
                   %qo: tensor<?xi32>, %kvp: tensor<?xi32>) -> tensor<?x16x512xbf16> {
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xf8E4M3FN>)
         scale(%s : tensor<1xf32>) indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
         {kv_format = #mla.kv_format<fp8>} -> tensor<?x16x512xbf16>
  return %o : tensor<?x16x512xbf16>
}

func.func @heads128(%q: tensor<?x128x576xbf16>, %kv: tensor<?x288xi8>, %s: tensor<?x18xf8E8M0FNU>,
                    %qo: tensor<?xi32>, %kvp: tensor<?xi32>) -> tensor<?x128x512xbf16> {
  %o = mla.decode q(%q : tensor<?x128x576xbf16>) kv(%kv : tensor<?x288xi8>)
         scale(%s : tensor<?x18xf8E8M0FNU>) indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
         {kv_format = #mla.kv_format<mxfp4>} -> tensor<?x128x512xbf16>
  return %o : tensor<?x128x512xbf16>
}

func.func @heads48(%q: tensor<?x48x576xbf16>, %kv: tensor<?x576xbf16>,
                   %qo: tensor<?xi32>, %kvp: tensor<?xi32>) -> tensor<?x48x512xbf16> {
  %o = mla.decode q(%q : tensor<?x48x576xbf16>) kv(%kv : tensor<?x576xbf16>)
         indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
         {kv_format = #mla.kv_format<bf16>} -> tensor<?x48x512xbf16>
  return %o : tensor<?x48x512xbf16>
}

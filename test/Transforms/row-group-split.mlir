// waves_per_row_group: the waves of a row group split the tile's KV rows
// (QK) and the Dv columns (PV) into whole 16s. mla-select-config picks the
// most waves per group that one token's rows and those splits allow; a
// forced split they do not allow is an error on the op.
// RUN: mla-opt %s --split-input-file --mla-select-config | FileCheck %s --check-prefix=AUTO
// RUN: not mla-opt %s --split-input-file --mla-select-config="waves-per-row-group=4" --mla-split-kv --mla-to-gpu 2>&1 | FileCheck %s --check-prefix=FORCED
// RUN: not mla-opt %s --split-input-file --mla-select-config="kv-tile=32 waves-per-row-group=4" --mla-split-kv --mla-to-gpu 2>&1 | FileCheck %s --check-prefix=FORCED32
// RUN: mla-opt %s --split-input-file --mla-select-config="waves-per-row-group=4" | FileCheck %s --check-prefix=FORCED4
// rows_per_wave = 32 where the heads are fewer: errors on the op; H = 32
// and 64 build.
// RUN: not mla-opt %s --split-input-file --mla-select-config="rows-per-wave=32" --mla-split-kv --mla-to-gpu 2>&1 | FileCheck %s --check-prefix=ROWS32
// ROWS32: error: 'mla.partial_decode' op heads_per_workgroup = 16 must be a multiple of rows_per_wave = 32 dividing H = 16
// ROWS32: error: 'mla.partial_decode' op heads_per_workgroup = 16 must be a multiple of rows_per_wave = 32 dividing H = 16
// ROWS32-NOT: error

// Dv = 32 splits into 16s 2 ways, not 4.
// AUTO-LABEL: func @dv32
// AUTO: waves_per_row_group = 2>
// FORCED: error: 'mla.partial_decode' op waves_per_row_group = 4 needs kv_tile = 64 and Dv = 32 to split into multiples of 16 rows and columns
// FORCED-NOT: error
// FORCED32: error: 'mla.partial_decode' op waves_per_row_group = 4 needs kv_tile = 32 and Dv = 32 to split into multiples of 16 rows and columns
func.func @dv32(%q: tensor<?x16x128xbf16>, %kv: tensor<?x128xf8E4M3FN>, %s: tensor<1xf32>,
                %qo: tensor<?xi32>, %kvp: tensor<?xi32>) -> tensor<?x16x32xbf16> {
  %o = mla.decode q(%q : tensor<?x16x128xbf16>) kv(%kv : tensor<?x128xf8E4M3FN>)
         scale(%s : tensor<1xf32>) indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
         {kv_format = #mla.kv_format<fp8>, v_head_dim = 32} -> tensor<?x16x32xbf16>
  return %o : tensor<?x16x32xbf16>
}

// -----

// bf16 at H = 16: two stages of 64-row tiles fit the LDS because the
// waves of a row group share its score and P buffers. H = 32 makes one
// group of 32 rows, whose scores and P (two parts) no longer leave room
// for them: its tile halves (as at H = 128), two waves a group. A 32-row
// tile does not split 4 ways.
// AUTO-LABEL: func @bf16_h16
// AUTO: kv_tile = 64, {{.*}} waves_per_row_group = 4>
// AUTO-LABEL: func @bf16_h32
// AUTO: kv_tile = 32, {{.*}} waves_per_row_group = 2, rows_per_wave = 32>
// A forced 4-way split keeps 64-row tiles with 16-row groups (32-row
// groups would halve the tile below 16 rows a wave).
// FORCED4-LABEL: func @bf16_h32
// FORCED4: kv_tile = 64, {{.*}} waves_per_row_group = 4>
// FORCED32: error: 'mla.partial_decode' op waves_per_row_group = 4 needs kv_tile = 32 and Dv = 512 to split into multiples of 16 rows and columns
func.func @bf16_h16(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xbf16>,
                    %qo: tensor<?xi32>, %kvp: tensor<?xi32>) -> tensor<?x16x512xbf16> {
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>)
         indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
         {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x512xbf16>
  return %o : tensor<?x16x512xbf16>
}

// -----

func.func @bf16_h32(%q: tensor<?x32x576xbf16>, %kv: tensor<?x576xbf16>,
                    %qo: tensor<?xi32>, %kvp: tensor<?xi32>) -> tensor<?x32x512xbf16> {
  %o = mla.decode q(%q : tensor<?x32x576xbf16>) kv(%kv : tensor<?x576xbf16>)
         indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
         {kv_format = #mla.kv_format<bf16>} -> tensor<?x32x512xbf16>
  return %o : tensor<?x32x512xbf16>
}

// -----

// fp8 (and bf16) where H is a multiple of 32: groups of 32 rows (rows_per_wave, two
// 16-row MFMA blocks a wave sharing its K and V reads), split by at least
// 2 waves (a wave's accumulator holds 32 rows of Dv / W columns). H = 32
// fills the workgroup with one group of 4 waves, H = 64 with two of 2.
// AUTO-LABEL: func @fp8_h32
// AUTO: heads_per_workgroup = 32, {{.*}} waves_per_row_group = 4, rows_per_wave = 32>
func.func @fp8_h32(%q: tensor<?x32x576xbf16>, %kv: tensor<?x576xf8E4M3FN>, %s: tensor<1xf32>,
                   %qo: tensor<?xi32>, %kvp: tensor<?xi32>) -> tensor<?x32x512xbf16> {
  %o = mla.decode q(%q : tensor<?x32x576xbf16>) kv(%kv : tensor<?x576xf8E4M3FN>)
         scale(%s : tensor<1xf32>) indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
         {kv_format = #mla.kv_format<fp8>} -> tensor<?x32x512xbf16>
  return %o : tensor<?x32x512xbf16>
}

// -----

// AUTO-LABEL: func @fp8_h64
// AUTO: heads_per_workgroup = 64, waves_per_workgroup = 4, pipeline_stages = 2, split_policy = balanced, waves_per_row_group = 2, rows_per_wave = 32>
func.func @fp8_h64(%q: tensor<?x64x576xbf16>, %kv: tensor<?x576xf8E4M3FN>, %s: tensor<1xf32>,
                   %qo: tensor<?xi32>, %kvp: tensor<?xi32>) -> tensor<?x64x512xbf16> {
  %o = mla.decode q(%q : tensor<?x64x576xbf16>) kv(%kv : tensor<?x576xf8E4M3FN>)
         scale(%s : tensor<1xf32>) indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
         {kv_format = #mla.kv_format<fp8>} -> tensor<?x64x512xbf16>
  return %o : tensor<?x64x512xbf16>
}

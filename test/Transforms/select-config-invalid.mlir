// Every config the target cannot run is an error on the op, whether chosen by
// the user on the command line or by default.
// RUN: mla-opt %s --split-input-file --verify-diagnostics --mla-select-config="kv-tile=48"
// RUN: not mla-opt %s --split-input-file --mla-select-config="kv-tile=48" 2>&1 | FileCheck %s --check-prefix=TILE
// RUN: not mla-opt %s --split-input-file --mla-select-config="splits=0" 2>&1 | FileCheck %s --check-prefix=SPLITS0
// RUN: not mla-opt %s --split-input-file --mla-select-config="pipeline-stages=3 kv-tile=64" 2>&1 | FileCheck %s --check-prefix=LDS
// RUN: not mla-opt %s --split-input-file --mla-select-config="heads-per-workgroup=24" 2>&1 | FileCheck %s --check-prefix=HEADS24
// RUN: not mla-opt %s --split-input-file --mla-select-config="heads-per-workgroup=32" 2>&1 | FileCheck %s --check-prefix=DIVIDE
// RUN: not mla-opt %s --split-input-file --mla-select-config="waves-per-workgroup=32" 2>&1 | FileCheck %s --check-prefix=WAVES
// RUN: not mla-opt %s --split-input-file --mla-select-config="pipeline-stages=-2" 2>&1 | FileCheck %s --check-prefix=STAGES
// RUN: not mla-opt %s --split-input-file --mla-select-config="waves-per-row-group=3" 2>&1 | FileCheck %s --check-prefix=ROWGROUP
// RUN: not mla-opt %s --split-input-file --mla-select-config="target=gfx942" 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not mla-opt %s --split-input-file --mla-select-config="query-tokens=5" 2>&1 | FileCheck %s --check-prefix=TOKENS
// RUN: not mla-opt %s --split-input-file --mla-select-config="target=h200 query-tokens=0" 2>&1 | FileCheck %s --check-prefix=TOKENS0

// TILE: error: 'mla.decode' op kv_tile = 48 must be a positive power of two
// SPLITS0: error: 'mla.decode' op uniform split_policy needs splits >= 1, got splits = 0
// LDS: error: 'mla.decode' op config needs 229888 bytes of LDS (3 stages x 64 kv rows: kv_tiles 221184 scores 4096 p 4096 row_factors 256 tile_maxima 256), target gfx950 has 163840
// HEADS24: error: 'mla.decode' op heads_per_workgroup = 24 must be a positive multiple of 16
// DIVIDE: error: 'mla.decode' op heads_per_workgroup = 32 does not divide H = 16
// WAVES: error: 'mla.decode' op waves_per_workgroup = 32 gives 2048 threads, more than 1024
// STAGES: error: 'mla.decode' op pipeline_stages = -2 must be at least 1
// ROWGROUP: error: 'mla.decode' op waves_per_row_group = 3 must be positive and divide waves_per_workgroup = 4
// TOKENS: error: query-tokens = 5 is not in 1..4
// TOKENS0: error: query-tokens = 0 is not in 1..4
// TARGET: error: unknown target 'gfx942' (known: gfx950, mi355x, sm_90a, h200, h100, host)

// A bf16 cache row is 1152 bytes: 3 stages of 64 rows exceed 160 KiB (the
// gfx950 default for bf16 is 32 rows).
func.func @bf16_h16(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xbf16>,
                    %qo: tensor<?xi32>, %kvp: tensor<?xi32>) -> tensor<?x16x512xbf16> {
  // expected-error @+1 {{kv_tile = 48 must be a positive power of two}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>)
         indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
         {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x512xbf16>
  return %o : tensor<?x16x512xbf16>
}

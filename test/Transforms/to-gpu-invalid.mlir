// What the gfx950 kernels do not cover yet is an error on the op, not a
// wrong kernel.
// RUN: mla-opt %s --split-input-file --verify-diagnostics --mla-select-config --mla-split-kv --mla-to-gpu
// RUN: not mla-opt %s --split-input-file --mla-select-config="kv-tile=32" --mla-split-kv --mla-to-gpu 2>&1 | FileCheck %s --check-prefix=TILE
// RUN: not mla-opt %s --split-input-file --mla-select-config="pipeline-stages=1" --mla-split-kv --mla-to-gpu 2>&1 | FileCheck %s --check-prefix=STAGES
// TILE: error: 'mla.partial_decode' op kv_tile = 32 must be a multiple of 64 whose tile bytes split into 16-byte loads of 256 lanes
// STAGES: error: 'mla.partial_decode' op the partial kernel needs pipeline_stages >= 2
// RUN: not mla-opt %s --split-input-file --mla-select-config="waves-per-workgroup=8" --mla-split-kv --mla-to-gpu 2>&1 | FileCheck %s --check-prefix=WAVES
// WAVES: error: 'mla.partial_decode' op the partial kernel runs 4 waves (16 query rows each); the config asks for waves_per_workgroup = 8


// Dqk = 96 is no multiple of 64.
func.func @dqk96(%q: tensor<?x16x96xbf16>, %kv: tensor<?x96xf8E4M3FN>, %s: tensor<1xf32>,
                 %qo: tensor<?xi32>, %kvp: tensor<?xi32>) -> tensor<?x16x64xbf16> {
  // expected-error @+1 {{gfx950 kernels need Dqk a multiple of 64 and Dv a multiple of 16}}
  %o = mla.decode q(%q : tensor<?x16x96xbf16>) kv(%kv : tensor<?x96xf8E4M3FN>)
         scale(%s : tensor<1xf32>) indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
         {kv_format = #mla.kv_format<fp8>, v_head_dim = 64} -> tensor<?x16x64xbf16>
  return %o : tensor<?x16x64xbf16>
}

// -----

func.func @fp8(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xf8E4M3FN>, %s: tensor<1xf32>,
               %qo: tensor<?xi32>, %kvp: tensor<?xi32>) -> tensor<?x16x512xbf16> {
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xf8E4M3FN>)
         scale(%s : tensor<1xf32>) indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
         {kv_format = #mla.kv_format<fp8>} -> tensor<?x16x512xbf16>
  return %o : tensor<?x16x512xbf16>
}

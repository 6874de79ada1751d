// mla-split-kv: mla.decode -> plan_splits + partial_decode + combine, with the
// config and target carried over; without a config it is an error.
// RUN: mla-opt %s --split-input-file --mla-select-config="splits=3 kv-tile=32" --mla-split-kv | FileCheck %s
// RUN: mla-opt %s --split-input-file --mla-split-kv --verify-diagnostics

// CHECK-LABEL: func @fp8
// CHECK-SAME: (%[[Q:.+]]: tensor<?x16x576xbf16>, %[[KV:.+]]: tensor<?x576xf8E4M3FN>, %[[S:.+]]: tensor<1xf32>, %[[QO:.+]]: tensor<?xi32>, %[[KVP:.+]]: tensor<?xi32>)
// CHECK-NOT: mla.decode
// CHECK: %[[ITEMS:.+]], %[[IPTR:.+]] = mla.plan_splits %[[KVP]] {config = #mla.config<kv_tile = 32, heads_per_workgroup = 16, waves_per_workgroup = 4, pipeline_stages = 2, split_policy = uniform, splits = 3, waves_per_row_group = 2>, target = #mla.target<name = "gfx950"{{.*}}>} : tensor<?xi32> -> tensor<?x4xi32>, tensor<?xi32>
// CHECK: %[[PO:.+]], %[[PL:.+]] = mla.partial_decode q(%[[Q]] : tensor<?x16x576xbf16>) kv(%[[KV]] : tensor<?x576xf8E4M3FN>) scale(%[[S]] : tensor<1xf32>) indptr(%[[QO]], %[[KVP]] : tensor<?xi32>, tensor<?xi32>) work(%[[ITEMS]] : tensor<?x4xi32>) {config = #mla.config<kv_tile = 32{{.*}}>, kv_format = #mla.kv_format<fp8>, sm_scale = 1.250000e-01 : f32} -> tensor<?x4x16x512xf32>, tensor<?x4x16xf32>
// CHECK: %[[T:.+]] = tensor.dim %[[Q]], %{{.+}} : tensor<?x16x576xbf16>
// CHECK: %[[O:.+]], %[[L:.+]] = mla.combine partials(%[[PO]], %[[PL]] : tensor<?x4x16x512xf32>, tensor<?x4x16xf32>) indptr(%[[IPTR]], %[[QO]] : tensor<?xi32>, tensor<?xi32>) tokens(%[[T]]) -> tensor<?x16x512xbf16>, tensor<?x16xf32>
// CHECK: return %[[O]], %[[L]]
func.func @fp8(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xf8E4M3FN>, %s: tensor<1xf32>,
               %qo: tensor<?xi32>, %kvp: tensor<?xi32>) -> (tensor<?x16x512xbf16>, tensor<?x16xf32>) {
  // expected-error @+1 {{needs 'mla.target' and 'mla.config' to be split: run mla-select-config first}}
  %o, %l = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xf8E4M3FN>)
             scale(%s : tensor<1xf32>) indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
             {kv_format = #mla.kv_format<fp8>, sm_scale = 0.125 : f32}
             -> tensor<?x16x512xbf16>, tensor<?x16xf32>
  return %o, %l : tensor<?x16x512xbf16>, tensor<?x16xf32>
}

// -----

// Without lse, the combine has a single result.
// CHECK-LABEL: func @bf16_no_lse
// CHECK: mla.combine {{.+}} -> tensor<?x32x512xbf16>{{$}}
func.func @bf16_no_lse(%q: tensor<?x32x576xbf16>, %kv: tensor<?x576xbf16>,
                       %qo: tensor<?xi32>, %kvp: tensor<?xi32>) -> tensor<?x32x512xbf16> {
  // expected-error @+1 {{needs 'mla.target' and 'mla.config' to be split}}
  %o = mla.decode q(%q : tensor<?x32x576xbf16>) kv(%kv : tensor<?x576xbf16>)
         indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
         {kv_format = #mla.kv_format<bf16>} -> tensor<?x32x512xbf16>
  return %o : tensor<?x32x512xbf16>
}

// -----

// A paged cache: the planner balances positions, counted from the page
// table ((pages - 1) * P + last, last clamped into 1..P, 0 without pages);
// the partial decode reads the pages.
// CHECK-LABEL: func @paged
// CHECK-SAME: (%[[Q:.+]]: tensor<?x16x576xbf16>, %[[KV:.+]]: tensor<?x16x576xbf16>, %[[QO:.+]]: tensor<?xi32>, %[[KVP:.+]]: tensor<?xi32>, %[[IDX:.+]]: tensor<?xi32>, %[[LAST:.+]]: tensor<?xi32>)
// CHECK-NOT: tensor.collapse_shape
// CHECK: %[[POS:.+]]:2 = scf.for
// CHECK:   tensor.extract %[[LAST]]
// CHECK:   arith.minsi %{{.+}}, %c16
// CHECK:   arith.muli %{{.+}}, %c16
// CHECK:   arith.select
// CHECK: mla.plan_splits %[[POS]]#0
// CHECK: mla.partial_decode q(%[[Q]] : tensor<?x16x576xbf16>) kv(%[[KV]] : tensor<?x16x576xbf16>) indptr(%[[QO]], %[[KVP]] : tensor<?xi32>, tensor<?xi32>) pages(%[[IDX]], %[[LAST]] : tensor<?xi32>, tensor<?xi32>) work(
func.func @paged(%q: tensor<?x16x576xbf16>, %kv: tensor<?x16x576xbf16>,
                 %qo: tensor<?xi32>, %kvp: tensor<?xi32>, %idx: tensor<?xi32>,
                 %last: tensor<?xi32>) -> tensor<?x16x512xbf16> {
  // expected-error @+1 {{needs 'mla.target' and 'mla.config' to be split}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x16x576xbf16>)
         indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
         pages(%idx, %last : tensor<?xi32>, tensor<?xi32>)
         {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x512xbf16>
  return %o : tensor<?x16x512xbf16>
}

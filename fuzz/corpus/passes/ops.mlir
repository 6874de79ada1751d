// Round trip of mla.decode for every KV format, in the custom and the generic
// form: what is printed parses back to the same op.
// RUN: mla-opt %s --split-input-file | mla-opt --split-input-file | FileCheck %s
// RUN: mla-opt %s --split-input-file --mlir-print-op-generic | mla-opt --split-input-file | FileCheck %s

// CHECK-LABEL: func @bf16_kv
// CHECK: %[[O:.+]] = mla.decode q(%{{.+}} : tensor<?x16x576xbf16>) kv(%{{.+}} : tensor<?x576xbf16>) indptr(%{{.+}}, %{{.+}} : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x512xbf16>
// CHECK-NOT: scale(
// CHECK: return %[[O]]
func.func @bf16_kv(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xbf16>,
                   %qo: tensor<?xi32>, %kvp: tensor<?xi32>) -> tensor<?x16x512xbf16> {
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>)
         indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
         {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x512xbf16>
  return %o : tensor<?x16x512xbf16>
}

// -----

// CHECK-LABEL: func @fp8_kv_with_lse
// CHECK: %[[O:.+]], %[[L:.+]] = mla.decode q({{.+}}) kv(%{{.+}} : tensor<?x576xf8E4M3FN>) scale(%{{.+}} : tensor<1xf32>) indptr({{.+}}) {kv_format = #mla.kv_format<fp8>, sm_scale = 1.250000e-01 : f32} -> tensor<?x128x512xbf16>, tensor<?x128xf32>
// CHECK: return %[[O]], %[[L]]
func.func @fp8_kv_with_lse(%q: tensor<?x128x576xbf16>, %kv: tensor<?x576xf8E4M3FN>,
                           %s: tensor<1xf32>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>)
    -> (tensor<?x128x512xbf16>, tensor<?x128xf32>) {
  %o, %l = mla.decode q(%q : tensor<?x128x576xbf16>) kv(%kv : tensor<?x576xf8E4M3FN>)
             scale(%s : tensor<1xf32>)
             indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
             {kv_format = #mla.kv_format<fp8>, sm_scale = 0.125 : f32}
             -> tensor<?x128x512xbf16>, tensor<?x128xf32>
  return %o, %l : tensor<?x128x512xbf16>, tensor<?x128xf32>
}

// -----

// Static shapes, packed mxfp4 rows and per-32 E8M0 scales, a smaller head dim.
// CHECK-LABEL: func @mxfp4_kv_static
// CHECK: mla.decode q(%{{.+}} : tensor<4x32x256xbf16>) kv(%{{.+}} : tensor<100x128xi8>) scale(%{{.+}} : tensor<100x8xf8E8M0FNU>) indptr(%{{.+}}, %{{.+}} : tensor<3xi32>, tensor<3xi32>) {kv_format = #mla.kv_format<mxfp4>, v_head_dim = 192 : i64} -> tensor<4x32x192xbf16>
func.func @mxfp4_kv_static(%q: tensor<4x32x256xbf16>, %kv: tensor<100x128xi8>,
                           %s: tensor<100x8xf8E8M0FNU>, %qo: tensor<3xi32>,
                           %kvp: tensor<3xi32>) -> tensor<4x32x192xbf16> {
  %o = mla.decode q(%q : tensor<4x32x256xbf16>) kv(%kv : tensor<100x128xi8>)
         scale(%s : tensor<100x8xf8E8M0FNU>)
         indptr(%qo, %kvp : tensor<3xi32>, tensor<3xi32>)
         {kv_format = #mla.kv_format<mxfp4>, v_head_dim = 192}
         -> tensor<4x32x192xbf16>
  return %o : tensor<4x32x192xbf16>
}

// mla-decompose: mla.decode becomes a loop over sequences of upstream ops; no
// mla op remains. Each format dequantizes its own way.
// RUN: mla-opt %s --split-input-file --mla-decompose | FileCheck %s

// CHECK-DAG: #[[QK_Q:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-DAG: #[[QK_K:.+]] = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
// CHECK-DAG: #[[QK_S:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-LABEL: func @bf16_kv
// CHECK-NOT: mla.decode
// CHECK: %[[ZEROS:.+]] = linalg.fill ins(%{{.+}} : bf16) outs(%{{.+}} : tensor<?x16x512xbf16>)
// CHECK: %[[NSEQ:.+]] = arith.subi %{{.+}}, %c1
// CHECK: scf.for %[[SEQ:.+]] = %c0 to %[[NSEQ]] step %c1 iter_args(%[[ACC:.+]] = %[[ZEROS]])
// CHECK:   tensor.extract %{{.+}}[%[[SEQ]]] : tensor<?xi32>
// CHECK:   %[[QROWS:.+]] = tensor.extract_slice %{{.+}}[%[[QB:.+]], 0, 0] [%[[QLEN:.+]], 16, 576] [1, 1, 1]
// CHECK:   %[[ROWS:.+]] = tensor.extract_slice %{{.+}}[%{{.+}}, 0] [%[[KVLEN:.+]], 576] [1, 1]
// CHECK:   %[[K:.+]] = linalg.generic {{.+}} ins(%[[ROWS]] : tensor<?x576xbf16>) outs(%{{.+}} : tensor<?x576xf32>)
// CHECK:     arith.extf %{{.+}} : bf16 to f32
// Scores reduce over Dqk (the last loop).
// CHECK:   %[[S:.+]] = linalg.generic {indexing_maps = [#[[QK_Q]], #[[QK_K]], #[[QK_S]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[QROWS]], %[[K]] : tensor<?x16x576xbf16>, tensor<?x576xf32>)
// Causal mask: visible iff p < kv_len - (q_len - 1) + t.
// CHECK:   %[[QM1:.+]] = arith.subi %[[QLEN]], %c1
// CHECK:   %[[VEND:.+]] = arith.subi %[[KVLEN]], %[[QM1]]
// CHECK:   linalg.generic
// CHECK:     %[[T:.+]] = linalg.index 0
// CHECK:     %[[P:.+]] = linalg.index 2
// CHECK:     %[[END:.+]] = arith.addi %[[VEND]], %[[T]]
// CHECK:     arith.cmpi slt, %[[P]], %[[END]]
// CHECK:   arith.maximumf
// Empty rows are shifted by 0, never by -inf.
// CHECK:   arith.cmpf oeq
// CHECK:   math.exp
// The row sum accumulates in f64.
// CHECK:   arith.extf %{{.+}} : f32 to f64
// P·V over the first 512 columns of the dequantized rows.
// CHECK:   %[[V:.+]] = tensor.extract_slice %[[K]][0, 0] [%[[KVLEN]], 512] [1, 1]
// CHECK:   iterator_types = ["parallel", "parallel", "reduction", "parallel"]} ins(%{{.+}}, %[[V]] :
// CHECK:   arith.divf
// CHECK:   arith.truncf %{{.+}} : f32 to bf16
// CHECK:   tensor.insert_slice %{{.+}} into %[[ACC]][%[[QB]], 0, 0] [%[[QLEN]], 16, 512]
// CHECK:   scf.yield
func.func @bf16_kv(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xbf16>,
                   %qo: tensor<?xi32>, %kvp: tensor<?xi32>) -> tensor<?x16x512xbf16> {
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>)
         indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
         {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x512xbf16>
  return %o : tensor<?x16x512xbf16>
}

// -----

// fp8: a 256-entry exact decode table, times the per-tensor scale; the lse is
// log(sum) + max, and -inf for rows that saw nothing.
// CHECK-LABEL: func @fp8_kv_with_lse
// CHECK: %[[TABLE:.+]] = arith.constant dense<"0x{{[0-9A-F]+}}"> : tensor<256xf32>
// CHECK: %[[SCALE:.+]] = tensor.extract %{{.+}}[%{{.+}}] : tensor<1xf32>
// CHECK: linalg.generic {{.+}} ins(%{{.+}} : tensor<?x576xf8E4M3FN>)
// CHECK:   %[[BITS:.+]] = arith.bitcast %{{.+}} : f8E4M3FN to i8
// CHECK:   %[[IDX:.+]] = arith.index_castui %[[BITS]] : i8 to index
// CHECK:   %[[V:.+]] = tensor.extract %[[TABLE]][%[[IDX]]]
// CHECK:   arith.mulf %[[V]], %[[SCALE]]
// CHECK: math.log
// CHECK: arith.select %{{.+}}, %{{.+}}, %{{.+}} : f32
// CHECK: tensor.insert_slice %{{.+}} into %{{.+}}[%{{.+}}, 0] [%{{.+}}, 128] [1, 1] : tensor<?x128xf32>
func.func @fp8_kv_with_lse(%q: tensor<?x128x576xbf16>, %kv: tensor<?x576xf8E4M3FN>,
                           %s: tensor<1xf32>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>)
    -> (tensor<?x128x512xbf16>, tensor<?x128xf32>) {
  %o, %l = mla.decode q(%q : tensor<?x128x576xbf16>) kv(%kv : tensor<?x576xf8E4M3FN>)
             scale(%s : tensor<1xf32>)
             indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
             {kv_format = #mla.kv_format<fp8>}
             -> tensor<?x128x512xbf16>, tensor<?x128xf32>
  return %o, %l : tensor<?x128x512xbf16>, tensor<?x128xf32>
}

// -----

// mxfp4: element j of a row is nibble j%2 of byte j/2, scaled by block j/32.
// CHECK-DAG: #[[BYTE:.+]] = affine_map<(d0, d1) -> (d0, d1 floordiv 2)>
// CHECK-DAG: #[[BLOCK:.+]] = affine_map<(d0, d1) -> (d0, d1 floordiv 32)>
// CHECK-LABEL: func @mxfp4_kv
// CHECK-DAG: %[[FP4:.+]] = arith.constant dense<[0.000000e+00, 5.000000e-01, 1.000000e+00, 1.500000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00, 6.000000e+00, -0.000000e+00, -5.000000e-01, -1.000000e+00, -1.500000e+00, -2.000000e+00, -3.000000e+00, -4.000000e+00, -6.000000e+00]> : tensor<16xf32>
// CHECK-DAG: %[[E8M0:.+]] = arith.constant dense<"0x{{[0-9A-F]+}}"> : tensor<256xf32>
// CHECK: linalg.generic {indexing_maps = [#[[BYTE]], #[[BLOCK]], #{{.+}}], {{.+}} ins(%{{.+}}, %{{.+}} : tensor<?x144xi8>, tensor<?x9xf8E8M0FNU>) outs(%{{.+}} : tensor<?x288xf32>)
// CHECK:   linalg.index 1
// CHECK:   arith.shrui
// CHECK:   arith.select
// CHECK:   tensor.extract %[[FP4]]
// CHECK:   arith.bitcast %{{.+}} : f8E8M0FNU to i8
// CHECK:   tensor.extract %[[E8M0]]
// CHECK: iterator_types = ["parallel", "parallel", "reduction", "parallel"]} ins(%{{.+}}, %{{.+}} : tensor<?x32x?xf32>, tensor<?x256xf32>)
func.func @mxfp4_kv(%q: tensor<?x32x288xbf16>, %kv: tensor<?x144xi8>,
                    %s: tensor<?x9xf8E8M0FNU>, %qo: tensor<?xi32>,
                    %kvp: tensor<?xi32>) -> tensor<?x32x256xbf16> {
  %o = mla.decode q(%q : tensor<?x32x288xbf16>) kv(%kv : tensor<?x144xi8>)
         scale(%s : tensor<?x9xf8E8M0FNU>)
         indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
         {kv_format = #mla.kv_format<mxfp4>, v_head_dim = 256}
         -> tensor<?x32x256xbf16>
  return %o : tensor<?x32x256xbf16>
}

// -----

// A paged mxfp4 cache: data and scales flattened to rows of the pool, each
// sequence's length from its page count and last page length, each
// position's row from the page table.
// CHECK-LABEL: func @paged_mxfp4
// CHECK: %[[ROWS:.+]] = tensor.collapse_shape %{{.+}} {{\[\[}}0, 1], [2]] : tensor<?x16x288xi8> into tensor<?x288xi8>
// CHECK: %[[SCALES:.+]] = tensor.collapse_shape %{{.+}} {{\[\[}}0, 1], [2]] : tensor<?x16x18xf8E8M0FNU> into tensor<?x18xf8E8M0FNU>
// CHECK: scf.for %[[SEQ:[a-z0-9]+]] =
// CHECK:   tensor.extract %[[LAST:.+]][%[[SEQ]]] : tensor<?xi32>
// CHECK:   linalg.generic
// CHECK:     tensor.extract %[[IDX:.+]][%{{.+}}] : tensor<?xi32>
// CHECK:     %[[ROW:.+]] = arith.addi
// CHECK:     tensor.extract %[[ROWS]][%[[ROW]], %{{.+}}] : tensor<?x288xi8>
// CHECK:     tensor.extract %[[SCALES]][%[[ROW]], %{{.+}}] : tensor<?x18xf8E8M0FNU>
func.func @paged_mxfp4(%q: tensor<?x16x576xbf16>, %kv: tensor<?x16x288xi8>,
                       %s: tensor<?x16x18xf8E8M0FNU>, %qo: tensor<?xi32>,
                       %kvp: tensor<?xi32>, %idx: tensor<?xi32>,
                       %last: tensor<?xi32>) -> tensor<?x16x512xbf16> {
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x16x288xi8>)
         scale(%s : tensor<?x16x18xf8E8M0FNU>)
         indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
         pages(%idx, %last : tensor<?xi32>, tensor<?xi32>)
         {kv_format = #mla.kv_format<mxfp4>} -> tensor<?x16x512xbf16>
  return %o : tensor<?x16x512xbf16>
}

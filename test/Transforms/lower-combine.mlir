// mla-lower-combine: per sequence, weights exp(lse_j - max_j lse_j) over its
// slots, the weighted sum normalized and rounded to bf16, lse = m + log W.
// RUN: mla-opt %s --mla-lower-combine | FileCheck %s

// CHECK-LABEL: func @combine
// CHECK-SAME: (%[[PO:.+]]: tensor<?x4x16x512xf32>, %[[PL:.+]]: tensor<?x4x16xf32>, %[[IPTR:.+]]: tensor<?xi32>, %[[QO:.+]]: tensor<?xi32>, %[[T:.+]]: index)
// CHECK-NOT: mla.combine
// CHECK: %[[OUT0:.+]] = linalg.fill {{.+}} -> tensor<?x16x512xbf16>
// CHECK: %[[LSE0:.+]] = linalg.fill {{.+}} -> tensor<?x16xf32>
// CHECK: scf.for %[[SEQ:.+]] = {{.+}} iter_args(%{{.+}} = %[[OUT0]], %{{.+}} = %[[LSE0]])
// CHECK:   tensor.extract %[[IPTR]][%[[SEQ]]]
// CHECK:   %[[OUTS:.+]] = tensor.extract_slice %[[PO]][%[[FIRST:.+]], 0, 0, 0] [%[[N:.+]], %[[QLEN:.+]], 16, 512]
// CHECK:   %[[LSES:.+]] = tensor.extract_slice %[[PL]][%[[FIRST]], 0, 0] [%[[N]], %[[QLEN]], 16]
// CHECK:   %[[MAX:.+]] = linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[LSES]] :
// CHECK:     arith.maximumf
// CHECK:   %[[W:.+]] = linalg.generic {{.+}} ins(%[[LSES]], %[[MAX]] :
// CHECK:     arith.cmpf oeq
// CHECK:     math.exp
// CHECK:   %[[WSUM:.+]] = linalg.generic {{.+}} ins(%[[W]] :
// CHECK:   %[[MERGED:.+]] = linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "reduction", "parallel"]} ins(%[[W]], %[[OUTS]] :
// CHECK:   linalg.generic {{.+}} ins(%[[MERGED]], %[[WSUM]] :
// CHECK:     arith.divf
// CHECK:     arith.truncf %{{.+}} : f32 to bf16
// CHECK:   math.log
// CHECK:   scf.yield
func.func @combine(%po: tensor<?x4x16x512xf32>, %pl: tensor<?x4x16xf32>, %ip: tensor<?xi32>,
                   %qo: tensor<?xi32>, %t: index) -> (tensor<?x16x512xbf16>, tensor<?x16xf32>) {
  %o, %l = mla.combine partials(%po, %pl : tensor<?x4x16x512xf32>, tensor<?x4x16xf32>)
      indptr(%ip, %qo : tensor<?xi32>, tensor<?xi32>) tokens(%t)
      -> tensor<?x16x512xbf16>, tensor<?x16xf32>
  return %o, %l : tensor<?x16x512xbf16>, tensor<?x16xf32>
}

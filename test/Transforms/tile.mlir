// mla-tile: a loop over work items, inside it a loop over static KV tiles of
// config.kv_tile rows with an online softmax; rows past the item's end are
// clamped on load and masked to -inf.
// RUN: mla-opt %s --mla-tile | FileCheck %s

// CHECK-LABEL: func @partial
// CHECK-NOT: mla.partial_decode
// CHECK: %[[NITEMS:.+]] = tensor.dim %[[ITEMS:.+]], %{{.+}} : tensor<?x4xi32>
// CHECK: %[[PO0:.+]] = linalg.fill {{.+}} -> tensor<?x4x16x512xf32>
// CHECK: %[[PL0:.+]] = linalg.fill {{.+}} -> tensor<?x4x16xf32>
// CHECK: scf.for %[[ITEM:.+]] = %{{.+}} to %[[NITEMS]] step %{{.+}} iter_args(%[[PO:.+]] = %[[PO0]], %[[PL:.+]] = %[[PL0]])
// CHECK:   tensor.extract %[[ITEMS]][%[[ITEM]], %{{.+}}] : tensor<?x4xi32>
// CHECK:   %[[SEQ:.+]] = arith.index_cast
// CHECK:   %[[BEGIN:.+]] = arith.index_cast
// CHECK:   %[[END:.+]] = arith.index_cast
// CHECK:   %[[SLOT:.+]] = arith.index_cast
// The sequence's first cache row; the item's last position bounds every load.
// CHECK:   %[[FIRSTI32:.+]] = tensor.extract %arg3[%[[SEQ]]] : tensor<?xi32>
// CHECK:   %[[FIRST:.+]] = arith.index_cast %[[FIRSTI32]] : i32 to index
// CHECK:   %[[LAST:.+]] = arith.subi %[[END]], %c1
// CHECK:   scf.for %[[T0:.+]] = %[[BEGIN]] to %[[END]] step %c16 iter_args(%[[M:.+]] = %{{.+}}, %[[L:.+]] = %{{.+}}, %[[ACC:.+]] = %{{.+}}) -> (tensor<?x16xf32>, tensor<?x16xf64>, tensor<?x16x512xf32>)
// CHECK:     %[[TILE:.+]] = linalg.generic {{.+}} outs(%{{.+}} : tensor<16x576xf32>)
// CHECK:       %[[CLAMPED:.+]] = arith.minsi %{{.+}}, %[[LAST]] : index
// CHECK:       %[[ROW:.+]] = arith.addi %[[FIRST]], %[[CLAMPED]] : index
// CHECK:       tensor.extract %{{.+}}[%[[ROW]], %{{.+}}] : tensor<?x576xbf16>
// CHECK:       arith.extf %{{.+}} : bf16 to f32
// Scores summed in f64, rounded once to f32.
// CHECK:     %[[SUMS:.+]] = linalg.generic {{.+}} ins(%{{.+}}, %[[TILE]] : tensor<?x16x576xbf16>, tensor<16x576xf32>) outs(%{{.+}} : tensor<?x16x16xf64>)
// CHECK:       arith.mulf %{{.+}}, %{{.+}} : f64
// CHECK:     linalg.generic {{.+}} ins(%[[SUMS]] : tensor<?x16x16xf64>) outs(%{{.+}} : tensor<?x16x16xf32>)
// CHECK:       arith.truncf %{{.+}} : f64 to f32
// Tail mask (pos < end) and causal mask, both.
// CHECK:       %[[POS:.+]] = arith.addi %[[T0]], %{{.+}} : index
// CHECK:       %[[IN:.+]] = arith.cmpi slt, %[[POS]], %[[END]] : index
// CHECK:       %[[CAUSAL:.+]] = arith.cmpi slt, %[[POS]], %{{.+}} : index
// CHECK:       arith.andi %[[IN]], %[[CAUSAL]] : i1
// Running max m' = max(m, max_p s), rescale factor exp(m - m'), probabilities,
// sum and accumulator.
// CHECK:     %[[MNEW:.+]] = linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%{{.+}} : tensor<?x16x16xf32>) outs(%[[M]] : tensor<?x16xf32>)
// CHECK:       arith.maximumf
// CHECK:     %[[ALPHA:.+]] = linalg.generic {{.+}} ins(%[[M]], %[[MNEW]] :
// CHECK:       arith.cmpf oeq
// CHECK:       math.exp
// CHECK:     %[[P:.+]] = linalg.generic {{.+}} ins(%[[MNEW]] :
// CHECK:       math.exp
// The running sum is f64.
// CHECK:     %[[LSCALED:.+]] = linalg.generic {{.+}} ins(%[[L]], %[[ALPHA]] : tensor<?x16xf64>, tensor<?x16xf32>) outs(%{{.+}} : tensor<?x16xf64>)
// CHECK:     %[[LNEW:.+]] = linalg.generic {{.+}} ins(%[[P]] : tensor<?x16x16xf32>) outs(%[[LSCALED]] :
// CHECK:     %[[ASCALED:.+]] = linalg.generic {{.+}} ins(%[[ALPHA]] : tensor<?x16xf32>) outs(%[[ACC]] :
// CHECK:     %[[V:.+]] = tensor.extract_slice %[[TILE]][0, 0] [16, 512] [1, 1]
// CHECK:     %[[ANEW:.+]] = linalg.generic {{.+}} ins(%[[P]], %[[V]] : tensor<?x16x16xf32>, tensor<16x512xf32>) outs(%[[ASCALED]] :
// CHECK:     scf.yield %[[MNEW]], %[[LNEW]], %[[ANEW]]
// Normalize, lse = m + log l, and write the item's slot.
// CHECK:   arith.divf
// CHECK:   math.log
// CHECK:   tensor.insert_slice %{{.+}} into %[[PO]][%[[SLOT]], 0, 0, 0] [1, %{{.+}}, 16, 512]
// CHECK:   tensor.insert_slice %{{.+}} into %[[PL]][%[[SLOT]], 0, 0] [1, %{{.+}}, 16]
func.func @partial(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xbf16>,
                   %qo: tensor<?xi32>, %kvp: tensor<?xi32>, %items: tensor<?x4xi32>)
    -> (tensor<?x4x16x512xf32>, tensor<?x4x16xf32>) {
  %po, %pl = mla.partial_decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) work(%items : tensor<?x4xi32>)
      {kv_format = #mla.kv_format<bf16>,
       config = #mla.config<kv_tile = 16, heads_per_workgroup = 16, waves_per_workgroup = 4,
                            pipeline_stages = 2, split_policy = balanced>}
      -> tensor<?x4x16x512xf32>, tensor<?x4x16xf32>
  return %po, %pl : tensor<?x4x16x512xf32>, tensor<?x4x16xf32>
}

// A paged cache is read as rows of the flattened pool: position p of the
// sequence is row p mod P of page kv_indices[first + p / P], the page id
// clamped into the pool (a bad table never reads outside it).
// CHECK-LABEL: func @paged
// CHECK: %[[ROWS:.+]] = tensor.collapse_shape %[[KV:.+]] {{\[\[}}0, 1], [2]] : tensor<?x16x576xbf16> into tensor<?x576xbf16>
// CHECK: scf.for
// CHECK:   scf.for
// CHECK:     linalg.generic {{.+}} outs(%{{.+}} : tensor<32x576xf32>)
// CHECK:       %[[POS:.+]] = arith.minsi
// CHECK:       %[[PAGE:.+]] = arith.divui %[[POS]], %{{.+}} : index
// CHECK:       %[[ENTRY:.+]] = arith.addi %{{.+}}, %[[PAGE]] : index
// CHECK:       %[[NPAGES:.+]] = tensor.dim %[[KV]], %{{.+}} : tensor<?x16x576xbf16>
// CHECK:       %[[LASTPAGE:.+]] = arith.subi %[[NPAGES]], %{{.+}} : index
// CHECK:       %[[ID:.+]] = tensor.extract %{{.+}}[%[[ENTRY]]] : tensor<?xi32>
// CHECK:       %[[IDX:.+]] = arith.index_cast %[[ID]]
// CHECK:       %[[HI:.+]] = arith.minsi %[[IDX]], %[[LASTPAGE]] : index
// CHECK:       %[[CLAMPED:.+]] = arith.maxsi %[[HI]], %{{.+}} : index
// CHECK:       %[[BASE:.+]] = arith.muli %[[CLAMPED]], %{{.+}} : index
// CHECK:       %[[OFF:.+]] = arith.remui %[[POS]], %{{.+}} : index
// CHECK:       %[[ROW:.+]] = arith.addi %[[BASE]], %[[OFF]] : index
// CHECK:       tensor.extract %[[ROWS]][%[[ROW]], %{{.+}}] : tensor<?x576xbf16>
func.func @paged(%q: tensor<?x16x576xbf16>, %kv: tensor<?x16x576xbf16>,
                 %qo: tensor<?xi32>, %kvp: tensor<?xi32>, %idx: tensor<?xi32>,
                 %last: tensor<?xi32>, %items: tensor<?x4xi32>)
    -> (tensor<?x4x16x512xf32>, tensor<?x4x16xf32>) {
  %po, %pl = mla.partial_decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x16x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) pages(%idx, %last : tensor<?xi32>, tensor<?xi32>)
      work(%items : tensor<?x4xi32>)
      {kv_format = #mla.kv_format<bf16>,
       config = #mla.config<kv_tile = 32, heads_per_workgroup = 16, waves_per_workgroup = 4,
                            pipeline_stages = 2, split_policy = balanced>}
      -> tensor<?x4x16x512xf32>, tensor<?x4x16xf32>
  return %po, %pl : tensor<?x4x16x512xf32>, tensor<?x4x16xf32>
}

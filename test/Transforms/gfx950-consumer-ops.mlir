// A compiler embedding mla lowers its own function: the ops around
// mla.decode come out of the gfx950 pipeline untouched, wired to the lowered
// decode (plan_splits -> partial_decode -> combine, kernels in a gpu.module).
// RUN: mla-opt %s --mla-decode-to-gfx950 | FileCheck %s
// RUN: mla-opt %s --mla-decode-to-gfx950="stop-at=split" | FileCheck %s --check-prefix=SPLIT

func.func private @record_lse(tensor<?x16xf32>)

// CHECK-LABEL: func.func @attention_decode(
// CHECK-SAME:    %[[Q:[^:]+]]: tensor<?x16x576xbf16>, %[[KV:[^:]+]]: tensor<?x576xf8E4M3FN>, %[[S:[^:]+]]: tensor<1xf32>, %[[QO:[^:]+]]: tensor<?xi32>, %[[KVP:[^:]+]]: tensor<?xi32>)
// CHECK:         %[[T:.+]] = arith.constant dense<2.500000e-01> : tensor<1xf32>
// CHECK:         %[[SCALE:.+]] = arith.mulf %[[S]], %[[T]] : tensor<1xf32>
// CHECK:         %[[W:[^ ,]+]], %[[I:[^ ,]+]] = mla.plan_splits %[[KVP]]
// CHECK:         mla.partial_decode q(%[[Q]] : {{.*}}) kv(%[[KV]] : {{.*}}) scale(%[[SCALE]] : {{.*}})
// CHECK-SAME:      mla.kernel = @mla_kernels::@mla_partial_decode
// CHECK:         %[[OUT:[^ ,]+]], %[[LSE:[^ ,]+]] = mla.combine
// CHECK-SAME:      mla.kernel = @mla_kernels::@mla_combine
// CHECK:         call @record_lse(%[[LSE]]) : (tensor<?x16xf32>) -> ()
// CHECK:         %[[NEG:.+]] = arith.negf %[[LSE]] : tensor<?x16xf32>
// CHECK:         return %[[OUT]], %[[NEG]]
// CHECK:       gpu.module @mla_kernels
// CHECK:         llvm.func @mla_partial_decode(
// CHECK:         llvm.func @mla_combine(

// SPLIT:         arith.mulf
// SPLIT:         mla.plan_splits
// SPLIT-NOT:     gpu.module
func.func @attention_decode(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xf8E4M3FN>,
                            %scale: tensor<1xf32>, %qo: tensor<?xi32>,
                            %kvp: tensor<?xi32>)
    -> (tensor<?x16x512xbf16>, tensor<?x16xf32>) {
  %temperature = arith.constant dense<0.25> : tensor<1xf32>
  %s = arith.mulf %scale, %temperature : tensor<1xf32>
  %out, %lse = mla.decode q(%q : tensor<?x16x576xbf16>)
                          kv(%kv : tensor<?x576xf8E4M3FN>)
                          scale(%s : tensor<1xf32>)
                          indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
                          {kv_format = #mla.kv_format<fp8>}
                          -> tensor<?x16x512xbf16>, tensor<?x16xf32>
  call @record_lse(%lse) : (tensor<?x16xf32>) -> ()
  %neg = arith.negf %lse : tensor<?x16xf32>
  return %out, %neg : tensor<?x16x512xbf16>, tensor<?x16xf32>
}

func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xf8E4M3FN>, %scale: tensor<1xf32>, %qo: tensor<?xi32>, %kvi: tensor<?xi32>, %n: index) -> tensor<?x16x512xbf16> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %o0, %l0 = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xf8E4M3FN>) scale(%scale : tensor<1xf32>) indptr(%qo, %kvi : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<fp8>} -> tensor<?x16x512xbf16>, tensor<?x16xf32>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %o0) -> tensor<?x16x512xbf16> {
    %o1, %l1 = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xf8E4M3FN>) scale(%scale : tensor<1xf32>) indptr(%qo, %kvi : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<fp8>} -> tensor<?x16x512xbf16>, tensor<?x16xf32>
    scf.yield %o1 : tensor<?x16x512xbf16>
  }
  return %r : tensor<?x16x512xbf16>
}

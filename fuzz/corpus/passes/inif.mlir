func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xf8E4M3FN>, %scale: tensor<1xf32>, %qo: tensor<?xi32>, %kvi: tensor<?xi32>, %c: i1) -> tensor<?x16x512xbf16> {
  %r = scf.if %c -> tensor<?x16x512xbf16> {
    %o1, %l1 = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xf8E4M3FN>) scale(%scale : tensor<1xf32>) indptr(%qo, %kvi : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<fp8>} -> tensor<?x16x512xbf16>, tensor<?x16xf32>
    scf.yield %o1 : tensor<?x16x512xbf16>
  } else {
    %o2, %l2 = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xf8E4M3FN>) scale(%scale : tensor<1xf32>) indptr(%qo, %kvi : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<fp8>} -> tensor<?x16x512xbf16>, tensor<?x16xf32>
    scf.yield %o2 : tensor<?x16x512xbf16>
  }
  return %r : tensor<?x16x512xbf16>
}

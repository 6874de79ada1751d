// mla.decode on a bf16 KV cache: 16 heads, the DeepSeek latent widths
// (Dqk = 576, Dv = 512), any number of tokens and sequences, and the
// log-sum-exp as a second result. The gfx950 kernels run bf16 MFMAs on it.
func.func @decode_bf16(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xbf16>,
                       %qo_indptr: tensor<?xi32>, %kv_indptr: tensor<?xi32>)
    -> (tensor<?x16x512xbf16>, tensor<?x16xf32>) {
  %out, %lse = mla.decode q(%q : tensor<?x16x576xbf16>)
                          kv(%kv : tensor<?x576xbf16>)
                          indptr(%qo_indptr, %kv_indptr : tensor<?xi32>, tensor<?xi32>)
                          {kv_format = #mla.kv_format<bf16>}
                          -> tensor<?x16x512xbf16>, tensor<?x16xf32>
  return %out, %lse : tensor<?x16x512xbf16>, tensor<?x16xf32>
}

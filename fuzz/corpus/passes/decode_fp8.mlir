// mla.decode on an fp8 e4m3 KV cache with a per-tensor scale: 16 heads, the
// DeepSeek latent widths (Dqk = 576, Dv = 512), any number of tokens and
// sequences, and the log-sum-exp as a second result.
func.func @decode_fp8(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xf8E4M3FN>,
                      %scale: tensor<1xf32>, %qo_indptr: tensor<?xi32>,
                      %kv_indptr: tensor<?xi32>)
    -> (tensor<?x16x512xbf16>, tensor<?x16xf32>) {
  %out, %lse = mla.decode q(%q : tensor<?x16x576xbf16>)
                          kv(%kv : tensor<?x576xf8E4M3FN>)
                          scale(%scale : tensor<1xf32>)
                          indptr(%qo_indptr, %kv_indptr : tensor<?xi32>, tensor<?xi32>)
                          {kv_format = #mla.kv_format<fp8>}
                          -> tensor<?x16x512xbf16>, tensor<?x16xf32>
  return %out, %lse : tensor<?x16x512xbf16>, tensor<?x16xf32>
}

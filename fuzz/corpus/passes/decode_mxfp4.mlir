// mla.decode on an mxfp4 KV cache: E2M1 values packed two per byte (the low
// nibble holds the even element) and one E8M0 scale per 32 elements; 16
// heads, the DeepSeek latent widths (Dqk = 576, Dv = 512), any number of
// tokens and sequences, and the log-sum-exp as a second result. The gfx950
// kernels feed the packed K and its scales to v_mfma_scale_f32_16x16x128.
func.func @decode_mxfp4(%q: tensor<?x16x576xbf16>, %kv: tensor<?x288xi8>,
                        %scale: tensor<?x18xf8E8M0FNU>, %qo_indptr: tensor<?xi32>,
                        %kv_indptr: tensor<?xi32>)
    -> (tensor<?x16x512xbf16>, tensor<?x16xf32>) {
  %out, %lse = mla.decode q(%q : tensor<?x16x576xbf16>)
                          kv(%kv : tensor<?x288xi8>)
                          scale(%scale : tensor<?x18xf8E8M0FNU>)
                          indptr(%qo_indptr, %kv_indptr : tensor<?xi32>, tensor<?xi32>)
                          {kv_format = #mla.kv_format<mxfp4>}
                          -> tensor<?x16x512xbf16>, tensor<?x16xf32>
  return %out, %lse : tensor<?x16x512xbf16>, tensor<?x16xf32>
}

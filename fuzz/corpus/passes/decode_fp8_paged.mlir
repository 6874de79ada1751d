// mla.decode on a paged fp8 e4m3 KV cache: a pool of pages of 64 rows
// ([num_pages, 64, 576]), kv_indptr counting each sequence's pages, their
// ids in kv_indices and the rows used in each last page in
// kv_last_page_len; 16 heads, the DeepSeek latent widths, the log-sum-exp
// as a second result.
func.func @decode_fp8_paged(%q: tensor<?x16x576xbf16>,
                            %kv: tensor<?x64x576xf8E4M3FN>,
                            %scale: tensor<1xf32>, %qo_indptr: tensor<?xi32>,
                            %kv_indptr: tensor<?xi32>,
                            %kv_indices: tensor<?xi32>,
                            %kv_last_page_len: tensor<?xi32>)
    -> (tensor<?x16x512xbf16>, tensor<?x16xf32>) {
  %out, %lse = mla.decode q(%q : tensor<?x16x576xbf16>)
                          kv(%kv : tensor<?x64x576xf8E4M3FN>)
                          scale(%scale : tensor<1xf32>)
                          indptr(%qo_indptr, %kv_indptr : tensor<?xi32>, tensor<?xi32>)
                          pages(%kv_indices, %kv_last_page_len : tensor<?xi32>, tensor<?xi32>)
                          {kv_format = #mla.kv_format<fp8>}
                          -> tensor<?x16x512xbf16>, tensor<?x16xf32>
  return %out, %lse : tensor<?x16x512xbf16>, tensor<?x16xf32>
}

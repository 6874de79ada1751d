// Every malformed mla.decode is rejected with its own message, one case per
// split. Cases marked ODS are caught by the operand/result type constraints.
// RUN: mla-opt %s --split-input-file --verify-diagnostics

// q of rank 2
func.func @f(%q: tensor<?x576xbf16>, %kv: tensor<?x576xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{q must have rank 3 [T, H, Dqk], got rank 2}}
  %o = mla.decode q(%q : tensor<?x576xbf16>) kv(%kv : tensor<?x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x512xbf16>
  return
}

// -----

// q head dims dynamic
func.func @f(%q: tensor<?x?x576xbf16>, %kv: tensor<?x576xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{q head dimensions H and Dqk must be static, got [?, ?, 576]}}
  %o = mla.decode q(%q : tensor<?x?x576xbf16>) kv(%kv : tensor<?x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x512xbf16>
  return
}

// -----

// q not bf16 (ODS type constraint)
func.func @f(%q: tensor<?x16x576xf16>, %kv: tensor<?x576xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of bfloat16 type values}}
  %o = mla.decode q(%q : tensor<?x16x576xf16>) kv(%kv : tensor<?x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x512xbf16>
  return
}

// -----

// H not a multiple of 16
func.func @f(%q: tensor<?x24x576xbf16>, %kv: tensor<?x576xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{number of heads H = 24 must be a positive multiple of 16}}
  %o = mla.decode q(%q : tensor<?x24x576xbf16>) kv(%kv : tensor<?x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<bf16>} -> tensor<?x24x512xbf16>
  return
}

// -----

// H above 128
func.func @f(%q: tensor<?x144x576xbf16>, %kv: tensor<?x576xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{number of heads H = 144 exceeds 128}}
  %o = mla.decode q(%q : tensor<?x144x576xbf16>) kv(%kv : tensor<?x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<bf16>} -> tensor<?x144x512xbf16>
  return
}

// -----

// Dqk not a multiple of 32
func.func @f(%q: tensor<?x16x100xbf16>, %kv: tensor<?x100xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{q/k head dim Dqk = 100 must be a positive multiple of 32}}
  %o = mla.decode q(%q : tensor<?x16x100xbf16>) kv(%kv : tensor<?x100xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<bf16>, v_head_dim = 64} -> tensor<?x16x64xbf16>
  return
}

// -----

// Dv not a multiple of 32
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{v_head_dim = 500 must be a positive multiple of 32}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<bf16>, v_head_dim = 500} -> tensor<?x16x500xbf16>
  return
}

// -----

// Dv larger than Dqk
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{v_head_dim = 608 exceeds the q/k head dim Dqk = 576}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<bf16>, v_head_dim = 608} -> tensor<?x16x608xbf16>
  return
}

// -----

// negative sm_scale
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{sm_scale must be a positive finite number, got -1}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<bf16>, sm_scale = -1.0 : f32} -> tensor<?x16x512xbf16>
  return
}

// -----

// kv of rank 3
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x1x576xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{kv must have rank 2 [N, row width] (rank 3 [num_pages, P, row width] with pages(...)), got rank 3}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x1x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x512xbf16>
  return
}

// -----

// fp8 format with a bf16 cache
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xbf16>, %s: tensor<1xf32>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{kv_format fp8 requires kv elements of type 'f8E4M3FN', got 'bf16'}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>) scale(%s : tensor<1xf32>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<fp8>} -> tensor<?x16x512xbf16>
  return
}

// -----

// bf16 format with an fp8 cache
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xf8E4M3FN>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{kv_format bf16 requires kv elements of type 'bf16', got 'f8E4M3FN'}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xf8E4M3FN>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x512xbf16>
  return
}

// -----

// mxfp4 format with unpacked f8 rows
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xf8E4M3FN>, %s: tensor<?x18xf8E8M0FNU>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{kv_format mxfp4 requires kv elements of type 'i8', got 'f8E4M3FN'}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xf8E4M3FN>) scale(%s : tensor<?x18xf8E8M0FNU>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<mxfp4>} -> tensor<?x16x512xbf16>
  return
}

// -----

// q width differs from kv width
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x512xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{kv row width [?, 512] does not match q head dim Dqk = 576}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x512xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x512xbf16>
  return
}

// -----

// mxfp4 rows not Dqk/2 bytes
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xi8>, %s: tensor<?x18xf8E8M0FNU>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{mxfp4 kv rows must hold Dqk/2 = 288 packed bytes, got [?, 576]}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xi8>) scale(%s : tensor<?x18xf8E8M0FNU>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<mxfp4>} -> tensor<?x16x512xbf16>
  return
}

// -----

// scale given for bf16
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xbf16>, %s: tensor<1xf32>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{kv_format bf16 takes no kv_scale operand}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>) scale(%s : tensor<1xf32>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x512xbf16>
  return
}

// -----

// scale missing for fp8
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xf8E4M3FN>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{kv_format fp8 requires a kv_scale operand of type tensor<1xf32>}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xf8E4M3FN>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<fp8>} -> tensor<?x16x512xbf16>
  return
}

// -----

// scale missing for mxfp4
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x288xi8>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{kv_format mxfp4 requires a kv_scale operand of f8E8M0FNU [N, Dqk/32]}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x288xi8>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<mxfp4>} -> tensor<?x16x512xbf16>
  return
}

// -----

// fp8 scale of the wrong shape
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xf8E4M3FN>, %s: tensor<2xf32>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{fp8 kv_scale must be tensor<1xf32>, got 'tensor<2xf32>'}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xf8E4M3FN>) scale(%s : tensor<2xf32>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<fp8>} -> tensor<?x16x512xbf16>
  return
}

// -----

// fp8 scale given per block
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xf8E4M3FN>, %s: tensor<?x18xf8E8M0FNU>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{fp8 kv_scale must be tensor<1xf32>, got 'tensor<?x18xf8E8M0FNU>'}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xf8E4M3FN>) scale(%s : tensor<?x18xf8E8M0FNU>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<fp8>} -> tensor<?x16x512xbf16>
  return
}

// -----

// mxfp4 scale as f32
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x288xi8>, %s: tensor<?x18xf32>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{mxfp4 kv_scale elements must be f8E8M0FNU, got 'f32'}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x288xi8>) scale(%s : tensor<?x18xf32>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<mxfp4>} -> tensor<?x16x512xbf16>
  return
}

// -----

// mxfp4 scale blocks of 16
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x288xi8>, %s: tensor<?x36xf8E8M0FNU>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{mxfp4 kv_scale must have shape [N, Dqk/32] = [?, 18], got [?, 36]}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x288xi8>) scale(%s : tensor<?x36xf8E8M0FNU>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<mxfp4>} -> tensor<?x16x512xbf16>
  return
}

// -----

// mxfp4 scale rows differ from kv rows
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<10x288xi8>, %s: tensor<12x18xf8E8M0FNU>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{mxfp4 kv_scale must have shape [N, Dqk/32] = [10, 18], got [12, 18]}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<10x288xi8>) scale(%s : tensor<12x18xf8E8M0FNU>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<mxfp4>} -> tensor<?x16x512xbf16>
  return
}

// -----

// indptr of rank 2
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xbf16>, %qo: tensor<?x1xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{qo_indptr must be 1-D [B+1], got rank 2}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>)
      indptr(%qo, %kvp : tensor<?x1xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x512xbf16>
  return
}

// -----

// indptr of i64 (ODS type constraint)
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi64>) {
  // expected-error @+1 {{operand #3 must be ranked tensor of 32-bit signless integer values}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi64>) {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x512xbf16>
  return
}

// -----

// indptrs of different lengths
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xbf16>, %qo: tensor<3xi32>, %kvp: tensor<5xi32>) {
  // expected-error @+1 {{qo_indptr and kv_indptr must have the same length B+1, got 3 and 5}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>)
      indptr(%qo, %kvp : tensor<3xi32>, tensor<5xi32>) {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x512xbf16>
  return
}

// -----

// indptr with no sequence
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xbf16>, %qo: tensor<1xi32>, %kvp: tensor<1xi32>) {
  // expected-error @+1 {{indptrs must hold B+1 >= 2 entries, got 1}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>)
      indptr(%qo, %kvp : tensor<1xi32>, tensor<1xi32>) {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x512xbf16>
  return
}

// -----

// out with the wrong width
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{out must have shape [T, H, Dv] = [?, 16, 512], got [?, 16, 576]}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x576xbf16>
  return
}

// -----

// out with a different token count
func.func @f(%q: tensor<8x16x576xbf16>, %kv: tensor<?x576xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{out must have shape [T, H, Dv] = [8, 16, 512], got [4, 16, 512]}}
  %o = mla.decode q(%q : tensor<8x16x576xbf16>) kv(%kv : tensor<?x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<bf16>} -> tensor<4x16x512xbf16>
  return
}

// -----

// out not bf16 (ODS type constraint)
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{result #0 must be ranked tensor of bfloat16 type values}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x512xf32>
  return
}

// -----

// lse with a head dim
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{lse must have shape [T, H] = [?, 16], got [?, 16, 1]}}
  %o, %l = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x512xbf16>, tensor<?x16x1xf32>
  return
}

// -----

// lse not f32 (ODS type constraint)
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{result #1 must be ranked tensor of 32-bit float values}}
  %o, %l = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x512xbf16>, tensor<?x16xbf16>
  return
}

// -----

// kv_format is required.
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{requires attribute 'kv_format'}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) -> tensor<?x16x512xbf16>
  return
}

// -----

// An unknown format name is a parse error.
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+3 {{expected ::mla::KVFormat to be one of: bf16, fp8, mxfp4}}
  // expected-error @+2 {{failed to parse MLA_KVFormatAttr parameter 'value'}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) {kv_format = #mla.kv_format<int4>} -> tensor<?x16x512xbf16>
  return
}

// -----

// a page table with a contiguous cache
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>, %idx: tensor<?xi32>, %last: tensor<?xi32>) {
  // expected-error @+1 {{a paged kv must have rank 3 [num_pages, P, row width], got rank 2}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) pages(%idx, %last : tensor<?xi32>, tensor<?xi32>)
      {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x512xbf16>
  return
}

// -----

// a page size that is not a power of two
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x48x576xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>, %idx: tensor<?xi32>, %last: tensor<?xi32>) {
  // expected-error @+1 {{page size P = kv's dimension 1 must be a static power of two in 1..256, got [?, 48, 576]}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x48x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) pages(%idx, %last : tensor<?xi32>, tensor<?xi32>)
      {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x512xbf16>
  return
}

// -----

// a dynamic page size
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x?x576xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>, %idx: tensor<?xi32>, %last: tensor<?xi32>) {
  // expected-error @+1 {{page size P = kv's dimension 1 must be a static power of two in 1..256, got [?, ?, 576]}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x?x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) pages(%idx, %last : tensor<?xi32>, tensor<?xi32>)
      {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x512xbf16>
  return
}

// -----

// pages of 512 rows
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x512x576xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>, %idx: tensor<?xi32>, %last: tensor<?xi32>) {
  // expected-error @+1 {{page size P = kv's dimension 1 must be a static power of two in 1..256, got [?, 512, 576]}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x512x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) pages(%idx, %last : tensor<?xi32>, tensor<?xi32>)
      {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x512xbf16>
  return
}

// -----

// a 2-D page table
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x16x576xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>, %idx: tensor<?x2xi32>, %last: tensor<?xi32>) {
  // expected-error @+1 {{kv_indices must be 1-D}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x16x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) pages(%idx, %last : tensor<?x2xi32>, tensor<?xi32>)
      {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x512xbf16>
  return
}

// -----

// paged mxfp4 with contiguous scales
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x16x288xi8>, %s: tensor<?x18xf8E8M0FNU>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>, %idx: tensor<?xi32>, %last: tensor<?xi32>) {
  // expected-error @+1 {{mxfp4 kv_scale must have shape [num_pages, P, Dqk/32] = [?, 16, 18], got [?, 18]}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x16x288xi8>) scale(%s : tensor<?x18xf8E8M0FNU>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) pages(%idx, %last : tensor<?xi32>, tensor<?xi32>)
      {kv_format = #mla.kv_format<mxfp4>} -> tensor<?x16x512xbf16>
  return
}

// -----

// page ids of i64
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x16x576xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>, %idx: tensor<?xi64>, %last: tensor<?xi32>) {
  // expected-error @+1 {{operand #4 must be ranked tensor of 32-bit signless integer values}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x16x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) pages(%idx, %last : tensor<?xi64>, tensor<?xi32>)
      {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x512xbf16>
  return
}

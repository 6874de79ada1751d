// Malformed configs, targets and split-level ops, one case per split: every
// config error mla-select-config can report is also caught on hand-written IR.
// RUN: mla-opt %s --split-input-file --verify-diagnostics

func.func @f() attributes {
  // expected-error @+1 {{kv_tile = 48 must be a positive power of two}}
  x = #mla.config<kv_tile = 48, heads_per_workgroup = 16, waves_per_workgroup = 4, pipeline_stages = 2, split_policy = balanced>
} {
  return
}

// -----

func.func @f() attributes {
  // expected-error @+1 {{balanced split_policy chooses the splits itself; got splits = 3}}
  x = #mla.config<kv_tile = 64, heads_per_workgroup = 16, waves_per_workgroup = 4, pipeline_stages = 2, split_policy = balanced, splits = 3>
} {
  return
}

// -----

func.func @f() attributes {
  // expected-error @+1 {{compute_units, xcds and wave_size must be positive}}
  x = #mla.target<name = "x", arch = "gfx950", compute_units = 0, xcds = 1, wave_size = 64, lds_bytes = 0, vector_registers = 0, hbm_gbps = 0, matrix_instructions = []>
} {
  return
}

// -----

func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{'mla.config' needs an 'mla.target' beside it}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
      {kv_format = #mla.kv_format<bf16>,
       mla.config = #mla.config<kv_tile = 64, heads_per_workgroup = 16, waves_per_workgroup = 4, pipeline_stages = 2, split_policy = balanced>}
      -> tensor<?x16x512xbf16>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{'mla.config' configures mla.decode ops only}}
  %c = arith.constant {mla.config = #mla.config<kv_tile = 64, heads_per_workgroup = 16, waves_per_workgroup = 4, pipeline_stages = 2, split_policy = balanced>} 0 : i32
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{unknown mla attribute 'mla.tile'}}
  %c = arith.constant {mla.tile = 4} 0 : i32
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{'mla.lhs_exp2' must be an integer in -127..127 on a vector.contract}}
  %c = arith.constant {mla.lhs_exp2 = -4 : i64} 0 : i32
  return
}

// -----

func.func @f(%a: vector<16x64xf8E4M3FN>, %b: vector<64x16xf8E4M3FN>, %c: vector<16x16xf32>) -> vector<16x16xf32> {
  // expected-error @+1 {{'mla.lhs_exp2' must be an integer in -127..127 on a vector.contract}}
  %r = vector.contract {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %a, %b, %c {mla.lhs_exp2 = 200 : i64} : vector<16x64xf8E4M3FN>, vector<64x16xf8E4M3FN> into vector<16x16xf32>
  return %r : vector<16x16xf32>
}

// -----

// A hand-written config is checked against the target beside it with the
// partial kernel's plan: fp8 rows of 576 bytes, 2 stages of 64 rows = 73728
// bytes, plus P and row factors (8448) = 82176 > 65536.
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xf8E4M3FN>, %s: tensor<1xf32>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{config needs 82176 bytes of LDS (2 stages x 64 kv rows: kv_tiles 73728 p 8192 row_factors 256), target small has 65536}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xf8E4M3FN>) scale(%s : tensor<1xf32>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
      {kv_format = #mla.kv_format<fp8>,
       mla.config = #mla.config<kv_tile = 64, heads_per_workgroup = 16, waves_per_workgroup = 4, pipeline_stages = 2, split_policy = balanced>,
       mla.target = #mla.target<name = "small", arch = "gfx950", compute_units = 8, xcds = 1, wave_size = 64, lds_bytes = 65536, vector_registers = 512, hbm_gbps = 100, matrix_instructions = []>}
      -> tensor<?x16x512xbf16>
  return
}

// -----

// Found by fuzzing (fuzz/corpus/mlir): a config on a decode without its
// kv_format made the config check read the missing attribute; the op's own
// error is reported instead.
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{requires attribute 'kv_format'}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
      {mla.config = #mla.config<kv_tile = 64, heads_per_workgroup = 16, waves_per_workgroup = 4, pipeline_stages = 2, split_policy = balanced>,
       mla.target = #mla.target<name = "small", arch = "gfx950", compute_units = 8, xcds = 1, wave_size = 64, lds_bytes = 65536, vector_registers = 512, hbm_gbps = 100, matrix_instructions = []>}
      -> tensor<?x16x512xbf16>
  return
}

// -----

func.func @f(%kvp: tensor<?xi32>) {
  // expected-error @+1 {{work_items must have shape [num_items, 4], got [?, 3]}}
  %i, %p = mla.plan_splits %kvp {
      config = #mla.config<kv_tile = 64, heads_per_workgroup = 16, waves_per_workgroup = 4, pipeline_stages = 2, split_policy = balanced>,
      target = #mla.target<name = "x", arch = "host", compute_units = 1, xcds = 1, wave_size = 1, lds_bytes = 0, vector_registers = 0, hbm_gbps = 0, matrix_instructions = []>}
      : tensor<?xi32> -> tensor<?x3xi32>, tensor<?xi32>
  return
}

// -----

func.func @f(%kvp: tensor<5xi32>) {
  // expected-error @+1 {{item_indptr must have the shape of kv_indptr [B+1], got [4]}}
  %i, %p = mla.plan_splits %kvp {
      config = #mla.config<kv_tile = 64, heads_per_workgroup = 16, waves_per_workgroup = 4, pipeline_stages = 2, split_policy = balanced>,
      target = #mla.target<name = "x", arch = "host", compute_units = 1, xcds = 1, wave_size = 1, lds_bytes = 0, vector_registers = 0, hbm_gbps = 0, matrix_instructions = []>}
      : tensor<5xi32> -> tensor<?x4xi32>, tensor<4xi32>
  return
}

// -----

func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>, %w: tensor<?x4xi32>) {
  // expected-error @+1 {{partial_out must have shape [num_items, 4, H, Dv] = [?, 4, 16, 512], got [?, 1, 16, 512]}}
  %po, %pl = mla.partial_decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) work(%w : tensor<?x4xi32>)
      {kv_format = #mla.kv_format<bf16>,
       config = #mla.config<kv_tile = 64, heads_per_workgroup = 16, waves_per_workgroup = 4, pipeline_stages = 2, split_policy = balanced>}
      -> tensor<?x1x16x512xf32>, tensor<?x4x16xf32>
  return
}

// -----

// partial_decode shares mla.decode's operand checks.
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xf8E4M3FN>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>, %w: tensor<?x4xi32>) {
  // expected-error @+1 {{kv_format fp8 requires a kv_scale operand of type tensor<1xf32>}}
  %po, %pl = mla.partial_decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xf8E4M3FN>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) work(%w : tensor<?x4xi32>)
      {kv_format = #mla.kv_format<fp8>,
       config = #mla.config<kv_tile = 64, heads_per_workgroup = 16, waves_per_workgroup = 4, pipeline_stages = 2, split_policy = balanced>}
      -> tensor<?x4x16x512xf32>, tensor<?x4x16xf32>
  return
}

// -----

func.func @f(%po: tensor<?x16x512xf32>, %pl: tensor<?x4x16xf32>, %ip: tensor<?xi32>, %qo: tensor<?xi32>, %t: index) {
  // expected-error @+1 {{partial_out must have shape [num_items, 4, H, Dv], got [?, 16, 512]}}
  %o = mla.combine partials(%po, %pl : tensor<?x16x512xf32>, tensor<?x4x16xf32>)
      indptr(%ip, %qo : tensor<?xi32>, tensor<?xi32>) tokens(%t) -> tensor<?x16x512xbf16>
  return
}

// -----

func.func @f(%po: tensor<?x4x16x512xf32>, %pl: tensor<?x4x16xf32>, %ip: tensor<?xi32>, %qo: tensor<?xi32>, %t: index) {
  // expected-error @+1 {{out must have shape [T, H, Dv] = [?, 16, 512], got [?, 32, 512]}}
  %o = mla.combine partials(%po, %pl : tensor<?x4x16x512xf32>, tensor<?x4x16xf32>)
      indptr(%ip, %qo : tensor<?xi32>, tensor<?xi32>) tokens(%t) -> tensor<?x32x512xbf16>
  return
}

// -----

func.func @f(%po: tensor<?x4x16x512xf32>, %pl: tensor<?x4x16xf32>, %ip: tensor<3xi32>, %qo: tensor<4xi32>, %t: index) {
  // expected-error @+1 {{item_indptr and qo_indptr must both be [B+1]}}
  %o = mla.combine partials(%po, %pl : tensor<?x4x16x512xf32>, tensor<?x4x16xf32>)
      indptr(%ip, %qo : tensor<3xi32>, tensor<4xi32>) tokens(%t) -> tensor<?x16x512xbf16>
  return
}

// -----

func.func @f() attributes {
  // expected-error @+1 {{uniform split_policy needs splits >= 1, got splits = 0}}
  x = #mla.config<kv_tile = 64, heads_per_workgroup = 16, waves_per_workgroup = 4, pipeline_stages = 2, split_policy = uniform, splits = 0>
} {
  return
}

// -----

// More items per sequence than the combine merges: refused here, before a
// plan sizes buffers for them.
func.func @f() attributes {
  // expected-error @+1 {{splits = 65 exceeds the combine's fan-in of 64 work items per sequence}}
  x = #mla.config<kv_tile = 64, heads_per_workgroup = 16, waves_per_workgroup = 4, pipeline_stages = 2, split_policy = uniform, splits = 65>
} {
  return
}

// -----

func.func @f() attributes {
  // expected-error @+1 {{heads_per_workgroup = 24 must be a positive multiple of 16}}
  x = #mla.config<kv_tile = 64, heads_per_workgroup = 24, waves_per_workgroup = 4, pipeline_stages = 2, split_policy = balanced>
} {
  return
}

// -----

func.func @f() attributes {
  // expected-error @+1 {{pipeline_stages = 0 must be at least 1}}
  x = #mla.config<kv_tile = 64, heads_per_workgroup = 16, waves_per_workgroup = 4, pipeline_stages = 0, split_policy = balanced>
} {
  return
}

// -----

func.func @f() attributes {
  // expected-error @+1 {{waves_per_workgroup = 0 must be positive}}
  x = #mla.config<kv_tile = 64, heads_per_workgroup = 16, waves_per_workgroup = 0, pipeline_stages = 2, split_policy = balanced>
} {
  return
}

// -----

// Head grouping and workgroup size are checked against the op and the target.
func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{heads_per_workgroup = 32 does not divide H = 16}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
      {kv_format = #mla.kv_format<bf16>,
       mla.config = #mla.config<kv_tile = 32, heads_per_workgroup = 32, waves_per_workgroup = 4, pipeline_stages = 2, split_policy = balanced>,
       mla.target = #mla.target<name = "gfx950", arch = "gfx950", compute_units = 256, xcds = 8, wave_size = 64, lds_bytes = 163840, vector_registers = 512, hbm_gbps = 8000, matrix_instructions = []>}
      -> tensor<?x16x512xbf16>
  return
}

// -----

func.func @f(%q: tensor<?x16x576xbf16>, %kv: tensor<?x576xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>) {
  // expected-error @+1 {{waves_per_workgroup = 32 gives 2048 threads, more than 1024}}
  %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>)
      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
      {kv_format = #mla.kv_format<bf16>,
       mla.config = #mla.config<kv_tile = 32, heads_per_workgroup = 16, waves_per_workgroup = 32, pipeline_stages = 2, split_policy = balanced>,
       mla.target = #mla.target<name = "gfx950", arch = "gfx950", compute_units = 256, xcds = 8, wave_size = 64, lds_bytes = 163840, vector_registers = 512, hbm_gbps = 8000, matrix_instructions = []>}
      -> tensor<?x16x512xbf16>
  return
}

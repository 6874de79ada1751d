//===- Passes.td - mla pass definitions --------------------*- tablegen -*-===//
//
// Every pass of the mla pipelines, declared once; `mla-opt --help` lists them.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TRANSFORMS_PASSES_TD
#define MLA_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MLADecomposePass : Pass<"mla-decompose"> {
  let summary = "Rewrite mla.decode into upstream linalg/tensor/scf/arith/math ops";
  let description = [{
    The reference lowering of `mla.decode` (used by the `cpu` backend): a loop
    over sequences that, for each one, slices its query tokens and cache rows
    out of the indptr ranges, dequantizes the rows to f32 (fp8: value * scale;
    mxfp4: e2m1 * 2^(e8m0 - 127), both through exact lookup tables), computes
    the scaled scores Q·Kᵀ over all Dqk columns, applies the causal rule for
    1..4 query tokens, a max-subtracted softmax, P·V over the first Dv
    columns, and writes the bf16 output and the optional lse. Tokens that see
    no cache position get zeros and lse = -inf (no 0/0).

    Before:

    ```mlir
    %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>)
           indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
           {kv_format = #mla.kv_format<bf16>} -> tensor<?x16x512xbf16>
    ```

    After (abridged):

    ```mlir
    %r:2 = scf.for %b = %c0 to %B step %c1 iter_args(%o = %zeros, %l = %ninf) {
      %qs = tensor.extract_slice %q[%q0, 0, 0] [%qlen, 16, 576] [1, 1, 1]
      %k  = linalg.generic ... // dequantize rows [%k0, %k1) to f32
      %s  = linalg.generic ... // scores, reduction over Dqk
      ...                      // mask, max, exp, sum, P·V, normalize
      %o2 = tensor.insert_slice %tile into %o[%q0, 0, 0] ...
      scf.yield %o2, %l2
    }
    ```

    No mla op remains afterwards.
  }];
  let dependentDialects = [
    "mlir::arith::ArithDialect", "mlir::linalg::LinalgDialect",
    "mlir::math::MathDialect", "mlir::scf::SCFDialect",
    "mlir::tensor::TensorDialect"
  ];
}

def MLASelectConfigPass : Pass<"mla-select-config"> {
  let summary = "Attach the target and a tuning config to every mla.decode";
  let description = [{
    Looks the chip up in the target table (`mla::lookupTarget`), writes it as
    `mla.target = #mla.target<...>` and chooses `mla.config = #mla.config<...>`
    for each `mla.decode`. Every field can be forced from the command line;
    a forced or chosen config that the target cannot run (LDS over budget,
    head grouping that does not divide H, a non-power-of-two tile,
    `splits=0`) is an error on the op.

    Defaults: `kv_tile` 64, halved on gfx950 until the partial kernel's
    stages fit the LDS (bf16 from H = 48: 32); on gfx950 128 for mxfp4 where
    its four waves share one row group (H = 16); `heads_per_workgroup`
    H (one block of all heads: the rows pack densely); `waves_per_workgroup` 4 (256 threads) on gfx950, 1 on the host;
    `rows_per_wave` on gfx950 32 for fp8 and bf16 where heads_per_workgroup is a
    multiple of 32 (on a contiguous cache or pages of at least a tile),
    else 16; `waves_per_row_group` on gfx950 4 / (heads_per_workgroup /
    rows_per_wave), at least 1 (a token's rows fill the waves at q_len 1;
    at least 2 for 32-row groups), as far as kv_tile and Dv split into
    multiples of 16; 1 on the host;
    `pipeline_stages` 2 on gfx950, 1 on the host; `split_policy = balanced`.
    On sm_90a: 8 warps (`waves_per_workgroup`) serving 16 rows, 16 warps
    serving 32 (`rows_per_wave`) where a sequence's query tokens have that
    many rows (heads_per_workgroup x `query-tokens`), for fp8 from 64, for
    bf16 and mxfp4 from 32 (unless a forced kv_tile under 32 or warp count
    rules it out); 2 stages; the largest kv_tile whose stages fit two
    16-row blocks an SM, or one 32-row block. `query-tokens` (1..4) only
    chooses: the kernels take every q_len from 1 to 4.

    Before:

    ```mlir
    %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xf8E4M3FN>) ...
    ```

    After `--mla-select-config="target=gfx950 splits=4"`:

    ```mlir
    %o = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xf8E4M3FN>) ...
           {kv_format = #mla.kv_format<fp8>,
            mla.config = #mla.config<kv_tile = 64, heads_per_workgroup = 16,
                                     waves_per_workgroup = 4, pipeline_stages = 2,
                                     split_policy = uniform, splits = 4>,
            mla.target = #mla.target<name = "gfx950", arch = "gfx950", compute_units = 256, ...>}
    ```
  }];
  let options = [
    Option<"targetName", "target", "std::string",
           /*default=*/"mla::defaultTargetName().str()",
           "Target chip: gfx950 (= mi355x) or host">,
    Option<"kvTile", "kv-tile", "int64_t", /*default=*/"0",
           "KV rows per tile (a power of two; 0 = choose)">,
    Option<"headsPerWorkgroup", "heads-per-workgroup", "int64_t",
           /*default=*/"0",
           "Heads of the block a workgroup's query rows come from (0 = H)">,
    Option<"wavesPerWorkgroup", "waves-per-workgroup", "int64_t",
           /*default=*/"0", "Waves per workgroup (0 = choose)">,
    Option<"wavesPerRowGroup", "waves-per-row-group", "int64_t",
           /*default=*/"0",
           "Waves sharing one group of query rows: 1, 2 or 4 "
           "(0 = choose)">,
    Option<"rowsPerWave", "rows-per-wave", "int64_t", /*default=*/"0",
           "Query rows of a row group: 16 or 32 (0 = choose)">,
    Option<"pipelineStages", "pipeline-stages", "int64_t", /*default=*/"0",
           "KV tiles in flight (0 = choose)">,
    Option<"splits", "splits", "int64_t", /*default=*/"-1",
           "Work items per sequence (uniform split); -1 = balanced planner">,
    Option<"queryTokens", "query-tokens", "int64_t", /*default=*/"1",
           "Query tokens per sequence the defaults are chosen for, 1..4 "
           "(every launch still takes 1..4)">
  ];
  // It writes #mla.target and #mla.config, also into a module that holds
  // no mla op yet.
  let dependentDialects = ["mla::MLADialect"];
}

def MLASplitKVPass : Pass<"mla-split-kv"> {
  let summary = "Split mla.decode into planned partial decodes and a combine";
  let description = [{
    Flash-decoding at the IR level. Before (after mla-select-config):

    ```mlir
    %out, %lse = mla.decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xf8E4M3FN>) ...
        {kv_format = #mla.kv_format<fp8>, mla.config = #mla.config<...>, mla.target = #mla.target<...>}
    ```

    After:

    ```mlir
    %items, %item_indptr = mla.plan_splits %kv_indptr {config = ..., target = ...}
        : tensor<?xi32> -> tensor<?x4xi32>, tensor<?xi32>
    %po, %pl = mla.partial_decode q(...) kv(...) indptr(...) work(%items : tensor<?x4xi32>)
        {config = ..., kv_format = ...} -> tensor<?x4x16x512xf32>, tensor<?x4x16xf32>
    %t = tensor.dim %q, %c0 : tensor<?x16x576xbf16>
    %out, %lse = mla.combine partials(%po, %pl : ...) indptr(%item_indptr, %qo_indptr : ...)
        tokens(%t) -> tensor<?x16x512xbf16>, tensor<?x16xf32>
    ```

    The work list is an SSA value chosen at run time by the planner
    (`mla.plan_splits`, docs/split-planning.md); a uniform config gives every
    sequence exactly `splits` items (ceil division rounded up to the KV tile,
    clamped: items past a sequence's end are empty and contribute nothing).

    Must run after mla-select-config: expects `mla.config` and `mla.target`
    on every mla.decode.
  }];
  // scf: a paged cache's positions are summed over its sequences in a loop.
  let dependentDialects = [
    "mlir::arith::ArithDialect", "mlir::scf::SCFDialect",
    "mlir::tensor::TensorDialect"
  ];
}

def MLATilePass : Pass<"mla-tile"> {
  let summary = "Tile the KV loop of mla.partial_decode with online softmax";
  let description = [{
    Lowers each `mla.partial_decode` to loops over its work items and, inside
    an item, over KV tiles of `config.kv_tile` rows with an online softmax:
    per tile the scores of all heads and query tokens against the tile, the
    causal mask and the tail mask (a static tile shape; rows past the item's
    end are clamped on load and masked to -inf), then

    ```
    m' = max(m, max_p s)      a = exp(m - m')      p = exp(s - m')
    l' = a * l + sum_p p      acc' = a * acc + p · V
    ```

    with a fully masked row shifted by 0 instead of -inf (no NaN). The item's
    result is `acc / l` and `lse = m + log l` (`-inf` and zeros when l = 0).
    Target-independent; runs on the cpu backend.

    Before:

    ```mlir
    %po, %pl = mla.partial_decode q(%q : tensor<?x16x576xbf16>) kv(%kv : tensor<?x576xbf16>)
        indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>) work(%items : tensor<?x4xi32>)
        {config = #mla.config<kv_tile = 16, ...>, kv_format = #mla.kv_format<bf16>}
        -> tensor<?x4x16x512xf32>, tensor<?x4x16xf32>
    ```

    After (abridged):

    ```mlir
    scf.for %item = %c0 to %num_items step %c1 iter_args(%po = ..., %pl = ...) {
      // (seq, begin, end, slot) = %items[%item]
      scf.for %t0 = %begin to %end step %c16 iter_args(%m = ..., %l = ..., %acc = ...) {
        %k = linalg.generic ... -> tensor<16x576xf32>   // rows clamped to the item
        %s = linalg.generic ... -> tensor<?x16x16xf32>  // scores, tail + causal mask
        ...                                             // m', a, p, l', acc'
        scf.yield %m_new, %l_new, %acc_new
      }
      // acc / l and m + log l into slot %slot of %po / %pl
    }
    ```

    Must run after mla-split-kv: expects mla.partial_decode.
  }];
  let dependentDialects = [
    "mlir::arith::ArithDialect", "mlir::linalg::LinalgDialect",
    "mlir::math::MathDialect", "mlir::scf::SCFDialect",
    "mlir::tensor::TensorDialect"
  ];
}

def MLALowerCombinePass : Pass<"mla-lower-combine"> {
  let summary = "Lower mla.combine to upstream ops";
  let description = [{
    For each sequence, the lse-weighted merge of its work items' partial
    results: `m = max_j lse_j`, weights `exp(lse_j - m)`, the normalized sum
    rounded to bf16, and `lse = m + log(sum_j exp(lse_j - m))`. A token whose
    items all have lse = -inf gets zeros and -inf.

    Before:

    ```mlir
    %out = mla.combine partials(%po, %pl : tensor<?x4x16x512xf32>, tensor<?x4x16xf32>)
             indptr(%item_indptr, %qo : tensor<?xi32>, tensor<?xi32>) tokens(%t)
             -> tensor<?x16x512xbf16>
    ```

    After: an `scf.for` over sequences of `linalg.generic` reductions over
    the sequence's slots, inserting each sequence's rows into the output.

    Must run after mla-split-kv: expects mla.combine.
  }];
  let dependentDialects = [
    "mlir::arith::ArithDialect", "mlir::linalg::LinalgDialect",
    "mlir::math::MathDialect", "mlir::scf::SCFDialect",
    "mlir::tensor::TensorDialect"
  ];
}

def MLAToGPUPass : Pass<"mla-to-gpu", "mlir::ModuleOp"> {
  let summary = "Distribute the split-level ops into GPU kernels (L2 -> L3)";
  let description = [{
    Builds `gpu.module @mla_kernels [#rocdl.target<chip = ...>]` with one
    kernel per `mla.partial_decode` and per `mla.combine`, and marks
    each host op with the kernel that runs it (`mla.kernel`). Each kernel
    carries its launch description (`mla.launch`: grid, block, LDS bytes,
    argument names and shapes) and deliberate attributes (`known_block_size` 256,
    `rocdl.flat_work_group_size`, `rocdl.waves_per_eu`).

    The partial kernel: a persistent grid of one workgroup per CU, each
    running the units the planner scheduled for it (docs/split-planning.md),
    a unit being a (work item, block of query rows); 4 waves; the (token,
    head) rows of a block of `heads_per_workgroup` heads go in groups of
    `rows_per_wave` (16, or 32 as two MFMA blocks sharing a wave's K and V
    reads) to the waves, token-major, `waves_per_row_group` waves to a
    group (which split the tile's KV rows for QK and the Dv columns for
    PV), so one KV read per tile serves 4 · rows_per_wave / W rows (every
    head of a token at q_len 1 with the default W). The grid is the CUs (256), whatever the batch;
    workgroup id g runs logical workgroup (g mod xcds) · CUs/xcds + ⌊g /
    xcds⌋ (the chip deals workgroup ids to XCDs round robin), and the
    planner gives a work item's row blocks consecutive logical workgroups
    of one XCD, so they share its L2 and each cache byte comes from HBM
    once. The pass also builds the plan kernel `mla_plan`: the planner on
    the device, launched by device plans (docs/runtime.md). KV tiles (kv_tile rows; mxfp4 with its E8M0
    scales)
    are DMA'd global -> LDS with `amdgpu.gather_to_lds` into 2 stages, the
    next tile in flight while the current one is used — the only reads of
    the cache; the QKᵀ and PV tile
    contractions as wave-level `vector.contract` (bf16 throughout for bf16
    caches); an online softmax per lane. The KV loop is two loops: the
    tiles every row sees whole, without a score mask, then the item's last
    tiles (partial, or past an earlier token's causal limit), masked.
    fp8 and mxfp4: QK as scaled MFMAs,
    Q in registers in two fp8 parts with per-head power-of-two scales, K
    from the tile as it is (mxfp4: packed E2M1 with its E8M0 block scales);
    a last K chunk of 64 columns (Dqk = 576) is one MFMA with both parts,
    hi in its K 0..63 and lo in 64..127 against the columns twice.
    fp8 PV: P as p·448 in two fp8 parts, the lo part a second contraction
    into the same tile marked `mla.lhs_exp2 = -4`. mxfp4 PV: bf16 MFMAs;
    when a row group's waves split the Dv columns, V's E2M1 codes come from
    the tile by transposed nibble loads, converted at scale 1, and V's block
    scales multiply P per 32-column block (the MFMAs issued on the
    accumulator's lane form); with a row group per wave the workgroup
    decodes V into LDS 32 rows at a time instead. A sequence with a
    single work item is written directly (bf16 output and lse) by the partial
    kernel, and the combine kernel skips it. The kernels take every output
    buffer (partials, out, lse) even when an op has no lse result.

    After (abridged):

    ```mlir
    gpu.module @mla_kernels [#rocdl.target<chip = "gfx950", O = 3>] {
      gpu.func @mla_partial_decode(...) workgroup(...) kernel
          attributes {known_block_size = array<i32: 256, 1, 1>,
                      mla.launch = {block = [256, 1, 1], grid = ["256", "1", "1"],
                                    lds_bytes = 80384, ...}} {
        %id = gpu.block_id x
        %xcd = arith.remui %id, %c8 : index
        ...                                         // logical workgroup j
        scf.for %unit = %first to %last step %c1 {  // (item, row block)
          amdgpu.gather_to_lds %kv[...], %lds[...] : vector<16xf8E4M3FN>, ...
          %w:3 = scf.for %t = %begin to %whole step %c64_i32 iter_args(...) {
            %s = vector.contract ... : vector<16x576xbf16>, vector<64x576xbf16> into vector<16x64xf32>
            ...
            %o = vector.contract ... : vector<16x64xf8E4M3FN>, vector<64x512xf8E4M3FN> into vector<16x512xf32>
          }
          scf.for %t = %whole to %end step %c64_i32 iter_args(... = %w#0, ...) {
            ...                                     // the same, scores masked
          }
          gpu.barrier
        }
      }
      gpu.func @mla_combine(...) kernel { ... }
      gpu.func @mla_plan(...) workgroup(...) kernel { ... }
    }
    ```

    For an NVIDIA target (`sm_90a`: the `h200` and `h100` rows of the chip
    table) the module is `gpu.module @mla_kernels [#nvvm.target<chip =
    "sm_90a">]` and the partial kernel is the sm_90a kernel (same
    arguments, work list and persistent schedule; 2 blocks per SM of 256
    threads): 16 (token, head) rows per block, 16 threads per row, each KV
    tile decoded once into shared memory as bf16 (exact for every format),
    QK, an online softmax in f32 (row reductions by `gpu.shuffle`) and PV
    on the CUDA cores in f32. The combine and plan kernels are the same.

    Must run after mla-split-kv: expects mla.partial_decode and mla.combine.
  }];
  let options = [
    Option<"testHazard", "test-hazard", "std::string", /*default=*/"\"\"",
           "Testing only: build the partial kernel with one synchronization "
           "bug the emu hazard checker must report: drop-tile-barrier (no "
           "barrier between the DMA wait and the reads of the tile), "
           "short-wait (the DMA wait leaves one load of the tile in flight), "
           "drop-max-barrier (no barrier between the waves' stores of their "
           "rows' tile maxima and the softmax's reads of them), drop-loop-barrier (no barrier at the "
           "end of a tile iteration) or, for sm_90a, unguarded-scale-load (mxfp4: a tile past "
           "the item's end loads its rows' E8M0 scales, outside the cache for an empty item; the "
           "emu's global bounds check must report it)">,
    Option<"requiredArch", "required-arch", "std::string", /*default=*/"\"\"",
           "Refuse a target of another architecture (the sm_90a pipeline "
           "sets sm_90a)">
  ];
  let dependentDialects = [
    "mlir::amdgpu::AMDGPUDialect", "mlir::arith::ArithDialect",
    "mlir::gpu::GPUDialect", "mlir::math::MathDialect",
    "mlir::memref::MemRefDialect", "mlir::NVVM::NVVMDialect",
    "mlir::nvgpu::NVGPUDialect", "mlir::ROCDL::ROCDLDialect",
    "mlir::scf::SCFDialect", "mlir::vector::VectorDialect"
  ];
}

def MLALowerToMFMAPass : Pass<"mla-lower-to-mfma"> {
  let summary = "The MFMA pass: wave tiles to lanes, tile contractions to amdgpu.mfma (L3 -> L4)";
  let description = [{
    Distributes every wave tile (a 2-D f32 vector of 16 rows) over the 64
    lanes in the C/D layout of the 16x16 MFMAs: lane `16·kg + i` holds rows
    `4·kg + r` of column `16·nb + i` as element `4·nb + r`
    (docs/mfma-layouts.md). Each `vector.contract` of two f8E4M3FN (bf16)
    tiles read from memory becomes one `amdgpu.mfma 16x16x128` (16x16x32)
    per 16-column block and K chunk, its A and B fragments loaded lane by
    lane in the instruction's layout (contiguous where the K run is
    contiguous in memory, one element per row otherwise); an fp8 K remainder
    of 64 fills the upper half of both fragments with zeros. An operand that
    is an fp8 tile read widened to bf16 by `arith.extf` is loaded as fp8 and
    widened per fragment. A (k, n) B tile in LDS is read with transposed
    loads (`amdgpu.transpose_load`) when every lane's 8 bytes are 8-byte
    aligned. Contractions on the same B that accumulate into each other run
    back to back per B fragment; one marked `mla.lhs_exp2 = k` runs on
    `amdgpu.scaled_mfma` with A scale 2^k. Two such parts of K = 64 (an
    unmarked one, then a marked one: fp8 P's hi and lo) share one scaled
    MFMA: the second fills the K 64..127 that would be zero padding, B
    holds its fragment twice, and the A scale goes by K block (1 for blocks
    0-1, 2^k for 2-3, each from the lane that supplies that block's scale,
    docs/mfma-layouts.md). With `chipset` set, fp8 conversions then become
    the chip's packed instructions (as `convert-arith-to-amdgpu`). Tile reads (including row
    broadcasts), writes, constants and elementwise arith follow the layout;
    loop-carried tiles become per-lane vectors. f32 `math.exp2/log2/exp/log`
    become `llvm.amdgcn.exp2` / `llvm.amdgcn.log` (v_exp_f32 / v_log_f32),
    so no device library is linked.

    Before:

    ```mlir
    %s = vector.contract {...} %q, %k, %zero
        : vector<16x576xf8E4M3FN>, vector<64x576xf8E4M3FN> into vector<16x64xf32>
    ```

    After (per lane, abridged):

    ```mlir
    %a0 = vector.load %q_lds[%w, %i, %k0] : ..., vector<16xf8E4M3FN>
    ...
    %d = amdgpu.mfma 16x16x128 %a * %b + %c blgp = none
        : vector<32xf8E4M3FN>, vector<32xf8E4M3FN>, vector<4xf32>
    ```

    Must run after mla-to-gpu: expects the L3 kernels.
  }];
  let options = [
    Option<"testCorruptLayout", "test-corrupt-layout", "bool",
           /*default=*/"false",
           "Testing only: load the A fragment of lane i from row i^1, a "
           "layout bug the emu numerics tests must catch">,
    Option<"chipset", "chipset", "std::string", /*default=*/"\"\"",
           "When set (gfx950), also lower fp8 conversions to the chip's "
           "packed instructions (as convert-arith-to-amdgpu), after the "
           "fragments exist; the emu leaves them to its own model">
  ];
  let dependentDialects = [
    "mlir::amdgpu::AMDGPUDialect", "mlir::arith::ArithDialect",
    "mlir::gpu::GPUDialect", "mlir::LLVM::LLVMDialect",
    "mlir::memref::MemRefDialect", "mlir::vector::VectorDialect"
  ];
}

def MLAGPUToEmuPass : Pass<"mla-gpu-to-emu", "mlir::ModuleOp"> {
  let summary = "Turn the MFMA-level kernels into host lane functions for the emu backend";
  let description = [{
    Each kernel of the module's gpu.module becomes `func.func @<kernel>_lane`
    (arguments: the kernel's, its workgroup buffers, an i64 context), which
    one lane runs as a fiber. Thread/block ids and barriers become calls into
    the emu runtime; `amdgpu.mfma` (16x16x128 fp8, 16x16x32 bf16),
    `amdgpu.scaled_mfma`, `gpu.shuffle xor`, `rocdl.readfirstlane`,
    `amdgpu.gather_to_lds` and the load counter of
    `amdgpu.memory_counter_wait` become wave rendezvous calls
    that do what the instruction does (an LDS DMA lands only when a wait
    retires it); every `memref`/`vector` load and store on workgroup memory
    is preceded by `mla_emu_lds_read` / `mla_emu_lds_write`, which check it
    against the LDS hazard model (docs/emu.md), and any other access to
    workgroup memory is an error; fp8 `arith.truncf` calls the hardware
    conversion; `llvm.amdgcn.exp2/log` become `math.exp2/log2`; GPU address
    spaces are dropped. Host functions and the gpu.module are removed: the
    emu runtime launches the lane functions. Any other GPU op is an error
    naming it.

    After (abridged):

    ```mlir
    func.func @mla_partial_decode_lane(..., %lds: memref<2x64x576xf8E4M3FN>,
                                       %ctx: i64) {
      call @mla_emu_gather_to_lds(%ctx, %src, %dst, %c16) : (i64, i64, i64, i64) -> ()
      call @mla_emu_wait_loads(%ctx, %c9) : (i64, i64) -> ()
      call @mla_emu_barrier(%ctx) : (i64) -> ()
      call @mla_emu_lds_read(%ctx, %addr, %c16) : (i64, i64, i64) -> ()
      %k = vector.load %lds[%s, %r, %c] : memref<2x64x576xf8E4M3FN>, vector<16xf8E4M3FN>
      ...
    }
    ```

    Must run after mla-lower-to-mfma, before convert-arith-to-amdgpu.
  }];
  let dependentDialects = [
    "mlir::arith::ArithDialect", "mlir::func::FuncDialect",
    "mlir::math::MathDialect", "mlir::memref::MemRefDialect",
    "mlir::vector::VectorDialect"
  ];
}

#endif // MLA_TRANSFORMS_PASSES_TD

def MLAWorkgroupMemoryToDynamicPass : Pass<"mla-workgroup-memory-to-dynamic"> {
  let summary = "A kernel's workgroup attributions as views of its dynamic shared memory";
  let description = [{
    A CUDA block's static `.shared` variables may hold 48 KiB; beyond that
    (up to 227 KiB on sm_90a) the memory must be dynamic, sized at launch
    and allowed by `cuFuncSetAttribute`. This pass rewrites every
    `gpu.func` kernel's workgroup attributions into `memref.view`s of one
    `gpu.dynamic_shared_memory` block, in order, each at an offset aligned
    to its `llvm.align` (at least 16 bytes), and records the block's size
    as `dynamic_lds_bytes` in the kernel's `mla.launch`: the runtime's cuda
    backend passes that many bytes at every launch (docs/artifact.md).

    ```mlir
    gpu.func @k() workgroup(%a : memref<16x584xf16, #gpu.address_space<workgroup>>) kernel
    // becomes
    gpu.func @k() kernel {
      %base = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
      %a = memref.view %base[%c0][] : ... to memref<16x584xf16, #gpu.address_space<workgroup>>
    ```

    The emu backend keeps the attributions: the pass runs in
    `--mla-decode-to-sm90a` only, before the NVVM conversion.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::memref::MemRefDialect"];
}

def MLALowerMathToNVVMPass : Pass<"mla-lower-math-to-nvvm"> {
  let summary = "f32 math ops to the NVPTX approximate instructions, without libdevice";
  let description = [{
    Upstream `convert-gpu-to-nvvm` lowers `math.exp2`, `math.exp`,
    `math.log2`, `math.log` and `math.fma` to calls into libdevice
    (`__nv_exp2f`, ...), which is part of the CUDA toolkit and which the
    project does not link. This pass rewrites the f32 forms first, inside
    gpu.modules for NVVM:

    | op | becomes |
    |---|---|
    | `math.exp2 x` | `ex2.approx.ftz.f32 x` (`llvm.nvvm.ex2.approx.ftz.f32`) |
    | `math.exp x` | `ex2.approx.ftz.f32 (x · log2 e)` |
    | `math.log2 x` | `lg2.approx.ftz.f32 x` (`llvm.nvvm.lg2.approx.ftz.f`) |
    | `math.log x` | `lg2.approx.ftz.f32 x · ln 2` |
    | `math.fma a, b, c` | `arith.mulf` + `arith.addf` with `contract` (one `fma.rn.f32`) |

    The approximations' relative errors (about 2^-22) are far below the
    kernels' bf16 and fp8 operands'. Ops on other types are left alone.
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect", "mlir::arith::ArithDialect"];
}

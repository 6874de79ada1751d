//===- MLAOps.td - mla dialect operations ------------------*- tablegen -*-===//
//
// L0 of the pipeline: `mla.decode` on tensors, as an ML compiler emits it.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_OPS_TD
#define MLA_OPS_TD

include "mla/Dialect/MLA/IR/MLABase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class MLA_Op<string mnemonic, list<Trait> traits = []>
    : Op<MLA_Dialect, mnemonic, traits>;

def MLA_DecodeOp : MLA_Op<"decode", [Pure, AttrSizedOperandSegments]> {
  let summary = "multi-head latent attention, decode phase (absorbed form)";
  let description = [{
    Attention of a batch of query tokens over a shared latent KV cache with a
    single KV head (MQA), as DeepSeek-V2/V3 decode runs it after the
    up-projections are absorbed into the query and output.

    Operands (T query tokens, N cache rows, B sequences):
    - `q` `[T, H, Dqk]` bf16. H is a multiple of 16, at most 128.
    - `kv` `[N, Dqk]`: bf16 for `bf16`; `f8E4M3FN` for `fp8`; for `mxfp4`
      packed bytes `i8 [N, Dqk/2]`, two E2M1 values per byte, the low nibble
      holding the even element.
    - `qo_indptr`, `kv_indptr` `[B+1]` i32: sequence b owns query tokens
      `[qo_indptr[b], qo_indptr[b+1])` and cache rows
      `[kv_indptr[b], kv_indptr[b+1])`.
    - `kv_scale`: absent for `bf16`; `f32 [1]` (per-tensor) for `fp8`;
      `f8E8M0FNU [N, Dqk/32]` (one power-of-two scale per 32 elements) for
      `mxfp4`.
    - Paged caches (`pages(kv_indices, kv_last_page_len)`): `kv` is
      `[num_pages, P, row]` (mxfp4's `kv_scale` `[num_pages, P, Dqk/32]`),
      P a static power of two 1..256; `kv_indptr` counts pages: sequence b
      owns the pages `kv_indices[kv_indptr[b] .. kv_indptr[b+1])` (i32 page
      ids), its last page filled to `kv_last_page_len[b]` rows (`[B]` i32,
      1..P; 0 for a sequence without pages), so it has
      `(pages - 1) * P + last` positions; position p is row `p mod P` of page
      `kv_indices[kv_indptr[b] + p / P]`. Ids are clamped into the pool and
      `kv_last_page_len` into 1..P, so no table reads outside the cache.

    Attributes: `kv_format`; `v_head_dim` Dv (default 512, a multiple of 32,
    at most Dqk); `sm_scale` (default `1/sqrt(Dqk)`).

    Semantics. Dequantize the cache (fp8: `value * scale`; mxfp4:
    `e2m1 * 2^(e8m0 - 127)`). Keys are all Dqk columns of a row, values its
    first Dv columns. For sequence b with `q_len = qo_indptr[b+1] -
    qo_indptr[b]` (1..4) and `kv_len = kv_indptr[b+1] - kv_indptr[b]`, query
    token i (0-based within the sequence) attends to the positions
    `p < kv_len - (q_len - 1 - i)` (causal over the newest positions; q_len = 1
    is plain decode):

    ```
    s[p]   = sm_scale * dot(q[t, h, :], k[p, :])
    out    = sum_p softmax(s)[p] * v[p, :]        (rounded to bf16)
    lse    = log(sum_p exp(s[p]))                  (natural log, f32)
    ```

    A sequence with kv_len = 0, or a query token that sees no position,
    yields zeros in `out` and `-inf` in `lse`.

    Results: `out` `[T, H, Dv]` bf16 and, when a second result type is
    written, `lse` `[T, H]` f32. Head dimensions (H, Dqk, Dv) must be static;
    token, row and batch counts may be dynamic.

    Example:

    ```mlir
    %out = mla.decode q(%q : tensor<?x16x576xbf16>)
                      kv(%kv : tensor<?x576xf8E4M3FN>)
                      scale(%s : tensor<1xf32>)
                      indptr(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
                      {kv_format = #mla.kv_format<fp8>}
                      -> tensor<?x16x512xbf16>
    ```
  }];

  let arguments = (ins
    RankedTensorOf<[BF16]>:$q,
    RankedTensorOf<[BF16, F8E4M3FN, I8]>:$kv,
    RankedTensorOf<[I32]>:$qo_indptr,
    RankedTensorOf<[I32]>:$kv_indptr,
    Optional<RankedTensorOf<[F32, F8E8M0FNU]>>:$kv_scale,
    Optional<RankedTensorOf<[I32]>>:$kv_indices,
    Optional<RankedTensorOf<[I32]>>:$kv_last_page_len,
    MLA_KVFormatAttr:$kv_format,
    DefaultValuedAttr<I64Attr, "512">:$v_head_dim,
    OptionalAttr<F32Attr>:$sm_scale
  );
  let results = (outs
    RankedTensorOf<[BF16]>:$out,
    Optional<RankedTensorOf<[F32]>>:$lse
  );

  let assemblyFormat = [{
    `q` `(` $q `:` type($q) `)`
    `kv` `(` $kv `:` type($kv) `)`
    (`scale` `(` $kv_scale^ `:` type($kv_scale) `)`)?
    `indptr` `(` $qo_indptr `,` $kv_indptr `:` type($qo_indptr) `,` type($kv_indptr) `)`
    (`pages` `(` $kv_indices^ `,` $kv_last_page_len `:` type($kv_indices) `,` type($kv_last_page_len) `)`)?
    attr-dict `->` type($out) (`,` type($lse)^)?
  }];

  let extraClassDeclaration = [{
    /// Number of heads H.
    int64_t getNumHeads() { return getQ().getType().getDimSize(1); }
    /// Width of a query/key row, Dqk.
    int64_t getQKHeadDim() { return getQ().getType().getDimSize(2); }
    /// The softmax scale, with its default 1/sqrt(Dqk) applied.
    double getEffectiveSmScale();
    /// Whether the cache is paged, and its rows per page (0: contiguous).
    bool isPaged() { return static_cast<bool>(getKvIndices()); }
    int64_t getPageSize() {
      return isPaged() ? getKv().getType().getDimSize(1) : 0;
    }
  }];

  // A contiguous cache: the builder of the form without a page table, so
  // embedding code written before paged caches keeps compiling.
  let builders = [
    OpBuilder<(ins "::mlir::Type":$out, "::mlir::Type":$lse,
                   "::mlir::Value":$q, "::mlir::Value":$kv,
                   "::mlir::Value":$qo_indptr, "::mlir::Value":$kv_indptr,
                   "::mlir::Value":$kv_scale, "KVFormatAttr":$kv_format,
                   "::mlir::IntegerAttr":$v_head_dim,
                   "::mlir::FloatAttr":$sm_scale), [{
      build($_builder, $_state, out, lse, q, kv, qo_indptr, kv_indptr,
            kv_scale, /*kv_indices=*/::mlir::Value(),
            /*kv_last_page_len=*/::mlir::Value(), kv_format, v_head_dim,
            sm_scale);
    }]>
  ];

  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// L2: split-KV
//===----------------------------------------------------------------------===//

def MLA_PlanSplitsOp : MLA_Op<"plan_splits", [Pure]> {
  let summary = "the split-KV work list of a batch, chosen at run time";
  let description = [{
    Runs the split planner (`mla::planSplits`, docs/split-planning.md) on the
    sequence lengths `kv_indptr[b+1] - kv_indptr[b]` with the target's CU
    count and the config's KV tile and split policy.

    `work_items` `[num_items, 4]` i32: one row per workgroup,
    `(sequence, kv_begin, kv_end, partial_slot)`, positions relative to the
    sequence's first cache row, `partial_slot` = the row index.
    `item_indptr` `[B+1]` i32: the items of sequence b are rows
    `[item_indptr[b], item_indptr[b+1])`, in KV order.

    On the host it bufferizes to a call of the runtime's planner, so the
    compiler and the runtime share one implementation.
  }];
  let arguments = (ins
    RankedTensorOf<[I32]>:$kv_indptr,
    MLA_TargetAttr:$target,
    MLA_ConfigAttr:$config
  );
  let results = (outs
    RankedTensorOf<[I32]>:$work_items,
    RankedTensorOf<[I32]>:$item_indptr
  );
  let assemblyFormat = [{
    $kv_indptr attr-dict `:` type($kv_indptr) `->` type($work_items) `,` type($item_indptr)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Most work items one sequence can get under this config.
    int64_t getMaxItemsPerSequence();
  }];
}

def MLA_PartialDecodeOp : MLA_Op<"partial_decode",
                                 [Pure, AttrSizedOperandSegments]> {
  let summary = "attention of each sequence over one work item's KV range";
  let description = [{
    For every row `(b, kv_begin, kv_end, slot)` of `work_items`, the
    attention of sequence b's query tokens (up to 4) over cache positions
    `[kv_begin, kv_end)` of that sequence, with the causal rule of
    `mla.decode` (token i sees positions `< kv_len - (q_len - 1 - i)`):

    - `partial_out[slot, i, h, :]` f32: the softmax-weighted values over the
      visible positions of the range, already normalized;
    - `partial_lse[slot, i, h]` f32: the log-sum-exp of the scaled scores
      over those positions; `-inf` (and a zero output) when the token sees
      none of them — an empty item contributes nothing to the combine.

    Rows `i >= q_len` of a slot are unspecified. Operands (paged caches
    too) and attributes are those of `mla.decode`; `config` carries the KV
    tile for `mla-tile`.
  }];
  let arguments = (ins
    RankedTensorOf<[BF16]>:$q,
    RankedTensorOf<[BF16, F8E4M3FN, I8]>:$kv,
    RankedTensorOf<[I32]>:$qo_indptr,
    RankedTensorOf<[I32]>:$kv_indptr,
    RankedTensorOf<[I32]>:$work_items,
    Optional<RankedTensorOf<[F32, F8E8M0FNU]>>:$kv_scale,
    Optional<RankedTensorOf<[I32]>>:$kv_indices,
    Optional<RankedTensorOf<[I32]>>:$kv_last_page_len,
    MLA_KVFormatAttr:$kv_format,
    DefaultValuedAttr<I64Attr, "512">:$v_head_dim,
    OptionalAttr<F32Attr>:$sm_scale,
    MLA_ConfigAttr:$config
  );
  let results = (outs
    RankedTensorOf<[F32]>:$partial_out,
    RankedTensorOf<[F32]>:$partial_lse
  );
  let assemblyFormat = [{
    `q` `(` $q `:` type($q) `)`
    `kv` `(` $kv `:` type($kv) `)`
    (`scale` `(` $kv_scale^ `:` type($kv_scale) `)`)?
    `indptr` `(` $qo_indptr `,` $kv_indptr `:` type($qo_indptr) `,` type($kv_indptr) `)`
    (`pages` `(` $kv_indices^ `,` $kv_last_page_len `:` type($kv_indices) `,` type($kv_last_page_len) `)`)?
    `work` `(` $work_items `:` type($work_items) `)`
    attr-dict `->` type($partial_out) `,` type($partial_lse)
  }];
  let extraClassDeclaration = [{
    int64_t getNumHeads() { return getQ().getType().getDimSize(1); }
    int64_t getQKHeadDim() { return getQ().getType().getDimSize(2); }
    double getEffectiveSmScale();
    /// Whether the cache is paged, and its rows per page (0: contiguous).
    bool isPaged() { return static_cast<bool>(getKvIndices()); }
    int64_t getPageSize() {
      return isPaged() ? getKv().getType().getDimSize(1) : 0;
    }
  }];
  let hasVerifier = 1;
}

def MLA_CombineOp : MLA_Op<"combine", [Pure]> {
  let summary = "lse-weighted merge of the partial results of each sequence";
  let description = [{
    For each sequence b, query token i and head h, merges the partials of the
    slots `[item_indptr[b], item_indptr[b+1])`:

    ```
    m   = max_j lse_j
    out = sum_j exp(lse_j - m) * out_j / sum_j exp(lse_j - m)   (bf16)
    lse = m + log(sum_j exp(lse_j - m))
    ```

    A token whose slots all have lse = -inf gets zeros and -inf (no 0/0).
    Tokens `[qo_indptr[b], qo_indptr[b+1])` of the `num_tokens` outputs are
    written; tokens outside every sequence stay zero / -inf.
  }];
  let arguments = (ins
    RankedTensorOf<[F32]>:$partial_out,
    RankedTensorOf<[F32]>:$partial_lse,
    RankedTensorOf<[I32]>:$item_indptr,
    RankedTensorOf<[I32]>:$qo_indptr,
    Index:$num_tokens
  );
  let results = (outs
    RankedTensorOf<[BF16]>:$out,
    Optional<RankedTensorOf<[F32]>>:$lse
  );
  let assemblyFormat = [{
    `partials` `(` $partial_out `,` $partial_lse `:` type($partial_out) `,` type($partial_lse) `)`
    `indptr` `(` $item_indptr `,` $qo_indptr `:` type($item_indptr) `,` type($qo_indptr) `)`
    `tokens` `(` $num_tokens `)`
    attr-dict `->` type($out) (`,` type($lse)^)?
  }];
  let hasVerifier = 1;
}

#endif // MLA_OPS_TD

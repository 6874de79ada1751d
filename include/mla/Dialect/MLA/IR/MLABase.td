//===- MLABase.td - mla dialect and attributes -------------*- tablegen -*-===//
//
// The dialect definition and the attributes shared by the mla ops.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_BASE_TD
#define MLA_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def MLA_Dialect : Dialect {
  let name = "mla";
  let cppNamespace = "::mla";
  let summary = "DeepSeek-style Multi-head Latent Attention, decode phase";
  let description = [{
    The `mla` dialect holds `mla.decode`, the op ML compilers emit for MLA
    decode, and the ops and attributes its lowering goes through: the
    `#mla.target` / `#mla.config` attributes of the configured level and the
    split-KV ops `mla.plan_splits`, `mla.partial_decode` and `mla.combine`.
    Discardable attributes: `mla.target` and `mla.config` on an `mla.decode`
    (checked together), `mla.kernel` on a split-level op (the gfx950 kernel
    that runs it) and `mla.launch` on a kernel (grid, block, LDS bytes,
    argument names and shapes: what an artifact's launch metadata is made
    of, docs/artifact.md) and `mla.lhs_exp2` on a tile `vector.contract` of
    fp8 operands (an i64 k: the LHS elements stand for 2^k times their
    value, which the MFMA pass applies with the E8M0 scale of a scaled
    MFMA, so a second fp8 part of an operand accumulates into the same
    registers). See docs/pipelines.md for the levels and the pipelines.
  }];
  let useDefaultAttributePrinterParser = 1;
  // `mla.target` / `mla.config` on an mla.decode are checked together.
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    static constexpr llvm::StringLiteral kTargetAttrName = "mla.target";
    static constexpr llvm::StringLiteral kConfigAttrName = "mla.config";
    /// On a host op: the kernel that runs it (@module::@kernel).
    static constexpr llvm::StringLiteral kKernelAttrName = "mla.kernel";
    /// On a kernel: how the runtime launches it (grid, block, LDS, args).
    static constexpr llvm::StringLiteral kLaunchAttrName = "mla.launch";
    /// On a tile vector.contract of fp8 operands: the LHS is scaled by 2^k.
    static constexpr llvm::StringLiteral kLhsExp2AttrName = "mla.lhs_exp2";
  }];
}

def MLA_KVFormat : I32EnumAttr<"KVFormat", "storage format of the KV cache", [
    I32EnumAttrCase<"bf16", 0>,
    I32EnumAttrCase<"fp8", 1>,
    I32EnumAttrCase<"mxfp4", 2>
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mla";
}

def MLA_KVFormatAttr : EnumAttr<MLA_Dialect, MLA_KVFormat, "kv_format"> {
  let assemblyFormat = "`<` $value `>`";
}

def MLA_SplitPolicy : I32EnumAttr<"SplitPolicy", "how KV ranges become work items", [
    I32EnumAttrCase<"balanced", 0>,
    I32EnumAttrCase<"uniform", 1>
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mla";
}

def MLA_SplitPolicyAttr : EnumAttr<MLA_Dialect, MLA_SplitPolicy, "split_policy"> {
  let assemblyFormat = "`<` $value `>`";
}

def MLA_TargetAttr : AttrDef<MLA_Dialect, "Target"> {
  let mnemonic = "target";
  let summary = "the facts of one chip the passes and the planner read";
  let description = [{
    A serialization of one row of the chip table (`mla::lookupTarget`,
    lib/Target/KnownTargets.cpp): `mla-select-config{target=gfx950}` writes it,
    and every later pass reads the chip from it, never from anywhere else.
    Tests may pin a hand-written target (e.g. less LDS) to exercise limits.

    ```mlir
    #mla.target<name = "gfx950", arch = "gfx950", compute_units = 256, xcds = 8,
                wave_size = 64, lds_bytes = 163840, vector_registers = 512,
                hbm_gbps = 8000, matrix_instructions = ["v_mfma_f32_16x16x128_f8f6f4"]>
    ```
  }];
  let parameters = (ins
    StringRefParameter<"name as users type it">:$name,
    StringRefParameter<"architecture">:$arch,
    "int64_t":$compute_units,
    "int64_t":$xcds,
    "int64_t":$wave_size,
    "int64_t":$lds_bytes,
    "int64_t":$vector_registers,
    "int64_t":$hbm_gbps,
    "::mlir::ArrayAttr":$matrix_instructions
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def MLA_ConfigAttr : AttrDef<MLA_Dialect, "Config"> {
  let mnemonic = "config";
  let summary = "the tuning choices of one mla.decode";
  let description = [{
    Chosen by `mla-select-config` from the target, each field overridable:
    - `kv_tile`: cache rows per tile of the KV loop (a power of two);
    - `heads_per_workgroup`: the head grouping — a workgroup's query rows
      are (token, head) rows of one block of this many heads (a multiple of
      `rows_per_wave` dividing H), packed token-major; the KV tile is read
      once for all of them;
    - `waves_per_workgroup`: waves of one workgroup;
    - `waves_per_row_group`: waves that share one group of query rows
      (1, 2 or 4; default 1): each computes the scores of its share of the
      tile's KV rows and the output of its share of the Dv columns, so a
      workgroup holds fewer rows (fewer padding rows when a token has
      fewer than 64);
    - `rows_per_wave`: query rows of a row group, the rows each of its
      waves computes (16 or 32; default 16): with 32 a wave's K and V
      reads serve two 16-row MFMA blocks (gfx950: fp8, bf16), and a workgroup
      holds `rows_per_wave · waves_per_workgroup / waves_per_row_group`
      rows;
    - `pipeline_stages`: KV tiles in flight (LDS buffers);
    - `split_policy`: `balanced` (the planner sizes work items to fill the
      chip at run time) or `uniform` with `splits` items per sequence.

    ```mlir
    #mla.config<kv_tile = 64, heads_per_workgroup = 16, waves_per_workgroup = 4,
                pipeline_stages = 2, split_policy = balanced,
                waves_per_row_group = 4>
    #mla.config<kv_tile = 32, heads_per_workgroup = 16, waves_per_workgroup = 4,
                pipeline_stages = 2, split_policy = uniform, splits = 7>
    ```
  }];
  let parameters = (ins
    "int64_t":$kv_tile,
    "int64_t":$heads_per_workgroup,
    "int64_t":$waves_per_workgroup,
    "int64_t":$pipeline_stages,
    EnumParameter<MLA_SplitPolicy>:$split_policy,
    DefaultValuedParameter<"int64_t", "0">:$splits,
    DefaultValuedParameter<"int64_t", "1">:$waves_per_row_group,
    DefaultValuedParameter<"int64_t", "16">:$rows_per_wave
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // MLA_BASE_TD

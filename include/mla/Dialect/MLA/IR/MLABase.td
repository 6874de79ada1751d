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
    decode, and the ops and attributes its lowering goes through. Today
    `mla-decompose` lowers it to upstream ops for the reference `cpu`
    backend (`--mla-decode-to-cpu`).
  }];
  let useDefaultAttributePrinterParser = 1;
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

#endif // MLA_BASE_TD

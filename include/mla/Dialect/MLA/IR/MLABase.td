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
    The `mla` dialect carries one high-level op, `mla.decode`, through the
    pipeline that lowers it to gfx950 code objects (and to host code for the
    reference `cpu` backend). Later levels add the split-KV ops
    (`mla.partial_decode`, `mla.combine`) and the target/config attributes.
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

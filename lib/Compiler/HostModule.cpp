//===- HostModule.cpp - one decode configuration as a host function -------===//

#include "mla/Compiler/HostModule.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdio>

using namespace mla;

namespace {
std::string kvElementType(CacheFormat format) {
  switch (format) {
  case CacheFormat::BF16:
    return "bf16";
  case CacheFormat::FP8:
    return "f8E4M3FN";
  case CacheFormat::MXFP4:
    return "i8";
  }
  return "";
}
} // namespace

std::string mla::buildHostModuleSource(const KernelSignature &sig) {
  std::string H = std::to_string(sig.numHeads), D = std::to_string(sig.qkDim),
              Dv = std::to_string(sig.vDim);
  std::string width = std::to_string(
      sig.format == CacheFormat::MXFP4 ? sig.qkDim / 2 : sig.qkDim);
  std::string qT = "?x" + H + "x" + D + "xbf16";
  std::string kvT = "?x" + width + "x" + kvElementType(sig.format);
  std::string outT = "?x" + H + "x" + Dv + "xbf16", lseT = "?x" + H + "xf32";
  std::string scaleT;
  if (sig.format == CacheFormat::FP8)
    scaleT = "1xf32";
  else if (sig.format == CacheFormat::MXFP4)
    scaleT = "?x" + std::to_string(sig.qkDim / 32) + "xf8E8M0FNU";

  std::string s;
  llvm::raw_string_ostream os(s);
  os << "func.func @mla_decode(%q: memref<" << qT << ">, %kv: memref<" << kvT
     << ">, %qo: memref<?xi32>, %kvp: memref<?xi32>";
  if (!scaleT.empty())
    os << ", %s: memref<" << scaleT << ">";
  os << ", %out: memref<" << outT << ">, %lse: memref<" << lseT
     << ">) attributes {llvm.emit_c_interface} {\n";
  auto toTensor = [&](const char *name, const std::string &type) {
    os << "  %" << name << "_t = bufferization.to_tensor %" << name
       << " restrict : memref<" << type << "> to tensor<" << type << ">\n";
  };
  toTensor("q", qT);
  toTensor("kv", kvT);
  toTensor("qo", "?xi32");
  toTensor("kvp", "?xi32");
  if (!scaleT.empty())
    toTensor("s", scaleT);
  os << "  %o, %l = mla.decode q(%q_t : tensor<" << qT << ">) kv(%kv_t : tensor<"
     << kvT << ">)";
  if (!scaleT.empty())
    os << " scale(%s_t : tensor<" << scaleT << ">)";
  os << " indptr(%qo_t, %kvp_t : tensor<?xi32>, tensor<?xi32>) {kv_format = "
        "#mla.kv_format<"
     << formatName(sig.format) << ">, v_head_dim = " << sig.vDim;
  if (sig.smScale > 0.0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9e", sig.smScale);
    os << ", sm_scale = " << buf << " : f32";
  }
  os << "} -> tensor<" << outT << ">, tensor<" << lseT << ">\n";
  os << "  bufferization.materialize_in_destination %o in restrict writable "
        "%out : (tensor<"
     << outT << ">, memref<" << outT << ">) -> ()\n";
  os << "  bufferization.materialize_in_destination %l in restrict writable "
        "%lse : (tensor<"
     << lseT << ">, memref<" << lseT << ">) -> ()\n";
  os << "  return\n}\n";
  return s;
}

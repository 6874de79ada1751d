//===- CpuBackend.cpp - run mla.decode on the host ------------------------===//
//
// The `cpu` backend: the artifact's reference form (one mla.decode in a host
// function over memrefs) lowered with mla-decode-to-cpu or the split
// pipeline and run in-process through MLIR's ExecutionEngine. The lowered
// code plans and allocates for itself: it is the reference, not a model of
// the device's memory discipline.
//
//===----------------------------------------------------------------------===//

#include "Backend.h"

#include "mla/Runtime/HostModule.h"
#include "mla/Runtime/MemRefDescriptor.h"
#include "mla/Runtime/Status.h"

#include "mla/Runtime/JitSupport.h"

#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Target/SplitPlanner.h"
#include "mla/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

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

/// What `mla.plan_splits` calls on the host (see kPlanSplitsFunctionName):
/// the runtime's planner on the kv lengths, written into the caller's
/// buffers. Returns the number of work items, or 0 (outputs stay zero) when
/// the lengths cannot be planned — mla-run validates them before a call.
int64_t planSplitsForHost(StridedMemRefType<int32_t, 1> *kvIndptr,
                          StridedMemRefType<int32_t, 2> *workItems,
                          StridedMemRefType<int32_t, 1> *itemIndptr,
                          int64_t computeUnits, int64_t kvTile,
                          int64_t uniformSplits) {
  int64_t numSeqs = kvIndptr->sizes[0] - 1;
  auto indptr = [&](int64_t i) {
    return kvIndptr->data[kvIndptr->offset + i * kvIndptr->strides[0]];
  };
  std::vector<int64_t> lens;
  for (int64_t b = 0; b < numSeqs; ++b)
    lens.push_back((int64_t)indptr(b + 1) - indptr(b));
  SplitOptions options;
  options.kvTile = kvTile;
  options.forcedSplits = uniformSplits;
  auto list = planSplits(computeUnits, lens, options);
  if (!list) {
    llvm::errs() << "mla_plan_splits: " << llvm::toString(list.takeError())
                 << "\n";
    return 0;
  }
  if (list->numItems() > workItems->sizes[0]) {
    llvm::errs() << "mla_plan_splits: " << list->numItems()
                 << " work items exceed the buffer of " << workItems->sizes[0]
                 << "\n";
    return 0;
  }
  for (int64_t i = 0; i < list->numItems(); ++i) {
    const WorkItem &item = list->items[i];
    int32_t fields[4] = {item.seq, item.kvBegin, item.kvEnd, item.partialSlot};
    for (int f = 0; f < 4; ++f)
      workItems->data[workItems->offset + i * workItems->strides[0] +
                      f * workItems->strides[1]] = fields[f];
  }
  for (int64_t b = 0; b <= numSeqs; ++b)
    itemIndptr->data[itemIndptr->offset + b * itemIndptr->strides[0]] =
        list->seqItemIndptr[b];
  return list->numItems();
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

namespace {
/// The reference form of an artifact, lowered with the pipeline its
/// manifest names and JIT-compiled.
class CpuKernel : public rt::LoadedKernel {
public:
  llvm::Error init(const Artifact &artifact);
  llvm::Error launch(const rt::LaunchBuffers &buffers, void *stream) override;

private:
  CacheFormat format = CacheFormat::BF16;
  int64_t numHeads = 0, qkDim = 0, vDim = 0;
  mlir::MLIRContext context;
  std::unique_ptr<mlir::ExecutionEngine> engine;
};

llvm::Error CpuKernel::init(const Artifact &a) {
  format = a.format;
  numHeads = a.numHeads;
  qkDim = a.qkDim;
  vDim = a.vDim;
  prepareContext(context);
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    llvm::raw_string_ostream os(diagnostics);
    os << (diagnostics.empty() ? "" : "; ") << diag;
  });
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(a.cpuModule, &context,
                                              "decode.cpu.mlir");
  if (!module)
    return statusError(Status::InvalidArtifact,
                       "invalid artifact: the reference form does not "
                       "parse: " + diagnostics);
  mlir::PassManager pm(&context);
  if (a.cpuPipeline == "split") {
    DecodeSplitToCPUPipelineOptions options;
    options.target = a.chip;
    options.kvTile = a.cpuKVTile;
    options.splits = a.forcedSplits > 0 ? a.forcedSplits : -1;
    buildDecodeSplitToCPUPipeline(pm, options);
  } else {
    buildDecodeToCPUPipeline(pm, DecodeToCPUPipelineOptions());
  }
  if (mlir::failed(pm.run(*module)))
    return statusError(Status::InvalidArtifact,
                       "invalid artifact: the reference form does not "
                       "compile: " + diagnostics);
  auto jit = createEngine(
      *module, {{("_mlir_ciface_" + kPlanSplitsFunctionName).str(),
                 reinterpret_cast<void *>(&planSplitsForHost)}});
  if (!jit)
    return statusError(Status::Internal,
                       "cpu backend: JIT compilation failed: " +
                           llvm::toString(jit.takeError()));
  engine = std::move(*jit);
  return llvm::Error::success();
}

llvm::Error CpuKernel::launch(const rt::LaunchBuffers &b, void *) {
  int64_t T = b.numTokens, H = numHeads, D = qkDim, N = b.numKVRows;
  int64_t B1 = b.numSeqs + 1;
  auto q = describe<3>(b.q, {T, H, D});
  auto kv = describe<2>(b.kv, {N, format == CacheFormat::MXFP4 ? D / 2 : D});
  auto qo = describe<1>(b.qoIndptr, {B1});
  auto kvp = describe<1>(b.kvIndptr, {B1});
  auto fp8Scale = describe<1>(b.kvScale, {1});
  auto mxScale = describe<2>(b.kvScale, {N, D / 32});
  auto o = describe<3>(b.out, {T, H, vDim});
  auto l = describe<2>(b.lse, {T, H});

  void *qp = &q, *kvP = &kv, *qoP = &qo, *kvpP = &kvp, *oP = &o, *lP = &l;
  void *scaleP =
      format == CacheFormat::FP8 ? (void *)&fp8Scale : (void *)&mxScale;
  llvm::SmallVector<void *> args = {&qp, &kvP, &qoP, &kvpP};
  if (format != CacheFormat::BF16)
    args.push_back(&scaleP);
  args.push_back(&oP);
  args.push_back(&lP);
  if (llvm::Error err = engine->invokePacked("_mlir_ciface_mla_decode", args))
    return statusError(Status::LaunchFailed,
                       "cpu backend: launch failed: " +
                           llvm::toString(std::move(err)));
  return llvm::Error::success();
}

class CpuBackend : public rt::Backend {
public:
  std::string arch() const override { return "host"; }
  bool usesWorkList() const override { return false; }
  llvm::Expected<std::unique_ptr<rt::LoadedKernel>>
  load(const Artifact &artifact) override {
    auto kernel = std::make_unique<CpuKernel>();
    if (llvm::Error err = kernel->init(artifact))
      return std::move(err);
    return std::unique_ptr<rt::LoadedKernel>(std::move(kernel));
  }
};
} // namespace

std::unique_ptr<rt::Backend> mla::rt::createCpuBackend() {
  return std::make_unique<CpuBackend>();
}

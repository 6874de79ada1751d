//===- CpuBackend.cpp - run mla.decode on the host ------------------------===//

#include "mla/Runtime/CpuBackend.h"
#include "mla/Runtime/MemRefDescriptor.h"

#include "JitSupport.h"

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
llvm::Error error(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

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

struct CpuKernel::Impl {
  KernelSignature sig;
  mlir::MLIRContext context;
  std::unique_ptr<mlir::ExecutionEngine> engine;
};

CpuKernel::~CpuKernel() = default;

llvm::Expected<std::unique_ptr<CpuKernel>>
CpuKernel::compile(const KernelSignature &sig, bool dumpIR) {
  auto kernel = std::unique_ptr<CpuKernel>(new CpuKernel());
  kernel->impl = std::make_unique<Impl>();
  kernel->impl->sig = sig;
  mlir::MLIRContext &ctx = kernel->impl->context;
  prepareContext(ctx);

  std::string diagnostics;
  llvm::raw_string_ostream diagStream(diagnostics);
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &diag) {
    // The host module is generated here, so its locations mean nothing to
    // the user: report the message alone.
    diagStream << (diagnostics.empty() ? "" : "; ") << diag;
  });
  std::string source = buildHostModuleSource(sig);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(source, &ctx, "mla_decode_host");
  if (!module)
    return error("cpu backend: the host module does not parse: " + diagnostics);

  mlir::PassManager pm(&ctx);
  if (dumpIR) {
    ctx.disableMultithreading();
    pm.enableIRPrinting();
  }
  if (sig.pipeline == HostPipeline::Split) {
    DecodeSplitToCPUPipelineOptions options;
    options.target = sig.target;
    options.kvTile = sig.kvTile;
    options.splits = sig.splits;
    buildDecodeSplitToCPUPipeline(pm, options);
  } else {
    buildDecodeToCPUPipeline(pm, DecodeToCPUPipelineOptions());
  }
  if (mlir::failed(pm.run(*module)))
    return error("cpu backend: " + diagnostics);

  auto engine = createEngine(
      *module, {{("_mlir_ciface_" + kPlanSplitsFunctionName).str(),
                 reinterpret_cast<void *>(&planSplitsForHost)}});
  if (!engine)
    return error("cpu backend: JIT compilation failed: " +
                 llvm::toString(engine.takeError()));
  kernel->impl->engine = std::move(*engine);
  return kernel;
}

llvm::Error CpuKernel::run(const DecodeProblem &p, std::vector<uint16_t> &out,
                           std::vector<float> &lse) {
  const KernelSignature &sig = impl->sig;
  if (p.format != sig.format || p.numHeads != sig.numHeads ||
      p.qkDim != sig.qkDim || p.vDim != sig.vDim)
    return error("cpu backend: problem does not match the compiled kernel");
  if (llvm::Error err = validateProblem(p))
    return err;
  int64_t T = p.numTokens, H = p.numHeads, D = p.qkDim, N = p.numRows;
  int64_t B1 = p.qoIndptr.size();
  out.assign(T * H * p.vDim, 0);
  lse.assign(T * H, 0.0f);

  auto q = describe<3>(p.q.data(), {T, H, D});
  auto kv = describe<2>(p.kv.data(),
                        {N, p.format == CacheFormat::MXFP4 ? D / 2 : D});
  auto qo = describe<1>(p.qoIndptr.data(), {B1});
  auto kvp = describe<1>(p.kvIndptr.data(), {B1});
  auto fp8Scale = describe<1>(&p.fp8Scale, {1});
  auto mxScale = describe<2>(p.mxScales.data(), {N, D / 32});
  auto o = describe<3>(out.data(), {T, H, p.vDim});
  auto l = describe<2>(lse.data(), {T, H});

  void *qp = &q, *kvP = &kv, *qoP = &qo, *kvpP = &kvp, *oP = &o, *lP = &l;
  void *scaleP = p.format == CacheFormat::FP8 ? (void *)&fp8Scale
                                              : (void *)&mxScale;
  llvm::SmallVector<void *> args = {&qp, &kvP, &qoP, &kvpP};
  if (p.format != CacheFormat::BF16)
    args.push_back(&scaleP);
  args.push_back(&oP);
  args.push_back(&lP);
  if (llvm::Error err = impl->engine->invokePacked("_mlir_ciface_mla_decode", args))
    return error("cpu backend: kernel launch failed: " +
                 llvm::toString(std::move(err)));
  return llvm::Error::success();
}

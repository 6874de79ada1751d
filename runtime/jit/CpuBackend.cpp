//===- CpuBackend.cpp - run mla.decode on the host ------------------------===//
//
// The `cpu` backend: the artifact's reference form (one mla.decode in a host
// function over memrefs) lowered with mla-decode-to-cpu or the split
// pipeline and run in-process through MLIR's ExecutionEngine. The lowered
// code plans and allocates for itself: it is the reference, not a model of
// the device's memory discipline.
//
//===----------------------------------------------------------------------===//

#include "JitBackends.h"

#include "mla/Compiler/Embedding.h"
#include "mla/Jit/JitSupport.h"
#include "mla/Jit/MemRefDescriptor.h"
#include "mla/Runtime/Backend.h"
#include "mla/Runtime/SplitPlanner.h"
#include "mla/Support/StatusError.h"
#include "mla/Transforms/Passes.h"

#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

using namespace mla;

namespace {
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
    llvm::errs() << "mla_plan_splits: " << list.takeError().message() << "\n";
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

/// The reference form of an artifact, lowered with the pipeline its
/// manifest names and JIT-compiled.
class CpuKernel : public rt::LoadedKernel {
public:
  llvm::Error init(const Artifact &artifact);
  rt::Error launch(const rt::LaunchBuffers &buffers, void *) override {
    return toRuntimeError(run(buffers));
  }

private:
  llvm::Error run(const rt::LaunchBuffers &buffers);

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
    DecodePipelineOptions options;
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

llvm::Error CpuKernel::run(const rt::LaunchBuffers &b) {
  int64_t T = b.numTokens, H = numHeads, D = qkDim, N = b.numKVRows;
  int64_t B1 = b.numSeqs + 1, P = b.pageSize;
  int64_t width = format == CacheFormat::MXFP4 ? D / 2 : D;
  auto q = describe<3>(b.q, {T, H, D});
  // A paged cache is [num_pages, P, width] (mla_decode's signature).
  auto kv = describe<2>(b.kv, {N, width});
  auto kvPages = describe<3>(b.kv, {P ? N / P : 0, P, width});
  auto qo = describe<1>(b.qoIndptr, {B1});
  auto kvp = describe<1>(b.kvIndptr, {B1});
  auto fp8Scale = describe<1>(b.kvScale, {1});
  auto mxScale = describe<2>(b.kvScale, {N, D / 32});
  auto mxScalePages = describe<3>(b.kvScale, {P ? N / P : 0, P, D / 32});
  auto indices = describe<1>(b.kvIndices, {b.numKVIndices});
  auto lastLen = describe<1>(b.kvLastPageLen, {b.numSeqs});
  auto o = describe<3>(b.out, {T, H, vDim});
  auto l = describe<2>(b.lse, {T, H});

  void *qp = &q, *kvP = P ? (void *)&kvPages : (void *)&kv, *qoP = &qo,
       *kvpP = &kvp, *oP = &o, *lP = &l, *indicesP = &indices,
       *lastLenP = &lastLen;
  void *scaleP = format == CacheFormat::FP8 ? (void *)&fp8Scale
                 : P                        ? (void *)&mxScalePages
                                            : (void *)&mxScale;
  llvm::SmallVector<void *> args = {&qp, &kvP, &qoP, &kvpP};
  if (format != CacheFormat::BF16)
    args.push_back(&scaleP);
  if (P) {
    args.push_back(&indicesP);
    args.push_back(&lastLenP);
  }
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
  rt::Expected<std::unique_ptr<rt::LoadedKernel>>
  load(const Artifact &artifact) override {
    auto kernel = std::make_unique<CpuKernel>();
    if (llvm::Error err = kernel->init(artifact))
      return toRuntimeError(std::move(err));
    return std::unique_ptr<rt::LoadedKernel>(std::move(kernel));
  }
};
} // namespace

std::unique_ptr<rt::Backend> mla::jit::createCpuBackend() {
  return std::make_unique<CpuBackend>();
}

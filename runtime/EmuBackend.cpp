//===- EmuBackend.cpp - run the gfx950 kernels on the CPU -----------------===//

#include "mla/Runtime/EmuBackend.h"

#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Emu/Runtime.h"
#include "mla/Target/SplitPlanner.h"
#include "mla/Transforms/Passes.h"

#include "JitSupport.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <cmath>
#include <limits>

using namespace mla;

namespace {
llvm::Error error(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

constexpr int kComputeUnits = 256; // gfx950, as the pipeline's target
constexpr int kThreads = 256;
constexpr int kHeadsPerGroup = 16;
constexpr int kKernelArgs = 11; // of the partial kernel, before its LDS

using PackedFn = void (*)(void **);

/// One host buffer per workgroup-memory argument of a lane function.
struct LdsBuffer {
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
} // namespace

struct EmuKernel::Impl {
  KernelSignature sig;
  mlir::MLIRContext context;
  std::unique_ptr<mlir::ExecutionEngine> engine;
  PackedFn partial = nullptr, combine = nullptr;
  std::vector<LdsBuffer> partialLds;
};

EmuKernel::~EmuKernel() = default;

llvm::Expected<std::unique_ptr<EmuKernel>>
EmuKernel::compile(const KernelSignature &sig, bool dumpIR) {
  if (sig.format != CacheFormat::FP8)
    return error(llvm::Twine("emu backend: the gfx950 kernels support fp8 KV "
                             "caches so far, not ") +
                 formatName(sig.format));
  auto kernel = std::unique_ptr<EmuKernel>(new EmuKernel());
  kernel->impl = std::make_unique<Impl>();
  Impl &impl = *kernel->impl;
  impl.sig = sig;
  mlir::MLIRContext &ctx = impl.context;
  prepareContext(ctx);

  std::string diagnostics;
  llvm::raw_string_ostream diagStream(diagnostics);
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &diag) {
    diagStream << (diagnostics.empty() ? "" : "; ") << diag;
  });
  auto module = mlir::parseSourceString<mlir::ModuleOp>(
      buildHostModuleSource(sig), &ctx, "mla_decode_host");
  if (!module)
    return error("emu backend: the host module does not parse: " +
                 diagnostics);

  // The gfx950 kernels at the MFMA level, as lane functions.
  mlir::PassManager kernels(&ctx);
  if (dumpIR) {
    ctx.disableMultithreading();
    kernels.enableIRPrinting();
  }
  DecodeToEmuPipelineOptions options;
  options.splits = sig.splits;
  options.testCorruptLayout = sig.testCorruptLayout;
  buildDecodeToEmuKernelsPipeline(kernels, options);
  if (mlir::failed(kernels.run(*module)))
    return error("emu backend: " + diagnostics);

  // Workgroup memory of the partial kernel: its arguments after the kernel's.
  auto partialFn =
      module->lookupSymbol<mlir::func::FuncOp>("mla_partial_decode_lane");
  if (!partialFn ||
      !module->lookupSymbol<mlir::func::FuncOp>("mla_combine_lane"))
    return error("emu backend: the kernels are missing after mla-gpu-to-emu");
  mlir::FunctionType type = partialFn.getFunctionType();
  for (unsigned i = kKernelArgs; i + 1 < type.getNumInputs(); ++i) {
    auto memref = llvm::cast<mlir::MemRefType>(type.getInput(i));
    LdsBuffer buffer;
    buffer.shape.assign(memref.getShape().begin(), memref.getShape().end());
    buffer.bytes.resize(memref.getNumElements() *
                        memref.getElementTypeBitWidth() / 8);
    impl.partialLds.push_back(std::move(buffer));
  }

  mlir::PassManager host(&ctx);
  if (dumpIR)
    host.enableIRPrinting();
  addHostLoweringPasses(host);
  if (mlir::failed(host.run(*module)))
    return error("emu backend: " + diagnostics);
  auto engine = createEngine(*module, emu::runtimeSymbols());
  if (!engine)
    return error("emu backend: JIT compilation failed: " +
                 llvm::toString(engine.takeError()));
  impl.engine = std::move(*engine);
  auto partial = impl.engine->lookupPacked("_mlir_ciface_mla_partial_decode_lane");
  auto combine = impl.engine->lookupPacked("_mlir_ciface_mla_combine_lane");
  if (!partial || !combine) {
    llvm::consumeError(partial.takeError());
    llvm::consumeError(combine.takeError());
    return error("emu backend: the lane functions are not in the JIT");
  }
  impl.partial = *partial;
  impl.combine = *combine;
  return kernel;
}

llvm::Error EmuKernel::run(const DecodeProblem &p, std::vector<uint16_t> &out,
                           std::vector<float> &lse) {
  Impl &impl = *this->impl;
  const KernelSignature &sig = impl.sig;
  if (p.format != sig.format || p.numHeads != sig.numHeads ||
      p.qkDim != sig.qkDim || p.vDim != sig.vDim)
    return error("emu backend: problem does not match the compiled kernel");
  if (llvm::Error err = validateProblem(p))
    return err;
  int64_t T = p.numTokens, H = p.numHeads, Dqk = p.qkDim, Dv = p.vDim;
  int64_t N = p.numRows, B1 = p.qoIndptr.size(), B = B1 - 1;

  // The work list, as the runtime plans it for the chip.
  std::vector<int64_t> lens;
  for (int64_t b = 0; b < B; ++b)
    lens.push_back((int64_t)p.kvIndptr[b + 1] - p.kvIndptr[b]);
  SplitOptions options;
  options.forcedSplits = sig.splits > 0 ? sig.splits : 0;
  auto plan = planSplits(kComputeUnits, lens, options);
  if (!plan)
    return plan.takeError();
  int64_t numItems = plan->numItems();
  std::vector<int32_t> items;
  for (const WorkItem &item : plan->items)
    items.insert(items.end(),
                 {item.seq, item.kvBegin, item.kvEnd, item.partialSlot});
  const std::vector<int32_t> &itemIndptr = plan->seqItemIndptr;

  std::vector<float> partialOut(numItems * kMaxQueryTokens * H * Dv, 0.0f);
  std::vector<float> partialLse(numItems * kMaxQueryTokens * H,
                                -std::numeric_limits<float>::infinity());
  out.assign(T * H * Dv, 0);
  lse.assign(T * H, -std::numeric_limits<float>::infinity());

  // Descriptors of the kernels' arguments.
  std::vector<std::vector<int64_t>> partialArgs = {
      makeDescriptor(p.q.data(), {T, H, Dqk}),
      makeDescriptor(p.kv.data(), {N, Dqk}),
      makeDescriptor(&p.fp8Scale, {1}),
      makeDescriptor(p.qoIndptr.data(), {B1}),
      makeDescriptor(p.kvIndptr.data(), {B1}),
      makeDescriptor(items.data(), {numItems, 4}),
      makeDescriptor(partialOut.data(), {numItems, kMaxQueryTokens, H, Dv}),
      makeDescriptor(partialLse.data(), {numItems, kMaxQueryTokens, H}),
      makeDescriptor(itemIndptr.data(), {B1}),
      makeDescriptor(out.data(), {T, H, Dv}),
      makeDescriptor(lse.data(), {T, H})};
  for (LdsBuffer &buffer : impl.partialLds)
    partialArgs.push_back(makeDescriptor(buffer.bytes.data(), buffer.shape));
  std::vector<std::vector<int64_t>> combineArgs = {
      makeDescriptor(partialOut.data(), {numItems, kMaxQueryTokens, H, Dv}),
      makeDescriptor(partialLse.data(), {numItems, kMaxQueryTokens, H}),
      makeDescriptor(itemIndptr.data(), {B1}),
      makeDescriptor(p.qoIndptr.data(), {B1}),
      makeDescriptor(out.data(), {T, H, Dv}),
      makeDescriptor(lse.data(), {T, H})};

  // Launch: every workgroup's lanes are fibers calling the packed lane
  // function with pointers to the descriptor pointers and to their context.
  emu::WorkgroupRunner runner(kThreads);
  auto launch = [&](PackedFn fn, std::vector<std::vector<int64_t>> &args,
                    std::array<int64_t, 3> grid) -> llvm::Error {
    std::vector<void *> descriptors;
    for (auto &d : args)
      descriptors.push_back(d.data());
    for (int64_t y = 0; y < grid[1]; ++y)
      for (int64_t x = 0; x < grid[0]; ++x) {
        auto lane = [&](int64_t ctx) {
          std::vector<void *> packed;
          for (void *&d : descriptors)
            packed.push_back(&d);
          int64_t context = ctx;
          packed.push_back(&context);
          fn(packed.data());
        };
        if (llvm::Error err = runner.run({x, y, 0}, lane))
          return err;
      }
    return llvm::Error::success();
  };
  if (llvm::Error err = launch(impl.partial, partialArgs,
                               {numItems, H / kHeadsPerGroup, 1}))
    return err;
  return launch(impl.combine, combineArgs, {B, 1, 1});
}

//===- EmuBackend.cpp - the gfx950 kernels on the CPU ---------------------===//
//
// The `emu` backend: loads an artifact's emu form (the gfx950 kernels at the
// MFMA level as host lane functions, from mla-gpu-to-emu), JIT-compiles it
// and launches it like a GPU would: every workgroup's lanes run as fibers
// with exact MFMA semantics, LDS DMAs in flight until a wait retires them
// and every LDS access checked for hazards (docs/emu.md), the partial kernel
// over the plan's work list, then the combine kernel. Arguments are bound by
// name and shape from the artifact's launch metadata, as the hip backend
// binds them.
//
//===----------------------------------------------------------------------===//

#include "JitBackends.h"

#include "mla/Compiler/Embedding.h"
#include "mla/Emu/CacheTraffic.h"
#include "mla/Emu/Runtime.h"
#include "mla/Jit/JitSupport.h"
#include "mla/Runtime/Backend.h"
#include "mla/Support/StatusError.h"
#include "mla/Target/KnownTargets.h"
#include "mla/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

using namespace mla;
using namespace mla::rt;

namespace {
using PackedFn = void (*)(void **);

/// A kernel as lane function: its launch description and the shapes of its
/// workgroup memory (the lane function's arguments after the kernel's).
struct LaneKernel {
  ArtifactKernel desc;
  PackedFn fn = nullptr;
  std::vector<std::vector<int64_t>> ldsShapes;
  std::vector<int64_t> ldsBytes;
};

/// The cache-traffic model of a context (mla_kv_traffic): totals over the
/// modelled launches; launches on several threads add to it.
class TrafficTotals {
public:
  void enable(bool on) {
    std::lock_guard<std::mutex> lock(mutex);
    enabled = on;
    if (on)
      totals = KVTraffic();
  }
  bool isEnabled() const {
    std::lock_guard<std::mutex> lock(mutex);
    return enabled;
  }
  void add(const KVTraffic &launch) {
    std::lock_guard<std::mutex> lock(mutex);
    totals.cacheBytes += launch.cacheBytes;
    totals.dmaBytes += launch.dmaBytes;
    totals.otherXcdBytes += launch.otherXcdBytes;
    totals.maxSlotSpan = std::max(totals.maxSlotSpan, launch.maxSlotSpan);
    totals.xcds = launch.xcds;
    totals.cusPerXcd = launch.cusPerXcd;
  }
  KVTraffic get() const {
    std::lock_guard<std::mutex> lock(mutex);
    return totals;
  }

private:
  mutable std::mutex mutex;
  bool enabled = false;
  KVTraffic totals;
};

/// How a context's launches run (mla_emu_check_hazards,
/// mla_emu_schedule_seed); launches on several threads read it.
struct EmuSettings {
  std::atomic<bool> checkHazards{true};
  std::atomic<uint64_t> scheduleSeed{0};
};

class EmuKernel : public LoadedKernel {
public:
  EmuKernel(TrafficTotals &traffic, const EmuSettings &settings)
      : traffic(traffic), settings(settings) {}
  llvm::Error init(const Artifact &artifact);
  rt::Error launch(const LaunchBuffers &buffers, void *stream) override;

private:
  rt::Error run(LaneKernel &kernel, const LaunchBuffers &buffers,
                emu::CacheReadTracker *tracker);
  /// The cache buffers' bytes: kv, and mxfp4's block scales (the only
  /// buffers the partial kernel DMAs from).
  rt::Error trackCache(const LaunchBuffers &buffers,
                       emu::CacheReadTracker &tracker);

  TrafficTotals &traffic;
  const EmuSettings &settings;
  const TargetInfo *target = nullptr;
  CacheFormat format = CacheFormat::FP8;

  mlir::MLIRContext context;
  std::unique_ptr<mlir::ExecutionEngine> engine;
  LaneKernel partial, combine, plan;
};

llvm::Error EmuKernel::init(const Artifact &artifact) {
  target = lookupTarget(artifact.chip);
  if (!target)
    return statusError(Status::TargetMismatch,
                       "the emu backend does not know chip " + artifact.chip);
  format = artifact.format;
  prepareContext(context);
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    llvm::raw_string_ostream os(diagnostics);
    os << (diagnostics.empty() ? "" : "; ") << diag;
  });
  auto module = mlir::parseSourceString<mlir::ModuleOp>(
      artifact.emuModule, &context, "kernels.emu.mlir");
  if (!module)
    return statusError(Status::InvalidArtifact,
                       "invalid artifact: the emu form does not parse: " +
                           diagnostics);
  LaneKernel *kernels[3] = {&partial, &combine, &plan};
  for (int i = 0; i < 3; ++i) {
    LaneKernel &k = *kernels[i];
    k.desc = artifact.kernels[i];
    auto lane = module->lookupSymbol<mlir::func::FuncOp>(k.desc.name + "_lane");
    if (!lane)
      return statusError(Status::InvalidArtifact,
                         "invalid artifact: the emu form has no kernel " +
                             k.desc.name);
    mlir::FunctionType type = lane.getFunctionType();
    // Kernel arguments, workgroup memory, then the lane context.
    if (type.getNumInputs() < k.desc.args.size() + 1)
      return statusError(Status::InvalidArtifact,
                         "invalid artifact: the emu kernel " + k.desc.name +
                             " does not take the manifest's arguments");
    for (unsigned a = k.desc.args.size(); a + 1 < type.getNumInputs(); ++a) {
      auto memref = llvm::dyn_cast<mlir::MemRefType>(type.getInput(a));
      if (!memref || !memref.hasStaticShape())
        return statusError(Status::InvalidArtifact,
                           "invalid artifact: workgroup memory of " +
                               k.desc.name + " is not a static memref");
      k.ldsShapes.emplace_back(memref.getShape().begin(),
                               memref.getShape().end());
      k.ldsBytes.push_back(memref.getNumElements() *
                           memref.getElementTypeBitWidth() / 8);
    }
  }

  mlir::PassManager host(&context);
  addHostLoweringPasses(host);
  if (mlir::failed(host.run(*module)))
    return statusError(Status::Internal, "emu backend: " + diagnostics);
  auto jit = createEngine(*module, emu::runtimeSymbols());
  if (!jit)
    return statusError(Status::Internal, "emu backend: JIT compilation failed: " +
                                             llvm::toString(jit.takeError()));
  engine = std::move(*jit);
  for (LaneKernel *k : kernels) {
    auto fn = engine->lookupPacked("_mlir_ciface_" + k->desc.name + "_lane");
    if (!fn)
      return statusError(Status::Internal,
                         "emu backend: lane function of " + k->desc.name +
                             " is not in the JIT: " +
                             llvm::toString(fn.takeError()));
    k->fn = *fn;
  }
  return llvm::Error::success();
}

rt::Error EmuKernel::trackCache(const LaunchBuffers &buffers,
                                emu::CacheReadTracker &tracker) {
  for (const ArtifactKernelArg &arg : partial.desc.args) {
    bool isCache = arg.name == arg::kKV ||
                   (arg.name == arg::kKVScale && format == CacheFormat::MXFP4);
    if (!isCache)
      continue;
    int64_t bytes = arg.name == arg::kKV && format == CacheFormat::BF16 ? 2 : 1;
    for (const std::string &d : arg.dims) {
      auto size = buffers.resolve(d);
      if (!size)
        return size.takeError();
      bytes *= *size;
    }
    auto ptr = buffers.pointer(arg.name);
    if (!ptr)
      return ptr.takeError();
    tracker.addRange(arg.name, *ptr, bytes);
  }
  return rt::Error::success();
}

rt::Error EmuKernel::run(LaneKernel &kernel, const LaunchBuffers &buffers,
                         emu::CacheReadTracker *tracker) {
  // Descriptors of the arguments, then private workgroup memory: this
  // launch's own, so concurrent launches never share it.
  std::vector<std::vector<int64_t>> descriptors;
  for (const ArtifactKernelArg &arg : kernel.desc.args) {
    auto ptr = buffers.pointer(arg.name);
    if (!ptr)
      return ptr.takeError();
    std::vector<int64_t> shape;
    for (const std::string &d : arg.dims) {
      auto size = buffers.resolve(d);
      if (!size)
        return size.takeError();
      shape.push_back(*size);
    }
    descriptors.push_back(makeDescriptor(*ptr, shape));
  }
  // The workgroup buffers lie in one block, as in a CU's LDS: hazards are
  // reported as offsets in it. Each starts 1024-byte aligned (sm_90a's
  // swizzled wgmma operands need it).
  std::vector<int64_t> ldsOffsets;
  int64_t ldsTotal = 0;
  for (int64_t bytes : kernel.ldsBytes) {
    ldsOffsets.push_back(ldsTotal);
    ldsTotal += (bytes + 1023) / 1024 * 1024;
  }
  // Aligned to 256 KiB, as a shared window: an sm_90a wgmma descriptor's
  // 18-bit address is then the low bits of the host address.
  constexpr size_t kLdsAlignment = size_t(1) << 18;
  size_t ldsAllocated = std::max<size_t>(
      (static_cast<size_t>(ldsTotal) + kLdsAlignment - 1) / kLdsAlignment *
          kLdsAlignment,
      kLdsAlignment);
  std::unique_ptr<char, void (*)(void *)> ldsBlock(
      static_cast<char *>(std::aligned_alloc(kLdsAlignment, ldsAllocated)),
      &std::free);
  if (!ldsBlock)
    return rt::Error(Status::Internal,
                     "emu backend: cannot allocate the workgroup memory");
  char *lds = ldsBlock.get();
  std::memset(lds, 0, ldsAllocated);
  for (size_t i = 0; i < kernel.ldsShapes.size(); ++i)
    descriptors.push_back(
        makeDescriptor(lds + ldsOffsets[i], kernel.ldsShapes[i]));
  std::vector<void *> words;
  for (auto &d : descriptors)
    words.push_back(d.data());

  std::array<int64_t, 3> grid;
  for (int i = 0; i < 3; ++i) {
    auto size = buffers.resolve(kernel.desc.grid[i]);
    if (!size)
      return size.takeError();
    grid[i] = *size;
  }
  emu::WorkgroupRunner runner(kernel.desc.block[0] * kernel.desc.block[1] *
                              kernel.desc.block[2]);
  emu::DmaObserver observer = [&](const void *src, int64_t bytes) {
    tracker->read(src, bytes);
  };
  emu::WorkgroupOptions options;
  options.lds = lds;
  options.ldsBytes = ldsTotal;
  options.checkHazards = settings.checkHazards;
  options.scheduleSeed = settings.scheduleSeed;
  options.dma = tracker ? &observer : nullptr;
  options.grid = grid;
  for (int64_t z = 0; z < grid[2]; ++z)
    for (int64_t y = 0; y < grid[1]; ++y)
      for (int64_t x = 0; x < grid[0]; ++x) {
        // Workgroups in dispatch order: linear ids, x fastest.
        if (tracker)
          tracker->setWorkgroup(x + grid[0] * (y + grid[1] * z));
        auto lane = [&](int64_t ctx) { emu::callLane(kernel.fn, words, ctx); };
        if (llvm::Error err = runner.run({x, y, z}, lane, options))
          return rt::fail(Status::LaunchFailed, "emu: kernel ",
                          kernel.desc.name, " failed: ",
                          llvm::toString(std::move(err)));
        if (tracker && tracker->outOfBounds())
          return rt::fail(Status::LaunchFailed, "emu: kernel ",
                          kernel.desc.name, ": ", *tracker->outOfBounds());
      }
  return rt::Error::success();
}

rt::Error EmuKernel::launch(const LaunchBuffers &buffers, void *) {
  bool modelTraffic = traffic.isEnabled();
  int xcds = std::max(1, target->xcds);
  emu::CacheReadTracker tracker(xcds, std::max(1, target->computeUnits / xcds),
                                modelTraffic);
  if (rt::Error err = trackCache(buffers, tracker))
    return err;
  if (buffers.runs(plan.desc))
    if (rt::Error err = run(plan, buffers, nullptr))
      return err;
  if (!buffers.runs(partial.desc))
    return rt::Error::success();
  if (rt::Error err = run(partial, buffers, &tracker))
    return err;
  if (modelTraffic)
    traffic.add(tracker.result());
  if (!buffers.runs(combine.desc))
    return rt::Error::success();
  return run(combine, buffers, nullptr);
}

class EmuBackend : public Backend {
public:
  std::string arch() const override { return emulatedArch().arch.str(); }
  rt::Expected<std::unique_ptr<LoadedKernel>>
  load(const Artifact &artifact) override {
    const ArchInfo *chip = lookupArch(artifact.chip);
    if (!chip || !chip->emulated)
      return rt::fail(Status::TargetMismatch, "the artifact is built for ",
                      artifact.chip, "; the emu backend runs gfx950 and "
                      "sm_90a kernels");
    if (artifact.emuModule.empty())
      return rt::fail(Status::BackendUnavailable,
                      "the artifact has no emu form (compiled without it); "
                      "recompile it with the emu form or use the cpu backend");
    auto kernel = std::make_unique<EmuKernel>(traffic, settings);
    if (llvm::Error err = kernel->init(artifact))
      return toRuntimeError(std::move(err));
    return std::unique_ptr<LoadedKernel>(std::move(kernel));
  }
  rt::Error modelKVTraffic(bool enable) override {
    traffic.enable(enable);
    return rt::Error::success();
  }
  rt::Expected<KVTraffic> kvTraffic() const override {
    return traffic.get();
  }
  rt::Error checkHazards(bool enable) override {
    settings.checkHazards = enable;
    return rt::Error::success();
  }
  rt::Error scheduleSeed(uint64_t seed) override {
    settings.scheduleSeed = seed;
    return rt::Error::success();
  }

private:
  TrafficTotals traffic;
  EmuSettings settings;
};
} // namespace

std::unique_ptr<Backend> mla::jit::createEmuBackend() {
  return std::make_unique<EmuBackend>();
}

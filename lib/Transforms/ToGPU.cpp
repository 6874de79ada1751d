//===- ToGPU.cpp - split-level ops -> gfx950 kernels (L2 -> L3) -----------===//
//
// Distribution: every mla.partial_decode / mla.combine becomes a kernel in a
// `gpu.module` for the target chip, and the host op records which kernel
// runs it (`mla.kernel`) and how (`mla.launch` on the kernel: grid, block,
// LDS bytes, arguments). The host ops stay as the reference semantics; the
// runtime launches the kernels.
//
// The partial kernel is built from the decode's PartialKernelPlan (the same
// plan the config verifier checks against the target), stage by stage:
// GFX950Kernels.h lists the stages, one file each, and what each format
// does differently. The combine kernel is CombineKernel.cpp.
//
//===----------------------------------------------------------------------===//

#include "GFX950Kernels.h"
#include "InputLevel.h"

#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Runtime/SplitPlanner.h"
#include "mla/Target/KnownTargets.h"
#include "mla/Transforms/Passes.h"

// The dialects the pass's kernels use (its dependentDialects).
#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/ROCDLDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

namespace mla {
#define GEN_PASS_DEF_MLATOGPUPASS
#include "mla/Transforms/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

namespace {
struct MLAToGPUPass : public mla::impl::MLAToGPUPassBase<MLAToGPUPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<PartialDecodeOp> partials;
    SmallVector<CombineOp> combines;
    module.walk([&](PartialDecodeOp op) { partials.push_back(op); });
    module.walk([&](CombineOp op) { combines.push_back(op); });
    if (failed(requireSplitLevel(module, getArgument())))
      return signalPassFailure();
    if (partials.empty() && combines.empty())
      return;

    // The chip comes from the planner op that feeds the work list.
    if (!llvm::is_contained({"", "drop-tile-barrier", "short-wait",
                             "drop-max-barrier", "drop-loop-barrier"},
                            StringRef(testHazard))) {
      module.emitError("mla-to-gpu: unknown test-hazard '")
          << testHazard
          << "' (drop-tile-barrier, short-wait, drop-max-barrier or "
             "drop-loop-barrier)";
      return signalPassFailure();
    }
    // The chip comes from the planner op that feeds the work list (the
    // default target's when a test builds the op without one).
    const TargetInfo &fallbackTarget = *lookupTarget(defaultTargetName());
    const ArchInfo &fallback = *fallbackTarget.arch;
    std::string chip = fallback.arch.str();
    struct Facts {
      int64_t xcds, workgroups, ldsLimit;
      PlanKernelFacts plan;
    };
    DenseMap<Operation *, Facts> factsOf;
    for (PartialDecodeOp op : partials) {
      int64_t xcds = 1, ldsLimit = fallback.ldsBytesPerCU;
      int64_t computeUnits = fallbackTarget.computeUnits;
      ConfigAttr config = op.getConfig();
      if (auto plan = op.getWorkItems().getDefiningOp<PlanSplitsOp>()) {
        TargetAttr target = plan.getTarget();
        if (target.getWaveSize() != PartialKernelPlan::kWaveSize) {
          op.emitOpError("the gfx950 kernels need a wave64 target; '")
              << target.getName() << "' has wave size "
              << target.getWaveSize();
          return signalPassFailure();
        }
        chip = target.getArch().str();
        xcds = std::max<int64_t>(1, target.getXcds());
        ldsLimit = target.getLdsBytes();
        computeUnits = target.getComputeUnits();
        config = plan.getConfig();
      }
      // The persistent grid: one workgroup per CU (a workgroup's waves
      // fill the CU's SIMDs), as many on every XCD.
      int64_t workgroups = std::max<int64_t>(1, computeUnits / xcds) * xcds;
      PartialKernel kernel(op, xcds, workgroups, ldsLimit);
      if (std::optional<std::string> why = kernel.unsupported()) {
        op.emitOpError(*why);
        return signalPassFailure();
      }
      // The device planner plans as the host's does (SplitOptions).
      SplitOptions defaults;
      PlanKernelFacts plan = {
          computeUnits,
          workgroups,
          xcds,
          config.getKvTile(),
          config.getSplitPolicy() == SplitPolicy::uniform ? config.getSplits()
                                                          : 0,
          defaults.minTilesPerItem,
          defaults.maxSplitsPerSeq,
          defaults.unitOverhead,
          op.getNumHeads(),
          op.getQKHeadDim(),
          kernel.headsPerBlock(),
          kernel.rowsPerWorkgroup(),
          op.getPageSize()};
      factsOf[op] = {xcds, workgroups, ldsLimit, plan};
    }

    MLIRContext *ctx = &getContext();
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(ctx));
    OpBuilder mb(ctx);
    mb.setInsertionPointToEnd(module.getBody());
    auto gpuModule = gpu::GPUModuleOp::create(
        mb, module.getLoc(), "mla_kernels",
        mb.getArrayAttr({ROCDL::ROCDLTargetAttr::get(ctx, /*optLevel=*/3,
                                                     "amdgcn-amd-amdhsa",
                                                     chip)}));
    SymbolTable symbols(gpuModule);
    OpBuilder kb(ctx);
    kb.setInsertionPointToStart(gpuModule.getBody());
    auto record = [&](Operation *hostOp, gpu::GPUFuncOp kernel) {
      symbols.insert(kernel);
      hostOp->setAttr(MLADialect::kKernelAttrName,
                      SymbolRefAttr::get(ctx, gpuModule.getName(),
                                         {FlatSymbolRefAttr::get(kernel)}));
    };
    for (PartialDecodeOp op : partials)
      record(op, PartialKernel(op, factsOf[op].xcds, factsOf[op].workgroups,
                               factsOf[op].ldsLimit, testHazard)
                     .build(kb, kernel::kPartial));
    for (CombineOp op : combines)
      record(op, buildCombineKernel(op, kb, kernel::kCombine));
    // The device planner, launched before the partial kernel by device
    // plans (the host ops keep the host planner).
    for (PartialDecodeOp op : partials)
      symbols.insert(
          buildPlanKernel(factsOf[op].plan, op.getLoc(), kb, kernel::kPlan));
  }
};
} // namespace

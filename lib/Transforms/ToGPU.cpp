//===- ToGPU.cpp - split-level ops -> GPU kernels (L2 -> L3) --------------===//
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
// does differently. For an NVIDIA target (sm_90a) it is the SM90 kernel
// (SM90Kernels.h) in a gpu.module for NVVM. The combine and plan kernels
// (CombineKernel.cpp, PlanKernel.cpp) serve both.
//
//===----------------------------------------------------------------------===//

#include "GFX950Kernels.h"
#include "InputLevel.h"
#include "SM90Kernels.h"

#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Runtime/SplitPlanner.h"
#include "mla/Target/KnownTargets.h"
#include "mla/Transforms/Passes.h"

// The dialects the pass's kernels use (its dependentDialects).
#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/LLVMIR/ROCDLDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
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
                             "drop-max-barrier", "drop-loop-barrier",
                             "unguarded-scale-load"},
                            StringRef(testHazard))) {
      module.emitError("mla-to-gpu: unknown test-hazard '")
          << testHazard
          << "' (drop-tile-barrier, short-wait, drop-max-barrier, "
             "drop-loop-barrier or unguarded-scale-load)";
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
      int64_t xcds = 1, ldsLimit = fallback.ldsBytesPerWorkgroup;
      int64_t computeUnits = fallbackTarget.computeUnits;
      ConfigAttr config = op.getConfig();
      if (auto plan = op.getWorkItems().getDefiningOp<PlanSplitsOp>()) {
        TargetAttr target = plan.getTarget();
        chip = target.getArch().str();
        if (!isNVIDIAArch(chip) &&
            target.getWaveSize() != PartialKernelPlan::kWaveSize) {
          op.emitOpError("the gfx950 kernels need a wave64 target; '")
              << target.getName() << "' has wave size "
              << target.getWaveSize();
          return signalPassFailure();
        }
        xcds = std::max<int64_t>(1, target.getXcds());
        ldsLimit = target.getLdsBytes();
        computeUnits = target.getComputeUnits();
        config = plan.getConfig();
      }
      if (!requiredArch.empty() && chip != requiredArch) {
        op.emitOpError("this pipeline builds ")
            << requiredArch << " kernels; the target's chip is " << chip
            << " (name an " << requiredArch << " target: sm_90a, h200, h100)";
        return signalPassFailure();
      }
      std::optional<std::string> why;
      int64_t workgroups, headsPerBlock, rowsPerWorkgroup;
      if (isNVIDIAArch(chip)) {
        // Blocks per SM by the plan; the chip deals blocks to SMs itself.
        xcds = 1;
        workgroups = SM90KernelPlan::workgroups(
            computeUnits, op.getConfig().getRowsPerWave());
        SM90PartialKernel kernel(op, workgroups, ldsLimit);
        why = kernel.unsupported();
        headsPerBlock = kernel.headsPerBlock();
        rowsPerWorkgroup = kernel.rowsPerWorkgroup();
      } else {
        // The persistent grid: one workgroup per CU (a workgroup's waves
        // fill the CU's SIMDs), as many on every XCD.
        workgroups = std::max<int64_t>(1, computeUnits / xcds) * xcds;
        PartialKernel kernel(op, xcds, workgroups, ldsLimit);
        why = kernel.unsupported();
        headsPerBlock = kernel.headsPerBlock();
        rowsPerWorkgroup = kernel.rowsPerWorkgroup();
      }
      if (why) {
        op.emitOpError(*why);
        return signalPassFailure();
      }
      // The device planner plans as the host's does (SplitOptions).
      SplitOptions defaults;
      PlanKernelFacts plan = {
          computeUnits,
          workgroups,
          xcds,
          itemTile(config.getKvTile()),
          config.getSplitPolicy() == SplitPolicy::uniform ? config.getSplits()
                                                          : 0,
          defaults.minTilesPerItem,
          defaults.fineItemsFrom,
          defaults.maxSplitsPerSeq,
          defaults.unitOverhead,
          op.getNumHeads(),
          op.getQKHeadDim(),
          headsPerBlock,
          rowsPerWorkgroup,
          op.getPageSize(),
          isNVIDIAArch(chip) ? "block" : "workgroup"};
      factsOf[op] = {xcds, workgroups, ldsLimit, plan};
    }

    MLIRContext *ctx = &getContext();
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(ctx));
    OpBuilder mb(ctx);
    mb.setInsertionPointToEnd(module.getBody());
    bool nvidia = isNVIDIAArch(chip);
    Attribute targetAttr =
        nvidia ? Attribute(NVVM::NVVMTargetAttr::get(
                     ctx, /*optLevel=*/3, "nvptx64-nvidia-cuda", chip,
                     "+ptx83"))
               : Attribute(ROCDL::ROCDLTargetAttr::get(
                     ctx, /*optLevel=*/3, "amdgcn-amd-amdhsa", chip));
    auto gpuModule = gpu::GPUModuleOp::create(mb, module.getLoc(),
                                              "mla_kernels",
                                              mb.getArrayAttr({targetAttr}));
    SymbolTable symbols(gpuModule);
    OpBuilder kb(ctx);
    kb.setInsertionPointToStart(gpuModule.getBody());
    auto record = [&](Operation *hostOp, gpu::GPUFuncOp kernel) {
      symbols.insert(kernel);
      hostOp->setAttr(MLADialect::kKernelAttrName,
                      SymbolRefAttr::get(ctx, gpuModule.getName(),
                                         {FlatSymbolRefAttr::get(kernel)}));
    };
    for (PartialDecodeOp op : partials) {
      const Facts &facts = factsOf[op];
      record(op, nvidia ? SM90PartialKernel(op, facts.workgroups,
                                            facts.ldsLimit, testHazard)
                              .build(kb, kernel::kPartial)
                        : PartialKernel(op, facts.xcds, facts.workgroups,
                                        facts.ldsLimit, testHazard)
                              .build(kb, kernel::kPartial));
    }
    for (CombineOp op : combines)
      record(op, buildCombineKernel(op, kb, kernel::kCombine,
                                    /*waitsForPrevious=*/nvidia,
                                    /*columnSlices=*/nvidia));
    // The device planner, launched before the partial kernel by device
    // plans (the host ops keep the host planner).
    for (PartialDecodeOp op : partials)
      symbols.insert(
          buildPlanKernel(factsOf[op].plan, op.getLoc(), kb, kernel::kPlan));
    // The combine and plan kernels are target-neutral but for their AMD
    // launch hints.
    if (nvidia)
      for (auto func : gpuModule.getOps<gpu::GPUFuncOp>())
        for (NamedAttribute attr : llvm::to_vector(func->getDiscardableAttrs()))
          if (attr.getName().strref().starts_with("rocdl."))
            func->removeAttr(attr.getName());
  }
};
} // namespace

//===- Pipelines.cpp - registered mla pipelines ---------------------------===//
//
// The named pipelines a user types as one flag (`mla-opt --mla-decode-to-cpu`)
// and an embedding compiler calls as a C++ function.
//
//===----------------------------------------------------------------------===//

#include "mla/Transforms/Passes.h"
#include "mla/Target/KnownTargets.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

/// Upstream tensor/vector ops -> LLVM dialect on the host.
void mla::addHostLoweringPasses(OpPassManager &pm) {
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());

  // Tensors -> buffers; the per-sequence temporaries are freed each iteration.
  bufferization::OneShotBufferizePassOptions bufferizeOptions;
  bufferizeOptions.bufferizeFunctionBoundaries = true;
  // The online-softmax loop carries freshly computed max/sum tensors.
  bufferizeOptions.allowReturnAllocsFromLoops = true;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferizeOptions));
  bufferization::BufferDeallocationPipelineOptions deallocOptions;
  bufferization::buildBufferDeallocationPipeline(pm, deallocOptions);

  // Buffers -> loops -> LLVM dialect. bf16 conversions are expanded to integer
  // arithmetic (round-to-nearest-even) so no soft-float runtime is needed.
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createLowerAffinePass());
  arith::ArithExpandOpsPassOptions expandOptions;
  expandOptions.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expandOptions));
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertVectorToLLVMPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void mla::buildDecodeToCPUPipeline(OpPassManager &pm,
                                   const DecodeToCPUPipelineOptions &) {
  pm.addPass(createMLADecomposePass());
  addHostLoweringPasses(pm);
}

void mla::buildDecodeSplitToCPUPipeline(
    OpPassManager &pm, const DecodeSplitToCPUPipelineOptions &options) {
  MLASelectConfigPassOptions config;
  config.targetName = options.target;
  config.kvTile = options.kvTile;
  config.splits = options.splits;
  pm.addPass(createMLASelectConfigPass(config));
  pm.addPass(createMLASplitKVPass());
  pm.addPass(createMLATilePass());
  pm.addPass(createMLALowerCombinePass());
  addHostLoweringPasses(pm);
}

/// The chip the GPU passes compile for: the target's architecture from the
/// chip table (an unknown name is mla-select-config's error to report).
static std::string chipsetOf(StringRef target) {
  const mla::TargetInfo *info = mla::lookupTarget(target);
  return info ? info->arch->arch.str() : target.str();
}

void mla::buildDecodeToGFX950Pipeline(
    OpPassManager &pm, const DecodeToGFX950PipelineOptions &options) {
  GFX950Level stopAt = options.stopAt;
  MLASelectConfigPassOptions config;
  config.targetName = options.target;
  config.splits = options.splits;
  config.kvTile = options.kvTile;
  config.pipelineStages = options.pipelineStages;
  config.headsPerWorkgroup = options.headsPerWorkgroup;
  pm.addPass(createMLASelectConfigPass(config));
  if (stopAt == GFX950Level::Config)
    return;
  pm.addPass(createMLASplitKVPass());
  if (stopAt == GFX950Level::Split)
    return;
  pm.addPass(createMLAToGPUPass());
  if (stopAt == GFX950Level::Kernels)
    return;
  OpPassManager &device = pm.nest<gpu::GPUModuleOp>();
  // The MFMA pass also lowers the fp8 conversions to the packed gfx950
  // instructions (after the fragments exist, so it sees the tile-level
  // widening of an fp8 operand).
  MLALowerToMFMAPassOptions mfma;
  mfma.chipset = chipsetOf(options.target);
  device.addPass(createMLALowerToMFMAPass(mfma));
  device.addPass(createCanonicalizerPass());
  device.addPass(createCSEPass());
  if (stopAt == GFX950Level::MFMA)
    return;
  device.addPass(createSCFToControlFlowPass());
  ConvertGpuOpsToROCDLOpsOptions rocdlOptions;
  rocdlOptions.chipset = chipsetOf(options.target);
  rocdlOptions.runtime = gpu::amd::Runtime::HIP;
  device.addPass(createConvertGpuOpsToROCDLOps(rocdlOptions));
  device.addPass(createReconcileUnrealizedCastsPass());
}

void mla::buildDecodeToEmuKernelsPipeline(
    OpPassManager &pm, const DecodeToEmuPipelineOptions &options) {
  MLASelectConfigPassOptions config;
  config.targetName = options.target;
  config.splits = options.splits;
  config.headsPerWorkgroup = options.headsPerWorkgroup;
  pm.addPass(createMLASelectConfigPass(config));
  pm.addPass(createMLASplitKVPass());
  MLAToGPUPassOptions toGPU;
  toGPU.testHazard = options.testHazard;
  pm.addPass(createMLAToGPUPass(toGPU));
  OpPassManager &device = pm.nest<gpu::GPUModuleOp>();
  MLALowerToMFMAPassOptions mfma;
  mfma.testCorruptLayout = options.testCorruptLayout;
  device.addPass(createMLALowerToMFMAPass(mfma));
  device.addPass(createCanonicalizerPass());
  device.addPass(createCSEPass());
  pm.addPass(createMLAGPUToEmuPass());
}

void mla::buildDecodeToEmuPipeline(OpPassManager &pm,
                                   const DecodeToEmuPipelineOptions &options) {
  buildDecodeToEmuKernelsPipeline(pm, options);
  addHostLoweringPasses(pm);
}

void mla::registerMLAPassesAndPipelines() {
  registerMLAPasses();
  PassPipelineRegistration<DecodeToCPUPipelineOptions>(
      "mla-decode-to-cpu",
      "Lower mla.decode to the LLVM dialect for the host (the cpu backend)",
      buildDecodeToCPUPipeline);
  PassPipelineRegistration<DecodeSplitToCPUPipelineOptions>(
      "mla-decode-split-to-cpu",
      "Lower mla.decode through config, split-KV, KV tiles with online softmax "
      "and combine to the LLVM dialect for the host",
      buildDecodeSplitToCPUPipeline);
  PassPipelineRegistration<DecodeToGFX950PipelineOptions>(
      "mla-decode-to-gfx950",
      "Lower mla.decode to gfx950 kernels at the ROCDL level (config, split-KV, "
      "kernels, FP8 MFMA, ROCDL); compile them with mla-translate",
      buildDecodeToGFX950Pipeline);
  PassPipelineRegistration<DecodeToEmuPipelineOptions>(
      "mla-decode-to-emu",
      "Lower mla.decode to the gfx950 kernels at the MFMA level and turn them "
      "into host lane functions for the emu backend (LLVM dialect)",
      buildDecodeToEmuPipeline);
}

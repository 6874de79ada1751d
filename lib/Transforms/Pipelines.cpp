//===- Pipelines.cpp - registered mla pipelines ---------------------------===//
//
// The named pipelines a user types as one flag (`mla-opt --mla-decode-to-cpu`)
// and an embedding compiler calls as a C++ function.
//
//===----------------------------------------------------------------------===//

#include "mla/Transforms/Passes.h"
#include "mla/Target/KnownTargets.h"

#include "mlir/Conversion/NVGPUToNVVM/NVGPUToNVVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
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

mla::MLASelectConfigPassOptions
mla::selectConfigOptions(const DecodePipelineOptions &options) {
  MLASelectConfigPassOptions config;
  config.targetName = options.target;
  config.splits = options.splits;
  config.kvTile = options.kvTile;
  config.headsPerWorkgroup = options.headsPerWorkgroup;
  config.wavesPerWorkgroup = options.wavesPerWorkgroup;
  config.wavesPerRowGroup = options.wavesPerRowGroup;
  config.rowsPerWave = options.rowsPerWave;
  config.pipelineStages = options.pipelineStages;
  config.queryTokens = options.queryTokens;
  return config;
}

void mla::buildDecodeSplitToCPUPipeline(OpPassManager &pm,
                                        const DecodePipelineOptions &options) {
  pm.addPass(createMLASelectConfigPass(selectConfigOptions(options)));
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

static mla::MLAToGPUPassOptions
toGPUOptions(const mla::DecodePipelineOptions &options) {
  mla::MLAToGPUPassOptions toGPU;
  toGPU.testHazard = options.testHazard;
  return toGPU;
}

/// `chipset` empty: fp8 conversions stay arith ops (the emu models them).
static mla::MLALowerToMFMAPassOptions
mfmaOptions(const mla::DecodePipelineOptions &options, std::string chipset) {
  mla::MLALowerToMFMAPassOptions mfma;
  mfma.chipset = std::move(chipset);
  mfma.testCorruptLayout = options.testCorruptLayout;
  return mfma;
}

void mla::buildDecodeToGFX950Pipeline(
    OpPassManager &pm, const DecodePipelineOptions &options) {
  GFX950Level stopAt = options.stopAt;
  pm.addPass(createMLASelectConfigPass(selectConfigOptions(options)));
  if (stopAt == GFX950Level::Config)
    return;
  pm.addPass(createMLASplitKVPass());
  if (stopAt == GFX950Level::Split)
    return;
  pm.addPass(createMLAToGPUPass(toGPUOptions(options)));
  if (stopAt == GFX950Level::Kernels)
    return;
  OpPassManager &device = pm.nest<gpu::GPUModuleOp>();
  // The MFMA pass also lowers the fp8 conversions to the packed gfx950
  // instructions (after the fragments exist, so it sees the tile-level
  // widening of an fp8 operand).
  device.addPass(createMLALowerToMFMAPass(
      mfmaOptions(options, chipsetOf(options.target))));
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

void mla::buildDecodeToSM90aPipeline(OpPassManager &pm,
                                     const DecodePipelineOptions &options) {
  GFX950Level stopAt = options.stopAt;
  // The shared options default to the AMD chip: left so, the target is
  // the H200 (a chip of another architecture is mla-to-gpu's error).
  MLASelectConfigPassOptions config = selectConfigOptions(options);
  if (config.targetName == defaultTargetName())
    config.targetName = defaultNVIDIATargetName().str();
  pm.addPass(createMLASelectConfigPass(config));
  if (stopAt == GFX950Level::Config)
    return;
  pm.addPass(createMLASplitKVPass());
  if (stopAt == GFX950Level::Split)
    return;
  MLAToGPUPassOptions toGPU = toGPUOptions(options);
  toGPU.requiredArch = defaultNVIDIAArch().str();
  pm.addPass(createMLAToGPUPass(toGPU));
  if (stopAt == GFX950Level::Kernels)
    return;
  OpPassManager &device = pm.nest<gpu::GPUModuleOp>();
  device.addPass(createCanonicalizerPass());
  device.addPass(createCSEPass());
  device.addPass(createSCFToControlFlowPass());
  // f32 math to the NVPTX instructions: upstream would call libdevice.
  device.addPass(createMLALowerMathToNVVMPass());
  // Shared memory over static .shared's 48 KiB: one dynamic block.
  device.addPass(createMLAWorkgroupMemoryToDynamicPass());
  // Views (a thread's copy destinations) to offsets and strides.
  device.addPass(memref::createExpandStridedMetadataPass());
  device.addPass(createLowerAffinePass());
  // ldmatrix (nvgpu) to nvvm.ldmatrix on shared-memory pointers.
  device.addPass(createConvertNVGPUToNVVMPass());
  device.addPass(createConvertGpuOpsToNVVMOps());
  // wgmma (bf16's PV) to its PTX, as inline assembly.
  device.addPass(createConvertNVVMToLLVMPass());
  device.addPass(createReconcileUnrealizedCastsPass());
}

void mla::buildDecodeToEmuKernelsPipeline(
    OpPassManager &pm, const DecodePipelineOptions &options) {
  pm.addPass(createMLASelectConfigPass(selectConfigOptions(options)));
  pm.addPass(createMLASplitKVPass());
  pm.addPass(createMLAToGPUPass(toGPUOptions(options)));
  OpPassManager &device = pm.nest<gpu::GPUModuleOp>();
  device.addPass(createMLALowerToMFMAPass(mfmaOptions(options, "")));
  device.addPass(createCanonicalizerPass());
  device.addPass(createCSEPass());
  pm.addPass(createMLAGPUToEmuPass());
}

void mla::buildDecodeToEmuPipeline(OpPassManager &pm,
                                   const DecodePipelineOptions &options) {
  buildDecodeToEmuKernelsPipeline(pm, options);
  addHostLoweringPasses(pm);
}

static void registerAll() {
  using namespace mla;
  registerMLAPasses();
  PassPipelineRegistration<DecodeToCPUPipelineOptions>(
      "mla-decode-to-cpu",
      "Lower mla.decode to the LLVM dialect for the host (the cpu backend)",
      buildDecodeToCPUPipeline);
  PassPipelineRegistration<DecodePipelineOptions>(
      "mla-decode-split-to-cpu",
      "Lower mla.decode through config, split-KV, KV tiles with online softmax "
      "and combine to the LLVM dialect for the host",
      buildDecodeSplitToCPUPipeline);
  PassPipelineRegistration<DecodePipelineOptions>(
      "mla-decode-to-gfx950",
      "Lower mla.decode to gfx950 kernels at the ROCDL level (config, split-KV, "
      "kernels, FP8 MFMA, ROCDL); compile them with mla-translate",
      buildDecodeToGFX950Pipeline);
  PassPipelineRegistration<DecodePipelineOptions>(
      "mla-decode-to-sm90a",
      "Lower mla.decode to sm_90a (Hopper) kernels at the NVVM level (config, "
      "split-KV, kernels, NVVM); compile them with mla-translate "
      "--mla-to-ptx",
      buildDecodeToSM90aPipeline);
  PassPipelineRegistration<DecodePipelineOptions>(
      "mla-decode-to-emu",
      "Lower mla.decode to the gfx950 kernels at the MFMA level and turn them "
      "into host lane functions for the emu backend (LLVM dialect)",
      buildDecodeToEmuPipeline);
}

void mla::registerMLAPassesAndPipelines() {
  static bool registered = [] {
    registerAll();
    return true;
  }();
  (void)registered;
}

//===- ArtifactCompiler.cpp - compile one configuration to an artifact ----===//

#include "mla/Compiler/ArtifactCompiler.h"

#include "mla/Compiler/Embedding.h"
#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Support/StatusError.h"
#include "mla/Target/AMDGPU/CodeObject.h"
#include "mla/Target/KnownTargets.h"
#include "mla/Target/NVPTX/PTX.h"
#include "mla/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

using namespace mla;

namespace {
llvm::Error compileError(const llvm::Twine &msg) {
  return statusError(Status::Internal, "compiling the artifact: " + msg);
}

/// The launch description of one kernel from its `mla.launch` (names,
/// shapes, grid, block, LDS) and, when there is a code object, the
/// kernarg layout its metadata gives.
llvm::Expected<ArtifactKernel>
describeKernel(llvm::StringRef name, mlir::DictionaryAttr launch,
               const std::vector<amdgpu::KernelMetadata> *metadata) {
  ArtifactKernel kernel;
  kernel.name = name.str();
  if (!launch)
    return compileError("kernel " + kernel.name + " has no mla.launch");
  auto grid = launch.getAs<mlir::ArrayAttr>("grid");
  auto block = launch.getAs<mlir::ArrayAttr>("block");
  auto lds = launch.getAs<mlir::IntegerAttr>("lds_bytes");
  auto names = launch.getAs<mlir::ArrayAttr>("args");
  auto argDims = launch.getAs<mlir::ArrayAttr>("arg_dims");
  if (!grid || !block || !lds || !names || !argDims || grid.size() != 3 ||
      block.size() != 3 || argDims.size() != names.size())
    return compileError("kernel " + kernel.name + " has a malformed mla.launch");
  for (int i = 0; i < 3; ++i) {
    kernel.grid[i] = llvm::cast<mlir::StringAttr>(grid[i]).str();
    kernel.block[i] = llvm::cast<mlir::IntegerAttr>(block[i]).getInt();
  }
  kernel.ldsBytes = lds.getInt();
  if (auto dynamic = launch.getAs<mlir::IntegerAttr>("dynamic_lds_bytes"))
    kernel.dynamicLdsBytes = dynamic.getInt();
  if (auto rows = launch.getAs<mlir::IntegerAttr>("rows_per_workgroup")) {
    auto heads = launch.getAs<mlir::IntegerAttr>("heads_per_block");
    if (!heads)
      return compileError("kernel " + kernel.name +
                          " has rows_per_workgroup but no heads_per_block");
    kernel.rowsPerWorkgroup = rows.getInt();
    kernel.headsPerBlock = heads.getInt();
  }
  if (auto waits = launch.getAs<mlir::BoolAttr>("waits_for_previous"))
    kernel.waitsForPrevious = waits.getValue();

  std::vector<amdgpu::KernelArgMetadata> explicitArgs;
  if (metadata) {
    auto meta = llvm::find_if(*metadata, [&](const amdgpu::KernelMetadata &m) {
      return m.name == kernel.name;
    });
    if (meta == metadata->end())
      return compileError("kernel " + kernel.name +
                          " is not in the code object");
    for (const amdgpu::KernelArgMetadata &arg : meta->args)
      if (!llvm::StringRef(arg.valueKind).starts_with("hidden_")) {
        explicitArgs.push_back(arg);
        kernel.kernargBytes =
            std::max(kernel.kernargBytes, arg.offset + arg.size);
      }
  }

  size_t field = 0;
  for (auto [nameAttr, dimsAttr] : llvm::zip_equal(names, argDims)) {
    ArtifactKernelArg arg;
    arg.name = llvm::cast<mlir::StringAttr>(nameAttr).str();
    for (mlir::Attribute d : llvm::cast<mlir::ArrayAttr>(dimsAttr))
      arg.dims.push_back(llvm::cast<mlir::StringAttr>(d).str());
    if (metadata) {
      // A memref descriptor is passed word by word: 2 pointers, the offset,
      // the sizes and the strides.
      size_t words = 3 + 2 * arg.dims.size();
      if (field + words > explicitArgs.size())
        return compileError("the code object's kernarg layout of " +
                            kernel.name + " does not match its memref "
                            "arguments");
      for (size_t w = 0; w < words; ++w, ++field)
        arg.fields.push_back(
            {explicitArgs[field].offset, explicitArgs[field].size});
    }
    kernel.args.push_back(std::move(arg));
  }
  if (metadata && field != explicitArgs.size())
    return compileError("kernel " + kernel.name + " has " +
                        llvm::Twine(explicitArgs.size()) +
                        " explicit kernel arguments, the memrefs account for " +
                        llvm::Twine(field));
  return kernel;
}

constexpr std::string_view kKernelNames[] = {
    kernel::kPartial, kernel::kCombine, kernel::kPlan};

/// The one gpu.module of `module`; `pipeline` names the pipeline that makes
/// it, for the error.
llvm::Expected<mlir::gpu::GPUModuleOp> singleDeviceModule(mlir::ModuleOp module,
                                                          llvm::StringRef what,
                                                          llvm::StringRef pipeline) {
  mlir::gpu::GPUModuleOp gpuModule;
  int count = 0;
  module->walk([&](mlir::gpu::GPUModuleOp m) {
    gpuModule = m;
    ++count;
  });
  if (count != 1)
    return statusError(Status::InvalidArgument,
                       what + " one gpu.module; the module has " +
                           llvm::Twine(count) + " (lower mla.decode with " +
                           pipeline + " first)");
  return gpuModule;
}

/// The launch descriptions of the module's kernels, in artifact order, with
/// the kernarg layout `layout` gives.
llvm::Expected<std::vector<ArtifactKernel>>
describeKernels(mlir::gpu::GPUModuleOp gpuModule,
                const std::vector<amdgpu::KernelMetadata> &layout) {
  std::vector<ArtifactKernel> kernels;
  for (llvm::StringRef name : kKernelNames) {
    mlir::Operation *kernel = gpuModule.lookupSymbol(name);
    if (!kernel)
      continue;
    auto described = describeKernel(
        name,
        kernel->getAttrOfType<mlir::DictionaryAttr>(MLADialect::kLaunchAttrName),
        &layout);
    if (!described)
      return described.takeError();
    kernels.push_back(std::move(*described));
  }
  return kernels;
}
} // namespace

llvm::Expected<CodeObject> mla::compileCodeObject(mlir::ModuleOp module) {
  auto gpuModule =
      singleDeviceModule(module, "a code object holds", "--mla-decode-to-gfx950");
  if (!gpuModule)
    return gpuModule.takeError();
  CodeObject result;
  result.chip = amdgpu::getChip(*gpuModule);
  llvm::LLVMContext llvmContext;
  auto llvmModule = amdgpu::translateToLLVMIR(*gpuModule, llvmContext);
  if (!llvmModule)
    return llvmModule.takeError();
  auto object = amdgpu::emitObject(**llvmModule);
  if (!object)
    return object.takeError();
  auto hsaco = amdgpu::linkCodeObject(*object);
  if (!hsaco)
    return hsaco.takeError();
  result.hsaco = std::move(*hsaco);
  auto metadata = amdgpu::readKernelMetadata(result.hsaco);
  if (!metadata)
    return metadata.takeError();
  auto kernels = describeKernels(*gpuModule, *metadata);
  if (!kernels)
    return kernels.takeError();
  result.kernels = std::move(*kernels);
  return result;
}

llvm::Expected<CodeObject> mla::compilePTX(mlir::ModuleOp module) {
  auto gpuModule = singleDeviceModule(module, "PTX is made of", "--mla-decode-to-sm90a");
  if (!gpuModule)
    return gpuModule.takeError();
  CodeObject result;
  result.chip = nvptx::getChip(*gpuModule);
  llvm::LLVMContext llvmContext;
  auto llvmModule = nvptx::translateToLLVMIR(*gpuModule, llvmContext);
  if (!llvmModule)
    return llvmModule.takeError();
  auto ptx = nvptx::emitPTX(**llvmModule);
  if (!ptx)
    return ptx.takeError();
  auto params = nvptx::entryParameterCounts(*ptx);
  if (!params)
    return params.takeError();
  result.ptx = std::move(*ptx);
  // PTX parameters are the descriptor words in order, 8 bytes each.
  std::vector<amdgpu::KernelMetadata> layout;
  for (auto [name, count] : *params) {
    amdgpu::KernelMetadata kernel;
    kernel.name = name;
    for (int64_t i = 0; i < count; ++i)
      kernel.args.push_back({8 * i, 8, "by_value"});
    layout.push_back(std::move(kernel));
  }
  auto kernels = describeKernels(*gpuModule, layout);
  if (!kernels)
    return kernels.takeError();
  result.kernels = std::move(*kernels);
  return result;
}

namespace {
/// The device code of the host module `source` for the target's
/// architecture: sm_90a PTX, or the gfx950 code object.
llvm::Expected<CodeObject> compileHostModule(mlir::PassManager &pm,
                                             llvm::StringRef source,
                                             const KernelSignature &sig,
                                             bool nvidia,
                                             std::string &diagnostics) {
  auto module = mlir::parseSourceString<mlir::ModuleOp>(
      source, pm.getContext(), "mla_decode_host");
  if (!module)
    return compileError("the host module does not parse: " + diagnostics);
  DecodePipelineOptions options = sig.config;
  options.stopAt = nvidia ? GFX950Level::NVVM : GFX950Level::ROCDL;
  if (nvidia)
    buildDecodeToSM90aPipeline(pm, options);
  else
    buildDecodeToGFX950Pipeline(pm, options);
  if (mlir::failed(pm.run(*module)))
    return compileError(diagnostics);
  return nvidia ? compilePTX(*module) : compileCodeObject(*module);
}
} // namespace

llvm::Expected<KernelSignature> mla::signatureOf(DecodeOp op) {
  auto qType = op.getQ().getType();
  if (qType.getRank() != 3 || qType.isDynamicDim(1) || qType.isDynamicDim(2))
    return statusError(Status::InvalidArgument,
                       "needs a static head count and head width to be "
                       "compiled");
  KernelSignature sig{};
  sig.format = cacheFormat(op.getKvFormat());
  sig.numHeads = qType.getDimSize(1);
  sig.qkDim = qType.getDimSize(2);
  sig.vDim = op.getVHeadDim();
  sig.smScale = op.getSmScale() ? op.getSmScale()->convertToDouble() : 0.0;
  sig.pageSize = op.getPageSize();
  return sig;
}

namespace {
/// The text of `module`: with locations for the passes that compile it (so
/// their diagnostics point at the user's op), without for the artifact.
std::string printModule(mlir::ModuleOp module, bool withLocations) {
  std::string text;
  llvm::raw_string_ostream os(text);
  mlir::OpPrintingFlags flags;
  if (withLocations)
    flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
  module->print(os, flags);
  return text;
}

/// A diagnostic as one line: where (when the location is a file's) and
/// what.
void appendDiagnostic(std::string &out, mlir::Diagnostic &diag) {
  llvm::raw_string_ostream os(out);
  os << (out.empty() ? "" : "; ");
  if (auto file = llvm::dyn_cast<mlir::FileLineColLoc>(diag.getLocation()))
    os << file.getFilename().getValue() << ":" << file.getLine() << ":"
       << file.getColumn() << ": ";
  os << diag;
}

/// Every form of the decode in `host` (buildHostModule), compiled in a
/// context of its own.
llvm::Expected<Artifact> compileForms(const KernelSignature &sig,
                                      mlir::ModuleOp host,
                                      ArtifactForms forms) {
  Artifact a;
  a.format = sig.format;
  a.numHeads = sig.numHeads;
  a.qkDim = sig.qkDim;
  a.vDim = sig.vDim;
  a.smScale = sig.smScale;
  a.pageSize = sig.pageSize;
  a.forcedSplits = sig.config.splits > 0 ? int64_t(sig.config.splits) : 0;
  a.cpuPipeline = sig.pipeline == HostPipeline::Split ? "split" : "decompose";
  a.cpuKVTile = sig.pipeline == HostPipeline::Split ? int64_t(sig.config.kvTile)
                                                   : 0;
  a.cpuModule = printModule(host, /*withLocations=*/false);
  std::string hostText = printModule(host, /*withLocations=*/true);

  mlir::MLIRContext ctx;
  prepareContext(ctx);
  if (forms.printIR)
    ctx.disableMultithreading();
  auto makePassManager = [&]() {
    auto pm = std::make_unique<mlir::PassManager>(&ctx);
    if (forms.printIR)
      pm->enableIRPrinting();
    return pm;
  };
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(
      &ctx, [&](mlir::Diagnostic &diag) { appendDiagnostic(diagnostics, diag); });
  auto parse = [&]() {
    return mlir::parseSourceString<mlir::ModuleOp>(hostText, &ctx,
                                                   "mla_decode_host");
  };
  // The reference form must compile, whatever the target supports.
  {
    auto module = parse();
    if (!module)
      return compileError("the host module does not parse: " + diagnostics);
    mlir::PassManager pm(&ctx);
    pm.addPass(createMLASelectConfigPass(selectConfigOptions(sig.config)));
    if (mlir::failed(pm.run(*module)))
      return statusError(Status::InvalidArgument, diagnostics);
    if (forms.printIR) {
      // The runtime lowers the reference form when it loads it; show it.
      auto lowered = parse();
      auto reference = makePassManager();
      if (sig.pipeline == HostPipeline::Split) {
        buildDecodeSplitToCPUPipeline(*reference, sig.config);
      } else {
        buildDecodeToCPUPipeline(*reference, DecodeToCPUPipelineOptions());
      }
      if (!lowered || mlir::failed(reference->run(*lowered)))
        return statusError(Status::InvalidArgument, diagnostics);
    }
    module->walk([&](DecodeOp op) {
      if (auto config = op->getAttr(MLADialect::kConfigAttrName)) {
        llvm::raw_string_ostream os(a.config);
        config.print(os);
      }
    });
  }
  // mla-select-config accepted the target name.
  const TargetInfo *target = lookupTarget(sig.config.target);
  if (!target)
    return compileError("unknown target '" + sig.config.target + "'");
  a.chip = target->arch->arch.str();
  a.computeUnits = target->computeUnits;
  a.xcds = target->xcds;
  if (isNVIDIAArch(a.chip))
    a.triple = "nvptx64-nvidia-cuda";
  // The emu runs the architectures it models.
  bool emuForm = forms.emu && target->arch->emulated;
  if (!target->arch->hasGPUKernels || (!emuForm && !forms.gfx950))
    return a;

  // The emu form: the kernels at the MFMA level as host lane functions.
  auto emuModule = parse();
  if (!emuModule)
    return compileError("the host module does not parse: " + diagnostics);
  {
    auto pm = makePassManager();
    buildDecodeToEmuKernelsPipeline(*pm, sig.config);
    if (mlir::failed(pm->run(*emuModule)))
      return compileError(diagnostics);
    if (emuForm) {
      llvm::raw_string_ostream os(a.emuModule);
      emuModule->print(os);
    }
  }

  // The device form: the gfx950 code object (its launch description
  // includes the kernarg layout) or, for NVIDIA chips, PTX (8-byte words).
  if (forms.gfx950) {
    bool nvidia = isNVIDIAArch(a.chip);
    auto code = compileHostModule(*makePassManager(), hostText, sig, nvidia,
                                  diagnostics);
    if (!code)
      return code.takeError();
    a.hsaco = std::move(code->hsaco);
    a.ptx = std::move(code->ptx);
    a.kernels = std::move(code->kernels);
  } else {
    for (llvm::StringRef name : kKernelNames) {
      auto lane = emuModule->lookupSymbol<mlir::func::FuncOp>(
          (name + "_lane").str());
      if (!lane)
        return compileError("kernel " + name + " is missing");
      auto kernel = describeKernel(name,
                                   lane->getAttrOfType<mlir::DictionaryAttr>(
                                       MLADialect::kLaunchAttrName),
                                   nullptr);
      if (!kernel)
        return kernel.takeError();
      a.kernels.push_back(std::move(*kernel));
    }
  }
  if (a.kernels.size() != std::size(kKernelNames))
    return compileError("the kernels are missing from the device form");
  return a;
}
} // namespace

llvm::Expected<Artifact> mla::compileArtifact(DecodeOp op,
                                              const DecodePipelineOptions &config,
                                              HostPipeline pipeline,
                                              ArtifactForms forms) {
  auto sig = signatureOf(op);
  if (!sig)
    return sig.takeError();
  sig->config = config;
  sig->pipeline = pipeline;
  mlir::OwningOpRef<mlir::ModuleOp> host = buildHostModule(op);
  return compileForms(*sig, *host, forms);
}

llvm::Expected<Artifact> mla::compileArtifact(const KernelSignature &sig,
                                              ArtifactForms forms) {
  mlir::MLIRContext ctx;
  prepareContext(ctx);
  mlir::OwningOpRef<mlir::ModuleOp> module = buildDecodeModule(ctx, sig);
  DecodeOp op;
  module->walk([&](DecodeOp d) { op = d; });
  return compileArtifact(op, sig.config, sig.pipeline, forms);
}

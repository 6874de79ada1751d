//===- ArtifactCompiler.cpp - compile one configuration to an artifact ----===//

#include "mla/Compiler/ArtifactCompiler.h"

#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Runtime/JitSupport.h"
#include "mla/Runtime/Status.h"
#include "mla/Target/AMDGPU/CodeObject.h"
#include "mla/Target/KnownTargets.h"
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

/// The size symbol of an argument's leading dynamic dimension.
llvm::StringRef leadingDimSymbol(llvm::StringRef arg) {
  if (arg == "q" || arg == "out" || arg == "lse")
    return dim::kTokens;
  if (arg == "kv" || arg == "kv_scale")
    return dim::kKVRows;
  if (arg == "qo_indptr" || arg == "kv_indptr" || arg == "item_indptr")
    return dim::kSeqsPlusOne;
  return dim::kWorkItems; // work_items, partial_out, partial_lse
}

/// The launch description of one kernel: `mla.launch` and the argument
/// shapes of its lane function in the emu form (the kernel before ROCDL),
/// and the kernarg layout from the code object's metadata, when there is a
/// code object.
llvm::Expected<ArtifactKernel>
describeKernel(llvm::StringRef name, mlir::func::FuncOp lane,
               const std::vector<amdgpu::KernelMetadata> *metadata) {
  ArtifactKernel kernel;
  kernel.name = name.str();
  auto launch = lane->getAttrOfType<mlir::DictionaryAttr>(
      MLADialect::kLaunchAttrName);
  if (!launch)
    return compileError("kernel " + kernel.name + " has no mla.launch");
  auto grid = launch.getAs<mlir::ArrayAttr>("grid");
  auto block = launch.getAs<mlir::ArrayAttr>("block");
  auto lds = launch.getAs<mlir::IntegerAttr>("lds_bytes");
  auto names = launch.getAs<mlir::ArrayAttr>("args");
  if (!grid || !block || !lds || !names || grid.size() != 3 ||
      block.size() != 3)
    return compileError("kernel " + kernel.name + " has a malformed mla.launch");
  for (int i = 0; i < 3; ++i) {
    kernel.grid[i] = llvm::cast<mlir::StringAttr>(grid[i]).str();
    kernel.block[i] = llvm::cast<mlir::IntegerAttr>(block[i]).getInt();
  }
  kernel.ldsBytes = lds.getInt();

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

  mlir::FunctionType laneType = lane.getFunctionType();
  if (laneType.getNumInputs() < names.size())
    return compileError("lane function of " + kernel.name +
                        " has fewer arguments than the kernel");
  size_t field = 0;
  for (auto [i, nameAttr] : llvm::enumerate(names)) {
    ArtifactKernelArg arg;
    arg.name = llvm::cast<mlir::StringAttr>(nameAttr).str();
    auto type = llvm::dyn_cast<mlir::MemRefType>(laneType.getInput(i));
    if (!type)
      return compileError("argument " + arg.name + " of " + kernel.name +
                          " is not a memref");
    for (int64_t d = 0; d < type.getRank(); ++d) {
      if (!type.isDynamicDim(d))
        arg.dims.push_back(std::to_string(type.getDimSize(d)));
      else if (d == 0)
        arg.dims.push_back(leadingDimSymbol(arg.name).str());
      else
        return compileError("argument " + arg.name + " of " + kernel.name +
                            " has a dynamic inner dimension");
    }
    arg.elementBytes = (type.getElementTypeBitWidth() + 7) / 8;
    kernel.args.push_back(arg);
    ArtifactKernelArg &added = kernel.args.back();
    // A memref descriptor is passed word by word: 2 pointers, the offset,
    // the sizes and the strides.
    size_t words = 3 + 2 * type.getRank();
    if (!metadata)
      continue;
    if (field + words > explicitArgs.size())
      return compileError("the code object's kernarg layout of " + kernel.name +
                          " does not match its memref arguments");
    for (size_t w = 0; w < words; ++w, ++field)
      added.fields.push_back(
          {explicitArgs[field].offset, explicitArgs[field].size});
  }
  if (field != explicitArgs.size())
    return compileError("kernel " + kernel.name + " has " +
                        llvm::Twine(explicitArgs.size()) +
                        " explicit kernel arguments, the memrefs account for " +
                        llvm::Twine(field));
  return kernel;
}

/// The gfx950 code object of the host module `source`: ROCDL, LLVM IR,
/// object, linked code object. Also records the config the kernels use.
llvm::Expected<std::string> compileCodeObject(mlir::PassManager &pm,
                                              llvm::StringRef source,
                                              const KernelSignature &sig,
                                              std::string &diagnostics) {
  auto module = mlir::parseSourceString<mlir::ModuleOp>(
      source, pm.getContext(), "mla_decode_host");
  if (!module)
    return compileError("the host module does not parse: " + diagnostics);
  DecodeToGFX950PipelineOptions options;
  options.target = sig.target;
  options.splits = sig.splits;
  buildDecodeToGFX950Pipeline(pm, options);
  if (mlir::failed(pm.run(*module)))
    return compileError(diagnostics);
  mlir::gpu::GPUModuleOp gpuModule;
  module->walk([&](mlir::gpu::GPUModuleOp m) { gpuModule = m; });
  if (!gpuModule)
    return compileError("the gfx950 pipeline produced no gpu.module");
  llvm::LLVMContext llvmContext;
  auto llvmModule = amdgpu::translateToLLVMIR(gpuModule, llvmContext);
  if (!llvmModule)
    return llvmModule.takeError();
  auto object = amdgpu::emitObject(**llvmModule);
  if (!object)
    return object.takeError();
  return amdgpu::linkCodeObject(*object);
}
} // namespace

bool mla::gfx950KernelsSupport(CacheFormat format) {
  return format == CacheFormat::FP8;
}

llvm::Expected<Artifact> mla::compileArtifact(const KernelSignature &sig,
                                              ArtifactForms forms) {
  Artifact a;
  a.format = sig.format;
  a.numHeads = sig.numHeads;
  a.qkDim = sig.qkDim;
  a.vDim = sig.vDim;
  a.smScale = sig.smScale;
  a.forcedSplits = sig.splits > 0 ? sig.splits : 0;
  a.cpuPipeline = sig.pipeline == HostPipeline::Split ? "split" : "decompose";
  a.cpuKVTile = sig.kvTile;
  a.cpuModule = buildHostModuleSource(sig);

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
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &diag) {
    llvm::raw_string_ostream os(diagnostics);
    os << (diagnostics.empty() ? "" : "; ") << diag;
  });
  auto parse = [&]() {
    return mlir::parseSourceString<mlir::ModuleOp>(a.cpuModule, &ctx,
                                                   "mla_decode_host");
  };
  // The reference form must compile, whatever the target supports.
  {
    auto module = parse();
    if (!module)
      return compileError("the host module does not parse: " + diagnostics);
    mlir::PassManager pm(&ctx);
    MLASelectConfigPassOptions config;
    config.targetName = sig.target;
    config.splits = sig.splits;
    if (sig.pipeline == HostPipeline::Split)
      config.kvTile = sig.kvTile;
    pm.addPass(createMLASelectConfigPass(config));
    if (mlir::failed(pm.run(*module)))
      return statusError(Status::InvalidArgument, diagnostics);
    if (forms.printIR) {
      // The runtime lowers the reference form when it loads it; show it.
      auto lowered = parse();
      auto reference = makePassManager();
      if (sig.pipeline == HostPipeline::Split) {
        DecodeSplitToCPUPipelineOptions options;
        options.target = sig.target;
        options.kvTile = sig.kvTile;
        options.splits = sig.splits;
        buildDecodeSplitToCPUPipeline(*reference, options);
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
  const TargetInfo *target = lookupTarget(sig.target);
  if (!target)
    return compileError("unknown target '" + sig.target + "'");
  a.chip = target->arch->arch.str();
  a.computeUnits = target->computeUnits;
  if (!gfx950KernelsSupport(sig.format) || target->arch->arch != "gfx950" ||
      (!forms.emu && !forms.gfx950))
    return a;

  // The emu form: the kernels at the MFMA level as host lane functions.
  auto emuModule = parse();
  if (!emuModule)
    return compileError("the host module does not parse: " + diagnostics);
  {
    auto pm = makePassManager();
    DecodeToEmuPipelineOptions options;
    options.splits = sig.splits;
    options.testCorruptLayout = sig.testCorruptLayout;
    buildDecodeToEmuKernelsPipeline(*pm, options);
    if (mlir::failed(pm->run(*emuModule)))
      return compileError(diagnostics);
    if (forms.emu) {
      llvm::raw_string_ostream os(a.emuModule);
      emuModule->print(os);
    }
  }

  // The gfx950 form: ROCDL, LLVM IR, object, code object.
  std::optional<std::vector<amdgpu::KernelMetadata>> metadata;
  if (forms.gfx950) {
    auto hsaco = compileCodeObject(*makePassManager(), a.cpuModule, sig,
                                   diagnostics);
    if (!hsaco)
      return hsaco.takeError();
    a.hsaco = std::move(*hsaco);
    auto read = amdgpu::readKernelMetadata(a.hsaco);
    if (!read)
      return read.takeError();
    metadata = std::move(*read);
  }

  for (llvm::StringRef name : {"mla_partial_decode", "mla_combine"}) {
    auto lane = emuModule->lookupSymbol<mlir::func::FuncOp>(
        (name + "_lane").str());
    if (!lane)
      return compileError("kernel " + name + " is missing");
    auto kernel =
        describeKernel(name, lane, metadata ? &*metadata : nullptr);
    if (!kernel)
      return kernel.takeError();
    a.kernels.push_back(std::move(*kernel));
  }
  return a;
}

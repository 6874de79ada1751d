//===- mla-translate.cpp - device modules to LLVM IR / ISA / hsaco / PTX --===//
//
// The last step of the GPU pipelines: the gpu.module that
// `mla-opt --mla-decode-to-gfx950` leaves (lowered to the LLVM and ROCDL
// dialects) becomes LLVM IR, gfx950 assembly or an HSA code object; the one
// `--mla-decode-to-sm90a` leaves (NVVM) becomes LLVM IR or PTX. Each stage
// is a separate flag so that every level can be read.
//
//===----------------------------------------------------------------------===//

#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Runtime/Artifact.h"
#include "mla/Support/Version.h"
#include "mla/Target/AMDGPU/CodeObject.h"
#include "mla/Target/NVPTX/KernelReport.h"
#include "mla/Target/NVPTX/PTX.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/ROCDLDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/InitAllDialects.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/SourceMgr.h"

#include <map>

using namespace mlir;

namespace {
void registerDialects(DialectRegistry &registry) {
  registerAllDialects(registry);
  registry.insert<mla::MLADialect>();
  registerAllToLLVMIRTranslations(registry);
}

/// LLVM's backends register hundreds of options (every target's); --help
/// shows only the tool's own (--help-hidden shows all). The translation
/// options mlirTranslateMain registers come after this call.
void hideLibraryOptions() {
  for (auto &entry : llvm::cl::getRegisteredOptions()) {
    llvm::StringRef name = entry.first;
    if (!name.starts_with("help") && name != "version")
      entry.second->setHiddenFlag(llvm::cl::Hidden);
  }
}

/// An artifact is a POSIX tar archive: "ustar" at byte 257.
bool isTarArchive(llvm::StringRef bytes) {
  return bytes.size() > 262 && bytes.substr(257, 5) == "ustar";
}

/// A code object is an ELF file.
bool isELF(llvm::StringRef bytes) { return bytes.starts_with("\177ELF"); }

/// PTX text declares its version and target on lines of their own.
bool isPTX(llvm::StringRef bytes) {
  auto hasLine = [&](llvm::StringRef directive) {
    return bytes.starts_with(directive) ||
           bytes.contains(("\n" + directive).str());
  };
  return hasLine(".version ") && hasLine(".target ");
}

/// The dynamic shared memory each of the artifact's kernels is launched with.
std::map<std::string, int64_t> dynamicShared(const mla::Artifact &artifact) {
  std::map<std::string, int64_t> bytes;
  for (const mla::ArtifactKernel &kernel : artifact.kernels)
    bytes[kernel.name] = kernel.dynamicLdsBytes;
  return bytes;
}

/// The same from the kernels' mla.launch in an NVVM-level module.
std::map<std::string, int64_t> dynamicShared(gpu::GPUModuleOp module) {
  std::map<std::string, int64_t> bytes;
  module.walk([&](Operation *op) {
    auto launch =
        op->getAttrOfType<DictionaryAttr>(mla::MLADialect::kLaunchAttrName);
    auto name = op->getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName());
    if (!launch || !name)
      return;
    if (auto dynamic = launch.getAs<IntegerAttr>("dynamic_lds_bytes"))
      bytes[name.str()] = dynamic.getInt();
  });
  return bytes;
}

/// What the artifact says of its partial kernel's loop: the config's
/// kv_tile and the launch's row grouping (none if the config does not
/// parse).
std::map<std::string, mla::amdgpu::LoopShape>
loopShapes(const mla::Artifact &artifact, MLIRContext *context) {
  std::map<std::string, mla::amdgpu::LoopShape> shapes;
  context->getOrLoadDialect<mla::MLADialect>();
  // A config that does not parse only leaves these lines out.
  ScopedDiagnosticHandler quiet(context,
                                [](Diagnostic &) { return success(); });
  auto config = llvm::dyn_cast_or_null<mla::ConfigAttr>(
      parseAttribute(artifact.config, context));
  if (!config)
    return shapes;
  for (const mla::ArtifactKernel &kernel : artifact.kernels)
    if (kernel.rowsPerWorkgroup > 0)
      shapes[kernel.name] = {
          config.getKvTile(), kernel.rowsPerWorkgroup, kernel.headsPerBlock,
          mla::cacheBytesPerRow(artifact.format, artifact.qkDim)};
  return shapes;
}

/// What a module at the ROCDL level says of its partial kernel's loop: its
/// mla.partial_decode's kv_tile, format and Dqk, and the kernel's row
/// grouping from its mla.launch.
std::map<std::string, mla::amdgpu::LoopShape> loopShapes(ModuleOp module) {
  std::map<std::string, mla::amdgpu::LoopShape> shapes;
  module.walk([&](mla::PartialDecodeOp op) {
    auto kernel =
        op->getAttrOfType<SymbolRefAttr>(mla::MLADialect::kKernelAttrName);
    // An llvm.func by now (a gpu.func before the ROCDL lowering).
    Operation *func =
        kernel ? SymbolTable::lookupNearestSymbolFrom(op, kernel) : nullptr;
    auto launch = func ? func->getAttrOfType<DictionaryAttr>(
                             mla::MLADialect::kLaunchAttrName)
                       : nullptr;
    auto rows =
        launch ? launch.getAs<IntegerAttr>("rows_per_workgroup") : nullptr;
    auto heads =
        launch ? launch.getAs<IntegerAttr>("heads_per_block") : nullptr;
    if (!rows || !heads)
      return;
    shapes[kernel.getLeafReference().str()] = {
        op.getConfig().getKvTile(), rows.getInt(), heads.getInt(),
        mla::cacheBytesPerRow(mla::cacheFormat(op.getKvFormat()),
                              op.getQKHeadDim())};
  });
  return shapes;
}

/// The gpu.modules of the input; a diagnostic when there is none.
FailureOr<SmallVector<gpu::GPUModuleOp>> deviceModules(Operation *op) {
  SmallVector<gpu::GPUModuleOp> modules;
  op->walk([&](gpu::GPUModuleOp m) { modules.push_back(m); });
  // Located, but without the whole module attached: the message says what
  // to do.
  if (modules.empty())
    return emitError(op->getLoc(),
                     "no gpu.module to compile: run mla-opt "
                     "--mla-decode-to-gfx950 or --mla-decode-to-sm90a (or "
                     "lower a gpu.module to ROCDL or NVVM) first");
  return modules;
}

LogicalResult report(Operation *op, llvm::Error err) {
  return emitError(op->getLoc(), llvm::toString(std::move(err)));
}

/// The code object of the one gpu.module of `op` (at the ROCDL level).
FailureOr<std::string> codeObjectOf(Operation *op) {
  auto modules = deviceModules(op);
  if (failed(modules))
    return failure();
  if (modules->size() != 1)
    return emitError(op->getLoc(),
                     "one code object holds one gpu.module; found ")
           << modules->size();
  gpu::GPUModuleOp gpuModule = modules->front();
  llvm::LLVMContext context;
  auto llvmModule = mla::amdgpu::translateToLLVMIR(gpuModule, context);
  if (!llvmModule)
    return report(gpuModule, llvmModule.takeError());
  auto object = mla::amdgpu::emitObject(**llvmModule);
  if (!object)
    return report(gpuModule, object.takeError());
  auto hsaco = mla::amdgpu::linkCodeObject(*object);
  if (!hsaco)
    return report(gpuModule, hsaco.takeError());
  return std::move(*hsaco);
}

/// The PTX of an NVVM-level gpu.module.
FailureOr<std::string> ptxOf(gpu::GPUModuleOp gpuModule) {
  llvm::LLVMContext context;
  auto llvmModule = mla::nvptx::translateToLLVMIR(gpuModule, context);
  if (!llvmModule)
    return report(gpuModule, llvmModule.takeError());
  auto ptx = mla::nvptx::emitPTX(**llvmModule);
  if (!ptx)
    return report(gpuModule, ptx.takeError());
  return std::move(*ptx);
}

/// Compiles each gpu.module and hands its LLVM module to `emit`.
LogicalResult
forEachDeviceModule(Operation *op,
                    function_ref<LogicalResult(gpu::GPUModuleOp,
                                               llvm::Module &)>
                        emit) {
  auto modules = deviceModules(op);
  if (failed(modules))
    return failure();
  for (gpu::GPUModuleOp module : *modules) {
    llvm::LLVMContext context;
    auto llvmModule = mla::nvptx::isNVVMModule(module)
                          ? mla::nvptx::translateToLLVMIR(module, context)
                          : mla::amdgpu::translateToLLVMIR(module, context);
    if (!llvmModule)
      return report(module, llvmModule.takeError());
    if (failed(emit(module, **llvmModule)))
      return failure();
  }
  return success();
}
} // namespace

int main(int argc, char **argv) {
  TranslateFromMLIRRegistration toLLVMIR(
      "mlir-to-llvmir",
      "Translate to LLVM IR: each gpu.module as amdgcn-amd-amdhsa or "
      "nvptx64-nvidia-cuda device code, or a host module lowered to the LLVM "
      "dialect",
      [](Operation *op, llvm::raw_ostream &os) -> LogicalResult {
        bool hasDevice = false;
        op->walk([&](gpu::GPUModuleOp) { hasDevice = true; });
        if (!hasDevice) {
          llvm::LLVMContext context;
          auto module = translateModuleToLLVMIR(op, context);
          if (!module)
            return op->emitError("cannot translate to LLVM IR: the module "
                                 "must be lowered to the LLVM dialect");
          module->print(os, nullptr);
          return success();
        }
        return forEachDeviceModule(
            op, [&](gpu::GPUModuleOp, llvm::Module &module) {
              module.print(os, nullptr);
              return success();
            });
      },
      registerDialects);

  TranslateFromMLIRRegistration toAsm(
      "mla-to-gfx950-asm", "Compile each gpu.module to AMDGPU assembly",
      [](Operation *op, llvm::raw_ostream &os) -> LogicalResult {
        return forEachDeviceModule(
            op, [&](gpu::GPUModuleOp gpuModule, llvm::Module &module) {
              auto text = mla::amdgpu::emitAssembly(module);
              if (!text)
                return report(gpuModule, text.takeError());
              os << *text;
              return success();
            });
      },
      registerDialects);

  TranslateFromMLIRRegistration toPTX(
      "mla-to-ptx", "Compile each NVVM-level gpu.module to PTX (sm_90a)",
      [](Operation *op, llvm::raw_ostream &os) -> LogicalResult {
        return forEachDeviceModule(
            op,
            [&](gpu::GPUModuleOp gpuModule,
                llvm::Module &module) -> LogicalResult {
              if (!mla::nvptx::isNVVMModule(gpuModule))
                return emitError(gpuModule.getLoc(),
                                 "gpu.module @")
                       << gpuModule.getName()
                       << " has no #nvvm.target: PTX needs the sm_90a "
                          "pipeline (mla-opt --mla-decode-to-sm90a)";
              auto text = mla::nvptx::emitPTX(module);
              if (!text)
                return report(gpuModule, text.takeError());
              os << *text;
              return success();
            });
      },
      registerDialects);

  TranslateFromMLIRRegistration toHsaco(
      "mla-to-hsaco",
      "Compile the gpu.module to an HSA code object (ELF, linked by ld.lld)",
      [](Operation *op, llvm::raw_ostream &os) -> LogicalResult {
        FailureOr<std::string> hsaco = codeObjectOf(op);
        if (failed(hsaco))
          return failure();
        os << *hsaco;
        return success();
      },
      registerDialects);

  TranslateRegistration kernelReport(
      "kernel-report",
      "Print, per kernel, what it uses. An HSA code object (or the one in "
      "an .mla artifact, or a ROCDL-level module compiled to one): "
      "registers, LDS, scratch, occupancy, instruction counts and the main "
      "loop's profile. PTX (or an NVIDIA artifact's, or an NVVM-level "
      "module's): launch directives, shared memory, instruction counts and, "
      "where ptxas is found, its registers, spills and blocks per SM",
      [](const std::shared_ptr<llvm::SourceMgr> &sourceMgr,
         llvm::raw_ostream &os, MLIRContext *context) -> LogicalResult {
        const llvm::MemoryBuffer *input =
            sourceMgr->getMemoryBuffer(sourceMgr->getMainFileID());
        auto fail = [&](const llvm::Twine &message) {
          return emitError(UnknownLoc::get(context))
                 << input->getBufferIdentifier() << ": " << message;
        };
        auto ptxReport =
            [&](llvm::StringRef ptx,
                const std::map<std::string, int64_t> &shared) -> LogicalResult {
          if (llvm::Error err = mla::nvptx::printKernelReport(ptx, os, shared))
            return fail(llvm::toString(std::move(err)));
          return success();
        };
        llvm::StringRef bytes = input->getBuffer();
        std::string codeObject;
        std::map<std::string, mla::amdgpu::LoopShape> shapes;
        if (isTarArchive(bytes)) {
          auto artifact = mla::parseArtifact(bytes);
          if (!artifact)
            return fail(artifact.takeError().message());
          if (!artifact->ptx.empty())
            return ptxReport(artifact->ptx, dynamicShared(*artifact));
          if (artifact->hsaco.empty())
            return fail("the artifact holds no code object and no PTX "
                        "(built for " +
                        artifact->chip + ", or with --no-gfx950)");
          codeObject = std::move(artifact->hsaco);
          bytes = codeObject;
          shapes = loopShapes(*artifact, context);
        } else if (isPTX(bytes)) {
          return ptxReport(bytes, {});
        } else if (!isELF(bytes)) {
          // MLIR text or bytecode: `mla-opt --mla-decode-to-gfx950`'s
          // output, whose decode op gives the loop's exact tile bytes (or
          // --mla-decode-to-sm90a's, reported as its PTX).
          DialectRegistry registry;
          registerDialects(registry);
          context->appendDialectRegistry(registry);
          OwningOpRef<ModuleOp> module =
              parseSourceFile<ModuleOp>(*sourceMgr, ParserConfig(context));
          if (!module)
            return fail("not an ELF file, PTX, an .mla artifact or an MLIR "
                        "module");
          SmallVector<gpu::GPUModuleOp> gpuModules;
          module->walk([&](gpu::GPUModuleOp m) { gpuModules.push_back(m); });
          if (gpuModules.size() == 1 &&
              mla::nvptx::isNVVMModule(gpuModules.front())) {
            FailureOr<std::string> ptx = ptxOf(gpuModules.front());
            if (failed(ptx))
              return failure();
            return ptxReport(*ptx, dynamicShared(gpuModules.front()));
          }
          FailureOr<std::string> hsaco = codeObjectOf(*module);
          if (failed(hsaco))
            return failure();
          codeObject = std::move(*hsaco);
          bytes = codeObject;
          shapes = loopShapes(*module);
        }
        if (llvm::Error err =
                mla::amdgpu::printKernelReport(bytes, os, shapes))
          return fail(llvm::toString(std::move(err)));
        return success();
      });

  mla::setVersionPrinter("mla-translate");
  hideLibraryOptions();
  return failed(mlirTranslateMain(argc, argv, "mla translation tool"));
}

//===- PTX.cpp - sm_90a PTX from the NVVM level ---------------------------===//

#include "mla/Target/NVPTX/PTX.h"
#include "mla/Target/KnownTargets.h"
#include "mla/Target/TranslationLevel.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/LegacyPassManager.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Triple.h"

#include <mutex>

using namespace mla;
using namespace mla::nvptx;

namespace {
constexpr llvm::StringLiteral kTriple = "nvptx64-nvidia-cuda";
/// PTX ISA 8.3: what LLVM 22 emits for sm_90a and the H200's driver loads.
constexpr llvm::StringLiteral kFeatures = "+ptx83";

llvm::Error error(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

llvm::Expected<std::unique_ptr<llvm::TargetMachine>>
createTargetMachine(llvm::StringRef chip) {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
  std::string message;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(llvm::Triple(kTriple), message);
  if (!target)
    return error("the NVPTX backend is not available: " + message);
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      llvm::Triple(kTriple), chip, kFeatures, llvm::TargetOptions(),
      /*RM=*/std::nullopt, /*CM=*/std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
  if (!machine)
    return error("cannot create an NVPTX target machine for '" + chip + "'");
  return machine;
}
} // namespace

bool mla::nvptx::isNVVMModule(mlir::gpu::GPUModuleOp module) {
  if (mlir::ArrayAttr targets = module.getTargetsAttr())
    for (mlir::Attribute attr : targets)
      if (llvm::isa<mlir::NVVM::NVVMTargetAttr>(attr))
        return true;
  return false;
}

std::string mla::nvptx::getChip(mlir::gpu::GPUModuleOp module) {
  if (mlir::ArrayAttr targets = module.getTargetsAttr())
    for (mlir::Attribute attr : targets)
      if (auto nvvm = llvm::dyn_cast<mlir::NVVM::NVVMTargetAttr>(attr))
        return nvvm.getChip().str();
  return defaultNVIDIAArch().str();
}

/// gpu.dynamic_shared_memory's block is an internal [0 x i8] in shared
/// memory, which the NVPTX backend prints as a one-byte `.shared` variable
/// (and the optimizer may treat accesses past it as undefined). It is
/// CUDA's `extern __shared__` array: an external declaration, printed
/// `.extern .shared .align 16 .b8 name[]`.
static void declareDynamicSharedMemory(llvm::Module &module) {
  constexpr unsigned kSharedAddressSpace = 3;
  for (llvm::GlobalVariable &global : module.globals()) {
    auto *array = llvm::dyn_cast<llvm::ArrayType>(global.getValueType());
    if (global.getAddressSpace() != kSharedAddressSpace || !array ||
        array->getNumElements() != 0 || global.isDeclaration())
      continue;
    global.setInitializer(nullptr);
    global.setLinkage(llvm::GlobalValue::ExternalLinkage);
  }
}

llvm::Expected<std::unique_ptr<llvm::Module>>
mla::nvptx::translateToLLVMIR(mlir::gpu::GPUModuleOp module,
                              llvm::LLVMContext &context) {
  mlir::MLIRContext *ctx = module->getContext();
  mlir::DialectRegistry registry;
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerGPUDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  mlir::registerNVVMDialectTranslation(registry);
  ctx->appendDialectRegistry(registry);

  if (llvm::Error err = checkTranslationLevel(
          module, {"llvm", "nvvm"}, "NVVM",
          "mla-opt --mla-decode-to-sm90a (stop-at=nvvm, the default)"))
    return std::move(err);

  std::string chip = getChip(module);
  std::unique_ptr<llvm::Module> llvmModule =
      mlir::translateModuleToLLVMIR(module, context, module.getName());
  if (!llvmModule)
    return error("gpu.module @" + module.getName() +
                 " does not translate to LLVM IR (is it lowered to NVVM?)");
  declareDynamicSharedMemory(*llvmModule);
  auto machine = createTargetMachine(chip);
  if (!machine)
    return machine.takeError();
  llvmModule->setTargetTriple(llvm::Triple(kTriple));
  llvmModule->setDataLayout((*machine)->createDataLayout());
  for (llvm::Function &fn : *llvmModule)
    if (!fn.isDeclaration()) {
      fn.addFnAttr("target-cpu", chip);
      fn.addFnAttr("target-features", kFeatures);
    }
  auto optimize = mlir::makeOptimizingTransformer(/*optLevel=*/3,
                                                  /*sizeLevel=*/0,
                                                  machine->get());
  if (llvm::Error err = optimize(llvmModule.get()))
    return std::move(err);
  return llvmModule;
}

llvm::Expected<std::string> mla::nvptx::emitPTX(llvm::Module &module) {
  std::string chip = defaultNVIDIAArch().str();
  for (llvm::Function &fn : module)
    if (fn.hasFnAttribute("target-cpu")) {
      chip = fn.getFnAttribute("target-cpu").getValueAsString().str();
      break;
    }
  auto machine = createTargetMachine(chip);
  if (!machine)
    return machine.takeError();
  llvm::SmallString<0> buffer;
  llvm::raw_svector_ostream stream(buffer);
  llvm::legacy::PassManager passes;
  if ((*machine)->addPassesToEmitFile(passes, stream, nullptr,
                                      llvm::CodeGenFileType::AssemblyFile))
    return error("the NVPTX backend cannot emit PTX");
  passes.run(module);
  return std::string(buffer.str());
}

llvm::Expected<std::map<std::string, int64_t>>
mla::nvptx::entryParameterCounts(llvm::StringRef ptx) {
  std::map<std::string, int64_t> counts;
  std::string entry;
  bool inParams = false;
  llvm::SmallVector<llvm::StringRef> lines;
  ptx.split(lines, '\n');
  for (llvm::StringRef line : lines) {
    line = line.trim();
    if (line.consume_front(".visible .entry ") ||
        line.consume_front(".entry ")) {
      entry = line.take_until([](char c) { return c == '('; }).trim().str();
      counts[entry] = 0;
      inParams = true;
      continue;
    }
    if (!inParams)
      continue;
    if (line.starts_with(")")) {
      inParams = false;
      continue;
    }
    if (!line.starts_with(".param"))
      continue;
    if (!line.contains(".u64") && !line.contains(".b64") &&
        !line.contains(".s64"))
      return error("PTX entry " + entry + " has a parameter of another size "
                   "than 8 bytes: " + line);
    ++counts[entry];
  }
  return counts;
}

//===- CodeObject.cpp - gfx950 code objects from the ROCDL level ----------===//

#include "mla/Target/AMDGPU/CodeObject.h"
#include "mla/Target/AMDGPU/LoopProfile.h"
#include "mla/Target/KnownTargets.h"
#include "mla/Target/TranslationLevel.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/ROCDLDialect.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/ROCDL/ROCDLToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/BinaryFormat/ELF.h"
#include "llvm/BinaryFormat/MsgPackDocument.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/MC/MCAsmInfo.h"
#include "llvm/MC/MCContext.h"
#include "llvm/MC/MCDisassembler/MCDisassembler.h"
#include "llvm/MC/MCInst.h"
#include "llvm/MC/MCInstPrinter.h"
#include "llvm/MC/MCInstrInfo.h"
#include "llvm/MC/MCRegisterInfo.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/MCTargetOptions.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Triple.h"

#include <cstdlib>
#include <map>
#include <mutex>

using namespace mla;
using namespace mla::amdgpu;

namespace {
constexpr llvm::StringLiteral kTriple = "amdgcn-amd-amdhsa";

llvm::Error error(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

void initializeAMDGPU() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeAMDGPUTargetInfo();
    LLVMInitializeAMDGPUTarget();
    LLVMInitializeAMDGPUTargetMC();
    LLVMInitializeAMDGPUAsmPrinter();
    LLVMInitializeAMDGPUAsmParser();
    LLVMInitializeAMDGPUDisassembler();
  });
}

llvm::Expected<const llvm::Target *> lookupAMDGPU() {
  initializeAMDGPU();
  std::string message;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(llvm::Triple(kTriple), message);
  if (!target)
    return error("the AMDGPU backend is not available: " + message);
  return target;
}

llvm::Expected<std::unique_ptr<llvm::TargetMachine>>
createTargetMachine(llvm::StringRef chip) {
  auto target = lookupAMDGPU();
  if (!target)
    return target.takeError();
  std::unique_ptr<llvm::TargetMachine> machine((*target)->createTargetMachine(
      llvm::Triple(kTriple), chip, /*Features=*/"", llvm::TargetOptions(),
      /*RM=*/std::nullopt, /*CM=*/std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
  if (!machine)
    return error("cannot create an AMDGPU target machine for '" + chip + "'");
  return machine;
}

llvm::Expected<std::string> emit(llvm::Module &module,
                                 llvm::CodeGenFileType kind) {
  // The chip travels on the functions' "target-cpu" attribute.
  std::string chip;
  for (llvm::Function &fn : module)
    if (fn.hasFnAttribute("target-cpu")) {
      chip = fn.getFnAttribute("target-cpu").getValueAsString().str();
      break;
    }
  if (chip.empty())
    chip = lookupTarget(defaultTargetName())->arch->arch.str();
  auto machine = createTargetMachine(chip);
  if (!machine)
    return machine.takeError();
  llvm::SmallString<0> buffer;
  llvm::raw_svector_ostream stream(buffer);
  llvm::legacy::PassManager passes;
  if ((*machine)->addPassesToEmitFile(passes, stream, nullptr, kind))
    return error("the AMDGPU backend cannot emit this file type");
  passes.run(module);
  return std::string(buffer.str());
}
} // namespace

std::string mla::amdgpu::getChip(mlir::gpu::GPUModuleOp module) {
  if (mlir::ArrayAttr targets = module.getTargetsAttr())
    for (mlir::Attribute attr : targets)
      if (auto rocdl = llvm::dyn_cast<mlir::ROCDL::ROCDLTargetAttr>(attr))
        return rocdl.getChip().str();
  return lookupTarget(defaultTargetName())->arch->arch.str();
}

/// LLVM's O3 pipeline without the SLP vectorizer. The kernels' vector
/// math reaches LLVM as vector operations already (packed f32 ops come
/// from type legalization); SLP would only pair scalar ops the kernel
/// builds on purpose, e.g. the multiplies a DPP broadcast folds into
/// (v_mul_f32_dpp has no packed form).
static void optimize(llvm::Module &module, llvm::TargetMachine &machine) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopUnrolling = true;
  tuning.LoopInterleaving = true;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = false;
  llvm::PassBuilder builder(&machine, tuning);
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager passes =
      builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  passes.run(module, mam);
}

llvm::Expected<std::unique_ptr<llvm::Module>>
mla::amdgpu::translateToLLVMIR(mlir::gpu::GPUModuleOp module,
                               llvm::LLVMContext &context) {
  mlir::MLIRContext *ctx = module->getContext();
  mlir::DialectRegistry registry;
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerGPUDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  mlir::registerROCDLDialectTranslation(registry);
  ctx->appendDialectRegistry(registry);

  if (llvm::Error err = checkTranslationLevel(
          module, {"llvm", "rocdl"}, "ROCDL",
          "mla-opt --mla-decode-to-gfx950 (stop-at=rocdl, the default)"))
    return std::move(err);

  std::string chip = getChip(module);
  std::unique_ptr<llvm::Module> llvmModule =
      mlir::translateModuleToLLVMIR(module, context, module.getName());
  if (!llvmModule)
    return error("gpu.module @" + module.getName() +
                 " does not translate to LLVM IR (is it lowered to ROCDL?)");
  auto machine = createTargetMachine(chip);
  if (!machine)
    return machine.takeError();
  llvmModule->setTargetTriple(llvm::Triple(kTriple));
  llvmModule->setDataLayout((*machine)->createDataLayout());
  for (llvm::Function &fn : *llvmModule)
    if (!fn.isDeclaration())
      fn.addFnAttr("target-cpu", chip);
  if (!llvmModule->getModuleFlag("amdhsa_code_object_version"))
    llvmModule->addModuleFlag(llvm::Module::Error,
                              "amdhsa_code_object_version", 500);
  optimize(*llvmModule, **machine);
  return llvmModule;
}

llvm::Expected<std::string> mla::amdgpu::emitAssembly(llvm::Module &module) {
  return emit(module, llvm::CodeGenFileType::AssemblyFile);
}

llvm::Expected<std::string> mla::amdgpu::emitObject(llvm::Module &module) {
  return emit(module, llvm::CodeGenFileType::ObjectFile);
}

llvm::Expected<std::string>
mla::amdgpu::linkCodeObject(llvm::StringRef object) {
  // ld.lld of LLVM 22, found at configure time; MLA_LD_LLD overrides it.
  std::string linker = MLA_LD_LLD_PATH;
  if (const char *env = std::getenv("MLA_LD_LLD"))
    linker = env;
  if (!llvm::sys::fs::can_execute(linker))
    return error("cannot run the linker '" + linker +
                 "' (install lld-22 or set MLA_LD_LLD)");

  llvm::SmallString<128> objectPath, outputPath, logPath;
  int fd;
  if (std::error_code ec =
          llvm::sys::fs::createTemporaryFile("mla-kernel", "o", fd, objectPath))
    return error("cannot create a temporary file: " + ec.message());
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << object;
  }
  llvm::sys::fs::createTemporaryFile("mla-kernel", "hsaco", outputPath);
  llvm::sys::fs::createTemporaryFile("mla-kernel", "log", logPath);
  llvm::scope_exit cleanup([&] {
    llvm::sys::fs::remove(objectPath);
    llvm::sys::fs::remove(outputPath);
    llvm::sys::fs::remove(logPath);
  });
  llvm::StringRef args[] = {linker, "-shared", "--no-undefined", objectPath,
                            "-o", outputPath};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, logPath.str(),
                                                logPath.str()};
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(linker, args, std::nullopt, redirects,
                                     /*SecondsToWait=*/60, 0, &message);
  if (rc != 0) {
    std::string log;
    if (auto buffer = llvm::MemoryBuffer::getFile(logPath))
      log = (*buffer)->getBuffer().trim().str();
    return error("ld.lld failed (" + llvm::Twine(rc) + "): " + message + log);
  }
  auto buffer = llvm::MemoryBuffer::getFile(outputPath, /*IsText=*/false);
  if (!buffer)
    return error("cannot read the linked code object: " +
                 buffer.getError().message());
  return (*buffer)->getBuffer().str();
}

//===----------------------------------------------------------------------===//
// Kernel report
//===----------------------------------------------------------------------===//

namespace {
int64_t intField(llvm::msgpack::MapDocNode &map, llvm::StringRef key) {
  auto it = map.find(key);
  if (it == map.end())
    return 0;
  llvm::msgpack::DocNode &node = it->second;
  if (node.getKind() == llvm::msgpack::Type::UInt)
    return node.getUInt();
  if (node.getKind() == llvm::msgpack::Type::Int)
    return node.getInt();
  return 0;
}

std::string stringField(llvm::msgpack::MapDocNode &map, llvm::StringRef key) {
  auto it = map.find(key);
  if (it == map.end() || it->second.getKind() != llvm::msgpack::Type::String)
    return "";
  return it->second.getString().str();
}

/// Mnemonic classes the report counts (a buffer load to LDS says so in
/// its operands: `buffer_load_dwordx4 v1, s[8:11], 0 offen lds`).
std::string classify(llvm::StringRef mnemonic, llvm::StringRef operands) {
  if (mnemonic.starts_with("v_mfma"))
    return "mfma";
  if (mnemonic.starts_with("global_load_lds_") ||
      (mnemonic.starts_with("buffer_load_") && operands.ends_with(" lds")))
    return "lds_dma_load";
  if (mnemonic.starts_with("global_load_"))
    return ("global_load." + mnemonic.drop_front(strlen("global_load_"))).str();
  if (mnemonic.starts_with("scratch_") ||
      (mnemonic.starts_with("buffer_") && mnemonic.contains("store")))
    return "scratch";
  if (mnemonic.starts_with("s_waitcnt"))
    return "s_waitcnt";
  if (mnemonic.starts_with("ds_read") || mnemonic.starts_with("ds_load"))
    return "lds_read";
  if (mnemonic.starts_with("ds_write") || mnemonic.starts_with("ds_store"))
    return "lds_write";
  return "";
}
} // namespace

llvm::Expected<std::vector<KernelMetadata>>
mla::amdgpu::readKernelMetadata(llvm::StringRef codeObject) {
  auto objectOr = llvm::object::ObjectFile::createELFObjectFile(
      llvm::MemoryBufferRef(codeObject, "code object"));
  if (!objectOr)
    return error("not an ELF file: " + llvm::toString(objectOr.takeError()));
  auto *elf = llvm::dyn_cast<llvm::object::ELF64LEObjectFile>(objectOr->get());
  if (!elf || elf->getArch() != llvm::Triple::amdgcn)
    return error("not an AMDGPU code object");
  const auto &file = elf->getELFFile();

  // Kernel metadata: the NT_AMDGPU_METADATA note (msgpack).
  std::vector<KernelMetadata> kernels;
  auto headers = file.program_headers();
  if (!headers)
    return error("malformed program headers");
  llvm::msgpack::Document doc;
  for (const auto &phdr : *headers) {
    if (phdr.p_type != llvm::ELF::PT_NOTE)
      continue;
    llvm::Error err = llvm::Error::success();
    for (const auto &note : file.notes(phdr, err)) {
      if (note.getName() != "AMDGPU" ||
          note.getType() != llvm::ELF::NT_AMDGPU_METADATA)
        continue;
      if (!doc.readFromBlob(note.getDescAsStringRef(4), false))
        return error("unreadable AMDGPU metadata note");
      auto root = doc.getRoot();
      if (root.getKind() != llvm::msgpack::Type::Map)
        return error("malformed AMDGPU metadata");
      auto &rootMap = root.getMap();
      auto it = rootMap.find("amdhsa.kernels");
      if (it == rootMap.end() ||
          it->second.getKind() != llvm::msgpack::Type::Array)
        continue;
      for (auto &node : it->second.getArray()) {
        if (node.getKind() != llvm::msgpack::Type::Map)
          continue;
        auto &map = node.getMap();
        KernelMetadata k;
        k.name = stringField(map, ".name");
        k.vgprs = intField(map, ".vgpr_count");
        k.agprs = intField(map, ".agpr_count");
        k.sgprs = intField(map, ".sgpr_count");
        k.lds = intField(map, ".group_segment_fixed_size");
        k.scratch = intField(map, ".private_segment_fixed_size");
        k.vgprSpills = intField(map, ".vgpr_spill_count");
        k.sgprSpills = intField(map, ".sgpr_spill_count");
        k.maxFlatWorkgroupSize = intField(map, ".max_flat_workgroup_size");
        k.wavefrontSize = intField(map, ".wavefront_size");
        k.kernargSegmentSize = intField(map, ".kernarg_segment_size");
        k.kernargSegmentAlign = intField(map, ".kernarg_segment_align");
        auto args = map.find(".args");
        if (args != map.end() &&
            args->second.getKind() == llvm::msgpack::Type::Array)
          for (auto &argNode : args->second.getArray()) {
            if (argNode.getKind() != llvm::msgpack::Type::Map)
              return error("malformed .args entry of kernel " + k.name);
            auto &argMap = argNode.getMap();
            k.args.push_back({intField(argMap, ".offset"),
                              intField(argMap, ".size"),
                              stringField(argMap, ".value_kind")});
          }
        kernels.push_back(std::move(k));
      }
    }
    if (err)
      return error("malformed note: " + llvm::toString(std::move(err)));
  }
  if (kernels.empty())
    return error("the code object describes no kernel");
  return kernels;
}

namespace {
/// Each kernel's instructions, and how many fall in each class.
struct DisassembledKernels {
  llvm::StringMap<std::map<std::string, int64_t>> counts;
  llvm::StringMap<std::vector<DecodedInst>> code;
};

/// The code of the function symbol `symbol`, if it lies in its section.
std::optional<llvm::ArrayRef<uint8_t>>
symbolBytes(const llvm::object::ELFSymbolRef &symbol,
            const llvm::object::ELF64LEObjectFile &elf) {
  auto type = symbol.getType();
  auto address = symbol.getAddress();
  auto section = symbol.getSection();
  if (!type || !address || !section ||
      *type != llvm::object::SymbolRef::ST_Function ||
      *section == elf.section_end()) {
    llvm::consumeError(type.takeError());
    llvm::consumeError(address.takeError());
    llvm::consumeError(section.takeError());
    return std::nullopt;
  }
  auto contents = (*section)->getContents();
  if (!contents) {
    llvm::consumeError(contents.takeError());
    return std::nullopt;
  }
  uint64_t start = *address - (*section)->getAddress();
  uint64_t size = symbol.getSize();
  if (start + size > contents->size())
    return std::nullopt;
  return llvm::ArrayRef<uint8_t>(
      reinterpret_cast<const uint8_t *>(contents->data()) + start, size);
}

/// Disassembles every kernel of `elf` for `chip`.
llvm::Expected<DisassembledKernels>
disassembleKernels(const llvm::object::ELF64LEObjectFile &elf,
                   const std::string &chip) {
  auto target = lookupAMDGPU();
  if (!target)
    return target.takeError();
  llvm::Triple triple(kTriple);
  std::unique_ptr<llvm::MCRegisterInfo> regInfo(
      (*target)->createMCRegInfo(triple));
  llvm::MCTargetOptions mcOptions;
  std::unique_ptr<llvm::MCAsmInfo> asmInfo(
      (*target)->createMCAsmInfo(*regInfo, triple, mcOptions));
  std::unique_ptr<llvm::MCSubtargetInfo> subtarget(
      (*target)->createMCSubtargetInfo(triple, chip, ""));
  std::unique_ptr<llvm::MCInstrInfo> instrInfo((*target)->createMCInstrInfo());
  llvm::MCContext mcContext(triple, asmInfo.get(), regInfo.get(),
                            subtarget.get());
  std::unique_ptr<llvm::MCDisassembler> disassembler(
      (*target)->createMCDisassembler(*subtarget, mcContext));
  std::unique_ptr<llvm::MCInstPrinter> printer((*target)->createMCInstPrinter(
      triple, asmInfo->getAssemblerDialect(), *asmInfo, *instrInfo, *regInfo));
  if (!disassembler || !printer)
    return error("the AMDGPU disassembler is not available");

  DisassembledKernels result;
  for (const llvm::object::ELFSymbolRef &symbol : elf.symbols()) {
    auto name = symbol.getName();
    auto address = symbol.getAddress();
    if (!name || !address) {
      llvm::consumeError(name.takeError());
      llvm::consumeError(address.takeError());
      continue;
    }
    std::optional<llvm::ArrayRef<uint8_t>> bytes = symbolBytes(symbol, elf);
    if (!bytes)
      continue;
    auto &kernelCounts = result.counts[*name];
    auto &kernelCode = result.code[*name];
    for (uint64_t offset = 0; offset < bytes->size();) {
      llvm::MCInst inst;
      uint64_t instSize = 0;
      uint64_t at = *address + offset;
      auto status = disassembler->getInstruction(
          inst, instSize, bytes->slice(offset), at, llvm::nulls());
      if (status != llvm::MCDisassembler::Success || instSize == 0) {
        offset += 4;
        continue;
      }
      const char *mnemonic = printer->getMnemonic(inst).first;
      if (!mnemonic) {
        offset += instSize;
        continue;
      }
      DecodedInst decoded;
      decoded.mnemonic = llvm::StringRef(mnemonic).trim().str();
      llvm::raw_string_ostream operands(decoded.operands);
      printer->printInst(&inst, at, "", *subtarget, operands);
      operands.flush();
      std::string cls = classify(decoded.mnemonic, decoded.operands);
      if (!cls.empty())
        ++kernelCounts[cls];
      ++kernelCounts["total"];
      decoded.address = at;
      for (uint64_t b = 0; b < 4 && offset + b < bytes->size(); ++b)
        decoded.firstWord |= uint32_t((*bytes)[offset + b]) << (8 * b);
      kernelCode.push_back(std::move(decoded));
      offset += instSize;
    }
  }
  return result;
}

/// Registers, LDS, scratch and the occupancy they allow.
void printKernelResources(const KernelMetadata &k, const ArchInfo &arch,
                          llvm::raw_ostream &os) {
  bool unified = arch.unifiedRegisterFile;
  int64_t maxWaves = arch.maxWavesPerSIMD;
  // Allocated in granules of 8.
  int64_t regs = unified ? k.vgprs : k.vgprs + k.agprs;
  int64_t granule = ((std::max<int64_t>(regs, 1) + 7) / 8) * 8;
  int64_t wavesByRegs =
      std::min<int64_t>(maxWaves, arch.vectorRegistersPerLane / granule);
  // In a unified file the metadata's VGPR count already includes the
  // AGPRs; say so rather than print two numbers that look additive.
  os << "  vector_registers " << regs << " of " << arch.vectorRegistersPerLane;
  if (unified)
    os << " (unified file, agpr " << k.agprs << " of them)";
  else
    os << " (vgpr " << k.vgprs << " + agpr " << k.agprs << ")";
  os << "  sgpr " << k.sgprs << "\n";
  os << "  lds_bytes " << k.lds << "  scratch_bytes " << k.scratch
     << "  spills vgpr " << k.vgprSpills << " sgpr " << k.sgprSpills << "\n";
  os << "  max_flat_workgroup_size " << k.maxFlatWorkgroupSize
     << "  wavefront_size " << k.wavefrontSize << "\n";
  os << "  occupancy_waves_per_simd " << wavesByRegs << " (by registers)";
  if (k.lds > 0 && k.maxFlatWorkgroupSize > 0) {
    int64_t wavesPerGroup =
        (k.maxFlatWorkgroupSize + k.wavefrontSize - 1) / k.wavefrontSize;
    int64_t groupsPerCU = arch.ldsBytesPerCU / k.lds;
    os << ", "
       << std::min<int64_t>(maxWaves,
                            groupsPerCU * wavesPerGroup / arch.simdsPerCU)
       << " (by LDS)";
  }
  os << "\n";
}

/// The main loop's static profile, for the waves of one workgroup on a CU
/// (one per SIMD for the partial kernel).
void printKernelLoop(const KernelMetadata &k, const TargetInfo &target,
                     llvm::ArrayRef<DecodedInst> code,
                     const std::map<std::string, LoopShape> &shapes,
                     llvm::raw_ostream &os) {
  auto profile = profileMainLoop(code);
  if (!profile)
    return;
  // From an artifact: the tile's exact bytes.
  auto shape = shapes.find(k.name);
  std::optional<double> tileBytes;
  if (shape != shapes.end() && shape->second.cacheBytesPerRow > 0)
    tileBytes = double(shape->second.kvRowsPerIteration *
                       shape->second.cacheBytesPerRow);
  int64_t waves = std::max<int64_t>(
      1, (k.maxFlatWorkgroupSize + k.wavefrontSize - 1) / k.wavefrontSize);
  printLoopProfile(*profile, target, waves, os, tileBytes);
  if (shape != shapes.end())
    printLoopShape(*profile, shape->second, os);
}
} // namespace

llvm::Error
mla::amdgpu::printKernelReport(llvm::StringRef codeObject,
                               llvm::raw_ostream &os,
                               const std::map<std::string, LoopShape> &shapes) {
  auto kernelsOr = readKernelMetadata(codeObject);
  if (!kernelsOr)
    return kernelsOr.takeError();
  auto objectOr = llvm::object::ObjectFile::createELFObjectFile(
      llvm::MemoryBufferRef(codeObject, "code object"));
  if (!objectOr)
    return error("not an ELF file: " + llvm::toString(objectOr.takeError()));
  auto *elf = llvm::cast<llvm::object::ELF64LEObjectFile>(objectOr->get());
  // The chip the code object was built for, from its ELF flags.
  std::string chip =
      elf->tryGetCPUName()
          .value_or(lookupTarget(defaultTargetName())->arch->arch)
          .str();
  auto disassembled = disassembleKernels(*elf, chip);
  if (!disassembled)
    return disassembled.takeError();

  // Register file, LDS and occupancy limits come from the chip table.
  const ArchInfo *arch = lookupArch(chip);
  if (!arch || !arch->hasGPUKernels)
    return error("the kernel report knows the chips of the target table; "
                 "this code object is for " + chip);
  const TargetInfo *target = lookupTarget(chip);
  for (const KernelMetadata &k : *kernelsOr) {
    os << "kernel " << k.name << "\n";
    printKernelResources(k, *arch, os);
    os << "  instructions";
    auto it = disassembled->counts.find(k.name);
    if (it != disassembled->counts.end())
      for (auto &[cls, n] : it->second)
        os << " " << cls << "=" << n;
    os << "\n";
    auto code = disassembled->code.find(k.name);
    if (target && code != disassembled->code.end())
      printKernelLoop(k, *target, code->second, shapes, os);
  }
  return llvm::Error::success();
}

//===- JitSupport.cpp - shared setup of the JIT backends ------------------===//

#include "mla/Jit/JitSupport.h"

#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "llvm/Support/TargetSelect.h"

#include "mla/Runtime/Numerics.h"

#include <cstdint>
#include <cstring>

using namespace mla;

namespace {
/// The soft-float helper LLVM calls to round an f32 to bf16 on a host
/// without a bf16 conversion instruction (x86-64 before AVX512-BF16). The
/// libraries that define it (libgcc from GCC 13, MLIR's float16 utils)
/// are not in the symbols a process that dlopens the JIT library shows
/// the engine, so the JIT gets this one (the runtime's encoder: round to
/// nearest even, NaN stays a quiet NaN). The bf16 comes back in the low
/// half of the register a float is returned in, where the x86-64 and
/// AArch64 calling conventions put a bfloat.
float truncateToBf16(float x) {
  uint32_t bits = floatToBF16(x);
  float result;
  std::memcpy(&result, &bits, sizeof result);
  return result;
}
} // namespace

llvm::Expected<std::unique_ptr<mlir::ExecutionEngine>>
mla::createEngine(mlir::ModuleOp module,
                  const std::vector<std::pair<std::string, void *>> &symbols) {
  static bool initialized = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    return true;
  }();
  (void)initialized;
  // ExecutionEngineOptions::transformer is a function_ref: the function it
  // refers to must outlive create() (ASan found it dangling).
  std::function<llvm::Error(llvm::Module *)> transformer =
      mlir::makeOptimizingTransformer(/*optLevel=*/3, /*sizeLevel=*/0,
                                      /*targetMachine=*/nullptr);
  mlir::ExecutionEngineOptions options;
  options.transformer = transformer;
  auto engine = mlir::ExecutionEngine::create(module, options);
  if (!engine)
    return engine.takeError();
  // Copies between strided memrefs lower to a call of the C runner utils.
  (*engine)->registerSymbols([&](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap map;
    map[interner("memrefCopy")] = {llvm::orc::ExecutorAddr::fromPtr(&memrefCopy),
                                   llvm::JITSymbolFlags::Exported};
    map[interner("__truncsfbf2")] = {
        llvm::orc::ExecutorAddr::fromPtr(&truncateToBf16),
        llvm::JITSymbolFlags::Exported};
    for (const auto &[name, address] : symbols)
      map[interner(name)] = {llvm::orc::ExecutorAddr::fromPtr(address),
                             llvm::JITSymbolFlags::Exported};
    return map;
  });
  return std::move(*engine);
}

std::vector<int64_t> mla::makeDescriptor(const void *data,
                                         const std::vector<int64_t> &shape) {
  size_t rank = shape.size();
  std::vector<int64_t> words(3 + 2 * rank);
  words[0] = words[1] = reinterpret_cast<int64_t>(data);
  words[2] = 0;
  int64_t stride = 1;
  for (size_t i = rank; i-- > 0;) {
    words[3 + i] = shape[i];
    words[3 + rank + i] = stride;
    stride *= shape[i];
  }
  return words;
}

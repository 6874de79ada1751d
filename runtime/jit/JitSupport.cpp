//===- JitSupport.cpp - shared setup of the JIT backends ------------------===//

#include "mla/Jit/JitSupport.h"

#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "llvm/Support/TargetSelect.h"

using namespace mla;

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

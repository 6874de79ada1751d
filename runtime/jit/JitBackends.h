//===- JitBackends.h - the backends of libMLARuntimeJit ---------*- C++ -*-===//
//
// The two backends that JIT-compile the artifact's MLIR forms; the runtime
// reaches them through the library's entry point (JitLibrary.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_JIT_JITBACKENDS_H
#define MLA_RUNTIME_JIT_JITBACKENDS_H

#include "mla/Runtime/Backend.h"

#include <memory>

namespace mla::jit {
std::unique_ptr<rt::Backend> createEmuBackend();
std::unique_ptr<rt::Backend> createCpuBackend();
} // namespace mla::jit

#endif // MLA_RUNTIME_JIT_JITBACKENDS_H

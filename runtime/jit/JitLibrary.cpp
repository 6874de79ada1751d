//===- JitLibrary.cpp - the entry point the runtime opens -----------------===//
//
// libMLARuntimeJit exports one C symbol (rt::kJitEntryPoint): the runtime
// finds it with dlsym and asks it for an emu or a cpu backend. The ABI
// version guards against a runtime and a JIT library from different builds.
//
//===----------------------------------------------------------------------===//

#include "JitBackends.h"

using namespace mla;

extern "C" __attribute__((visibility("default"))) rt::Backend *
mla_jit_backend_create(int kind, int abiVersion) {
  static_assert(rt::kJitAbiVersion == 2, "update the entry point");
  if (abiVersion != rt::kJitAbiVersion)
    return nullptr;
  switch (static_cast<rt::JitBackendKind>(kind)) {
  case rt::JitBackendKind::Emu:
    return jit::createEmuBackend().release();
  case rt::JitBackendKind::Cpu:
    return jit::createCpuBackend().release();
  }
  return nullptr;
}

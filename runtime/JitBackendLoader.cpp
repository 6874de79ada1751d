//===- JitBackendLoader.cpp - the emu and cpu backends, loaded on demand --===//
//
// The emu and cpu backends JIT-compile MLIR, so they need LLVM and MLIR; the
// runtime does not. They live in libMLARuntimeJit, which is opened with
// dlopen the first time an emu or cpu context is created — the way IREE
// loads HAL drivers — so a process that only launches on a GPU never maps
// a compiler. The library is looked for in $MLA_JIT_LIBRARY, then next to
// libMLARuntime itself (the install layout), then on the loader's path.
//
//===----------------------------------------------------------------------===//

#include "mla/Runtime/Backend.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

using namespace mla;
using namespace mla::rt;

namespace {
constexpr const char *kJitLibraryName = "libMLARuntimeJit.so";
using CreateFn = Backend *(*)(int kind, int abiVersion);

/// The directory this library was loaded from, with a trailing '/'.
std::string ownDirectory() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void *>(&ownDirectory), &info) ||
      !info.dli_fname)
    return "";
  std::string path = info.dli_fname;
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

/// Opens the library once per process; it stays loaded (the JIT'd code of
/// live kernels points into it).
Expected<CreateFn> loadJitLibrary() {
  static std::mutex mutex;
  static CreateFn create = nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  if (create)
    return create;
  std::vector<std::string> candidates;
  if (const char *path = std::getenv("MLA_JIT_LIBRARY"))
    candidates.push_back(path);
  else
    candidates = {ownDirectory() + kJitLibraryName, kJitLibraryName};
  std::string tried;
  for (const std::string &name : candidates) {
    void *handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char *why = dlerror();
      tried += "\n  " + (why ? std::string(why) : name + ": not found");
      continue;
    }
    create = reinterpret_cast<CreateFn>(dlsym(handle, kJitEntryPoint));
    if (!create)
      return fail(Status::BackendUnavailable, name, " is not an mla JIT "
                  "backend library (no ", kJitEntryPoint, ")");
    return create;
  }
  return fail(Status::BackendUnavailable,
              "the emu and cpu backends need ", kJitLibraryName,
              ", which is not installed (install it next to libMLARuntime, "
              "or set MLA_JIT_LIBRARY to its path):", tried);
}
} // namespace

Expected<std::unique_ptr<Backend>> mla::rt::createJitBackend(JitBackendKind kind) {
  auto create = loadJitLibrary();
  if (!create)
    return create.takeError();
  Backend *backend = (*create)(static_cast<int>(kind), kJitAbiVersion);
  if (!backend)
    return fail(Status::BackendUnavailable, kJitLibraryName,
                " was built for another runtime release (JIT ABI version ",
                kJitAbiVersion, " expected)");
  return std::unique_ptr<Backend>(backend);
}

//===- DriverLibrary.h - GPU driver libraries opened at run time -*- C++ -*-===//
//
// The hip and cuda backends link no GPU runtime: each opens its driver
// library with dlopen when a context is created and resolves the functions
// it uses into a table. The library is found by an environment variable or
// a list of names, loaded once per process and path, and never unloaded
// (drivers do not support it while the process runs). A missing library or
// symbol is BackendUnavailable with every reason dlopen gave.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_DRIVERLIBRARY_H
#define MLA_RUNTIME_DRIVERLIBRARY_H

#include "mla/Runtime/Status.h"

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

namespace mla::rt {

/// Resolves a library's symbols into function pointers, listing the absent.
struct SymbolResolver {
  void *handle;
  std::string missing;
  template <typename Fn> void operator()(Fn &fn, const char *name) {
    fn = reinterpret_cast<std::remove_reference_t<Fn>>(dlsym(handle, name));
    if (!fn)
      missing += std::string(missing.empty() ? "" : ", ") + name;
  }
  /// A function the backend can do without (null when absent).
  template <typename Fn> void optional(Fn &fn, const char *name) {
    fn = reinterpret_cast<std::remove_reference_t<Fn>>(dlsym(handle, name));
  }
};

/// How a backend finds its driver and says what went wrong.
struct DriverLibrarySpec {
  const char *envVar;                // overrides the names
  std::vector<std::string> names;    // tried in order
  std::string cannotLoad;            // "hip backend: cannot load ... :"
  std::string backend;               // "hip backend"
  std::string versionHint;           // "(ROCm 6.0 or newer is needed)"
};

/// The function table `Api` of the driver `spec` describes, filled by
/// `resolveAll(resolver, api)`; loaded once per process and path.
template <typename Api, typename ResolveAll>
Expected<const Api *> loadDriverLibrary(const DriverLibrarySpec &spec,
                                        ResolveAll resolveAll) {
  static std::mutex mutex;
  static std::map<std::string, Api> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  std::vector<std::string> candidates = spec.names;
  if (const char *path = std::getenv(spec.envVar))
    candidates = {path};
  for (const std::string &name : candidates) {
    auto it = loaded.find(name);
    if (it != loaded.end())
      return &it->second;
  }
  void *handle = nullptr;
  std::string tried, path;
  for (const std::string &name : candidates) {
    handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle) {
      path = name;
      break;
    }
    const char *why = dlerror();
    tried += "\n  " + (why ? std::string(why) : name + ": not found");
  }
  if (!handle)
    return fail(Status::BackendUnavailable, spec.cannotLoad, tried);
  Api api;
  SymbolResolver resolver{handle, ""};
  resolveAll(resolver, api);
  if (!resolver.missing.empty())
    return fail(Status::BackendUnavailable, spec.backend, ": ", path,
                " lacks ", resolver.missing, " ", spec.versionHint);
  return &loaded.emplace(path, api).first->second;
}

} // namespace mla::rt

#endif // MLA_RUNTIME_DRIVERLIBRARY_H

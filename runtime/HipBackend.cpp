//===- HipBackend.cpp - the gfx950 code object on an AMD GPU --------------===//
//
// The `hip` backend loads libamdhip64.so with dlopen when a context is
// created — nothing of ROCm is needed to build — and resolves the handful of
// functions it uses. The kernels' arguments are packed into one kernarg
// buffer from the artifact's metadata: every memref descriptor word goes to
// the offset the code object's own metadata gave it. A missing library, no
// device, or a device of another architecture than the artifact's is an
// error code with a message, never a crash.
//
//===----------------------------------------------------------------------===//

#include "mla/Runtime/Backend.h"
#include "mla/Runtime/DriverLibrary.h"

#include <algorithm>
#include <array>
#include <cstring>

using namespace mla;
using namespace mla::rt;

namespace {
// The HIP ABI as far as it is used here (hip_runtime_api.h, ROCm 6 and 7).
using hipError_t = int;
constexpr hipError_t hipSuccess = 0;
constexpr int hipMemcpyHostToDevice = 1, hipMemcpyDeviceToHost = 2;
void *const kLaunchParamBufferPointer = reinterpret_cast<void *>(0x01);
void *const kLaunchParamBufferSize = reinterpret_cast<void *>(0x02);
void *const kLaunchParamEnd = reinterpret_cast<void *>(0x03);
// hipDeviceProp_tR0600: 1472 bytes, gcnArchName char[256] at byte 1160.
constexpr size_t kDevicePropBytes = 1472, kGcnArchNameOffset = 1160;

struct HipApi {
  hipError_t (*init)(unsigned);
  hipError_t (*getDeviceCount)(int *);
  hipError_t (*setDevice)(int);
  hipError_t (*getDeviceProperties)(void *, int);
  hipError_t (*moduleLoadData)(void **, const void *);
  hipError_t (*moduleUnload)(void *);
  hipError_t (*moduleGetFunction)(void **, void *, const char *);
  hipError_t (*moduleLaunchKernel)(void *, unsigned, unsigned, unsigned,
                                   unsigned, unsigned, unsigned, unsigned,
                                   void *, void **, void **);
  hipError_t (*malloc)(void **, size_t);
  hipError_t (*free)(void *);
  hipError_t (*memcpy)(void *, const void *, size_t, int);
  hipError_t (*streamSynchronize)(void *);
  const char *(*getErrorString)(hipError_t);
};

/// The HIP runtime's functions ($MLA_HIP_LIBRARY, else libamdhip64).
Expected<const HipApi *> loadHip() {
  DriverLibrarySpec spec{
      "MLA_HIP_LIBRARY",
      {"libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6",
       "/opt/rocm/lib/libamdhip64.so"},
      "hip backend: cannot load the HIP runtime (libamdhip64.so; set "
      "MLA_HIP_LIBRARY to its path):",
      "hip backend",
      "(ROCm 6.0 or newer is needed)"};
  return loadDriverLibrary<HipApi>(spec, [](SymbolResolver &resolve,
                                            HipApi &api) {
    resolve(api.init, "hipInit");
    resolve(api.getDeviceCount, "hipGetDeviceCount");
    resolve(api.setDevice, "hipSetDevice");
    resolve(api.getDeviceProperties, "hipGetDevicePropertiesR0600");
    resolve(api.moduleLoadData, "hipModuleLoadData");
    resolve(api.moduleUnload, "hipModuleUnload");
    resolve(api.moduleGetFunction, "hipModuleGetFunction");
    resolve(api.moduleLaunchKernel, "hipModuleLaunchKernel");
    resolve(api.malloc, "hipMalloc");
    resolve(api.free, "hipFree");
    resolve(api.memcpy, "hipMemcpy");
    resolve(api.streamSynchronize, "hipStreamSynchronize");
    resolve(api.getErrorString, "hipGetErrorString");
  });
}

class HipBackend;

class HipKernel : public LoadedKernel {
public:
  HipKernel(HipBackend &backend) : backend(backend) {}
  ~HipKernel() override;
  Error init(const Artifact &artifact);
  Error launch(const LaunchBuffers &buffers, void *stream) override;

private:
  Error launchOne(const ArtifactKernel &kernel, void *function,
                        const LaunchBuffers &buffers, void *stream);
  HipBackend &backend;
  void *module = nullptr;
  std::vector<ArtifactKernel> kernels;
  std::vector<void *> functions;
};

class HipBackend : public Backend {
public:
  HipBackend(const HipApi &api, int device, std::string arch)
      : api(api), device(device), archName(std::move(arch)) {}

  std::string arch() const override { return archName; }

  Error check(hipError_t status, const std::string &what,
              Status code = Status::LaunchFailed) const {
    if (status == hipSuccess)
      return Error::success();
    const char *text = api.getErrorString(status);
    return fail(code, "hip backend: ", what, " failed: ",
                text ? text : "unknown error", " (", status, ")");
  }
  /// HIP's current device is per thread: select ours on every call.
  Error select() const {
    return check(api.setDevice(device), "hipSetDevice", Status::Internal);
  }

  Expected<std::unique_ptr<LoadedKernel>>
  load(const Artifact &artifact) override {
    if (artifact.hsaco.empty())
      return fail(Status::BackendUnavailable,
                  "the artifact has no code object (compiled without it); "
                  "recompile it with the gfx950 form or use the cpu backend");
    if (artifact.chip != archName)
      return fail(Status::TargetMismatch, "the artifact is built for ",
                  artifact.chip, ", but GPU ", device, " is ", archName,
                  "; recompile it for ", archName);
    auto kernel = std::make_unique<HipKernel>(*this);
    if (Error err = kernel->init(artifact))
      return std::move(err);
    return std::unique_ptr<LoadedKernel>(std::move(kernel));
  }

  Error allocate(size_t bytes, void **ptr) override {
    if (Error err = select())
      return err;
    return check(api.malloc(ptr, std::max<size_t>(bytes, 1)), "hipMalloc",
                 Status::Internal);
  }
  Error release(void *ptr) override {
    if (Error err = select())
      return err;
    return check(api.free(ptr), "hipFree", Status::Internal);
  }
  Error copyToDevice(void *dst, const void *src, size_t bytes) override {
    if (Error err = select())
      return err;
    return check(api.memcpy(dst, src, bytes, hipMemcpyHostToDevice),
                 "hipMemcpy", Status::Internal);
  }
  Error copyToHost(void *dst, const void *src, size_t bytes) override {
    if (Error err = select())
      return err;
    return check(api.memcpy(dst, src, bytes, hipMemcpyDeviceToHost),
                 "hipMemcpy", Status::Internal);
  }
  Error synchronize(void *stream) override {
    if (Error err = select())
      return err;
    return check(api.streamSynchronize(stream), "hipStreamSynchronize");
  }

  const HipApi &api;
  int device;
  std::string archName;
};

HipKernel::~HipKernel() {
  if (module)
    (void)backend.api.moduleUnload(module);
}

Error HipKernel::init(const Artifact &artifact) {
  if (Error err = backend.select())
    return err;
  if (Error err = backend.check(
          backend.api.moduleLoadData(&module, artifact.hsaco.data()),
          "loading the code object (hipModuleLoadData)",
          Status::InvalidArtifact))
    return err;
  kernels = artifact.kernels;
  for (const ArtifactKernel &kernel : kernels) {
    void *function = nullptr;
    if (Error err = backend.check(
            backend.api.moduleGetFunction(&function, module,
                                          kernel.name.c_str()),
            "finding kernel " + kernel.name, Status::InvalidArtifact))
      return err;
    functions.push_back(function);
  }
  return Error::success();
}

Error HipKernel::launchOne(const ArtifactKernel &kernel, void *function,
                           const LaunchBuffers &buffers, void *stream) {
  auto packed = packLaunch(kernel, buffers);
  if (!packed)
    return packed.takeError();
  if (packed->empty())
    return Error::success();
  auto [grid, block] = std::pair(packed->grid, kernel.block);
  void *extra[] = {kLaunchParamBufferPointer, packed->kernarg.data(),
                   kLaunchParamBufferSize, &packed->kernargBytes,
                   kLaunchParamEnd};
  return backend.check(
      backend.api.moduleLaunchKernel(function, grid[0], grid[1], grid[2],
                                     block[0], block[1], block[2],
                                     /*sharedMemBytes=*/0, stream, nullptr,
                                     extra),
      "launching " + kernel.name);
}

Error HipKernel::launch(const LaunchBuffers &buffers, void *stream) {
  if (Error err = backend.select())
    return err;
  for (size_t i : kKernelLaunchOrder) {
    if (buffers.runs(kernels[i]))
      if (Error err = launchOne(kernels[i], functions[i], buffers, stream))
        return err;
  }
  return Error::success();
}
} // namespace

Expected<std::unique_ptr<Backend>> mla::rt::createHipBackend(int device) {
  auto api = loadHip();
  if (!api)
    return api.takeError();
  const HipApi &hip = **api;
  hipError_t status = hip.init(0);
  int count = 0;
  if (status == hipSuccess)
    status = hip.getDeviceCount(&count);
  if (status != hipSuccess || count == 0) {
    const char *text = status == hipSuccess ? "no devices"
                                            : hip.getErrorString(status);
    return fail(Status::BackendUnavailable,
                "hip backend: no AMD GPU is available (",
                text ? text : "unknown error", ")");
  }
  if (device < 0 || device >= count)
    return fail(Status::BackendUnavailable, "hip backend: no GPU ", device,
                " (", count, " present)");
  std::vector<char> props(4096, 0); // room beyond kDevicePropBytes
  static_assert(kGcnArchNameOffset + 256 <= kDevicePropBytes);
  status = hip.getDeviceProperties(props.data(), device);
  if (status != hipSuccess)
    return fail(Status::BackendUnavailable,
                "hip backend: cannot read the properties of GPU ", device);
  // "gfx950:sramecc+:xnack-": the architecture is the part before ':'.
  std::string arch(props.data() + kGcnArchNameOffset,
                   strnlen(props.data() + kGcnArchNameOffset, 256));
  arch = arch.substr(0, arch.find(':'));
  return std::unique_ptr<Backend>(
      std::make_unique<HipBackend>(hip, device, arch));
}

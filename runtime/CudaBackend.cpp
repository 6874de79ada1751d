//===- CudaBackend.cpp - sm_90a PTX on an NVIDIA GPU ----------------------===//
//
// The `cuda` backend loads the CUDA driver (libcuda.so.1) with dlopen when a
// context is created — nothing of the CUDA toolkit is needed to build or to
// run — and uses the driver API only: the device's primary context, the
// artifact's PTX JIT-compiled by cuModuleLoadDataEx, kernels launched with
// their parameters packed into one buffer from the artifact's kernarg
// fields (the same packing as the hip backend). A launch calls only
// cuCtxSetCurrent and cuLaunchKernel on the caller's stream (cuLaunchKernelEx
// with programmatic stream serialization for a kernel that waits for the
// previous one itself, so that it starts while that one finishes): it neither
// allocates device memory nor synchronizes, so it can be captured in a
// CUDA graph. A missing driver, no device, or a device of another
// architecture than the artifact's is an error code with a message.
//
//===----------------------------------------------------------------------===//

#include "mla/Runtime/Backend.h"
#include "mla/Runtime/DriverLibrary.h"

#include <algorithm>
#include <string>

using namespace mla;
using namespace mla::rt;

namespace {
// The driver API as far as it is used here (cuda.h, CUDA 12 and 13).
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
constexpr CUresult CUDA_SUCCESS = 0;
constexpr int kComputeCapabilityMajor = 75, kComputeCapabilityMinor = 76;
constexpr int kJitErrorLogBuffer = 5, kJitErrorLogBufferSize = 6;
constexpr int kFuncMaxDynamicSharedSizeBytes = 8;
void *const kLaunchParamBufferPointer = reinterpret_cast<void *>(0x01);
void *const kLaunchParamBufferSize = reinterpret_cast<void *>(0x02);
void *const kLaunchParamEnd = reinterpret_cast<void *>(0x00);
constexpr int kLaunchAttributeProgrammaticStreamSerialization = 6;
struct CUlaunchAttribute {
  int id;
  char pad[4];
  union {
    int programmaticStreamSerializationAllowed;
    char bytes[64];
  } value;
};
struct CUlaunchConfig {
  unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ;
  unsigned sharedMemBytes;
  void *hStream;
  CUlaunchAttribute *attrs;
  unsigned numAttrs;
};
static_assert(sizeof(CUlaunchAttribute) == 72 && sizeof(CUlaunchConfig) == 56,
              "the layouts of cuda.h");

struct CudaApi {
  CUresult (*init)(unsigned);
  CUresult (*deviceGetCount)(int *);
  CUresult (*deviceGet)(CUdevice *, int);
  CUresult (*deviceGetAttribute)(int *, int, CUdevice);
  CUresult (*primaryCtxRetain)(void **, CUdevice);
  CUresult (*primaryCtxRelease)(CUdevice);
  CUresult (*ctxSetCurrent)(void *);
  CUresult (*moduleLoadDataEx)(void **, const void *, unsigned, int *,
                               void **);
  CUresult (*moduleUnload)(void *);
  CUresult (*moduleGetFunction)(void **, void *, const char *);
  CUresult (*funcSetAttribute)(void *, int, int);
  CUresult (*launchKernel)(void *, unsigned, unsigned, unsigned, unsigned,
                           unsigned, unsigned, unsigned, void *, void **,
                           void **);
  /// Absent from drivers before CUDA 12: launches fall back to launchKernel.
  CUresult (*launchKernelEx)(const CUlaunchConfig *, void *, void **,
                             void **);
  CUresult (*memAlloc)(CUdeviceptr *, size_t);
  CUresult (*memFree)(CUdeviceptr);
  CUresult (*memcpyHtoD)(CUdeviceptr, const void *, size_t);
  CUresult (*memcpyDtoH)(void *, CUdeviceptr, size_t);
  CUresult (*streamSynchronize)(void *);
  CUresult (*getErrorString)(CUresult, const char **);
};

/// The CUDA driver's functions ($MLA_CUDA_LIBRARY, else libcuda.so.1).
Expected<const CudaApi *> loadCuda() {
  DriverLibrarySpec spec{
      "MLA_CUDA_LIBRARY",
      {"libcuda.so.1", "libcuda.so"},
      "cuda backend: cannot load the CUDA driver (libcuda.so.1; set "
      "MLA_CUDA_LIBRARY to its path):",
      "cuda backend",
      "(a CUDA 11 or newer driver is needed)"};
  return loadDriverLibrary<CudaApi>(spec, [](SymbolResolver &resolve,
                                             CudaApi &api) {
    resolve(api.init, "cuInit");
    resolve(api.deviceGetCount, "cuDeviceGetCount");
    resolve(api.deviceGet, "cuDeviceGet");
    resolve(api.deviceGetAttribute, "cuDeviceGetAttribute");
    resolve(api.primaryCtxRetain, "cuDevicePrimaryCtxRetain");
    resolve(api.primaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    resolve(api.ctxSetCurrent, "cuCtxSetCurrent");
    resolve(api.moduleLoadDataEx, "cuModuleLoadDataEx");
    resolve(api.moduleUnload, "cuModuleUnload");
    resolve(api.moduleGetFunction, "cuModuleGetFunction");
    resolve(api.funcSetAttribute, "cuFuncSetAttribute");
    resolve(api.launchKernel, "cuLaunchKernel");
    resolve.optional(api.launchKernelEx, "cuLaunchKernelEx");
    resolve(api.memAlloc, "cuMemAlloc_v2");
    resolve(api.memFree, "cuMemFree_v2");
    resolve(api.memcpyHtoD, "cuMemcpyHtoD_v2");
    resolve(api.memcpyDtoH, "cuMemcpyDtoH_v2");
    resolve(api.streamSynchronize, "cuStreamSynchronize");
    resolve(api.getErrorString, "cuGetErrorString");
  });
}

std::string errorText(const CudaApi &api, CUresult status) {
  const char *text = nullptr;
  if (api.getErrorString(status, &text) != CUDA_SUCCESS || !text)
    return "unknown error";
  return text;
}

class CudaBackend;

class CudaKernel : public LoadedKernel {
public:
  CudaKernel(CudaBackend &backend) : backend(backend) {}
  ~CudaKernel() override;
  Error init(const Artifact &artifact);
  Error launch(const LaunchBuffers &buffers, void *stream) override;

private:
  Error launchOne(const ArtifactKernel &kernel, void *function,
                  const LaunchBuffers &buffers, void *stream);
  CudaBackend &backend;
  void *module = nullptr;
  std::vector<ArtifactKernel> kernels;
  std::vector<void *> functions;
};

class CudaBackend : public Backend {
public:
  CudaBackend(const CudaApi &api, CUdevice device, void *context,
              std::string arch)
      : api(api), device(device), context(context), archName(std::move(arch)) {
  }
  ~CudaBackend() override { (void)api.primaryCtxRelease(device); }

  std::string arch() const override { return archName; }

  Error check(CUresult status, const std::string &what,
              Status code = Status::LaunchFailed) const {
    if (status == CUDA_SUCCESS)
      return Error::success();
    return fail(code, "cuda backend: ", what, " failed: ",
                errorText(api, status), " (", status, ")");
  }
  /// The current context is per thread: make ours current on every call.
  Error select() const {
    return check(api.ctxSetCurrent(context), "cuCtxSetCurrent",
                 Status::Internal);
  }

  Expected<std::unique_ptr<LoadedKernel>>
  load(const Artifact &artifact) override {
    if (artifact.ptx.empty())
      return fail(Status::BackendUnavailable,
                  "the artifact has no PTX (built for ", artifact.chip,
                  "); recompile it for ", archName,
                  " (mla-compile --target ", archName, ")");
    if (artifact.chip != archName)
      return fail(Status::TargetMismatch, "the artifact is built for ",
                  artifact.chip, ", but GPU ", device, " is ", archName,
                  "; recompile it for ", archName);
    auto kernel = std::make_unique<CudaKernel>(*this);
    if (Error err = kernel->init(artifact))
      return std::move(err);
    return std::unique_ptr<LoadedKernel>(std::move(kernel));
  }

  Error allocate(size_t bytes, void **ptr) override {
    if (Error err = select())
      return err;
    CUdeviceptr address = 0;
    if (Error err = check(api.memAlloc(&address, std::max<size_t>(bytes, 1)),
                          "cuMemAlloc", Status::Internal))
      return err;
    *ptr = reinterpret_cast<void *>(address);
    return Error::success();
  }
  Error release(void *ptr) override {
    if (Error err = select())
      return err;
    return check(api.memFree(reinterpret_cast<CUdeviceptr>(ptr)), "cuMemFree",
                 Status::Internal);
  }
  Error copyToDevice(void *dst, const void *src, size_t bytes) override {
    if (Error err = select())
      return err;
    return check(api.memcpyHtoD(reinterpret_cast<CUdeviceptr>(dst), src, bytes),
                 "cuMemcpyHtoD", Status::Internal);
  }
  Error copyToHost(void *dst, const void *src, size_t bytes) override {
    if (Error err = select())
      return err;
    return check(api.memcpyDtoH(dst, reinterpret_cast<CUdeviceptr>(src), bytes),
                 "cuMemcpyDtoH", Status::Internal);
  }
  Error synchronize(void *stream) override {
    if (Error err = select())
      return err;
    return check(api.streamSynchronize(stream), "cuStreamSynchronize");
  }

  const CudaApi &api;
  CUdevice device;
  void *context;
  std::string archName;
};

CudaKernel::~CudaKernel() {
  if (module && !backend.select())
    (void)backend.api.moduleUnload(module);
}

Error CudaKernel::init(const Artifact &artifact) {
  if (Error err = backend.select())
    return err;
  // The PTX JIT's log says why a module does not load.
  std::string log(8192, '\0');
  int options[] = {kJitErrorLogBuffer, kJitErrorLogBufferSize};
  void *values[] = {log.data(), reinterpret_cast<void *>(log.size())};
  CUresult status = backend.api.moduleLoadDataEx(&module, artifact.ptx.c_str(),
                                                 2, options, values);
  if (status != CUDA_SUCCESS) {
    module = nullptr;
    log.resize(log.find('\0'));
    return fail(Status::InvalidArtifact,
                "cuda backend: loading the PTX (cuModuleLoadDataEx) failed: ",
                errorText(backend.api, status), " (", status, ")",
                log.empty() ? "" : ": ", log);
  }
  kernels = artifact.kernels;
  for (const ArtifactKernel &kernel : kernels) {
    void *function = nullptr;
    if (Error err = backend.check(
            backend.api.moduleGetFunction(&function, module,
                                          kernel.name.c_str()),
            "finding kernel " + kernel.name, Status::InvalidArtifact))
      return err;
    // Dynamic shared memory over the default 48 KiB must be allowed first.
    if (kernel.dynamicLdsBytes > 0)
      if (Error err = backend.check(
              backend.api.funcSetAttribute(
                  function, kFuncMaxDynamicSharedSizeBytes,
                  static_cast<int>(kernel.dynamicLdsBytes)),
              "allowing " + kernel.name + " " +
                  std::to_string(kernel.dynamicLdsBytes) +
                  " bytes of dynamic shared memory",
              Status::InvalidArtifact))
        return err;
    functions.push_back(function);
  }
  return Error::success();
}

Error CudaKernel::launchOne(const ArtifactKernel &kernel, void *function,
                            const LaunchBuffers &buffers, void *stream) {
  auto packed = packLaunch(kernel, buffers);
  if (!packed)
    return packed.takeError();
  if (packed->empty())
    return Error::success();
  const auto &grid = packed->grid;
  void *extra[] = {kLaunchParamBufferPointer, packed->kernarg.data(),
                   kLaunchParamBufferSize, &packed->kernargBytes,
                   kLaunchParamEnd};
  if (kernel.waitsForPrevious && backend.api.launchKernelEx) {
    CUlaunchAttribute early{};
    early.id = kLaunchAttributeProgrammaticStreamSerialization;
    early.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig config{static_cast<unsigned>(grid[0]),
                          static_cast<unsigned>(grid[1]),
                          static_cast<unsigned>(grid[2]),
                          static_cast<unsigned>(kernel.block[0]),
                          static_cast<unsigned>(kernel.block[1]),
                          static_cast<unsigned>(kernel.block[2]),
                          static_cast<unsigned>(kernel.dynamicLdsBytes),
                          stream,
                          &early,
                          1};
    return backend.check(
        backend.api.launchKernelEx(&config, function, nullptr, extra),
        "launching " + kernel.name);
  }
  return backend.check(
      backend.api.launchKernel(
          function, grid[0], grid[1], grid[2], kernel.block[0],
          kernel.block[1], kernel.block[2],
          static_cast<unsigned>(kernel.dynamicLdsBytes), stream, nullptr,
          extra),
      "launching " + kernel.name);
}

Error CudaKernel::launch(const LaunchBuffers &buffers, void *stream) {
  if (Error err = backend.select())
    return err;
  for (size_t i : kKernelLaunchOrder)
    if (buffers.runs(kernels[i]))
      if (Error err = launchOne(kernels[i], functions[i], buffers, stream))
        return err;
  return Error::success();
}
} // namespace

Expected<std::unique_ptr<Backend>> mla::rt::createCudaBackend(int device) {
  auto api = loadCuda();
  if (!api)
    return api.takeError();
  const CudaApi &cuda = **api;
  CUresult status = cuda.init(0);
  int count = 0;
  if (status == CUDA_SUCCESS)
    status = cuda.deviceGetCount(&count);
  if (status != CUDA_SUCCESS || count == 0)
    return fail(Status::BackendUnavailable,
                "cuda backend: no NVIDIA GPU is available (",
                status == CUDA_SUCCESS ? "no devices" : errorText(cuda, status),
                ")");
  if (device < 0 || device >= count)
    return fail(Status::BackendUnavailable, "cuda backend: no GPU ", device,
                " (", count, " present)");
  CUdevice handle = 0;
  int major = 0, minor = 0;
  void *context = nullptr;
  if (cuda.deviceGet(&handle, device) != CUDA_SUCCESS ||
      cuda.deviceGetAttribute(&major, kComputeCapabilityMajor, handle) !=
          CUDA_SUCCESS ||
      cuda.deviceGetAttribute(&minor, kComputeCapabilityMinor, handle) !=
          CUDA_SUCCESS)
    return fail(Status::BackendUnavailable,
                "cuda backend: cannot read the compute capability of GPU ",
                device);
  status = cuda.primaryCtxRetain(&context, handle);
  if (status != CUDA_SUCCESS)
    return fail(Status::BackendUnavailable,
                "cuda backend: cannot open GPU ", device, ": ",
                errorText(cuda, status));
  // Hopper (9.0) runs the sm_90a kernels (wgmma, setmaxnreg need the "a").
  std::string arch = "sm_" + std::to_string(major) + std::to_string(minor);
  if (major == 9 && minor == 0)
    arch += "a";
  return std::unique_ptr<Backend>(
      std::make_unique<CudaBackend>(cuda, handle, context, arch));
}

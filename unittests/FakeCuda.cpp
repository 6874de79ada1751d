//===- FakeCuda.cpp - a stand-in libcuda.so.1 for the cuda backend tests --===//
//
// Exports the driver functions the cuda backend resolves, with host memory
// for device memory. FAKE_CUDA_DEVICE_COUNT (default 1) and FAKE_CUDA_CC
// (default "9.0") choose the machine. Modules must be PTX for sm_90a (else
// CUDA_ERROR_INVALID_PTX with a JIT log) and functions must be entries of
// it; launches are recorded, parameter bytes included, and checked for the
// `extra` protocol and for the primary context being current, so tests see
// exactly what the backend passed (cuLaunchKernelEx: whether programmatic
// stream serialization was allowed). A test can make the next call of any
// function fail (fakeCudaFailNext) and count the allocations and modules
// still alive.
//
//===----------------------------------------------------------------------===//

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace {
struct Launch {
  std::string kernel;
  unsigned grid[3], block[3];
  unsigned sharedMemBytes;
  std::vector<uint8_t> params;
  /// By cuLaunchKernelEx with programmatic stream serialization allowed.
  bool programmatic = false;
};
/// cuda.h's launch configuration (CUDA 12 and 13).
struct LaunchAttribute {
  int id;
  char pad[4];
  char value[64];
};
struct LaunchConfig {
  unsigned grid[3], block[3], sharedMemBytes;
  void *stream;
  LaunchAttribute *attrs;
  unsigned numAttrs;
};
constexpr int kProgrammaticStreamSerialization = 6;
/// Dynamic shared memory a function may take (cuFuncSetAttribute); the
/// driver's default is 48 KiB.
constexpr int kDefaultDynamicShared = 48 * 1024;
std::map<std::string, int> maxDynamicShared;
std::mutex mutex;
std::vector<Launch> launches;
std::string failNext;
int failStatus = 0;
int liveAllocations = 0, liveModules = 0, retainedContexts = 0;
std::set<std::string> functionNames;
int primaryContext = 0;          // its address is the context handle
thread_local void *current = nullptr;

int injected(const char *function) {
  std::lock_guard<std::mutex> lock(mutex);
  if (failNext != function)
    return 0;
  failNext.clear();
  return failStatus;
}
#define FAIL_IF_INJECTED(function)                                             \
  if (int status_ = injected(function))                                        \
    return status_;

int deviceCount() {
  const char *count = std::getenv("FAKE_CUDA_DEVICE_COUNT");
  return count ? std::atoi(count) : 1;
}
constexpr int kInvalidValue = 1, kNoDevice = 100, kInvalidDevice = 101,
              kInvalidContext = 201, kInvalidPtx = 218, kNotFound = 500;
} // namespace

extern "C" {
int cuInit(unsigned) { return 0; }
int cuDeviceGetCount(int *count) {
  *count = deviceCount();
  return *count == 0 ? kNoDevice : 0;
}
int cuDeviceGet(int *device, int ordinal) {
  if (ordinal >= deviceCount())
    return kInvalidDevice;
  *device = ordinal;
  return 0;
}
int cuDeviceGetAttribute(int *value, int attribute, int) {
  const char *cc = std::getenv("FAKE_CUDA_CC");
  std::string text = cc ? cc : "9.0";
  if (attribute == 75)
    *value = std::atoi(text.c_str());
  else if (attribute == 76)
    *value = std::atoi(text.c_str() + text.find('.') + 1);
  else
    return kInvalidValue;
  return 0;
}
int cuDevicePrimaryCtxRetain(void **context, int) {
  std::lock_guard<std::mutex> lock(mutex);
  ++retainedContexts;
  *context = &primaryContext;
  return 0;
}
int cuDevicePrimaryCtxRelease_v2(int) {
  std::lock_guard<std::mutex> lock(mutex);
  --retainedContexts;
  return 0;
}
int cuCtxSetCurrent(void *context) {
  FAIL_IF_INJECTED("cuCtxSetCurrent");
  current = context;
  return 0;
}
int cuModuleLoadDataEx(void **module, const void *image, unsigned options,
                       int *keys, void **values) {
  FAIL_IF_INJECTED("cuModuleLoadDataEx");
  if (current != &primaryContext)
    return kInvalidContext;
  const char *ptx = static_cast<const char *>(image);
  if (!std::strstr(ptx, ".target sm_90a")) {
    // The JIT's log, as the driver writes it.
    for (unsigned i = 0; i < options; ++i)
      if (keys[i] == 5)
        std::strcpy(static_cast<char *>(values[i]),
                    "ptxas fatal: not PTX for sm_90a");
    return kInvalidPtx;
  }
  *module = const_cast<void *>(image);
  std::lock_guard<std::mutex> lock(mutex);
  ++liveModules;
  return 0;
}
int cuModuleUnload(void *) {
  FAIL_IF_INJECTED("cuModuleUnload");
  std::lock_guard<std::mutex> lock(mutex);
  --liveModules;
  return 0;
}
int cuModuleGetFunction(void **function, void *module, const char *name) {
  FAIL_IF_INJECTED("cuModuleGetFunction");
  std::string entry = ".entry " + std::string(name) + "(";
  if (!std::strstr(static_cast<const char *>(module), entry.c_str()))
    return kNotFound;
  std::lock_guard<std::mutex> lock(mutex);
  *function = const_cast<char *>(functionNames.insert(name).first->c_str());
  return 0;
}
int cuFuncSetAttribute(void *function, int attribute, int value) {
  FAIL_IF_INJECTED("cuFuncSetAttribute");
  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, up to sm_90's 227 KiB.
  if (attribute != 8 || value < 0 || value > 227 * 1024)
    return kInvalidValue;
  std::lock_guard<std::mutex> lock(mutex);
  maxDynamicShared[static_cast<const char *>(function)] = value;
  return 0;
}
static int recordLaunch(void *function, const unsigned grid[3],
                 const unsigned block[3], unsigned sharedMemBytes,
                 void **kernelParams, void **extra, bool programmatic);
int cuLaunchKernel(void *function, unsigned gx, unsigned gy, unsigned gz,
                   unsigned bx, unsigned by, unsigned bz,
                   unsigned sharedMemBytes, void *, void **kernelParams,
                   void **extra) {
  FAIL_IF_INJECTED("cuLaunchKernel");
  unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  return recordLaunch(function, grid, block, sharedMemBytes, kernelParams,
                      extra, false);
}
int cuLaunchKernelEx(const LaunchConfig *config, void *function,
                     void **kernelParams, void **extra) {
  FAIL_IF_INJECTED("cuLaunchKernelEx");
  if (!config || (config->numAttrs > 0 && !config->attrs))
    return kInvalidValue;
  bool programmatic = false;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    if (config->attrs[i].id != kProgrammaticStreamSerialization)
      return kInvalidValue;
    int allowed;
    std::memcpy(&allowed, config->attrs[i].value, sizeof allowed);
    programmatic = allowed != 0;
  }
  return recordLaunch(function, config->grid, config->block,
                      config->sharedMemBytes, kernelParams, extra,
                      programmatic);
}
static int recordLaunch(void *function, const unsigned grid[3],
                 const unsigned block[3], unsigned sharedMemBytes,
                 void **kernelParams, void **extra, bool programmatic) {
  if (current != &primaryContext)
    return kInvalidContext;
  if (kernelParams || !extra || extra[0] != (void *)1 ||
      extra[2] != (void *)2 || extra[4] != (void *)0)
    return kInvalidValue;
  size_t bytes = *static_cast<size_t *>(extra[3]);
  const auto *data = static_cast<const uint8_t *>(extra[1]);
  std::lock_guard<std::mutex> lock(mutex);
  auto allowed = maxDynamicShared.find(static_cast<const char *>(function));
  if (sharedMemBytes > unsigned(allowed == maxDynamicShared.end()
                                    ? kDefaultDynamicShared
                                    : std::max(allowed->second,
                                               kDefaultDynamicShared)))
    return kInvalidValue;
  launches.push_back({static_cast<const char *>(function),
                      {grid[0], grid[1], grid[2]},
                      {block[0], block[1], block[2]},
                      sharedMemBytes,
                      std::vector<uint8_t>(data, data + bytes),
                      programmatic});
  return 0;
}
int cuMemAlloc_v2(unsigned long long *ptr, size_t bytes) {
  FAIL_IF_INJECTED("cuMemAlloc_v2");
  void *p = std::malloc(bytes);
  if (!p)
    return 2;
  *ptr = reinterpret_cast<unsigned long long>(p);
  std::lock_guard<std::mutex> lock(mutex);
  ++liveAllocations;
  return 0;
}
int cuMemFree_v2(unsigned long long ptr) {
  FAIL_IF_INJECTED("cuMemFree_v2");
  std::free(reinterpret_cast<void *>(ptr));
  std::lock_guard<std::mutex> lock(mutex);
  --liveAllocations;
  return 0;
}
int cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t bytes) {
  FAIL_IF_INJECTED("cuMemcpyHtoD_v2");
  std::memcpy(reinterpret_cast<void *>(dst), src, bytes);
  return 0;
}
int cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t bytes) {
  FAIL_IF_INJECTED("cuMemcpyDtoH_v2");
  std::memcpy(dst, reinterpret_cast<const void *>(src), bytes);
  return 0;
}
int cuStreamSynchronize(void *) {
  FAIL_IF_INJECTED("cuStreamSynchronize");
  return 0;
}
int cuGetErrorString(int status, const char **text) {
  *text = status == 0 ? "no error" : "fake CUDA error";
  return 0;
}

// For the tests.
void fakeCudaFailNext(const char *function, int status) {
  std::lock_guard<std::mutex> lock(mutex);
  failNext = function;
  failStatus = status;
}
int fakeCudaLiveAllocations() {
  std::lock_guard<std::mutex> lock(mutex);
  return liveAllocations;
}
int fakeCudaLiveModules() {
  std::lock_guard<std::mutex> lock(mutex);
  return liveModules;
}
int fakeCudaRetainedContexts() {
  std::lock_guard<std::mutex> lock(mutex);
  return retainedContexts;
}
int fakeCudaLaunchCount() {
  std::lock_guard<std::mutex> lock(mutex);
  return static_cast<int>(launches.size());
}
const char *fakeCudaLaunch(int i, unsigned *grid, unsigned *block,
                           const uint8_t **params, size_t *bytes) {
  std::lock_guard<std::mutex> lock(mutex);
  const Launch &l = launches.at(i);
  std::memcpy(grid, l.grid, sizeof l.grid);
  std::memcpy(block, l.block, sizeof l.block);
  *params = l.params.data();
  *bytes = l.params.size();
  return l.kernel.c_str();
}
unsigned fakeCudaLaunchSharedBytes(int i) {
  std::lock_guard<std::mutex> lock(mutex);
  return launches.at(i).sharedMemBytes;
}
int fakeCudaLaunchProgrammatic(int i) {
  std::lock_guard<std::mutex> lock(mutex);
  return launches.at(i).programmatic;
}
}

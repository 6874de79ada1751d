//===- FakeHip.cpp - a stand-in libamdhip64.so for the hip backend tests --===//
//
// Exports the HIP functions the hip backend resolves, with host memory for
// device memory. FAKE_HIP_DEVICE_COUNT (default 1) and FAKE_HIP_ARCH
// (default "gfx950:sramecc+:xnack-") choose the machine; launches are
// recorded, kernarg bytes included, and checked for the `extra` protocol
// HIP requires, so tests can see exactly what the backend passed. A test can
// make the next call of any function fail (fakeHipFailNext) and count the
// allocations and modules still alive, to see that every failure is
// reported and nothing leaks.
//
//===----------------------------------------------------------------------===//

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace {
struct Launch {
  std::string kernel;
  unsigned grid[3], block[3];
  std::vector<uint8_t> kernarg;
};
std::mutex mutex;
std::vector<Launch> launches;
std::string failNext; // the function whose next call fails
int failStatus = 0;
int liveAllocations = 0, liveModules = 0;
std::set<std::string> functionNames;

/// The injected failure of `function`, once; 0 otherwise.
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
  const char *count = std::getenv("FAKE_HIP_DEVICE_COUNT");
  return count ? std::atoi(count) : 1;
}
} // namespace

extern "C" {
int hipInit(unsigned) { return 0; }
int hipGetDeviceCount(int *count) {
  *count = deviceCount();
  return *count == 0 ? 100 /* hipErrorNoDevice */ : 0;
}
int hipSetDevice(int device) { return device < deviceCount() ? 0 : 101; }
int hipGetDevicePropertiesR0600(void *props, int device) {
  if (device >= deviceCount())
    return 101;
  std::memset(props, 0, 1472);
  const char *arch = std::getenv("FAKE_HIP_ARCH");
  std::strncpy(static_cast<char *>(props) + 1160,
               arch ? arch : "gfx950:sramecc+:xnack-", 255);
  return 0;
}
int hipModuleLoadData(void **module, const void *image) {
  FAIL_IF_INJECTED("hipModuleLoadData");
  // An ELF code object, or hipErrorInvalidImage.
  if (std::memcmp(image, "\x7f" "ELF", 4) != 0)
    return 200;
  *module = const_cast<void *>(image);
  std::lock_guard<std::mutex> lock(mutex);
  ++liveModules;
  return 0;
}
int hipModuleUnload(void *) {
  FAIL_IF_INJECTED("hipModuleUnload");
  std::lock_guard<std::mutex> lock(mutex);
  --liveModules;
  return 0;
}
int hipModuleGetFunction(void **function, void *, const char *name) {
  FAIL_IF_INJECTED("hipModuleGetFunction");
  // A function is its name, interned for the process (HIP's functions live
  // as long as their module; names are few).
  std::lock_guard<std::mutex> lock(mutex);
  *function = const_cast<char *>(functionNames.insert(name).first->c_str());
  return 0;
}
int hipModuleLaunchKernel(void *function, unsigned gx, unsigned gy,
                          unsigned gz, unsigned bx, unsigned by, unsigned bz,
                          unsigned sharedMemBytes, void *stream,
                          void **kernelParams, void **extra) {
  FAIL_IF_INJECTED("hipModuleLaunchKernel");
  if (kernelParams || !extra || extra[0] != (void *)1 ||
      extra[2] != (void *)2 || extra[4] != (void *)3 || sharedMemBytes != 0)
    return 1; // hipErrorInvalidValue
  size_t bytes = *static_cast<size_t *>(extra[3]);
  const auto *data = static_cast<const uint8_t *>(extra[1]);
  std::lock_guard<std::mutex> lock(mutex);
  launches.push_back({static_cast<const char *>(function),
                      {gx, gy, gz},
                      {bx, by, bz},
                      std::vector<uint8_t>(data, data + bytes)});
  return 0;
}
int hipMalloc(void **ptr, size_t bytes) {
  FAIL_IF_INJECTED("hipMalloc");
  *ptr = std::malloc(bytes);
  if (!*ptr)
    return 2;
  std::lock_guard<std::mutex> lock(mutex);
  ++liveAllocations;
  return 0;
}
int hipFree(void *ptr) {
  FAIL_IF_INJECTED("hipFree");
  std::free(ptr);
  std::lock_guard<std::mutex> lock(mutex);
  --liveAllocations;
  return 0;
}
int hipMemcpy(void *dst, const void *src, size_t bytes, int) {
  FAIL_IF_INJECTED("hipMemcpy");
  std::memcpy(dst, src, bytes);
  return 0;
}
int hipStreamSynchronize(void *) {
  FAIL_IF_INJECTED("hipStreamSynchronize");
  return 0;
}
const char *hipGetErrorString(int status) {
  return status == 0 ? "hipSuccess" : "fake HIP error";
}

// For the tests.
void fakeHipFailNext(const char *function, int status) {
  std::lock_guard<std::mutex> lock(mutex);
  failNext = function;
  failStatus = status;
}
int fakeHipLiveAllocations() {
  std::lock_guard<std::mutex> lock(mutex);
  return liveAllocations;
}
int fakeHipLiveModules() {
  std::lock_guard<std::mutex> lock(mutex);
  return liveModules;
}
int fakeHipLaunchCount() {
  std::lock_guard<std::mutex> lock(mutex);
  return static_cast<int>(launches.size());
}
const char *fakeHipLaunch(int i, unsigned *grid, unsigned *block,
                          const uint8_t **kernarg, size_t *kernargBytes) {
  std::lock_guard<std::mutex> lock(mutex);
  const Launch &l = launches.at(i);
  std::memcpy(grid, l.grid, sizeof l.grid);
  std::memcpy(block, l.block, sizeof l.block);
  *kernarg = l.kernarg.data();
  *kernargBytes = l.kernarg.size();
  return l.kernel.c_str();
}
}

//===- FuzzNpy.cpp - the .npy reader ---------------------------------------===//
//
// mla-run --inputs reads .npy files from the user: any bytes give an array
// whose data matches its shape and dtype, or an error.
//
//===----------------------------------------------------------------------===//

#include "mla/Tools/Npy.h"

#include <cstdlib>

using namespace mla;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto array = parseNpy(
      llvm::StringRef(reinterpret_cast<const char *>(data), size), "input.npy");
  if (!array) {
    llvm::consumeError(array.takeError());
    return 0;
  }
  size_t element = std::stoul(array->dtype.substr(1));
  if (array->data.size() != size_t(array->numElements()) * element)
    std::abort(); // the data does not hold what the header says
  return 0;
}

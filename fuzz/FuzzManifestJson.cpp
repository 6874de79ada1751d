//===- FuzzManifestJson.cpp - the manifest's JSON reader ------------------===//
//
// The runtime's own JSON reader (runtime/support/Json.cpp) on any bytes: a
// document or an error. A document it reads prints to text that reads back
// to the same document.
//
//===----------------------------------------------------------------------===//

#include "../runtime/support/Json.h"

#include <cstdlib>

using namespace mla;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto value =
      json::parse(std::string_view(reinterpret_cast<const char *>(data), size));
  if (!value)
    return 0;
  std::string text = json::print(*value);
  auto again = json::parse(text);
  if (!again || json::print(*again) != text)
    std::abort(); // printing lost or changed something
  return 0;
}

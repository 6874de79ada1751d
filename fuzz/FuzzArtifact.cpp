//===- FuzzArtifact.cpp - the artifact reader on untrusted bytes ----------===//
//
// What mla_kernel_load_memory reads before any backend: the tar container,
// the manifest and its CRCs. Any bytes must give an artifact or an error,
// never a crash; an artifact that parses must survive a write and a second
// read unchanged (so the writer and the reader agree on every field), and
// its size expressions must resolve or fail cleanly.
//
//===----------------------------------------------------------------------===//

#include "mla/Runtime/Artifact.h"

#include <cstdlib>

using namespace mla;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto artifact =
      parseArtifact(std::string_view(reinterpret_cast<const char *>(data), size));
  if (!artifact)
    return 0;
  std::string bytes = serializeArtifact(*artifact);
  auto again = parseArtifact(bytes);
  if (!again || serializeArtifact(*again) != bytes)
    std::abort(); // the writer and the reader disagree
  const std::vector<std::pair<std::string_view, int64_t>> symbols = {
      {dim::kTokens, 7},       {dim::kKVRows, 1000}, {dim::kSeqsPlusOne, 4},
      {dim::kSequences, 3},    {dim::kWorkItems, 300}};
  for (const ArtifactKernel &kernel : artifact->kernels) {
    for (const std::string &entry : kernel.grid)
      (void)resolveDim(entry, symbols);
    for (const ArtifactKernelArg &arg : kernel.args)
      for (const std::string &entry : arg.dims)
        (void)resolveDim(entry, symbols);
  }
  return 0;
}

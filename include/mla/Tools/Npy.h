//===- Npy.h - NumPy .npy files ----------------------------------*- C++ -*-===//
//
// Reading and writing the .npy files mla-run exchanges with Python: format
// versions 1-3, little-endian, C order. Every malformation is an error with
// the file name, never a crash.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TOOLS_NPY_H
#define MLA_TOOLS_NPY_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mla {

struct NpyArray {
  /// NumPy dtype string, normalized: "f4", "f8", "u1", "i1", "u2", "i4", ...
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;

  int64_t numElements() const;
  /// Shape as "[2, 16, 576]" for messages.
  std::string shapeString() const;
};

llvm::Expected<NpyArray> readNpy(const std::string &path);
/// The same from the file's bytes; `path` names it in messages.
llvm::Expected<NpyArray> parseNpy(llvm::StringRef bytes,
                                  const std::string &path);
llvm::Error writeNpy(const std::string &path, const std::string &dtype,
                     const std::vector<int64_t> &shape, const void *data,
                     size_t numBytes);

} // namespace mla

#endif // MLA_TOOLS_NPY_H

//===- Npy.cpp - NumPy .npy files -----------------------------------------===//

#include "mla/Tools/Npy.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

using namespace mla;
using llvm::StringRef;

int64_t NpyArray::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string NpyArray::shapeString() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

namespace {
llvm::Error fail(const std::string &path, const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 path + ": " + msg.str());
}

/// Value of `'key': value` in the header dict, up to the next top-level comma.
std::optional<StringRef> dictValue(StringRef header, StringRef key) {
  size_t pos = header.find(("'" + key + "'").str());
  if (pos == StringRef::npos)
    return std::nullopt;
  StringRef rest = header.drop_front(pos + key.size() + 2).ltrim();
  if (!rest.consume_front(":"))
    return std::nullopt;
  rest = rest.ltrim();
  if (rest.starts_with("(")) {
    size_t close = rest.find(')');
    if (close == StringRef::npos)
      return std::nullopt;
    return rest.take_front(close + 1);
  }
  return rest.take_until([](char c) { return c == ',' || c == '}'; }).rtrim();
}

size_t dtypeSize(StringRef dtype) {
  if (dtype.size() != 2)
    return 0;
  unsigned size;
  if (dtype.drop_front().getAsInteger(10, size))
    return 0;
  return size;
}
} // namespace

llvm::Expected<NpyArray> mla::readNpy(const std::string &path) {
  auto bufferOr = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                              /*RequiresNullTerminator=*/false);
  if (!bufferOr)
    return fail(path, "cannot read: " + bufferOr.getError().message());
  return parseNpy((*bufferOr)->getBuffer(), path);
}

llvm::Expected<NpyArray> mla::parseNpy(llvm::StringRef bytes,
                                       const std::string &path) {
  if (bytes.size() < 10 || !bytes.starts_with("\x93NUMPY"))
    return fail(path, "not a .npy file (bad magic)");
  unsigned major = static_cast<uint8_t>(bytes[6]);
  size_t headerLen, headerStart;
  if (major == 1) {
    headerLen = static_cast<uint8_t>(bytes[8]) |
                (static_cast<uint8_t>(bytes[9]) << 8);
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return fail(path, "truncated .npy header");
    headerLen = 0;
    for (int i = 0; i < 4; ++i)
      headerLen |= static_cast<size_t>(static_cast<uint8_t>(bytes[8 + i]))
                   << (8 * i);
    headerStart = 12;
  } else {
    return fail(path, "unsupported .npy version " + llvm::Twine(major));
  }
  if (headerStart + headerLen > bytes.size())
    return fail(path, "truncated .npy header");
  StringRef header = bytes.substr(headerStart, headerLen);

  NpyArray array;
  auto descr = dictValue(header, "descr");
  auto order = dictValue(header, "fortran_order");
  auto shape = dictValue(header, "shape");
  if (!descr || !order || !shape)
    return fail(path, "malformed .npy header");
  StringRef d = descr->trim("'\" ");
  if (d.size() != 3 || (d[0] != '<' && d[0] != '|' && d[0] != '='))
    return fail(path, "unsupported dtype '" + d + "' (need little-endian)");
  array.dtype = d.drop_front().str();
  size_t elemSize = dtypeSize(array.dtype);
  if (elemSize == 0)
    return fail(path, "unsupported dtype '" + d + "'");
  if (order->trim() != "False")
    return fail(path, "Fortran-ordered arrays are not supported");
  StringRef dims = shape->trim("() ");
  llvm::SmallVector<StringRef> parts;
  dims.split(parts, ',', -1, /*KeepEmpty=*/false);
  for (StringRef part : parts) {
    part = part.trim();
    if (part.empty())
      continue;
    int64_t dim;
    if (part.getAsInteger(10, dim) || dim < 0)
      return fail(path, "malformed shape '(" + dims + ")'");
    array.shape.push_back(dim);
  }
  // Guard the product against overflow before trusting it.
  uint64_t count = 1;
  for (int64_t dim : array.shape) {
    if (dim != 0 && count > (uint64_t(1) << 40) / dim)
      return fail(path, "array too large");
    count *= dim;
  }
  size_t dataStart = headerStart + headerLen;
  if (bytes.size() - dataStart != count * elemSize)
    return fail(path, "holds " + llvm::Twine(bytes.size() - dataStart) +
                          " data bytes, shape " + array.shapeString() +
                          " needs " + llvm::Twine(count * elemSize));
  array.data.assign(bytes.begin() + dataStart, bytes.end());
  return array;
}

llvm::Error mla::writeNpy(const std::string &path, const std::string &dtype,
                          const std::vector<int64_t> &shape, const void *data,
                          size_t numBytes) {
  std::string shapeStr = "(";
  for (int64_t d : shape)
    shapeStr += std::to_string(d) + ", ";
  if (shape.size() > 1)
    shapeStr.resize(shapeStr.size() - 2);
  else if (shape.size() == 1)
    shapeStr.pop_back();
  shapeStr += ")";
  char endian = dtype == "u1" || dtype == "i1" ? '|' : '<';
  std::string header = "{'descr': '" + std::string(1, endian) + dtype +
                       "', 'fortran_order': False, 'shape': " + shapeStr +
                       ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return fail(path, "cannot write: " + ec.message());
  os << "\x93NUMPY" << '\x01' << '\x00';
  os << static_cast<char>(header.size() & 0xFF)
     << static_cast<char>(header.size() >> 8);
  os << header;
  os.write(static_cast<const char *>(data), numBytes);
  os.close();
  if (os.has_error())
    return fail(path, "write failed");
  return llvm::Error::success();
}

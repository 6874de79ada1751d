// .npy round trips and the rejection of corrupt files.
#include "mla/Tools/Npy.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace mla;

namespace {
std::string tempPath(const char *name) {
  llvm::SmallString<128> dir;
  llvm::sys::fs::createUniqueDirectory("mla-npy", dir);
  return (dir + "/" + name).str();
}
void writeRaw(const std::string &path, llvm::StringRef bytes) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  os << bytes;
}
} // namespace

TEST(Npy, RoundTrips) {
  std::string path = tempPath("a.npy");
  std::vector<int32_t> values = {0, 3, 7, 1 << 30};
  ASSERT_FALSE(bool(writeNpy(path, "i4", {4}, values.data(), 16)));
  auto array = readNpy(path);
  ASSERT_TRUE(bool(array)) << llvm::toString(array.takeError());
  EXPECT_EQ(array->dtype, "i4");
  EXPECT_EQ(array->shape, std::vector<int64_t>{4});
  EXPECT_EQ(0, memcmp(array->data.data(), values.data(), 16));

  std::vector<uint8_t> bytes(2 * 3 * 5, 7);
  ASSERT_FALSE(bool(writeNpy(path, "u1", {2, 3, 5}, bytes.data(), bytes.size())));
  array = readNpy(path);
  ASSERT_TRUE(bool(array));
  EXPECT_EQ(array->shapeString(), "[2, 3, 5]");
}

TEST(Npy, RejectsCorruptFiles) {
  std::string path = tempPath("bad.npy");
  auto expectError = [&](llvm::StringRef bytes, llvm::StringRef message) {
    writeRaw(path, bytes);
    auto array = readNpy(path);
    ASSERT_FALSE(bool(array));
    std::string text = llvm::toString(array.takeError());
    EXPECT_NE(text.find(message.str()), std::string::npos) << text;
  };
  expectError("", "bad magic");
  expectError("hello world, not numpy", "bad magic");
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
  std::string prefix = std::string("\x93NUMPY\x01\x00", 8) +
                       char(header.size()) + char(0) + header;
  expectError(prefix + std::string(15, 'x'), "needs 16");
  expectError(std::string("\x93NUMPY\x01\x00\xff\x00", 10), "truncated");
  std::string big = "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }";
  expectError(std::string("\x93NUMPY\x01\x00", 8) + char(big.size()) + char(0) +
                  big + "abcd",
              "little-endian");
  auto missing = readNpy("/nonexistent/x.npy");
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("cannot read"),
            std::string::npos);
}

//===- ReplayMain.cpp - run a fuzz target over its corpus -----------------===//
//
// Without libFuzzer (the regular build, ctest): calls the target's
// LLVMFuzzerTestOneInput on every file of the given files and folders, so
// the checked-in corpora and every crash found once stay regression tests.
//
//===----------------------------------------------------------------------===//

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    fs::path path(argv[i]);
    if (fs::is_directory(path)) {
      for (const auto &entry : fs::recursive_directory_iterator(path))
        if (entry.is_regular_file())
          files.push_back(entry.path());
    } else if (fs::exists(path)) {
      files.push_back(path);
    } else {
      std::fprintf(stderr, "replay: no such file or folder: %s\n", argv[i]);
      return 1;
    }
  }
  for (const fs::path &file : files) {
    std::ifstream in(file, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)),
                      std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(bytes.data()),
                           bytes.size());
  }
  std::printf("replay: %zu inputs, no crash\n", files.size());
  return files.empty() ? 1 : 0;
}

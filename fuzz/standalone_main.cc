// A driver for builds without libFuzzer: runs the target once on each file
// given (or on every file of each directory given), as libFuzzer does with a
// corpus without mutating it. A crash or sanitizer report ends the process.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

void RunFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  size_t runs = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg = argv[i];
    if (std::filesystem::is_directory(arg)) {
      for (const auto& entry : std::filesystem::recursive_directory_iterator(arg)) {
        if (!entry.is_regular_file() || entry.path().filename().string()[0] == '.') continue;
        RunFile(entry.path());
        ++runs;
      }
    } else {
      RunFile(arg);
      ++runs;
    }
  }
  std::printf("%s: %zu inputs ran without a finding\n", argv[0], runs);
  if (runs == 0) {
    std::fprintf(stderr, "no inputs: give files or directories\n");
    return 2;
  }
  return 0;
}

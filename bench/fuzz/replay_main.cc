// A main for a libFuzzer target without libFuzzer: feeds files to LLVMFuzzerTestOneInput, so
// the seed corpora and the checked-in regression inputs run as an ordinary test (under
// --config=asan too) every time the suite runs.
//
//   TARGET_replay PATH...    PATH: a file, or a directory whose files are read (not recursed)
//
// Each input is fed as it is and cut short (its last byte dropped, its second half dropped):
// truncation is the commonest corrupt payload, and a cut valid input reaches the rejection
// paths that whole seeds do not. Like libFuzzer, every call gets an exactly-sized heap buffer,
// so ASan catches a read past the end. The target aborts on a violation; this program then
// dies with it. Exit status 1 when a path cannot be read or no input was found.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void RunOne(const std::string& bytes, size_t size) {
  std::unique_ptr<uint8_t[]> buffer(new uint8_t[size]);
  std::memcpy(buffer.get(), bytes.data(), size);
  LLVMFuzzerTestOneInput(buffer.get(), size);
}

bool ReplayFile(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (file.bad() || !file.is_open()) {
    std::fprintf(stderr, "fuzz replay: cannot read %s\n", path.c_str());
    return false;
  }
  RunOne(bytes, bytes.size());
  if (!bytes.empty()) RunOne(bytes, bytes.size() - 1);
  if (bytes.size() > 1) RunOne(bytes, bytes.size() / 2);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    std::error_code error;
    if (std::filesystem::is_directory(argv[i], error)) {
      for (const auto& entry : std::filesystem::directory_iterator(argv[i], error)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
    } else if (std::filesystem::is_regular_file(argv[i], error)) {
      files.push_back(argv[i]);
    } else if (!error) {
      error = std::make_error_code(std::errc::no_such_file_or_directory);
    }
    if (error) {
      std::fprintf(stderr, "fuzz replay: %s: %s\n", argv[i], error.message().c_str());
      return 1;
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "fuzz replay: no input files (usage: %s PATH...)\n", argv[0]);
    return 1;
  }
  for (const auto& path : files) {
    if (!ReplayFile(path)) return 1;
  }
  std::printf("fuzz replay: %zu inputs, each whole and cut short, passed\n", files.size());
  return 0;
}

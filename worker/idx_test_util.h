// Test helpers: build IDX bytes and write them, gzip-compressed or raw, into the test's
// temporary directory. Failures to write are CHECK failures (a broken test machine, not a
// test result).
#ifndef TAMP_WORKER_IDX_TEST_UTIL_H_
#define TAMP_WORKER_IDX_TEST_UTIL_H_

#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "glog/logging.h"
#include "gtest/gtest.h"

namespace tamp::testing {

// IDX file contents: 00 00 type ndims, big-endian dims, then `data` as given (which need
// not match the dims, to build corrupt files).
inline std::string IdxBytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data,
                            uint8_t type = 0x08) {
  std::string bytes = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<char>(d >> shift));
  }
  bytes.append(data.begin(), data.end());
  return bytes;
}

// A fresh directory for the running test under TEST_TMPDIR, ending in '/'.
inline std::string TestDir() {
  const std::string dir = ::testing::TempDir() +
                          ::testing::UnitTest::GetInstance()->current_test_info()->name() + "/";
  CHECK(mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST) << dir;
  return dir;
}

inline void WriteRawFile(const std::string& path, const std::string& bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  CHECK(file.good()) << path;
}

inline void WriteGzFile(const std::string& path, const std::string& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  CHECK(file != nullptr) << path;
  CHECK_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())),
           static_cast<int>(bytes.size()))
      << path;
  CHECK_EQ(gzclose(file), Z_OK) << path;
}

inline std::string ReadRawFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  CHECK(file.good()) << path;
  return std::string(std::istreambuf_iterator<char>(file), {});
}

}  // namespace tamp::testing

#endif  // TAMP_WORKER_IDX_TEST_UTIL_H_

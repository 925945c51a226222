#include "worker/idx_reader.h"

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/idx_test_util.h"

namespace tamp {
namespace {

using ::tamp::testing::IdxBytes;
using ::tamp::testing::ReadRawFile;
using ::tamp::testing::TestDir;
using ::tamp::testing::WriteGzFile;
using ::tamp::testing::WriteRawFile;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<uint8_t> Iota(size_t n) {
  std::vector<uint8_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// Pseudo-random bytes, so that gzip cannot shrink them much.
std::vector<uint8_t> Noise(size_t n) {
  std::vector<uint8_t> v(n);
  uint32_t x = 12345;
  for (uint8_t& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(x >> 24);
  }
  return v;
}

// Writes `idx` gzip-compressed and reads it back; the test's expectations go on the result.
absl::StatusOr<IdxArray> WriteAndRead(const std::string& name, const std::string& idx) {
  const std::string path = TestDir() + name;
  WriteGzFile(path, idx);
  return ReadIdxFile(path);
}

// Checks the error code and that the message names the file and the problem.
void ExpectError(const absl::StatusOr<IdxArray>& result, absl::StatusCode code,
                 const std::string& file_name, const std::string& problem) {
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), code) << result.status();
  EXPECT_THAT(result.status().message(), HasSubstr(file_name));
  EXPECT_THAT(result.status().message(), HasSubstr(problem));
}

TEST(IdxReaderTest, ReadsThreeDimensionalFile) {
  const auto result = WriteAndRead("images.gz", IdxBytes({2, 3, 4}, Iota(24)));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(result->dims, ElementsAre(2, 3, 4));
  EXPECT_EQ(result->data, Iota(24));
}

TEST(IdxReaderTest, ReadsLargeOneDimensionalFileWithBigEndianDims) {
  // 70000 = 0x00011170: every byte of the dimension matters.
  const std::vector<uint8_t> data = Noise(70000);
  const auto result = WriteAndRead("labels.gz", IdxBytes({70000}, data));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(result->dims, ElementsAre(70000));
  EXPECT_EQ(result->data, data);
}

TEST(IdxReaderTest, MissingFileIsNotFound) {
  const std::string path = TestDir() + "absent.gz";
  ExpectError(ReadIdxFile(path), absl::StatusCode::kNotFound, path, "No such file");
}

TEST(IdxReaderTest, DirectoryIsInvalidArgument) {
  const std::string dir = TestDir();
  ExpectError(ReadIdxFile(dir), absl::StatusCode::kInvalidArgument, dir, "not a regular file");
}

TEST(IdxReaderTest, UncompressedFileIsNotGzip) {
  const std::string path = TestDir() + "plain.idx";
  WriteRawFile(path, IdxBytes({2, 3, 4}, Iota(24)));
  ExpectError(ReadIdxFile(path), absl::StatusCode::kDataLoss, path, "not a gzip file");
}

TEST(IdxReaderTest, EmptyFileIsNotGzip) {
  const std::string path = TestDir() + "empty.gz";
  WriteRawFile(path, "");
  ExpectError(ReadIdxFile(path), absl::StatusCode::kDataLoss, path, "file is empty");
}

TEST(IdxReaderTest, InvalidDeflateBlockIsCorruptGzip) {
  const std::string path = TestDir() + "corrupt.gz";
  WriteGzFile(path, IdxBytes({2, 3, 4}, Iota(24)));
  std::string gz = ReadRawFile(path);
  gz[10] |= 0x06;  // First deflate block header (after the 10-byte gzip header): BTYPE = 3.
  WriteRawFile(path, gz);
  ExpectError(ReadIdxFile(path), absl::StatusCode::kDataLoss, path,
              "corrupt gzip data: invalid block type");
}

TEST(IdxReaderTest, WrongCrcIsCorruptGzip) {
  const std::string path = TestDir() + "bad_crc.gz";
  WriteGzFile(path, IdxBytes({2, 3, 4}, Iota(24)));
  std::string gz = ReadRawFile(path);
  gz[gz.size() - 8] ^= 0x01;  // Trailer: CRC-32, then the length, little-endian.
  WriteRawFile(path, gz);
  ExpectError(ReadIdxFile(path), absl::StatusCode::kDataLoss, path,
              "corrupt gzip data: incorrect data check");
}

TEST(IdxReaderTest, GzipCutShortInTheDataIsTruncated) {
  const std::string path = TestDir() + "cut.gz";
  WriteGzFile(path, IdxBytes({10, 100}, Noise(1000)));
  const std::string gz = ReadRawFile(path);
  WriteRawFile(path, gz.substr(0, gz.size() / 2));
  const auto result = ReadIdxFile(path);
  ExpectError(result, absl::StatusCode::kDataLoss, path, "truncated: expected 1000 bytes of data");
  EXPECT_THAT(result.status().message(), HasSubstr("(the gzip stream is cut short)"));
}

TEST(IdxReaderTest, GzipWithoutTrailerIsTruncated) {
  const std::string path = TestDir() + "no_trailer.gz";
  WriteGzFile(path, IdxBytes({2, 3, 4}, Iota(24)));
  const std::string gz = ReadRawFile(path);
  WriteRawFile(path, gz.substr(0, gz.size() - 8));
  ExpectError(ReadIdxFile(path), absl::StatusCode::kDataLoss, path,
              "gzip stream is cut short after the data (missing gzip trailer)");
}

TEST(IdxReaderTest, ShortDataIsTruncated) {
  const auto result = WriteAndRead("short.gz", IdxBytes({10, 28, 28}, Noise(7000)));
  ExpectError(result, absl::StatusCode::kDataLoss, "short.gz",
              "truncated: expected 7840 bytes of data, file has 7000");
  EXPECT_THAT(result.status().message(), ::testing::Not(HasSubstr("cut short")));
}

TEST(IdxReaderTest, ShortHeaderIsTruncated) {
  ExpectError(WriteAndRead("header.gz", std::string(2, '\0')), absl::StatusCode::kDataLoss,
              "header.gz", "truncated: expected 4 bytes of IDX header, file has 2");
}

TEST(IdxReaderTest, ShortDimensionsAreTruncated) {
  const std::string idx = IdxBytes({60000, 28, 28}, {}).substr(0, 4 + 5);
  ExpectError(WriteAndRead("dims.gz", idx), absl::StatusCode::kDataLoss, "dims.gz",
              "truncated: expected 12 bytes of IDX dimensions, file has 5");
}

TEST(IdxReaderTest, TrailingBytesAreGarbage) {
  std::vector<uint8_t> data = Iota(24 + 5);
  ExpectError(WriteAndRead("trailing.gz", IdxBytes({2, 3, 4}, data)), absl::StatusCode::kDataLoss,
              "trailing.gz", "trailing garbage: 5 bytes after the 24 bytes of data");
}

TEST(IdxReaderTest, BadMagic) {
  std::string idx = IdxBytes({2, 3, 4}, Iota(24));
  idx[0] = 0x1f;
  ExpectError(WriteAndRead("magic.gz", idx), absl::StatusCode::kDataLoss, "magic.gz",
              "bad IDX magic 1f 00 08 03");
}

TEST(IdxReaderTest, KnownTypeOtherThanUnsignedByteIsUnimplemented) {
  ExpectError(WriteAndRead("float.gz", IdxBytes({6}, Iota(24), 0x0D)),
              absl::StatusCode::kUnimplemented, "float.gz",
              "IDX element type 0x0d (float32) is not supported");
}

TEST(IdxReaderTest, UnknownTypeIsDataLoss) {
  ExpectError(WriteAndRead("type.gz", IdxBytes({24}, Iota(24), 0x42)),
              absl::StatusCode::kDataLoss, "type.gz", "unknown IDX element type 0x42");
}

TEST(IdxReaderTest, ZeroDimensions) {
  ExpectError(WriteAndRead("rank0.gz", IdxBytes({}, Iota(1))), absl::StatusCode::kDataLoss,
              "rank0.gz", "IDX header declares zero dimensions");
}

TEST(IdxReaderTest, ZeroSizedDimension) {
  ExpectError(WriteAndRead("zero.gz", IdxBytes({5, 0, 3}, {})), absl::StatusCode::kDataLoss,
              "zero.gz", "dimension 1 of 5x0x3 is zero");
}

TEST(IdxReaderTest, DimensionsOverTheLimit) {
  // 2^32 bytes: over the 2^31 limit without overflowing.
  ExpectError(WriteAndRead("big.gz", IdxBytes({65536, 65536}, {})), absl::StatusCode::kDataLoss,
              "big.gz", "dimensions 65536x65536 declare more than the 2147483648-byte limit");
}

TEST(IdxReaderTest, DimensionsWhoseProductOverflows) {
  // The product of four 2^32 - 1 overflows 64 bits.
  const uint32_t max = 0xFFFFFFFFu;
  ExpectError(WriteAndRead("overflow.gz", IdxBytes({max, max, max, max}, {})),
              absl::StatusCode::kDataLoss, "overflow.gz", "-byte limit");
}

TEST(IdxReaderTest, HeaderAtTheLimitWithoutDataIsTruncatedNotAllocated) {
  // Exactly 2^31 bytes is allowed; the reader grows its buffer only as data arrives.
  ExpectError(WriteAndRead("limit.gz", IdxBytes({1u << 31}, {})), absl::StatusCode::kDataLoss,
              "limit.gz", "truncated: expected 2147483648 bytes of data, file has 0");
}

}  // namespace
}  // namespace tamp

#include "compress/wire_format.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp::compress {
namespace {

std::string Header(CodecId id, uint8_t version, uint64_t elements) {
  std::string out;
  AppendHeader(id, version, elements, &out);
  return out;
}

absl::Status ParseError(absl::string_view payload) {
  return ParseHeader(payload, CodecId::kNone, 1, 12).status();
}

TEST(WireFormatTest, HeaderLayoutIsLittleEndian) {
  const std::string header = Header(CodecId::kTopK, 3, 0x0102030405060708ull);
  EXPECT_EQ(header, std::string("TP\x01\x03\x08\x07\x06\x05\x04\x03\x02\x01", 12));
}

TEST(WireFormatTest, ParseHeaderReturnsTheBody) {
  const std::string payload = Header(CodecId::kTopK, 1, 1ull << 40) + "body";
  const absl::StatusOr<absl::string_view> body =
      ParseHeader(payload, CodecId::kTopK, 1, 1ull << 40);
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(*body, "body");
  EXPECT_EQ(body->data(), payload.data() + kHeaderBytes);  // A view, not a copy.

  const absl::StatusOr<absl::string_view> empty =
      ParseHeader(Header(CodecId::kNone, 1, 12), CodecId::kNone, 1, 12);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(*empty, "");
}

TEST(WireFormatTest, ParseHeaderRejectsTruncation) {
  const std::string header = Header(CodecId::kNone, 1, 12);
  for (size_t size = 0; size < kHeaderBytes; ++size) {
    const absl::Status status = ParseError(absl::string_view(header).substr(0, size));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(status.message(),
              absl::StrCat("payload truncated: ", size, " bytes, header needs 12"));
  }
}

TEST(WireFormatTest, ParseHeaderRejectsBadMagic) {
  std::string payload = Header(CodecId::kNone, 1, 12);
  payload[1] = 'X';
  const absl::Status status = ParseError(payload);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "bad payload magic 0x54 0x58, expected 'TP'");
}

TEST(WireFormatTest, ParseHeaderRejectsAnotherCodec) {
  absl::Status status = ParseError(Header(CodecId::kTopK, 1, 12));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "payload is for codec 1 (topk), expected 0 (none)");

  status = ParseError(Header(static_cast<CodecId>(99), 1, 12));
  EXPECT_EQ(status.message(), "payload is for codec 99 (unknown), expected 0 (none)");
}

TEST(WireFormatTest, ParseHeaderRejectsAnotherVersion) {
  const absl::Status status = ParseError(Header(CodecId::kNone, 2, 12));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "unsupported none payload version 2 (this build reads 1)");
}

TEST(WireFormatTest, ParseHeaderRejectsAnotherElementCount) {
  const absl::Status status = ParseError(Header(CodecId::kNone, 1, 10));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "element count 10 does not match chunk size 12");
}

TEST(BitsTest, PacksLeastSignificantBitFirst) {
  std::string out = "x";  // Appends after existing bytes.
  BitWriter writer(&out);
  writer.Write(0b101, 3);
  writer.Write(0b11001, 5);  // Completes byte 1: 11001'101.
  writer.Write(0x3ff, 10);   // Byte 2 = 0xff, then 2 bits of byte 3.
  writer.Write(0, 1);
  writer.Write(1, 1);  // Byte 3 = 0b0000'1011, zero-padded.
  writer.Finish();
  EXPECT_EQ(out, std::string("x\xCD\xFF\x0B", 4));
}

TEST(BitsTest, FinishWithNothingPendingAppendsNothing) {
  std::string out;
  BitWriter writer(&out);
  writer.Write(0xdeadbeef, 32);
  writer.Finish();
  EXPECT_EQ(out, std::string("\xEF\xBE\xAD\xDE", 4));
}

TEST(BitsTest, RandomFieldsOfEveryWidthRoundTrip) {
  std::mt19937_64 rng(1);
  std::vector<std::pair<uint64_t, int>> fields;
  for (int i = 0; i < 5000; ++i) {
    const int bits = 1 + static_cast<int>(rng() % 64);
    const uint64_t value = bits == 64 ? rng() : rng() & ((uint64_t{1} << bits) - 1);
    fields.emplace_back(value, bits);
  }
  std::string out;
  BitWriter writer(&out);
  uint64_t total_bits = 0;
  for (const auto& [value, bits] : fields) {
    writer.Write(value, bits);
    total_bits += bits;
  }
  writer.Finish();
  ASSERT_EQ(out.size(), (total_bits + 7) / 8);

  BitReader reader(out);
  for (size_t i = 0; i < fields.size(); ++i) {
    uint64_t value;
    ASSERT_TRUE(reader.Read(fields[i].second, &value).ok()) << i;
    ASSERT_EQ(value, fields[i].first) << "field " << i << " of " << fields[i].second << " bits";
  }
  EXPECT_EQ(reader.bits_remaining(), out.size() * 8 - total_bits);
}

TEST(BitsTest, ReaderReportsTruncationAndConsumesNothing) {
  const std::string bytes("\xCD\xFF", 2);
  BitReader reader(bytes);
  uint64_t value = 7;
  ASSERT_TRUE(reader.Read(12, &value).ok());
  EXPECT_EQ(value, 0xFCDu);
  const absl::Status status = reader.Read(5, &value);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "bit stream truncated: a 5-bit field at bit 12 but only 4 bits remain");
  EXPECT_EQ(value, 0xFCDu);
  EXPECT_EQ(reader.bits_remaining(), 4u);
  ASSERT_TRUE(reader.Read(4, &value).ok());
  EXPECT_EQ(value, 0xFu);

  BitReader empty("");
  EXPECT_EQ(empty.Read(1, &value).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tamp::compress

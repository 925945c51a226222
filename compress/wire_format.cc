#include "compress/wire_format.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tamp::compress {
namespace {

constexpr char kMagic[2] = {'T', 'P'};

std::string DescribeCodec(uint8_t id) {
  return absl::StrCat(id, " (", CodecName(static_cast<CodecId>(id)), ")");
}

}  // namespace

void AppendHeader(CodecId id, uint8_t version, uint64_t elements, std::string* out) {
  char header[kHeaderBytes];
  header[0] = kMagic[0];
  header[1] = kMagic[1];
  header[2] = static_cast<char>(id);
  header[3] = static_cast<char>(version);
  std::memcpy(header + 4, &elements, 8);
  out->append(header, kHeaderBytes);
}

absl::StatusOr<absl::string_view> ParseHeader(absl::string_view payload, CodecId expected,
                                              uint8_t expected_version,
                                              uint64_t expected_elements) {
  if (payload.size() < kHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("payload truncated: ", payload.size(), " bytes, header needs ", kHeaderBytes));
  }
  const auto* p = reinterpret_cast<const uint8_t*>(payload.data());
  if (p[0] != kMagic[0] || p[1] != kMagic[1]) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad payload magic 0x", absl::Hex(p[0], absl::kZeroPad2), " 0x",
                     absl::Hex(p[1], absl::kZeroPad2), ", expected 'TP'"));
  }
  if (p[2] != static_cast<uint8_t>(expected)) {
    return absl::InvalidArgumentError(absl::StrCat("payload is for codec ", DescribeCodec(p[2]),
                                                   ", expected ",
                                                   DescribeCodec(static_cast<uint8_t>(expected))));
  }
  if (p[3] != expected_version) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported ", CodecName(expected),
                                                   " payload version ", p[3], " (this build reads ",
                                                   expected_version, ")"));
  }
  uint64_t elements;
  std::memcpy(&elements, p + 4, 8);
  if (elements != expected_elements) {
    return absl::InvalidArgumentError(
        absl::StrCat("element count ", elements, " does not match chunk size ", expected_elements));
  }
  return payload.substr(kHeaderBytes);
}

void StoreWireFloats(const float* in, size_t n, char* out) {
  // A tile at a time through an aligned buffer, so the conversion loop vectorises.
  constexpr size_t kTile = 1024;
  uint32_t bits[kTile];
  for (size_t start = 0; start < n; start += kTile) {
    const size_t count = std::min(kTile, n - start);
    for (size_t i = 0; i < count; ++i) bits[i] = WireFloatBits(in[start + i]);
    std::memcpy(out + 4 * start, bits, 4 * count);
  }
}

uint64_t BitReader::ReadTail(int bits) const {
  uint64_t value = 0;
  size_t position = position_;
  for (int done = 0; done < bits;) {
    const int offset = static_cast<int>(position % 8);
    const int take = std::min(8 - offset, bits - done);
    const uint64_t byte = static_cast<uint8_t>(bytes_[position / 8]);
    value |= ((byte >> offset) & LowMask(take)) << done;
    done += take;
    position += take;
  }
  return value;
}

absl::Status BitReader::TruncatedError(int bits) const {
  return absl::InvalidArgumentError(absl::StrCat("bit stream truncated: a ", bits,
                                                 "-bit field at bit ", position_, " but only ",
                                                 bits_remaining(), " bits remain"));
}

}  // namespace tamp::compress

#include "compress/internal/sign_bits.h"

#include <array>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compress/wire_format.h"

namespace tamp::compress::internal {
namespace {

// kSignsOfByte[b][j] = bit j of b ? -1 : +1. 8 KiB; decoding reads one row per 8 values.
using SignTable = std::array<std::array<float, 8>, 256>;

constexpr SignTable MakeSignTable() {
  SignTable table{};
  for (int b = 0; b < 256; ++b) {
    for (int j = 0; j < 8; ++j) table[b][j] = (b >> j) & 1 ? -1.0f : 1.0f;
  }
  return table;
}

constexpr SignTable kSignsOfByte = MakeSignTable();

inline const float* SignRow(char byte) { return kSignsOfByte[static_cast<uint8_t>(byte)].data(); }

}  // namespace

void PackSignTail(const float* x, size_t count, char* out) {
  if (count == 0) return;
  // +0 pads the block; it packs as a 0 bit, so the padding comes out 0.
  float block[kSignBlock] = {};
  std::memcpy(block, x, sizeof(float) * count);
  StoreSignWord(PackSignWord(block), SignBytes(count), out);
}

void PackSigns(absl::Span<const float> x, char* out) {
  const size_t words = x.size() / kSignBlock;
  for (size_t w = 0; w < words; ++w) {
    StoreSignWord(PackSignWord(x.data() + kSignBlock * w), 8, out + 8 * w);
  }
  PackSignTail(x.data() + kSignBlock * words, x.size() % kSignBlock, out + 8 * words);
}

bool SignPaddingIsZero(absl::string_view plane, size_t n) {
  const int used = static_cast<int>(n % 8);
  if (used == 0) return true;
  const auto last = static_cast<uint8_t>(plane[SignBytes(n) - 1]);
  return (last >> used) == 0;
}

absl::StatusOr<absl::string_view> ParseSignPayload(absl::string_view payload, CodecId id,
                                                   uint8_t version, size_t n) {
  TAMP_ASSIGN_OR_RETURN(const absl::string_view plane, ParseHeader(payload, id, version, n));
  if (plane.size() != SignBytes(n)) {
    return absl::InvalidArgumentError(absl::StrCat(CodecName(id), " payload body is ",
                                                   plane.size(), " bytes, expected ", SignBytes(n)));
  }
  if (!SignPaddingIsZero(plane, n)) {
    return absl::InvalidArgumentError(absl::StrCat(CodecName(id), " sign padding bits are not zero"));
  }
  return plane;
}

void UnpackSigns(absl::string_view plane, float magnitude, absl::Span<float> out) {
  const size_t full = out.size() / 8;
  float* dst = out.data();
  for (size_t i = 0; i < full; ++i) {
    const float* row = SignRow(plane[i]);
    for (int j = 0; j < 8; ++j) dst[8 * i + j] = magnitude * row[j];
  }
  if (const size_t rest = out.size() % 8; rest != 0) {
    const float* row = SignRow(plane[full]);
    for (size_t j = 0; j < rest; ++j) dst[8 * full + j] = magnitude * row[j];
  }
}

void UnpackSignsAdd(absl::string_view plane, float magnitude, absl::Span<float> accumulator) {
  const size_t full = accumulator.size() / 8;
  float* dst = accumulator.data();
  for (size_t i = 0; i < full; ++i) {
    const float* row = SignRow(plane[i]);
    for (int j = 0; j < 8; ++j) dst[8 * i + j] += magnitude * row[j];
  }
  if (const size_t rest = accumulator.size() % 8; rest != 0) {
    const float* row = SignRow(plane[full]);
    for (size_t j = 0; j < rest; ++j) dst[8 * full + j] += magnitude * row[j];
  }
}

void MajorityVote(absl::Span<float> votes) {
  for (float& v : votes) v = static_cast<float>((v > 0.0f) - (v < 0.0f));
}

}  // namespace tamp::compress::internal

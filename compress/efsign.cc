#include "compress/efsign.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compress/internal/sign_bits.h"
#include "compress/wire_format.h"
#include "glog/logging.h"

namespace tamp::compress {
namespace {

// Partial sums of |x|: lane l of 16 adds the 4 values l, l + 16, l + 32, l + 48 of each
// 64-value block pairwise in fp32 and accumulates that in double. The adds of a block are
// independent, so they vectorise, and only a quarter of the values is converted to double.
constexpr size_t kLanes = 16;

inline void AddBlockMagnitudes(const float* __restrict x, double* __restrict sums) {
  for (size_t l = 0; l < kLanes; ++l) {
    const float quad = (std::fabs(x[l]) + std::fabs(x[l + 16])) +
                       (std::fabs(x[l + 32]) + std::fabs(x[l + 48]));
    sums[l] += quad;
  }
}

// sum |x| in double only, one value at a time: the slow path for when the fast sum is not
// finite, which is either a non-finite input or finite values near FLT_MAX whose fp32
// partial sums overflowed.
double SumMagnitudesInDouble(absl::Span<const float> x) {
  double sum = 0;
  for (float v : x) sum += std::fabs(double{v});
  return sum;
}

}  // namespace

std::unique_ptr<Codec> EfSignCodec::Create(const config::Codec& /*spec*/, size_t num_elements) {
  return std::make_unique<EfSignCodec>(num_elements);
}

size_t EfSignCodec::PayloadBytes(size_t num_elements) {
  return kHeaderBytes + sizeof(float) + internal::SignBytes(num_elements);
}

absl::Status EfSignCodec::Encode(absl::Span<const float> input, const RandomKey& /*key*/,
                                 std::string* payload) {
  CHECK_EQ(input.size(), size());
  const size_t n = size();
  payload->clear();
  AppendHeader(CodecId::kEfSign, kVersion, n, payload);
  payload->resize(MaxPayloadBytes());
  char* plane = payload->data() + kHeaderBytes + sizeof(float);

  // One pass: each 64-value block is packed and its magnitudes summed while in cache.
  double sums[kLanes] = {};
  const size_t words = n / internal::kSignBlock;
  for (size_t w = 0; w < words; ++w) {
    const float* x = input.data() + internal::kSignBlock * w;
    AddBlockMagnitudes(x, sums);
    internal::StoreSignWord(internal::PackSignWord(x), 8, plane + 8 * w);
  }
  if (const size_t done = internal::kSignBlock * words; done < n) {
    // The tail, padded with +0 (adds nothing, packs as +) to a whole block.
    float tail[internal::kSignBlock] = {};
    std::memcpy(tail, input.data() + done, sizeof(float) * (n - done));
    AddBlockMagnitudes(tail, sums);
    internal::PackSignTail(tail, n - done, plane + 8 * words);
  }

  double total = 0;
  for (double s : sums) total += s;
  if (!std::isfinite(total)) total = SumMagnitudesInDouble(input);
  float scale = static_cast<float>(total / static_cast<double>(n));
  // One NaN on the wire whatever the input's NaN payload: deterministic bytes everywhere.
  if (std::isnan(scale)) scale = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(payload->data() + kHeaderBytes, &scale, sizeof(scale));
  return absl::OkStatus();
}

absl::StatusOr<EfSignCodec::Body> EfSignCodec::Parse(absl::string_view payload) const {
  TAMP_ASSIGN_OR_RETURN(const absl::string_view body,
                        ParseHeader(payload, CodecId::kEfSign, kVersion, size()));
  const size_t expected = sizeof(float) + internal::SignBytes(size());
  if (body.size() != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("efsign payload body is ", body.size(), " bytes, expected ", expected));
  }
  Body parsed;
  std::memcpy(&parsed.scale, body.data(), sizeof(float));
  if (std::signbit(parsed.scale)) {
    uint32_t bits;
    std::memcpy(&bits, &parsed.scale, sizeof(bits));
    return absl::InvalidArgumentError(absl::StrCat("efsign scale 0x",
                                                   absl::Hex(bits, absl::kZeroPad8), " (",
                                                   parsed.scale, ") has its sign bit set"));
  }
  parsed.plane = body.substr(sizeof(float));
  if (!internal::SignPaddingIsZero(parsed.plane, size())) {
    return absl::InvalidArgumentError("efsign sign padding bits are not zero");
  }
  return parsed;
}

absl::Status EfSignCodec::Decode(absl::string_view payload, const RandomKey& /*key*/,
                                 absl::Span<float> out) const {
  CHECK_EQ(out.size(), size());
  TAMP_ASSIGN_OR_RETURN(const Body body, Parse(payload));
  internal::UnpackSigns(body.plane, body.scale, out);
  return absl::OkStatus();
}

absl::Status EfSignCodec::DecodeAdd(absl::string_view payload, const RandomKey& /*key*/,
                                    absl::Span<float> accumulator) const {
  CHECK_EQ(accumulator.size(), size());
  TAMP_ASSIGN_OR_RETURN(const Body body, Parse(payload));
  internal::UnpackSignsAdd(body.plane, body.scale, accumulator);
  return absl::OkStatus();
}

}  // namespace tamp::compress

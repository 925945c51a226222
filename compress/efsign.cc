#include "compress/efsign.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compress/internal/segments.h"
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

// The same lanes in double only (each of the 4 values added in turn): the slow path for
// when the fast sum is not finite, which is either a non-finite input or finite values near
// FLT_MAX whose fp32 pairs overflowed.
inline void AddBlockMagnitudesInDouble(const float* x, double* sums) {
  for (size_t l = 0; l < kLanes; ++l) {
    for (size_t q = 0; q < 4; ++q) sums[l] += std::fabs(double{x[l + 16 * q]});
  }
}

// A segment's total: its 16 lane sums in lane order.
double LaneTotal(const double* sums) {
  double total = 0;
  for (size_t l = 0; l < kLanes; ++l) total += sums[l];
  return total;
}

// sum |x| over the chunk: per segment of kStatSegment values (whole 64-value blocks, the
// chunk's last block padded with +0) the lanes of `add_block`, added in lane order; the
// segments in PairwiseLevels()' tree (compress/internal/segments.h). `pack(w, block)` sees
// each block on the way (the sign plane), or is null.
template <typename AddBlock, typename Pack>
double SumMagnitudes(absl::Span<const float> x, AddBlock add_block, Pack pack) {
  constexpr size_t kBlocksPerSegment = internal::kStatSegment / internal::kSignBlock;
  const size_t n = x.size();
  const size_t blocks = (n + internal::kSignBlock - 1) / internal::kSignBlock;
  thread_local std::vector<double> partials;
  partials.assign(internal::NumSegments(n), 0.0);
  for (size_t segment = 0; segment < partials.size(); ++segment) {
    double sums[kLanes] = {};
    const size_t end = std::min(blocks, (segment + 1) * kBlocksPerSegment);
    for (size_t w = segment * kBlocksPerSegment; w < end; ++w) {
      const size_t first = internal::kSignBlock * w;
      if (first + internal::kSignBlock <= n) {
        add_block(x.data() + first, sums);
        pack(w, x.data() + first, internal::kSignBlock);
      } else {  // The tail, padded with +0 (adds nothing, packs as +) to a whole block.
        float tail[internal::kSignBlock] = {};
        std::memcpy(tail, x.data() + first, sizeof(float) * (n - first));
        add_block(tail, sums);
        pack(w, tail, n - first);
      }
    }
    partials[segment] = LaneTotal(sums);
  }
  return internal::PairwiseLevels(&partials, [](double a, double b) { return a + b; });
}

void NoPacking(size_t, const float*, size_t) {}

// The fallback: the same order in double alone.
double SumInDouble(absl::Span<const float> x) {
  return SumMagnitudes(x, AddBlockMagnitudesInDouble, NoPacking);
}

}  // namespace

double EfSignCodec::MagnitudeSum(absl::Span<const float> input) {
  const double total = SumMagnitudes(input, AddBlockMagnitudes, NoPacking);
  return std::isfinite(total) ? total : SumInDouble(input);
}

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
  double total = SumMagnitudes(input, AddBlockMagnitudes,
                               [plane](size_t w, const float* block, size_t count) {
                                 if (count == internal::kSignBlock) {
                                   internal::StoreSignWord(internal::PackSignWord(block), 8,
                                                           plane + 8 * w);
                                 } else {
                                   internal::PackSignTail(block, count, plane + 8 * w);
                                 }
                               });
  if (!std::isfinite(total)) total = SumInDouble(input);
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

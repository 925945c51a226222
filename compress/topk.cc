#include "compress/topk.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/numeric/bits.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compress/wire_format.h"
#include "glog/logging.h"

namespace tamp::compress {
namespace {

constexpr uint32_t kInfinityKey = 0x7f800000;  // Bits of +inf.

// Sort key of |x|: for every non-NaN float the bits of |x| order exactly like |x| (and
// +0/-0 share key 0), and integer compares are cheaper than float ones inside nth_element.
// NaN, whatever its payload, gets the key of +inf.
inline uint32_t MagnitudeKey(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return std::min(bits & 0x7fffffffu, kInfinityKey);
}

inline float LoadFloat(const char* p) {
  float v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

}  // namespace

absl::Status TopKCodec::ValidateSpec(const config::Codec& spec, absl::string_view field_path) {
  if (spec.has_ratio() == spec.has_count()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field_path, ": codec 'topk' needs exactly one of 'ratio' and 'count', got ",
                     spec.has_ratio() ? "both" : "neither"));
  }
  // Written so that NaN fails too.
  if (spec.has_ratio() && !(spec.ratio() > 0 && spec.ratio() <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field_path, ".ratio: must be in (0, 1], got ", spec.ratio()));
  }
  if (spec.has_count() && spec.count() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(field_path, ".count: must be >= 1, got 0"));
  }
  return absl::OkStatus();
}

std::unique_ptr<Codec> TopKCodec::Create(const config::Codec& spec, size_t num_elements) {
  return std::make_unique<TopKCodec>(num_elements, EntriesKept(spec, num_elements));
}

size_t TopKCodec::EntriesKept(const config::Codec& spec, size_t num_elements) {
  if (spec.has_count()) return std::min<uint64_t>(spec.count(), num_elements);
  const double k = std::round(spec.ratio() * static_cast<double>(num_elements));
  if (k < 1) return 1;
  if (k >= static_cast<double>(num_elements)) return num_elements;
  return static_cast<size_t>(k);
}

int TopKCodec::IndexBits(size_t num_elements) {
  return std::max(1, static_cast<int>(absl::bit_width(uint64_t{num_elements} - 1)));
}

size_t TopKCodec::PayloadBytes(size_t num_elements, size_t k) {
  return kHeaderBytes + (k * IndexBits(num_elements) + 7) / 8 + sizeof(float) * k;
}

TopKCodec::TopKCodec(size_t num_elements, size_t k)
    : Codec(num_elements), k_(k), index_bits_(IndexBits(num_elements)) {
  CHECK_GE(k, 1u);
  CHECK_LE(k, num_elements);
}

absl::Status TopKCodec::Encode(absl::Span<const float> input, const RandomKey& /*key*/,
                               std::string* payload) {
  CHECK_EQ(input.size(), size());
  const size_t n = size();

  // Threshold: the k-th largest key. After nth_element, keys before position n - k are
  // <= threshold and keys after it are >=, so the ones after it that exceed the threshold
  // are all that do ("above" < k); the other k - above slots go to the first ties in index
  // order.
  thread_local std::vector<uint32_t> keys;
  keys.resize(n);
  for (size_t i = 0; i < n; ++i) keys[i] = MagnitudeKey(input[i]);
  const auto kth = keys.begin() + (n - k_);
  std::nth_element(keys.begin(), kth, keys.end());
  const uint32_t threshold = *kth;
  const size_t above =
      std::count_if(kth + 1, keys.end(), [&](uint32_t key) { return key > threshold; });
  size_t ties_left = k_ - above;

  payload->clear();
  payload->reserve(MaxPayloadBytes());
  AppendHeader(CodecId::kTopK, kVersion, n, payload);
  thread_local std::vector<float> values;
  values.resize(k_);
  BitWriter indices(payload);
  size_t taken = 0;
  for (size_t i = 0; i < n && taken < k_; ++i) {
    const uint32_t key = MagnitudeKey(input[i]);
    if (key > threshold || (key == threshold && ties_left > 0)) {
      if (key == threshold) --ties_left;
      indices.Write(i, index_bits_);
      values[taken++] = input[i];
    }
  }
  indices.Finish();
  DCHECK_EQ(taken, k_);
  payload->append(reinterpret_cast<const char*>(values.data()), sizeof(float) * k_);
  DCHECK_EQ(payload->size(), MaxPayloadBytes());
  return absl::OkStatus();
}

absl::StatusOr<TopKCodec::Entries> TopKCodec::Parse(absl::string_view payload) const {
  TAMP_ASSIGN_OR_RETURN(const absl::string_view body,
                        ParseHeader(payload, CodecId::kTopK, kVersion, size()));
  const size_t expected = IndexBytes() + sizeof(float) * k_;
  if (body.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat("topk payload body is ", body.size(),
                                                   " bytes, expected ", expected, " (k = ", k_,
                                                   ", ", index_bits_, " bits per index)"));
  }
  thread_local std::vector<uint64_t> indices;
  indices.resize(k_);
  BitReader reader(body.substr(0, IndexBytes()));
  for (size_t j = 0; j < k_; ++j) {
    TAMP_RETURN_IF_ERROR(reader.Read(index_bits_, &indices[j]));
    if (indices[j] >= size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "topk index ", indices[j], " (entry ", j, ") is out of range for ", size(), " elements"));
    }
    if (j > 0 && indices[j] <= indices[j - 1]) {
      return absl::InvalidArgumentError(absl::StrCat("topk indices not strictly increasing: entry ",
                                                     j, " is ", indices[j], " after ",
                                                     indices[j - 1]));
    }
  }
  // Padding must be zero so that every chunk has exactly one valid encoding.
  if (const int padding = static_cast<int>(reader.bits_remaining()); padding > 0) {
    uint64_t bits = 0;
    TAMP_RETURN_IF_ERROR(reader.Read(padding, &bits));
    if (bits != 0) return absl::InvalidArgumentError("topk index padding bits are not zero");
  }
  return Entries{indices, body.data() + IndexBytes()};
}

absl::Status TopKCodec::Decode(absl::string_view payload, const RandomKey& /*key*/,
                               absl::Span<float> out) const {
  CHECK_EQ(out.size(), size());
  TAMP_ASSIGN_OR_RETURN(const Entries entries, Parse(payload));
  std::fill(out.begin(), out.end(), 0.0f);
  for (size_t j = 0; j < k_; ++j) {
    out[entries.indices[j]] = LoadFloat(entries.values + sizeof(float) * j);
  }
  return absl::OkStatus();
}

absl::Status TopKCodec::DecodeAdd(absl::string_view payload, const RandomKey& /*key*/,
                                  absl::Span<float> accumulator) const {
  CHECK_EQ(accumulator.size(), size());
  TAMP_ASSIGN_OR_RETURN(const Entries entries, Parse(payload));
  for (size_t j = 0; j < k_; ++j) {
    accumulator[entries.indices[j]] += LoadFloat(entries.values + sizeof(float) * j);
  }
  return absl::OkStatus();
}

}  // namespace tamp::compress

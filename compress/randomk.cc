#include "compress/randomk.h"

#include <algorithm>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/numeric/bits.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compress/wire_format.h"
#include "glog/logging.h"

namespace tamp::compress {
namespace {

RandomKey SharedKey(const RandomKey& key) {
  return RandomKey{key.seed, key.step, key.chunk, kSharedStream};
}

}  // namespace

absl::Status RandomKCodec::ValidateSpec(const config::Codec& spec, absl::string_view field_path) {
  return ValidateRatioOrCount(spec, field_path, "randomk");
}

std::unique_ptr<Codec> RandomKCodec::Create(const config::Codec& spec, size_t num_elements) {
  return std::make_unique<RandomKCodec>(num_elements, EntriesKept(spec, num_elements),
                                        ValueFormatOf(spec));
}

size_t RandomKCodec::PayloadBytes(size_t k, ValueFormat values) {
  return kHeaderBytes + ValueBytes(values) * k;
}

void RandomKCodec::DrawPositions(const RandomKey& key, size_t n, size_t k, Membership membership,
                                 std::vector<size_t>* out) {
  CHECK(k >= 1 && k <= n) << k << " of " << n;
  UniformDraws draws(SharedKey(key));
  out->clear();
  out->reserve(k);
  // Floyd: for j = n-k .. n-1, draw t uniform in [0, j]; add t, or j if t is already in.
  // Every k-subset comes out equally likely.
  const size_t first = n - k;
  if (membership == Membership::kBitmap) {
    thread_local std::vector<uint64_t> bitmap;
    bitmap.assign((n + 63) / 64, 0);
    for (size_t d = 0; d < k; ++d) {
      const size_t j = first + d;
      size_t t = draws.Below(d, uint64_t{j} + 1);
      if (bitmap[t / 64] >> (t % 64) & 1) t = j;
      bitmap[t / 64] |= uint64_t{1} << (t % 64);
    }
    for (size_t w = 0; w < bitmap.size(); ++w) {
      for (uint64_t bits = bitmap[w]; bits != 0; bits &= bits - 1) {
        out->push_back(64 * w + absl::countr_zero(bits));
      }
    }
  } else {
    absl::flat_hash_set<size_t> set;
    set.reserve(k);
    for (size_t d = 0; d < k; ++d) {
      const size_t j = first + d;
      const size_t t = draws.Below(d, uint64_t{j} + 1);
      if (!set.insert(t).second) set.insert(j);
    }
    out->assign(set.begin(), set.end());
    std::sort(out->begin(), out->end());
  }
  DCHECK_EQ(out->size(), k);
}

absl::Span<const size_t> RandomKCodec::Positions(const RandomKey& key, size_t n, size_t k) {
  struct Cache {
    bool valid = false;
    uint64_t seed = 0, step = 0;
    uint32_t chunk = 0;
    size_t n = 0, k = 0;
    std::vector<size_t> positions;
  };
  thread_local Cache cache;
  if (!(cache.valid && cache.seed == key.seed && cache.step == key.step &&
        cache.chunk == key.chunk && cache.n == n && cache.k == k)) {
    // A bitmap costs n / 8 bytes to clear and n / 64 words to scan, about a nanosecond per
    // word; a hash set costs tens of nanoseconds per position plus a sort. So the bitmap
    // wins down to a few positions per 1024 entries.
    const Membership membership = n / 1024 <= k ? Membership::kBitmap : Membership::kHashSet;
    DrawPositions(key, n, k, membership, &cache.positions);
    cache.valid = true;
    cache.seed = key.seed;
    cache.step = key.step;
    cache.chunk = key.chunk;
    cache.n = n;
    cache.k = k;
  }
  return cache.positions;
}

RandomKCodec::RandomKCodec(size_t num_elements, size_t k, ValueFormat values)
    : Codec(num_elements), k_(k), values_(values) {
  CHECK_GE(k, 1u);
  CHECK_LE(k, num_elements);
}

absl::Status RandomKCodec::Encode(absl::Span<const float> input, const RandomKey& key,
                                  std::string* payload) {
  CHECK_EQ(input.size(), size());
  const absl::Span<const size_t> positions = Positions(key, size(), k_);
  payload->clear();
  payload->reserve(MaxPayloadBytes());
  AppendHeader(CodecId::kRandomK, kVersion, size(), payload);
  GatherValues(input, positions, values_, payload);
  DCHECK_EQ(payload->size(), MaxPayloadBytes());
  return absl::OkStatus();
}

absl::StatusOr<const char*> RandomKCodec::Values(absl::string_view payload) const {
  TAMP_ASSIGN_OR_RETURN(const absl::string_view body,
                        ParseHeader(payload, CodecId::kRandomK, kVersion, size()));
  const size_t expected = ValueBytes(values_) * k_;
  if (body.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat("randomk payload body is ", body.size(),
                                                   " bytes, expected ", expected, " (k = ", k_,
                                                   " values)"));
  }
  return body.data();
}

absl::Status RandomKCodec::Decode(absl::string_view payload, const RandomKey& key,
                                  absl::Span<float> out) const {
  CHECK_EQ(out.size(), size());
  TAMP_ASSIGN_OR_RETURN(const char* values, Values(payload));
  std::fill(out.begin(), out.end(), 0.0f);
  ScatterValues(Positions(key, size(), k_), values, values_, out.data());
  return absl::OkStatus();
}

absl::Status RandomKCodec::DecodeAdd(absl::string_view payload, const RandomKey& key,
                                     absl::Span<float> accumulator) const {
  CHECK_EQ(accumulator.size(), size());
  TAMP_ASSIGN_OR_RETURN(const char* values, Values(payload));
  ScatterAddValues(Positions(key, size(), k_), values, values_, accumulator.data());
  return absl::OkStatus();
}

}  // namespace tamp::compress

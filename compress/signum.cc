#include "compress/signum.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compress/internal/sign_bits.h"
#include "compress/wire_format.h"
#include "glog/logging.h"

namespace tamp::compress {
namespace {

// m[j] = b * m[j] + c * x[j] for j < count. `restrict` lets the compiler vectorise the
// block-sized calls without a runtime overlap check (which -O2 would not emit).
inline void Step(float b, float c, const float* __restrict x, size_t count,
                 float* __restrict m) {
  for (size_t j = 0; j < count; ++j) m[j] = b * m[j] + c * x[j];
}

}  // namespace

absl::Status SignumCodec::ValidateSpec(const config::Codec& spec, absl::string_view field_path) {
  // Written so that NaN fails too.
  if (spec.has_momentum() && !(spec.momentum() >= 0 && spec.momentum() < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field_path, ".momentum: must be in [0, 1), got ", spec.momentum()));
  }
  return absl::OkStatus();
}

std::unique_ptr<Codec> SignumCodec::Create(const config::Codec& spec, size_t num_elements) {
  return std::make_unique<SignumCodec>(
      num_elements, spec.has_momentum() ? spec.momentum() : kDefaultMomentum);
}

size_t SignumCodec::PayloadBytes(size_t num_elements) {
  return kHeaderBytes + internal::SignBytes(num_elements);
}

SignumCodec::SignumCodec(size_t num_elements, double momentum)
    : Codec(num_elements),
      momentum_(momentum),
      decay_(static_cast<float>(momentum)),
      gain_(static_cast<float>(1.0 - momentum)) {
  CHECK(momentum >= 0 && momentum < 1) << momentum;
}

absl::Status SignumCodec::Encode(absl::Span<const float> input, const RandomKey& /*key*/,
                                 std::string* payload) {
  CHECK_EQ(input.size(), size());
  const size_t n = size();
  if (m_.empty()) m_.assign(n, 0.0f);
  payload->clear();
  AppendHeader(CodecId::kSignum, kVersion, n, payload);
  payload->resize(MaxPayloadBytes());
  char* plane = payload->data() + kHeaderBytes;

  // One pass: each 64-value block of m is stepped and packed while in cache.
  const size_t words = n / internal::kSignBlock;
  for (size_t w = 0; w < words; ++w) {
    float* m = m_.data() + internal::kSignBlock * w;
    Step(decay_, gain_, input.data() + internal::kSignBlock * w, internal::kSignBlock, m);
    internal::StoreSignWord(internal::PackSignWord(m), 8, plane + 8 * w);
  }
  const size_t done = internal::kSignBlock * words;
  Step(decay_, gain_, input.data() + done, n - done, m_.data() + done);
  internal::PackSignTail(m_.data() + done, n - done, plane + 8 * words);
  return absl::OkStatus();
}

absl::StatusOr<absl::string_view> SignumCodec::Plane(absl::string_view payload) const {
  return internal::ParseSignPayload(payload, CodecId::kSignum, kVersion, size());
}

absl::Status SignumCodec::Decode(absl::string_view payload, const RandomKey& /*key*/,
                                 absl::Span<float> out) const {
  CHECK_EQ(out.size(), size());
  TAMP_ASSIGN_OR_RETURN(const absl::string_view plane, Plane(payload));
  internal::UnpackSigns(plane, 1.0f, out);
  return absl::OkStatus();
}

absl::Status SignumCodec::DecodeAdd(absl::string_view payload, const RandomKey& /*key*/,
                                    absl::Span<float> accumulator) const {
  CHECK_EQ(accumulator.size(), size());
  TAMP_ASSIGN_OR_RETURN(const absl::string_view plane, Plane(payload));
  internal::UnpackSignsAdd(plane, 1.0f, accumulator);
  return absl::OkStatus();
}

void SignumCodec::FinishAggregate(int num_contributors, absl::Span<float> accumulator) const {
  CHECK_GT(num_contributors, 0);
  CHECK_LE(accumulator.size(), size());
  internal::MajorityVote(accumulator);
}

}  // namespace tamp::compress

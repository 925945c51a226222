#include "compress/codec.h"

#include <vector>

#include "glog/logging.h"

namespace tamp::compress {

absl::string_view CodecName(CodecId id) {
  switch (id) {
    case CodecId::kNone:
      return "none";
    case CodecId::kTopK:
      return "topk";
    case CodecId::kFp16:
      return "fp16";
    case CodecId::kBf16:
      return "bf16";
    case CodecId::kDgc:
      return "dgc";
    case CodecId::kThreshold:
      return "threshold";
    case CodecId::kRandomK:
      return "randomk";
    case CodecId::kRandomBlock:
      return "randomblock";
    case CodecId::kQsgd:
      return "qsgd";
    case CodecId::kTernGrad:
      return "terngrad";
    case CodecId::kSignSgd:
      return "signsgd";
    case CodecId::kEfSign:
      return "efsign";
    case CodecId::kSignum:
      return "signum";
    case CodecId::kNatural:
      return "natural";
    case CodecId::kMaxMin:
      return "maxmin";
    case CodecId::kPowerSgd:
      return "powersgd";
  }
  return "unknown";
}

absl::Status Codec::DecodeAdd(absl::string_view payload, const RandomKey& key,
                              absl::Span<float> accumulator) const {
  CHECK_EQ(accumulator.size(), size());
  // One buffer per thread, reused across calls and codecs: servers decode many chunks
  // concurrently, and a per-call allocation of a multi-MiB chunk would dominate.
  thread_local std::vector<float> scratch;
  scratch.resize(size());
  absl::Status status = Decode(payload, key, absl::MakeSpan(scratch));
  if (!status.ok()) return status;  // The accumulator stays untouched.
  for (size_t i = 0; i < scratch.size(); ++i) accumulator[i] += scratch[i];
  return absl::OkStatus();
}

void Codec::FinishAggregate(int num_contributors, absl::Span<float> accumulator) const {
  CHECK_GT(num_contributors, 0);
  CHECK_EQ(accumulator.size(), size());
  const float scale = 1.0f / static_cast<float>(num_contributors);
  for (float& v : accumulator) v *= scale;
}

}  // namespace tamp::compress

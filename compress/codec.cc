#include "compress/codec.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
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
  CHECK_LE(accumulator.size(), size());
  const float scale = 1.0f / static_cast<float>(num_contributors);
  for (float& v : accumulator) v *= scale;
}

namespace {

absl::Status OneRound(CodecId id, absl::string_view method) {
  return absl::FailedPreconditionError(absl::StrCat("codec ", CodecName(id),
                                                    " takes one round per step; ", method,
                                                    "() is for multi-round codecs"));
}

absl::Status RoundZeroOnly(CodecId id, int round) {
  return absl::InvalidArgumentError(absl::StrCat("codec ", CodecName(id),
                                                 " takes one round per step, got round ", round));
}

}  // namespace

absl::Status Codec::EncodeRound(int /*round*/, absl::Span<const float> /*input*/,
                                absl::string_view /*previous_answer*/, const RandomKey& /*key*/,
                                std::string* /*payload*/) {
  return OneRound(id(), "EncodeRound");
}

absl::Status Codec::FinishRounds(absl::string_view /*final_answer*/, const RandomKey& /*key*/,
                                 absl::Span<float> /*sent*/) {
  return OneRound(id(), "FinishRounds");
}

void AddSparseEntries(const SparseEntries& entries, absl::Span<float> out) {
  DCHECK_EQ(entries.indices.size(), entries.values.size());
  for (size_t j = 0; j < entries.indices.size(); ++j) out[entries.indices[j]] += entries.values[j];
}

absl::StatusOr<bool> Codec::DecodeSparse(absl::string_view /*payload*/, const RandomKey& /*key*/,
                                         SparseEntries* /*entries*/) const {
  return false;
}

absl::Status Codec::DecodeRound(int round, absl::string_view payload, const RandomKey& key,
                                absl::Span<float> out) const {
  if (round != 0) return RoundZeroOnly(id(), round);
  return Decode(payload, key, out);
}

absl::Status Codec::DecodeAddRound(int round, absl::string_view payload, const RandomKey& key,
                                   absl::Span<float> accumulator) const {
  if (round != 0) return RoundZeroOnly(id(), round);
  return DecodeAdd(payload, key, accumulator);
}

void Codec::FinishRound(int round, int num_contributors, absl::Span<float> accumulator,
                        const RandomKey& /*key*/, std::string* answer,
                        absl::Span<float> aggregate) {
  CHECK_EQ(round, 0) << "codec " << CodecName(id()) << " takes one round per step";
  FinishAggregate(num_contributors, accumulator);
  answer->clear();
  if (!aggregate.empty() && aggregate.data() != accumulator.data()) {
    CHECK_EQ(aggregate.size(), accumulator.size());
    std::copy(accumulator.begin(), accumulator.end(), aggregate.begin());
  }
}

ChunkShape ChunkShapeInTensor(absl::Span<const int64_t> tensor_shape, uint64_t offset,
                              uint64_t length) {
  ChunkShape shape{.elements = length, .offset = offset, .row_length = 0};
  if (tensor_shape.size() >= 2) {
    uint64_t row_length = 1;
    for (size_t d = 1; d < tensor_shape.size(); ++d) {
      row_length *= static_cast<uint64_t>(tensor_shape[d]);
    }
    shape.row_length = row_length;
  }
  return shape;
}

}  // namespace tamp::compress

#include "compress/powersgd.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/philox.h"
#include "base/status_macros.h"
#include "compress/wire_format.h"
#include "glog/logging.h"

namespace tamp::compress {
namespace {

constexpr size_t kRoundBytes = sizeof(uint32_t);

// The smallest c >= 1 with c * c >= n.
size_t CeilSqrt(uint64_t n) {
  uint64_t c = static_cast<uint64_t>(std::sqrt(static_cast<double>(n)));
  while (c * c < n) ++c;
  while (c > 1 && (c - 1) * (c - 1) >= n) --c;
  return std::max<uint64_t>(c, 1);
}

std::string DescribeView(const ChunkShape& shape, const PowerSgdCodec::View& view) {
  if (shape.row_length == 0) {
    return absl::StrCat("a vector of ", shape.elements, " values is viewed near-square as ",
                        view.rows, " x ", view.cols);
  }
  return absl::StrCat(shape.elements, " values from offset ", shape.offset, " of a tensor with ",
                      shape.row_length, " values per row are viewed as ", view.rows, " x ",
                      view.cols);
}

}  // namespace

void OrthonormalizeColumns(size_t rows, size_t cols, absl::Span<float> matrix) {
  CHECK_EQ(matrix.size(), rows * cols);
  // Column-major fp64 copy: each column is contiguous while it is projected.
  std::vector<double> a(rows * cols);
  for (size_t i = 0; i < rows; ++i) {
    for (size_t j = 0; j < cols; ++j) a[j * rows + i] = matrix[i * cols + j];
  }
  for (size_t j = 0; j < cols; ++j) {
    double* v = &a[j * rows];
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t k = 0; k < j; ++k) {
        const double* u = &a[k * rows];
        double dot = 0;
        for (size_t i = 0; i < rows; ++i) dot += u[i] * v[i];
        for (size_t i = 0; i < rows; ++i) v[i] -= dot * u[i];
      }
    }
    double norm2 = 0;
    for (size_t i = 0; i < rows; ++i) norm2 += v[i] * v[i];
    if (norm2 == 0) continue;  // Stays zero (all of v is +-0 here).
    const double inverse = 1.0 / std::sqrt(norm2);
    for (size_t i = 0; i < rows; ++i) v[i] *= inverse;
  }
  for (size_t i = 0; i < rows; ++i) {
    for (size_t j = 0; j < cols; ++j) matrix[i * cols + j] = static_cast<float>(a[j * rows + i]);
  }
}

PowerSgdCodec::View PowerSgdCodec::ViewOf(const ChunkShape& shape) {
  CHECK_GE(shape.elements, 1u);
  View view;
  if (shape.row_length >= 1) {
    view.cols = shape.row_length;
    view.lead = shape.offset % shape.row_length;
    view.rows = (view.lead + shape.elements + view.cols - 1) / view.cols;
  } else {
    view.cols = CeilSqrt(shape.elements);
    view.rows = (shape.elements + view.cols - 1) / view.cols;
  }
  return view;
}

absl::Status PowerSgdCodec::ValidateSpec(const config::Codec& spec, absl::string_view field_path) {
  if (!spec.has_rank()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field_path, ": codec 'powersgd' needs 'rank' (e.g. rank: 2)"));
  }
  if (spec.rank() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(field_path, ".rank: must be >= 1, got ", spec.rank()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Codec>> PowerSgdCodec::Create(const config::Codec& spec,
                                                            const ChunkShape& shape) {
  const View view = ViewOf(shape);
  const size_t rank = spec.rank();
  if (rank > view.rows || rank > view.cols) {
    return absl::InvalidArgumentError(absl::StrCat(
        "codec 'powersgd': rank ", rank, " needs a matrix of at least ", rank, " x ", rank,
        ", but ", DescribeView(shape, view),
        "; lower the rank, make chunks larger (compression.partition_bytes), or send this "
        "tensor with another codec (compression.tensor_overrides, min_compress_bytes)"));
  }
  return std::make_unique<PowerSgdCodec>(shape, rank);
}

size_t PowerSgdCodec::MessageBytes(size_t factor_rows, size_t rank) {
  return kHeaderBytes + kRoundBytes + sizeof(float) * factor_rows * rank;
}

PowerSgdCodec::PowerSgdCodec(const ChunkShape& shape, size_t rank)
    : Codec(shape.elements), view_(ViewOf(shape)), rank_(rank) {
  CHECK_GE(rank_, 1u);
  CHECK_LE(rank_, view_.rows);
  CHECK_LE(rank_, view_.cols);
  CHECK_LE(view_.lead + size(), view_.rows * view_.cols);
}

size_t PowerSgdCodec::MaxPayloadBytes() const {
  return std::max(RoundPayloadBytes(0), RoundPayloadBytes(1));
}

size_t PowerSgdCodec::RoundValues(int round) const {
  CHECK(round >= 0 && round < kRounds) << round;
  return FactorRows(round) * rank_;
}

absl::Status PowerSgdCodec::Encode(absl::Span<const float> /*input*/, const RandomKey& /*key*/,
                                   std::string* /*payload*/) {
  return absl::FailedPreconditionError(
      "codec powersgd takes 2 rounds per step: encode with EncodeRound()");
}

absl::Status PowerSgdCodec::Decode(absl::string_view /*payload*/, const RandomKey& /*key*/,
                                   absl::Span<float> /*out*/) const {
  return absl::FailedPreconditionError(
      "codec powersgd takes 2 rounds per step: a payload decodes only with its round "
      "(DecodeAddRound())");
}

// ---------------------------------------------------------------------------------------
// Warm start

void PowerSgdCodec::DrawZeroColumns(const RandomKey& key, absl::Span<float> q) const {
  const size_t c = view_.cols;
  const size_t r = rank_;
  CHECK_EQ(q.size(), c * r);
  // Every all-zero column from the stream all workers share.
  const PhiloxStream shared({.seed = key.seed, .step = key.step, .chunk = key.chunk,
                             .worker = kSharedStream});
  for (size_t j = 0; j < r; ++j) {
    bool zero = true;
    for (size_t k = 0; k < c && zero; ++k) zero = q[k * r + j] == 0.0f;
    if (!zero) continue;
    for (size_t k = 0; k < c; ++k) q[k * r + j] = 2.0f * shared.Uniform(j * c + k) - 1.0f;
  }
}

void PowerSgdCodec::UnitColumns(absl::Span<float> q) const {
  const size_t c = view_.cols;
  const size_t r = rank_;
  CHECK_EQ(q.size(), c * r);
  for (size_t j = 0; j < r; ++j) {
    double norm2 = 0;
    for (size_t k = 0; k < c; ++k) norm2 += static_cast<double>(q[k * r + j]) * q[k * r + j];
    const double scale = norm2 > 0 ? 1.0 / std::sqrt(norm2) : 1.0;
    for (size_t k = 0; k < c; ++k) q[k * r + j] = static_cast<float>(q[k * r + j] * scale);
  }
}

// ---------------------------------------------------------------------------------------
// Messages

void PowerSgdCodec::AppendMessage(int round, absl::Span<const float> values,
                                  std::string* out) const {
  CHECK_EQ(values.size(), RoundValues(round));
  out->clear();
  out->reserve(RoundPayloadBytes(round));
  AppendHeader(CodecId::kPowerSgd, kVersion, size(), out);
  const uint32_t tag = static_cast<uint32_t>(round);
  out->append(reinterpret_cast<const char*>(&tag), kRoundBytes);
  out->append(reinterpret_cast<const char*>(values.data()), sizeof(float) * values.size());
}

absl::Status PowerSgdCodec::ParseMessage(absl::string_view message, int round,
                                         absl::string_view what,
                                         std::vector<float>* values) const {
  absl::StatusOr<absl::string_view> body =
      ParseHeader(message, CodecId::kPowerSgd, kVersion, size());
  if (!body.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("powersgd ", what, ": ", body.status().message()));
  }
  const size_t expected = kRoundBytes + sizeof(float) * RoundValues(round);
  if (body->size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat("powersgd ", what, " of round ", round, " has a ",
                                                   body->size(), "-byte body, expected ",
                                                   expected));
  }
  uint32_t tag;
  std::memcpy(&tag, body->data(), kRoundBytes);
  if (tag != static_cast<uint32_t>(round)) {
    return absl::InvalidArgumentError(
        absl::StrCat("powersgd ", what, " is for round ", tag, ", expected round ", round));
  }
  values->resize(RoundValues(round));
  std::memcpy(values->data(), body->data() + kRoundBytes, sizeof(float) * values->size());
  return absl::OkStatus();
}

void PowerSgdCodec::LowRankProduct(absl::Span<const float> p, absl::Span<const float> q,
                                   absl::Span<float> out) const {
  DCHECK_EQ(p.size(), view_.rows * rank_);
  DCHECK_EQ(q.size(), view_.cols * rank_);
  CHECK_EQ(out.size(), size());
  for (size_t t = 0; t < size(); ++t) {
    const size_t flat = view_.lead + t;
    const float* p_row = &p[(flat / view_.cols) * rank_];
    const float* q_row = &q[(flat % view_.cols) * rank_];
    double sum = 0;
    for (size_t j = 0; j < rank_; ++j) sum += static_cast<double>(p_row[j]) * q_row[j];
    out[t] = static_cast<float>(sum);
  }
}

// ---------------------------------------------------------------------------------------
// Worker side

absl::Status PowerSgdCodec::EncodeRound(int round, absl::Span<const float> input,
                                        absl::string_view previous_answer, const RandomKey& key,
                                        std::string* payload) {
  const size_t m = view_.rows;
  const size_t c = view_.cols;
  const size_t r = rank_;
  if (round == 0) {
    CHECK_EQ(input.size(), size());
    matrix_.assign(m * c, 0.0f);
    std::copy(input.begin(), input.end(), matrix_.begin() + view_.lead);
    if (q_.empty()) q_.assign(c * r, 0.0f);
    DrawZeroColumns(key, absl::MakeSpan(q_));
    // P = M Q.
    std::vector<float> p(m * r);
    std::vector<double> sum(r);
    for (size_t i = 0; i < m; ++i) {
      std::fill(sum.begin(), sum.end(), 0.0);
      const float* row = &matrix_[i * c];
      for (size_t k = 0; k < c; ++k) {
        const double x = row[k];
        const float* q_row = &q_[k * r];
        for (size_t j = 0; j < r; ++j) sum[j] += x * q_row[j];
      }
      for (size_t j = 0; j < r; ++j) p[i * r + j] = static_cast<float>(sum[j]);
    }
    AppendMessage(0, p, payload);
    next_round_ = 1;
    return absl::OkStatus();
  }
  if (round != next_round_ || round >= kRounds) {
    return absl::FailedPreconditionError(absl::StrCat(
        "powersgd: EncodeRound(", round, ") out of order; the codec expects ",
        next_round_ >= kRounds ? std::string("FinishRounds()")
                               : absl::StrCat("EncodeRound(", next_round_, ")")));
  }
  // round == 1: Q_i = Mᵀ P̂.
  std::vector<float> p_hat;
  TAMP_RETURN_IF_ERROR(ParseMessage(previous_answer, 0, "answer", &p_hat));
  p_hat_ = std::move(p_hat);
  std::vector<double> sum(c * r, 0.0);
  for (size_t i = 0; i < m; ++i) {
    const float* row = &matrix_[i * c];
    const float* p_row = &p_hat_[i * r];
    for (size_t k = 0; k < c; ++k) {
      const double x = row[k];
      double* s = &sum[k * r];
      for (size_t j = 0; j < r; ++j) s[j] += x * p_row[j];
    }
  }
  q_local_.resize(c * r);
  for (size_t i = 0; i < sum.size(); ++i) q_local_[i] = static_cast<float>(sum[i]);
  AppendMessage(1, q_local_, payload);
  next_round_ = kRounds;
  return absl::OkStatus();
}

absl::Status PowerSgdCodec::FinishRounds(absl::string_view final_answer, const RandomKey& /*key*/,
                                         absl::Span<float> sent) {
  if (next_round_ != kRounds) {
    return absl::FailedPreconditionError(absl::StrCat(
        "powersgd: FinishRounds() before the last round; the codec expects EncodeRound(",
        next_round_, ")"));
  }
  std::vector<float> q_bar;
  TAMP_RETURN_IF_ERROR(ParseMessage(final_answer, 1, "aggregate", &q_bar));
  if (!sent.empty()) LowRankProduct(p_hat_, q_local_, sent);
  // Warm start: Q̄ with unit columns; an all-zero column is drawn anew at the next round 0.
  UnitColumns(absl::MakeSpan(q_bar));
  q_ = std::move(q_bar);
  next_round_ = 0;
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------
// Server side

absl::StatusOr<const std::vector<float>*> PowerSgdCodec::ParsePush(int round,
                                                                    absl::string_view payload,
                                                                    size_t out_size) const {
  if (round < 0 || round >= kRounds) {
    return absl::InvalidArgumentError(
        absl::StrCat("powersgd has rounds 0 and 1, got round ", round));
  }
  CHECK_EQ(out_size, RoundValues(round));
  thread_local std::vector<float> values;
  TAMP_RETURN_IF_ERROR(ParseMessage(payload, round, "payload", &values));
  return &values;
}

absl::Status PowerSgdCodec::DecodeRound(int round, absl::string_view payload,
                                        const RandomKey& /*key*/, absl::Span<float> out) const {
  TAMP_ASSIGN_OR_RETURN(const std::vector<float>* values, ParsePush(round, payload, out.size()));
  std::copy(values->begin(), values->end(), out.begin());
  return absl::OkStatus();
}

absl::Status PowerSgdCodec::DecodeAddRound(int round, absl::string_view payload,
                                           const RandomKey& /*key*/,
                                           absl::Span<float> accumulator) const {
  TAMP_ASSIGN_OR_RETURN(const std::vector<float>* values,
                        ParsePush(round, payload, accumulator.size()));
  for (size_t i = 0; i < values->size(); ++i) accumulator[i] += (*values)[i];
  return absl::OkStatus();
}

void PowerSgdCodec::FinishRound(int round, int num_contributors, absl::Span<float> accumulator,
                                const RandomKey& /*key*/, std::string* answer,
                                absl::Span<float> aggregate) {
  CHECK_GT(num_contributors, 0);
  CHECK(round == 0 || round == 1) << round;
  CHECK_EQ(accumulator.size(), RoundValues(round));
  if (round == 0) {
    CHECK(aggregate.empty());
    // orth(Σ P_i) = orth(mean P_i): Gram-Schmidt does not see a common positive scale.
    server_p_hat_.assign(accumulator.begin(), accumulator.end());
    OrthonormalizeColumns(view_.rows, rank_, absl::MakeSpan(server_p_hat_));
    have_p_hat_ = true;
    AppendMessage(0, server_p_hat_, answer);
    return;
  }
  CHECK(have_p_hat_) << "powersgd: FinishRound(1) without FinishRound(0)";
  // Q̄ = mean Q_i, scaled as Codec::FinishAggregate scales.
  const float scale = 1.0f / static_cast<float>(num_contributors);
  for (float& v : accumulator) v *= scale;
  LowRankProduct(server_p_hat_, accumulator, aggregate);
  AppendMessage(1, accumulator, answer);
  have_p_hat_ = false;
}

}  // namespace tamp::compress

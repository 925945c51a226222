// PowerSGD (compress/powersgd.h): the matrix view, rank validation, Gram-Schmidt, exact
// message sizes, exactness on rank-r matrices, warm start, error feedback identities, and
// rejection of malformed and out-of-order messages. The server side runs in-process: one
// PowerSgdCodec plays the server, one per worker plays that worker.
#include "compress/powersgd.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "compress/error_feedback.h"
#include "compress/registry.h"
#include "compress/wire_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp::compress {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kSeed = 7;
constexpr uint32_t kChunk = 3;

config::Codec Rank(uint32_t rank) {
  config::Codec spec;
  spec.set_name("powersgd");
  spec.set_rank(rank);
  return spec;
}

// A [rows, cols] tensor chunk of whole rows.
ChunkShape Matrix(size_t rows, size_t cols) {
  return {.elements = rows * cols, .offset = 0, .row_length = cols};
}

RandomKey WorkerKey(uint64_t step, uint32_t worker) {
  return {.seed = kSeed, .step = step, .chunk = kChunk, .worker = worker};
}
RandomKey SharedKey(uint64_t step) {
  return {.seed = kSeed, .step = step, .chunk = kChunk, .worker = kSharedStream};
}

std::vector<float> RandomValues(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-scale, scale);
  std::vector<float> values(n);
  for (float& v : values) v = uniform(rng);
  return values;
}

// [rows, cols] = a [rows, r] times bᵀ ([cols, r]), in fp64, rounded once.
std::vector<float> Product(const std::vector<float>& a, const std::vector<float>& b, size_t rows,
                           size_t cols, size_t r) {
  std::vector<float> out(rows * cols);
  for (size_t i = 0; i < rows; ++i) {
    for (size_t k = 0; k < cols; ++k) {
      double sum = 0;
      for (size_t j = 0; j < r; ++j) sum += double{a[i * r + j]} * b[k * r + j];
      out[i * cols + k] = static_cast<float>(sum);
    }
  }
  return out;
}

double Norm(const std::vector<float>& x) {
  double sum = 0;
  for (float v : x) sum += double{v} * v;
  return std::sqrt(sum);
}

double Distance(const std::vector<float>& x, const std::vector<float>& y) {
  double sum = 0;
  for (size_t i = 0; i < x.size(); ++i) sum += (double{x[i]} - y[i]) * (double{x[i]} - y[i]);
  return std::sqrt(sum);
}

std::unique_ptr<PowerSgdCodec> NewCodec(const ChunkShape& shape, uint32_t rank) {
  absl::StatusOr<std::unique_ptr<Codec>> codec = CreateCodec(Rank(rank), shape);
  CHECK(codec.ok()) << codec.status();
  return std::unique_ptr<PowerSgdCodec>(static_cast<PowerSgdCodec*>(codec->release()));
}

// One server and W workers of one chunk, driven through both rounds in-process.
class Job {
 public:
  Job(const ChunkShape& shape, uint32_t rank, int workers) : server_(NewCodec(shape, rank)) {
    for (int w = 0; w < workers; ++w) workers_.push_back(NewCodec(shape, rank));
  }

  struct Step {
    std::vector<std::string> round0, round1;  // Each worker's payloads.
    std::string answer0, answer1;             // The server's answers.
    std::vector<float> aggregate;             // What the optimizer would apply.
    std::vector<std::vector<float>> sent;     // Each worker's FinishRounds() `sent`.
  };

  // inputs[w] is worker w's input. Every call must succeed.
  Step Run(uint64_t step, const std::vector<std::vector<float>>& inputs) {
    const int num_workers = static_cast<int>(workers_.size());
    Step out;
    out.round0.resize(num_workers);
    out.round1.resize(num_workers);
    std::vector<float> sum0(server_->RoundValues(0), 0.0f);
    for (int w = 0; w < num_workers; ++w) {
      EXPECT_TRUE(workers_[w]->EncodeRound(0, inputs[w], "", WorkerKey(step, w), &out.round0[w]).ok());
      EXPECT_TRUE(server_->DecodeAddRound(0, out.round0[w], SharedKey(step), absl::MakeSpan(sum0)).ok());
    }
    server_->FinishRound(0, num_workers, absl::MakeSpan(sum0), SharedKey(step), &out.answer0, {});
    std::vector<float> sum1(server_->RoundValues(1), 0.0f);
    for (int w = 0; w < num_workers; ++w) {
      EXPECT_TRUE(workers_[w]->EncodeRound(1, {}, out.answer0, WorkerKey(step, w), &out.round1[w]).ok());
      EXPECT_TRUE(server_->DecodeAddRound(1, out.round1[w], SharedKey(step), absl::MakeSpan(sum1)).ok());
    }
    out.aggregate.resize(server_->size());
    server_->FinishRound(1, num_workers, absl::MakeSpan(sum1), SharedKey(step), &out.answer1,
                         absl::MakeSpan(out.aggregate));
    for (int w = 0; w < num_workers; ++w) {
      out.sent.emplace_back(server_->size());
      EXPECT_TRUE(workers_[w]->FinishRounds(out.answer1, WorkerKey(step, w),
                                            absl::MakeSpan(out.sent.back())).ok());
    }
    return out;
  }

  PowerSgdCodec& server() { return *server_; }
  PowerSgdCodec& worker(int w) { return *workers_[w]; }

 private:
  std::unique_ptr<PowerSgdCodec> server_;
  std::vector<std::unique_ptr<PowerSgdCodec>> workers_;
};

// ---------------------------------------------------------------------------------------
// View, spec and registry

TEST(PowerSgdViewTest, VectorsAreNearSquare) {
  auto view = PowerSgdCodec::ViewOf({.elements = 10});
  EXPECT_EQ(view.rows, 3u);
  EXPECT_EQ(view.cols, 4u);
  EXPECT_EQ(view.lead, 0u);
  view = PowerSgdCodec::ViewOf({.elements = 1000});
  EXPECT_EQ(view.rows, 32u);
  EXPECT_EQ(view.cols, 32u);
  view = PowerSgdCodec::ViewOf({.elements = 16});
  EXPECT_EQ(view.rows, 4u);
  EXPECT_EQ(view.cols, 4u);
  view = PowerSgdCodec::ViewOf({.elements = 17});
  EXPECT_EQ(view.rows, 4u);
  EXPECT_EQ(view.cols, 5u);
  view = PowerSgdCodec::ViewOf({.elements = 1});
  EXPECT_EQ(view.rows, 1u);
  EXPECT_EQ(view.cols, 1u);
}

TEST(PowerSgdViewTest, TensorSlicesKeepTheTensorsRows) {
  // Whole rows: exactly the tensor's matrix.
  auto view = PowerSgdCodec::ViewOf({.elements = 3 * 784, .offset = 784, .row_length = 784});
  EXPECT_EQ(view.rows, 3u);
  EXPECT_EQ(view.cols, 784u);
  EXPECT_EQ(view.lead, 0u);
  // Starts 100 values into a row and ends 100 values into the next: 2 padded rows.
  view = PowerSgdCodec::ViewOf({.elements = 784, .offset = 784 * 5 + 100, .row_length = 784});
  EXPECT_EQ(view.rows, 2u);
  EXPECT_EQ(view.cols, 784u);
  EXPECT_EQ(view.lead, 100u);
  // A conv-like [8, 3, 3, 3] tensor has rows of 27 values.
  const std::vector<int64_t> conv = {8, 3, 3, 3};
  const ChunkShape shape = ChunkShapeInTensor(conv, 0, 216);
  EXPECT_EQ(shape.row_length, 27u);
  EXPECT_EQ(ChunkShapeInTensor(std::vector<int64_t>{64}, 0, 64).row_length, 0u);
}

TEST(PowerSgdSpecTest, RankIsRequiredAndPositive) {
  config::Codec spec;
  spec.set_name("powersgd");
  EXPECT_EQ(ValidateCodecSpec(spec, "compression.default_compression.push"),
            absl::InvalidArgumentError("compression.default_compression.push: codec 'powersgd' "
                                       "needs 'rank' (e.g. rank: 2)"));
  EXPECT_EQ(ValidateCodecSpec(Rank(0), "compression.default_compression.push"),
            absl::InvalidArgumentError(
                "compression.default_compression.push.rank: must be >= 1, got 0"));
  EXPECT_TRUE(ValidateCodecSpec(Rank(4), "p").ok());
  config::Codec with_ratio = Rank(2);
  with_ratio.set_ratio(0.1);
  EXPECT_EQ(ValidateCodecSpec(with_ratio, "p").message(),
            "p.ratio: codec 'powersgd' takes no parameter 'ratio'");
}

TEST(PowerSgdSpecTest, RefusesChunksThinnerThanTheRank) {
  // 10 values: 3 x 4, so rank 3 fits and rank 4 does not.
  EXPECT_TRUE(CreateCodec(Rank(3), 10).ok());
  absl::StatusOr<std::unique_ptr<Codec>> codec = CreateCodec(Rank(4), 10);
  EXPECT_EQ(codec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(codec.status().message()),
              HasSubstr("codec 'powersgd': rank 4 needs a matrix of at least 4 x 4, but a vector "
                        "of 10 values is viewed near-square as 3 x 4; lower the rank"));
  // One row of a wide tensor.
  codec = CreateCodec(Rank(2), ChunkShape{.elements = 784, .offset = 0, .row_length = 784});
  EXPECT_THAT(std::string(codec.status().message()),
              HasSubstr("but 784 values from offset 0 of a tensor with 784 values per row are "
                        "viewed as 1 x 784"));
  // The rank against the columns too.
  EXPECT_FALSE(CreateCodec(Rank(2), Matrix(50, 1)).ok());
  EXPECT_TRUE(CreateCodec(Rank(1), Matrix(50, 1)).ok());
}

TEST(PowerSgdSpecTest, RegistryListsTwoRoundsAndRefusesItForPulls) {
  const CodecInfo* info = nullptr;
  for (const CodecInfo& candidate : ListCodecs()) {
    if (candidate.id == CodecId::kPowerSgd) info = &candidate;
    if (candidate.id != CodecId::kPowerSgd) {
      EXPECT_EQ(candidate.rounds, 1) << candidate.name;
    }
  }
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->name, "powersgd");
  EXPECT_EQ(info->rounds, 2);
  EXPECT_EQ(info->example.rank(), 2u);
  EXPECT_THAT(info->wire_bytes, HasSubstr("round 0: 16 + 4*m*r"));

  EXPECT_EQ(ValidatePullCodecSpec(Rank(2), "compression.default_compression.pull"),
            absl::InvalidArgumentError(
                "compression.default_compression.pull.name: codec 'powersgd' takes 2 rounds per "
                "step and can only push; the pull side answers in one"));
  config::Codec none;
  none.set_name("none");
  EXPECT_TRUE(ValidatePullCodecSpec(none, "p").ok());
}

// ---------------------------------------------------------------------------------------
// Gram-Schmidt

TEST(OrthonormalizeColumnsTest, GivesOrthonormalColumnsSpanningTheSameSpace) {
  constexpr size_t kRows = 50, kCols = 4;
  const std::vector<float> input = RandomValues(kRows * kCols, 1);
  std::vector<float> q = input;
  OrthonormalizeColumns(kRows, kCols, absl::MakeSpan(q));
  for (size_t a = 0; a < kCols; ++a) {
    for (size_t b = 0; b < kCols; ++b) {
      double dot = 0;
      for (size_t i = 0; i < kRows; ++i) dot += double{q[i * kCols + a]} * q[i * kCols + b];
      EXPECT_NEAR(dot, a == b ? 1.0 : 0.0, 1e-6) << a << "," << b;
    }
  }
  // Column 0 is the input's column 0, normalised; every input column is in span(q).
  double norm = 0;
  for (size_t i = 0; i < kRows; ++i) norm += double{input[i * kCols]} * input[i * kCols];
  for (size_t i = 0; i < kRows; ++i) {
    EXPECT_NEAR(q[i * kCols], input[i * kCols] / std::sqrt(norm), 1e-6);
  }
  for (size_t col = 0; col < kCols; ++col) {
    std::vector<double> rest(kRows);
    for (size_t i = 0; i < kRows; ++i) rest[i] = input[i * kCols + col];
    for (size_t a = 0; a < kCols; ++a) {
      double dot = 0;
      for (size_t i = 0; i < kRows; ++i) dot += q[i * kCols + a] * rest[i];
      for (size_t i = 0; i < kRows; ++i) rest[i] -= dot * q[i * kCols + a];
    }
    for (double v : rest) EXPECT_NEAR(v, 0.0, 1e-5);
  }
}

TEST(OrthonormalizeColumnsTest, ZeroColumnsStayZeroAndTheOthersAreUnit) {
  constexpr size_t kRows = 6, kCols = 3;
  std::vector<float> q = RandomValues(kRows * kCols, 2);
  for (size_t i = 0; i < kRows; ++i) q[i * kCols + 1] = 0.0f;
  OrthonormalizeColumns(kRows, kCols, absl::MakeSpan(q));
  double n0 = 0, n1 = 0, n2 = 0, d02 = 0;
  for (size_t i = 0; i < kRows; ++i) {
    n0 += double{q[i * kCols]} * q[i * kCols];
    n1 += double{q[i * kCols + 1]} * q[i * kCols + 1];
    n2 += double{q[i * kCols + 2]} * q[i * kCols + 2];
    d02 += double{q[i * kCols]} * q[i * kCols + 2];
  }
  EXPECT_NEAR(n0, 1.0, 1e-6);
  EXPECT_EQ(n1, 0.0);
  EXPECT_NEAR(n2, 1.0, 1e-6);
  EXPECT_NEAR(d02, 0.0, 1e-6);

  std::vector<float> zeros(kRows * kCols, 0.0f);
  OrthonormalizeColumns(kRows, kCols, absl::MakeSpan(zeros));
  for (float v : zeros) EXPECT_EQ(v, 0.0f);
}

TEST(OrthonormalizeColumnsTest, IsDeterministic) {
  std::vector<float> a = RandomValues(40 * 3, 3), b = a;
  OrthonormalizeColumns(40, 3, absl::MakeSpan(a));
  OrthonormalizeColumns(40, 3, absl::MakeSpan(b));
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

// ---------------------------------------------------------------------------------------
// Sizes and the exchange

TEST(PowerSgdCodecTest, MessageSizesAreExact) {
  // A 20 x 30 tensor chunk, rank 3: round 0 is 16 + 4*20*3, round 1 is 16 + 4*30*3.
  Job job(Matrix(20, 30), 3, 2);
  EXPECT_EQ(job.server().RoundValues(0), 60u);
  EXPECT_EQ(job.server().RoundValues(1), 90u);
  EXPECT_EQ(job.server().RoundPayloadBytes(0), 256u);
  EXPECT_EQ(job.server().RoundPayloadBytes(1), 376u);
  EXPECT_EQ(job.server().MaxPayloadBytes(), 376u);
  EXPECT_EQ(job.server().rounds(), 2);
  const Job::Step step = job.Run(0, {RandomValues(600, 4), RandomValues(600, 5)});
  for (int w = 0; w < 2; ++w) {
    EXPECT_EQ(step.round0[w].size(), 256u);
    EXPECT_EQ(step.round1[w].size(), 376u);
  }
  EXPECT_EQ(step.answer0.size(), 256u);
  EXPECT_EQ(step.answer1.size(), 376u);
  // The header says powersgd, version 1, 600 values; then the round.
  EXPECT_TRUE(ParseHeader(step.round1[0], CodecId::kPowerSgd, 1, 600).ok());
  uint32_t round;
  std::memcpy(&round, step.round1[0].data() + kHeaderBytes, 4);
  EXPECT_EQ(round, 1u);

  // A partial-row chunk pays for its padded rows: 700 values from offset 50 of rows of 100
  // are 8 rows (lead 50).
  auto padded = NewCodec({.elements = 700, .offset = 250, .row_length = 100}, 2);
  EXPECT_EQ(padded->view().rows, 8u);
  EXPECT_EQ(padded->RoundPayloadBytes(0), 16u + 4 * 8 * 2);
  EXPECT_EQ(padded->RoundPayloadBytes(1), 16u + 4 * 100 * 2);
}

TEST(PowerSgdCodecTest, RankRMatricesAreExactAfterOneStep) {
  // Both workers' gradients share a column space of dimension 2, so their mean has rank 2.
  constexpr size_t kRows = 20, kCols = 30, kRank = 2;
  const std::vector<float> a = RandomValues(kRows * kRank, 10);
  const std::vector<float> m0 = Product(a, RandomValues(kCols * kRank, 11), kRows, kCols, kRank);
  const std::vector<float> m1 = Product(a, RandomValues(kCols * kRank, 12), kRows, kCols, kRank);
  std::vector<float> mean(m0.size());
  for (size_t i = 0; i < mean.size(); ++i) mean[i] = (m0[i] + m1[i]) / 2;

  Job job(Matrix(kRows, kCols), kRank, 2);
  const Job::Step step = job.Run(0, {m0, m1});
  EXPECT_LT(Distance(step.aggregate, mean), 1e-5 * Norm(mean));
  // Each worker's own contribution is exact too, and the aggregate is their mean.
  EXPECT_LT(Distance(step.sent[0], m0), 1e-5 * Norm(m0));
  EXPECT_LT(Distance(step.sent[1], m1), 1e-5 * Norm(m1));
  for (size_t i = 0; i < mean.size(); ++i) {
    EXPECT_NEAR(step.aggregate[i], (step.sent[0][i] + step.sent[1][i]) / 2, 1e-5);
  }
  // Both workers warm-start from the same Q, with unit columns.
  const auto q0 = job.worker(0).warm_start();
  const auto q1 = job.worker(1).warm_start();
  ASSERT_EQ(q0.size(), kCols * kRank);
  EXPECT_EQ(std::memcmp(q0.data(), q1.data(), q0.size() * sizeof(float)), 0);
  for (size_t j = 0; j < kRank; ++j) {
    double norm = 0;
    for (size_t k = 0; k < kCols; ++k) norm += double{q0[k * kRank + j]} * q0[k * kRank + j];
    EXPECT_NEAR(norm, 1.0, 1e-6);
  }
}

TEST(PowerSgdCodecTest, VectorAndPartialRowChunksAreCroppedFromThePaddedView) {
  // A rank-1 vector view is exact as well: 12 values, 3 x 4, x[t] = u[t / 4] * v[t % 4].
  std::vector<float> x(12);
  const float u[3] = {1, -2, 0.5f}, v[4] = {3, 1, -1, 2};
  for (size_t t = 0; t < 12; ++t) x[t] = u[t / 4] * v[t % 4];
  Job vector_job({.elements = 12}, 1, 1);
  Job::Step step = vector_job.Run(0, {x});
  for (size_t t = 0; t < 12; ++t) EXPECT_NEAR(step.aggregate[t], x[t], 1e-5) << t;

  // 15 values from offset 3 of rows of 6: rows 0..2 of the view, with 3 leading and 0
  // trailing zeros. The tensor has rank 1; zeroing part of the first row makes the padded
  // view rank 2, so rank 2 is exact and any mix-up of positions would show.
  std::vector<float> tensor(4 * 6);
  for (size_t i = 0; i < 4; ++i) {
    for (size_t k = 0; k < 6; ++k) tensor[i * 6 + k] = (i + 1.0f) * (k - 2.5f);
  }
  const std::vector<float> chunk(tensor.begin() + 3, tensor.begin() + 18);
  Job slice_job({.elements = 15, .offset = 3, .row_length = 6}, 2, 1);
  EXPECT_EQ(slice_job.server().view().rows, 3u);
  EXPECT_EQ(slice_job.server().view().lead, 3u);
  step = slice_job.Run(0, {chunk});
  ASSERT_EQ(step.aggregate.size(), 15u);
  for (size_t t = 0; t < 15; ++t) EXPECT_NEAR(step.aggregate[t], chunk[t], 1e-5) << t;
}

TEST(PowerSgdCodecTest, WarmStartReducesTheErrorOnAFixedMatrix) {
  // M = U diag(s) Vᵀ with orthonormal U, V and singular values 8, 4, 1, 0.5, 0.25, 0.1: the
  // best rank-2 error is sqrt(1 + 0.25 + 0.0625 + 0.01). Each step is one power iteration
  // from the last Q, so the error falls towards it.
  constexpr size_t kRows = 24, kCols = 16, kRank = 2, kSingular = 6;
  const double s[kSingular] = {8, 4, 1, 0.5, 0.25, 0.1};
  std::vector<float> u = RandomValues(kRows * kSingular, 20);
  std::vector<float> v = RandomValues(kCols * kSingular, 21);
  OrthonormalizeColumns(kRows, kSingular, absl::MakeSpan(u));
  OrthonormalizeColumns(kCols, kSingular, absl::MakeSpan(v));
  for (size_t i = 0; i < kRows; ++i) {
    for (size_t j = 0; j < kSingular; ++j) u[i * kSingular + j] *= s[j];
  }
  const std::vector<float> m = Product(u, v, kRows, kCols, kSingular);
  const double best = std::sqrt(1 + 0.25 + 0.0625 + 0.01);

  Job job(Matrix(kRows, kCols), kRank, 1);
  std::vector<double> errors;
  for (uint64_t step = 0; step < 8; ++step) errors.push_back(Distance(job.Run(step, {m}).aggregate, m));
  for (size_t i = 1; i < errors.size(); ++i) EXPECT_LE(errors[i], errors[i - 1] * (1 + 1e-6)) << i;
  EXPECT_GT(errors[0], 1.01 * best);  // A random Q does not find the top subspace at once.
  EXPECT_LT(errors.back(), 1.001 * best);
  EXPECT_GE(errors.back(), best * (1 - 1e-4));
}

TEST(PowerSgdCodecTest, EveryWorkerDrawsTheSameFirstQ) {
  // Different worker ids in the push key, same shared draw; another chunk draws another Q.
  auto a = NewCodec(Matrix(8, 8), 2), b = NewCodec(Matrix(8, 8), 2);
  const std::vector<float> x = RandomValues(64, 30);
  std::string pa, pb;
  ASSERT_TRUE(a->EncodeRound(0, x, "", WorkerKey(0, 0), &pa).ok());
  ASSERT_TRUE(b->EncodeRound(0, x, "", WorkerKey(0, 1), &pb).ok());
  EXPECT_EQ(pa, pb);
  auto other = NewCodec(Matrix(8, 8), 2);
  std::string po;
  RandomKey key = WorkerKey(0, 0);
  key.chunk = kChunk + 1;
  ASSERT_TRUE(other->EncodeRound(0, x, "", key, &po).ok());
  EXPECT_NE(pa, po);
}

TEST(PowerSgdCodecTest, AZeroGradientGivesZerosAndQIsDrawnAgain) {
  Job job(Matrix(6, 5), 2, 2);
  const std::vector<float> zeros(30, 0.0f);
  Job::Step step = job.Run(0, {zeros, zeros});
  for (float g : step.aggregate) EXPECT_EQ(g, 0.0f);
  for (float q : job.worker(0).warm_start()) EXPECT_EQ(q, 0.0f);
  // The next step draws Q afresh (from step 1's stream) and is exact on a rank-2 input.
  const std::vector<float> x = Product(RandomValues(12, 40), RandomValues(10, 41), 6, 5, 2);
  step = job.Run(1, {x, x});
  EXPECT_LT(Distance(step.aggregate, x), 1e-5 * Norm(x));
}

// ---------------------------------------------------------------------------------------
// Error feedback

config::ErrorFeedback Residual() {
  config::ErrorFeedback spec;
  spec.set_kind(config::ErrorFeedback::RESIDUAL);
  return spec;
}

TEST(PowerSgdErrorFeedbackTest, OneWorkerKeepsExactlyWhatTheAggregateMissed) {
  // With one worker the aggregate is its own P̂ Q_iᵀ bit for bit, so the residual is
  // c - aggregate in one fp32 subtraction, c = gradient + old residual.
  constexpr size_t kRows = 12, kCols = 10;
  auto server = NewCodec(Matrix(kRows, kCols), 2);
  auto worker = NewCodec(Matrix(kRows, kCols), 2);
  auto memory = *ErrorFeedback::Create(Residual(), kRows * kCols);
  for (uint64_t s = 0; s < 4; ++s) {
    const std::vector<float> g = RandomValues(kRows * kCols, 50 + s);
    const std::vector<float> old(memory->residual().begin(), memory->residual().end());
    std::string payload, answer;
    ASSERT_TRUE(memory->BeginRounds(*worker, g, WorkerKey(s, 0), &payload).ok());
    std::vector<float> sum0(server->RoundValues(0), 0.0f);
    ASSERT_TRUE(server->DecodeAddRound(0, payload, SharedKey(s), absl::MakeSpan(sum0)).ok());
    server->FinishRound(0, 1, absl::MakeSpan(sum0), SharedKey(s), &answer, {});
    ASSERT_TRUE(memory->NextRound(*worker, 1, answer, WorkerKey(s, 0), &payload).ok());
    std::vector<float> sum1(server->RoundValues(1), 0.0f);
    ASSERT_TRUE(server->DecodeAddRound(1, payload, SharedKey(s), absl::MakeSpan(sum1)).ok());
    std::vector<float> aggregate(kRows * kCols);
    server->FinishRound(1, 1, absl::MakeSpan(sum1), SharedKey(s), &answer,
                        absl::MakeSpan(aggregate));
    // Nothing changes before the last answer is in.
    EXPECT_EQ(std::memcmp(memory->residual().data(), old.data(), old.size() * 4), 0);
    ASSERT_TRUE(memory->FinishRounds(*worker, answer, WorkerKey(s, 0)).ok());
    for (size_t i = 0; i < g.size(); ++i) {
      const float c = g[i] + old[i];
      ASSERT_EQ(memory->residual()[i], c - aggregate[i]) << "step " << s << " value " << i;
    }
  }
}

TEST(PowerSgdErrorFeedbackTest, SummedOverWorkersTheMemoryHoldsWhatTheMeanMissed) {
  // Σ_i (g_i + old residual_i) = W G + Σ_i new residual_i, to fp32 rounding.
  constexpr size_t kRows = 16, kCols = 9, kWorkers = 3;
  auto server = NewCodec(Matrix(kRows, kCols), 2);
  std::vector<std::unique_ptr<PowerSgdCodec>> workers;
  std::vector<std::unique_ptr<ErrorFeedback>> memories;
  for (size_t w = 0; w < kWorkers; ++w) {
    workers.push_back(NewCodec(Matrix(kRows, kCols), 2));
    memories.push_back(*ErrorFeedback::Create(Residual(), kRows * kCols));
  }
  for (uint64_t s = 0; s < 3; ++s) {
    std::vector<double> lhs(kRows * kCols, 0.0);
    std::vector<std::string> payloads(kWorkers);
    std::vector<float> sum0(server->RoundValues(0), 0.0f);
    for (size_t w = 0; w < kWorkers; ++w) {
      const std::vector<float> g = RandomValues(kRows * kCols, 100 + 10 * s + w);
      for (size_t i = 0; i < g.size(); ++i) lhs[i] += double{g[i]} + memories[w]->residual()[i];
      ASSERT_TRUE(memories[w]->BeginRounds(*workers[w], g, WorkerKey(s, w), &payloads[w]).ok());
      ASSERT_TRUE(server->DecodeAddRound(0, payloads[w], SharedKey(s), absl::MakeSpan(sum0)).ok());
    }
    std::string answer;
    server->FinishRound(0, kWorkers, absl::MakeSpan(sum0), SharedKey(s), &answer, {});
    std::vector<float> sum1(server->RoundValues(1), 0.0f);
    for (size_t w = 0; w < kWorkers; ++w) {
      ASSERT_TRUE(memories[w]->NextRound(*workers[w], 1, answer, WorkerKey(s, w), &payloads[w]).ok());
      ASSERT_TRUE(server->DecodeAddRound(1, payloads[w], SharedKey(s), absl::MakeSpan(sum1)).ok());
    }
    std::vector<float> aggregate(kRows * kCols);
    server->FinishRound(1, kWorkers, absl::MakeSpan(sum1), SharedKey(s), &answer,
                        absl::MakeSpan(aggregate));
    std::vector<double> rhs(kRows * kCols, 0.0);
    for (size_t w = 0; w < kWorkers; ++w) {
      ASSERT_TRUE(memories[w]->FinishRounds(*workers[w], answer, WorkerKey(s, w)).ok());
      for (size_t i = 0; i < rhs.size(); ++i) rhs[i] += memories[w]->residual()[i];
    }
    for (size_t i = 0; i < rhs.size(); ++i) {
      ASSERT_NEAR(lhs[i], kWorkers * double{aggregate[i]} + rhs[i], 1e-5) << s << " " << i;
    }
  }
}

// A step pushed again from its first round (a restarted server lost it): round 0's payload is
// the same bytes, mid-step or after the step's last answer, and a second FinishRounds() of
// the same answer leaves the residual as the first did.
TEST(PowerSgdErrorFeedbackTest, ReplayRoundsEncodesRoundZeroAgainAndFinishingTwiceIsOnce) {
  constexpr size_t kRows = 12, kCols = 10;
  for (const config::ErrorFeedback::Kind kind :
       {config::ErrorFeedback::RESIDUAL, config::ErrorFeedback::NONE}) {
    auto server = NewCodec(Matrix(kRows, kCols), 2);
    auto worker = NewCodec(Matrix(kRows, kCols), 2);
    config::ErrorFeedback spec;
    spec.set_kind(kind);
    auto memory = *ErrorFeedback::Create(spec, kRows * kCols);
    std::string payload, replayed, answer;
    EXPECT_EQ(memory->ReplayRounds(*worker, WorkerKey(0, 0), &replayed).code(),
              absl::StatusCode::kFailedPrecondition);
    const std::vector<float> g = RandomValues(kRows * kCols, 70);
    ASSERT_TRUE(memory->BeginRounds(*worker, g, WorkerKey(0, 0), &payload).ok());
    const std::string round0 = payload;
    // Mid-step: after round 1 was encoded.
    std::vector<float> sum0(server->RoundValues(0), 0.0f);
    ASSERT_TRUE(server->DecodeAddRound(0, payload, SharedKey(0), absl::MakeSpan(sum0)).ok());
    server->FinishRound(0, 1, absl::MakeSpan(sum0), SharedKey(0), &answer, {});
    const std::string answer0 = answer;
    ASSERT_TRUE(memory->NextRound(*worker, 1, answer0, WorkerKey(0, 0), &payload).ok());
    const std::string round1 = payload;
    ASSERT_TRUE(memory->ReplayRounds(*worker, WorkerKey(0, 0), &replayed).ok());
    EXPECT_EQ(replayed, round0);
    ASSERT_TRUE(memory->NextRound(*worker, 1, answer0, WorkerKey(0, 0), &payload).ok());
    EXPECT_EQ(payload, round1);
    std::vector<float> sum1(server->RoundValues(1), 0.0f);
    ASSERT_TRUE(server->DecodeAddRound(1, payload, SharedKey(0), absl::MakeSpan(sum1)).ok());
    std::vector<float> aggregate(kRows * kCols);
    server->FinishRound(1, 1, absl::MakeSpan(sum1), SharedKey(0), &answer,
                        absl::MakeSpan(aggregate));
    ASSERT_TRUE(memory->FinishRounds(*worker, answer, WorkerKey(0, 0)).ok());
    const std::vector<float> residual(memory->residual().begin(), memory->residual().end());
    // After the step's last answer: the rounds again, the same answer again.
    ASSERT_TRUE(memory->ReplayRounds(*worker, WorkerKey(0, 0), &replayed).ok());
    ASSERT_TRUE(memory->NextRound(*worker, 1, answer0, WorkerKey(0, 0), &payload).ok());
    ASSERT_TRUE(memory->FinishRounds(*worker, answer, WorkerKey(0, 0)).ok());
    EXPECT_EQ(std::vector<float>(memory->residual().begin(), memory->residual().end()), residual);
  }
}

TEST(PowerSgdErrorFeedbackTest, SingleAndMultiRoundApisRefuseEachOther) {
  auto powersgd = NewCodec(Matrix(4, 4), 1);
  auto memory = *ErrorFeedback::Create(Residual(), 16);
  std::string payload;
  const std::vector<float> x(16, 1.0f);
  absl::Status status = memory->Compress(*powersgd, x, WorkerKey(0, 0), &payload);
  EXPECT_EQ(status, absl::FailedPreconditionError(
                        "codec powersgd takes 2 rounds per step: use BeginRounds()"));
  config::Codec none;
  none.set_name("none");
  auto single = *CreateCodec(none, 16);
  status = memory->BeginRounds(*single, x, WorkerKey(0, 0), &payload);
  EXPECT_EQ(status, absl::FailedPreconditionError(
                        "codec none takes one round per step: use Compress()"));
  EXPECT_EQ(single->rounds(), 1);
  EXPECT_EQ(single->EncodeRound(0, x, "", {}, &payload).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(powersgd->Encode(x, {}, &payload).code(), absl::StatusCode::kFailedPrecondition);
  std::vector<float> out(16);
  EXPECT_EQ(powersgd->Decode("", {}, absl::MakeSpan(out)).code(),
            absl::StatusCode::kFailedPrecondition);
}

// ---------------------------------------------------------------------------------------
// Untrusted messages and misuse

TEST(PowerSgdCodecTest, MalformedPayloadsAreRejectedAndLeaveTheAccumulatorAlone) {
  Job job(Matrix(6, 8), 2, 1);
  const Job::Step step = job.Run(0, {RandomValues(48, 60)});
  const std::string good0 = step.round0[0];
  const std::string good1 = step.round1[0];
  auto with_byte = [](std::string s, size_t at, char value) {
    s[at] = value;
    return s;
  };
  struct Case {
    const char* what;
    int round;
    std::string payload;
    const char* message;
  };
  const Case cases[] = {
      {"empty", 0, "", "powersgd payload: payload truncated"},
      {"header only", 0, good0.substr(0, kHeaderBytes), "-byte body, expected 52"},
      {"truncated", 0, good0.substr(0, good0.size() - 1), "has a 51-byte body, expected 52"},
      {"one byte too many", 1, good1 + "x", "has a 69-byte body, expected 68"},
      {"round 1 payload for round 0", 0, good1, "expected 52"},
      {"wrong round tag", 0, with_byte(good0, kHeaderBytes, 1),
       "payload is for round 1, expected round 0"},
      {"wrong codec", 0, with_byte(good0, 2, 0), "payload is for codec 0 (none)"},
      {"wrong version", 0, with_byte(good0, 3, 2), "unsupported powersgd payload version 2"},
      {"wrong element count", 0, with_byte(good0, 4, 49), "element count 49"},
      {"bad magic", 0, with_byte(good0, 0, 'X'), "bad payload magic"},
  };
  for (const Case& c : cases) {
    std::vector<float> sum(job.server().RoundValues(c.round), 0.5f);
    const absl::Status status =
        job.server().DecodeAddRound(c.round, c.payload, SharedKey(0), absl::MakeSpan(sum));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.message)) << c.what << ": " << status;
    for (float v : sum) ASSERT_EQ(v, 0.5f) << c.what;
  }
  std::vector<float> sum(job.server().RoundValues(0), 0.0f);
  EXPECT_EQ(job.server().DecodeAddRound(2, good0, SharedKey(0), absl::MakeSpan(sum)),
            absl::InvalidArgumentError("powersgd has rounds 0 and 1, got round 2"));
}

TEST(PowerSgdCodecTest, BadAnswersAreRejectedAndTheWorkerCanGoOn) {
  // A reference run, and a worker that first gets garbage at each point.
  Job reference(Matrix(6, 8), 2, 1);
  const std::vector<float> x = RandomValues(48, 70);
  const Job::Step expected = reference.Run(0, {x});

  auto worker = NewCodec(Matrix(6, 8), 2);
  std::string payload;
  ASSERT_TRUE(worker->EncodeRound(0, x, "", WorkerKey(0, 0), &payload).ok());
  EXPECT_EQ(payload, expected.round0[0]);
  // Round 1 needs the answer to round 0, not to round 1, and a whole one.
  absl::Status status = worker->EncodeRound(1, {}, expected.answer1, WorkerKey(0, 0), &payload);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("powersgd answer of round 0"));
  status = worker->EncodeRound(1, {}, expected.answer0.substr(1), WorkerKey(0, 0), &payload);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(worker->EncodeRound(1, {}, expected.answer0, WorkerKey(0, 0), &payload).ok());
  EXPECT_EQ(payload, expected.round1[0]);
  // The aggregate must be a round-1 message.
  std::vector<float> sent(48, -1.0f);
  const std::vector<float> first_q(worker->warm_start().begin(), worker->warm_start().end());
  status = worker->FinishRounds(expected.answer0, WorkerKey(0, 0), absl::MakeSpan(sent));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("powersgd aggregate"));
  EXPECT_EQ(std::vector<float>(worker->warm_start().begin(), worker->warm_start().end()), first_q);
  for (float v : sent) ASSERT_EQ(v, -1.0f);
  ASSERT_TRUE(worker->FinishRounds(expected.answer1, WorkerKey(0, 0), absl::MakeSpan(sent)).ok());
  EXPECT_EQ(std::memcmp(sent.data(), expected.sent[0].data(), sent.size() * 4), 0);
  ASSERT_EQ(worker->warm_start().size(), 16u);
  EXPECT_EQ(std::memcmp(worker->warm_start().data(), reference.worker(0).warm_start().data(),
                        16 * sizeof(float)),
            0);
}

TEST(PowerSgdCodecTest, RoundsMustComeInOrder) {
  auto worker = NewCodec(Matrix(4, 4), 2);
  std::string payload;
  std::vector<float> sent(16);
  EXPECT_EQ(worker->EncodeRound(1, {}, "", WorkerKey(0, 0), &payload),
            absl::FailedPreconditionError(
                "powersgd: EncodeRound(1) out of order; the codec expects EncodeRound(0)"));
  EXPECT_EQ(worker->FinishRounds("", WorkerKey(0, 0), absl::MakeSpan(sent)),
            absl::FailedPreconditionError("powersgd: FinishRounds() before the last round; the "
                                          "codec expects EncodeRound(0)"));
  ASSERT_TRUE(worker->EncodeRound(0, std::vector<float>(16, 1.0f), "", WorkerKey(0, 0), &payload).ok());
  EXPECT_EQ(worker->EncodeRound(2, {}, "", WorkerKey(0, 0), &payload).code(),
            absl::StatusCode::kFailedPrecondition);
  // Round 0 may restart the step.
  EXPECT_TRUE(worker->EncodeRound(0, std::vector<float>(16, 2.0f), "", WorkerKey(0, 0), &payload).ok());
}

}  // namespace
}  // namespace tamp::compress

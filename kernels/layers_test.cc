// GPU layers (kernels/layers.h) against their CPU twins (kernels/layers_ref.h, optim/sgd.cc).
// Tests that need a device skip without one ("no CUDA device: skipping (...)"); argument
// checks, which return before touching the device, run everywhere.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda_testing.h"
#include "kernels/device.h"
#include "kernels/layers_ref.h"
#if TAMP_HAVE_CUDA
#include "kernels/layers.h"
#endif
#include "optim/optimizer.h"
#include "proto/config.pb.h"

namespace tamp::kernels {
namespace {

#if TAMP_HAVE_CUDA

using testing::Allocate;
using testing::CompareBitwise;
using testing::CompareClose;
using testing::Download;
using testing::Synchronize;
using testing::Upload;

std::vector<float> RandomVector(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// GEMM tolerance: inputs in [-1, 1], K <= 1024 terms per output; fp32 summation order
// differs between cuBLAS and OpenBLAS.
constexpr double kGemmAbs = 1e-4;
constexpr double kGemmRel = 1e-4;

struct Shape {
  int batch, in, out;
};

class LinearTest : public ::testing::TestWithParam<Shape> {};

TEST_P(LinearTest, ForwardMatchesCpu) {
  TAMP_SKIP_WITHOUT_CUDA();
  const auto [batch, in, out] = GetParam();
  const auto x = RandomVector(size_t{1} * batch * in, 1);
  const auto w = RandomVector(size_t{1} * out * in, 2);
  const auto b = RandomVector(out, 3);
  std::vector<float> y_cpu(size_t{1} * batch * out);
  ref::LinearForward(x.data(), w.data(), b.data(), y_cpu.data(), batch, in, out);

  auto cublas = CublasHandle::Create();
  ASSERT_TRUE(cublas.ok()) << cublas.status();
  DeviceArray<float> dx;
  DeviceArray<float> dw;
  DeviceArray<float> db;
  ASSERT_TRUE(Upload<float>(x, &dx));
  ASSERT_TRUE(Upload<float>(w, &dw));
  ASSERT_TRUE(Upload<float>(b, &db));
  DeviceArray<float> dy;
  ASSERT_TRUE(Allocate<float>(y_cpu.size(), &dy));
  ASSERT_TRUE(LinearForward(*cublas, dx.data(), dw.data(), db.data(), dy.data(), batch, in, out,
                            nullptr)
                  .ok());
  ASSERT_TRUE(Synchronize());
  EXPECT_TRUE(CompareClose("y", dy, y_cpu, kGemmAbs, kGemmRel));
}

TEST_P(LinearTest, BackwardMatchesCpu) {
  TAMP_SKIP_WITHOUT_CUDA();
  const auto [batch, in, out] = GetParam();
  const auto x = RandomVector(size_t{1} * batch * in, 4);
  const auto w = RandomVector(size_t{1} * out * in, 5);
  const auto grad_y = RandomVector(size_t{1} * batch * out, 6);
  const auto dw_start = RandomVector(size_t{1} * out * in, 7);
  const auto db_start = RandomVector(out, 8);

  std::vector<float> dx_cpu(size_t{1} * batch * in);
  ref::LinearBackwardInput(grad_y.data(), w.data(), dx_cpu.data(), batch, in, out);

  auto cublas = CublasHandle::Create();
  ASSERT_TRUE(cublas.ok()) << cublas.status();
  DeviceArray<float> d_x;
  DeviceArray<float> d_w;
  DeviceArray<float> d_grad_y;
  ASSERT_TRUE(Upload<float>(x, &d_x));
  ASSERT_TRUE(Upload<float>(w, &d_w));
  ASSERT_TRUE(Upload<float>(grad_y, &d_grad_y));
  DeviceArray<float> d_dx;
  ASSERT_TRUE(Allocate<float>(dx_cpu.size(), &d_dx));
  ASSERT_TRUE(LinearBackwardInput(*cublas, d_grad_y.data(), d_w.data(), d_dx.data(), batch, in,
                                  out, nullptr)
                  .ok());
  ASSERT_TRUE(Synchronize());
  EXPECT_TRUE(CompareClose("dx", d_dx, dx_cpu, kGemmAbs, kGemmRel));

  for (const bool accumulate : {false, true}) {
    SCOPED_TRACE(accumulate ? "accumulate" : "overwrite");
    std::vector<float> dw_cpu = dw_start, db_cpu = db_start;
    ref::LinearBackwardParams(x.data(), grad_y.data(), dw_cpu.data(), db_cpu.data(), batch, in,
                              out, accumulate);
    DeviceArray<float> d_dw;
    DeviceArray<float> d_db;
    ASSERT_TRUE(Upload<float>(dw_start, &d_dw));
    ASSERT_TRUE(Upload<float>(db_start, &d_db));
    ASSERT_TRUE(LinearBackwardParams(*cublas, d_x.data(), d_grad_y.data(), d_dw.data(),
                                     d_db.data(), batch, in, out, accumulate, nullptr)
                    .ok());
    ASSERT_TRUE(Synchronize());
    EXPECT_TRUE(CompareClose("dW", d_dw, dw_cpu, kGemmAbs, kGemmRel));
    EXPECT_TRUE(CompareClose("db", d_db, db_cpu, 1e-5, 1e-5));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, LinearTest,
                         ::testing::Values(Shape{1, 1, 1}, Shape{3, 5, 7}, Shape{64, 784, 128},
                                           Shape{17, 128, 10}, Shape{256, 300, 33}));

TEST(LayersTest, BiasAddAndGradMatchCpu) {
  TAMP_SKIP_WITHOUT_CUDA();
  for (const auto& [rows, cols] : {std::pair{1, 1}, std::pair{7, 33}, std::pair{1000, 129}}) {
    const auto y = RandomVector(size_t{1} * rows * cols, 10);
    const auto b = RandomVector(cols, 11);
    std::vector<float> y_cpu = y;
    ref::BiasAdd(y_cpu.data(), b.data(), rows, cols);
    DeviceArray<float> d_y;
    DeviceArray<float> d_b;
    ASSERT_TRUE(Upload<float>(y, &d_y));
    ASSERT_TRUE(Upload<float>(b, &d_b));
    ASSERT_TRUE(BiasAdd(d_y.data(), d_b.data(), rows, cols, nullptr).ok());
    ASSERT_TRUE(Synchronize());
    EXPECT_TRUE(CompareBitwise("y", d_y, y_cpu));  // One add per value.

    std::vector<float> db_cpu(cols);
    ref::BiasGrad(y.data(), db_cpu.data(), rows, cols, false);
    DeviceArray<float> d_db;
    ASSERT_TRUE(Allocate<float>(cols, &d_db));
    DeviceArray<float> d_y0;
    ASSERT_TRUE(Upload<float>(y, &d_y0));
    ASSERT_TRUE(BiasGrad(d_y0.data(), d_db.data(), rows, cols, false, nullptr).ok());
    ASSERT_TRUE(Synchronize());
    EXPECT_TRUE(CompareClose("db", d_db, db_cpu, 1e-5 * rows, 1e-5));
  }
}

TEST(LayersTest, ReluMatchesCpuBitwiseIncludingSpecialValues) {
  TAMP_SKIP_WITHOUT_CUDA();
  auto z = RandomVector(10007, 12, -3.0f, 3.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> specials = {0.0f, -0.0f, nan, -nan, inf, -inf, 1e-45f, -1e-45f};
  std::copy(specials.begin(), specials.end(), z.begin());
  std::vector<float> a_cpu(z.size());
  ref::ReluForward(z.data(), a_cpu.data(), z.size());
  DeviceArray<float> d_z;
  ASSERT_TRUE(Upload<float>(z, &d_z));
  DeviceArray<float> d_a;
  ASSERT_TRUE(Allocate<float>(z.size(), &d_a));
  ASSERT_TRUE(ReluForward(d_z.data(), d_a.data(), z.size(), nullptr).ok());
  ASSERT_TRUE(Synchronize());
  EXPECT_TRUE(CompareBitwise("a", d_a, a_cpu));

  const auto da = RandomVector(z.size(), 13);
  std::vector<float> dz_cpu(z.size());
  ref::ReluBackward(a_cpu.data(), da.data(), dz_cpu.data(), z.size());
  DeviceArray<float> d_da;
  ASSERT_TRUE(Upload<float>(da, &d_da));
  // In place: dz over da.
  ASSERT_TRUE(ReluBackward(d_a.data(), d_da.data(), d_da.data(), z.size(), nullptr).ok());
  ASSERT_TRUE(Synchronize());
  EXPECT_TRUE(CompareBitwise("dz", d_da, dz_cpu));
}

TEST(LayersTest, SoftmaxCrossEntropyMatchesCpu) {
  TAMP_SKIP_WITHOUT_CUDA();
  for (const auto& [batch, classes] :
       {std::pair{1, 1}, std::pair{64, 10}, std::pair{5, 33}, std::pair{3, 1000}}) {
    SCOPED_TRACE(::testing::Message() << batch << " x " << classes);
    // Logits around a large offset: the max subtraction keeps exp() finite.
    auto logits = RandomVector(size_t{1} * batch * classes, 14, -20.0f, 20.0f);
    for (size_t i = 0; i < logits.size(); i += 3) logits[i] += 500.0f;
    std::vector<int32_t> labels(batch);
    for (int i = 0; i < batch; ++i) labels[i] = (i * 7) % classes;
    std::vector<float> losses_cpu(batch), dlogits_cpu(logits.size());
    ref::SoftmaxCrossEntropy(logits.data(), labels.data(), losses_cpu.data(), dlogits_cpu.data(),
                             batch, classes);

    DeviceArray<float> d_logits;
    ASSERT_TRUE(Upload<float>(logits, &d_logits));
    DeviceArray<int32_t> d_labels;
    ASSERT_TRUE(Upload<int32_t>(labels, &d_labels));
    DeviceArray<float> d_losses;
    ASSERT_TRUE(Allocate<float>(batch, &d_losses));
    // In place: the gradient over the logits, as the MLP backward does.
    ASSERT_TRUE(SoftmaxCrossEntropy(d_logits.data(), d_labels.data(), d_losses.data(),
                                    d_logits.data(), batch, classes, nullptr)
                    .ok());
    ASSERT_TRUE(Synchronize());
    EXPECT_TRUE(CompareClose("loss", d_losses, losses_cpu, 1e-4, 1e-5));
    EXPECT_TRUE(CompareClose("dlogits", d_logits, dlogits_cpu, 1e-7, 1e-5));
  }
}

TEST(LayersTest, SoftmaxCrossEntropyBadLabelGivesNaNRow) {
  TAMP_SKIP_WITHOUT_CUDA();
  const std::vector<float> logits = {1, 2, 3, 4, 5, 6};
  const std::vector<int32_t> labels = {2, 3};  // 3 is out of range for 3 classes.
  DeviceArray<float> d_logits;
  ASSERT_TRUE(Upload<float>(logits, &d_logits));
  DeviceArray<int32_t> d_labels;
  ASSERT_TRUE(Upload<int32_t>(labels, &d_labels));
  DeviceArray<float> d_losses;
  ASSERT_TRUE(Allocate<float>(2, &d_losses));
  DeviceArray<float> d_grad;
  ASSERT_TRUE(Allocate<float>(6, &d_grad));
  ASSERT_TRUE(SoftmaxCrossEntropy(d_logits.data(), d_labels.data(), d_losses.data(),
                                  d_grad.data(), 2, 3, nullptr)
                  .ok());
  ASSERT_TRUE(Synchronize());
  std::vector<float> losses, grad;
  ASSERT_TRUE(Download(d_losses, &losses));
  ASSERT_TRUE(Download(d_grad, &grad));
  EXPECT_FALSE(std::isnan(losses[0]));
  EXPECT_TRUE(std::isnan(losses[1]));
  for (int j = 3; j < 6; ++j) EXPECT_TRUE(std::isnan(grad[j])) << j;
}

// The twin is the server's optimizer itself.
TEST(LayersTest, SgdUpdateMatchesOptimizerBitwise) {
  TAMP_SKIP_WITHOUT_CUDA();
  struct Case {
    float momentum, weight_decay;
    bool nesterov;
  };
  for (const Case& c : {Case{0, 0, false}, Case{0.9f, 0, false}, Case{0.9f, 1e-4f, true},
                        Case{0.5f, 0.01f, false}}) {
    SCOPED_TRACE(::testing::Message() << "momentum " << c.momentum << " wd " << c.weight_decay
                                      << " nesterov " << c.nesterov);
    const size_t n = 4099;
    config::Optimizer spec;
    spec.set_name("sgd");
    spec.set_learning_rate(0.1);
    spec.set_momentum(c.momentum);
    spec.set_weight_decay(c.weight_decay);
    spec.set_nesterov(c.nesterov);
    auto cpu = CreateOptimizer(spec, n);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    std::vector<float> w_cpu = RandomVector(n, 20);
    DeviceArray<float> d_w;
    ASSERT_TRUE(Upload<float>(w_cpu, &d_w));
    std::vector<float> zeros(n, 0.0f);
    DeviceArray<float> d_buf;
    ASSERT_TRUE(Upload<float>(zeros, &d_buf));
    const SgdParams params{0.1f, c.momentum, c.weight_decay, c.nesterov};
    for (int step = 0; step < 3; ++step) {
      const auto g = RandomVector(n, 30 + step);
      const float lr = 0.1f / (step + 1);
      (*cpu)->Apply(absl::MakeSpan(w_cpu), g, step, lr);
      DeviceArray<float> d_g;
      ASSERT_TRUE(Upload<float>(g, &d_g));
      SgdParams p = params;
      p.learning_rate = lr;
      ASSERT_TRUE(SgdUpdate(d_w.data(), d_g.data(), d_buf.data(), n, p, nullptr).ok());
      ASSERT_TRUE(Synchronize());
    }
    EXPECT_TRUE(CompareBitwise("w", d_w, w_cpu));
  }
}

#else  // !TAMP_HAVE_CUDA

TEST(LayersTest, BuiltWithoutCuda) { TAMP_SKIP_WITHOUT_CUDA(); }

#endif  // TAMP_HAVE_CUDA

// Argument checks return before any device work, so these run without a GPU too.
#if TAMP_HAVE_CUDA
TEST(LayersArgumentsTest, RejectsBadShapes) {
  float* fake = reinterpret_cast<float*>(16);
  EXPECT_EQ(ReluForward(fake, fake, 0, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReluForward(nullptr, fake, 4, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BiasGrad(fake, fake, 0, 3, false, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SoftmaxCrossEntropy(fake, nullptr, fake, fake, 2, 3, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SgdUpdate(fake, fake, nullptr, 4, SgdParams{0.1f, 0.9f, 0, false}, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}
#endif

}  // namespace
}  // namespace tamp::kernels

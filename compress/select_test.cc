#include "compress/select.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp::compress {
namespace {

using ::testing::ElementsAre;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// |x| as a double with NaN as +inf, independent of MagnitudeKey.
double Magnitude(float x) { return std::isnan(x) ? INFINITY : std::fabs(static_cast<double>(x)); }

// Brute force: stable sort by magnitude, descending (so ties keep index order), keep k,
// sort by index.
std::vector<size_t> ReferenceTopK(const std::vector<float>& x, size_t k) {
  std::vector<size_t> order(x.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return Magnitude(x[a]) > Magnitude(x[b]); });
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

std::vector<size_t> Select(const std::vector<float>& x, size_t k) {
  std::vector<size_t> indices = {12345};  // Must be replaced.
  SelectLargestMagnitudes(x, k, &indices);
  return indices;
}

// The data shapes the tests run: each makes n values from a generator.
std::vector<std::vector<float>> Inputs(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> small(-3, 3);
  std::uniform_int_distribution<int> pick(0, 9);
  std::vector<std::vector<float>> inputs(7, std::vector<float>(n));
  for (size_t i = 0; i < n; ++i) {
    inputs[0][i] = normal(rng);                          // Gradient-like.
    inputs[1][i] = static_cast<float>(small(rng));       // Many ties, +-0.
    inputs[2][i] = 1.25f;                                // All equal.
    inputs[3][i] = pick(rng) == 0 ? normal(rng) : 0.0f;  // Mostly zeros.
    inputs[4][i] = (i % 2 ? -1.0f : 1.0f) * std::ldexp(1.0f, -140 + static_cast<int>(i % 20));
    // Specials among normal values: NaN (either sign), +-inf, -0, the largest float.
    const float specials[] = {
        kNaN, -kNaN, kInf, -kInf, -0.0f, 0.0f, std::numeric_limits<float>::max()};
    inputs[5][i] = pick(rng) < 3 ? specials[pick(rng) % 7] : normal(rng);
    inputs[6][i] = pick(rng) == 0 ? -0.0f : 0.0f;  // Only zeros of both signs.
  }
  return inputs;
}

TEST(MagnitudeKeyTest, OrdersLikeMagnitudeWithNaNAsInfinity) {
  EXPECT_EQ(MagnitudeKey(0.0f), 0u);
  EXPECT_EQ(MagnitudeKey(-0.0f), 0u);
  EXPECT_EQ(MagnitudeKey(kInf), kInfinityKey);
  EXPECT_EQ(MagnitudeKey(-kInf), kInfinityKey);
  EXPECT_EQ(MagnitudeKey(kNaN), kInfinityKey);
  EXPECT_EQ(MagnitudeKey(-kNaN), kInfinityKey);
  EXPECT_EQ(MagnitudeKey(-2.0f), MagnitudeKey(2.0f));
  const float ascending[] = {std::numeric_limits<float>::denorm_min(),
                             1e-38f,
                             1e-10f,
                             0.5f,
                             1.0f,
                             1.0000001f,
                             3e38f,
                             kInf};
  for (size_t i = 1; i < std::size(ascending); ++i) {
    EXPECT_LT(MagnitudeKey(ascending[i - 1]), MagnitudeKey(-ascending[i])) << i;
  }
}

TEST(SelectTest, MatchesBruteForceOnManyShapesAndSizes) {
  std::mt19937 rng(7);
  for (size_t n : {1, 2, 3, 15, 16, 17, 33, 100, 1001, 20000}) {
    const std::vector<std::vector<float>> inputs = Inputs(n, rng);
    for (size_t shape = 0; shape < inputs.size(); ++shape) {
      for (size_t k : {size_t{1}, size_t{2}, n / 100, n / 10, n / 2, n - 1, n}) {
        if (k < 1 || k > n) continue;
        ASSERT_EQ(Select(inputs[shape], k), ReferenceTopK(inputs[shape], k))
            << "n=" << n << " k=" << k << " shape=" << shape;
      }
    }
  }
}

TEST(SelectTest, HugeTopBinTakesThePassesOverTheInput) {
  // The bin of the k-th key holds more than 4k + 65536 entries, so the selection resolves it
  // with histogram passes over the input rather than gathering it.
  std::mt19937 rng(3);
  const size_t n = 100000;
  std::vector<float> x(n, 1.0f);
  std::normal_distribution<float> normal;
  for (int j = 0; j < 500; ++j) x[rng() % n] = 10 * normal(rng);  // A few above, a few below.
  for (int j = 0; j < 300; ++j) x[rng() % n] = 1.0f + 1e-7f * static_cast<float>(j % 5);
  for (size_t k : {1, 10, 400, 1000, 5000}) {
    ASSERT_EQ(Select(x, k), ReferenceTopK(x, k)) << k;
  }
  std::vector<float> zeros(n, 0.0f);
  zeros[77] = -0.0f;
  EXPECT_THAT(Select(zeros, 3), ElementsAre(0, 1, 2));
}

TEST(SelectTest, TiesGoToTheLowestIndicesAndNaNFirst) {
  const std::vector<float> x = {1, -3, 3, 2, 3, -3, 0, kNaN, -kInf};
  EXPECT_THAT(Select(x, 1), ElementsAre(7));
  EXPECT_THAT(Select(x, 2), ElementsAre(7, 8));
  EXPECT_THAT(Select(x, 3), ElementsAre(1, 7, 8));
  EXPECT_THAT(Select(x, 5), ElementsAre(1, 2, 4, 7, 8));
  EXPECT_THAT(Select(x, 7), ElementsAre(1, 2, 3, 4, 5, 7, 8));
  EXPECT_THAT(Select(x, 8), ElementsAre(0, 1, 2, 3, 4, 5, 7, 8));
}

TEST(SelectAtLeastTest, ReportsTooFewTooManyOrTheExactSelection) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  std::vector<float> x(5000);
  for (float& v : x) v = normal(rng);
  std::vector<size_t> indices;
  const uint32_t two = MagnitudeKey(2.0f);
  size_t at_least = 0;
  for (float v : x) at_least += MagnitudeKey(v) >= two;
  ASSERT_GT(at_least, 50u);
  EXPECT_EQ(SelectLargestAtLeast(x, at_least + 1, two, x.size(), &indices), SelectOutcome::kTooFew);
  EXPECT_EQ(SelectLargestAtLeast(x, 10, two, at_least - 1, &indices), SelectOutcome::kTooMany);
  for (size_t k : {size_t{1}, size_t{10}, at_least - 1, at_least}) {
    ASSERT_EQ(SelectLargestAtLeast(x, k, two, at_least, &indices), SelectOutcome::kSelected);
    EXPECT_EQ(indices, ReferenceTopK(x, k)) << k;
  }
  // A floor of 0 gathers everything.
  ASSERT_EQ(SelectLargestAtLeast(x, 100, 0, x.size(), &indices), SelectOutcome::kSelected);
  EXPECT_EQ(indices, ReferenceTopK(x, 100));
}

TEST(KthLargestKeyTest, MatchesSorting) {
  std::mt19937 rng(5);
  for (size_t m : {1, 2, 9, 1000}) {
    std::vector<uint32_t> keys(m);
    for (uint32_t& key : keys)
      key = MagnitudeKey(std::ldexp(static_cast<float>(rng() % 64), static_cast<int>(rng() % 9)));
    std::vector<uint32_t> sorted = keys;
    std::sort(sorted.rbegin(), sorted.rend());
    for (size_t r = 1; r <= m; r += 1 + m / 7) {
      EXPECT_EQ(KthLargestKey(keys, r), sorted[r - 1]) << "m=" << m << " r=" << r;
    }
  }
}

TEST(ForEachKeyAtLeastTest, VisitsExactlyTheQualifyingEntriesInOrder) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal;
  for (size_t n : {0, 1, 15, 16, 17, 47, 1000}) {
    std::vector<float> x(n);
    for (float& v : x) v = normal(rng);
    if (n > 5) {
      x[1] = kNaN;
      x[3] = -kInf;
      x[5] = -0.0f;
    }
    for (float floor : {0.0f, 0.5f, 1.5f, kInf}) {
      const uint32_t min_key = MagnitudeKey(floor);
      std::vector<size_t> expected, visited;
      for (size_t i = 0; i < n; ++i) {
        if (Magnitude(x[i]) >= floor) expected.push_back(i);
      }
      EXPECT_TRUE(ForEachKeyAtLeast(x, min_key, [&](size_t i) {
        visited.push_back(i);
        return true;
      }));
      EXPECT_EQ(visited, expected) << "n=" << n << " floor=" << floor;
      // Stopping early.
      if (expected.size() >= 2) {
        visited.clear();
        EXPECT_FALSE(ForEachKeyAtLeast(x, min_key, [&](size_t i) {
          visited.push_back(i);
          return visited.size() < 2;
        }));
        EXPECT_EQ(visited.size(), 2u);
      }
    }
  }
}

TEST(KeyMasksTest, EveryKernelGivesTheSameMasks) {
  using namespace select_internal;
  std::mt19937 rng(13);
  std::normal_distribution<float> normal;
  std::vector<float> x(kScanTile);
  for (float& v : x) v = normal(rng);
  for (size_t i = 0; i < x.size(); i += 37) x[i] = (i % 2 ? kNaN : -kInf);
  x[3] = -0.0f;
  x[4] = std::numeric_limits<float>::denorm_min();
  for (size_t n :
       {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{1000}, kScanTile}) {
    for (float floor : {0.0f, std::numeric_limits<float>::denorm_min(), 1.0f, kInf}) {
      std::vector<uint64_t> expected(kScanTile / 64, ~uint64_t{0});
      KeyMasksWith(ScanKernel::kPortable, x.data(), n, MagnitudeKey(floor), expected.data());
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(expected[i / 64] >> (i % 64) & 1, Magnitude(x[i]) >= floor ? 1u : 0u) << i;
      }
      if (n % 64 != 0) {
        EXPECT_EQ(expected[n / 64] >> (n % 64), 0u);  // Padding bits clear.
      }
      for (ScanKernel kernel : {ScanKernel::kSse2, ScanKernel::kAvx2, ScanKernel::kAvx512}) {
        if (!ScanKernelSupported(kernel)) continue;
        std::vector<uint64_t> masks(kScanTile / 64, ~uint64_t{0});
        KeyMasksWith(kernel, x.data(), n, MagnitudeKey(floor), masks.data());
        for (size_t w = 0; w < (n + 63) / 64; ++w) {
          ASSERT_EQ(masks[w], expected[w])
              << "kernel " << static_cast<int>(kernel) << " n=" << n << " word " << w;
        }
      }
    }
  }
}

}  // namespace
}  // namespace tamp::compress

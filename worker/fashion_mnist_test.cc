#include "worker/fashion_mnist.h"

#include <sys/stat.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/idx_test_util.h"

namespace tamp {
namespace {

using ::tamp::testing::IdxBytes;
using ::tamp::testing::TestDir;
using ::tamp::testing::WriteGzFile;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int kPixels = 28 * 28;

// Image i has every pixel equal to i + 1; labels are given.
void WriteSplit(const std::string& dir, const std::string& prefix, uint32_t n,
                const std::vector<uint8_t>& labels, uint32_t rows = 28, uint32_t cols = 28) {
  std::vector<uint8_t> images;
  for (uint32_t i = 0; i < n; ++i) images.insert(images.end(), rows * cols, i + 1);
  WriteGzFile(dir + prefix + "-images-idx3-ubyte.gz", IdxBytes({n, rows, cols}, images));
  WriteGzFile(dir + prefix + "-labels-idx1-ubyte.gz",
              IdxBytes({static_cast<uint32_t>(labels.size())}, labels));
}

TEST(FashionMnistTest, LoadsBothSplits) {
  const std::string dir = TestDir();
  WriteSplit(dir, "train", 3, {7, 0, 9});
  WriteSplit(dir, "t10k", 2, {4, 5});

  const auto train = LoadFashionMnist(dir, Split::kTrain, 0);
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(train->size, 3);
  EXPECT_EQ(train->rows, 28);
  EXPECT_EQ(train->cols, 28);
  ASSERT_EQ(train->images.size(), 3 * kPixels);
  EXPECT_EQ(train->images[0], 1);
  EXPECT_EQ(train->images[2 * kPixels + 27], 3);
  EXPECT_THAT(train->labels, ElementsAre(7, 0, 9));

  const auto test = LoadFashionMnist(dir, Split::kTest, 0);
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ(test->size, 2);
  EXPECT_THAT(test->labels, ElementsAre(4, 5));
}

TEST(FashionMnistTest, LimitKeepsTheFirstExamples) {
  const std::string dir = TestDir();
  WriteSplit(dir, "train", 3, {7, 0, 9});

  const auto two = LoadFashionMnist(dir, Split::kTrain, 2);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->size, 2);
  EXPECT_EQ(two->images.size(), 2 * kPixels);
  EXPECT_EQ(two->images.back(), 2);
  EXPECT_THAT(two->labels, ElementsAre(7, 0));

  const auto more_than_all = LoadFashionMnist(dir, Split::kTrain, 10);
  ASSERT_TRUE(more_than_all.ok()) << more_than_all.status();
  EXPECT_EQ(more_than_all->size, 3);
}

TEST(FashionMnistTest, MissingDirectoryNamesTheImagesFile) {
  const auto result = LoadFashionMnist(TestDir() + "absent", Split::kTrain, 0);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(result.status().message(), HasSubstr("absent/train-images-idx3-ubyte.gz"));
}

TEST(FashionMnistTest, WrongImageShape) {
  const std::string dir = TestDir();
  WriteSplit(dir, "train", 3, {7, 0, 9}, 28, 27);
  const auto result = LoadFashionMnist(dir, Split::kTrain, 0);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(),
              HasSubstr("train-images-idx3-ubyte.gz: expected images of shape N x 28 x 28, "
                        "file has 3 x 28 x 27"));
}

TEST(FashionMnistTest, LabelCountMismatch) {
  const std::string dir = TestDir();
  WriteSplit(dir, "train", 3, {7, 0, 9, 1});
  const auto result = LoadFashionMnist(dir, Split::kTrain, 0);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(),
              HasSubstr("train-labels-idx1-ubyte.gz: expected 3 labels"));
  EXPECT_THAT(result.status().message(), HasSubstr("file has shape 4"));
}

TEST(FashionMnistTest, LabelOutOfRange) {
  const std::string dir = TestDir();
  WriteSplit(dir, "t10k", 3, {7, 0, 10});
  const auto result = LoadFashionMnist(dir, Split::kTest, 0);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(),
              HasSubstr("t10k-labels-idx1-ubyte.gz: label 10 at index 2 is outside [0, 10)"));
}

TEST(FashionMnistTest, NormalizeImages) {
  const uint8_t pixels[] = {0, 73, 255};
  float out[3];
  NormalizeImages(pixels, 3, out);
  EXPECT_NEAR(out[0], -0.2860 / 0.3530, 1e-6);
  EXPECT_NEAR(out[1], (73 / 255.0 - 0.2860) / 0.3530, 1e-6);
  EXPECT_NEAR(out[2], (1 - 0.2860) / 0.3530, 1e-6);
}

// The real data set, where the machine has it (TAMP_DATA_DIR, else the system copy).
std::string RealDataDir() {
  const char* env = std::getenv("TAMP_DATA_DIR");
  return env != nullptr && *env != '\0' ? env : "/usr/share/datasets/fashion-mnist";
}

TEST(FashionMnistTest, RealDataSet) {
  const std::string dir = RealDataDir();
  struct stat info;
  if (stat(dir.c_str(), &info) != 0) {
    GTEST_SKIP() << "Fashion-MNIST not found at " << dir
                 << " (set TAMP_DATA_DIR to the directory holding the four .gz files)";
  }
  const auto train = LoadFashionMnist(dir, Split::kTrain, 0);
  ASSERT_TRUE(train.ok()) << train.status();
  const auto test = LoadFashionMnist(dir, Split::kTest, 0);
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ(train->size, 60000);
  EXPECT_EQ(test->size, 10000);
  EXPECT_EQ(train->images.size(), 60000u * kPixels);
  EXPECT_EQ(test->images.size(), 10000u * kPixels);

  // Balanced classes: 6000 per class in train, 1000 in test.
  std::array<int, 10> train_histogram = {};
  std::array<int, 10> test_histogram = {};
  for (uint8_t label : train->labels) ++train_histogram.at(label);
  for (uint8_t label : test->labels) ++test_histogram.at(label);
  for (int c = 0; c < 10; ++c) {
    EXPECT_EQ(train_histogram[c], 6000) << "class " << c;
    EXPECT_EQ(test_histogram[c], 1000) << "class " << c;
  }

  // The normalisation constants are the training set's pixel mean and standard deviation.
  double sum = 0, sum_sq = 0;
  for (uint8_t p : train->images) {
    sum += p / 255.0;
    sum_sq += (p / 255.0) * (p / 255.0);
  }
  const double n = static_cast<double>(train->images.size());
  const double mean = sum / n;
  EXPECT_NEAR(mean, kFashionMnistMean, 5e-4);
  EXPECT_NEAR(std::sqrt(sum_sq / n - mean * mean), kFashionMnistStd, 5e-4);
}

}  // namespace
}  // namespace tamp

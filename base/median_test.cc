#include "base/median.h"

#include "gtest/gtest.h"

namespace tamp {
namespace {

TEST(MedianTest, NoValuesGiveZero) {
  EXPECT_EQ(Median({}), 0.0);
  EXPECT_EQ(UpperMedian({}), 0.0);
}

TEST(MedianTest, AnOddCountGivesTheMiddleValue) {
  EXPECT_EQ(Median({5, 1, 3}), 3.0);
  EXPECT_EQ(UpperMedian({5, 1, 3}), 3.0);
  EXPECT_EQ(Median({7}), 7.0);
  EXPECT_EQ(UpperMedian({7}), 7.0);
}

// The two differ only here: the mean of the middle two, or the upper one.
TEST(MedianTest, AnEvenCountAveragesOrTakesTheUpperMiddle) {
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(UpperMedian({4, 1, 3, 2}), 3.0);
  EXPECT_EQ(Median({2, 1}), 1.5);
  EXPECT_EQ(UpperMedian({2, 1}), 2.0);
}

}  // namespace
}  // namespace tamp

#include "server/refusal_log.h"

#include <chrono>
#include <string>
#include <vector>

#include "glog/logging.h"
#include "gtest/gtest.h"

namespace tamp {
namespace {

using Clock = std::chrono::steady_clock;

TEST(LogLimiterTest, AtMostNLinesPerSecondThenSaysHowManyWereDropped) {
  LogLimiter limiter(3, 100);
  const Clock::time_point second = Clock::time_point(std::chrono::seconds(1000));
  uint64_t dropped = 99;
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(limiter.Admit(second + std::chrono::milliseconds(i), &dropped));
    EXPECT_EQ(dropped, 0u);
  }
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(limiter.Admit(second + std::chrono::milliseconds(500), &dropped));
  }
  // The next second has room again; its first line carries the count.
  EXPECT_TRUE(limiter.Admit(second + std::chrono::milliseconds(1000), &dropped));
  EXPECT_EQ(dropped, 5u);
  EXPECT_TRUE(limiter.Admit(second + std::chrono::milliseconds(1001), &dropped));
  EXPECT_EQ(dropped, 0u);
}

// Collects what glog writes.
class Lines : public google::LogSink {
 public:
  void send(google::LogSeverity, const char*, const char*, int, const struct ::tm*,
            const char* message, size_t length) override {
    lines.emplace_back(message, length);
  }
  std::vector<std::string> lines;
};

TEST(LogLimiterTest, LinesAreCutAndEscaped) {
  Lines sink;
  google::AddLogSink(&sink);
  LogLimiter limiter(2, 16);
  limiter.Log(__FILE__, __LINE__, google::GLOG_WARNING, std::string(1000, 'a'));
  limiter.Log(__FILE__, __LINE__, google::GLOG_WARNING, std::string("bell\a", 5));
  limiter.Log(__FILE__, __LINE__, google::GLOG_WARNING, "dropped");
  google::RemoveLogSink(&sink);
  ASSERT_EQ(sink.lines.size(), 2u);
  EXPECT_EQ(sink.lines[0], std::string(16, 'a') + "...(1000 bytes)");
  EXPECT_EQ(sink.lines[1], "bell\\x07");
}

}  // namespace
}  // namespace tamp

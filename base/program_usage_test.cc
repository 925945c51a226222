// ExitIfFlagsBad(): an unknown flag or a value its flag cannot take exits 2 (the usage
// error), naming it; good flags, negated booleans and Abseil's own flags pass.
#include "base/program_usage.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "gtest/gtest.h"

ABSL_FLAG(uint32_t, test_rank, 0, "A rank, for the test.");
ABSL_FLAG(bool, test_check, false, "A switch, for the test.");

namespace tamp {
namespace {

void Check(std::vector<std::string> args) {
  args.insert(args.begin(), "/opt/bin/tamp_test");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  ExitIfFlagsBad(static_cast<int>(argv.size()), argv.data());
}

TEST(ExitIfFlagsBadTest, GoodFlagsPass) {
  Check({"--test_rank=3", "--test_rank", "4", "-test_check", "--notest_check",
         "--test_check=false", "positional", "--flagfile=f", "--", "--anything"});
}

TEST(ExitIfFlagsBadTest, AnUnknownFlagExits2NamingIt) {
  EXPECT_EXIT(Check({"--test_rank=1", "--test_rnak=2"}), ::testing::ExitedWithCode(2),
              "tamp_test: unknown flag --test_rnak \\(--help lists the flags\\)");
  EXPECT_EXIT(Check({"-x"}), ::testing::ExitedWithCode(2), "tamp_test: unknown flag -x ");
}

TEST(ExitIfFlagsBadTest, ABadValueExits2NamingIt) {
  EXPECT_EXIT(Check({"--test_rank=-1"}), ::testing::ExitedWithCode(2),
              "tamp_test: --test_rank=-1: ");
  EXPECT_EXIT(Check({"--test_check=maybe"}), ::testing::ExitedWithCode(2),
              "tamp_test: --test_check=maybe: ");
  EXPECT_EXIT(Check({"--test_rank"}), ::testing::ExitedWithCode(2),
              "tamp_test: --test_rank needs a value");
}

}  // namespace
}  // namespace tamp

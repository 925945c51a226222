// Tests of the small launcher helpers: files, binaries, command_line, run_options, table.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/tamp/binaries.h"
#include "tools/tamp/command_line.h"
#include "tools/tamp/files.h"
#include "tools/tamp/run_options.h"
#include "tools/tamp/table.h"

namespace tamp::launcher {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TempDir() {
  const char* dir = getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

void WriteFile(const std::string& path, const std::string& contents, mode_t mode = 0644) {
  std::ofstream(path) << contents;
  chmod(path.c_str(), mode);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// ---------------------------------------------------------------------------------------
// files

TEST(FilesTest, MakeRunDirCreatesNestedOrFresh) {
  const std::string nested = TempDir() + "/runs/a/b/";
  auto made = MakeRunDir(nested);
  ASSERT_TRUE(made.ok()) << made.status();
  struct stat st;
  EXPECT_EQ(stat(nested.c_str(), &st), 0);
  EXPECT_TRUE(MakeRunDir(nested).ok());  // Existing is fine.

  setenv("TMPDIR", TempDir().c_str(), 1);
  auto fresh1 = MakeRunDir("");
  auto fresh2 = MakeRunDir("");
  ASSERT_TRUE(fresh1.ok() && fresh2.ok());
  EXPECT_NE(*fresh1, *fresh2);
  EXPECT_THAT(*fresh1, HasSubstr("/tamp-run-"));

  WriteFile(TempDir() + "/plainfile", "x");
  EXPECT_FALSE(MakeRunDir(TempDir() + "/plainfile").ok());
}

TEST(FilesTest, SetAsideEarlierLogsMovesOnlyTheRunsLogsAndEvents) {
  const std::string dir = TempDir() + "/aside";
  ASSERT_TRUE(MakeRunDir(dir).ok());
  absl::StatusOr<std::string> none = SetAsideEarlierLogs(dir);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, "") << "nothing to move";

  const std::vector<std::string> logs = {"server-0.log", "worker-1.log", "worker-1.events",
                                         "worker-0.restart-2.log", "server-1.restart-1.log"};
  const std::vector<std::string> others = {"notes.log", "worker-x.log", "worker-1.restart-.log",
                                           "worker-1.log.old", "auto.pbtxt", "server-0.port"};
  for (const std::string& name : logs) WriteFile(dir + "/" + name, name);
  for (const std::string& name : others) WriteFile(dir + "/" + name, name);
  absl::StatusOr<std::string> first = SetAsideEarlierLogs(dir);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, dir + "/earlier-1");
  for (const std::string& name : logs) {
    EXPECT_EQ(ReadFile(*first + "/" + name), name);
    EXPECT_NE(access((dir + "/" + name).c_str(), F_OK), 0) << name << " left behind";
  }
  for (const std::string& name : others) EXPECT_EQ(ReadFile(dir + "/" + name), name);

  WriteFile(dir + "/worker-0.log", "second run");
  absl::StatusOr<std::string> second = SetAsideEarlierLogs(dir);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second, dir + "/earlier-2") << "earlier-1 is taken";
  EXPECT_EQ(ReadFile(*second + "/worker-0.log"), "second run");
  EXPECT_EQ(ReadFile(*first + "/server-0.log"), "server-0.log") << "the first set is kept";

  EXPECT_TRUE(absl::IsNotFound(SetAsideEarlierLogs(dir + "/missing").status()));
}

TEST(FilesTest, PrepareOutputFileMakesItsDirectoryOrSaysWhyNot) {
  const std::string nested = TempDir() + "/out/a/b/summary.json";
  ASSERT_TRUE(PrepareOutputFile(nested).ok());
  struct stat st;
  EXPECT_EQ(stat((TempDir() + "/out/a/b").c_str(), &st), 0) << "the directory is made";
  EXPECT_NE(stat(nested.c_str(), &st), 0) << "no file is written";
  EXPECT_TRUE(PrepareOutputFile("relative.json").ok());
  const absl::Status directory = PrepareOutputFile(TempDir() + "/out");
  EXPECT_TRUE(absl::IsFailedPrecondition(directory)) << directory;
  EXPECT_THAT(directory.message(), HasSubstr("is a directory, not a file"));
  WriteFile(TempDir() + "/plain", "x");
  EXPECT_FALSE(PrepareOutputFile(TempDir() + "/plain/summary.json").ok()) << "under a file";
}

TEST(FilesTest, ARunDirHasOneRunAtATime) {
  const std::string dir = TempDir() + "/locked";
  ASSERT_TRUE(MakeRunDir(dir).ok());
  absl::StatusOr<int> first = LockRunDir(dir);
  ASSERT_TRUE(first.ok()) << first.status();
  const absl::StatusOr<int> second = LockRunDir(dir);  // flock: another open file, refused.
  EXPECT_TRUE(absl::IsFailedPrecondition(second.status())) << second.status();
  EXPECT_THAT(second.status().message(),
              HasSubstr(absl::StrCat(dir, " is in use by another tamp run (pid ", getpid(), ")")));
  close(*first);
  absl::StatusOr<int> again = LockRunDir(dir);
  ASSERT_TRUE(again.ok()) << again.status() << " once the first is closed";
  close(*again);
}

TEST(FilesTest, WriteFileAtomicallyReplaces) {
  const std::string path = TempDir() + "/summary.json";
  ASSERT_TRUE(WriteFileAtomically(path, "old\n").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "new\n").ok());
  EXPECT_EQ(ReadFile(path), "new\n");
  EXPECT_FALSE(WriteFileAtomically(TempDir() + "/no/such/dir/x", "y").ok());
}

TEST(FilesTest, ReadPortFile) {
  const std::string path = TempDir() + "/server-0.port";
  unlink(path.c_str());
  EXPECT_EQ(ReadPortFile(path).status().code(), absl::StatusCode::kNotFound);
  WriteFile(path, "40123\n");
  EXPECT_EQ(*ReadPortFile(path), 40123);
  for (const char* bad : {"40123", "0\n", "70000\n", "abc\n", ""}) {
    WriteFile(path, bad);
    EXPECT_EQ(ReadPortFile(path).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(FilesTest, LastPythonExceptionIsTheFinalTracebacksFirstUnindentedLine) {
  const std::vector<std::string> log = {
      "W1128 worker 1: starting",
      "Traceback (most recent call last):",
      "  File \"a.py\", line 3, in <module>",
      "KeyError: 'x'",
      "",
      "During handling of the above exception, another exception occurred:",
      "",
      "Traceback (most recent call last):",
      "  File \"train.py\", line 9, in <module>",
      "    loss.backward()",
      "NotImplementedError: Could not run 'aten::as_strided' with arguments from the "
      "'SparseCPU' backend.",
      "CPU: registered at ...",
      "  (dispatch keys)"};
  EXPECT_EQ(LastPythonException(log), 10u);
  EXPECT_EQ(LastPythonException({"plain", "log"}), std::nullopt);
  EXPECT_EQ(LastPythonException({"Traceback (most recent call last):", "  File x"}),
            std::nullopt);
}

TEST(FilesTest, ReadLastLines) {
  const std::string path = TempDir() + "/tail.log";
  WriteFile(path, "a\nb\nc\nd\n");
  EXPECT_THAT(*ReadLastLines(path, 2), ElementsAre("c", "d"));
  EXPECT_THAT(*ReadLastLines(path, 10), ElementsAre("a", "b", "c", "d"));
  WriteFile(path, "");
  EXPECT_TRUE(ReadLastLines(path, 3)->empty());
  std::string big;
  for (int i = 0; i < 20000; ++i) absl::StrAppend(&big, "line ", i, "\n");
  WriteFile(path, big);
  EXPECT_THAT(*ReadLastLines(path, 2), ElementsAre("line 19998", "line 19999"));
  EXPECT_FALSE(ReadLastLines(TempDir() + "/missing.log", 3).ok());
}

TEST(FilesTest, MakeAbsolute) {
  EXPECT_EQ(MakeAbsolute("/a/b"), "/a/b");
  char* cwd = getcwd(nullptr, 0);
  EXPECT_EQ(MakeAbsolute("./x.pbtxt"), absl::StrCat(cwd, "/x.pbtxt"));
  free(cwd);
}

// ---------------------------------------------------------------------------------------
// binaries

class FindBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = TempDir() + "/bin_layout";
    // bazel-bin layout: bin/tools/tamp/tamp, bin/tools/tamp/tamp.runfiles/tamp/server/...,
    // bin/server/tamp_server.
    ASSERT_TRUE(MakeRunDir(root_ + "/bin/tools/tamp/tamp.runfiles/tamp/server").ok());
    ASSERT_TRUE(MakeRunDir(root_ + "/bin/server").ok());
    ASSERT_TRUE(MakeRunDir(root_ + "/other.runfiles/tamp/server").ok());
    exe_ = root_ + "/bin/tools/tamp/tamp";
    WriteFile(exe_, "", 0755);
  }

  BinaryLookup Lookup() const {
    BinaryLookup lookup;
    lookup.flag_name = "--server_binary";
    lookup.env_name = "TAMP_SERVER_BINARY";
    lookup.exe_path = exe_;
    lookup.workspace_path = "server/tamp_server";
    return lookup;
  }

  std::string root_;
  std::string exe_;
};

TEST_F(FindBinaryTest, FlagThenEnvThenRunfilesThenSibling) {
  const std::string runfiles = exe_ + ".runfiles/tamp/server/tamp_server";
  const std::string sibling = root_ + "/bin/tools/tamp/../../server/tamp_server";
  const std::string other = root_ + "/other.runfiles/tamp/server/tamp_server";
  const std::string flag = root_ + "/flag_server";
  unlink(runfiles.c_str());
  unlink(sibling.c_str());
  unlink(other.c_str());

  BinaryLookup lookup = Lookup();
  auto missing = FindBinary(lookup);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("--server_binary"));
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("TAMP_SERVER_BINARY"));
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr(runfiles));

  WriteFile(sibling, "", 0755);
  EXPECT_EQ(*FindBinary(lookup), sibling);
  WriteFile(other, "", 0755);
  lookup.runfiles_dir = root_ + "/other.runfiles";
  EXPECT_EQ(*FindBinary(lookup), other);
  WriteFile(runfiles, "", 0755);
  EXPECT_EQ(*FindBinary(lookup), runfiles);
  WriteFile(flag, "", 0755);
  lookup.env_value = flag;
  EXPECT_EQ(*FindBinary(lookup), flag);
  lookup.flag_value = flag;
  EXPECT_EQ(*FindBinary(lookup), flag);
}

TEST_F(FindBinaryTest, BadExplicitValuesAreErrors) {
  BinaryLookup lookup = Lookup();
  WriteFile(exe_ + ".runfiles/tamp/server/tamp_server", "", 0755);
  lookup.flag_value = root_ + "/nope";
  EXPECT_THAT(std::string(FindBinary(lookup).status().message()),
              HasSubstr("--server_binary=" + root_ + "/nope: not an executable file"));
  lookup.flag_value = "";
  WriteFile(root_ + "/not_exec", "", 0644);
  lookup.env_value = root_ + "/not_exec";
  EXPECT_THAT(std::string(FindBinary(lookup).status().message()),
              HasSubstr("$TAMP_SERVER_BINARY="));
}

// ---------------------------------------------------------------------------------------
// command_line

absl::StatusOr<int> Even(const std::string& value) {
  int number = 0;
  if (!absl::SimpleAtoi(value, &number) || number % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--even: got \"", value, "\""));
  }
  return number;
}

TEST(CommandLineTest, FlagsSwitchesAndPositionalInAnyOrder) {
  bool verbose = false, quiet = false;
  std::string name;
  int even = 0;
  std::vector<std::string> seen;
  CommandLine flags;
  flags.Switch("verbose", &verbose)
      .Switch("quiet", &quiet)
      .Flag("name", &name)
      .Flag("even", &even, Even)
      .Flag("seen", [&](const std::string& value) {
        seen.push_back(value);
        return absl::OkStatus();
      });
  absl::StatusOr<std::vector<std::string>> positional =
      flags.Parse({"a", "--name", "x", "-", "-verbose", "--even=4", "--seen", "--quiet", "b",
                   "--seen=", "--name=y"});
  ASSERT_TRUE(positional.ok()) << positional.status();
  EXPECT_THAT(*positional, ElementsAre("a", "-", "b"));
  EXPECT_TRUE(verbose);
  EXPECT_FALSE(quiet);  // "--quiet" was --seen's value.
  EXPECT_EQ(name, "y");  // The last one.
  EXPECT_EQ(even, 4);
  EXPECT_THAT(seen, ElementsAre("--quiet", ""));
}

TEST(CommandLineTest, ErrorsNameTheFlag) {
  bool on = false;
  std::string name;
  int even = 0;
  CommandLine flags;
  flags.Switch("on", &on).Flag("name", &name).Flag("even", &even, Even);
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--speed=3"}, "unknown flag --speed=3"},
      {{"-speed"}, "unknown flag -speed"},
      {{"a", "--"}, "unknown flag --"},
      {{"--name"}, "--name needs a value"},
      {{"--name="}, "--name is empty"},
      {{"--on=1"}, "--on takes no value"},
      {{"--even", "3"}, "--even: got \"3\""},
  };
  for (const auto& [args, message] : cases) {
    absl::StatusOr<std::vector<std::string>> parsed = flags.Parse(args);
    ASSERT_FALSE(parsed.ok()) << message;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(), message);
  }
  EXPECT_EQ(even, 0);
}

TEST(CommandLineTest, CommandAfterDashDash) {
  std::string name;
  std::vector<std::string> command;
  CommandLine flags;
  flags.Flag("name", &name).Command(&command, "a COMMAND");
  absl::StatusOr<std::vector<std::string>> positional =
      flags.Parse({"a", "--name=n", "--", "run", "--name=m", "--"});
  ASSERT_TRUE(positional.ok()) << positional.status();
  EXPECT_THAT(*positional, ElementsAre("a"));
  EXPECT_EQ(name, "n");
  EXPECT_THAT(command, ElementsAre("run", "--name=m", "--"));
  EXPECT_EQ(flags.Parse({"a", "--"}).status().message(), "\"--\" must be followed by a COMMAND");
}

// ---------------------------------------------------------------------------------------
// run_options

TEST(ParseRunArgsTest, ConfigAndFlagsInAnyOrder) {
  auto options = ParseRunArgs({"--run_dir", "/tmp/r", "x.pbtxt", "--summary_json=/tmp/s.json",
                               "--server_binary=/s", "--worker_binary", "/w",
                               "--metrics_file=/tmp/m.jsonl"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->config_path, "x.pbtxt");
  EXPECT_EQ(options->run_dir, "/tmp/r");
  EXPECT_EQ(options->summary_json, "/tmp/s.json");
  EXPECT_EQ(options->server_binary, "/s");
  EXPECT_EQ(options->worker_binary, "/w");
  EXPECT_EQ(options->metrics_file, "/tmp/m.jsonl");
}

TEST(ParseRunArgsTest, Errors) {
  EXPECT_THAT(std::string(ParseRunArgs({}).status().message()), HasSubstr("missing CONFIG"));
  EXPECT_THAT(std::string(ParseRunArgs({"a", "b"}).status().message()), HasSubstr("\"b\""));
  EXPECT_THAT(std::string(ParseRunArgs({"a", "--bogus=1"}).status().message()),
              HasSubstr("unknown flag --bogus=1"));
  EXPECT_THAT(std::string(ParseRunArgs({"a", "--run_dir"}).status().message()),
              HasSubstr("needs a value"));
  EXPECT_EQ(ParseRunArgs({"./-odd.pbtxt"})->config_path, "./-odd.pbtxt");
}

TEST(ParseRunArgsTest, EverythingAfterDashDashIsTheCommand) {
  EXPECT_TRUE(ParseRunArgs({"a"})->command.empty());
  auto options = ParseRunArgs(
      {"job.pbtxt", "--run_dir=/r", "--", "python3", "train.py", "--run_dir=x", "--", "-v"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->config_path, "job.pbtxt");
  EXPECT_EQ(options->run_dir, "/r");
  EXPECT_THAT(options->command,
              ElementsAre("python3", "train.py", "--run_dir=x", "--", "-v"));
}

TEST(ParseRunArgsTest, CommandErrors) {
  EXPECT_EQ(std::string(ParseRunArgs({"a", "--"}).status().message()),
            "\"--\" must be followed by a COMMAND to run as each worker");
  EXPECT_THAT(
      std::string(ParseRunArgs({"a", "--worker_binary=/w", "--", "python3"}).status().message()),
      HasSubstr("--worker_binary and a COMMAND after \"--\" exclude each other"));
  EXPECT_THAT(std::string(ParseRunArgs({"--run_dir=/r", "--", "python3"}).status().message()),
              HasSubstr("missing CONFIG"));
}

TEST(ParseRunArgsTest, RestartServersAndWorkersAreCounts) {
  EXPECT_EQ(ParseRunArgs({"a"})->restart_servers, 0);
  EXPECT_EQ(ParseRunArgs({"a"})->restart_workers, 0);
  EXPECT_EQ(ParseRunArgs({"a", "--restart_servers=3"})->restart_servers, 3);
  EXPECT_EQ(ParseRunArgs({"a", "--restart_workers", "2"})->restart_workers, 2);
  for (const char* flag : {"restart_servers", "restart_workers"}) {
    for (const char* bad : {"-1", "two"}) {
      EXPECT_THAT(
          std::string(ParseRunArgs({"a", absl::StrCat("--", flag, "=", bad)}).status().message()),
          HasSubstr(absl::StrCat("--", flag, ": expected a count >= 0")))
          << flag << "=" << bad;
    }
  }
}

TEST(ParseRunArgsTest, FinishTimeoutIsADurationWithItsUnitOrZero) {
  EXPECT_EQ(ParseRunArgs({"a"})->finish_timeout, absl::ZeroDuration());
  EXPECT_EQ(ParseRunArgs({"a", "--finish_timeout=10m"})->finish_timeout, absl::Minutes(10));
  EXPECT_EQ(ParseRunArgs({"a", "--finish_timeout", "90s"})->finish_timeout, absl::Seconds(90));
  EXPECT_EQ(ParseRunArgs({"a", "--finish_timeout=0"})->finish_timeout, absl::ZeroDuration());
  for (const char* bad : {"10", "-5s", "inf", "soon", ""}) {
    EXPECT_THAT(std::string(ParseRunArgs({"a", absl::StrCat("--finish_timeout=", bad)})
                                .status()
                                .message()),
                HasSubstr("--finish_timeout: expected a duration with its unit (90s, 10m, 1h)"))
        << bad;
  }
}

TEST(ParseRunArgsTest, KillGraceIsADurationWithItsUnitOrZero) {
  EXPECT_EQ(ParseRunArgs({"a"})->failure_grace, absl::Seconds(5));
  EXPECT_EQ(ParseRunArgs({"a", "--kill_grace=30s"})->failure_grace, absl::Seconds(30));
  EXPECT_EQ(ParseRunArgs({"a", "--kill_grace=0"})->failure_grace, absl::ZeroDuration());
  EXPECT_EQ(ParseRunArgs({"a", "--kill_grace=30s"})->stop_grace, absl::Seconds(10));
  EXPECT_THAT(std::string(ParseRunArgs({"a", "--kill_grace=5"}).status().message()),
              HasSubstr("--kill_grace: expected a duration with its unit (90s, 10m, 1h) or 0"));
}

// ---------------------------------------------------------------------------------------
// table

TEST(FormatTableTest, AlignsColumns) {
  EXPECT_EQ(FormatTable({"NAME", "PARAMETERS", "SUMMARY"},
                        {{"none", "-", "raw fp32"}, {"topk", "ratio, count", "k largest"}}),
            "NAME  PARAMETERS    SUMMARY\n"
            "----  ----------    -------\n"
            "none  -             raw fp32\n"
            "topk  ratio, count  k largest\n");
}

TEST(FormatTableTest, WrapsLongCells) {
  EXPECT_EQ(FormatTable({"NAME", "WIRE", "SUMMARY"},
                        {{"topk", "12 + ceil(k*b/8) + 4k", "the k largest values"}, {"none"}},
                        {0, 10, 0}),
            "NAME  WIRE         SUMMARY\n"
            "----  ----         -------\n"
            "topk  12 +         the k largest values\n"
            "      ceil(k*b/8)\n"
            "      + 4k\n"
            "none\n");
}

TEST(WrapTextTest, SplitsAtSpaces) {
  EXPECT_EQ(WrapText("a bb ccc dddd", 6), (std::vector<std::string>{"a bb", "ccc", "dddd"}));
  EXPECT_EQ(WrapText("short", 10), (std::vector<std::string>{"short"}));
  EXPECT_EQ(WrapText("", 3), (std::vector<std::string>{""}));
  EXPECT_EQ(WrapText("unbreakable", 4), (std::vector<std::string>{"unbreakable"}));
}

}  // namespace
}  // namespace tamp::launcher

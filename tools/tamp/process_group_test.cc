#include "tools/tamp/process_group.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp::launcher {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ChildSpec Shell(const std::string& name, const std::string& script, bool capture = true,
                const std::string& log_path = "") {
  ChildSpec spec;
  spec.name = name;
  spec.argv = {"/bin/sh", "-c", script};
  spec.capture_stdout = capture;
  spec.log_path = log_path;
  return spec;
}

std::string TempDir() {
  const char* dir = getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

// True once `pid` no longer runs: gone (ESRCH) or a zombie waiting for a reaper that is
// not us (an orphaned grandchild re-parented to init).
bool IsGone(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  // Plain syscalls: the process may vanish while we read (ESRCH), which is "gone" too.
  const int fd = open(absl::StrCat("/proc/", pid, "/stat").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  char buffer[512];
  const ssize_t n = read(fd, buffer, sizeof(buffer));
  close(fd);
  if (n <= 0) return true;
  const std::string text(buffer, n);
  const size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'Z';
}

bool EventuallyGone(pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (std::chrono::steady_clock::now() < deadline) {
    if (IsGone(pid)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Polls until `child` has exited, collecting its lines.
std::vector<std::string> LinesUntilExit(ProcessGroup& group, int child, ExitStatus* status) {
  std::vector<std::string> lines;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (group.running(child) && std::chrono::steady_clock::now() < deadline) {
    for (const ChildEvent& e : group.Poll(absl::Milliseconds(200))) {
      if (e.child != child) continue;
      if (e.type == ChildEvent::Type::kLine) {
        lines.push_back(e.line);
      } else {
        *status = e.status;
      }
    }
  }
  EXPECT_FALSE(group.running(child)) << "child did not exit in 5 s";
  return lines;
}

// Waits for the next stdout line of `child`.
std::string NextLine(ProcessGroup& group, int child) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    for (const ChildEvent& e : group.Poll(absl::Milliseconds(200))) {
      if (e.child == child && e.type == ChildEvent::Type::kLine) return e.line;
    }
  }
  ADD_FAILURE() << "no line from child " << child;
  return "";
}

TEST(ExitStatusTest, Describes) {
  EXPECT_EQ(ExitStatus::Exited(3).ToString(), "exit status 3");
  EXPECT_EQ(ExitStatus::Signaled(9).ToString(), "killed by SIGKILL");
  EXPECT_EQ(ExitStatus::Signaled(SIGSEGV).ToString(), "killed by SIGSEGV");
  EXPECT_TRUE(ExitStatus::Exited(0).success());
  EXPECT_FALSE(ExitStatus::Exited(1).success());
  EXPECT_FALSE(ExitStatus::Signaled(15).success());
}

TEST(ProcessGroupTest, ReadsStdoutLineByLine) {
  ProcessGroup group;
  // Lines split across writes, several lines in one write, an empty line, no final '\n'.
  auto child = group.Spawn(
      Shell("talker", "printf 'he'; sleep 0.05; printf 'llo\\nworld\\n\\nlast'; exit 0"));
  ASSERT_TRUE(child.ok()) << child.status();
  ExitStatus status = ExitStatus::Exited(-1);
  EXPECT_THAT(LinesUntilExit(group, *child, &status), ElementsAre("hello", "world", "", "last"));
  EXPECT_TRUE(status.success());
  EXPECT_EQ(group.exit_status(*child).ToString(), "exit status 0");
}

TEST(ProcessGroupTest, LinesComeBeforeExit) {
  ProcessGroup group;
  auto child = group.Spawn(Shell("burst",
                                 "i=0; while [ $i -lt 2000 ]; do echo line$i; "
                                 "i=$((i+1)); done; exit 4"));
  ASSERT_TRUE(child.ok()) << child.status();
  int lines = 0;
  bool exited = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!exited && std::chrono::steady_clock::now() < deadline) {
    for (const ChildEvent& e : group.Poll(absl::Milliseconds(200))) {
      if (e.type == ChildEvent::Type::kLine) {
        ASSERT_FALSE(exited) << "line after exit";
        EXPECT_EQ(e.line, absl::StrCat("line", lines));
        ++lines;
      } else {
        exited = true;
        EXPECT_EQ(e.status.code(), 4);
      }
    }
  }
  EXPECT_TRUE(exited);
  EXPECT_EQ(lines, 2000);
}

TEST(ProcessGroupTest, ReportsExitStatuses) {
  ProcessGroup group;
  auto ok = group.Spawn(Shell("ok", "exit 0"));
  auto three = group.Spawn(Shell("three", "exit 3"));
  auto killed = group.Spawn(Shell("killed", "kill -9 $$"));
  ASSERT_TRUE(ok.ok() && three.ok() && killed.ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (group.num_running() > 0 && std::chrono::steady_clock::now() < deadline) {
    group.Poll(absl::Milliseconds(200));
  }
  ASSERT_EQ(group.num_running(), 0);
  EXPECT_EQ(group.exit_status(*ok).ToString(), "exit status 0");
  EXPECT_EQ(group.exit_status(*three).ToString(), "exit status 3");
  EXPECT_EQ(group.exit_status(*three).code(), 3);
  EXPECT_TRUE(group.exit_status(*killed).signaled());
  EXPECT_EQ(group.exit_status(*killed).signal(), SIGKILL);
  for (int i = 0; i < group.size(); ++i) EXPECT_TRUE(IsGone(group.pid(i)));
}

TEST(ProcessGroupTest, MissingBinaryIsNotFoundAndLeavesNothing) {
  ProcessGroup group;
  ChildSpec spec;
  spec.name = "ghost";
  spec.argv = {"/nonexistent/tamp_server", "--rank=0"};
  auto child = group.Spawn(spec);
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(child.status().message()), HasSubstr("/nonexistent/tamp_server"));
  EXPECT_EQ(group.size(), 0);
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);  // No child left, not even a zombie.
  EXPECT_EQ(errno, ECHILD);
}

TEST(ProcessGroupTest, SearchPathRunsProgramsByNameWithTheirEnvironment) {
  setenv("PG_INHERITED", "kept", 1);
  setenv("PG_REPLACED", "old", 1);
  ProcessGroup group;
  // /proc/$$/environ: the environment as exec'ed (a shell drops duplicates on import).
  ChildSpec spec = Shell("named",
                         "echo $PG_INHERITED $PG_REPLACED $PG_NEW; "
                         "tr '\\0' '\\n' < /proc/$$/environ | grep -c ^PG_REPLACED=");
  spec.argv[0] = "sh";
  spec.search_path = true;
  spec.env = {"PG_REPLACED=new", "PG_NEW=a=b"};
  auto child = group.Spawn(spec);
  ASSERT_TRUE(child.ok()) << child.status();
  ExitStatus status;
  EXPECT_THAT(LinesUntilExit(group, *child, &status), ElementsAre("kept new a=b", "1"));
  EXPECT_TRUE(status.success());
  unsetenv("PG_INHERITED");
  unsetenv("PG_REPLACED");
}

TEST(ProcessGroupTest, ProgramNotInPathIsNotFoundNamingIt) {
  ProcessGroup group;
  ChildSpec spec;
  spec.name = "worker 0";
  spec.argv = {"no-such-program-for-tamp", "--flag"};
  spec.search_path = true;
  auto child = group.Spawn(spec);
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(child.status().message(),
            "cannot execute no-such-program-for-tamp (worker 0): not found in PATH");
  EXPECT_EQ(group.size(), 0);
}

TEST(ProcessGroupTest, AppendToLogInterleavesWholeLinesWithTheChilds) {
  const std::string log = TempDir() + "/pg_append.log";
  ProcessGroup group;
  auto child = group.Spawn(
      Shell("writer", "echo first >&2; echo ready; sleep 0.2; echo third >&2", true, log));
  ASSERT_TRUE(child.ok());
  ASSERT_EQ(NextLine(group, *child), "ready");
  group.AppendToLog(*child, "second");
  ExitStatus status;
  LinesUntilExit(group, *child, &status);
  group.AppendToLog(*child, "fourth");  // After the exit, too.
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "first\nsecond\nthird\nfourth\n");
}

TEST(ProcessGroupTest, StderrGoesToLogAndStdinIsEmpty) {
  const std::string log = TempDir() + "/pg_stderr.log";
  ProcessGroup group;
  auto child = group.Spawn(Shell("logger", "echo to-stderr >&2; cat; echo to-stdout", true, log));
  ASSERT_TRUE(child.ok());
  ExitStatus status;
  EXPECT_THAT(LinesUntilExit(group, *child, &status), ElementsAre("to-stdout"));
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "to-stderr\n");
}

TEST(ProcessGroupTest, UncapturedStdoutGoesToLog) {
  const std::string log = TempDir() + "/pg_stdout.log";
  ProcessGroup group;
  auto child = group.Spawn(Shell("server", "echo out; echo err >&2", false, log));
  ASSERT_TRUE(child.ok());
  ExitStatus status;
  EXPECT_TRUE(LinesUntilExit(group, *child, &status).empty());
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "out\nerr\n");
}

TEST(ProcessGroupTest, ShutdownAfterFailureKillsEverything) {
  ProcessGroup group;
  auto a = group.Spawn(Shell("server 0", "exec sleep 30", false));
  auto b = group.Spawn(Shell("worker 0", "sleep 30; exit 0"));
  auto c = group.Spawn(Shell("worker 1", "sleep 0.1; exit 3"));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  ExitStatus failed;
  LinesUntilExit(group, *c, &failed);
  EXPECT_EQ(failed.ToString(), "exit status 3");
  EXPECT_EQ(group.num_running(), 2);

  const auto start = std::chrono::steady_clock::now();
  std::vector<ChildEvent> events = group.Shutdown(absl::Seconds(5));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(group.num_running(), 0);
  int exits = 0;
  for (const ChildEvent& e : events) {
    if (e.type != ChildEvent::Type::kExited) continue;
    ++exits;
    EXPECT_EQ(e.status.signal(), SIGTERM) << group.name(e.child);
  }
  EXPECT_EQ(exits, 2);
  for (int i = 0; i < group.size(); ++i) {
    EXPECT_EQ(kill(group.pid(i), 0), -1) << group.name(i);
    EXPECT_EQ(errno, ESRCH) << group.name(i);
  }
}

TEST(ProcessGroupTest, SigtermIgnoringChildIsKilledAfterGrace) {
  ProcessGroup group;
  auto stubborn =
      group.Spawn(Shell("stubborn", "trap '' TERM; echo ready; while :; do sleep 0.05; done"));
  ASSERT_TRUE(stubborn.ok());
  ASSERT_EQ(NextLine(group, *stubborn), "ready");  // The trap is in place.

  const auto start = std::chrono::steady_clock::now();
  std::vector<ChildEvent> events = group.Shutdown(absl::Milliseconds(300));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, std::chrono::milliseconds(300));
  EXPECT_LT(took, std::chrono::seconds(2));
  ASSERT_FALSE(group.running(*stubborn));
  EXPECT_EQ(group.exit_status(*stubborn).signal(), SIGKILL);
  EXPECT_EQ(kill(group.pid(*stubborn), 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST(ProcessGroupTest, WakeFdCutsTheGracePeriodShort) {
  int wake[2];
  ASSERT_EQ(pipe(wake), 0);
  ProcessGroup group;
  auto stubborn =
      group.Spawn(Shell("stubborn", "trap '' TERM; echo ready; while :; do sleep 0.05; done"));
  ASSERT_TRUE(stubborn.ok());
  ASSERT_EQ(NextLine(group, *stubborn), "ready");
  ASSERT_EQ(write(wake[1], "x", 1), 1);  // A second Ctrl-C, already pending.
  const auto start = std::chrono::steady_clock::now();
  group.Shutdown(absl::Seconds(30), wake[0]);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(group.exit_status(*stubborn).signal(), SIGKILL);
  close(wake[0]);
  close(wake[1]);
}

TEST(ProcessGroupTest, SignalsReachGrandchildren) {
  ProcessGroup group;
  // The shell starts a background grandchild, prints its pid and waits.
  auto parent = group.Spawn(Shell("wrapper", "sleep 30 & echo $!; wait"));
  ASSERT_TRUE(parent.ok());
  int grandchild = 0;
  ASSERT_TRUE(absl::SimpleAtoi(NextLine(group, *parent), &grandchild));
  group.Shutdown(absl::Seconds(2));
  EXPECT_TRUE(EventuallyGone(grandchild));
}

TEST(ProcessGroupTest, PollReturnsEarlyOnWakeFd) {
  int wake[2];
  ASSERT_EQ(pipe(wake), 0);
  ASSERT_EQ(write(wake[1], "x", 1), 1);
  ProcessGroup group;
  ASSERT_TRUE(group.Spawn(Shell("sleeper", "exec sleep 30")).ok());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(group.Poll(absl::Seconds(10), wake[0]).empty());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  close(wake[0]);
  close(wake[1]);
}

TEST(ProcessGroupTest, DestructorKillsAndReaps) {
  pid_t pid;
  {
    ProcessGroup group;
    auto child = group.Spawn(Shell("sleeper", "exec sleep 30"));
    ASSERT_TRUE(child.ok());
    pid = group.pid(*child);
    EXPECT_EQ(kill(pid, 0), 0);
  }
  EXPECT_EQ(kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST(ProcessGroupTest, ChildrenDieWithTheLauncher) {
  // A stand-in launcher process spawns a child, reports its pid and dies without any
  // cleanup (as on SIGKILL); PR_SET_PDEATHSIG must take the child down with it.
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  const pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    close(report[0]);
    ProcessGroup* group = new ProcessGroup;  // Leaked on purpose: no destructor runs.
    auto child = group->Spawn(Shell("orphan", "exec sleep 30"));
    const pid_t pid = child.ok() ? group->pid(*child) : -1;
    if (write(report[1], &pid, sizeof(pid)) != sizeof(pid)) _exit(2);
    _exit(0);
  }
  close(report[1]);
  pid_t orphan = -1;
  ASSERT_EQ(read(report[0], &orphan, sizeof(orphan)), static_cast<ssize_t>(sizeof(orphan)));
  close(report[0]);
  int status;
  ASSERT_EQ(waitpid(launcher, &status, 0), launcher);
  ASSERT_GT(orphan, 0);
  EXPECT_TRUE(EventuallyGone(orphan));
}

}  // namespace
}  // namespace tamp::launcher

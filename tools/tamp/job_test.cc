// RunJob() end to end with /bin/sh stand-ins for tamp_server and tamp_worker that follow
// their command-line and stdout contracts; env variables select how they misbehave.
#include "tools/tamp/job.h"

#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "proto/events.pb.h"

namespace tamp::launcher {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// tamp_server: writes its port file (40000 + rank) and serves until SIGTERM.
//   FAKE_SERVER_MODE=die        exits 5 before listening
//   FAKE_SERVER_MODE=hang       never listens
//   FAKE_SERVER_MODE=die_later  exits 1 soon after listening
//   FAKE_SERVER_MODE=stubborn   ignores SIGTERM
//   FAKE_SERVER_MODE=bad_stop   exits 2 on SIGTERM
constexpr char kFakeServer[] = R"(#!/bin/sh
for a in "$@"; do
  case "$a" in
    --rank=*) rank=${a#--rank=} ;;
    --port_file=*) port_file=${a#--port_file=} ;;
  esac
done
echo "fake server $rank: $*" >&2
echo $$ >> "$FAKE_PIDS"
mode=${FAKE_SERVER_MODE:-ok}
case "$mode" in
  die) echo "fatal: cannot bind" >&2; exit 5 ;;
  hang) exec sleep 30 ;;
  stubborn) trap '' TERM ;;
  bad_stop) trap 'exit 2' TERM ;;
  *) trap 'echo "server $rank stopping" >&2; exit 0' TERM INT ;;
esac
printf '%s\n' $((40000 + rank)) > "$port_file.tmp" && mv "$port_file.tmp" "$port_file"
if [ "$mode" = die_later ]; then sleep 0.3; exit 1; fi
while :; do sleep 0.02; done
)";

// tamp_worker: one log line on stdout, FAKE_STEPS STEP events, EVAL (worker 0), DONE.
//   FAKE_FAIL_RANK=J            worker J exits 3 after its steps (with FAKE_FAIL_ONCE=1, only
//                               when started without --resume)
//   FAKE_WORKER_MODE=nodone     exits 0 without DONE
//   FAKE_WORKER_MODE=hang       never finishes
//   FAKE_WORKER_MODE=crash      dies of SIGSEGV
//   FAKE_WORKER_MODE=fail_after_done  worker 1 exits 4 after its DONE
//   FAKE_HANG_RANK=J            worker J never finishes (the others do)
//   FAKE_SKIP_RANK=J            worker J reports no steps 2 and 3 (a script reporting some
//                               steps only; with FAKE_SKIP_MISSED=1 its later events say it
//                               missed them: dropped, it rejoined)
constexpr char kFakeWorker[] = R"(#!/bin/sh
resumed=
for a in "$@"; do case "$a" in --rank=*) rank=${a#--rank=} ;; --resume) resumed=1 ;; esac; done
echo "fake worker $rank: $*" >&2
echo $$ >> "$FAKE_PIDS"
echo "worker $rank says hello"
steps=${FAKE_STEPS:-5}
i=1
while [ $i -le $steps ]; do
  missed=0
  if [ "$rank" = "${FAKE_SKIP_RANK:--1}" ]; then
    if [ $i -ge 2 ] && [ $i -le 3 ]; then i=$((i + 1)); continue; fi
    if [ $i -gt 3 ] && [ -n "${FAKE_SKIP_MISSED:-}" ]; then missed=2; fi
  fi
  echo "{\"kind\":\"STEP\",\"worker\":$rank,\"step\":\"$i\",\"totalSteps\":\"$steps\",\"epoch\":0,\"loss\":$((10 - i)).5,\"stepMs\":2,\"bytesPushed\":\"$((i * 100))\",\"rawBytesPushed\":\"$((i * 1000))\",\"stepsMissed\":\"$missed\"}"
  i=$((i + 1))
done
if [ "$rank" = "${FAKE_FAIL_RANK:--1}" ] && [ -z "$resumed" -o -z "${FAKE_FAIL_ONCE:-}" ]; then
  echo "worker $rank: something broke" >&2; exit 3
fi
if [ "$rank" = "${FAKE_HANG_RANK:--1}" ]; then exec sleep 30; fi
case "${FAKE_WORKER_MODE:-ok}" in
  nodone) exit 0 ;;
  hang) exec sleep 30 ;;
  crash) kill -SEGV $$ ;;
esac
acc=0
if [ "$rank" = 0 ]; then acc=0.75; echo '{"kind":"EVAL","epoch":0,"testAccuracy":0.75}'; fi
pushed=$((rank * 100 + 500))
echo "{\"kind\":\"DONE\",\"worker\":$rank,\"step\":\"$steps\",\"totalSteps\":\"$steps\",\"bytesPushed\":\"$pushed\",\"bytesPulled\":\"1000\",\"rawBytesPushed\":\"$((pushed * 10))\",\"stepMsMedian\":$((rank + 2)),\"testAccuracy\":$acc}"
if [ "${FAKE_WORKER_MODE:-ok}" = fail_after_done ] && [ "$rank" = 1 ]; then exit 4; fi
)";

// A user's worker program for `tamp run CONFIG -- sh train.sh ARGS`: appends its arguments
// and TAMP_* environment to $FAKE_ENV_DIR/rank-$TAMP_RANK, prints lines that are not events
// around two STEP events and a DONE.
//   FAKE_FAIL_RANK=J            worker J exits 3 after its steps (with FAKE_FAIL_ONCE=1, only
//                               when TAMP_RESTART is unset)
//   FAKE_COMMAND_MODE=silent    exits 0 without printing anything
//   FAKE_COMMAND_MODE=hang      never finishes
//   FAKE_COMMAND_MODE=early     rank 1 reports DONE after step 1 of 2 and exits 0; the
//                               others after step 2, 1.5 s later
//   FAKE_COMMAND_MODE=cut       every rank reports DONE after step 1 of 2 (the script cut
//                               the run) and exits 0
//   FAKE_COMMAND_MODE=traceback rank 1 dies of a Python exception whose message runs 30
//                               lines; the others never finish
constexpr char kFakeCommand[] = R"(
echo $$ >> "$FAKE_PIDS"
{ echo "args=$*"; env | grep -E '^(TAMP_|RANK=|WORLD_SIZE=|LOCAL_|MASTER_)' | sort; } >> "$FAKE_ENV_DIR/rank-$TAMP_RANK"
case "${FAKE_COMMAND_MODE:-ok}" in
  silent) exit 0 ;;
  hang) exec sleep 30 ;;
  early) step=2; [ "$TAMP_RANK" = 1 ] && step=1 || sleep 1.5
         echo "{\"kind\":\"DONE\",\"step\":\"$step\",\"totalSteps\":\"2\"}"; exit 0 ;;
  cut) echo '{"kind":"DONE","step":"1","totalSteps":"2","bytesPushed":"100"}'; exit 0 ;;
  traceback) [ "$TAMP_RANK" = 1 ] || exec sleep 30
         { echo "Traceback (most recent call last):"; echo '  File "train.py", line 9'
           echo "NotImplementedError: Could not run 'aten::as_strided'"
           seq 30 | sed 's/^/dispatch key /'; } >&2
         exit 1 ;;
esac
echo "hello from $TAMP_RANK"
echo "{'loss': 0.5}"
echo '{"loss": 1.5}'
echo '{"kind":"BOGUS","step":"9"}'
echo '{"kind": 42}'
echo '{"kind":"STEP"'
echo
printf '\377{"kind"\n'
for i in 1 2; do
  echo "{\"kind\":\"STEP\",\"step\":\"$i\",\"totalSteps\":\"2\",\"loss\":$((3 - i)).25}"
done
if [ "$TAMP_RANK" = "${FAKE_FAIL_RANK:--1}" ] && [ -z "${TAMP_RESTART:-}" -o -z "${FAKE_FAIL_ONCE:-}" ]; then
  echo "rank $TAMP_RANK: bad batch" >&2
  exit 3
fi
echo '{"kind":"DONE","step":"2","bytesPushed":"100","bytesPulled":"300","stepMsMedian":4}'
)";

std::string TempDir() {
  const char* dir = getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The value of the MASTER_PORT= line in `env`, or "".
std::string MasterPort(const std::string& env) {
  const size_t at = env.find("MASTER_PORT=");
  if (at == std::string::npos) return "";
  const size_t begin = at + strlen("MASTER_PORT=");
  return env.substr(begin, env.find('\n', begin) - begin);
}

void WriteExecutable(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  ASSERT_EQ(chmod(path.c_str(), 0755), 0);
}

std::vector<pid_t> Pids(const std::string& path) {
  std::vector<pid_t> pids;
  for (absl::string_view line : absl::StrSplit(ReadFile(path), '\n', absl::SkipEmpty())) {
    int pid;
    if (absl::SimpleAtoi(line, &pid)) pids.push_back(pid);
  }
  return pids;
}

class JobTest : public ::testing::Test {
 protected:
  // JOB_TEST_DUMP=1 prints each test's console output.
  void TearDown() override {
    if (getenv("JOB_TEST_DUMP") != nullptr) std::cerr << out_.str();
  }

  void SetUp() override {
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = absl::StrCat(TempDir(), "/", name);
    mkdir(dir_.c_str(), 0755);
    WriteExecutable(dir_ + "/tamp_server", kFakeServer);
    WriteExecutable(dir_ + "/tamp_worker", kFakeWorker);
    std::ofstream(dir_ + "/train.sh") << kFakeCommand;
    env_dir_ = dir_ + "/env";
    mkdir(env_dir_.c_str(), 0755);
    setenv("FAKE_ENV_DIR", env_dir_.c_str(), 1);
    pids_ = dir_ + "/pids";
    setenv("FAKE_PIDS", pids_.c_str(), 1);
    for (const char* var : {"FAKE_SERVER_MODE", "FAKE_WORKER_MODE", "FAKE_FAIL_RANK",
                            "FAKE_FAIL_ONCE", "FAKE_SKIP_RANK", "FAKE_SKIP_MISSED", "FAKE_STEPS", "FAKE_COMMAND_MODE",
                            "FAKE_HANG_RANK"}) {
      unsetenv(var);
    }

    config_.set_version(1);
    config_.set_name("fake");
    config_.mutable_cluster()->set_num_servers(2);
    config_.mutable_cluster()->set_num_workers(2);
    config_.mutable_cluster()->set_host("127.0.0.1");
    config_.mutable_training()->set_epochs(1);

    options_.config_path = "/configs/fake.pbtxt";
    options_.run_dir = dir_ + "/run";
    options_.server_binary = dir_ + "/tamp_server";
    options_.worker_binary = dir_ + "/tamp_worker";
    options_.summary_json = dir_ + "/summary.json";
    options_.server_start_timeout = absl::Seconds(5);
    options_.stop_grace = absl::Seconds(2);
    options_.failure_grace = absl::Seconds(2);
  }

  int Run() {
    Console console;
    console.out = &out_;
    return RunJob(config_, options_, console);
  }

  // Every process the fakes recorded is gone (RunJob reaped them, so no zombies either).
  // A teardown may stop a child before it records itself, so at least `min_processes`.
  void ExpectAllGone(size_t min_processes) {
    const std::vector<pid_t> pids = Pids(pids_);
    EXPECT_GE(pids.size(), min_processes);
    for (pid_t pid : pids) {
      EXPECT_EQ(kill(pid, 0), -1) << "pid " << pid << " still exists";
      EXPECT_EQ(errno, ESRCH);
    }
  }

  // `tamp run CONFIG -- sh train.sh --lr 0.1` (sh found through PATH).
  void UseCommand() {
    options_.worker_binary = "";
    options_.command = {"sh", dir_ + "/train.sh", "--lr", "0.1"};
  }

  // Ctrl-C once the two servers and two workers are up: everything stops, exit 130.
  void RunAndInterruptOnceAllFourRun() {
    std::thread interrupter([this] {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (Pids(pids_).size() < 4 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      kill(getpid(), SIGINT);
    });
    const int code = Run();
    interrupter.join();
    ASSERT_EQ(code, kExitInterrupted) << out_.str();
    EXPECT_THAT(out_.str(), HasSubstr("tamp: interrupted (SIGINT); stopping 4 processes"));
    const events::RunSummary summary = ReadSummary();
    EXPECT_EQ(summary.outcome(), "interrupted");
    EXPECT_EQ(summary.failure(), "interrupted (SIGINT)");
    ExpectAllGone(4);
  }

  events::RunSummary ReadSummary() {
    events::RunSummary summary;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(ReadFile(options_.summary_json),
                                                            &summary)
                    .ok())
        << options_.summary_json;
    return summary;
  }

  std::string dir_;
  std::string env_dir_;
  std::string pids_;
  config::RunConfig config_;
  RunOptions options_;
  std::ostringstream out_;
};

TEST_F(JobTest, SuccessStopsServersAndWritesSummary) {
  ASSERT_EQ(Run(), kExitOk) << out_.str();
  const std::string out = out_.str();
  EXPECT_THAT(out, HasSubstr("tamp: servers listening on 127.0.0.1:40000, 127.0.0.1:40001"));
  EXPECT_THAT(out, HasSubstr("[worker 1] worker 1 says hello"));
  EXPECT_THAT(out, HasSubstr("epoch 1/1: test accuracy 75.00%"));
  EXPECT_THAT(out, HasSubstr("step 5/5 (100%)"));
  EXPECT_THAT(out, HasSubstr("tamp: done: test accuracy 75.00%, 5 steps in "));
  EXPECT_THAT(out, HasSubstr("compression 10.0x"));

  // Children got the documented flags; servers were stopped with SIGTERM.
  const std::string server_log = ReadFile(options_.run_dir + "/server-1.log");
  EXPECT_THAT(server_log, HasSubstr("--config=/configs/fake.pbtxt --rank=1 --host=127.0.0.1 "
                                    "--port=0 --port_file=" +
                                    options_.run_dir + "/server-1.port"));
  EXPECT_THAT(server_log, HasSubstr("server 1 stopping"));
  EXPECT_THAT(ReadFile(options_.run_dir + "/worker-0.log"),
              HasSubstr("--config=/configs/fake.pbtxt --rank=0 "
                        "--servers=127.0.0.1:40000,127.0.0.1:40001 --placement=flags\n"));
  EXPECT_THAT(server_log, HasSubstr(".port --placement=flags\n"));

  events::RunSummary summary;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(ReadFile(options_.summary_json), &summary).ok());
  EXPECT_EQ(summary.name(), "fake");
  EXPECT_EQ(summary.outcome(), "completed");
  EXPECT_EQ(summary.failure(), "");
  EXPECT_DOUBLE_EQ(summary.test_accuracy(), 0.75);
  EXPECT_EQ(summary.steps(), 5u);
  EXPECT_EQ(summary.epochs(), 1u);
  EXPECT_GT(summary.wall_seconds(), 0);
  EXPECT_DOUBLE_EQ(summary.step_ms_median(), 2.5);
  EXPECT_EQ(summary.bytes_pushed(), 1100u);
  EXPECT_EQ(summary.bytes_pulled(), 2000u);
  EXPECT_DOUBLE_EQ(summary.compression_ratio(), 10.0);
  EXPECT_FLOAT_EQ(summary.final_loss(), 5.5f);
  EXPECT_THAT(ReadFile(options_.summary_json), HasSubstr("\"final_loss\":5.5"));
  // Each worker's events beside its log, for `tamp summarize` to read again; not its log lines.
  const std::string events = ReadFile(options_.run_dir + "/worker-1.events");
  EXPECT_THAT(events, HasSubstr("{\"kind\":\"STEP\",\"worker\":1,\"step\":\"5\""));
  EXPECT_THAT(events, HasSubstr("{\"kind\":\"DONE\",\"worker\":1,"));
  EXPECT_THAT(events, Not(HasSubstr("says hello")));
  ExpectAllGone(4);
}

TEST_F(JobTest, WorkerFailureTearsDownAndShowsItsLog) {
  setenv("FAKE_FAIL_RANK", "1", 1);
  setenv("FAKE_WORKER_MODE", "hang", 1);  // Worker 0 would run forever.
  ASSERT_EQ(Run(), kExitFailed) << out_.str();
  const std::string out = out_.str();
  EXPECT_THAT(out, HasSubstr("tamp: worker 1 failed (exit status 3)\n"));
  EXPECT_THAT(out, HasSubstr("lines of " + options_.run_dir + "/worker-1.log:\n"));
  EXPECT_THAT(out, HasSubstr("    worker 1: something broke\n"));
  EXPECT_THAT(out, HasSubstr("tamp: failed; logs are in " + options_.run_dir));
  EXPECT_THAT(out, Not(HasSubstr("done:")));
  // The summary holds what ran: 5 steps of each worker, no DONE.
  EXPECT_THAT(out, HasSubstr("tamp: summary of what ran: " + options_.summary_json));
  const events::RunSummary summary = ReadSummary();
  EXPECT_EQ(summary.outcome(), "failed");
  EXPECT_EQ(summary.failure(), "worker 1 failed (exit status 3)");
  EXPECT_EQ(summary.steps(), 5u);
  EXPECT_FALSE(summary.has_test_accuracy());
  EXPECT_EQ(summary.bytes_pushed(), 1000u);  // 500 each at step 5.
  EXPECT_DOUBLE_EQ(summary.compression_ratio(), 10.0);
  EXPECT_DOUBLE_EQ(summary.step_ms_median(), 2.0);
  ExpectAllGone(3);
}

TEST_F(JobTest, WorkerKilledBySignalFails) {
  setenv("FAKE_WORKER_MODE", "crash", 1);
  ASSERT_EQ(Run(), kExitFailed) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("failed (killed by SIGSEGV)\n"));
  ExpectAllGone(3);
}

TEST_F(JobTest, ServerDyingAtStartIsNamed) {
  setenv("FAKE_SERVER_MODE", "die", 1);
  ASSERT_EQ(Run(), kExitFailed) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("exited before listening (exit status 5)"));
  EXPECT_THAT(out_.str(), HasSubstr("    fatal: cannot bind"));
  EXPECT_THAT(out_.str(), Not(HasSubstr("[worker")));
  ExpectAllGone(1);
}

TEST_F(JobTest, ServerNotListeningInTimeFails) {
  setenv("FAKE_SERVER_MODE", "hang", 1);
  options_.server_start_timeout = absl::Milliseconds(300);
  ASSERT_EQ(Run(), kExitFailed) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("tamp: server 0 did not start listening within 0.3 s"));
  ExpectAllGone(2);
}

TEST_F(JobTest, ServerDyingWhileWorkersRunFails) {
  setenv("FAKE_SERVER_MODE", "die_later", 1);
  setenv("FAKE_WORKER_MODE", "hang", 1);
  ASSERT_EQ(Run(), kExitFailed) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("exited while workers were running (exit status 1)"));
  ExpectAllGone(2);
}

// A server without a checkpoint (none written yet, or every write failed) is not restarted:
// at step 0 it would refuse the workers' next pushes.
TEST_F(JobTest, RestartServersLeavesAServerWithoutACheckpointDead) {
  setenv("FAKE_SERVER_MODE", "die_later", 1);
  setenv("FAKE_WORKER_MODE", "hang", 1);
  options_.restart_servers = 2;
  ASSERT_EQ(Run(), kExitFailed) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("is not restarted: it has no checkpoint to resume from (" +
                                    options_.run_dir + "/checkpoints/shard-"));
  EXPECT_THAT(out_.str(), HasSubstr("exited while workers were running (exit status 1)"));
  EXPECT_THAT(out_.str(), Not(HasSubstr("restarting it")));
  ExpectAllGone(2);
}

TEST_F(JobTest, RestartServersStartsADeadServerAgainOnItsPortUpToTheLimit) {
  setenv("FAKE_SERVER_MODE", "die_later", 1);  // Every start dies 0.3 s later.
  setenv("FAKE_WORKER_MODE", "hang", 1);
  options_.restart_servers = 2;
  std::filesystem::create_directories(options_.run_dir + "/checkpoints");
  for (const char* shard : {"/checkpoints/shard-0.ckpt", "/checkpoints/shard-1.ckpt"}) {
    std::ofstream(options_.run_dir + shard) << "stand-in";
  }
  ASSERT_EQ(Run(), kExitFailed) << out_.str();
  const std::string out = out_.str();
  EXPECT_THAT(out, HasSubstr("exited while workers were running (exit status 1); restarting it "
                             "on port 4000"));
  EXPECT_THAT(out, HasSubstr("(restart 1 of 2)"));
  EXPECT_THAT(out, HasSubstr("(restart 2 of 2)"));
  EXPECT_THAT(out, Not(HasSubstr("(restart 3 of 2)")));
  EXPECT_THAT(out, HasSubstr("exited while workers were running (exit status 1)\n"));
  // A restart has the first start's flags, with the port it listened on.
  std::string restarted;
  for (const char* log : {"/run/server-0.restart-1.log", "/run/server-1.restart-1.log"}) {
    if (std::ifstream(dir_ + log).good()) restarted = ReadFile(dir_ + log);
  }
  EXPECT_THAT(restarted, testing::MatchesRegex(
                             "(.|\n)*--host=127.0.0.1 --port=4000[01] --port_file=(.|\n)*"));
}

TEST_F(JobTest, RestartWorkersStartsADeadWorkerAgainToResumeAndCountsItInTheSummary) {
  setenv("FAKE_FAIL_RANK", "1", 1);
  setenv("FAKE_FAIL_ONCE", "1", 1);
  options_.restart_workers = 1;
  ASSERT_EQ(Run(), kExitOk) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("tamp: worker 1 failed (exit status 3); restarting it "
                                    "(restart 1 of 1), it rejoins the run"));
  // The same flags, and --resume; its own log.
  EXPECT_THAT(ReadFile(dir_ + "/run/worker-1.restart-1.log"),
              HasSubstr("--rank=1 --servers=127.0.0.1:40000,127.0.0.1:40001 "
                        "--placement=flags --resume"));
  EXPECT_THAT(ReadFile(dir_ + "/run/worker-1.log"), HasSubstr("something broke"));
  events::RunSummary summary;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(ReadFile(options_.summary_json), &summary).ok());
  EXPECT_EQ(summary.worker_restarts(), 1u);
  EXPECT_EQ(summary.server_restarts(), 0u);
  // Worker 0's 500, the dead worker 1's last STEP (500) and its successor's DONE (600).
  EXPECT_EQ(summary.bytes_pushed(), 1600u);
  ExpectAllGone(5);
}

TEST_F(JobTest, RestartWorkersGivesUpAfterTheLimit) {
  setenv("FAKE_FAIL_RANK", "1", 1);  // Every start of worker 1 fails.
  options_.restart_workers = 1;
  ASSERT_EQ(Run(), kExitFailed) << out_.str();
  const std::string out = out_.str();
  EXPECT_THAT(out, HasSubstr("(restart 1 of 1)"));
  EXPECT_THAT(out, Not(HasSubstr("(restart 2 of 1)")));
  EXPECT_THAT(out, HasSubstr("tamp: worker 1 failed (exit status 3)\n"));
  ExpectAllGone(4);
}

// A worker whose events say it missed steps (the servers dropped it, it rejoined) is named,
// and the summary counts them.
TEST_F(JobTest, AWorkerThatRejoinedIsNamedWithTheStepsItMissed) {
  setenv("FAKE_SKIP_RANK", "1", 1);
  setenv("FAKE_SKIP_MISSED", "1", 1);
  ASSERT_EQ(Run(), kExitOk) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("tamp: worker 1 took no part in 2 steps before step 4: its "
                                    "step failed and it rejoined at the others' step"));
  EXPECT_EQ(ReadSummary().worker_steps_missed(), 2u);
}

// A worker that reports only some steps (a script logging every few) missed none: nothing
// is said, nothing counted.
TEST_F(JobTest, AWorkerThatReportsSomeStepsOnlyMissedNone) {
  setenv("FAKE_SKIP_RANK", "1", 1);
  ASSERT_EQ(Run(), kExitOk) << out_.str();
  EXPECT_THAT(out_.str(), Not(HasSubstr("took no part")));
  EXPECT_THAT(out_.str(), Not(HasSubstr("rejoined")));
  EXPECT_EQ(ReadSummary().worker_steps_missed(), 0u);
}

// A worker that fails after reporting the run's last step is not restarted (a new process
// would rejoin a run that is over for it), and the failure says its training completed.
TEST_F(JobTest, RestartWorkersLeavesAWorkerThatFinishedTheRun) {
  setenv("FAKE_WORKER_MODE", "fail_after_done", 1);
  options_.restart_workers = 2;
  ASSERT_EQ(Run(), kExitFailed) << out_.str();
  const std::string out = out_.str();
  EXPECT_THAT(out, HasSubstr("tamp: worker 1 is not restarted: it had reported its DONE at the "
                             "run's end before it failed\n"));
  EXPECT_THAT(out, HasSubstr("tamp: worker 1 failed (exit status 4) after it reported its DONE "
                             "at the run's end: its training had completed\n"));
  EXPECT_THAT(out, Not(HasSubstr("restarting it")));
  EXPECT_EQ(ReadSummary().worker_restarts(), 0u);
}

TEST_F(JobTest, RestartedCommandGetsTampRestart) {
  options_.worker_binary.clear();
  options_.command = {"sh", dir_ + "/train.sh"};
  setenv("FAKE_FAIL_RANK", "0", 1);
  setenv("FAKE_FAIL_ONCE", "1", 1);
  options_.restart_workers = 3;
  ASSERT_EQ(Run(), kExitOk) << out_.str();
  // Rank 0's first start has no TAMP_RESTART, its second TAMP_RESTART=1; rank 1 never.
  const std::string rank0 = ReadFile(env_dir_ + "/rank-0");
  EXPECT_EQ(rank0.find("TAMP_RESTART"), rank0.find("TAMP_RESTART=1\n")) << rank0;
  EXPECT_THAT(rank0, HasSubstr("TAMP_RESTART=1\n"));
  EXPECT_THAT(ReadFile(env_dir_ + "/rank-1"), Not(HasSubstr("TAMP_RESTART")));
  EXPECT_THAT(out_.str(), HasSubstr("(restart 1 of 3)"));
  EXPECT_THAT(out_.str(), Not(HasSubstr("(restart 2 of 3)")));
}

TEST_F(JobTest, WorkerWithoutDoneFails) {
  setenv("FAKE_WORKER_MODE", "nodone", 1);
  ASSERT_EQ(Run(), kExitFailed) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("exited (exit status 0) without reporting DONE"));
  ExpectAllGone(3);
}

TEST_F(JobTest, MetricsFileGetsEveryStepAndShardLoadIsShown) {
  options_.metrics_file = dir_ + "/metrics.jsonl";
  // A model gives the job a layout: MLP 784-64-10 in 16 KiB chunks on 2 shards.
  ASSERT_TRUE(google::protobuf::TextFormat::MergeFromString(
      R"(model { kind: MLP hidden: [64] } compression { partition_bytes: 16384 })", &config_));
  ASSERT_EQ(Run(), kExitOk) << out_.str();
  const std::string out = out_.str();
  EXPECT_THAT(out, HasSubstr("tamp: shard 0: "));
  EXPECT_THAT(out, HasSubstr("tamp: shard 1: "));
  EXPECT_THAT(out, Not(HasSubstr("tamp: shard 2: ")));
  EXPECT_THAT(out, HasSubstr(" chunks, "));
  const std::vector<std::string> lines =
      absl::StrSplit(ReadFile(options_.metrics_file), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 11u);  // 5 steps x 2 workers, and worker 0's EVAL.
  int per_worker[2] = {0, 0};
  int evals = 0;
  for (const std::string& line : lines) {
    EXPECT_EQ(line.front(), '{');
    if (absl::StrContains(line, R"("test_accuracy":)")) {
      ++evals;
      EXPECT_THAT(line, HasSubstr(R"("test_accuracy":0.75})"));
      continue;
    }
    if (absl::StartsWith(line, R"({"format_version":2,"worker":0,)")) ++per_worker[0];
    if (absl::StartsWith(line, R"({"format_version":2,"worker":1,)")) ++per_worker[1];
  }
  EXPECT_EQ(per_worker[0], 5);
  EXPECT_EQ(per_worker[1], 5);
  EXPECT_EQ(evals, 1);
}

// A run again on the same run_dir (a resume) keeps the earlier run's metrics beside its logs
// before it writes its own.
TEST_F(JobTest, ARunAgainKeepsTheEarlierRunsMetrics) {
  options_.metrics_file = dir_ + "/metrics.jsonl";
  ASSERT_EQ(Run(), kExitOk) << out_.str();
  const std::string first = ReadFile(options_.metrics_file);
  ASSERT_THAT(first, HasSubstr(R"("worker":1,"step":5,)"));
  setenv("FAKE_STEPS", "3", 1);
  out_.str("");
  ASSERT_EQ(Run(), kExitOk) << out_.str();
  const std::string kept = options_.run_dir + "/earlier-1/metrics.jsonl";
  EXPECT_THAT(out_.str(), HasSubstr("tamp: the earlier run's metrics copied to " + kept));
  EXPECT_EQ(ReadFile(kept), first);
  EXPECT_THAT(ReadFile(options_.metrics_file), Not(HasSubstr(R"("step":5,)")));
  EXPECT_THAT(ReadFile(options_.metrics_file), HasSubstr(R"("worker":1,"step":3,)"));
}

TEST_F(JobTest, UnwritableMetricsFileIsAUsageError) {
  options_.metrics_file = dir_ + "/no/such/dir/metrics.jsonl";
  EXPECT_EQ(Run(), kExitUsage);
  EXPECT_THAT(out_.str(), HasSubstr("cannot write the metrics file"));
}

TEST_F(JobTest, ExternalServersStartOnlyWorkers) {
  config_.mutable_cluster()->add_server_addresses("10.0.0.1:7001");
  config_.mutable_cluster()->add_server_addresses("10.0.0.2:7002");
  options_.server_binary = "";
  ASSERT_EQ(Run(), kExitOk) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("tamp: using servers 10.0.0.1:7001, 10.0.0.2:7002"));
  EXPECT_THAT(ReadFile(options_.run_dir + "/worker-1.log"),
              HasSubstr("--servers=10.0.0.1:7001,10.0.0.2:7002"));
  EXPECT_NE(access((options_.run_dir + "/server-0.log").c_str(), F_OK), 0);
  ExpectAllGone(2);
}

TEST_F(JobTest, CommandWorkersFindTheirPlacementInTheEnvironment) {
  UseCommand();
  ASSERT_EQ(Run(), kExitOk) << out_.str();
  for (int rank = 0; rank < 2; ++rank) {
    // Appended by each run of the command: one run per rank. Both have the same
    // MASTER_PORT (torch.distributed's rendezvous), a port nothing listened on.
    const std::string env = ReadFile(absl::StrCat(env_dir_, "/rank-", rank));
    const std::string port = MasterPort(env);
    ASSERT_FALSE(port.empty()) << env;
    EXPECT_EQ(port, MasterPort(ReadFile(absl::StrCat(env_dir_, "/rank-0"))));
    EXPECT_GT(std::stoi(port), 0);
    EXPECT_EQ(env, absl::StrCat("args=--lr 0.1\n"
                                "LOCAL_RANK=",
                                rank, "\nLOCAL_WORLD_SIZE=2\nMASTER_ADDR=127.0.0.1\nMASTER_PORT=",
                                port, "\nRANK=", rank,
                                "\nTAMP_CONFIG=/configs/fake.pbtxt\n"
                                "TAMP_LOCAL_RANK=",
                                rank, "\nTAMP_NUM_WORKERS=2\nTAMP_RANK=", rank,
                                "\nTAMP_SERVERS=127.0.0.1:40000,127.0.0.1:40001\nWORLD_SIZE=2\n"));
  }
  EXPECT_NE(access((env_dir_ + "/rank-2").c_str(), F_OK), 0);
  const std::string out = out_.str();
  EXPECT_THAT(out, HasSubstr("2 workers (sh " + dir_ + "/train.sh --lr 0.1)"));
  EXPECT_THAT(out, HasSubstr("step 2/2 (100%)"));
  EXPECT_THAT(out, HasSubstr("[worker 1] hello from 1"));
  // Its DONE carries no testAccuracy: the worker did not evaluate, which the summary says.
  EXPECT_THAT(out, HasSubstr("tamp: done: no test accuracy reported, 2 steps in "));

  // Lines that are not events are in the worker's log; events are not.
  const std::string log = ReadFile(options_.run_dir + "/worker-0.log");
  EXPECT_THAT(log, HasSubstr("hello from 0\n{'loss': 0.5}\n{\"loss\": 1.5}\n"
                             "{\"kind\":\"BOGUS\",\"step\":\"9\"}\n{\"kind\": 42}\n"
                             "{\"kind\":\"STEP\"\n\n\xff{\"kind\"\n"));
  EXPECT_THAT(log, Not(HasSubstr("\"totalSteps\"")));
  EXPECT_THAT(log, Not(HasSubstr("DONE")));

  // The summary comes from the events alone.
  events::RunSummary summary;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(ReadFile(options_.summary_json), &summary).ok());
  EXPECT_EQ(summary.steps(), 2u);
  EXPECT_EQ(summary.bytes_pushed(), 200u);
  EXPECT_EQ(summary.bytes_pulled(), 600u);
  EXPECT_DOUBLE_EQ(summary.step_ms_median(), 4);
  EXPECT_FLOAT_EQ(summary.final_loss(), 1.25f);
  ExpectAllGone(4);
}

TEST_F(JobTest, CommandWithoutEventsEndsWithTheWallTime) {
  UseCommand();
  setenv("FAKE_COMMAND_MODE", "silent", 1);
  ASSERT_EQ(Run(), kExitOk) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("tamp: worker 0 reported no DONE event; the summary holds "
                                    "the wall time only\ntamp: done in "));
  events::RunSummary summary;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(ReadFile(options_.summary_json), &summary).ok());
  EXPECT_EQ(summary.name(), "fake");
  EXPECT_TRUE(summary.wall_time_only());
  EXPECT_EQ(summary.epochs(), 0u);  // Not the config's: nothing said how far the run went.
  EXPECT_GT(summary.wall_seconds(), 0);
  EXPECT_EQ(summary.steps(), 0u);
  EXPECT_EQ(summary.compression_ratio(), 0);
  ExpectAllGone(4);
}

// A script that leaves its training loop early is named when it exits; the others trained
// on without it, so the job fails, naming each worker's last step.
TEST_F(JobTest, CommandEndingBeforeTheOthersFailsTheJob) {
  UseCommand();
  setenv("FAKE_COMMAND_MODE", "early", 1);
  ASSERT_EQ(Run(), kExitFailed) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("tamp: worker 1 exited (exit status 0) after step 1 of the "
                                    "run's 2; the others wait for it"));
  EXPECT_THAT(out_.str(), HasSubstr("tamp: the workers ended at different steps (worker 0 "
                                    "after step 2, worker 1 after step 1): one left its "
                                    "training loop early"));
  ExpectAllGone(4);
}

// The others still running after one left early are not told it "finished the run" (a user
// stopped a healthy job on that word): they wait for it until the servers drop it.
TEST_F(JobTest, WorkersRunningOnAfterOneLeftEarlyAreToldWhy) {
  UseCommand();
  setenv("FAKE_COMMAND_MODE", "early", 1);
  options_.straggler_notice = absl::Milliseconds(200);
  ASSERT_EQ(Run(), kExitFailed) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("tamp: worker 0 is still running 200ms after worker 1 left "
                                    "the run after step 1 of 2; they wait for it at their "
                                    "barriers until consistency.worker_timeout_ms drops it"));
  EXPECT_THAT(out_.str(), Not(HasSubstr("finished the run")));
  ExpectAllGone(4);
}

// A script that cuts the run (its own step limit) on every worker alike ends the job there.
TEST_F(JobTest, CommandCuttingTheRunOnEveryWorkerEndsTheJob) {
  UseCommand();
  setenv("FAKE_COMMAND_MODE", "cut", 1);
  ASSERT_EQ(Run(), kExitOk) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("exited (exit status 0) after step 1 of the run's 2"));
  ExpectAllGone(4);
}

// The exception line of a Python traceback is shown where its message outruns the log's
// last lines.
TEST_F(JobTest, FailingCommandsPythonExceptionIsShown) {
  UseCommand();
  setenv("FAKE_COMMAND_MODE", "traceback", 1);
  ASSERT_EQ(Run(), kExitFailed) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("tamp: worker 1 failed (exit status 1)\ntamp: its Python "
                                    "exception: NotImplementedError: Could not run "
                                    "'aten::as_strided'\ntamp: last 20 lines of "));
  ExpectAllGone(4);
}

TEST_F(JobTest, FailingCommandStopsTheJobNamingItsWorker) {
  UseCommand();
  setenv("FAKE_FAIL_RANK", "1", 1);
  ASSERT_EQ(Run(), kExitFailed) << out_.str();
  const std::string out = out_.str();
  EXPECT_THAT(out, HasSubstr("tamp: worker 1 failed (exit status 3)\n"));
  EXPECT_THAT(out, HasSubstr("    rank 1: bad batch\n"));
  EXPECT_EQ(ReadSummary().failure(), "worker 1 failed (exit status 3)");
  ExpectAllGone(3);
}

// Before any server starts: a usage error.
TEST_F(JobTest, CommandThatCannotBeExecutedIsRefusedNamingIt) {
  options_.command = {"no-such-trainer-for-tamp", "train.py"};
  ASSERT_EQ(Run(), kExitUsage) << out_.str();
  EXPECT_THAT(out_.str(),
              HasSubstr("tamp: cannot execute no-such-trainer-for-tamp: not found in PATH\n"));
  EXPECT_THAT(out_.str(), Not(HasSubstr("servers listening")));
  EXPECT_EQ(Pids(pids_).size(), 0u);  // Nothing started.

  out_.str("");
  options_.command = {dir_ + "/train.sh"};  // Not executable.
  ASSERT_EQ(Run(), kExitUsage) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("tamp: cannot execute " + dir_ + "/train.sh: Permission denied\n"));
  options_.command = {dir_ + "/no-such.sh"};
  ASSERT_EQ(Run(), kExitUsage) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("tamp: cannot execute " + dir_ + "/no-such.sh: No such file"));
  options_.command = {dir_};
  ASSERT_EQ(Run(), kExitUsage) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("tamp: cannot execute " + dir_ + ": not a regular file"));
  const std::string script = dir_ + "/bad_interpreter.sh";  // Executable, its #! is not.
  std::ofstream(script) << "#!/no/such/interpreter -u\necho hi\n";
  ASSERT_EQ(chmod(script.c_str(), 0755), 0);
  options_.command = {script};
  ASSERT_EQ(Run(), kExitUsage) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("tamp: cannot execute " + script + ": its interpreter "
                                    "/no/such/interpreter (its #! line): No such file"));
  EXPECT_EQ(Pids(pids_).size(), 0u);  // Nothing started.
}

TEST_F(JobTest, StubbornServerIsKilledAfterTheGrace) {
  setenv("FAKE_SERVER_MODE", "stubborn", 1);
  options_.stop_grace = absl::Milliseconds(200);
  ASSERT_EQ(Run(), kExitOk) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("tamp: server 0 did not stop within 0.2 s of SIGTERM; killed"));
  ExpectAllGone(4);
}

// After a failure the grace is --kill_grace's (RunOptions::failure_grace), and the message
// names the flag that gives more.
TEST_F(JobTest, StubbornServerIsKilledAfterTheKillGraceOnAFailure) {
  setenv("FAKE_SERVER_MODE", "stubborn", 1);
  setenv("FAKE_FAIL_RANK", "1", 1);
  options_.failure_grace = absl::Milliseconds(300);
  ASSERT_EQ(Run(), kExitFailed) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("tamp: server 0 did not stop within 0.3 s of SIGTERM; "
                                    "killed (--kill_grace)"));
  ExpectAllGone(3);
}

TEST_F(JobTest, KillGraceZeroKillsAtOnceSayingSo) {
  setenv("FAKE_SERVER_MODE", "stubborn", 1);
  setenv("FAKE_FAIL_RANK", "1", 1);
  options_.failure_grace = absl::ZeroDuration();
  ASSERT_EQ(Run(), kExitFailed) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("tamp: server 0 killed at once (--kill_grace=0)"));
  EXPECT_THAT(out_.str(), Not(HasSubstr("did not stop within")));
  ExpectAllGone(3);
}

TEST_F(JobTest, UncleanServerStopIsAWarningOnly) {
  setenv("FAKE_SERVER_MODE", "bad_stop", 1);
  ASSERT_EQ(Run(), kExitOk) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("tamp: warning: server 1 stopped with exit status 2; see " +
                                    options_.run_dir + "/server-1.log"));
  EXPECT_TRUE(ReadFile(options_.summary_json).size() > 0);
  ExpectAllGone(4);
}

// A worker that runs on after another finished the run (one the servers dropped and that
// hangs cannot rejoin) is named on the console, then again 5 times as late.
TEST_F(JobTest, WorkersStillRunningAfterAnotherFinishedAreNamed) {
  setenv("FAKE_HANG_RANK", "1", 1);
  options_.straggler_notice = absl::Seconds(1);
  std::thread interrupter([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(3500));
    kill(getpid(), SIGINT);
  });
  const int code = Run();
  interrupter.join();
  ASSERT_EQ(code, kExitInterrupted) << out_.str();
  const std::string out = out_.str();
  EXPECT_THAT(out, HasSubstr("tamp: worker 1 is still running 1s after worker 0 finished the "
                             "run; one the servers dropped"));
  EXPECT_THAT(out, Not(HasSubstr("worker 0 is still running")));
  EXPECT_THAT(out, Not(HasSubstr("running 5s after")));  // The next notice is due at 5 s.
  ExpectAllGone(3);
}

// --finish_timeout: a worker still running that long after another finished the run fails
// the job, which stops it; the summary holds the run that finished.
TEST_F(JobTest, FinishTimeoutStopsAWorkerStillRunningAfterAnotherFinished) {
  setenv("FAKE_HANG_RANK", "1", 1);
  options_.finish_timeout = absl::Seconds(1);
  ASSERT_EQ(Run(), kExitFailed) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("tamp: worker 1 was still running 1s after worker 0 "
                                    "finished the run (--finish_timeout; worker 1 last "
                                    "reported step 5)\n"));
  const events::RunSummary summary = ReadSummary();
  EXPECT_EQ(summary.outcome(), "failed");
  EXPECT_EQ(summary.failure(), "worker 1 was still running 1s after worker 0 finished the run "
                               "(--finish_timeout; worker 1 last reported step 5)");
  EXPECT_EQ(summary.steps(), 5u);
  EXPECT_DOUBLE_EQ(summary.test_accuracy(), 0.75);  // Worker 0's DONE.
  ExpectAllGone(3);
}

TEST_F(JobTest, InterruptTearsDownWith130) {
  setenv("FAKE_WORKER_MODE", "hang", 1);
  RunAndInterruptOnceAllFourRun();
}

TEST_F(JobTest, InterruptTearsDownCommandWorkersWith130) {
  UseCommand();
  setenv("FAKE_COMMAND_MODE", "hang", 1);
  RunAndInterruptOnceAllFourRun();
}

}  // namespace
}  // namespace tamp::launcher

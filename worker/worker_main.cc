// tamp_worker: one training worker. Started by `tamp run` or a cluster engine:
//   tamp_worker --config=job.pbtxt --rank=0 --servers=10.0.0.1:4000,10.0.0.2:4000
// Progress goes to stdout as one tamp.events.WorkerEvent JSON object per line; logs to stderr.
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <cblas.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "base/malloc_settings.h"
#include "base/program_usage.h"
#include "base/proto_json.h"
#include "glog/logging.h"
#include "job/builtin_trainer_config.h"
#include "job/chunk_codecs.h"
#include "job/config.h"
#include "job/job_layout.h"
#include "job/placement.h"
#include "job/placement_flags.h"
#include "job/security.h"
#include "protocol/grpc_security.h"
#include "worker/gpu_model.h"
#include "worker/openblas_kernels.h"
#include "worker/trainer.h"

ABSL_FLAG(std::string, config, "",
          "Run configuration (text proto). Required; TAMP_CONFIG when left out.");
ABSL_FLAG(std::optional<uint32_t>, rank, std::nullopt,
          "This worker's rank in [0, cluster.num_workers); 0 when not given. Given with "
          "another placement (--placement), it must agree with the environment's rank.");
ABSL_FLAG(std::string, servers, "",
          "Comma-separated host:port of every shard, in shard order. Default: "
          "cluster.server_addresses from the config.");
ABSL_FLAG(bool, check, false,
          "Load and validate CONFIG, resolve the placement, read the TLS and job token files, "
          "print the placement and exit without training.");
ABSL_FLAG(bool, resume, false,
          "This process replaces a dead worker of its rank: rejoin the run at the other "
          "workers' step with the servers' weights (SYNC) instead of starting it. Also on when "
          "TAMP_RESTART is set to a number >= 1 (tamp run --restart_workers sets it).");
ABSL_FLAG(int, blas_threads, 1, "OpenBLAS threads for this worker's GEMMs.");
ABSL_FLAG(std::string, device, "",
          "cpu or cuda: where to run the built-in model, overriding the config's `device` "
          "(docs/gpu.md). Default: the config's (CPU when unset).");
ABSL_FLAG(std::string, dump_weights, "",
          "After training, write the replica's parameters here (raw little-endian fp32, "
          "layout order). For tests that compare replicas.");

namespace {

constexpr int kUsageError = 2;

// --blas_threads and --dump_weights, refused now rather than ignored (OpenBLAS takes a thread
// count below 1 for its default) or after the whole run (a directory that is not there).
absl::Status CheckOutputFlags() {
  if (const int threads = absl::GetFlag(FLAGS_blas_threads); threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--blas_threads=", threads, ": must be at least 1"));
  }
  const std::string dump = absl::GetFlag(FLAGS_dump_weights);
  if (dump.empty()) return absl::OkStatus();
  const std::string dir = std::filesystem::path(dump).has_parent_path()
                              ? std::filesystem::path(dump).parent_path().string()
                              : ".";
  if (access(dir.c_str(), W_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--dump_weights=", dump, ": cannot write in ",
                                                   dir, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

bool DumpWeights(absl::Span<const float> params, const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return false;
  const bool written = std::fwrite(params.data(), sizeof(float), params.size(), file) == params.size();
  return std::fclose(file) == 0 && written;
}

// Applies --device to `config` and validates the result; an error names the flag.
absl::Status ApplyDeviceFlag(tamp::config::RunConfig* config) {
  const std::string device = absl::GetFlag(FLAGS_device);
  if (device.empty()) return absl::OkStatus();
  if (device == "cpu") {
    config->set_device(tamp::config::CPU);
  } else if (device == "cuda") {
    config->set_device(tamp::config::CUDA);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("--device=", device, ": must be cpu or cuda"));
  }
  if (absl::Status valid = tamp::ValidateConfig(*config); !valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--device=", device, ": ", valid.message()));
  }
  return absl::OkStatus();
}

// One line per event, in the style of every JSON file Tamp writes (base/proto_json.h).
void WriteEvent(const tamp::events::WorkerEvent& event) {
  const std::string line = tamp::ProtoToJson(event);
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  tamp::SetProgramUsage(
      "Tamp training worker. Example: tamp_worker --config=job.pbtxt --rank=0 --servers=h:p,h:p",
      {"worker/worker_main.cc", "job/placement_flags.cc"});
  tamp::ExitIfHelpAsked(argc, argv);
  tamp::ExitIfFlagsBad(argc, argv);
  // Before anything else: this may restart the program with faster GEMM kernels.
  tamp::ReexecWithFasterOpenblasKernels(argv);
  absl::ParseCommandLine(argc, argv);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  // gRPC's locks are absl::Mutex, and Debian's Abseil is built with its deadlock detector
  // on: a lock-order graph update on every lock, ~1.5% of a job's CPU in the servers.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // A crash prints the signal and a stack trace to stderr (the launcher shows the log tail).
  // SIGTERM is how a worker is stopped (tamp run, a cluster engine), not a crash: it ends
  // the process as by default, without glog's "*** Aborted ***" and stack.
  google::InstallFailureSignalHandler();
  std::signal(SIGTERM, SIG_DFL);
  if (absl::Status flags = CheckOutputFlags(); !flags.ok()) {
    std::cerr << "tamp_worker: " << flags.message() << "\n";
    return kUsageError;
  }
  // As a COMMAND's worker under `tamp run`, the placement's TAMP_CONFIG stands in for --config.
  std::string config_path = absl::GetFlag(FLAGS_config);
  if (const char* from_env = getenv("TAMP_CONFIG"); config_path.empty() && from_env != nullptr) {
    config_path = from_env;
  }
  if (config_path.empty()) {
    std::cerr << "tamp_worker: --config (or TAMP_CONFIG) is required\n";
    return kUsageError;
  }
  std::vector<std::string> notes;
  absl::StatusOr<tamp::config::RunConfig> config = tamp::LoadConfigFile(config_path, &notes);
  if (!config.ok()) {
    std::cerr << "tamp_worker: " << config.status().message() << "\n";
    return kUsageError;
  }
  for (const std::string& note : notes) std::cerr << "tamp_worker: warning: " << note << "\n";
  if (absl::Status device = ApplyDeviceFlag(&*config); !device.ok()) {
    std::cerr << "tamp_worker: " << device.message() << "\n";
    return kUsageError;
  }
  if (absl::Status trainer_needs = tamp::CheckBuiltInTrainerConfig(*config); !trainer_needs.ok()) {
    std::cerr << "tamp_worker: " << config_path << ": " << trainer_needs.message() << "\n";
    return kUsageError;
  }
  // The layout this worker would train (compression.automatic unresolved, a codec a chunk
  // cannot take: refused now, as a config, --check too).
  if (config->model().kind() != tamp::config::Model::REGISTERED) {
    absl::StatusOr<tamp::JobLayout> layout = tamp::BuildJobLayout(*config);
    absl::Status codecs = layout.ok() ? tamp::CheckChunkCodecs(*layout) : layout.status();
    if (!codecs.ok()) {
      std::cerr << "tamp_worker: " << config_path << ": " << codecs.message() << "\n";
      return kUsageError;
    }
  }
  const std::string servers_flag = absl::GetFlag(FLAGS_servers);
  std::vector<std::string> flag_servers;
  if (!servers_flag.empty()) {
    flag_servers = absl::StrSplit(servers_flag, ',');
  } else {
    flag_servers.assign(config->cluster().server_addresses().begin(),
                        config->cluster().server_addresses().end());
  }
  absl::StatusOr<tamp::PlacementRequest> request = tamp::PlacementRequestFromFlags(
      tamp::Role::kWorker, config->cluster(), absl::GetFlag(FLAGS_rank), std::move(flag_servers));
  if (!request.ok()) {
    std::cerr << "tamp_worker: " << request.status().message() << "\n";
    return kUsageError;
  }
  absl::StatusOr<tamp::Placement> placement = tamp::ResolvePlacement(*request, tamp::ProcessEnv());
  if (!placement.ok()) {
    std::cerr << "tamp_worker: " << config_path << ": " << placement.status().message() << "\n";
    return kUsageError;
  }
  const absl::StatusOr<bool> restarted = tamp::WorkerRestartedFromEnv(tamp::ProcessEnv());
  if (!restarted.ok()) {
    std::cerr << "tamp_worker: " << restarted.status().message() << "\n";
    return kUsageError;
  }
  const std::vector<std::string> servers = placement->servers;
  if (!servers_flag.empty() && servers != request->flag_servers) {
    // The environment named the servers (TAMP_SERVERS, Slurm, Kubernetes): a flag that says
    // otherwise would be dropped without a word.
    std::cerr << "tamp_worker: --servers=" << servers_flag << " contradicts the "
              << placement->source << " placement's servers " << absl::StrJoin(servers, ",")
              << ": drop the flag, or pass --placement=flags to place this worker by its flags\n";
    return kUsageError;
  }
  if (servers.empty()) {
    std::cerr << "tamp_worker: no server addresses: pass --servers or set "
                 "cluster.server_addresses\n";
    return kUsageError;
  }
  openblas_set_num_threads(absl::GetFlag(FLAGS_blas_threads));
  if (const char* coretype = tamp::BetterOpenblasCoretype(); coretype != nullptr) {
    LOG(WARNING) << "OpenBLAS runs its Prescott (SSE3) kernels although OPENBLAS_CORETYPE="
                 << getenv("OPENBLAS_CORETYPE") << " is set: GEMMs run ~4x slower than with "
                 << "OPENBLAS_CORETYPE=" << coretype;
  }

  const uint32_t rank = placement->rank;
  if (absl::GetFlag(FLAGS_check)) {
    // What connecting would read first: the job token and each server's channel credentials.
    absl::Status transport = tamp::LoadJobToken(config->cluster()).status();
    for (size_t i = 0; i < servers.size() && transport.ok(); ++i) {
      transport = tamp::MakeChannelCredentials(config->cluster(), servers[i]).status();
    }
    if (!transport.ok()) {
      std::cerr << "tamp_worker: " << config_path << ": " << transport.message() << "\n";
      return kUsageError;
    }
    std::cout << "tamp_worker: config ok; worker " << rank << " of "
              << config->cluster().num_workers() << " (placement: " << placement->source
              << "); servers: " << absl::StrJoin(servers, ",") << "\n";
    return 0;
  }
  if (config->device() == tamp::config::CUDA) {
    // The process's first CUDA call: after `tamp run` forked it, before any connection.
    const absl::StatusOr<int> gpu = tamp::SelectCudaDevice(placement->local_rank);
    if (!gpu.ok()) {
      std::cerr << "tamp_worker " << rank << ": device CUDA: no usable GPU: "
                << gpu.status().message() << "\n";
      return 1;
    }
    LOG(INFO) << "worker " << rank << " (local rank " << placement->local_rank << ") runs on GPU "
              << *gpu;
  }
  // Every step frees and allocates the same megabytes again: keep them instead of faulting
  // fresh pages in each time (base/malloc_settings.h). Only now, once the worker will
  // train: a refusal above stays the one line it prints.
  if (absl::Status kept = tamp::KeepFreedMemory(); !kept.ok()) LOG(WARNING) << kept;
  absl::StatusOr<std::unique_ptr<tamp::Trainer>> trainer =
      tamp::Trainer::Create(*std::move(config), rank, servers, WriteEvent);
  if (!trainer.ok()) {
    std::cerr << "tamp_worker " << rank << ": " << trainer.status() << "\n";
    return 1;
  }
  absl::Status status = (*trainer)->Run(absl::GetFlag(FLAGS_resume) || *restarted);
  if (!status.ok()) {
    std::cerr << "tamp_worker " << rank << ": " << status << "\n";
    return 1;
  }
  const std::string dump_path = absl::GetFlag(FLAGS_dump_weights);
  if (!dump_path.empty()) {
    const absl::StatusOr<std::vector<float>> params = (*trainer)->Params();
    if (!params.ok()) {
      std::cerr << "tamp_worker " << rank << ": --dump_weights: " << params.status() << "\n";
      return 1;
    }
    if (!DumpWeights(*params, dump_path)) {
      std::cerr << "tamp_worker " << rank << ": cannot write --dump_weights=" << dump_path
                << "\n";
      return 1;
    }
  }
  return 0;
}

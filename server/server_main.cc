// tamp_server: one parameter-server shard of a Tamp job.
//
//   tamp_server --config=job.pbtxt --rank=0 [--host=127.0.0.1] [--port=0] [--port_file=PATH]
//
// With a checkpoint block in the config it first resumes from <checkpoint.dir or
// --checkpoint_dir>/shard-<rank>.ckpt when that exists (for model.kind REGISTERED once the
// first worker handshake has told it the tensors; a checkpoint of other tensors refuses that
// handshake), and writes it every checkpoint.every_steps steps (server/checkpointer.h).
// Serves until SIGTERM or SIGINT, then answers the pushes still waiting with UNAVAILABLE,
// writes a final checkpoint (when configured), shuts the RPC server down (2 s grace) and
// exits 0, or 3 when that checkpoint could not be written (the shard's state since its last
// good one is lost: a restart would resume from that one, or from nothing). Exits 2 on bad
// flags or config (the message names the problem) and 1 when it cannot serve (port taken,
// port file not written, a damaged or mismatched checkpoint).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "base/malloc_settings.h"
#include "base/status_macros.h"
#include "glog/logging.h"
#include "grpcpp/grpcpp.h"
#include "base/program_usage.h"
#include "job/config.h"
#include "job/address.h"
#include "job/chunk_codecs.h"
#include "job/job_layout.h"
#include "job/placement.h"
#include "job/placement_flags.h"
#include "job/security.h"
#include "protocol/grpc_security.h"
#include "server/barrier_watchdog.h"
#include "server/checkpoint.h"
#include "server/checkpoint_lock.h"
#include "server/checkpointer.h"
#include "server/refusal_log.h"
#include "server/service.h"
#include "server/shard.h"
#include "server/shard_host.h"

ABSL_FLAG(std::string, config, "", "Run config, text-format tamp.config.RunConfig (required).");
ABSL_FLAG(std::optional<uint32_t>, rank, std::nullopt,
          "Index of this shard, in [0, cluster.num_servers); 0 when not given. Given with "
          "another placement (--placement), it must agree with the environment's rank.");
ABSL_FLAG(std::optional<std::string>, host, std::nullopt,
          "Address to listen on. Default: 127.0.0.1.");
ABSL_FLAG(std::optional<int32_t>, port, std::nullopt,
          "Port to listen on; 0 lets the system pick a free one. Default: the port of "
          "cluster.server_addresses[rank] when the config lists the servers, else 0.");
ABSL_FLAG(std::string, port_file, "",
          "Once listening, write \"<port>\\n\" to this file, atomically (for launchers).");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "Where this shard's checkpoint lives, in place of the config's checkpoint.dir (only "
          "with a checkpoint block in the config).");
ABSL_FLAG(bool, check, false,
          "Load and validate CONFIG, resolve the placement, read the TLS and job token files, "
          "print the placement and exit without serving.");

namespace tamp {
namespace {

constexpr int kExitCannotServe = 1;
constexpr int kExitUsage = 2;
// Room for PullWeights' framing (chunk ids, field tags) beyond the shard's raw weights.
constexpr uint64_t kPullWeightsSlack = 1 << 20;
constexpr uint64_t kGrpcMaxMessageBytes = 0x7fffffff;
constexpr auto kShutdownGrace = std::chrono::seconds(2);

std::string Megabytes(uint64_t bytes) { return absl::StrFormat("%.1f MB", bytes / 1e6); }

// Writes "<port>\n" so that a reader sees the whole file or none: write a temporary file,
// flush it to disk, then rename it over `path`.
absl::Status WritePortFile(const std::string& path, int port) {
  const std::string tmp = absl::StrCat(path, ".tmp");
  const std::string text = absl::StrCat(port, "\n");
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("--port_file: cannot create ", tmp, ": ", std::strerror(errno)));
  }
  bool written =
      write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && fsync(fd) == 0;
  written = close(fd) == 0 && written;
  if (!written || rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    unlink(tmp.c_str());
    return absl::UnavailableError(
        absl::StrCat("--port_file: cannot write ", path, ": ", std::strerror(error)));
  }
  return absl::OkStatus();
}

// Everything flags and config determine, checked before anything starts.
struct Setup {
  config::RunConfig config;
  JobLayout layout;
  uint32_t rank = 0;
  Placement placement;
  std::string host;
  std::string address;
  // Admission and transport (job/security.h): the job token ("" for none), TLS or allowed
  // plaintext, their files read here.
  std::string token;
  std::shared_ptr<grpc::ServerCredentials> credentials;
};

// --port, else the port the config lists for shard `rank` (workers that take the config's
// addresses reach it there), else 0. A --port other than the listed one is said: those
// workers will not reach this server.
absl::StatusOr<int> ListenPort(const config::Cluster& cluster, uint32_t rank,
                               const std::string& config_path) {
  const std::optional<int32_t> flag = absl::GetFlag(FLAGS_port);
  if (flag.has_value() && (*flag < 0 || *flag > 65535)) {
    return absl::InvalidArgumentError(absl::StrCat("--port ", *flag, " out of range [0, 65535]"));
  }
  if (static_cast<int>(rank) >= cluster.server_addresses_size()) return flag.value_or(0);
  const std::string& listed = cluster.server_addresses(static_cast<int>(rank));
  TAMP_ASSIGN_OR_RETURN(const uint32_t listed_port,
                        PortOf(listed, absl::StrCat(config_path, ": cluster.server_addresses[",
                                                    rank, "]")));
  if (!flag.has_value()) return static_cast<int>(listed_port);
  if (*flag != 0 && static_cast<uint32_t>(*flag) != listed_port) {
    std::fprintf(stderr,
                 "tamp_server: warning: --port=%d, but %s lists server %u as %s: workers that "
                 "take the config's addresses will not reach this server\n",
                 *flag, config_path.c_str(), rank, listed.c_str());
  }
  return *flag;
}

absl::StatusOr<Setup> Configure() {
  Setup setup;
  const std::string config_path = absl::GetFlag(FLAGS_config);
  if (config_path.empty()) return absl::InvalidArgumentError("--config is required");
  std::vector<std::string> notes;
  TAMP_ASSIGN_OR_RETURN(setup.config, LoadConfigFile(config_path, &notes));
  for (const std::string& note : notes) {
    std::fprintf(stderr, "tamp_server: warning: %s\n", note.c_str());
  }
  if (setup.config.model().kind() != config::Model::REGISTERED) {
    TAMP_ASSIGN_OR_RETURN(setup.layout, BuildJobLayout(setup.config));
    if (absl::Status codecs = CheckChunkCodecs(setup.layout); !codecs.ok()) {
      return absl::Status(codecs.code(), absl::StrCat(config_path, ": ", codecs.message()));
    }
  } else {  // The layout comes at the first handshake; what the config alone says, now.
    for (const absl::Status& refused :
         {CheckResolved(setup.config), CheckChunkCodecs(setup.config)}) {
      if (!refused.ok()) {
        return absl::Status(refused.code(), absl::StrCat(config_path, ": ", refused.message()));
      }
    }
  }
  TAMP_ASSIGN_OR_RETURN(const PlacementRequest request,
                        PlacementRequestFromFlags(Role::kServer, setup.config.cluster(),
                                                  absl::GetFlag(FLAGS_rank), {}));
  absl::StatusOr<Placement> placement = ResolvePlacement(request, ProcessEnv());
  if (!placement.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(config_path, ": ", placement.status().message()));
  }
  setup.placement = *std::move(placement);
  setup.rank = setup.placement.rank;
  const std::optional<std::string> host_flag = absl::GetFlag(FLAGS_host);
  int port = 0;
  if (setup.placement.listen_host.empty()) {  // Placed by the flags.
    setup.host = host_flag.value_or("127.0.0.1");
    TAMP_ASSIGN_OR_RETURN(port, ListenPort(setup.config.cluster(), setup.rank, config_path));
  } else {
    // The environment decides where to listen (Slurm, Kubernetes); a flag that says otherwise
    // would be dropped without a word.
    const std::optional<int32_t> port_flag = absl::GetFlag(FLAGS_port);
    const uint32_t placed_port = setup.placement.listen_port;
    const bool host_differs = host_flag && *host_flag != setup.placement.listen_host;
    if (host_differs || (port_flag && *port_flag != static_cast<int32_t>(placed_port))) {
      return absl::InvalidArgumentError(absl::StrCat(
          host_differs ? absl::StrCat("--host=", *host_flag)
                       : absl::StrCat("--port=", *port_flag),
          " contradicts the ", setup.placement.source, " placement, which listens on ",
          setup.placement.listen_host, ":", placed_port,
          ": drop the flag, or pass --placement=flags to place this server by its flags"));
    }
    setup.host = setup.placement.listen_host;
    port = static_cast<int>(placed_port);
  }
  // IPv6 literals need brackets in host:port.
  setup.address = absl::StrContains(setup.host, ':') && !absl::StartsWith(setup.host, "[")
                      ? absl::StrCat("[", setup.host, "]:", port)
                      : absl::StrCat(setup.host, ":", port);
  if (!setup.config.has_checkpoint() && !absl::GetFlag(FLAGS_checkpoint_dir).empty()) {
    return absl::InvalidArgumentError("--checkpoint_dir needs a checkpoint block in the config");
  }
  TAMP_ASSIGN_OR_RETURN(setup.token, LoadJobToken(setup.config.cluster()));
  TAMP_ASSIGN_OR_RETURN(setup.credentials,
                        MakeServerCredentials(setup.config.cluster(), setup.host));
  return setup;
}

// For --check: what the start would refuse of the checkpoint (Checkpointer::Start's
// probe, ReadCheckpoint's checks; for model.kind REGISTERED, whose job the first handshake
// tells, only the file's soundness). OK without a checkpoint block.
absl::Status CheckCheckpointForStart(const Setup& setup, const config::Checkpoint& spec) {
  if (!setup.config.has_checkpoint()) return absl::OkStatus();
  TAMP_RETURN_IF_ERROR(CheckCheckpointDirSet(spec));
  const std::string path = CheckpointPath(spec.dir(), setup.rank);
  TAMP_RETURN_IF_ERROR(CheckCheckpointWritable(path));
  // Another server of this shard running on the directory; released at once.
  TAMP_RETURN_IF_ERROR(CheckpointLock::Acquire(path).status());
  if (setup.config.model().kind() == config::Model::REGISTERED) {
    return CheckCheckpointSound(path);
  }
  const absl::StatusOr<checkpoint::ShardState> state =
      ReadCheckpoint(path, DescribeJob(setup.config, setup.layout, setup.rank));
  return state.ok() || absl::IsNotFound(state.status()) ? absl::OkStatus() : state.status();
}

void LogLoad(const Setup& setup) {
  if (setup.layout.chunks.empty()) {
    LOG(INFO) << "shard " << setup.rank << ": the layout comes from the first worker's handshake "
              << "(model.kind REGISTERED)";
    return;
  }
  const std::vector<uint32_t> mine = setup.layout.ChunksOfShard(setup.rank);
  LOG(INFO) << "shard " << setup.rank << " of " << setup.layout.shard_bytes.size() << ": "
            << mine.size() << " of " << setup.layout.chunks.size() << " chunks, "
            << Megabytes(setup.layout.shard_bytes[setup.rank]);
  std::string all;
  for (size_t shard = 0; shard < setup.layout.shard_bytes.size(); ++shard) {
    absl::StrAppend(&all, shard == 0 ? "" : ", ", shard, ": ",
                    Megabytes(setup.layout.shard_bytes[shard]));
  }
  LOG(INFO) << "bytes per shard: " << all;
}

int Main(int argc, char** argv) {
  tamp::SetProgramUsage(
      "Runs one parameter-server shard.\n"
      "  tamp_server --config=job.pbtxt --rank=0 [--host=H] [--port=P] [--port_file=F]",
      {"server/server_main.cc", "job/placement_flags.cc"});
  tamp::ExitIfHelpAsked(argc, argv);
  tamp::ExitIfFlagsBad(argc, argv);
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  FLAGS_logtostderr = 1;
  google::InitGoogleLogging(argv[0]);
  // gRPC's locks are absl::Mutex, and Debian's Abseil is built with its deadlock detector
  // on: a lock-order graph update on every lock, ~1.5% of a job's CPU in the servers.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // A crash prints the signal and a stack trace to stderr (the launcher shows the log tail).
  google::InstallFailureSignalHandler();
  // Every step frees and allocates the same megabytes again: keep them instead of faulting
  // fresh pages in each time (base/malloc_settings.h).
  if (absl::Status kept = tamp::KeepFreedMemory(); !kept.ok()) LOG(WARNING) << kept;
  // ... in one heap, where any of gRPC's threads finds them (base/malloc_settings.h).
  if (absl::Status shared = tamp::ShareOneHeap(); !shared.ok()) LOG(WARNING) << shared;
  // gRPC's own lines about bad requests and connections are bounded like the server's.
  RouteGrpcLogsThroughRefusalLog();
  if (positional.size() > 1) {
    std::fprintf(stderr, "tamp_server: unexpected argument '%s' (flags are --name=value)\n",
                 positional[1]);
    return kExitUsage;
  }
  // Blocked before any thread exists, so every thread inherits the mask and the signals wait
  // for sigwait() below instead of interrupting gRPC's threads.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  absl::StatusOr<Setup> setup = Configure();
  if (!setup.ok()) {
    std::fprintf(stderr, "tamp_server: %s\n", std::string(setup.status().message()).c_str());
    return kExitUsage;
  }
  // The host workers dial: this shard's address in the placement, else in the config.
  const config::Cluster& cluster = setup->config.cluster();
  const std::string dialed_host =
      setup->rank < setup->placement.servers.size()
          ? HostOfAddress(setup->placement.servers[setup->rank])
      : static_cast<int>(setup->rank) < cluster.server_addresses_size()
          ? HostOfAddress(cluster.server_addresses(static_cast<int>(setup->rank)))
          : setup->host;
  if (const std::string note = CertificateNameNote(cluster, dialed_host); !note.empty()) {
    std::fprintf(stderr, "tamp_server: warning: %s\n", note.c_str());
  }
  config::Checkpoint checkpoint_spec = setup->config.checkpoint();
  if (const std::string dir = absl::GetFlag(FLAGS_checkpoint_dir); !dir.empty()) {
    checkpoint_spec.set_dir(dir);
  }
  if (absl::GetFlag(FLAGS_check)) {
    // What the real start refuses of the checkpoint: a directory it cannot write, a file
    // that is damaged or (built-in models) of another job.
    if (absl::Status usable = CheckCheckpointForStart(*setup, checkpoint_spec); !usable.ok()) {
      std::fprintf(stderr, "tamp_server: %s\n", std::string(usable.message()).c_str());
      return kExitCannotServe;
    }
    // The servers' addresses are known only where the placement lists them (Slurm,
    // Kubernetes); by flags each server knows its own.
    const std::string servers =
        setup->placement.servers.empty()
            ? std::string()
            : absl::StrCat("; servers: ", absl::StrJoin(setup->placement.servers, ","));
    std::printf("tamp_server: config ok; shard %u of %u for %u workers (placement: %s), "
                "would listen on %s%s\n",
                setup->rank, setup->config.cluster().num_servers(),
                setup->config.cluster().num_workers(),
                setup->placement.source.c_str(), setup->address.c_str(), servers.c_str());
    return 0;
  }
  LogLoad(*setup);
  // Other models' shards read their checkpoint now (ShardHost::Create); a REGISTERED one
  // learns its job at the first handshake, but a damaged file is damaged for any job.
  if (setup->config.has_checkpoint() && !checkpoint_spec.dir().empty() &&
      setup->config.model().kind() == config::Model::REGISTERED) {
    if (absl::Status sound = CheckCheckpointSound(CheckpointPath(checkpoint_spec.dir(),
                                                                  setup->rank));
        !sound.ok()) {
      std::fprintf(stderr, "tamp_server: %s\n", std::string(sound.message()).c_str());
      return kExitCannotServe;
    }
  }
  // Made with the shard (at start, or for model.kind REGISTERED at the first handshake),
  // before it serves: the checkpointer first resumes it from its checkpoint, if any, then
  // writes them; in SYNC the watchdog drops dead or stalled workers from the barriers
  // (consistency.worker_timeout_ms). Both stop before the host (and its shard) goes.
  std::mutex made_with_shard_mu;
  std::unique_ptr<Checkpointer> checkpointer;
  std::unique_ptr<BarrierWatchdog> watchdog;
  bool checkpoint_refused = false;
  absl::StatusOr<std::unique_ptr<ShardHost>> host =
      ShardHost::Create(setup->config, setup->rank, [&](Shard& shard) -> absl::Status {
        std::lock_guard<std::mutex> lock(made_with_shard_mu);
        if (setup->config.has_checkpoint()) {
          absl::StatusOr<std::unique_ptr<Checkpointer>> started =
              Checkpointer::Start(&shard, checkpoint_spec);
          if (!started.ok()) {
            checkpoint_refused = true;
            return started.status();
          }
          checkpointer = *std::move(started);
        }
        watchdog = BarrierWatchdog::Start(&shard);
        return absl::OkStatus();
      });
  if (!host.ok()) {
    std::fprintf(stderr, "tamp_server: %s\n", std::string(host.status().message()).c_str());
    return checkpoint_refused ? kExitCannotServe : kExitUsage;
  }
  absl::Cleanup stop_made_with_shard = [&] {
    std::lock_guard<std::mutex> lock(made_with_shard_mu);
    watchdog.reset();
    checkpointer.reset();
  };
  LOG(INFO) << "transport: " << (setup->config.cluster().has_tls()
                                     ? (setup->config.cluster().tls().require_client_cert()
                                            ? "mutual TLS"
                                            : "TLS")
                                     : "plaintext")
            << (setup->token.empty() ? ", no job token" : ", job token required");
  ParameterServerService service(host->get(), setup->token);

  // Requests are bounded by validation.max_message_bytes; answers must fit the whole shard.
  const uint64_t max_receive = setup->config.validation().max_message_bytes() != 0
                                   ? setup->config.validation().max_message_bytes()
                                   : uint64_t{256} << 20;
  const uint64_t max_send = std::min(
      kGrpcMaxMessageBytes,
      std::max(max_receive, setup->layout.shard_bytes.empty()
                                ? kGrpcMaxMessageBytes  // REGISTERED: not known yet.
                                : setup->layout.shard_bytes[setup->rank] + kPullWeightsSlack));
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(setup->address, setup->credentials, &port);
  LimitRequests(max_receive, &builder);
  builder.SetMaxSendMessageSize(static_cast<int>(max_send));
  // gRPC sets SO_REUSEPORT by default: a second server on a taken port would start fine and
  // share the workers' connections with the first. Fail instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "tamp_server: cannot listen on %s (port in use or address not local%s)\n",
                 setup->address.c_str(),
                 setup->config.cluster().has_tls()
                     ? ", or gRPC refused the TLS certificate or key: its lines above say why"
                     : "");
    return kExitCannotServe;
  }
  LOG(INFO) << "shard " << setup->rank << " listening on port " << port;
  if (const std::string path = absl::GetFlag(FLAGS_port_file); !path.empty()) {
    if (absl::Status status = WritePortFile(path, port); !status.ok()) {
      LOG(ERROR) << status.message();
      if (Shard* shard = (*host)->shard()) {
        shard->Close(absl::UnavailableError("server failed to start"));
      }
      server->Shutdown();
      return kExitCannotServe;
    }
  }

  int signal = 0;
  sigwait(&stop_signals, &signal);
  LOG(INFO) << "got " << strsignal(signal) << ", shutting down";
  // Pushes of a step that can no longer complete must be answered, or Shutdown would wait
  // for them until the deadline and then cancel them without a reason.
  if (Shard* shard = (*host)->shard()) shard->Close(absl::UnavailableError("server shutting down"));
  bool checkpoint_lost = false;
  {
    std::lock_guard<std::mutex> lock(made_with_shard_mu);
    if (checkpointer != nullptr) {
      if (absl::Status written = checkpointer->WriteFinal(); !written.ok()) {
        LOG(ERROR) << "checkpoint: the final checkpoint was not written: " << written.message();
        checkpoint_lost = true;
      }
    }
  }
  server->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
  return checkpoint_lost ? kServerExitCheckpointLost : 0;
}

}  // namespace
}  // namespace tamp

int main(int argc, char** argv) { return tamp::Main(argc, argv); }

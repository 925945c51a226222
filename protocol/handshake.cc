#include "protocol/handshake.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"
#include "google/protobuf/message.h"
#include "google/protobuf/util/message_differencer.h"
#include "job/security.h"

namespace tamp {
namespace {

// Text of a config message as it would appear in a config file, braced so that an empty
// (all-default) message still reads as a value: {name: "topk" ratio: 0.01}, {}.
std::string Braced(const google::protobuf::Message& message) {
  return absl::StrCat("{", message.ShortDebugString(), "}");
}

absl::Status Differs(absl::string_view where, absl::string_view what, absl::string_view worker,
                     absl::string_view server) {
  return absl::FailedPreconditionError(
      absl::StrCat(where, what, " differs: worker ", worker, " vs server ", server));
}

absl::Status CompareMessage(absl::string_view where, absl::string_view what,
                            const google::protobuf::Message& worker,
                            const google::protobuf::Message& server) {
  if (google::protobuf::util::MessageDifferencer::Equals(worker, server)) {
    return absl::OkStatus();
  }
  return Differs(where, what, QuoteRequest(Braced(worker)), Braced(server));
}

std::string Range(uint64_t offset, uint64_t length) {
  return absl::StrCat("[", offset, ", +", length, "]");
}

// `worker` is chunk `id` of the worker's request; `server` is the same chunk as filled in
// from this shard's layout, so both sides are compared in their wire form.
absl::Status CompareChunk(uint32_t id, const rpc::ChunkInfo& worker, const rpc::ChunkInfo& server) {
  const std::string where = absl::StrCat("chunk ", id, " (", server.tensor(), " ",
                                         Range(server.offset(), server.length()), "): ");
  if (worker.chunk_id() != id) {
    return absl::FailedPreconditionError(absl::StrCat(where, "worker sent chunk_id ",
                                                      worker.chunk_id(),
                                                      " in its place (chunks go in id order)"));
  }
  if (worker.tensor() != server.tensor()) {
    return Differs(where, "tensor", absl::StrCat("\"", QuoteRequest(worker.tensor()), "\""),
                   absl::StrCat("\"", server.tensor(), "\""));
  }
  if (worker.offset() != server.offset() || worker.length() != server.length()) {
    return Differs(where, "range", Range(worker.offset(), worker.length()),
                   Range(server.offset(), server.length()));
  }
  if (worker.shard() != server.shard()) {
    return Differs(where, "shard", absl::StrCat(worker.shard()), absl::StrCat(server.shard()));
  }
  const config::ChunkCompression& w = worker.compression();
  const config::ChunkCompression& s = server.compression();
  TAMP_RETURN_IF_ERROR(CompareMessage(where, "push codec", w.push(), s.push()));
  TAMP_RETURN_IF_ERROR(
      CompareMessage(where, "push feedback", w.push_feedback(), s.push_feedback()));
  TAMP_RETURN_IF_ERROR(CompareMessage(where, "pull codec", w.pull(), s.pull()));
  return CompareMessage(where, "pull feedback", w.pull_feedback(), s.pull_feedback());
}

}  // namespace

void FillHandshake(const JobLayout& layout, const config::RunConfig& config, uint32_t worker_rank,
                   uint32_t server_rank, uint64_t steps_per_epoch, uint64_t total_steps,
                   rpc::HandshakeRequest* request) {
  request->Clear();
  request->set_protocol_version(kProtocolVersion);
  request->set_worker_rank(worker_rank);
  request->set_num_workers(config.cluster().num_workers());
  request->set_num_servers(config.cluster().num_servers());
  request->set_server_rank(server_rank);
  for (const TensorSpec& tensor : layout.tensors) {
    rpc::TensorInfo* info = request->add_tensors();
    info->set_name(tensor.name);
    for (int64_t dim : tensor.shape) info->add_shape(dim);
  }
  for (const ChunkPlan& plan : layout.chunks) {
    rpc::ChunkInfo* info = request->add_chunks();
    info->set_chunk_id(plan.chunk.id);
    info->set_tensor(layout.tensor_of(plan).name);
    info->set_offset(plan.chunk.offset);
    info->set_length(plan.chunk.length);
    info->set_shard(plan.chunk.shard);
    *info->mutable_compression() = plan.compression;
  }
  request->set_steps_per_epoch(steps_per_epoch);
  request->set_total_steps(total_steps);
  request->set_server_mode(config.server().mode());
  request->set_consistency_mode(config.consistency().mode());
}

absl::StatusOr<std::vector<TensorSpec>> HandshakeTensors(const rpc::HandshakeRequest& request) {
  constexpr int kMaxDimensions = 32;
  if (static_cast<size_t>(request.tensors_size()) > kMaxTensors) {
    return absl::InvalidArgumentError(absl::StrCat("the handshake lists ", request.tensors_size(),
                                                   " tensors; at most ", kMaxTensors,
                                                   " are allowed"));
  }
  std::vector<TensorSpec> tensors;
  tensors.reserve(request.tensors_size());
  for (int t = 0; t < request.tensors_size(); ++t) {
    const rpc::TensorInfo& info = request.tensors(t);
    if (info.shape_size() > kMaxDimensions) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", t, " has ", info.shape_size(),
                                                     " dimensions; at most ", kMaxDimensions,
                                                     " are allowed"));
    }
    TensorSpec spec;
    spec.name = info.name();
    spec.shape.assign(info.shape().begin(), info.shape().end());
    tensors.push_back(std::move(spec));
  }
  return tensors;
}

absl::Status CheckHandshakeHeader(const config::RunConfig& config, uint32_t server_rank,
                                  const rpc::HandshakeRequest& request) {
  const uint32_t worker = request.worker_rank();
  // A different protocol may mean different fields, so nothing else is compared.
  if (request.protocol_version() != kProtocolVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("protocol_version: worker ", worker, " speaks ", request.protocol_version(),
                     ", server ", server_rank, " speaks ", kProtocolVersion));
  }
  if (request.server_rank() != server_rank) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", worker, " addressed server ",
                                                      request.server_rank(), " but this is server ",
                                                      server_rank));
  }
  const config::Cluster& cluster = config.cluster();
  if (request.num_workers() != cluster.num_workers()) {
    return absl::FailedPreconditionError(
        absl::StrCat("num_workers: worker says ", request.num_workers(), ", server ", server_rank,
                     " says ", cluster.num_workers()));
  }
  if (request.num_servers() != cluster.num_servers()) {
    return absl::FailedPreconditionError(
        absl::StrCat("num_servers: worker says ", request.num_servers(), ", server ", server_rank,
                     " says ", cluster.num_servers()));
  }
  // Checked after the cluster size so that a worker started for a bigger job hears that.
  if (worker >= cluster.num_workers()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker_rank ", worker, " out of range: the job has ", cluster.num_workers(), " workers"));
  }
  if (request.server_mode() != config::Server::MODE_UNSPECIFIED &&
      request.server_mode() != config.server().mode()) {
    return Differs(absl::StrCat("worker ", worker, ": "), "server.mode",
                   config::Server::Mode_Name(request.server_mode()),
                   absl::StrCat(config::Server::Mode_Name(config.server().mode()),
                                " (started from another config)"));
  }
  if (request.consistency_mode() != config.consistency().mode()) {
    return Differs(absl::StrCat("worker ", worker, ": "), "consistency.mode",
                   config::Consistency::Mode_Name(request.consistency_mode()),
                   absl::StrCat(config::Consistency::Mode_Name(config.consistency().mode()),
                                " (started from another config)"));
  }
  return absl::OkStatus();
}

absl::Status CheckHandshake(const JobLayout& layout, const config::RunConfig& config,
                            uint32_t server_rank, const rpc::HandshakeRequest& request) {
  TAMP_RETURN_IF_ERROR(CheckHandshakeHeader(config, server_rank, request));
  const uint32_t worker = request.worker_rank();
  TAMP_ASSIGN_OR_RETURN(const std::vector<TensorSpec> tensors, HandshakeTensors(request));
  if (const std::string difference =
          FirstTensorDifference(tensors, layout.tensors, "worker", "server");
      !difference.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", worker, "'s tensors differ from "
                                                      "server ", server_rank, "'s: ", difference));
  }
  if (request.chunks_size() != static_cast<int>(layout.chunks.size())) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", worker, " has ",
                                                      request.chunks_size(), " chunks, server ",
                                                      server_rank, " has ", layout.chunks.size()));
  }
  // The server's own view in wire form, so both sides are compared field by field alike.
  rpc::HandshakeRequest own;
  FillHandshake(layout, config, worker, server_rank, request.steps_per_epoch(),
                request.total_steps(), &own);
  for (int i = 0; i < own.chunks_size(); ++i) {
    TAMP_RETURN_IF_ERROR(CompareChunk(i, request.chunks(i), own.chunks(i)));
  }
  return absl::OkStatus();
}

}  // namespace tamp

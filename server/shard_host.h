// ShardHost: the shard a server serves, made once its layout is known: at start-up for the
// built-in models (from the config alone), or for model.kind REGISTERED from the first
// worker handshake that passes every check (the tensors the workers registered). A hook
// prepares a made shard before it serves (resuming a checkpoint, starting a watchdog).
//
// Thread safety: all methods may be called concurrently; Join() serialises creation, and
// a created shard never changes. The host owns a shard it made.
//
// Example:
//   TAMP_ASSIGN_OR_RETURN(auto host, ShardHost::Create(config, rank, nullptr));
//   TAMP_ASSIGN_OR_RETURN(Shard* shard, host->Join(handshake_request));
#ifndef TAMP_SERVER_SHARD_HOST_H_
#define TAMP_SERVER_SHARD_HOST_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/config.pb.h"
#include "proto/tamp.pb.h"
#include "server/shard.h"

namespace tamp {

class ShardHost {
 public:
  // Runs once per shard made, before it serves (or joins the handshake that made it): e.g.
  // resumes its checkpoint and starts its barrier watchdog. An error discards the shard:
  // Create() returns it, or the handshake is refused with it (and the next one tries again).
  using OnCreated = std::function<absl::Status(Shard&)>;

  // Serves `shard`, which the caller owns and which must outlive the host.
  explicit ShardHost(Shard* shard);

  // ShardHost::Create()
  //
  // The host of server `rank` for the validated `config`: the shard is made now for MLP and
  // CNN (errors are Shard::Create()'s and `on_created`'s), at the first accepted handshake for
  // REGISTERED.
  static absl::StatusOr<std::unique_ptr<ShardHost>> Create(const config::RunConfig& config,
                                                           uint32_t rank, OnCreated on_created);

  ~ShardHost();

  // The shard, or null while no handshake has taught it its layout.
  Shard* shard() const { return shard_.load(std::memory_order_acquire); }

  // ShardHost::Join()
  //
  // What a worker's handshake does, all or nothing: CheckHandshake() accepts `request`, then
  // Shard::Join() fixes the run's length and admits a rejoin (their errors). With no shard
  // yet, one is made from the request's tensors, prepared (`on_created`) and kept only when
  // all pass, so a refused handshake (bad tensors, a checkpoint of other tensors, a wrong run
  // length, a rejoin) keeps nothing. Returns the shard.
  absl::StatusOr<Shard*> Join(const rpc::HandshakeRequest& request);

  // ShardHost::Ready()
  //
  // The shard, or FAILED_PRECONDITION for a call that needs it before any handshake.
  absl::StatusOr<Shard*> Ready() const;

  uint32_t rank() const { return rank_; }

 private:
  ShardHost(const config::RunConfig& config, uint32_t rank, OnCreated on_created);

  const config::RunConfig config_;
  const uint32_t rank_;
  const OnCreated on_created_;
  std::mutex create_mu_;         // Serialises making the shard.
  std::unique_ptr<Shard> owned_;  // The shard this host made; written under create_mu_.
  // Where the shard's tensors came from, for a refused handshake's message (under create_mu_).
  std::string layout_source_;
  std::atomic<Shard*> shard_{nullptr};
};

}  // namespace tamp

#endif  // TAMP_SERVER_SHARD_HOST_H_

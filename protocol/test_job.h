// A small job shared by the tests of the protocol, the server and the worker: MLP 784-4-10
// (fc1.weight split into four chunks of 784 values), 2 servers, 2 workers, plain SGD with
// lr 0.5, codec "none" both ways, 2 epochs (so the handshakes' run length of 16 steps per
// epoch is 32 steps); and the payloads a worker would send and read.
#ifndef TAMP_PROTOCOL_TEST_JOB_H_
#define TAMP_PROTOCOL_TEST_JOB_H_

#include <string>
#include <utility>
#include <vector>

#include "compress/registry.h"
#include "glog/logging.h"
#include "job/config.h"
#include "job/job_layout.h"
#include "proto/config.pb.h"
#include "protocol/keys.h"

namespace tamp::testing {

inline constexpr char kTestJob[] = R"pb(
  version: 1
  cluster { num_servers: 2 num_workers: 2 }
  model { kind: MLP hidden: [4] init_seed: 11 }
  optimizer { name: "sgd" learning_rate: 0.5 }
  compression { partition_bytes: 4096 seed: 7 }
  training { epochs: 2 }
)pb";

// kTestJob with defaults applied, then `edit` applied, then validated (CHECK).
template <typename Edit>
config::RunConfig TestConfig(Edit edit) {
  absl::StatusOr<config::RunConfig> config = ParseConfig(kTestJob, "test_job");
  CHECK(config.ok()) << config.status();
  ApplyDefaults(&*config);
  edit(*config);
  const absl::Status valid = ValidateConfig(*config);
  CHECK(valid.ok()) << valid;
  return *std::move(config);
}
inline config::RunConfig TestConfig() {
  return TestConfig([](config::RunConfig&) {});
}

inline JobLayout TestLayout(const config::RunConfig& config) {
  absl::StatusOr<JobLayout> layout = BuildJobLayout(config);
  CHECK(layout.ok()) << layout.status();
  return *std::move(layout);
}

// A push payload: `gradient` through the chunk's push codec, keyed as a worker keys it.
inline std::string EncodePush(const config::RunConfig& config, const JobLayout& layout,
                              uint64_t step, uint32_t chunk, uint32_t worker,
                              const std::vector<float>& gradient) {
  auto codec = compress::CreateCodec(layout.chunks[chunk].compression.push(), gradient.size());
  CHECK(codec.ok()) << codec.status();
  std::string payload;
  const absl::Status status =
      (*codec)->Encode(gradient, PushKey(config, step, chunk, worker), &payload);
  CHECK(status.ok()) << status;
  return payload;
}

// The update a worker decodes from a pull payload.
inline std::vector<float> DecodePull(const config::RunConfig& config, const JobLayout& layout,
                                     uint64_t step, uint32_t chunk, const std::string& payload) {
  const size_t n = layout.chunks[chunk].chunk.length;
  auto codec = compress::CreateCodec(layout.chunks[chunk].compression.pull(), n);
  CHECK(codec.ok()) << codec.status();
  std::vector<float> update(n);
  const absl::Status status =
      (*codec)->Decode(payload, PullKey(config, step, chunk), absl::MakeSpan(update));
  CHECK(status.ok()) << status;
  return update;
}

// A deterministic gradient whose values are multiples of 1/64 (exact in fp32 sums and
// halvings), different for each (step, worker).
inline std::vector<float> TestGradient(size_t n, uint64_t step, uint32_t worker) {
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) {
    g[i] = static_cast<float>(static_cast<int>((i * 7 + step * 13 + worker * 29) % 41) - 20) / 64;
  }
  return g;
}

}  // namespace tamp::testing

#endif  // TAMP_PROTOCOL_TEST_JOB_H_

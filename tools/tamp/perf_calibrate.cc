#include "tools/tamp/perf_calibrate.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/median.h"
#include "base/status_macros.h"
#include "compress/error_feedback.h"
#include "compress/registry.h"
#include "job/layout_file.h"
#include "job/model_layout.h"
#include "optim/optimizer.h"
#include "protocol/chunk_update.h"
#include "protocol/keys.h"
#include "worker/cpu_models.h"
#include "worker/layout_model.h"

namespace tamp::perf {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Per-repetition timings of one chunk, turned into medians at the end.
struct Samples {
  std::vector<std::vector<double>> encode, server_decode, server_round;  // By round.
  std::vector<double> server_update, decode, apply;
};

// Runs `repetitions` + 1 steps of one chunk's codecs, as worker 0 and its shard would.
absl::StatusOr<ChunkCost> MeasureChunk(const config::RunConfig& config, const JobLayout& layout,
                                       const ChunkPlan& plan, absl::Span<const float> gradient,
                                       int repetitions) {
  const uint32_t id = plan.chunk.id;
  const size_t n = plan.chunk.length;
  const config::ChunkCompression& compression = plan.compression;
  const compress::ChunkShape shape =
      compress::ChunkShapeInTensor(layout.tensor_of(plan).shape, plan.chunk.offset, n);
  const int workers = static_cast<int>(config.cluster().num_workers());

  // The worker's push codec and memory, the shard's twin, optimizer and update encoder, and
  // the worker's update decoder.
  TAMP_ASSIGN_OR_RETURN(auto push, compress::CreateCodec(compression.push(), shape));
  TAMP_ASSIGN_OR_RETURN(auto push_memory,
                        compress::ErrorFeedback::Create(compression.push_feedback(), n));
  TAMP_ASSIGN_OR_RETURN(auto shard_push, compress::CreateCodec(compression.push(), shape));
  // AGGREGATE shards run no optimizer: they answer the mean through the pull codec.
  const bool aggregates = config.server().mode() == config::Server::AGGREGATE;
  std::unique_ptr<Optimizer> optimizer;
  if (!aggregates) {
    TAMP_ASSIGN_OR_RETURN(optimizer, CreateOptimizer(config.optimizer(), n));
  }
  TAMP_ASSIGN_OR_RETURN(auto shard_pull, compress::CreateCodec(compression.pull(), shape));
  TAMP_ASSIGN_OR_RETURN(auto pull_memory,
                        compress::ErrorFeedback::Create(compression.pull_feedback(), n));
  TAMP_ASSIGN_OR_RETURN(auto worker_pull, compress::CreateCodec(compression.pull(), shape));
  const int rounds = push->rounds();

  std::vector<float> weights(n), update(n), aggregate(n), decoded(n), replica(n);
  InitTensorSlice(layout.tensor_of(plan), config.model().init_seed(), plan.chunk.tensor,
                  plan.chunk.offset, absl::MakeSpan(weights));
  replica = weights;
  const float learning_rate = config.optimizer().learning_rate();
  const absl::Span<const float> input = gradient.subspan(layout.flat_offset(plan), n);

  ChunkCost cost;
  cost.raw_bytes = n * sizeof(float);
  cost.rounds.resize(rounds);
  Samples samples;
  samples.encode.resize(rounds);
  samples.server_decode.resize(rounds);
  samples.server_round.resize(rounds);
  std::vector<float> accumulator;
  compress::SparseEntries pushed, gathered;  // The shard's sparse update (pushed entries).
  std::string payload, answer, update_payload;
  for (int rep = 0; rep <= repetitions; ++rep) {
    const bool record = rep > 0;  // The first is a warm-up.
    const RandomKey push_key = PushKey(config, rep, id, 0);
    const RandomKey pull_key = PullKey(config, rep, id);
    Clock::time_point start = Clock::now();
    absl::Status encoded = rounds > 1 ? push_memory->BeginRounds(*push, input, push_key, &payload)
                                      : push_memory->Compress(*push, input, push_key, &payload);
    TAMP_RETURN_IF_ERROR(encoded);
    if (record) samples.encode[0].push_back(MsSince(start));
    double update_ms = 0;
    for (int round = 0; round < rounds; ++round) {
      const bool last = round + 1 == rounds;
      cost.rounds[round].push_bytes = payload.size();
      accumulator.assign(shard_push->RoundValues(round), 0.0f);
      start = Clock::now();
      TAMP_RETURN_IF_ERROR(rounds > 1 ? shard_push->DecodeAddRound(round, payload, push_key,
                                                                   absl::MakeSpan(accumulator))
                                      : shard_push->DecodeAdd(payload, push_key,
                                                              absl::MakeSpan(accumulator)));
      if (record) samples.server_decode[round].push_back(MsSince(start));
      if (rounds == 1) break;
      start = Clock::now();
      shard_push->FinishRound(round, workers, absl::MakeSpan(accumulator), pull_key, &answer,
                              last ? absl::MakeSpan(aggregate) : absl::Span<float>());
      const double finish_ms = MsSince(start);
      cost.rounds[round].answer_bytes = answer.size();
      if (last) {
        update_ms += finish_ms;
        break;
      }
      if (record) samples.server_round[round].push_back(finish_ms);
      start = Clock::now();
      TAMP_RETURN_IF_ERROR(push_memory->NextRound(*push, round + 1, answer, push_key, &payload));
      if (record) samples.encode[round + 1].push_back(MsSince(start));
    }
    // The shard once every push is in: mean (or the multi-round aggregate), optimizer,
    // update through the pull codec (AGGREGATE: the mean through the pull codec); from the
    // pushed entries alone where the shard does so (server/sync_chunk.h).
    bool sparse = rounds == 1 && SparseUpdateApplies(optimizer.get(), *pull_memory);
    if (sparse) {
      TAMP_ASSIGN_OR_RETURN(sparse, shard_push->DecodeSparse(payload, push_key, &pushed));
    }
    start = Clock::now();
    if (sparse) {
      GatherSparseAggregate(absl::MakeSpan(accumulator), pushed.indices, *shard_push, workers,
                            &gathered);
      TAMP_RETURN_IF_ERROR(UpdateChunkSparse(optimizer.get(), absl::MakeSpan(weights), gathered,
                                             learning_rate, *pull_memory, *shard_pull, pull_key,
                                             &update_payload));
    } else {
      if (rounds == 1) shard_push->FinishAggregate(workers, absl::MakeSpan(accumulator));
      const absl::Span<const float> mean = rounds == 1 ? accumulator : aggregate;
      TAMP_RETURN_IF_ERROR(
          aggregates ? pull_memory->Compress(*shard_pull, mean, pull_key, &update_payload)
                     : UpdateChunk(*optimizer, absl::MakeSpan(weights), mean, rep,
                                   learning_rate, *pull_memory, *shard_pull, pull_key,
                                   absl::MakeSpan(update), &update_payload));
    }
    update_ms += MsSince(start);
    cost.pull_bytes = update_payload.size();
    // The worker: finish the rounds, decode the update, add it.
    start = Clock::now();
    if (rounds > 1) TAMP_RETURN_IF_ERROR(push_memory->FinishRounds(*push, answer, push_key));
    TAMP_RETURN_IF_ERROR(worker_pull->Decode(update_payload, pull_key, absl::MakeSpan(decoded)));
    const double decode_ms = MsSince(start);
    start = Clock::now();
    for (size_t i = 0; i < n; ++i) replica[i] += decoded[i];
    const double apply_ms = MsSince(start);
    if (record) {
      samples.server_update.push_back(update_ms);
      samples.decode.push_back(decode_ms);
      samples.apply.push_back(apply_ms);
    }
  }
  for (int round = 0; round < rounds; ++round) {
    cost.rounds[round].encode_ms = UpperMedian(samples.encode[round]);
    cost.rounds[round].server_decode_ms = UpperMedian(samples.server_decode[round]);
    cost.rounds[round].server_round_ms = UpperMedian(samples.server_round[round]);
  }
  cost.server_update_ms = UpperMedian(samples.server_update);
  cost.decode_ms = UpperMedian(samples.decode);
  cost.apply_ms = UpperMedian(samples.apply);
  return cost;
}

// Chunks that cost the same: same compression, length and place in a tensor row.
std::string CostKey(const JobLayout& layout, const ChunkPlan& plan) {
  const compress::ChunkShape shape = compress::ChunkShapeInTensor(
      layout.tensor_of(plan).shape, plan.chunk.offset, plan.chunk.length);
  const uint64_t row_offset = shape.row_length == 0 ? 0 : plan.chunk.offset % shape.row_length;
  return absl::StrCat(plan.compression.SerializeAsString(), "/", plan.chunk.length, "/",
                      shape.row_length, "/", row_offset);
}

}  // namespace

absl::StatusOr<ComputeProfile> MeasureCompute(const config::RunConfig& config,
                                              const JobLayout& layout, int concurrent, int steps) {
  if (concurrent < 1 || steps < 1) {
    return absl::InvalidArgumentError("MeasureCompute needs at least one copy and one step");
  }
  if (config.model().kind() == config::Model::LAYOUT ||
      config.model().kind() == config::Model::REGISTERED) {
    // Nothing to measure: the profile says how long compute takes (for REGISTERED, the
    // workers' own model as model.layout_file and profile_file describe it), and the
    // gradient is the LAYOUT workers' synthetic one at step 0.
    TAMP_ASSIGN_OR_RETURN(const LayerProfile profile,
                          LoadProfileFile(config.model().profile_file(), layout.tensors));
    TAMP_ASSIGN_OR_RETURN(std::unique_ptr<LayoutModel> model,
                          LayoutModel::Create(layout.tensors, profile, config.model().init_seed()));
    ComputeProfile result;
    result.step_ms = profile.step_ms();
    result.tensor_ready_ms = profile.TensorReadyMs(layout.tensors.size());
    for (size_t t = 0; t < layout.tensors.size(); ++t) {
      const absl::Span<const float> gradient = model->Gradient(static_cast<int>(t), 0);
      result.gradient.insert(result.gradient.end(), gradient.begin(), gradient.end());
    }
    // LAYOUT's workers sleep through the profile; REGISTERED ones compute where it says.
    result.on_cpu =
        config.model().kind() == config::Model::REGISTERED && profile.compute_on_cpu;
    return result;
  }
  const int batch = static_cast<int>(config.data().batch_size());
  std::vector<std::unique_ptr<Model>> models;
  for (int copy = 0; copy < concurrent; ++copy) {
    TAMP_ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                          CreateCpuModel(config.model(), layout.tensors, batch));
    const absl::Span<float> params = model->params();
    for (uint32_t t = 0; t < layout.tensors.size(); ++t) {
      InitTensorSlice(layout.tensors[t], config.model().init_seed(), t, 0,
                      params.subspan(layout.tensor_offsets[t], layout.tensors[t].elements()));
    }
    models.push_back(std::move(model));
  }
  // Random images and labels: the cost of a dense model does not depend on the data.
  std::mt19937 random(1);
  std::normal_distribution<float> pixel(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(batch) * kImageSize);
  std::vector<uint8_t> labels(batch);
  for (float& v : x) v = pixel(random);
  for (uint8_t& label : labels) label = static_cast<uint8_t>(random() % 10);

  openblas_set_num_threads(1);
  const size_t num_tensors = layout.tensors.size();
  std::vector<std::vector<double>> step_ms(concurrent);
  std::vector<std::vector<std::vector<double>>> ready_ms(
      concurrent, std::vector<std::vector<double>>(num_tensors));
  std::vector<std::thread> threads;
  for (int copy = 0; copy < concurrent; ++copy) {
    threads.emplace_back([&, copy] {
      for (int step = 0; step <= steps; ++step) {
        const Clock::time_point start = Clock::now();
        std::vector<double> ready(num_tensors, -1);
        models[copy]->TrainStep(x.data(), labels.data(), batch,
                                [&](int tensor) { ready[tensor] = MsSince(start); });
        const double ms = MsSince(start);
        // A worker waits on the network between backward passes; idle as long as it computed,
        // so that the scheduler treats these threads as it treats workers on a busy machine
        // (a thread that never sleeps gets only its fair share; one that wakes runs at once).
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
        if (step == 0) continue;  // Warm-up.
        step_ms[copy].push_back(ms);
        for (size_t t = 0; t < num_tensors; ++t) {
          ready_ms[copy][t].push_back(ready[t] < 0 ? ms : ready[t]);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  ComputeProfile profile;
  std::vector<double> all_steps;
  for (const auto& copy : step_ms) all_steps.insert(all_steps.end(), copy.begin(), copy.end());
  profile.step_ms = UpperMedian(all_steps);
  for (size_t t = 0; t < num_tensors; ++t) {
    std::vector<double> all;
    for (const auto& copy : ready_ms) all.insert(all.end(), copy[t].begin(), copy[t].end());
    profile.tensor_ready_ms.push_back(std::min(UpperMedian(all), profile.step_ms));
  }
  const absl::Span<const float> grads = models[0]->grads();
  profile.gradient.assign(grads.begin(), grads.end());
  return profile;
}

absl::StatusOr<std::vector<ChunkCost>> MeasureChunkCosts(const config::RunConfig& config,
                                                         const JobLayout& layout,
                                                         absl::Span<const float> gradient,
                                                         int repetitions) {
  if (gradient.size() != layout.total_elements) {
    return absl::InvalidArgumentError(absl::StrCat("gradient has ", gradient.size(),
                                                   " values, the layout ", layout.total_elements));
  }
  std::map<std::string, ChunkCost> measured;
  std::vector<ChunkCost> costs;
  for (const ChunkPlan& plan : layout.chunks) {
    const std::string key = CostKey(layout, plan);
    auto it = measured.find(key);
    if (it == measured.end()) {
      absl::StatusOr<ChunkCost> cost = MeasureChunk(config, layout, plan, gradient, repetitions);
      if (!cost.ok()) {
        return absl::Status(cost.status().code(),
                            absl::StrCat("chunk ", plan.chunk.id, " (", layout.tensor_of(plan).name,
                                         "): ", cost.status().message()));
      }
      it = measured.emplace(key, *std::move(cost)).first;
    }
    ChunkCost cost = it->second;
    cost.tensor = plan.chunk.tensor;
    cost.shard = plan.chunk.shard;
    costs.push_back(std::move(cost));
  }
  return costs;
}

}  // namespace tamp::perf

// Test helper: a host-memory stand-in for the worker client's CUDA backend
// (worker/device_backend.h), so the client's device path and its users run on the CPU; and
// DeviceStandInModel, a CPU model that says its tensors are on cuda:0, for the trainer's.
// "Device" memory is host memory; the chunks the plan puts on the device use the CPU codecs
// and error feedback, which is what compress/cuda/'s codecs reproduce byte for byte
// (worker/cuda_backend_test.cc checks the CUDA backend against that contract on a GPU).
// Every call is counted in a Calls the test owns, with the stream it named.
//
// Threading: as DeviceBackend (the client's training thread). Ownership: `calls` outlives
// the stand-in.
//
// Example:
//   Calls calls;
//   DeviceBackendFactory factory = [&](const JobLayout& layout,
//                                      absl::Span<const DeviceChunkPlan> plan, int) {
//     return absl::StatusOr<std::unique_ptr<DeviceBackend>>(
//         std::make_unique<HostStandIn>(layout, plan, &calls));
//   };
#ifndef TAMP_WORKER_INTERNAL_HOST_STAND_IN_H_
#define TAMP_WORKER_INTERNAL_HOST_STAND_IN_H_

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/philox.h"
#include "base/status_macros.h"
#include "compress/codec.h"
#include "compress/error_feedback.h"
#include "compress/registry.h"
#include "gtest/gtest.h"
#include "job/job_layout.h"
#include "worker/device_backend.h"
#include "worker/model.h"

namespace tamp::testing {

// What the client asked the backend for.
struct Calls {
  int to_host = 0;
  int to_device = 0;
  int encodes = 0;
  int rounds = 0;    // PushRound().
  int finishes = 0;  // FinishPushRounds().
  int replays = 0;   // ReplayPushRounds().
  int applies = 0;
  int resets = 0;
  std::set<uintptr_t> streams;  // Every stream a call named.
};

// "Device" memory is host memory; the chunks the plan puts on the device use the CPU codecs
// and error feedback, which is what compress/cuda/'s codecs reproduce byte for byte.
class HostStandIn final : public DeviceBackend {
 public:
  HostStandIn(const JobLayout& layout, absl::Span<const DeviceChunkPlan> plan, Calls* calls)
      : layout_(layout), calls_(calls), chunks_(layout.chunks.size()) {
    for (const ChunkPlan& chunk : layout.chunks) {
      Chunk& codecs = chunks_[chunk.chunk.id];
      const compress::ChunkShape shape = compress::ChunkShapeInTensor(
          layout.tensor_of(chunk).shape, chunk.chunk.offset, chunk.chunk.length);
      if (plan[chunk.chunk.id].push_on_device()) {
        codecs.push = *compress::CreateCodec(chunk.compression.push(), shape);
        codecs.feedback =
            *compress::ErrorFeedback::Create(chunk.compression.push_feedback(), chunk.chunk.length);
      }
      if (plan[chunk.chunk.id].pull_on_device()) {
        codecs.pull = *compress::CreateCodec(chunk.compression.pull(), shape);
      }
    }
  }

  absl::Status CopyToHost(const float* device, float* host, size_t count,
                          uintptr_t stream) override {
    ++calls_->to_host;
    calls_->streams.insert(stream);
    std::memcpy(host, device, count * sizeof(float));
    return absl::OkStatus();
  }
  absl::Status CopyToDevice(const float* host, float* device, size_t count,
                            uintptr_t stream) override {
    ++calls_->to_device;
    calls_->streams.insert(stream);
    std::memcpy(device, host, count * sizeof(float));
    return absl::OkStatus();
  }
  absl::StatusOr<absl::Span<float>> Staging(size_t count) override {
    staging_.assign(count, -1.0f);  // Garbage: the client must fill what it reads.
    return absl::MakeSpan(staging_);
  }
  absl::Status EncodePush(uint32_t id, const float* d_gradient, const RandomKey& key,
                          std::string* payload, uintptr_t stream) override {
    ++calls_->encodes;
    calls_->streams.insert(stream);
    Chunk& chunk = chunks_[id];
    EXPECT_NE(chunk.push, nullptr) << "chunk " << id << " is not planned on the device";
    const absl::Span<const float> gradient =
        absl::MakeConstSpan(d_gradient, layout_.chunks[id].chunk.length);
    if (chunk.push->rounds() > 1) {
      return chunk.feedback->BeginRounds(*chunk.push, gradient, key, payload);
    }
    return chunk.feedback->Compress(*chunk.push, gradient, key, payload);
  }
  absl::Status PushRound(uint32_t id, int round, absl::string_view previous_answer,
                         const RandomKey& key, std::string* payload, uintptr_t stream) override {
    ++calls_->rounds;
    calls_->streams.insert(stream);
    Chunk& chunk = chunks_[id];
    EXPECT_NE(chunk.push, nullptr) << "chunk " << id << " is not planned on the device";
    return chunk.feedback->NextRound(*chunk.push, round, previous_answer, key, payload);
  }
  absl::Status FinishPushRounds(uint32_t id, absl::string_view final_answer, const RandomKey& key,
                                uintptr_t stream) override {
    ++calls_->finishes;
    calls_->streams.insert(stream);
    Chunk& chunk = chunks_[id];
    EXPECT_NE(chunk.push, nullptr) << "chunk " << id << " is not planned on the device";
    return chunk.feedback->FinishRounds(*chunk.push, final_answer, key);
  }
  absl::Status ReplayPushRounds(uint32_t id, const RandomKey& key, std::string* payload,
                                uintptr_t stream) override {
    ++calls_->replays;
    calls_->streams.insert(stream);
    Chunk& chunk = chunks_[id];
    EXPECT_NE(chunk.push, nullptr) << "chunk " << id << " is not planned on the device";
    return chunk.feedback->ReplayRounds(*chunk.push, key, payload);
  }
  absl::Status ApplyPull(uint32_t id, absl::string_view payload, const RandomKey& key,
                         float* d_target, bool overwrite, uintptr_t stream) override {
    ++calls_->applies;
    calls_->streams.insert(stream);
    Chunk& chunk = chunks_[id];
    EXPECT_NE(chunk.pull, nullptr) << "chunk " << id << " is not planned on the device";
    std::vector<float> update(layout_.chunks[id].chunk.length);
    TAMP_RETURN_IF_ERROR(chunk.pull->Decode(payload, key, absl::MakeSpan(update)));
    for (size_t i = 0; i < update.size(); ++i) {
      d_target[i] = overwrite ? update[i] : d_target[i] + update[i];
    }
    return absl::OkStatus();
  }
  absl::Status ResetResiduals(uintptr_t stream) override {
    ++calls_->resets;
    calls_->streams.insert(stream);
    for (Chunk& chunk : chunks_) {
      if (chunk.feedback != nullptr) chunk.feedback->Reset();
    }
    return absl::OkStatus();
  }

 private:
  struct Chunk {
    std::unique_ptr<compress::Codec> push;
    std::unique_ptr<compress::ErrorFeedback> feedback;
    std::unique_ptr<compress::Codec> pull;
  };

  const JobLayout layout_;
  Calls* const calls_;
  std::vector<Chunk> chunks_;
  std::vector<float> staging_;
};

// A CPU model claiming its spans are on cuda:0 (they are host memory), with gradients final
// on `stream`: with a HostStandIn backend (TrainerParts) the trainer runs its device path.
class DeviceStandInModel final : public Model {
 public:
  DeviceStandInModel(std::unique_ptr<Model> cpu, uintptr_t stream)
      : cpu_(std::move(cpu)), stream_(stream) {}

  absl::Span<float> params() override { return cpu_->params(); }
  absl::Span<const float> grads() const override { return cpu_->grads(); }
  TensorMemory memory() const override { return TensorMemory::Cuda(0, stream_); }
  float TrainStep(const float* x, const uint8_t* labels, int batch,
                  const std::function<void(int)>& on_tensor_ready) override {
    return cpu_->TrainStep(x, labels, batch, on_tensor_ready);
  }
  int64_t CountCorrect(const float* x, const uint8_t* labels, int batch) override {
    return cpu_->CountCorrect(x, labels, batch);
  }

 private:
  std::unique_ptr<Model> cpu_;
  const uintptr_t stream_;
};

}  // namespace tamp::testing

#endif  // TAMP_WORKER_INTERNAL_HOST_STAND_IN_H_

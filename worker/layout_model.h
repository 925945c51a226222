// LayoutModel: model.kind LAYOUT's stand-in for a real model (job/layout_file.h). It has
// the real model's tensors but none of its compute: a step sleeps for the profile's
// forward and backward time and writes synthetic gradients, so the client, the codecs, gRPC
// and the servers do exactly the work a job of that model would give them.
//
// Compute is a sleep, not a spin: the real forward/backward runs on an accelerator while the
// worker's CPU thread waits, and spinning would take the cores that the servers, the codecs
// and the transport of a job on one machine need. Backward sleeps until absolute deadlines
// (step start + profile time so far + time spent in on_tensor_ready), so the sleeps' own
// overshoot does not add up over the layers; the callbacks (the pushes' encoding) run on the
// training thread and delay the rest of backward, as with the CPU models and as
// tools/tamp/perf_model.h assumes.
//
// Gradients: tensor t's gradient at step s is a fixed seeded normal noise vector times
// 0.01 / sqrt(fan_in) (a per-tensor scale), rotated by a step-dependent offset (so top-k
// keeps other entries each step). They are views, not copies: each tensor's noise is stored
// twice in a row, so every rotation is a contiguous span of it, and a step writes nothing.
// On a real worker the accelerator writes the gradient and the host's CPU does not touch it
// before the codecs do; a copy per step here (a pass over every gradient, in each worker
// process) would be CPU work no real job has, which on a machine shared by many emulated
// workers slowed every step (bench/scaling.sh's 16-worker points). grads() is empty: the
// gradients are not one flat buffer.
//
// Thread safety: as worker/model.h. CountCorrect() is never called (no evaluation); it
// returns 0.
//
// Example:
//   auto model = LayoutModel::Create(tensors, profile, /*seed=*/1);
//   (*model)->TrainStep(nullptr, nullptr, 0, [&](int t) { client->Push(t, ...); });
#ifndef TAMP_WORKER_LAYOUT_MODEL_H_
#define TAMP_WORKER_LAYOUT_MODEL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "job/layout_file.h"
#include "job/model_layout.h"
#include "proto/config.pb.h"
#include "worker/model.h"

namespace tamp {

class LayoutModel : public Model {
 public:
  // Draws every tensor's noise (deterministic in `seed`): about 30 ns per parameter, and
  // 8 bytes of memory per parameter (the noise, twice).
  static absl::StatusOr<std::unique_ptr<LayoutModel>> Create(std::vector<TensorSpec> tensors,
                                                             LayerProfile profile, uint64_t seed);

  absl::Span<float> params() override { return absl::MakeSpan(params_); }
  absl::Span<const float> grads() const override { return {}; }
  // The view of Gradient(tensor, step of the TrainStep in progress); `offset` and `elements`
  // are the layout's, which this model's tensors follow.
  absl::Span<const float> gradient(int tensor, size_t offset, size_t elements) const override;

  // x, labels and batch are ignored; returns 0 (no loss).
  float TrainStep(const float* x, const uint8_t* labels, int batch,
                  const std::function<void(int tensor)>& on_tensor_ready) override;
  int64_t CountCorrect(const float* x, const uint8_t* labels, int batch) override { return 0; }

  // Tensor `tensor`'s gradient at step `step` (as the file comment says), valid as long as
  // the model: for the performance model's codec measurements, and for tests.
  absl::Span<const float> Gradient(int tensor, uint64_t step) const;

 private:
  LayoutModel(std::vector<TensorSpec> tensors, LayerProfile profile);

  const std::vector<TensorSpec> tensors_;
  const LayerProfile profile_;
  std::vector<float> params_;
  std::vector<uint64_t> noise_offsets_;  // Of each tensor's noise, stored twice, in noise_.
  std::vector<float> noise_;             // Scaled normal noise.
  uint64_t step_ = 0;                    // TrainStep calls so far.
};

// LoadLayoutModel()
//
// The LayoutModel of a validated config's model (kind LAYOUT): `tensors` are its layout's
// (ModelTensors()), the profile is read from model.profile_file. `seed` picks the noise;
// give each worker its own, as each would see other batches.
absl::StatusOr<std::unique_ptr<LayoutModel>> LoadLayoutModel(const config::Model& model,
                                                             std::vector<TensorSpec> tensors,
                                                             uint64_t seed);

}  // namespace tamp

#endif  // TAMP_WORKER_LAYOUT_MODEL_H_

// A model Tamp does not ship, trained through the public C++ client (worker/client.h): softmax
// regression on a synthetic task, as a program of the user's would do it.
//
// The task: 64-example batches of x ~ N(0, 1) in 256 dimensions, labelled by the largest of
// 10 scores of a fixed random teacher (the same on every worker; each worker draws its own
// batches). The model: w [10, 256], b [10], registered by name and shape (model.kind
// REGISTERED: rank 0's initial weights become everyone's). Per step: forward, the
// cross-entropy gradient, Push() per tensor, Wait() for the servers' update, a STEP event for
// `tamp run`; at the end, the accuracy on 4096 held-out examples (EVAL and DONE events) and a
// checksum of the weights (equal on every worker: one replica).
//
//   tamp run examples/cpp/softmax_regression.pbtxt -- bazel-bin/examples/cpp/softmax_regression
//
// Placement from the environment (tamp run's, torchrun's, Slurm's: job/placement.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/median.h"
#include "base/proto_json.h"
#include "base/status_macros.h"
#include "job/config.h"
#include "job/job_layout.h"
#include "job/placement.h"
#include "worker/client.h"
#include "worker/worker_events.h"

namespace {

constexpr int kInputs = 256;
constexpr int kClasses = 10;
constexpr uint64_t kStepsPerEpoch = 100;
constexpr int kTestExamples = 4096;

// Batches of the synthetic task; `seed` picks the stream, the teacher is fixed.
class Task {
 public:
  explicit Task(uint64_t seed) : rng_(seed) {
    std::mt19937_64 teacher_rng(12345);
    std::normal_distribution<float> normal;
    teacher_.resize(kClasses * kInputs);
    for (float& t : teacher_) t = normal(teacher_rng);
  }

  // Fills `x` (count x kInputs) and `labels` (count).
  void Draw(int count, std::vector<float>* x, std::vector<int>* labels) {
    std::normal_distribution<float> normal;
    x->resize(static_cast<size_t>(count) * kInputs);
    labels->resize(count);
    for (float& v : *x) v = normal(rng_);
    for (int i = 0; i < count; ++i) {
      int best = 0;
      float best_score = -INFINITY;
      for (int c = 0; c < kClasses; ++c) {
        float score = 0;
        for (int j = 0; j < kInputs; ++j) score += teacher_[c * kInputs + j] * (*x)[i * kInputs + j];
        if (score > best_score) best_score = score, best = c;
      }
      (*labels)[i] = best;
    }
  }

 private:
  std::mt19937_64 rng_;
  std::vector<float> teacher_;
};

// Softmax probabilities of example `i` of `x` under (w, b).
void Probabilities(const std::vector<float>& w, const std::vector<float>& b,
                   const std::vector<float>& x, int i, float* p) {
  float top = -INFINITY;
  for (int c = 0; c < kClasses; ++c) {
    float z = b[c];
    for (int j = 0; j < kInputs; ++j) z += w[c * kInputs + j] * x[i * kInputs + j];
    p[c] = z;
    top = std::max(top, z);
  }
  float sum = 0;
  for (int c = 0; c < kClasses; ++c) sum += p[c] = std::exp(p[c] - top);
  for (int c = 0; c < kClasses; ++c) p[c] /= sum;
}

// Mean cross-entropy of the batch; its gradient in grad_w, grad_b.
float LossAndGradient(const std::vector<float>& w, const std::vector<float>& b,
                      const std::vector<float>& x, const std::vector<int>& labels,
                      std::vector<float>* grad_w, std::vector<float>* grad_b) {
  const int count = static_cast<int>(labels.size());
  grad_w->assign(w.size(), 0.0f);
  grad_b->assign(b.size(), 0.0f);
  float loss = 0, p[kClasses];
  for (int i = 0; i < count; ++i) {
    Probabilities(w, b, x, i, p);
    loss -= std::log(std::max(p[labels[i]], 1e-30f));
    for (int c = 0; c < kClasses; ++c) {
      const float delta = (p[c] - (c == labels[i] ? 1.0f : 0.0f)) / count;
      (*grad_b)[c] += delta;
      for (int j = 0; j < kInputs; ++j) (*grad_w)[c * kInputs + j] += delta * x[i * kInputs + j];
    }
  }
  return loss / count;
}

double Accuracy(const std::vector<float>& w, const std::vector<float>& b, Task* task) {
  std::vector<float> x;
  std::vector<int> labels;
  task->Draw(kTestExamples, &x, &labels);
  int correct = 0;
  float p[kClasses];
  for (int i = 0; i < kTestExamples; ++i) {
    Probabilities(w, b, x, i, p);
    correct += std::max_element(p, p + kClasses) - p == labels[i];
  }
  return static_cast<double>(correct) / kTestExamples;
}

absl::Status Train() {
  const tamp::EnvLookup env = tamp::ProcessEnv();
  TAMP_ASSIGN_OR_RETURN(const std::string path, tamp::WorkerConfigPathFromEnv(env));
  TAMP_ASSIGN_OR_RETURN(const tamp::config::RunConfig config, tamp::LoadConfigFile(path));
  TAMP_ASSIGN_OR_RETURN(const tamp::Placement placement,
                        tamp::WorkerPlacementFromEnv(config.cluster(), env));
  // The model's tensors, registered: the job's layout (and the servers') comes from them.
  std::vector<tamp::TensorSpec> tensors(2);
  tensors[0].name = "w";
  tensors[0].shape = {kClasses, kInputs};
  tensors[1].name = "b";
  tensors[1].shape = {kClasses};
  TAMP_ASSIGN_OR_RETURN(tamp::JobLayout layout, tamp::BuildJobLayout(config, tensors));
  const tamp::RunLength length{kStepsPerEpoch,
                               tamp::TotalSteps(config.training(), kStepsPerEpoch)};
  TAMP_ASSIGN_OR_RETURN(std::unique_ptr<tamp::Client> client,
                        tamp::Client::Connect(config, std::move(layout), placement.rank,
                                              placement.servers, length));

  // The user's own initialisation (small random weights); rank 0's becomes everyone's.
  std::vector<float> w(kClasses * kInputs), b(kClasses, 0.0f), grad_w, grad_b;
  std::mt19937_64 init_rng(7 + placement.rank);
  std::normal_distribution<float> init(0.0f, 0.01f);
  for (float& v : w) v = init(init_rng);
  const std::vector<absl::Span<float>> params = {absl::MakeSpan(w), absl::MakeSpan(b)};
  TAMP_ASSIGN_OR_RETURN(uint64_t step, client->Start(params));

  Task task(1000 + placement.rank);
  std::vector<float> x;
  std::vector<int> labels;
  std::vector<double> step_ms;
  for (; step < length.total_steps; ++step) {
    const auto began = std::chrono::steady_clock::now();
    TAMP_RETURN_IF_ERROR(client->BeginStep(step, params));
    task.Draw(config.data().batch_size(), &x, &labels);
    const float loss = LossAndGradient(w, b, x, labels, &grad_w, &grad_b);
    TAMP_RETURN_IF_ERROR(client->Push("b", grad_b));
    TAMP_RETURN_IF_ERROR(client->Push("w", grad_w));
    const absl::Status answered = client->Wait(params);
    if (absl::IsAborted(answered)) {  // A SYNC barrier dropped this worker: rejoin.
      TAMP_ASSIGN_OR_RETURN(step, client->Rejoin(params, answered.message()));
      --step;
      continue;
    }
    TAMP_RETURN_IF_ERROR(answered);
    step_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began)
            .count());
    const tamp::WorkerFigures figures{placement.rank, client->totals(), client->report()};
    std::cout << tamp::ProtoToJson(tamp::StepEvent(figures, step + 1, length.total_steps,
                                                   static_cast<uint32_t>(step / kStepsPerEpoch),
                                                   loss, step_ms.back(), 0.0))
              << std::endl;
  }
  Task test(99);  // The same held-out examples on every worker.
  const double accuracy = Accuracy(w, b, &test);
  double checksum = 0;
  for (float v : w) checksum += v;
  std::cerr << "worker " << placement.rank << ": test accuracy " << accuracy
            << ", weight checksum " << checksum << std::endl;
  // Rank 0 reports the accuracy (as the examples' workers do: one evaluation per run).
  const tamp::WorkerFigures figures{placement.rank, client->totals(), client->report()};
  const std::optional<double> reported =
      placement.rank == 0 ? std::optional<double>(accuracy) : std::nullopt;
  const auto last_epoch = static_cast<uint32_t>((length.total_steps - 1) / kStepsPerEpoch);
  if (reported) {
    std::cout << tamp::ProtoToJson(tamp::EvalEvent(figures, length.total_steps,
                                                   length.total_steps, last_epoch, accuracy))
              << "\n";
  }
  std::cout << tamp::ProtoToJson(tamp::DoneEvent(figures, length.total_steps, length.total_steps,
                                                 last_epoch, reported,
                                                 step_ms.empty() ? 0 : tamp::Median(step_ms)))
            << std::endl;
  return absl::OkStatus();
}

}  // namespace

int main() {
  if (const absl::Status status = Train(); !status.ok()) {
    std::cerr << "softmax_regression: " << status << std::endl;
    return 1;
  }
  return 0;
}

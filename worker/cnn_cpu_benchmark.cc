// CnnCpu::TrainStep and CountCorrect on one core (OpenBLAS single-threaded).
//   bazel run -c opt //worker:cnn_cpu_benchmark
// Arguments: batch, conv1 channels, conv2 channels, kernel, fc hidden width (0: none).
#include <cblas.h>

#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "glog/logging.h"
#include "job/model_layout.h"
#include "proto/config.pb.h"
#include "worker/cnn_cpu.h"

namespace tamp {
namespace {

std::unique_ptr<CnnCpu> MakeCnn(const benchmark::State& state, int batch,
                                std::vector<float>* x, std::vector<uint8_t>* labels) {
  openblas_set_num_threads(1);
  config::Model model;
  model.set_kind(config::Model::CNN);
  model.add_conv_channels(state.range(1));
  model.add_conv_channels(state.range(2));
  model.set_kernel_size(state.range(3));
  if (state.range(4) != 0) model.add_fc_hidden(state.range(4));
  auto tensors = ModelTensors(model);
  CHECK(tensors.ok()) << tensors.status();
  auto cnn = CnnCpu::Create(*tensors, batch);
  CHECK(cnn.ok()) << cnn.status();
  for (size_t t = 0; t < (*cnn)->tensors().size(); ++t) {
    const TensorSpec& spec = (*cnn)->tensors()[t];
    InitTensorSlice(spec, 1, t, 0,
                    (*cnn)->params().subspan((*cnn)->tensor_offset(t), spec.elements()));
  }
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> pixel(-0.8f, 2.0f);
  x->resize(static_cast<size_t>(batch) * kImageSize);
  for (float& v : *x) v = pixel(rng);
  labels->resize(batch);
  for (int i = 0; i < batch; ++i) (*labels)[i] = i % kNumClasses;
  return *std::move(cnn);
}

void BM_TrainStep(benchmark::State& state) {
  const int batch = state.range(0);
  std::vector<float> x;
  std::vector<uint8_t> labels;
  auto cnn = MakeCnn(state, batch, &x, &labels);
  for (auto _ : state) {
    benchmark::DoNotOptimize(cnn->TrainStep(x.data(), labels.data(), batch, nullptr));
  }
  state.SetItemsProcessed(state.iterations() * batch);
}

void BM_CountCorrect(benchmark::State& state) {
  const int batch = state.range(0);
  std::vector<float> x;
  std::vector<uint8_t> labels;
  auto cnn = MakeCnn(state, batch, &x, &labels);
  for (auto _ : state) {
    benchmark::DoNotOptimize(cnn->CountCorrect(x.data(), labels.data(), batch));
  }
  state.SetItemsProcessed(state.iterations() * batch);
}

// The default shape ([32, 64], k 5) with and without a 128-wide hidden fc layer, and the
// smaller [16, 32] net.
BENCHMARK(BM_TrainStep)
    ->ArgNames({"batch", "c1", "c2", "k", "fc"})
    ->Args({64, 32, 64, 5, 0})
    ->Args({64, 32, 64, 5, 128})
    ->Args({64, 16, 32, 5, 128})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_CountCorrect)
    ->ArgNames({"batch", "c1", "c2", "k", "fc"})
    ->Args({64, 32, 64, 5, 128})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace tamp

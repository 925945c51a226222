// codec_gpu_bench: GPU encode/decode throughput of every GPU codec (compress/cuda), as a
// fraction of the device's own copy speed measured in the same run.
//
// For each codec and chunk size n (default 2^24 and 2^26 fp32 values) it times, with CUDA
// events (median of --iters after --warmup):
//   encode      DeviceCodec::Encode, no error feedback
//   encode+EF   the same with the fused residual (what a worker runs)
//   decode      DeviceCodec::Decode (=); for checked codecs this includes the body check
//               and the wait for its verdict
//   memcpy      cudaMemcpyAsync of the n values, device to device
// on GradientLike() values; the row "topk 1%, 0.5% non-zero" times top-k's fallback
// (compress/cuda/README.md: the cutoff's bin holds most of the chunk) on MostlyZero().
// and prints one markdown table (bench/gpu/torch_compare.py prints the same columns):
//   codec | n | payload bytes/value | encode ms | encode+EF ms | decode ms | memcpy ms |
//   enc+dec GB/s | enc+dec / memcpy
// where enc+dec GB/s = 4n bytes / (encode + decode time) and enc+dec / memcpy = memcpy time /
// (encode + decode time): 1.0 means compressing and decompressing a gradient costs as much
// as copying it once.
//
// powersgd (rank 2, the n values as a vector) has no one-call encode and its decode is the
// server's (CPU): a second table times the worker's step (compress/cuda/device_powersgd.h:
// round 0, round 1 and the finish, host work included, the server's answers canned from
// the first step), without and with the residual, against the same memcpy:
//   codec | n | payload bytes/value (both rounds) | step ms | step+EF ms | memcpy ms |
//   step+EF / memcpy
//
// Host code only (the kernels are in //compress/cuda); without a device (or built without
// CUDA) it prints "no CUDA device: skipping (...)" and exits 0, or with TAMP_REQUIRE_CUDA=1
// (kernels::CudaRequired(), set by run_on_device.sh) says so on stderr and exits 1.
//
// Usage: codec_gpu_bench [--sizes=24,26] [--iters=20] [--warmup=3] [--codecs=qsgd,topk,powersgd]
#include <cstdio>
#include <string>

#include "kernels/device.h"

namespace tamp {
namespace {

// Exit status without a usable device: 0 (a skip), or 1 where CUDA is required.
int NoDevice() {
  const std::string& reason = kernels::CudaDeviceUnavailableReason();
  if (kernels::CudaRequired()) {
    std::fprintf(stderr, "codec_gpu_bench: no CUDA device, and TAMP_REQUIRE_CUDA=1 (%s)\n",
                 reason.c_str());
    return 1;
  }
  std::printf("no CUDA device: skipping (%s)\n", reason.c_str());
  return 0;
}

}  // namespace
}  // namespace tamp

#if TAMP_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "compress/codec.h"
#include "compress/cuda/device_codec.h"
#include "compress/cuda/device_powersgd.h"
#include "compress/powersgd.h"
#include "kernels/cuda_check.h"
#include "kernels/device.h"
#include "proto/config.pb.h"

namespace tamp {
namespace {

// The values a row encodes: GradientLike(), or MostlyZero() (top-k's fallback: the cutoff's
// level-0 bin holds more keys than compress/cuda's CandidateCapacity()).
enum class Input { kGradient, kMostlyZero };

struct BenchCodec {
  std::string label;
  config::Codec spec;
  Input input = Input::kGradient;
};

std::vector<BenchCodec> Codecs() {
  std::vector<BenchCodec> codecs;
  auto add = [&](const std::string& label, const std::string& name, auto&& set) {
    config::Codec spec;
    spec.set_name(name);
    set(spec);
    codecs.push_back({label, spec});
  };
  auto defaults = [](config::Codec&) {};
  add("none", "none", defaults);
  add("fp16", "fp16", defaults);
  add("bf16", "bf16", defaults);
  add("natural", "natural", defaults);
  add("signsgd", "signsgd", defaults);
  add("signum", "signum", defaults);
  add("efsign", "efsign", defaults);
  add("terngrad", "terngrad", defaults);
  add("qsgd s=127 d=512", "qsgd", [](config::Codec& s) {
    s.set_levels(127);
    s.set_bucket_size(512);
  });
  add("qsgd s=15 d=8192", "qsgd", [](config::Codec& s) {
    s.set_levels(15);
    s.set_bucket_size(8192);
  });
  add("maxmin b=4 d=512", "maxmin", [](config::Codec& s) {
    s.set_bits(4);
    s.set_bucket_size(512);
  });
  add("maxmin b=8 d=512 stoch", "maxmin", [](config::Codec& s) {
    s.set_bits(8);
    s.set_bucket_size(512);
    s.set_stochastic(true);
  });
  add("randomblock 1% B=4", "randomblock", [](config::Codec& s) {
    s.set_ratio(0.01);
    s.set_num_blocks(4);
  });
  add("randomk 1%", "randomk", [](config::Codec& s) { s.set_ratio(0.01); });
  add("topk 1%", "topk", [](config::Codec& s) { s.set_ratio(0.01); });
  add("topk 1% fp16", "topk", [](config::Codec& s) {
    s.set_ratio(0.01);
    s.set_fp16_values(true);
  });
  add("topk 0.1%", "topk", [](config::Codec& s) { s.set_ratio(0.001); });
  add("topk 1%, 0.5% non-zero", "topk", [](config::Codec& s) { s.set_ratio(0.01); });
  codecs.back().input = Input::kMostlyZero;
  // Its payload column says what fraction passes on GradientLike() values.
  add("threshold 4", "threshold", [](config::Codec& s) { s.set_threshold(4.0); });
  return codecs;
}

// Gradient-like values: normal with magnitudes spread over 2^-12 .. 2^2 (host xorshift +
// Box-Muller, so 2^26 values take a moment, not a minute).
std::vector<float> GradientLike(size_t n) {
  std::vector<float> x(n);
  uint64_t s = 0x9E3779B97F4A7C15ull;
  auto next = [&s]() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  };
  for (size_t i = 0; i < n; i += 2) {
    const uint64_t r = next();
    const double u1 = (static_cast<double>(r >> 40) + 1.0) / 16777217.0;
    const double u2 = static_cast<double>((r >> 16) & 0xffffff) / 16777216.0;
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const float scale = std::ldexp(1.0f, static_cast<int>(next() % 15) - 12);
    x[i] = static_cast<float>(radius * std::cos(6.283185307179586 * u2)) * scale;
    if (i + 1 < n) x[i + 1] = static_cast<float>(radius * std::sin(6.283185307179586 * u2)) * scale;
  }
  return x;
}

// GradientLike() with all but every 200th value zeroed: at k = 1% the cutoff is 0.
std::vector<float> MostlyZero(std::vector<float> x) {
  for (size_t i = 0; i < x.size(); ++i) {
    if (i % 200 != 0) x[i] = 0.0f;
  }
  return x;
}

template <typename F>
absl::StatusOr<double> MedianMs(int warmup, int iters, cudaStream_t stream, F&& run) {
  cudaEvent_t start, stop;
  TAMP_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  TAMP_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop));
  std::vector<double> times;
  for (int i = 0; i < warmup + iters; ++i) {
    TAMP_CUDA_RETURN_IF_ERROR(cudaEventRecord(start, stream));
    if (absl::Status status = run(); !status.ok()) return status;
    TAMP_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop, stream));
    TAMP_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop));
    float ms = 0;
    TAMP_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start, stop));
    if (i >= warmup) times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// One row of the powersgd table for n = 2^log_n values at d_input (d_residual: n scratch
// values).
absl::StatusOr<std::string> PowerSgdRow(int log_n, int warmup, int iters, const float* d_input,
                                        float* d_residual, double memcpy_ms, cudaStream_t stream) {
  const size_t n = size_t{1} << log_n;
  constexpr int kRank = 2;
  config::Codec spec;
  spec.set_name("powersgd");
  spec.set_rank(kRank);
  const compress::ChunkShape shape{.elements = n};
  TAMP_ASSIGN_OR_RETURN(auto worker, compress::cuda::CreateDevicePowerSgd(spec, shape));
  const RandomKey key{.seed = 1, .step = 2, .chunk = 3, .worker = 4};
  // The answers a one-worker shard gives to the first step: P̂ = orth(P), Q̄ = Q_i.
  const compress::PowerSgdCodec host(shape, kRank);
  std::string round0, round1, answer0;
  TAMP_RETURN_IF_ERROR(worker->BeginRounds(d_input, nullptr, 1.0f, key, &round0, stream));
  std::vector<float> p;
  TAMP_RETURN_IF_ERROR(host.ParseMessage(round0, 0, "round 0", &p));
  compress::OrthonormalizeColumns(host.view().rows, kRank, absl::MakeSpan(p));
  host.AppendMessage(0, p, &answer0);
  TAMP_RETURN_IF_ERROR(worker->NextRound(1, answer0, key, &round1, stream));
  TAMP_RETURN_IF_ERROR(worker->FinishRounds(round1, key, stream));
  auto step = [&](float* residual) -> absl::Status {
    std::string payload;
    TAMP_RETURN_IF_ERROR(worker->BeginRounds(d_input, residual, 1.0f, key, &payload, stream));
    TAMP_RETURN_IF_ERROR(worker->NextRound(1, answer0, key, &payload, stream));
    return worker->FinishRounds(round1, key, stream);
  };
  TAMP_ASSIGN_OR_RETURN(const double step_ms,
                        MedianMs(warmup, iters, stream, [&] { return step(nullptr); }));
  TAMP_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d_residual, 0, 4 * n, stream));
  TAMP_ASSIGN_OR_RETURN(const double step_ef_ms,
                        MedianMs(warmup, iters, stream, [&] { return step(d_residual); }));
  char row[256];
  std::snprintf(row, sizeof(row), "| powersgd r=%d | 2^%d | %.4f | %.3f | %.3f | %.3f | %.3f |\n",
                kRank, log_n, static_cast<double>(round0.size() + round1.size()) / n, step_ms,
                step_ef_ms, memcpy_ms, step_ef_ms / memcpy_ms);
  return std::string(row);
}

absl::Status Run(const std::vector<int>& log_sizes, int iters, int warmup,
                 const std::vector<std::string>& only) {
  cudaDeviceProp prop;
  TAMP_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, 0));
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  std::printf("device: %s (sm_%d%d, %d SMs, %.0f MiB), CUDA runtime %d, driver %d\n\n", prop.name,
              prop.major, prop.minor, prop.multiProcessorCount,
              prop.totalGlobalMem / 1048576.0, runtime, driver);
  std::printf(
      "| codec | n | payload bytes/value | encode ms | encode+EF ms | decode ms | memcpy ms | "
      "enc+dec GB/s | enc+dec / memcpy |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  cudaStream_t stream;
  TAMP_CUDA_RETURN_IF_ERROR(cudaStreamCreate(&stream));
  const bool powersgd =
      only.empty() || std::find(only.begin(), only.end(), "powersgd") != only.end();
  std::string powersgd_rows;
  for (const int log_n : log_sizes) {
    const size_t n = size_t{1} << log_n;
    const std::vector<float> host = GradientLike(n);
    TAMP_ASSIGN_OR_RETURN(auto input, kernels::DeviceArray<float>::Create(n));
    TAMP_ASSIGN_OR_RETURN(auto residual, kernels::DeviceArray<float>::Create(n));
    TAMP_ASSIGN_OR_RETURN(auto output, kernels::DeviceArray<float>::Create(n));
    TAMP_RETURN_IF_ERROR(input.CopyFromHost(host.data(), n, stream));
    const std::vector<float> host_mostly_zero = MostlyZero(host);
    TAMP_ASSIGN_OR_RETURN(auto mostly_zero, kernels::DeviceArray<float>::Create(n));
    TAMP_RETURN_IF_ERROR(mostly_zero.CopyFromHost(host_mostly_zero.data(), n, stream));
    TAMP_ASSIGN_OR_RETURN(
        const double memcpy_ms, MedianMs(warmup, iters, stream, [&]() -> absl::Status {
          TAMP_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(output.data(), input.data(), 4 * n,
                                                    cudaMemcpyDeviceToDevice, stream));
          return absl::OkStatus();
        }));
    for (const BenchCodec& codec : Codecs()) {
      if (!only.empty() &&
          std::find(only.begin(), only.end(), codec.spec.name()) == only.end()) {
        continue;
      }
      const float* values = codec.input == Input::kGradient ? input.data() : mostly_zero.data();
      TAMP_ASSIGN_OR_RETURN(auto gpu, compress::cuda::DeviceCodec::Create(codec.spec, n));
      TAMP_ASSIGN_OR_RETURN(auto body, kernels::DeviceArray<unsigned char>::Create(gpu->BodyBytes()));
      const RandomKey key{.seed = 1, .step = 2, .chunk = 3, .worker = 4};
      TAMP_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(residual.data(), 0, 4 * n, stream));
      TAMP_ASSIGN_OR_RETURN(const double encode_ms, MedianMs(warmup, iters, stream, [&] {
                              return gpu->Encode(values, {}, key, body.data(), stream);
                            }));
      TAMP_ASSIGN_OR_RETURN(const double encode_ef_ms, MedianMs(warmup, iters, stream, [&] {
                              return gpu->Encode(values,
                                                 compress::cuda::DeviceFeedback::Residual(
                                                     residual.data()),
                                                 key, body.data(), stream);
                            }));
      // Decode a body of the plain input (the EF runs above changed `body`); its payload's
      // size (threshold's varies with the input).
      TAMP_RETURN_IF_ERROR(gpu->Encode(values, {}, key, body.data(), stream));
      std::string payload;
      TAMP_RETURN_IF_ERROR(gpu->EncodeToPayload(values, {}, key, &payload, stream));
      TAMP_ASSIGN_OR_RETURN(const double decode_ms, MedianMs(warmup, iters, stream, [&] {
                              return gpu->Decode(body.data(), key, output.data(), false, stream);
                            }));
      const double seconds = (encode_ms + decode_ms) / 1e3;
      std::printf("| %s | 2^%d | %.3f | %.3f | %.3f | %.3f | %.3f | %.1f | %.3f |\n",
                  codec.label.c_str(), log_n, static_cast<double>(payload.size()) / n,
                  encode_ms, encode_ef_ms, decode_ms, memcpy_ms, 4.0 * n / seconds / 1e9,
                  memcpy_ms / (encode_ms + decode_ms));
      std::fflush(stdout);
    }
    if (powersgd && log_n >= 2) {  // Rank 2 needs a view of at least 2 x 2.
      TAMP_ASSIGN_OR_RETURN(const std::string row,
                            PowerSgdRow(log_n, warmup, iters, input.data(), residual.data(),
                                        memcpy_ms, stream));
      powersgd_rows += row;
    }
  }
  if (powersgd) {
    std::printf(
        "\n| codec | n | payload bytes/value (both rounds) | step ms | step+EF ms | memcpy ms | "
        "step+EF / memcpy |\n|---|---|---|---|---|---|---|\n%s",
        powersgd_rows.c_str());
  }
  cudaStreamDestroy(stream);
  return absl::OkStatus();
}

}  // namespace
}  // namespace tamp

int main(int argc, char** argv) {
  std::vector<int> sizes = {24, 26};
  int iters = 20, warmup = 3;
  std::vector<std::string> only;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* flag) -> const char* {
      const size_t len = std::strlen(flag);
      return arg.compare(0, len, flag) == 0 ? argv[i] + len : nullptr;
    };
    if (const char* v = value("--sizes=")) {
      sizes.clear();
      for (absl::string_view s : absl::StrSplit(v, ',')) {
        int log_n;
        if (!absl::SimpleAtoi(s, &log_n) || log_n < 1 || log_n > 31) {
          std::fprintf(stderr, "bad --sizes entry '%s' (log2 of n, 1..31)\n", std::string(s).c_str());
          return 2;
        }
        sizes.push_back(log_n);
      }
    } else if (const char* v = value("--iters=")) {
      iters = std::max(1, std::atoi(v));
    } else if (const char* v = value("--warmup=")) {
      warmup = std::max(0, std::atoi(v));
    } else if (const char* v = value("--codecs=")) {
      for (absl::string_view s : absl::StrSplit(v, ',')) only.emplace_back(s);
    } else {
      std::fprintf(stderr, "usage: %s [--sizes=24,26] [--iters=20] [--warmup=3] [--codecs=a,b]\n",
                   argv[0]);
      return 2;
    }
  }
  if (!tamp::kernels::CudaDeviceAvailable()) return tamp::NoDevice();
  const absl::Status status = tamp::Run(sizes, iters, warmup, only);
  if (!status.ok()) {
    std::fprintf(stderr, "codec_gpu_bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

#else  // !TAMP_HAVE_CUDA

int main() { return tamp::NoDevice(); }

#endif  // TAMP_HAVE_CUDA

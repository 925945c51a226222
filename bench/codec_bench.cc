// codec_bench: encode and decode throughput of every registered codec, against memcpy.
//
// For each codec in compress::ListCodecs() (its `example` spec, so codecs added to the
// registry are measured without touching this file) and each chunk size n in {2^20, 2^24}:
//   encode/<codec>/<n>   Codec::Encode of n fp32 values into a payload
//   decode/<codec>/<n>   Codec::Decode of that payload into n fp32 values
//   memcpy/<n>           memcpy of the same 4n bytes, the yardstick both are compared with
// Throughput (bytes_per_second) is always 4n bytes of fp32 per iteration, whatever the
// payload size, so GB/s compare directly with memcpy's. An encode benchmark's label is the
// spec measured (one line of text format). Counters per codec benchmark:
//   payload_bytes       the payload's size (for variable-size codecs, of this data)
//   compression_ratio   4n / payload_bytes
// One thread, one core: the numbers are per core.
//
// Data: gradient-like, fixed seed. x = sigma * z with z ~ N(0, 1) by Box-Muller from
// Philox, sigma = 0.004; one entry in 1000 is an outlier scaled by 30. With this scale the
// threshold codec's example (|x| > 0.01 = 2.5 sigma) keeps about 1.3% of the entries,
// comparable with the 1% the sparsifiers' examples keep.
//
// Multi-round codecs (Codec::rounds() > 1, e.g. powersgd) are measured as one step of one
// worker against a one-worker server:
//   encode = EncodeRound() of every round (answers precomputed by a server instance) and
//            FinishRounds(); payload_bytes = the worker's pushes of all rounds, summed;
//   decode = the server's DecodeAddRound() and FinishRound() of every round, writing the
//            aggregate.
//
// Usage (bench/codec_table.sh runs it and tabulates the JSON):
//   bazel build -c opt //bench:codec_bench
//   bazel-bin/bench/codec_bench --benchmark_format=json --benchmark_repetitions=5
//   bazel-bin/bench/codec_bench --benchmark_filter='/topk/'
// Flags of its own (before or among the --benchmark_* ones):
//   --codec_bench_sizes=1048576,16777216   chunk sizes
//   --codec_bench_min_time=0.2             seconds per repetition of each benchmark
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/types/span.h"
#include "base/philox.h"
#include "compress/codec.h"
#include "compress/registry.h"
#include "google/protobuf/text_format.h"
#include "proto/config.pb.h"

namespace tamp::compress {
namespace {

constexpr double kSigma = 0.004;
constexpr double kOutlierRate = 0.001;
constexpr double kOutlierScale = 30;
constexpr RandomKey kDataKey{.seed = 20240601, .step = 0, .chunk = 0, .worker = 0};
// The key codecs draw their randomness from (randomk, randomblock: shared stream).
constexpr RandomKey kCodecKey{.seed = 7, .step = 1, .chunk = 3, .worker = kSharedStream};

// GradientData()
//
// The n values described at the top, generated once per n.
const std::vector<float>& GradientData(size_t n) {
  static auto* const cache = new std::map<size_t, std::vector<float>>;
  std::vector<float>& data = (*cache)[n];
  if (data.size() == n) return data;
  data.resize(n);
  const PhiloxStream rng(kDataKey);
  constexpr double kTwoPi = 6.283185307179586;
  for (size_t i = 0; i < n; ++i) {
    // One Philox block per entry: two uniforms for Box-Muller, one for the outlier draw.
    const auto block = rng.Block(static_cast<uint32_t>(i));
    const double u1 = 1.0 - PhiloxStream::ToUniform(block.v[0]);  // (0, 1]: log() is finite.
    const double u2 = PhiloxStream::ToUniform(block.v[1]);
    const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
    const bool outlier = PhiloxStream::ToUniform(block.v[2]) < kOutlierRate;
    data[i] = static_cast<float>(kSigma * z * (outlier ? kOutlierScale : 1.0));
  }
  return data;
}

// One worker's view of a multi-round step: answers[k] is the server's answer to round k.
struct RoundAnswers {
  std::vector<std::string> answers;
  size_t push_bytes = 0;  // The worker's payloads of all rounds, summed.
};

// The answer EncodeRound(round) takes: none for round 0, else the answer to round - 1.
absl::string_view PreviousAnswer(const std::vector<std::string>& answers, int round) {
  return round == 0 ? absl::string_view() : absl::string_view(answers[round - 1]);
}

// SimulateRounds()
//
// Runs one step of `worker` against `server` (one contributor) and records the answers, so
// the encode benchmark can replay them without a server in the loop.
absl::StatusOr<RoundAnswers> SimulateRounds(Codec& worker, Codec& server,
                                            absl::Span<const float> input) {
  RoundAnswers result;
  std::string payload;
  std::vector<float> aggregate(worker.size());
  for (int round = 0; round < worker.rounds(); ++round) {
    const absl::string_view previous = PreviousAnswer(result.answers, round);
    absl::Status status = worker.EncodeRound(round, input, previous, kCodecKey, &payload);
    if (!status.ok()) return status;
    result.push_bytes += payload.size();
    std::vector<float> accumulator(server.RoundValues(round), 0.0f);
    status = server.DecodeAddRound(round, payload, kCodecKey, absl::MakeSpan(accumulator));
    if (!status.ok()) return status;
    std::string answer;
    const bool last = round + 1 == worker.rounds();
    server.FinishRound(round, 1, absl::MakeSpan(accumulator), kCodecKey, &answer,
                       last ? absl::MakeSpan(aggregate) : absl::Span<float>());
    result.answers.push_back(std::move(answer));
  }
  absl::Status status = worker.FinishRounds(result.answers.back(), kCodecKey, {});
  if (!status.ok()) return status;
  return result;
}

// The spec as one line of text format, e.g. `name: "topk" ratio: 0.01`.
std::string SpecText(const config::Codec& spec) {
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  std::string text;
  printer.PrintToString(spec, &text);
  return std::string(absl::StripTrailingAsciiWhitespace(text));
}

void SetPayloadCounters(benchmark::State& state, size_t n, size_t payload_bytes) {
  state.counters["payload_bytes"] = static_cast<double>(payload_bytes);
  state.counters["compression_ratio"] =
      payload_bytes == 0 ? 0.0 : 4.0 * static_cast<double>(n) / static_cast<double>(payload_bytes);
}

void BM_Memcpy(benchmark::State& state, size_t n) {
  const std::vector<float>& input = GradientData(n);
  std::vector<float> out(n);
  for (auto _ : state) {
    std::memcpy(out.data(), input.data(), n * sizeof(float));
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * n * sizeof(float));
}

void BM_Encode(benchmark::State& state, const CodecInfo* info, size_t n) {
  const std::vector<float>& input = GradientData(n);
  absl::StatusOr<std::unique_ptr<Codec>> codec = CreateCodec(info->example, n);
  if (!codec.ok()) {
    state.SkipWithError(std::string(codec.status().message()).c_str());
    return;
  }
  state.SetLabel(SpecText(info->example));
  std::string payload;
  payload.reserve((*codec)->MaxPayloadBytes());
  size_t payload_bytes = 0;
  if ((*codec)->rounds() == 1) {
    for (auto _ : state) {
      absl::Status status = (*codec)->Encode(input, kCodecKey, &payload);
      if (!status.ok()) {
        state.SkipWithError(std::string(status.message()).c_str());
        return;
      }
      benchmark::DoNotOptimize(payload.data());
      benchmark::ClobberMemory();
    }
    payload_bytes = payload.size();
  } else {
    absl::StatusOr<std::unique_ptr<Codec>> server = CreateCodec(info->example, n);
    absl::StatusOr<RoundAnswers> rounds =
        server.ok() ? SimulateRounds(**codec, **server, input) : server.status();
    if (!rounds.ok()) {
      state.SkipWithError(std::string(rounds.status().message()).c_str());
      return;
    }
    for (auto _ : state) {
      for (int round = 0; round < (*codec)->rounds(); ++round) {
        const absl::string_view previous = PreviousAnswer(rounds->answers, round);
        absl::Status status = (*codec)->EncodeRound(round, input, previous, kCodecKey, &payload);
        if (!status.ok()) {
          state.SkipWithError(std::string(status.message()).c_str());
          return;
        }
        benchmark::DoNotOptimize(payload.data());
      }
      absl::Status status = (*codec)->FinishRounds(rounds->answers.back(), kCodecKey, {});
      if (!status.ok()) {
        state.SkipWithError(std::string(status.message()).c_str());
        return;
      }
      benchmark::ClobberMemory();
    }
    payload_bytes = rounds->push_bytes;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * n * sizeof(float));
  SetPayloadCounters(state, n, payload_bytes);
}

void BM_Decode(benchmark::State& state, const CodecInfo* info, size_t n) {
  const std::vector<float>& input = GradientData(n);
  absl::StatusOr<std::unique_ptr<Codec>> encoder = CreateCodec(info->example, n);
  absl::StatusOr<std::unique_ptr<Codec>> decoder = CreateCodec(info->example, n);
  if (!encoder.ok() || !decoder.ok()) {
    state.SkipWithError(std::string((encoder.ok() ? decoder : encoder).status().message()).c_str());
    return;
  }
  std::vector<float> out(n);
  if ((*encoder)->rounds() == 1) {
    std::string payload;
    absl::Status status = (*encoder)->Encode(input, kCodecKey, &payload);
    if (!status.ok()) {
      state.SkipWithError(std::string(status.message()).c_str());
      return;
    }
    for (auto _ : state) {
      status = (*decoder)->Decode(payload, kCodecKey, absl::MakeSpan(out));
      if (!status.ok()) {
        state.SkipWithError(std::string(status.message()).c_str());
        return;
      }
      benchmark::DoNotOptimize(out.data());
      benchmark::ClobberMemory();
    }
    SetPayloadCounters(state, n, payload.size());
  } else {
    // The worker's payload of each round, as the server receives them.
    Codec& worker = **encoder;
    Codec& server = **decoder;
    absl::StatusOr<RoundAnswers> rounds = SimulateRounds(worker, server, input);
    std::vector<std::string> payloads;
    for (int round = 0; rounds.ok() && round < worker.rounds(); ++round) {
      std::string payload;
      const absl::string_view previous = PreviousAnswer(rounds->answers, round);
      absl::Status status = worker.EncodeRound(round, input, previous, kCodecKey, &payload);
      if (!status.ok()) rounds = status;
      payloads.push_back(std::move(payload));
    }
    if (!rounds.ok()) {
      state.SkipWithError(std::string(rounds.status().message()).c_str());
      return;
    }
    std::vector<std::vector<float>> accumulators;
    for (int round = 0; round < server.rounds(); ++round) {
      accumulators.emplace_back(server.RoundValues(round));
    }
    std::string answer;
    for (auto _ : state) {
      for (int round = 0; round < server.rounds(); ++round) {
        std::vector<float>& accumulator = accumulators[round];
        std::fill(accumulator.begin(), accumulator.end(), 0.0f);
        absl::Status status =
            server.DecodeAddRound(round, payloads[round], kCodecKey, absl::MakeSpan(accumulator));
        if (!status.ok()) {
          state.SkipWithError(std::string(status.message()).c_str());
          return;
        }
        const bool last = round + 1 == server.rounds();
        server.FinishRound(round, 1, absl::MakeSpan(accumulator), kCodecKey, &answer,
                           last ? absl::MakeSpan(out) : absl::Span<float>());
      }
      benchmark::DoNotOptimize(out.data());
      benchmark::ClobberMemory();
    }
    SetPayloadCounters(state, n, rounds->push_bytes);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * n * sizeof(float));
}

// Removes --codec_bench_<name>=VALUE from argv and returns VALUE ("" if absent).
std::string TakeFlag(int* argc, char** argv, absl::string_view name) {
  const std::string prefix = absl::StrCat("--codec_bench_", name, "=");
  std::string value;
  int kept = 1;
  for (int i = 1; i < *argc; ++i) {
    if (absl::string_view(argv[i]).substr(0, prefix.size()) == prefix) {
      value = argv[i] + prefix.size();
    } else {
      argv[kept++] = argv[i];
    }
  }
  *argc = kept;
  return value;
}

}  // namespace
}  // namespace tamp::compress

int main(int argc, char** argv) {
  using tamp::compress::CodecInfo;
  std::vector<size_t> sizes = {size_t{1} << 20, size_t{1} << 24};
  if (std::string flag = tamp::compress::TakeFlag(&argc, argv, "sizes"); !flag.empty()) {
    sizes.clear();
    for (absl::string_view field : absl::StrSplit(flag, ',')) {
      uint64_t n = 0;
      if (!absl::SimpleAtoi(field, &n) || n == 0) {
        std::cerr << "codec_bench: bad --codec_bench_sizes entry '" << field << "'\n";
        return 2;
      }
      sizes.push_back(n);
    }
  }
  double min_time = 0.2;
  if (std::string flag = tamp::compress::TakeFlag(&argc, argv, "min_time"); !flag.empty()) {
    if (!absl::SimpleAtod(flag, &min_time) || min_time <= 0) {
      std::cerr << "codec_bench: bad --codec_bench_min_time '" << flag << "'\n";
      return 2;
    }
  }

  for (size_t n : sizes) {
    benchmark::RegisterBenchmark(absl::StrCat("memcpy/", n).c_str(), tamp::compress::BM_Memcpy, n)
        ->MinTime(min_time);
    for (const CodecInfo& info : tamp::compress::ListCodecs()) {
      benchmark::RegisterBenchmark(absl::StrCat("encode/", info.name, "/", n).c_str(),
                                   tamp::compress::BM_Encode, &info, n)
          ->MinTime(min_time);
      benchmark::RegisterBenchmark(absl::StrCat("decode/", info.name, "/", n).c_str(),
                                   tamp::compress::BM_Decode, &info, n)
          ->MinTime(min_time);
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

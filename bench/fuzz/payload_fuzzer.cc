// payload_fuzzer: libFuzzer target for the payload decoders of every registered codec.
//
// Payloads and answers are untrusted (compress/codec.h): whatever the bytes, a decoder must
// not crash, read or write out of bounds (ASan), hit undefined behaviour (UBSan) or fail a
// CHECK. Beyond that this target checks the contract codec.h states:
//   - a rejected payload is INVALID_ARGUMENT and leaves the output / accumulator untouched;
//   - Decode and DecodeAdd agree: both accept or both reject a payload, and DecodeAdd adds
//     exactly what Decode writes (accumulator 1 + decoded value, bit for bit, NaN = NaN);
//   - FinishAggregate then takes whatever the accumulator holds.
// A violation prints what happened and aborts, so libFuzzer saves the input.
//
// Input layout: bench/fuzz/payload_input.h. Codecs come from compress::ListCodecs() when it
// runs. Built and run by bench/fuzz.sh.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "bench/fuzz/payload_input.h"
#include "compress/codec.h"
#include "compress/registry.h"

namespace tamp::fuzz {
namespace {

using compress::Codec;
using compress::CodecInfo;

constexpr float kSentinel = -12345.5f;

struct Context {
  const CodecInfo* info;
  size_t n;
  uint8_t variant;
  uint8_t op;
};

[[noreturn]] void Die(const Context& ctx, absl::string_view what) {
  std::fprintf(stderr, "payload_fuzzer: codec %s (variant %u), n = %zu, op %u: %.*s\n",
               ctx.info->name.c_str(), ctx.variant, ctx.n, ctx.op, static_cast<int>(what.size()),
               what.data());
  std::abort();
}

bool SameFloat(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof(float)) == 0;
}

// A rejection must be INVALID_ARGUMENT with `values` (filled with `fill` before) unchanged.
void CheckRejection(const Context& ctx, absl::string_view method, const absl::Status& status,
                    absl::Span<const float> values, float fill) {
  if (status.code() != absl::StatusCode::kInvalidArgument) {
    Die(ctx, absl::StrCat(method, " failed with ", status.ToString(), ", not INVALID_ARGUMENT"));
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (!SameFloat(values[i], fill)) {
      Die(ctx, absl::StrCat(method, " rejected the payload (", status.message(),
                            ") but wrote its output: value ", i, " is ", values[i]));
    }
  }
}

void FuzzSingleRound(const Context& ctx, const Codec& codec, absl::string_view payload,
                     const RandomKey& key) {
  std::vector<float> out(ctx.n, kSentinel);
  const absl::Status decode = codec.Decode(payload, key, absl::MakeSpan(out));
  if (!decode.ok()) CheckRejection(ctx, "Decode", decode, out, kSentinel);

  std::vector<float> accumulator(ctx.n, 1.0f);
  const absl::Status add = codec.DecodeAdd(payload, key, absl::MakeSpan(accumulator));
  if (!add.ok()) CheckRejection(ctx, "DecodeAdd", add, accumulator, 1.0f);

  if (decode.ok() != add.ok()) {
    Die(ctx, absl::StrCat("Decode says ", decode.ToString(), " but DecodeAdd says ",
                          add.ToString()));
  }
  if (!decode.ok()) return;
  for (size_t i = 0; i < ctx.n; ++i) {
    const float expected = 1.0f + out[i];
    if (!SameFloat(accumulator[i], expected)) {
      Die(ctx, absl::StrCat("DecodeAdd disagrees with Decode at ", i, ": 1 + ", out[i], " = ",
                            expected, ", DecodeAdd gave ", accumulator[i]));
    }
  }
  // Aggregation does not fail on data, whatever the payloads decoded to.
  codec.FinishAggregate(2, absl::MakeSpan(accumulator));
}

// Multi-round codecs: the server's DecodeAddRound of any round, and the worker's handling of
// the server's answers, after the rounds before have run with valid messages.
void FuzzRounds(const Context& ctx, const config::Codec& spec, absl::string_view message,
                const RandomKey& key) {
  absl::StatusOr<std::unique_ptr<Codec>> worker = compress::CreateCodec(spec, ctx.n);
  absl::StatusOr<std::unique_ptr<Codec>> server = compress::CreateCodec(spec, ctx.n);
  if (!worker.ok() || !server.ok()) return;
  const int rounds = (*worker)->rounds();
  const int op = ctx.op % (2 * rounds);
  const std::vector<float> input = SampleValues(ctx.n, 0);
  std::vector<std::string> payloads;
  std::vector<std::string> answers;

  if (op < rounds) {
    // Server: rounds 0..op-1 valid, then the fuzzed payload for round op.
    if (!RunRounds(**worker, **server, input, key, op, &payloads, &answers).ok()) return;
    std::vector<float> accumulator((*server)->RoundValues(op), 1.0f);
    const absl::Status status =
        (*server)->DecodeAddRound(op, message, key, absl::MakeSpan(accumulator));
    if (!status.ok()) {
      CheckRejection(ctx, absl::StrCat("DecodeAddRound(", op, ")"), status, accumulator, 1.0f);
      return;
    }
    // Does not fail on data, whatever the accumulator holds now.
    std::string answer;
    std::vector<float> aggregate(ctx.n);
    const bool last = op + 1 == rounds;
    (*server)->FinishRound(op, 1, absl::MakeSpan(accumulator), key, &answer,
                           last ? absl::MakeSpan(aggregate) : absl::Span<float>());
    return;
  }
  if (op < 2 * rounds - 1) {
    // Worker: rounds 0..k-1 valid, then round k with the fuzzed answer to round k-1.
    const int k = op - rounds + 1;
    if (!RunRounds(**worker, **server, input, key, k, &payloads, &answers).ok()) return;
    std::string payload;
    const absl::Status status = (*worker)->EncodeRound(k, input, message, key, &payload);
    if (!status.ok() && status.code() != absl::StatusCode::kInvalidArgument) {
      Die(ctx, absl::StrCat("EncodeRound(", k, ") failed with ", status.ToString(),
                            ", not INVALID_ARGUMENT"));
    }
    return;
  }
  // Worker: every round valid, then FinishRounds with the fuzzed final answer.
  if (!RunRounds(**worker, **server, input, key, rounds, &payloads, &answers).ok()) return;
  std::vector<float> sent(ctx.n, kSentinel);
  const absl::Status status = (*worker)->FinishRounds(message, key, absl::MakeSpan(sent));
  if (!status.ok()) CheckRejection(ctx, "FinishRounds", status, sent, kSentinel);
}

}  // namespace
}  // namespace tamp::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tamp::fuzz;  // NOLINT
  const auto& codecs = tamp::compress::ListCodecs();
  if (size < kPrefixBytes || codecs.empty()) return 0;
  const tamp::compress::CodecInfo& info = codecs[data[0] % codecs.size()];
  const Context ctx{&info, ChunkSize(data[1], data[2]), data[3], data[4]};
  const tamp::config::Codec spec = SpecVariant(info.example, info.parameters, ctx.variant);
  const tamp::RandomKey key = FuzzKey(ctx.op);
  // The payload is the tail of libFuzzer's exactly-sized buffer: reading past it is caught.
  const absl::string_view payload(reinterpret_cast<const char*>(data) + kPrefixBytes,
                                  size - kPrefixBytes);

  absl::StatusOr<std::unique_ptr<tamp::compress::Codec>> codec =
      tamp::compress::CreateCodec(spec, ctx.n);
  if (!codec.ok()) return 0;  // E.g. a chunk too small for the codec's view.
  if ((*codec)->rounds() == 1) {
    FuzzSingleRound(ctx, **codec, payload, key);
  } else {
    FuzzRounds(ctx, spec, payload, key);
  }
  return 0;
}

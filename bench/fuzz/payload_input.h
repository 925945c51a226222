// The input layout of payload_fuzzer, shared with fuzz_seeds (which writes valid inputs).
//
//   byte 0      codec: index into compress::ListCodecs(), modulo its size
//   bytes 1-2   chunk size n = 1 + (uint16 little-endian % kMaxElements), so 1 <= n <= 2^16
//   byte 3      variant of the codec's example spec: bit j flips the j-th boolean parameter
//               the codec lists (CodecInfo::parameters; e.g. fp16_values, stochastic), so
//               each codec's other body layouts are reached without naming them here
//   byte 4      operation, and the step of the Philox key:
//                 single-round codecs: always Decode and DecodeAdd (byte 4 only varies the key)
//                 codecs with R = rounds() > 1, op = byte 4 % (2R):
//                   op <  R        server: DecodeAddRound(op, payload)
//                   R <= op < 2R-1 worker: rounds 0..k-1 run properly, then
//                                  EncodeRound(k, previous_answer = payload), k = op - R + 1
//                   op == 2R-1     worker: every round runs properly, then
//                                  FinishRounds(final_answer = payload)
//   bytes 5..   the payload (or answer), untrusted
#ifndef TAMP_BENCH_FUZZ_PAYLOAD_INPUT_H_
#define TAMP_BENCH_FUZZ_PAYLOAD_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/philox.h"
#include "compress/codec.h"
#include "google/protobuf/descriptor.h"
#include "proto/config.pb.h"

namespace tamp::fuzz {

inline constexpr size_t kPrefixBytes = 5;
inline constexpr uint32_t kMaxElements = 1 << 16;

inline RandomKey FuzzKey(uint8_t op) {
  return {.seed = 7, .step = op, .chunk = 1, .worker = kSharedStream};
}

// Chunk size n <-> bytes 1-2.
inline size_t ChunkSize(uint8_t lo, uint8_t hi) {
  return 1 + (static_cast<uint32_t>(lo) | static_cast<uint32_t>(hi) << 8) % kMaxElements;
}

// A fuzz input: prefix + payload.
inline std::string MakeInput(size_t codec_index, size_t n, uint8_t variant, uint8_t op,
                             absl::string_view payload) {
  const uint32_t encoded = static_cast<uint32_t>(n - 1);
  std::string input = {static_cast<char>(codec_index), static_cast<char>(encoded & 0xff),
                       static_cast<char>(encoded >> 8), static_cast<char>(variant),
                       static_cast<char>(op)};
  input.append(payload.data(), payload.size());
  return input;
}

// SpecVariant()
//
// `example` with its j-th boolean parameter flipped where bit j of `variant` is set.
inline config::Codec SpecVariant(const config::Codec& example,
                                 const std::vector<std::string>& parameters, uint8_t variant) {
  config::Codec spec = example;
  const google::protobuf::Descriptor* descriptor = spec.GetDescriptor();
  const google::protobuf::Reflection* reflection = spec.GetReflection();
  int bit = 0;
  for (const std::string& name : parameters) {
    const google::protobuf::FieldDescriptor* field = descriptor->FindFieldByName(name);
    if (field == nullptr || field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_BOOL) {
      continue;
    }
    if (bit < 8 && (variant >> bit & 1) != 0) {
      reflection->SetBool(&spec, field, !reflection->GetBool(spec, field));
    }
    ++bit;
  }
  return spec;
}

// Gradient-like sample values for valid payloads: deterministic in (n, salt).
inline std::vector<float> SampleValues(size_t n, uint32_t salt) {
  const PhiloxStream rng({.seed = 99, .step = salt, .chunk = 0, .worker = 0});
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = (rng.Uniform(i) - 0.5f) * 0.02f;
  return values;
}

// RunRounds()
//
// Plays `rounds_to_run` complete rounds of one step: `worker` encodes, `server` (one
// contributor) answers. Appends each worker payload to *payloads and each answer to
// *answers.
inline absl::Status RunRounds(compress::Codec& worker, compress::Codec& server,
                              absl::Span<const float> input, const RandomKey& key,
                              int rounds_to_run, std::vector<std::string>* payloads,
                              std::vector<std::string>* answers) {
  std::vector<float> aggregate(worker.size());
  for (int round = 0; round < rounds_to_run; ++round) {
    const absl::string_view previous =
        round == 0 ? absl::string_view() : absl::string_view((*answers)[round - 1]);
    std::string payload;
    absl::Status status = worker.EncodeRound(round, input, previous, key, &payload);
    if (!status.ok()) return status;
    std::vector<float> accumulator(server.RoundValues(round), 0.0f);
    status = server.DecodeAddRound(round, payload, key, absl::MakeSpan(accumulator));
    if (!status.ok()) return status;
    std::string answer;
    const bool last = round + 1 == worker.rounds();
    server.FinishRound(round, 1, absl::MakeSpan(accumulator), key, &answer,
                       last ? absl::MakeSpan(aggregate) : absl::Span<float>());
    payloads->push_back(std::move(payload));
    answers->push_back(std::move(answer));
  }
  return absl::OkStatus();
}

}  // namespace tamp::fuzz

#endif  // TAMP_BENCH_FUZZ_PAYLOAD_INPUT_H_

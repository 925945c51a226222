// fuzz_seeds: writes the seed corpora of payload_fuzzer and config_fuzzer.
//
//   fuzz_seeds PAYLOAD_DIR CONFIG_DIR
//
// PAYLOAD_DIR gets valid inputs (bench/fuzz/payload_input.h layout) for every registered
// codec, each boolean-parameter variant of its example spec and a few chunk sizes: payloads
// made by the codec's own Encode (or, for multi-round codecs, the message each operation
// expects, from a played step). CONFIG_DIR gets valid configs: a small job with each codec's
// example spec as push codec (and pull codec where it answers in one round), under each
// error-feedback kind, with shard and tensor overrides. Codecs come from
// compress::ListCodecs(), so new ones are seeded without touching this file.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "bench/fuzz/payload_input.h"
#include "compress/codec.h"
#include "compress/registry.h"
#include "google/protobuf/text_format.h"

namespace tamp::fuzz {
namespace {

constexpr size_t kSeedSizes[] = {1, 2, 7, 64, 1000, 4096};

bool WriteFile(const std::string& path, absl::string_view bytes) {
  std::ofstream file(path, std::ios::binary);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(file);
}

// Number of distinct variants of a codec's spec: 2^(boolean parameters), at most 256.
int NumVariants(const compress::CodecInfo& info) {
  int bools = 0;
  for (const std::string& name : info.parameters) {
    const auto* field = config::Codec::descriptor()->FindFieldByName(name);
    if (field != nullptr && field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_BOOL) {
      ++bools;
    }
  }
  return bools >= 8 ? 256 : 1 << bools;
}

int WritePayloadSeeds(const std::string& dir) {
  int written = 0;
  const auto& codecs = compress::ListCodecs();
  for (size_t index = 0; index < codecs.size(); ++index) {
    const compress::CodecInfo& info = codecs[index];
    for (int variant = 0; variant < NumVariants(info); ++variant) {
      const config::Codec spec = SpecVariant(info.example, info.parameters, variant);
      for (size_t n : kSeedSizes) {
        auto worker = compress::CreateCodec(spec, n);
        auto server = compress::CreateCodec(spec, n);
        if (!worker.ok() || !server.ok()) continue;
        const int rounds = (*worker)->rounds();
        // Single-round: one op (it only varies the key). Multi-round: every op.
        const int ops = rounds == 1 ? 1 : 2 * rounds;
        for (int op = 0; op < ops; ++op) {
          const RandomKey key = FuzzKey(static_cast<uint8_t>(op));
          std::string message;
          if (rounds == 1) {
            const std::vector<float> values = SampleValues(n, static_cast<uint32_t>(n));
            if (!(*worker)->Encode(values, key, &message).ok()) continue;
          } else {
            // Fresh instances per op, as the fuzzer makes them.
            worker = compress::CreateCodec(spec, n);
            server = compress::CreateCodec(spec, n);
            std::vector<std::string> payloads, answers;
            if (!RunRounds(**worker, **server, SampleValues(n, 0), key, rounds, &payloads,
                           &answers)
                     .ok()) {
              continue;
            }
            if (op < rounds) {
              message = payloads[op];  // DecodeAddRound(op)
            } else if (op < 2 * rounds - 1) {
              message = answers[op - rounds];  // EncodeRound(k) takes the answer to k - 1
            } else {
              message = answers.back();  // FinishRounds
            }
          }
          const std::string path =
              absl::StrCat(dir, "/", info.name, "-v", variant, "-n", n, "-op", op);
          if (!WriteFile(path, MakeInput(index, n, static_cast<uint8_t>(variant),
                                         static_cast<uint8_t>(op), message))) {
            std::fprintf(stderr, "fuzz_seeds: cannot write %s\n", path.c_str());
            return -1;
          }
          ++written;
        }
      }
    }
  }
  return written;
}

std::string SpecText(const config::Codec& spec) {
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  std::string text;
  printer.PrintToString(spec, &text);
  return std::string(absl::StripTrailingAsciiWhitespace(text));
}

int WriteConfigSeeds(const std::string& dir) {
  const char* const kFeedback[] = {"kind: NONE", "kind: RESIDUAL scale: 0.9",
                                   "kind: DGC_MOMENTUM momentum: 0.9"};
  int written = 0;
  for (const compress::CodecInfo& info : compress::ListCodecs()) {
    const std::string push = SpecText(info.example);
    // A codec that cannot carry the pull (multi-round, or sign votes) would make the config
    // invalid, and the seed would stop at validation.
    const std::string pull = info.can_pull ? push : "name: \"none\"";
    for (int f = 0; f < 3; ++f) {
      const std::string text = absl::StrCat(
          "version: 1\nname: \"seed\"\n"
          "cluster { num_servers: 2 num_workers: 2 }\n"
          "model { kind: MLP hidden: [64, 32] init_seed: 3 }\n"
          "data { batch_size: 32 train_limit: 4096 test_limit: 1000 shuffle_seed: 5 }\n"
          "training { epochs: 2 max_steps: 40 resync_steps: 10 }\n"
          "optimizer { name: \"sgd\" learning_rate: 0.05 momentum: 0.9 }\n"
          "compression {\n  partition_bytes: 16384\n  min_compress_bytes: 1024\n  seed: 7\n"
          "  default_compression {\n    push { ", push, " }\n    push_feedback { ",
          kFeedback[f], " }\n    pull { ", pull, " }\n  }\n",
          "  shard_overrides { shards: [1] compression { push { ", push,
          " } pull { name: \"none\" } } }\n",
          "  tensor_overrides { pattern: \"fc1.*\" compression { push { ", push,
          " } push_feedback { kind: RESIDUAL } } }\n}\n");
      const std::string path = absl::StrCat(dir, "/", info.name, "-f", f, ".pbtxt");
      if (!WriteFile(path, text)) {
        std::fprintf(stderr, "fuzz_seeds: cannot write %s\n", path.c_str());
        return -1;
      }
      ++written;
    }
  }
  return written;
}

}  // namespace
}  // namespace tamp::fuzz

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: fuzz_seeds PAYLOAD_DIR CONFIG_DIR\n");
    return 2;
  }
  const int payloads = tamp::fuzz::WritePayloadSeeds(argv[1]);
  const int configs = tamp::fuzz::WriteConfigSeeds(argv[2]);
  if (payloads < 0 || configs < 0) return 1;
  std::printf("fuzz_seeds: %d payload seeds in %s, %d config seeds in %s\n", payloads, argv[1],
              configs, argv[2]);
  return 0;
}

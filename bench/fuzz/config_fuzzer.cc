// config_fuzzer: libFuzzer target for the config path every process runs at start-up:
// tamp::ParseConfig (text format) -> ApplyDefaults -> ValidateConfig -> BuildJobLayout.
//
// Any text must end in an error Status or a layout: no crash, no out-of-bounds access
// (ASan), no undefined behaviour (UBSan), no CHECK failure, and no runaway memory or time
// (libFuzzer's -rss_limit_mb / -malloc_limit_mb / -timeout, set by bench/fuzz.sh).
//
// Known issue (docs/fuzzing.md): ValidateConfig bounds neither the model's size nor the
// number of chunks, so a config with a tiny compression.partition_bytes (>= 4 is accepted)
// makes BuildJobLayout build one ChunkPlan per few elements: millions for a real model,
// billions for the largest widths model.hidden allows, so every process runs out of memory
// at start-up instead of reporting a config error. Until validation rejects such configs,
// this harness skips the layout of configs with more than TAMP_FUZZ_MAX_CHUNKS chunks
// (default 65536; 0 lifts the cap and reproduces the issue) so that a run keeps exploring
// instead of stopping at the first slow input.
//
// Built and run by bench/fuzz.sh; seeds: examples/*.pbtxt and the configs fuzz_seeds writes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "common/config.h"
#include "common/job_layout.h"
#include "common/model_layout.h"
#include "proto/config.pb.h"

namespace {

uint64_t MaxChunks() {
  static const uint64_t max_chunks = [] {
    uint64_t value = 65536;
    const char* env = std::getenv("TAMP_FUZZ_MAX_CHUNKS");
    if (env != nullptr && !absl::SimpleAtoi(env, &value)) value = 65536;
    return value;
  }();
  return max_chunks;
}

// The chunks PartitionTensors makes: ceil(bytes / partition_bytes) per tensor (saturating).
uint64_t ChunkCount(const tamp::config::RunConfig& config) {
  absl::StatusOr<std::vector<tamp::TensorSpec>> tensors = tamp::ModelTensors(config.model());
  if (!tensors.ok()) return 0;
  const uint64_t partition_bytes = config.compression().partition_bytes();
  uint64_t chunks = 0;
  for (const tamp::TensorSpec& tensor : *tensors) {
    const uint64_t bytes = static_cast<uint64_t>(tensor.elements()) * sizeof(float);
    chunks += bytes / partition_bytes + 1;
    if (chunks > (uint64_t{1} << 62)) break;
  }
  return chunks;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<tamp::config::RunConfig> config = tamp::ParseConfig(text, "fuzz.pbtxt");
  if (!config.ok()) return 0;
  tamp::ApplyDefaults(&*config);
  if (!tamp::ValidateConfig(*config).ok()) return 0;
  if (MaxChunks() != 0 && ChunkCount(*config) > MaxChunks()) return 0;  // The known issue.
  absl::StatusOr<tamp::JobLayout> layout = tamp::BuildJobLayout(*config);
  if (layout.ok()) {
    // Touch the result so nothing is optimised away: every chunk lies inside the model.
    for (const tamp::ChunkPlan& plan : layout->chunks) {
      if (layout->flat_offset(plan) + plan.chunk.length > layout->total_elements) __builtin_trap();
    }
  }
  return 0;
}

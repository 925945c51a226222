// config_fuzzer: libFuzzer target for the config path every process runs at start-up:
// tamp::ParseConfig (text format) -> ApplyDefaults -> ValidateConfig -> BuildJobLayout.
//
// Any text must end in an error Status or a layout: no crash, no out-of-bounds access
// (ASan), no undefined behaviour (UBSan), no CHECK failure, and no runaway memory or time
// (libFuzzer's -rss_limit_mb / -malloc_limit_mb / -timeout, set by bench/fuzz.sh).
//
// Found by this target and fixed (docs/fuzzing.md): a tiny compression.partition_bytes
// made BuildJobLayout build billions of chunks; ValidateConfig now bounds the chunk count.
//
// Built and run by bench/fuzz.sh; seeds: examples/*.pbtxt and the configs fuzz_seeds writes.
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "job/config.h"
#include "job/job_layout.h"
#include "proto/config.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<tamp::config::RunConfig> config = tamp::ParseConfig(text, "fuzz.pbtxt");
  if (!config.ok()) return 0;
  tamp::ApplyDefaults(&*config);
  if (!tamp::ValidateConfig(*config).ok()) return 0;
  absl::StatusOr<tamp::JobLayout> layout = tamp::BuildJobLayout(*config);
  if (layout.ok()) {
    // Touch the result so nothing is optimised away: every chunk lies inside the model.
    for (const tamp::ChunkPlan& plan : layout->chunks) {
      if (layout->flat_offset(plan) + plan.chunk.length > layout->total_elements) __builtin_trap();
    }
  }
  return 0;
}

// Calibration of the performance model (tools/tamp/perf_model.h): measures, on this machine
// and at model time, the compute and codec costs that the model combines.
//
// Both functions run real code in-process: the config's CPU model (worker/cpu_models.h)
// and the chunk's codecs, error feedback and optimizer as worker/trainer.cc and
// server/sync_chunk.cc call them. They take a few hundred milliseconds for the example MLP.
//
// Thread safety: MeasureCompute() sets OpenBLAS to one thread per caller thread (what
// tamp_worker does by default); call neither concurrently with other BLAS work.
#ifndef TAMP_TOOLS_TAMP_PERF_CALIBRATE_H_
#define TAMP_TOOLS_TAMP_PERF_CALIBRATE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "job/job_layout.h"
#include "proto/config.pb.h"
#include "tools/tamp/perf_model.h"

namespace tamp::perf {

struct ComputeProfile {
  double step_ms = 0;                   // Forward + backward of one worker, median.
  std::vector<double> tensor_ready_ms;  // By tensor: when its gradient was final, median.
  std::vector<float> gradient;          // One step's flat gradient: input for the codecs.
  bool on_cpu = true;  // false: model.kind LAYOUT's profile (a sleep), or an accelerator's.
};

// MeasureCompute()
//
// Runs `concurrent` copies of the config's model at its batch size at once (each on its own
// thread with one BLAS thread, as that many workers on this machine would), on random
// images from the initial weights: `steps` timed steps after one warm-up, each followed by
// as long an idle pause (workers wait on the network between steps). The figures are
// medians over the copies' steps. model.kind LAYOUT: the profile's times and the synthetic
// gradient of step 0, nothing run.
absl::StatusOr<ComputeProfile> MeasureCompute(const config::RunConfig& config,
                                              const JobLayout& layout, int concurrent, int steps);

// MeasureChunkCosts()
//
// The cost of every chunk of `layout` in one step, with its own compression: the push
// codec through its error feedback on `gradient` (the flat gradient), the shard's decode of
// one push, its optimizer and update encoding, and the worker's decode and apply. Payload
// sizes are those of the encoded data. Chunks with the same compression, length and shape
// are measured once; each figure is the median of `repetitions` after one warm-up.
// Errors (a codec refusing a chunk) name the chunk and its tensor.
absl::StatusOr<std::vector<ChunkCost>> MeasureChunkCosts(const config::RunConfig& config,
                                                         const JobLayout& layout,
                                                         absl::Span<const float> gradient,
                                                         int repetitions);

}  // namespace tamp::perf

#endif  // TAMP_TOOLS_TAMP_PERF_CALIBRATE_H_

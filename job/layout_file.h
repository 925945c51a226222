// Layout and compute-profile files of model.kind LAYOUT: a real model's tensors (names and
// shapes) and how long its forward and backward take, as versioned text, so that a job with
// ResNet-50's or BERT's tensors runs through the real workers, codecs and servers without
// the model's compute (docs/layout_models.md; models/ ships three).
//
// Both formats are line based; '#' starts a comment that runs to the end of the line, and
// blank lines are ignored. The first other line names the format and its version.
//
// Layout ("tamp-layout 1"): one tensor per line, in forward order: a name (letters, digits
// and "._-/", at most 256 bytes) and 1 to 8 dimensions, each >= 1:
//
//   tamp-layout 1
//   conv1.weight 64 3 7 7
//   bn1.weight 64
//
// Rank-1 tensors (biases, norm scales) start at zero, the others He-uniform with fan_in the
// product of the dimensions after the first; the values do not matter to the synthetic
// gradients, only to what the servers hold.
//
// Profile ("tamp-profile 1"): `scale S` once (> 0; multiplies every time), then one `layer`
// line per layer in forward order: its forward ms, its backward ms (>= 0, finite) and the
// tensors whose gradients its backward finishes, as names or globs ('*': any run of
// characters). Every tensor of the layout belongs to exactly one layer. Forward runs the layers in order,
// backward in reverse; a tensor's gradient is final when its layer's backward ends.
//
//   tamp-profile 1
//   scale 1.0
//   layer 0.52 1.04 conv1.weight bn1.*
//
// Version 2 ("tamp-profile 2") adds an optional `compute cpu` or `compute accelerator` line
// (default accelerator): where the workers' compute runs. Measured on the CPU
// (tamp.torch.describe_model() of a CPU model), it takes the cores the servers and the codecs
// share, and the performance model counts it so; version 1 files are read as before.
//
// Errors are INVALID_ARGUMENT (NOT_FOUND for a missing file) and name the file, the line and
// the problem: "models/x.profile:7: layer: backward ms 'abc' is not a number".
//
// Thread safety: free functions without shared state.
#ifndef TAMP_JOB_LAYOUT_FILE_H_
#define TAMP_JOB_LAYOUT_FILE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "job/model_layout.h"

namespace tamp {

inline constexpr int kLayoutFileVersion = 1;
inline constexpr int kProfileFileVersion = 2;  // Reads 1 and 2.

// ProfileLayer
//
// One layer of a profile: its times as written (before the scale) and its tensors (indices
// into the layout, ascending).
struct ProfileLayer {
  double forward_ms = 0;
  double backward_ms = 0;
  std::vector<int> tensors;
};

// LayerProfile
//
// A parsed profile. The times it reports are scaled.
struct LayerProfile {
  double scale = 1;
  bool compute_on_cpu = false;       // `compute cpu` (version 2).
  std::vector<ProfileLayer> layers;  // Forward order.

  // Forward of every layer, then backward of every layer: one step's compute.
  double step_ms() const;
  // By tensor: when its gradient is final, from the start of the step (num_tensors entries).
  std::vector<double> TensorReadyMs(size_t num_tensors) const;
};

// ParseLayout()
//
// The tensors of layout text; `source` (the file's path) prefixes errors.
absl::StatusOr<std::vector<TensorSpec>> ParseLayout(absl::string_view text,
                                                    absl::string_view source);

// ParseProfile()
//
// The profile of `tensors` (a parsed layout) in profile text; `source` prefixes errors.
absl::StatusOr<LayerProfile> ParseProfile(absl::string_view text, absl::string_view source,
                                          const std::vector<TensorSpec>& tensors);

// LoadLayoutFile(), LoadProfileFile()
//
// Read the file at `path` and parse it as above.
absl::StatusOr<std::vector<TensorSpec>> LoadLayoutFile(const std::string& path);
absl::StatusOr<LayerProfile> LoadProfileFile(const std::string& path,
                                             const std::vector<TensorSpec>& tensors);

}  // namespace tamp

#endif  // TAMP_JOB_LAYOUT_FILE_H_

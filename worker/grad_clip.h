// Local gradient clipping (Lin et al., "Deep Gradient Compression", 2018, section 3.2).
//
// With compression.clip_norm set, each worker scales each tensor's gradient, before error
// feedback and the push codec, so that its L2 norm does not exceed
//   LocalClipThreshold(clip_norm, N) = clip_norm / sqrt(N)   (N = cluster.num_workers):
// the sum of N i.i.d. gradients has about sqrt(N) times the norm of one, so clip_norm is the
// threshold one would put on the summed gradient, as the paper does. Per tensor, over all its
// chunks (they are one contiguous slice of the worker's gradients), as DGC does per layer.
//
// Example:
//   const double threshold = LocalClipThreshold(config.compression().clip_norm(), workers);
//   const float scale = ClipScale(tensor_grads, threshold);  // 1 when within the threshold
//   for (...) out[i] = scale * tensor_grads[i];
#ifndef TAMP_WORKER_GRAD_CLIP_H_
#define TAMP_WORKER_GRAD_CLIP_H_

#include <cstdint>

#include "absl/types/span.h"

namespace tamp {

// LocalClipThreshold()
//
// clip_norm / sqrt(num_workers); num_workers >= 1.
double LocalClipThreshold(double clip_norm, uint32_t num_workers);

// ClipScale()
//
// The factor that brings ||grad||_2 (summed in double) down to `threshold`: threshold /
// ||grad|| when the norm is above it, else exactly 1 (the gradient is left as it is). A norm
// that is not finite (NaN or inf entries) gives 1 too: clipping cannot repair it, and the
// codecs send NaN on so it shows up.
float ClipScale(absl::Span<const float> grad, double threshold);

}  // namespace tamp

#endif  // TAMP_WORKER_GRAD_CLIP_H_

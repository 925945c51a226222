#include "worker/grad_clip.h"

#include <cmath>

namespace tamp {

double LocalClipThreshold(double clip_norm, uint32_t num_workers) {
  return clip_norm / std::sqrt(static_cast<double>(num_workers));
}

float ClipScale(absl::Span<const float> grad, double threshold) {
  double sum = 0;
  for (float g : grad) sum += static_cast<double>(g) * g;
  const double norm = std::sqrt(sum);
  if (!std::isfinite(norm) || norm <= threshold) return 1.0f;
  return static_cast<float>(threshold / norm);
}

}  // namespace tamp

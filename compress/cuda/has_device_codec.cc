#include "compress/cuda/has_device_codec.h"

namespace tamp::compress::cuda {

bool HasDeviceCodec(absl::string_view name) {
  for (absl::string_view known :
       {"none", "fp16", "bf16", "natural", "signsgd", "signum", "efsign", "qsgd", "terngrad",
        "maxmin", "topk", "dgc", "threshold", "randomblock", "randomk", "powersgd"}) {
    if (name == known) return true;
  }
  return false;
}

bool HasDeviceRounds(absl::string_view name) { return name == "powersgd"; }

bool HasDeviceDgcMomentum(absl::string_view name) {
  return name == "topk" || name == "dgc" || name == "threshold";
}

}  // namespace tamp::compress::cuda

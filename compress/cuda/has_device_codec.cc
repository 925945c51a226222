#include "compress/cuda/has_device_codec.h"

namespace tamp::compress::cuda {

bool HasDeviceCodec(absl::string_view name) {
  for (absl::string_view known :
       {"fp16", "bf16", "natural", "signsgd", "efsign", "qsgd", "terngrad", "maxmin", "topk"}) {
    if (name == known) return true;
  }
  return false;
}

}  // namespace tamp::compress::cuda

// HasDeviceCodec(): which codecs compress/cuda/ runs on the GPU, answerable without CUDA, so
// that a CPU-only build plans the same way a CUDA build does (worker/device_backend.h).
#ifndef TAMP_COMPRESS_CUDA_HAS_DEVICE_CODEC_H_
#define TAMP_COMPRESS_CUDA_HAS_DEVICE_CODEC_H_

#include "absl/strings/string_view.h"

namespace tamp::compress::cuda {

// HasDeviceCodec()
//
// Whether codec `name` (a registry name) has a GPU version: DeviceCodec::Create()
// (device_codec.h) for none, fp16, bf16, natural, signsgd, signum, efsign, qsgd, terngrad,
// maxmin, topk, dgc, threshold, randomblock, randomk; CreateDevicePowerSgd()
// (device_powersgd.h, the worker's side of its rounds) for powersgd (HasDeviceRounds()).
bool HasDeviceCodec(absl::string_view name);

// HasDeviceRounds()
//
// Whether that GPU version takes several rounds per step (compress/codec.h rounds()), so it
// is a PowerSgdWorker, not a DeviceCodec: powersgd.
bool HasDeviceRounds(absl::string_view name);

// HasDeviceDgcMomentum()
//
// Whether that GPU codec fuses push_feedback DGC_MOMENTUM into its encode
// (DeviceCodec::FusesDgcMomentum()): topk, dgc, threshold.
bool HasDeviceDgcMomentum(absl::string_view name);

}  // namespace tamp::compress::cuda

#endif  // TAMP_COMPRESS_CUDA_HAS_DEVICE_CODEC_H_

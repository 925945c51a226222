// DeviceCodec: a codec's encode and decode on the GPU, for gradients and updates that live in
// device memory. Payloads are byte-identical to the CPU codec's (compress/codec.h) for the
// same input and key, so CPU and GPU processes can talk to each other.
//
// Codecs: none, fp16, bf16, natural, signsgd, signum, efsign, qsgd, terngrad, maxmin, topk,
// dgc (top-k's selection and body under its own id), threshold (top-k's passes with a fixed
// cutoff; a body of variable length), randomblock, randomk (positions drawn on the host, as
// the CPU codec draws them: Floyd's algorithm is a sequential chain; the values move on the
// device) (HasDeviceCodec()). signum keeps its momentum on the device (every Encode is one
// step, as SignumCodec's). Others return UNIMPLEMENTED from Create(); callers fall back to
// the CPU codec. powersgd, whose step is two exchanges, has its own GPU class
// (device_powersgd.h).
//
// Error feedback is fused (DeviceFeedback): RESIDUAL encodes c = input + residual and
// leaves residual = s * (c - decode(body)) in one pass over input and residual for the
// elementwise and bucketed codecs (terngrad and efsign read them twice: their scale needs
// the whole chunk first; topk, dgc and threshold stage c in the residual buffer, see
// compress/cuda/topk.cu). DGC_MOMENTUM (momentum correction and momentum factor masking)
// is fused the same way into topk, dgc and threshold (FusesDgcMomentum()). Either leaves
// the memory bit for bit as compress/error_feedback.h's (NaN payloads aside).
//
// Blocking: Encode, EncodeToHost and DecodeAsync only enqueue work on `stream`. Payload()
// and Checked() wait for an event of that work (never for the whole stream); Decode,
// EncodeToPayload and DecodePayload are the enqueue and the wait in one call. Copies go
// through the instance's pinned host buffers (truly asynchronous, no pageable staging).
// Buffers must outlive the enqueued work. Not thread-safe, and one stream per instance: the
// scratch, the body buffers and the pinned buffers are the instance's, reused call after
// call.
//
// Untrusted payloads: Decode checks the body on the device (the CPU decoder's rules) before
// anything is written; an invalid body is INVALID_ARGUMENT and leaves `out` untouched.
//
// Example (worker push, gradient and residual on the device):
//   TAMP_ASSIGN_OR_RETURN(auto codec, DeviceCodec::Create(spec, chunk_length));
//   std::string payload;
//   TAMP_RETURN_IF_ERROR(codec->EncodeToPayload(d_grad, DeviceFeedback::Residual(d_residual),
//                                                key, &payload, s));
//   ... and on the receiving side:
//   TAMP_RETURN_IF_ERROR(codec->DecodePayload(payload, key, d_update, false, s));
// or, overlapping the copy with other host work:
//   TAMP_RETURN_IF_ERROR(codec->EncodeToHost(d_grad, DeviceFeedback::Residual(d_residual),
//                                             key, s));
//   ...                                              // e.g. enqueue the next layer's work
//   TAMP_ASSIGN_OR_RETURN(absl::string_view payload, codec->Payload());
#ifndef TAMP_COMPRESS_CUDA_DEVICE_CODEC_H_
#define TAMP_COMPRESS_CUDA_DEVICE_CODEC_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/philox.h"
#include "compress/codec.h"
#include "compress/cuda/has_device_codec.h"
#include "compress/cuda/internal/quantize_agent.h"
#include "compress/cuda/internal/randomblock_agent.h"
#include "compress/cuda/internal/randomk_agent.h"
#include "compress/cuda/internal/topk_agent.h"
#include "kernels/device.h"
#include "proto/config.pb.h"

namespace tamp::compress::cuda {

// DeviceFeedback
//
// The error feedback (compress/error_feedback.h) fused into DeviceCodec::Encode(): which kind,
// and its memory, buffers of size() floats in device memory that the caller owns, zeroes
// them before the first step and passes to every encode of the chunk.
//
// Example:
//   codec->Encode(d_grad, DeviceFeedback::Residual(d_residual), key, d_body, stream);
//   codec->Encode(d_grad, DeviceFeedback::DgcMomentum(d_u, d_v, 0.9f), key, d_body, stream);
struct DeviceFeedback {
  // NONE: nothing kept.
  static DeviceFeedback None() { return DeviceFeedback{}; }
  // RESIDUAL with scale s.
  static DeviceFeedback Residual(float* d_residual, float scale = 1.0f) {
    return DeviceFeedback{d_residual, nullptr, scale, 0.0f};
  }
  // DGC_MOMENTUM with momentum m: u (velocity) and v (accumulated; ErrorFeedback::residual()).
  static DeviceFeedback DgcMomentum(float* d_velocity, float* d_accumulated, float momentum) {
    return DeviceFeedback{d_accumulated, d_velocity, 1.0f, momentum};
  }

  float* residual = nullptr;  // RESIDUAL's residual, DGC_MOMENTUM's v; null for NONE.
  float* velocity = nullptr;  // DGC_MOMENTUM's u; null for the others.
  float scale = 1.0f;
  float momentum = 0.0f;
};

class DeviceCodec {
 public:
  // DeviceCodec::Create()
  //
  // Validates `spec` (compress/registry.h ValidateCodecSpec) and sets up a codec for chunks
  // of num_elements values, allocating its device scratch. UNIMPLEMENTED for codecs without
  // a GPU version, for powersgd (CreateDevicePowerSgd()) and for chunks of 2^32 values or
  // more; INVALID_ARGUMENT for a bad spec or
  // num_elements == 0; FAILED_PRECONDITION without a device.
  static absl::StatusOr<std::unique_ptr<DeviceCodec>> Create(const config::Codec& spec,
                                                             size_t num_elements);

  DeviceCodec(const DeviceCodec&) = delete;
  DeviceCodec& operator=(const DeviceCodec&) = delete;
  ~DeviceCodec();

  CodecId id() const { return id_; }
  // The wire format version the payload header carries (the CPU codec's kVersion).
  uint8_t version() const { return version_; }
  size_t size() const { return size_; }

  // DeviceCodec::BodyBytes(), PayloadBytes()
  //
  // The largest body, and it plus the 12-byte header (= the CPU codec's MaxPayloadBytes()):
  // exact sizes for every codec but threshold, whose body's count says its length
  // (compress/threshold.h).
  size_t BodyBytes() const { return body_bytes_; }
  size_t PayloadBytes() const;

  // DeviceCodec::FusesDgcMomentum()
  //
  // Whether Encode() takes DeviceFeedback::DgcMomentum(): topk, dgc, threshold.
  bool FusesDgcMomentum() const;

  // DeviceCodec::Encode()
  //
  // Writes the body of encode(c) to d_body (BodyBytes() bytes of device memory, 4-byte
  // aligned), c = d_input (size() values) or what `feedback` makes of it, updating its
  // memory as compress/error_feedback.h does. UNIMPLEMENTED for DGC_MOMENTUM where
  // !FusesDgcMomentum().
  absl::Status Encode(const float* d_input, const DeviceFeedback& feedback,
                      const RandomKey& key, unsigned char* d_body, cudaStream_t stream);

  // DeviceCodec::DecodeAsync(), Checked()
  //
  // DecodeAsync() enqueues the body check, d_out (size() values) = decode(d_body), or +=
  // with `accumulate` (the server's DecodeAdd), which writes nothing unless the check
  // passed, and the copy of the verdict to pinned memory. A threshold body's length must
  // match its count (CheckedBody() checks that on the host; DecodePayload() does it all).
  // Checked() waits for that verdict:
  // INVALID_ARGUMENT for an invalid body (d_out untouched), else OK. fp16 and bf16 bodies
  // need no check: Checked() then only waits for the decode.
  absl::Status DecodeAsync(const unsigned char* d_body, const RandomKey& key, float* d_out,
                           bool accumulate, cudaStream_t stream);
  absl::Status Checked();

  // DeviceCodec::Decode()
  //
  // DecodeAsync(), then Checked().
  absl::Status Decode(const unsigned char* d_body, const RandomKey& key, float* d_out,
                      bool accumulate, cudaStream_t stream);

  // DeviceCodec::EncodeToHost(), Payload()
  //
  // EncodeToHost() enqueues Encode() into the codec's own body buffer and the copy of the
  // body into its pinned payload buffer (the header is there already). Payload() waits for
  // that copy and returns the payload: its bytes (PayloadBytes(), or fewer for threshold)
  // of pinned host memory, valid until the next EncodeToHost(). threshold copies the
  // largest body, since only the device knows the count when the copy is enqueued.
  absl::Status EncodeToHost(const float* d_input, const DeviceFeedback& feedback,
                            const RandomKey& key, cudaStream_t stream);
  absl::StatusOr<absl::string_view> Payload();

  // DeviceCodec::EncodeToPayload()
  //
  // EncodeToHost(), then *payload = Payload().
  absl::Status EncodeToPayload(const float* d_input, const DeviceFeedback& feedback,
                               const RandomKey& key, std::string* payload, cudaStream_t stream);

  // DeviceCodec::CheckedBody()
  //
  // The body of `payload` once its header (compress/wire_format.h ParseHeader) and length
  // (threshold: the length its count gives, the count <= size()) are right; else
  // INVALID_ARGUMENT naming what is wrong. Host only.
  absl::StatusOr<absl::string_view> CheckedBody(absl::string_view payload) const;

  // DeviceCodec::DecodePayload()
  //
  // CheckedBody(), then copies the body to the device (through a pinned buffer) and
  // Decode()s it.
  absl::Status DecodePayload(absl::string_view payload, const RandomKey& key, float* d_out,
                             bool accumulate, cudaStream_t stream);

 private:
  DeviceCodec(CodecId id, uint8_t version, size_t size);

  absl::Status ErrorFor(unsigned long long verdict) const;
  bool NeedsCheck() const;

  const CodecId id_;
  const uint8_t version_;
  const size_t size_;
  // randomk: draws its positions on the host (RandomKCodec::Positions()) and enqueues their
  // upload through a pinned buffer.
  absl::Status UploadPositions(const RandomKey& key, cudaStream_t stream);

  // The body's length (threshold: from its count, which must be <= size()).
  absl::StatusOr<size_t> BodyBytesOf(absl::string_view body) const;

  enum class Family { kQuant, kTopK, kThreshold, kRandomBlock, kRandomK };
  Family family_ = Family::kQuant;
  cuda_internal::QuantLayout quant_;
  cuda_internal::TopKLayout topk_;  // topk, dgc; threshold with k = size().
  uint32_t key_floor_ = 0;          // threshold: ThresholdCodec::KeyFloor().
  cuda_internal::RandomBlockLayout randomblock_;
  cuda_internal::RandomKLayout randomk_;
  size_t body_bytes_ = 0;
  size_t temp_bytes_ = 0;
  kernels::DeviceArray<unsigned char> temp_;
  kernels::DeviceArray<float> state_;  // signum's momentum; empty for the others.
  kernels::DeviceArray<uint32_t> positions_;  // randomk's, for the last key uploaded.
  kernels::PinnedBuffer positions_host_;
  kernels::CudaEvent positions_uploaded_;
  kernels::DeviceArray<unsigned char> outgoing_;  // EncodeToHost()'s body.
  kernels::DeviceArray<unsigned char> incoming_;  // DecodePayload()'s body.
  kernels::DeviceArray<unsigned long long> verdict_;
  // Pinned: the outgoing payload (header + body), the incoming body, the verdict.
  kernels::PinnedBuffer outgoing_payload_;
  kernels::PinnedBuffer incoming_body_;
  kernels::PinnedBuffer verdict_host_;
  kernels::CudaEvent encoded_;  // After the last EncodeToHost()'s copy.
  kernels::CudaEvent checked_;  // After the last DecodeAsync()'s verdict copy.
};

}  // namespace tamp::compress::cuda

#endif  // TAMP_COMPRESS_CUDA_DEVICE_CODEC_H_

// DeviceCodec: a codec's encode and decode on the GPU, for gradients and updates that live in
// device memory. Payloads are byte-identical to the CPU codec's (compress/codec.h) for the
// same input and key, so CPU and GPU processes can talk to each other.
//
// Codecs: none, fp16, bf16, natural, signsgd, signum, efsign, qsgd, terngrad, maxmin, topk,
// dgc (top-k's selection and body under its own id; DGC's momentum correction is the
// worker's error feedback, not fused here), randomblock, randomk (positions drawn on the
// host, as the CPU codec draws them: Floyd's algorithm is a sequential chain; the values
// move on the device) (HasDeviceCodec()). signum keeps
// its momentum on the device (every Encode is one step, as SignumCodec's).
// Others return UNIMPLEMENTED from Create(); callers fall back to the CPU codec.
//
// Error feedback is fused: Encode(input, residual, s) encodes c = input + residual and
// leaves residual = s * (c - decode(body)), which is ErrorFeedback RESIDUAL
// (compress/error_feedback.h) in one pass over input and residual for the elementwise and
// bucketed codecs (terngrad and efsign read them twice: their scale needs the whole chunk
// first; topk stages c in the residual buffer, see compress/cuda/topk.cu).
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
//   TAMP_RETURN_IF_ERROR(codec->EncodeToPayload(d_grad, d_residual, 1.0f, key, &payload, s));
//   ... and on the receiving side:
//   TAMP_RETURN_IF_ERROR(codec->DecodePayload(payload, key, d_update, false, s));
// or, overlapping the copy with other host work:
//   TAMP_RETURN_IF_ERROR(codec->EncodeToHost(d_grad, d_residual, 1.0f, key, s));
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

class DeviceCodec {
 public:
  // DeviceCodec::Create()
  //
  // Validates `spec` (compress/registry.h ValidateCodecSpec) and sets up a codec for chunks
  // of num_elements values, allocating its device scratch. UNIMPLEMENTED for codecs without
  // a GPU version and for chunks of 2^32 values or more; INVALID_ARGUMENT for a bad spec or
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
  // Exact sizes: the body, and the body plus the 12-byte header (= the CPU codec's
  // MaxPayloadBytes()).
  size_t BodyBytes() const { return body_bytes_; }
  size_t PayloadBytes() const;

  // DeviceCodec::Encode()
  //
  // Writes the body of encode(c) to d_body (BodyBytes() bytes of device memory, 4-byte
  // aligned), c = d_input (size() values) or, when d_residual is not null, d_input +
  // d_residual, in which case d_residual becomes residual_scale * (c - decode(body)).
  absl::Status Encode(const float* d_input, float* d_residual, float residual_scale,
                      const RandomKey& key, unsigned char* d_body, cudaStream_t stream);

  // DeviceCodec::DecodeAsync(), Checked()
  //
  // DecodeAsync() enqueues the body check, d_out (size() values) = decode(d_body), or +=
  // with `accumulate` (the server's DecodeAdd), which writes nothing unless the check
  // passed, and the copy of the verdict to pinned memory. Checked() waits for that verdict:
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
  // that copy and returns the payload: PayloadBytes() bytes of pinned host memory, valid
  // until the next EncodeToHost().
  absl::Status EncodeToHost(const float* d_input, float* d_residual, float residual_scale,
                            const RandomKey& key, cudaStream_t stream);
  absl::StatusOr<absl::string_view> Payload();

  // DeviceCodec::EncodeToPayload()
  //
  // EncodeToHost(), then *payload = Payload().
  absl::Status EncodeToPayload(const float* d_input, float* d_residual, float residual_scale,
                               const RandomKey& key, std::string* payload, cudaStream_t stream);

  // DeviceCodec::DecodePayload()
  //
  // Checks the header on the host (compress/wire_format.h ParseHeader) and the body length,
  // copies the body to the device (through a pinned buffer) and Decode()s it.
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

  enum class Family { kQuant, kTopK, kRandomBlock, kRandomK };
  Family family_ = Family::kQuant;
  cuda_internal::QuantLayout quant_;
  cuda_internal::TopKLayout topk_;
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

// Without CUDA (tools/cuda.bzl) this file compiles to nothing.
#if TAMP_HAVE_CUDA

#include "compress/cuda/device_codec.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compress/bf16.h"
#include "compress/cuda/internal/launch.h"
#include "compress/dgc.h"
#include "compress/efsign.h"
#include "compress/fp16.h"
#include "compress/maxmin.h"
#include "compress/natural.h"
#include "compress/none.h"
#include "compress/qsgd.h"
#include "compress/randomblock.h"
#include "compress/randomk.h"
#include "compress/registry.h"
#include "compress/signsgd.h"
#include "compress/signum.h"
#include "compress/terngrad.h"
#include "compress/threshold.h"
#include "compress/topk.h"
#include "compress/wire_format.h"
#include "kernels/cuda_check.h"

namespace tamp::compress::cuda {
namespace {

using cuda_internal::MakeQuantLayout;
using cuda_internal::QuantKind;

constexpr uint64_t kMaxElements = uint64_t{1} << 32;  // Indices and counts are 32-bit.

const char* ReasonText(uint32_t reason) {
  switch (reason) {
    case cuda_internal::kReasonPadding:
      return "padding bits are not zero";
    case cuda_internal::kReasonBadStat:
      return "a norm, scale or range is not allowed (NaN, or finite and >= +0, min <= max)";
    case cuda_internal::kReasonNonzeroCode:
      return "nonzero code where the bucket's or chunk's scale allows only 0";
    case cuda_internal::kReasonLevelTooLarge:
      return "level exceeds levels";
    case cuda_internal::kReasonSignWithoutLevel:
      return "sign bit on level 0";
    case cuda_internal::kReasonCodeThree:
      return "invalid code 3";
    case cuda_internal::kReasonIndexRange:
      return "index out of range";
    case cuda_internal::kReasonIndexOrder:
      return "indices not strictly increasing";
    case cuda_internal::kReasonCountRange:
      return "count exceeds the chunk size";
    default:
      return "invalid body";
  }
}

}  // namespace

DeviceCodec::DeviceCodec(CodecId id, uint8_t version, size_t size)
    : id_(id), version_(version), size_(size) {}

DeviceCodec::~DeviceCodec() = default;

size_t DeviceCodec::PayloadBytes() const { return kHeaderBytes + body_bytes_; }

absl::StatusOr<std::unique_ptr<DeviceCodec>> DeviceCodec::Create(const config::Codec& spec,
                                                                 size_t num_elements) {
  TAMP_RETURN_IF_ERROR(ValidateCodecSpec(spec, "codec"));
  if (!HasDeviceCodec(spec.name())) {
    return absl::UnimplementedError(
        absl::StrCat("codec '", spec.name(), "' has no GPU implementation"));
  }
  if (HasDeviceRounds(spec.name())) {
    return absl::UnimplementedError(absl::StrCat(
        "codec '", spec.name(),
        "' takes several rounds per step: its GPU version is CreateDevicePowerSgd() "
        "(compress/cuda/device_powersgd.h)"));
  }
  if (num_elements == 0) return absl::InvalidArgumentError("num_elements must be >= 1");
  if (num_elements >= kMaxElements) {
    return absl::UnimplementedError(
        absl::StrCat("GPU codecs take chunks of fewer than 2^32 values, got ", num_elements));
  }
  if (!kernels::CudaDeviceAvailable()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA device: ", kernels::CudaDeviceUnavailableReason()));
  }
  const std::string& name = spec.name();
  const uint64_t n = num_elements;
  std::unique_ptr<DeviceCodec> codec;
  auto quant = [&](CodecId id, uint8_t version, cuda_internal::QuantLayout layout) {
    codec.reset(new DeviceCodec(id, version, n));
    codec->quant_ = layout;
    codec->body_bytes_ = layout.body_bytes();
  };
  if (name == "none") {
    quant(CodecId::kNone, NoneCodec::kVersion, MakeQuantLayout(QuantKind::kNone, n));
  } else if (name == "fp16") {
    quant(CodecId::kFp16, Fp16Codec::kVersion, MakeQuantLayout(QuantKind::kFp16, n));
  } else if (name == "bf16") {
    quant(CodecId::kBf16, Bf16Codec::kVersion, MakeQuantLayout(QuantKind::kBf16, n));
  } else if (name == "natural") {
    quant(CodecId::kNatural, NaturalCodec::kVersion, MakeQuantLayout(QuantKind::kNatural, n));
  } else if (name == "signsgd") {
    quant(CodecId::kSignSgd, SignSgdCodec::kVersion, MakeQuantLayout(QuantKind::kSignSgd, n));
  } else if (name == "signum") {  // SignumCodec's constants; the momentum starts at zero.
    const double beta = spec.has_momentum() ? spec.momentum() : SignumCodec::kDefaultMomentum;
    cuda_internal::QuantLayout layout = MakeQuantLayout(QuantKind::kSignum, n);
    layout.decay = static_cast<float>(beta);
    layout.gain = static_cast<float>(1.0 - beta);
    quant(CodecId::kSignum, SignumCodec::kVersion, layout);
    TAMP_ASSIGN_OR_RETURN(codec->state_, kernels::DeviceArray<float>::Create(n));
    TAMP_CUDA_RETURN_IF_ERROR(cudaMemset(codec->state_.data(), 0, sizeof(float) * n));
  } else if (name == "efsign") {
    quant(CodecId::kEfSign, EfSignCodec::kVersion, MakeQuantLayout(QuantKind::kEfSign, n));
  } else if (name == "terngrad") {
    quant(CodecId::kTernGrad, TernGradCodec::kVersion, MakeQuantLayout(QuantKind::kTernGrad, n));
  } else if (name == "qsgd") {
    const uint32_t bucket =
        spec.has_bucket_size() ? spec.bucket_size() : QsgdCodec::kDefaultBucketSize;
    quant(CodecId::kQsgd, QsgdCodec::kVersion,
          MakeQuantLayout(QuantKind::kQsgd, n, spec.levels(), bucket));
  } else if (name == "maxmin") {
    const uint32_t bucket =
        spec.has_bucket_size() ? spec.bucket_size() : MaxMinCodec::kDefaultBucketSize;
    quant(CodecId::kMaxMin, MaxMinCodec::kVersion,
          MakeQuantLayout(QuantKind::kMaxMin, n, 0, bucket, static_cast<int>(spec.bits()),
                          spec.stochastic()));
  } else if (name == "randomblock") {
    codec.reset(new DeviceCodec(CodecId::kRandomBlock, RandomBlockCodec::kVersion, n));
    codec->family_ = Family::kRandomBlock;
    codec->randomblock_ = cuda_internal::MakeRandomBlockLayout(
        n, EntriesKept(spec, n), spec.has_num_blocks() ? spec.num_blocks() : 1,
        spec.fp16_values());
    codec->body_bytes_ = codec->randomblock_.body_bytes();
  } else if (name == "randomk") {
    codec.reset(new DeviceCodec(CodecId::kRandomK, RandomKCodec::kVersion, n));
    codec->family_ = Family::kRandomK;
    codec->randomk_ = cuda_internal::RandomKLayout{n, EntriesKept(spec, n), spec.fp16_values()};
    codec->body_bytes_ = codec->randomk_.body_bytes();
    const uint64_t k = codec->randomk_.k;
    TAMP_ASSIGN_OR_RETURN(codec->positions_, kernels::DeviceArray<uint32_t>::Create(k));
    TAMP_ASSIGN_OR_RETURN(codec->positions_host_,
                          kernels::PinnedBuffer::Create(sizeof(uint32_t) * k));
    TAMP_ASSIGN_OR_RETURN(codec->positions_uploaded_, kernels::CudaEvent::Create());
  } else if (name == "threshold") {  // Top-k's entries, as many as pass, behind a count.
    codec.reset(new DeviceCodec(CodecId::kThreshold, ThresholdCodec::kVersion, n));
    codec->family_ = Family::kThreshold;
    codec->topk_ = cuda_internal::MakeTopKLayout(n, n, spec.fp16_values());
    codec->key_floor_ = ThresholdCodec::KeyFloor(spec.threshold());
    codec->body_bytes_ = cuda_internal::ThresholdBodyBytes(codec->topk_, n);
  } else {  // topk, and dgc: the same selection and body (compress/dgc.h), another id.
    if (name == "dgc") {
      codec.reset(new DeviceCodec(CodecId::kDgc, DgcCodec::kVersion, n));
    } else {
      codec.reset(new DeviceCodec(CodecId::kTopK, TopKCodec::kVersion, n));
    }
    codec->family_ = Family::kTopK;
    codec->topk_ = cuda_internal::MakeTopKLayout(n, TopKCodec::EntriesKept(spec, n),
                                                 spec.fp16_values());
    codec->body_bytes_ = codec->topk_.body_bytes();
  }

  // Two-pass scratch sizing (the launchers' null-temp call), then one allocation.
  size_t temp_bytes = 0;
  if (codec->family_ == Family::kRandomBlock) {
    TAMP_CUDA_RETURN_IF_ERROR(cuda_internal::EncodeRandomBlock(
        nullptr, &temp_bytes, codec->randomblock_, RandomKey{}, nullptr, nullptr, 1.0f, nullptr,
        nullptr));
  } else if (codec->family_ == Family::kRandomK) {
    TAMP_CUDA_RETURN_IF_ERROR(cuda_internal::EncodeRandomK(nullptr, &temp_bytes, codec->randomk_,
                                                           nullptr, nullptr, nullptr, 1.0f,
                                                           nullptr, nullptr));
  } else if (codec->family_ == Family::kTopK) {
    TAMP_CUDA_RETURN_IF_ERROR(cuda_internal::EncodeTopK(nullptr, &temp_bytes, codec->topk_,
                                                        nullptr, {}, nullptr, nullptr));
  } else if (codec->family_ == Family::kThreshold) {
    TAMP_CUDA_RETURN_IF_ERROR(cuda_internal::EncodeThreshold(
        nullptr, &temp_bytes, codec->topk_, codec->key_floor_, nullptr, {}, nullptr, nullptr));
  } else {
    TAMP_CUDA_RETURN_IF_ERROR(cuda_internal::EncodeQuant(nullptr, &temp_bytes, codec->quant_,
                                                         RandomKey{}, nullptr, nullptr, 1.0f,
                                                         nullptr, nullptr, nullptr));
  }
  codec->temp_bytes_ = temp_bytes;
  TAMP_ASSIGN_OR_RETURN(codec->temp_, kernels::DeviceArray<unsigned char>::Create(temp_bytes));
  TAMP_ASSIGN_OR_RETURN(codec->outgoing_,
                        kernels::DeviceArray<unsigned char>::Create(codec->body_bytes_));
  TAMP_ASSIGN_OR_RETURN(codec->incoming_,
                        kernels::DeviceArray<unsigned char>::Create(codec->body_bytes_));
  TAMP_ASSIGN_OR_RETURN(codec->verdict_, kernels::DeviceArray<unsigned long long>::Create(1));
  TAMP_ASSIGN_OR_RETURN(codec->outgoing_payload_,
                        kernels::PinnedBuffer::Create(codec->PayloadBytes()));
  TAMP_ASSIGN_OR_RETURN(codec->incoming_body_, kernels::PinnedBuffer::Create(codec->body_bytes_));
  TAMP_ASSIGN_OR_RETURN(codec->verdict_host_,
                        kernels::PinnedBuffer::Create(sizeof(unsigned long long)));
  TAMP_ASSIGN_OR_RETURN(codec->encoded_, kernels::CudaEvent::Create());
  TAMP_ASSIGN_OR_RETURN(codec->checked_, kernels::CudaEvent::Create());
  // The header never changes: written once, the body lands behind it.
  std::string header;
  AppendHeader(codec->id_, codec->version_, codec->size_, &header);
  std::memcpy(codec->outgoing_payload_.data(), header.data(), kHeaderBytes);
  return codec;
}

bool DeviceCodec::FusesDgcMomentum() const {
  return family_ == Family::kTopK || family_ == Family::kThreshold;
}

absl::Status DeviceCodec::Encode(const float* d_input, const DeviceFeedback& feedback,
                                 const RandomKey& key, unsigned char* d_body,
                                 cudaStream_t stream) {
  if (d_input == nullptr || d_body == nullptr) {
    return absl::InvalidArgumentError("Encode: d_input and d_body must not be null");
  }
  if (reinterpret_cast<uintptr_t>(d_body) % 4 != 0) {
    return absl::InvalidArgumentError("Encode: d_body must be 4-byte aligned");
  }
  if (feedback.velocity != nullptr && feedback.residual == nullptr) {
    return absl::InvalidArgumentError("Encode: DGC_MOMENTUM needs both u and v");
  }
  if (feedback.velocity != nullptr && !FusesDgcMomentum()) {
    return absl::UnimplementedError(absl::StrCat(
        "codec '", CodecName(id_), "' has no GPU DGC_MOMENTUM (topk, dgc and threshold do)"));
  }
  const cuda_internal::SparseFeedback sparse{feedback.residual, feedback.velocity, feedback.scale,
                                             feedback.momentum};
  size_t temp_bytes = temp_bytes_;
  if (family_ == Family::kRandomK) {
    TAMP_RETURN_IF_ERROR(UploadPositions(key, stream));
    TAMP_CUDA_RETURN_IF_ERROR(cuda_internal::EncodeRandomK(temp_.data(), &temp_bytes, randomk_,
                                                           positions_.data(), d_input,
                                                           feedback.residual, feedback.scale,
                                                           d_body, stream));
  } else if (family_ == Family::kRandomBlock) {
    TAMP_CUDA_RETURN_IF_ERROR(cuda_internal::EncodeRandomBlock(temp_.data(), &temp_bytes,
                                                               randomblock_, key, d_input,
                                                               feedback.residual, feedback.scale,
                                                               d_body, stream));
  } else if (family_ == Family::kTopK) {
    TAMP_CUDA_RETURN_IF_ERROR(cuda_internal::EncodeTopK(temp_.data(), &temp_bytes, topk_, d_input,
                                                        sparse, d_body, stream));
  } else if (family_ == Family::kThreshold) {
    TAMP_CUDA_RETURN_IF_ERROR(cuda_internal::EncodeThreshold(
        temp_.data(), &temp_bytes, topk_, key_floor_, d_input, sparse, d_body, stream));
  } else {
    TAMP_CUDA_RETURN_IF_ERROR(cuda_internal::EncodeQuant(temp_.data(), &temp_bytes, quant_, key,
                                                         d_input, feedback.residual,
                                                         feedback.scale, state_.data(), d_body,
                                                         stream));
  }
  return absl::OkStatus();
}

absl::Status DeviceCodec::UploadPositions(const RandomKey& key, cudaStream_t stream) {
  const absl::Span<const size_t> positions = RandomKCodec::Positions(key, size_, randomk_.k);
  // The previous upload from the pinned buffer must be done before it is refilled.
  TAMP_RETURN_IF_ERROR(positions_uploaded_.Wait());
  auto* host = reinterpret_cast<uint32_t*>(positions_host_.data());
  for (size_t j = 0; j < positions.size(); ++j) host[j] = static_cast<uint32_t>(positions[j]);
  TAMP_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(positions_.data(), host,
                                            sizeof(uint32_t) * positions.size(),
                                            cudaMemcpyHostToDevice, stream));
  return positions_uploaded_.Record(stream);
}

bool DeviceCodec::NeedsCheck() const {
  if (family_ == Family::kTopK || family_ == Family::kThreshold) return true;
  if (family_ == Family::kRandomBlock || family_ == Family::kRandomK) return false;  // Any value.
  return quant_.kind != QuantKind::kNone && quant_.kind != QuantKind::kFp16 &&
         quant_.kind != QuantKind::kBf16;
}

absl::Status DeviceCodec::ErrorFor(unsigned long long verdict) const {
  const uint64_t element = verdict >> 8;
  const uint32_t reason = static_cast<uint32_t>(verdict & 0xff);
  const bool is_entry = reason == cuda_internal::kReasonIndexRange ||
                        reason == cuda_internal::kReasonIndexOrder ||
                        reason == cuda_internal::kReasonCountRange;
  return absl::InvalidArgumentError(absl::StrCat(CodecName(id_), " payload: ",
                                                 is_entry ? "entry " : "element ", element, ": ",
                                                 ReasonText(reason)));
}

absl::Status DeviceCodec::DecodeAsync(const unsigned char* d_body, const RandomKey& key,
                                      float* d_out, bool accumulate, cudaStream_t stream) {
  if (d_body == nullptr || d_out == nullptr) {
    return absl::InvalidArgumentError("Decode: d_body and d_out must not be null");
  }
  if (reinterpret_cast<uintptr_t>(d_body) % 4 != 0) {
    return absl::InvalidArgumentError("Decode: d_body must be 4-byte aligned");
  }
  const bool check = NeedsCheck();
  unsigned long long* verdict = check ? verdict_.data() : nullptr;
  if (family_ == Family::kRandomK) {
    TAMP_RETURN_IF_ERROR(UploadPositions(key, stream));
    TAMP_CUDA_RETURN_IF_ERROR(cuda_internal::DecodeRandomK(randomk_, positions_.data(), d_body,
                                                           d_out, accumulate, stream));
  } else if (family_ == Family::kRandomBlock) {
    TAMP_CUDA_RETURN_IF_ERROR(cuda_internal::DecodeRandomBlock(
        temp_.data(), temp_bytes_, randomblock_, key, d_body, d_out, accumulate, stream));
  } else if (family_ == Family::kTopK) {
    TAMP_CUDA_RETURN_IF_ERROR(cuda_internal::CheckTopK(topk_, d_body, verdict, stream));
    TAMP_CUDA_RETURN_IF_ERROR(
        cuda_internal::DecodeTopK(topk_, d_body, d_out, accumulate, verdict, stream));
  } else if (family_ == Family::kThreshold) {
    TAMP_CUDA_RETURN_IF_ERROR(cuda_internal::CheckThreshold(topk_, d_body, verdict, stream));
    TAMP_CUDA_RETURN_IF_ERROR(
        cuda_internal::DecodeThreshold(topk_, d_body, d_out, accumulate, verdict, stream));
  } else {
    if (check) TAMP_CUDA_RETURN_IF_ERROR(cuda_internal::CheckQuant(quant_, d_body, verdict, stream));
    TAMP_CUDA_RETURN_IF_ERROR(
        cuda_internal::DecodeQuant(quant_, d_body, d_out, accumulate, verdict, stream));
  }
  auto* host_verdict = reinterpret_cast<unsigned long long*>(verdict_host_.data());
  if (check) {
    TAMP_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_verdict, verdict, sizeof(*host_verdict),
                                              cudaMemcpyDeviceToHost, stream));
  } else {
    *host_verdict = cuda_internal::kValid;
  }
  return checked_.Record(stream);
}

absl::Status DeviceCodec::Checked() {
  TAMP_RETURN_IF_ERROR(checked_.Wait());
  const unsigned long long verdict =
      *reinterpret_cast<const unsigned long long*>(verdict_host_.data());
  if (verdict != cuda_internal::kValid) return ErrorFor(verdict);
  return absl::OkStatus();
}

absl::Status DeviceCodec::Decode(const unsigned char* d_body, const RandomKey& key, float* d_out,
                                 bool accumulate, cudaStream_t stream) {
  TAMP_RETURN_IF_ERROR(DecodeAsync(d_body, key, d_out, accumulate, stream));
  return Checked();
}

absl::Status DeviceCodec::EncodeToHost(const float* d_input, const DeviceFeedback& feedback,
                                       const RandomKey& key, cudaStream_t stream) {
  // The previous payload may still be in flight into the pinned buffer.
  TAMP_RETURN_IF_ERROR(encoded_.Wait());
  TAMP_RETURN_IF_ERROR(Encode(d_input, feedback, key, outgoing_.data(), stream));
  TAMP_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(outgoing_payload_.data() + kHeaderBytes,
                                            outgoing_.data(), body_bytes_,
                                            cudaMemcpyDeviceToHost, stream));
  return encoded_.Record(stream);
}

absl::StatusOr<absl::string_view> DeviceCodec::Payload() {
  TAMP_RETURN_IF_ERROR(encoded_.Wait());
  const char* payload = reinterpret_cast<const char*>(outgoing_payload_.data());
  // Our own body: a failure here is a kernel's bug, reported rather than sent.
  TAMP_ASSIGN_OR_RETURN(const size_t body_bytes,
                        BodyBytesOf(absl::string_view(payload + kHeaderBytes, body_bytes_)));
  return absl::string_view(payload, kHeaderBytes + body_bytes);
}

absl::Status DeviceCodec::EncodeToPayload(const float* d_input, const DeviceFeedback& feedback,
                                          const RandomKey& key, std::string* payload,
                                          cudaStream_t stream) {
  TAMP_RETURN_IF_ERROR(EncodeToHost(d_input, feedback, key, stream));
  TAMP_ASSIGN_OR_RETURN(const absl::string_view bytes, Payload());
  payload->assign(bytes.data(), bytes.size());
  return absl::OkStatus();
}

absl::StatusOr<size_t> DeviceCodec::BodyBytesOf(absl::string_view body) const {
  if (family_ != Family::kThreshold) return body_bytes_;
  if (body.size() < cuda_internal::kCountBytes) {
    return absl::InvalidArgumentError(absl::StrCat("threshold payload body is ", body.size(),
                                                   " bytes, too short for the 8-byte count"));
  }
  uint64_t count;
  std::memcpy(&count, body.data(), sizeof(count));
  if (count > size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("threshold count ", count, " exceeds the chunk size ", size_));
  }
  return cuda_internal::ThresholdBodyBytes(topk_, count);
}

absl::StatusOr<absl::string_view> DeviceCodec::CheckedBody(absl::string_view payload) const {
  TAMP_ASSIGN_OR_RETURN(const absl::string_view body,
                        ParseHeader(payload, id_, version_, size_));
  TAMP_ASSIGN_OR_RETURN(const size_t expected, BodyBytesOf(body));
  if (body.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(CodecName(id_), " payload body is ",
                                                   body.size(), " bytes, expected ", expected));
  }
  return body;
}

absl::Status DeviceCodec::DecodePayload(absl::string_view payload, const RandomKey& key,
                                        float* d_out, bool accumulate, cudaStream_t stream) {
  TAMP_ASSIGN_OR_RETURN(const absl::string_view body, CheckedBody(payload));
  // The previous upload from the pinned buffer is done once its verdict is.
  TAMP_RETURN_IF_ERROR(checked_.Wait());
  std::memcpy(incoming_body_.data(), body.data(), body.size());
  TAMP_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(incoming_.data(), incoming_body_.data(), body.size(),
                                            cudaMemcpyHostToDevice, stream));
  return Decode(incoming_.data(), key, d_out, accumulate, stream);
}

}  // namespace tamp::compress::cuda

#endif  // TAMP_HAVE_CUDA

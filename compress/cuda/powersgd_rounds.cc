#include "compress/cuda/powersgd_rounds.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compress/registry.h"

namespace tamp::compress::cuda {

absl::StatusOr<std::unique_ptr<PowerSgdWorker>> PowerSgdWorker::Create(const config::Codec& spec,
                                                                       const ChunkShape& shape,
                                                                       KernelFactory make_kernels) {
  TAMP_RETURN_IF_ERROR(ValidateCodecSpec(spec, "codec"));
  if (spec.name() != "powersgd") {
    return absl::UnimplementedError(
        absl::StrCat("PowerSgdWorker runs codec 'powersgd', not '", spec.name(), "'"));
  }
  if (shape.elements == 0) return absl::InvalidArgumentError("a chunk needs >= 1 value");
  // The CPU codec's own view and rank check, so both refuse the same chunks alike.
  TAMP_ASSIGN_OR_RETURN(std::unique_ptr<Codec> codec, PowerSgdCodec::Create(spec, shape));
  std::unique_ptr<PowerSgdCodec> host(static_cast<PowerSgdCodec*>(codec.release()));
  cuda_internal::PowerSgdLayout layout;
  layout.n = shape.elements;
  layout.rows = host->view().rows;
  layout.cols = host->view().cols;
  layout.lead = host->view().lead;
  layout.rank = host->rank();
  TAMP_ASSIGN_OR_RETURN(std::unique_ptr<PowerSgdKernels> kernels, make_kernels(layout));
  return std::unique_ptr<PowerSgdWorker>(
      new PowerSgdWorker(std::move(host), layout, std::move(kernels)));
}

PowerSgdWorker::PowerSgdWorker(std::unique_ptr<PowerSgdCodec> host,
                               const cuda_internal::PowerSgdLayout& layout,
                               std::unique_ptr<PowerSgdKernels> kernels)
    : host_(std::move(host)),
      kernels_(std::move(kernels)),
      layout_(layout),
      q_(layout.q_values(), 0.0f) {}

absl::Status PowerSgdWorker::BeginRounds(const float* input, float* residual, float residual_scale,
                                         const RandomKey& key, std::string* payload, void* stream) {
  have_matrix_ = false;  // Until M is formed whole: nothing to replay from a failed start.
  TAMP_RETURN_IF_ERROR(kernels_->Assemble(input, residual, stream));
  have_matrix_ = true;
  residual_ = residual;
  residual_scale_ = residual_scale;
  return RoundZero(key, payload, stream);
}

absl::Status PowerSgdWorker::ReplayRounds(const RandomKey& key, std::string* payload,
                                          void* stream) {
  if (!have_matrix_) {
    return absl::FailedPreconditionError("ReplayRounds() before any BeginRounds()");
  }
  return RoundZero(key, payload, stream);
}

absl::Status PowerSgdWorker::RoundZero(const RandomKey& key, std::string* payload, void* stream) {
  host_->DrawZeroColumns(key, absl::MakeSpan(q_));
  factor_.resize(layout_.p_values());
  TAMP_RETURN_IF_ERROR(kernels_->Project(q_, absl::MakeSpan(factor_), stream));
  host_->AppendMessage(0, factor_, payload);
  next_round_ = 1;
  return absl::OkStatus();
}

absl::Status PowerSgdWorker::NextRound(int round, absl::string_view previous_answer,
                                       const RandomKey& /*key*/, std::string* payload,
                                       void* stream) {
  if (round != 1 || next_round_ != 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("powersgd: NextRound(", round, ") out of order; the worker expects ",
                     next_round_ == 0 ? "BeginRounds()"
                                      : (next_round_ == 1 ? "NextRound(1)" : "FinishRounds()")));
  }
  TAMP_RETURN_IF_ERROR(host_->ParseMessage(previous_answer, 0, "answer", &answer_));
  factor_.resize(layout_.q_values());
  TAMP_RETURN_IF_ERROR(kernels_->ProjectBack(answer_, absl::MakeSpan(factor_), stream));
  host_->AppendMessage(1, factor_, payload);
  next_round_ = PowerSgdCodec::kRounds;
  return absl::OkStatus();
}

absl::Status PowerSgdWorker::FinishRounds(absl::string_view final_answer, const RandomKey& /*key*/,
                                          void* stream) {
  if (next_round_ != PowerSgdCodec::kRounds) {
    return absl::FailedPreconditionError(
        absl::StrCat("powersgd: FinishRounds() before the last round; the worker expects ",
                     next_round_ == 0 ? "BeginRounds()" : "NextRound(1)"));
  }
  TAMP_RETURN_IF_ERROR(host_->ParseMessage(final_answer, 1, "aggregate", &answer_));
  if (residual_ != nullptr) {
    TAMP_RETURN_IF_ERROR(kernels_->Finish(residual_, residual_scale_, stream));
  }
  host_->UnitColumns(absl::MakeSpan(answer_));
  q_.swap(answer_);  // Both keep their memory for the next step.
  next_round_ = 0;
  return absl::OkStatus();
}

}  // namespace tamp::compress::cuda

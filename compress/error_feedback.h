// Error feedback ("memory") around a codec, separate from the codec so any pair composes.
//
// RESIDUAL:  c = input + residual;  payload = encode(c);  residual = c - decode(payload).
// So input + old residual == decode(payload) + new residual, exactly (in fp32 arithmetic the
// identity holds to rounding of the one subtraction). NONE: payload = encode(input).
//
// One instance per chunk and direction; not thread-safe.
//
// Example:
//   TAMP_ASSIGN_OR_RETURN(auto memory, ErrorFeedback::Create(spec, chunk_length));
//   TAMP_RETURN_IF_ERROR(memory->Compress(*codec, gradient, key, &payload));
#ifndef TAMP_COMPRESS_ERROR_FEEDBACK_H_
#define TAMP_COMPRESS_ERROR_FEEDBACK_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "compress/codec.h"
#include "proto/config.pb.h"

namespace tamp::compress {

class ErrorFeedback {
 public:
  static absl::StatusOr<std::unique_ptr<ErrorFeedback>> Create(const config::ErrorFeedback& spec,
                                                               size_t num_elements);

  // Encodes `input` (num_elements values) through `codec`, updating the residual.
  absl::Status Compress(Codec& codec, absl::Span<const float> input, const RandomKey& key,
                        std::string* payload);

  // Empty for NONE.
  absl::Span<const float> residual() const { return residual_; }

 private:
  ErrorFeedback(config::ErrorFeedback::Kind kind, size_t num_elements);

  const config::ErrorFeedback::Kind kind_;
  std::vector<float> residual_;
  std::vector<float> compensated_;  // Scratch: input + residual.
  std::vector<float> decoded_;      // Scratch: decode(payload).
};

}  // namespace tamp::compress

#endif  // TAMP_COMPRESS_ERROR_FEEDBACK_H_

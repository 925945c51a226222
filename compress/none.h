// Codec "none" (id 0): the chunk travels uncompressed.
//
// Body: n little-endian fp32 values, bit-exact (infinities and -0 included) except that every
// NaN travels as 0x7fc00000 (compress/wire_format.h, canonical NaNs; version 2, where
// version 1 kept NaN payloads). Payload bytes: 12 + 4n. Takes no parameters.
#ifndef TAMP_COMPRESS_NONE_H_
#define TAMP_COMPRESS_NONE_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "compress/codec.h"
#include "proto/config.pb.h"

namespace tamp::compress {

class NoneCodec final : public Codec {
 public:
  static constexpr uint8_t kVersion = 2;

  // NoneCodec::Create()
  //
  // Registry factory; `spec` has been validated (and has no parameters).
  static std::unique_ptr<Codec> Create(const config::Codec& spec, size_t num_elements);

  explicit NoneCodec(size_t num_elements) : Codec(num_elements) {}

  CodecId id() const override { return CodecId::kNone; }
  size_t MaxPayloadBytes() const override;
  absl::Status Encode(absl::Span<const float> input, const RandomKey& key,
                      std::string* payload) override;
  absl::Status Decode(absl::string_view payload, const RandomKey& key,
                      absl::Span<float> out) const override;
  // Adds straight from the payload, skipping the scratch copy of the default.
  absl::Status DecodeAdd(absl::string_view payload, const RandomKey& key,
                         absl::Span<float> accumulator) const override;

 private:
  // The body of `payload` after checking header and length.
  absl::StatusOr<absl::string_view> Body(absl::string_view payload) const;
};

}  // namespace tamp::compress

#endif  // TAMP_COMPRESS_NONE_H_

// IndexedValuesCodec: the shared half of the codecs that send a list of entries (topk, dgc,
// threshold).
//
// Their bodies all end in the same list: packed indices (IndexBits(n) bits each, strictly
// ascending), then one value per index in the spec's ValueFormat (compress/sparse.h). What
// differs is which entries are chosen and how the receiver learns how many there are (a
// fixed k, or a count in front). So a subclass supplies Encode() (its selection, written with
// StartPayload() and AppendEntries()) and ParseBody() (its entry count); this class decodes:
// Decode(), DecodeAdd() and DecodeSparse() all read the entries ParseBody() checked, so a
// payload is checked the same way whichever of them reads it.
//
// Thread safety: as Codec (the decoders are const; ParseIndices() keeps its indices in a
// thread-local buffer).
//
// Example (a subclass that sends a fixed k entries):
//   absl::Status Encode(absl::Span<const float> input, const RandomKey& key,
//                       std::string* payload) override {
//     ... indices = the k chosen entries, ascending ...
//     StartPayload(MaxPayloadBytes(), payload);
//     AppendEntries(input, indices, payload);
//     return absl::OkStatus();
//   }
//   absl::StatusOr<IndexedValues> ParseBody(absl::string_view body) const override {
//     return ParseIndexedValues(body, k_, size(), value_format(), "topk");
//   }
#ifndef TAMP_COMPRESS_INDEXED_VALUES_CODEC_H_
#define TAMP_COMPRESS_INDEXED_VALUES_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/philox.h"
#include "compress/codec.h"
#include "compress/sparse.h"

namespace tamp::compress {

class IndexedValuesCodec : public Codec {
 public:
  // How the values travel.
  ValueFormat value_format() const { return values_; }

  // The key is not used: the payload names its entries.
  absl::Status Decode(absl::string_view payload, const RandomKey& key,
                      absl::Span<float> out) const final;
  // Scatter-adds the entries; no dense scratch.
  absl::Status DecodeAdd(absl::string_view payload, const RandomKey& key,
                         absl::Span<float> accumulator) const final;
  absl::StatusOr<bool> DecodeSparse(absl::string_view payload, const RandomKey& key,
                                    SparseEntries* entries) const final;

 protected:
  // `version` is the body version written in and required of every payload.
  IndexedValuesCodec(size_t num_elements, uint8_t version, ValueFormat values);

  // IndexedValuesCodec::index_bits()
  //
  // IndexBits(size()): the bits of one packed index.
  int index_bits() const { return index_bits_; }

  // IndexedValuesCodec::StartPayload()
  //
  // Replaces *payload with the header (id(), the version, size()), reserving `bytes` in all.
  void StartPayload(size_t bytes, std::string* payload) const;

  // IndexedValuesCodec::AppendEntries()
  //
  // Appends `indices` (strictly ascending, each < size()) packed in index_bits() bits, then
  // input[i] for each of them in value_format().
  void AppendEntries(absl::Span<const float> input, absl::Span<const size_t> indices,
                     std::string* payload) const;

  // IndexedValuesCodec::ParseBody()
  //
  // The entries of `body`, the untrusted payload after its (checked) header: the subclass
  // finds how many there are and checks them with ParseIndexedValues().
  virtual absl::StatusOr<IndexedValues> ParseBody(absl::string_view body) const = 0;

 private:
  // Checks the header, then ParseBody().
  absl::StatusOr<IndexedValues> Parse(absl::string_view payload) const;

  const uint8_t version_;
  const ValueFormat values_;
  const int index_bits_;
};

}  // namespace tamp::compress

#endif  // TAMP_COMPRESS_INDEXED_VALUES_CODEC_H_

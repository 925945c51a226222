// Payload header and bit packing shared by every codec.
//
// A payload is a 12-byte header followed by a codec-defined body, all little-endian:
//
//   bytes 0-1   magic 'T' 'P'
//   byte  2     codec id (CodecId)
//   byte  3     codec version (each codec numbers its own body layouts from 1)
//   bytes 4-11  element count (uint64)
//
// ParseHeader() checks all of it against what the receiver expects and hands back the body,
// so a codec's decoder only has to validate its own body.
//
// NaNs travel canonical: every NaN a codec puts on the wire is the quiet NaN 0x7fc00000 as
// fp32 (kWireNaNBits), 0x7e00 as fp16, 0x7fc0 as bf16, whatever sign and payload bits the
// input's NaN had. GPU arithmetic returns one canonical NaN while x86 keeps an operand's
// bits, so under error feedback (g + r computed on either) the bits differ between CPU and
// GPU workers for the same gradient; canonical NaNs keep their payloads byte-identical
// (compress/nan_wire_test.cc checks every codec). Codecs that changed for this carry body
// version 2.
//
// BitWriter/BitReader pack fields of 1..64 bits, least significant bit first: bit p of the
// stream is bit (p % 8) of byte p / 8, so a field may straddle bytes. The last byte is
// zero-padded.
//
// Example:
//   std::string payload;
//   AppendHeader(CodecId::kTopK, 1, n, &payload);
//   BitWriter bits(&payload);
//   bits.Write(index, index_bits);
//   bits.Finish();
//   ...
//   TAMP_ASSIGN_OR_RETURN(absl::string_view body, ParseHeader(payload, CodecId::kTopK, 1, n));
//   BitReader reader(body);
//   uint64_t index;
//   TAMP_RETURN_IF_ERROR(reader.Read(index_bits, &index));
#ifndef TAMP_COMPRESS_WIRE_FORMAT_H_
#define TAMP_COMPRESS_WIRE_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compress/codec.h"
#include "glog/logging.h"

// Bodies are memcpy'd to and from host memory. Every target (x86-64, aarch64, CUDA devices)
// is little-endian; a big-endian port would need byte swaps here and in the codecs.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "Tamp payloads need a little-endian host");

namespace tamp::compress {

inline constexpr size_t kHeaderBytes = 12;

// The NaNs of the wire (see the file comment): fp32, fp16 and bf16 bits.
inline constexpr uint32_t kWireNaNBits = 0x7fc00000u;
inline constexpr uint16_t kWireHalfNaNBits = 0x7e00;
inline constexpr uint16_t kWireBf16NaNBits = 0x7fc0;

// WireFloatBits()
//
// The bits of `x` as fp32 on the wire: x's own, or kWireNaNBits for any NaN. Branch-free, so
// loops over it vectorise.
inline uint32_t WireFloatBits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  // Signed compare (what SSE has): |x|'s bits fit in 31 bits.
  const int32_t is_nan = -static_cast<int32_t>(static_cast<int32_t>(bits & 0x7fffffffu) >
                                               0x7f800000);
  return (kWireNaNBits & static_cast<uint32_t>(is_nan)) | (bits & ~static_cast<uint32_t>(is_nan));
}

// StoreWireFloats()
//
// out = in[0..n) as little-endian fp32, WireFloatBits() each; `out` has any alignment.
void StoreWireFloats(const float* in, size_t n, char* out);

// AppendHeader()
//
// Appends the 12-byte header to *out.
void AppendHeader(CodecId id, uint8_t version, uint64_t elements, std::string* out);

// ParseHeader()
//
// Checks the header of `payload` and returns the body (a view into `payload`). Errors
// (INVALID_ARGUMENT) say what was wrong, e.g.
//   "payload is for codec 1 (topk), expected 0 (none)"
//   "element count 10 does not match chunk size 12"
absl::StatusOr<absl::string_view> ParseHeader(absl::string_view payload, CodecId expected,
                                              uint8_t expected_version, uint64_t expected_elements);

// BitWriter
//
// Appends bit fields to a string. Bits collect in a 64-bit accumulator that is flushed 32
// bits at a time, so writing costs a few instructions per field. Call Finish() once, after
// the last field, to flush the final partial byte. Reserve the string's capacity first when
// the size is known.
class BitWriter {
 public:
  explicit BitWriter(std::string* out) : out_(out) {}
  BitWriter(const BitWriter&) = delete;
  BitWriter& operator=(const BitWriter&) = delete;

  // BitWriter::Write()
  //
  // Appends the low `bits` bits of `value`; 1 <= bits <= 64 and value < 2^bits.
  void Write(uint64_t value, int bits) {
    DCHECK(bits >= 1 && bits <= 64) << bits;
    DCHECK(bits == 64 || value >> bits == 0) << value << " does not fit in " << bits << " bits";
    if (bits > 32) {
      Put(static_cast<uint32_t>(value), 32);
      value >>= 32;
      bits -= 32;
    }
    Put(static_cast<uint32_t>(value), bits);
  }

  // BitWriter::Finish()
  //
  // Appends the pending bits, zero-padded to a whole byte.
  void Finish() {
    out_->append(reinterpret_cast<const char*>(&acc_), (filled_ + 7) / 8);
    acc_ = 0;
    filled_ = 0;
  }

 private:
  // Invariant between calls: filled_ < 32, so filled_ + bits <= 63 always fits in acc_.
  void Put(uint32_t value, int bits) {
    acc_ |= static_cast<uint64_t>(value) << filled_;
    filled_ += bits;
    if (filled_ >= 32) {
      out_->append(reinterpret_cast<const char*>(&acc_), 4);
      acc_ >>= 32;
      filled_ -= 32;
    }
  }

  std::string* const out_;
  uint64_t acc_ = 0;
  int filled_ = 0;
};

// BitReader
//
// Reads bit fields written by BitWriter from an untrusted buffer (not owned; it must outlive
// the reader). Every read is bounds-checked; a field is loaded with one unaligned 64-bit
// load except within the last 8 bytes.
class BitReader {
 public:
  explicit BitReader(absl::string_view bytes) : bytes_(bytes) {}

  // BitReader::Read()
  //
  // Reads the next `bits`-wide field (1 <= bits <= 64) into *value. If fewer bits remain,
  // returns INVALID_ARGUMENT ("bit stream truncated: ...") and consumes nothing.
  absl::Status Read(int bits, uint64_t* value) {
    DCHECK(bits >= 1 && bits <= 64) << bits;
    if (static_cast<size_t>(bits) > bits_remaining()) return TruncatedError(bits);
    const size_t byte = position_ / 8;
    const int shift = static_cast<int>(position_ % 8);
    if (bits <= 56 && byte + 8 <= bytes_.size()) {
      uint64_t word;
      std::memcpy(&word, bytes_.data() + byte, 8);
      *value = (word >> shift) & LowMask(bits);
    } else {
      *value = ReadTail(bits);
    }
    position_ += bits;
    return absl::OkStatus();
  }

  size_t bits_remaining() const { return bytes_.size() * 8 - position_; }

 private:
  static uint64_t LowMask(int bits) {
    return bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  }

  // Byte-at-a-time path for fields near the end of the buffer or wider than 56 bits.
  uint64_t ReadTail(int bits) const;
  absl::Status TruncatedError(int bits) const;

  absl::string_view bytes_;
  size_t position_ = 0;  // In bits.
};

}  // namespace tamp::compress

#endif  // TAMP_COMPRESS_WIRE_FORMAT_H_

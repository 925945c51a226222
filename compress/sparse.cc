#include "compress/sparse.h"

#include <algorithm>
#include <cmath>

#include "absl/numeric/bits.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compress/wire_format.h"
#include "glog/logging.h"

namespace tamp::compress {
namespace {

inline uint32_t FloatBits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}

inline float BitsFloat(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

}  // namespace

uint16_t FloatToHalf(float x) {
  const uint32_t f = FloatBits(x);
  const uint16_t sign = static_cast<uint16_t>((f >> 16) & 0x8000);
  const uint32_t a = f & 0x7fffffffu;
  if (a > 0x7f800000u) return kWireHalfNaNBits;  // Canonical, whatever its sign and payload.
  if (a == 0x7f800000u) return sign | 0x7c00;  // inf.
  // 65520 (0x477ff000) and above would round to inf: saturate to 65504.
  if (a >= 0x477ff000u) return sign | 0x7bff;
  if (a >= 0x38800000u) {  // >= 2^-14: a normal fp16.
    // Rebias the exponent (127 -> 15), then round the low 13 bits to nearest even. A carry
    // out of the mantissa correctly bumps the exponent; it cannot reach inf (a < 65520).
    const uint32_t m = a - (112u << 23);
    return sign | static_cast<uint16_t>((m + 0xfffu + ((m >> 13) & 1)) >> 13);
  }
  if (a <= 0x33000000u) return sign;  // <= 2^-25: rounds to zero (2^-25 is a tie to even 0).
  // A subnormal fp16: the value in units of 2^-24 is the 24-bit significand shifted right by
  // 126 - exponent (14..24 here), rounded to nearest even. 0x400 (the smallest normal) is a
  // correct result of rounding up.
  const uint32_t exponent = a >> 23;
  const uint32_t significand = (a & 0x7fffffu) | 0x800000u;
  const int shift = 126 - static_cast<int>(exponent);
  uint32_t q = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (q & 1))) ++q;
  return sign | static_cast<uint16_t>(q);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ff;
  if (exponent == 0x1f) return BitsFloat(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return BitsFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa * 2^-24, exact in fp32.
  return BitsFloat(sign | FloatBits(static_cast<float>(mantissa) * (1.0f / 16777216.0f)));
}

void AppendValues(absl::Span<const float> values, ValueFormat format, std::string* out) {
  const size_t start = out->size();
  if (format == ValueFormat::kFp32) {
    out->resize(start + sizeof(float) * values.size());
    StoreWireFloats(values.data(), values.size(), out->data() + start);
    return;
  }
  out->resize(start + 2 * values.size());
  char* p = out->data() + start;
  for (size_t j = 0; j < values.size(); ++j) {
    const uint16_t h = FloatToHalf(values[j]);
    std::memcpy(p + 2 * j, &h, 2);
  }
}

// The fp16 paths work a tile at a time in two steps, gather (or scatter) of fp32 values and
// conversion of a contiguous tile: converting straight from cache-missing loads runs ~20x
// slower at 2^24 entries (the conversion's branches hold up the next loads), while the plain
// gather keeps many loads in flight.
constexpr size_t kValueTile = 1024;

void GatherValues(absl::Span<const float> input, absl::Span<const size_t> indices,
                  ValueFormat format, std::string* out) {
  const size_t start = out->size();
  out->resize(start + ValueBytes(format) * indices.size());
  char* p = out->data() + start;
  if (format == ValueFormat::kFp32) {
    for (size_t j = 0; j < indices.size(); ++j) {
      const uint32_t bits = WireFloatBits(input[indices[j]]);
      std::memcpy(p + 4 * j, &bits, 4);
    }
    return;
  }
  float tile[kValueTile];
  for (size_t first = 0; first < indices.size(); first += kValueTile) {
    const size_t count = std::min(kValueTile, indices.size() - first);
    for (size_t t = 0; t < count; ++t) tile[t] = input[indices[first + t]];
    for (size_t t = 0; t < count; ++t) {
      const uint16_t h = FloatToHalf(tile[t]);
      std::memcpy(p + 2 * (first + t), &h, 2);
    }
  }
}

void LoadValues(const char* values, size_t count, ValueFormat format, float* out) {
  if (format == ValueFormat::kFp32) {
    // No entries may come with no memory behind them (null), which memcpy must not see.
    if (count != 0) std::memcpy(out, values, sizeof(float) * count);
    return;
  }
  for (size_t j = 0; j < count; ++j) out[j] = LoadValue(values, j, ValueFormat::kFp16);
}

void AddValues(const char* values, size_t count, ValueFormat format, float* out) {
  if (format == ValueFormat::kFp32) {
    for (size_t j = 0; j < count; ++j) out[j] += LoadValue(values, j, ValueFormat::kFp32);
  } else {
    for (size_t j = 0; j < count; ++j) out[j] += LoadValue(values, j, ValueFormat::kFp16);
  }
}

namespace {

template <bool kAdd>
void Scatter(absl::Span<const size_t> indices, const char* values, ValueFormat format, float* out) {
  if (format == ValueFormat::kFp32) {
    for (size_t j = 0; j < indices.size(); ++j) {
      const float v = LoadValue(values, j, ValueFormat::kFp32);
      if (kAdd) {
        out[indices[j]] += v;
      } else {
        out[indices[j]] = v;
      }
    }
    return;
  }
  float tile[kValueTile];
  for (size_t first = 0; first < indices.size(); first += kValueTile) {
    const size_t count = std::min(kValueTile, indices.size() - first);
    LoadValues(values + 2 * first, count, ValueFormat::kFp16, tile);
    for (size_t t = 0; t < count; ++t) {
      if (kAdd) {
        out[indices[first + t]] += tile[t];
      } else {
        out[indices[first + t]] = tile[t];
      }
    }
  }
}

}  // namespace

void ScatterValues(absl::Span<const size_t> indices, const char* values, ValueFormat format,
                   float* out) {
  Scatter<false>(indices, values, format, out);
}

void ScatterAddValues(absl::Span<const size_t> indices, const char* values, ValueFormat format,
                      float* out) {
  Scatter<true>(indices, values, format, out);
}

int IndexBits(size_t n) { return std::max(1, static_cast<int>(absl::bit_width(uint64_t{n} - 1))); }

void AppendIndices(absl::Span<const size_t> indices, int bits, std::string* out) {
  BitWriter writer(out);
  for (size_t index : indices) writer.Write(index, bits);
  writer.Finish();
}

absl::StatusOr<absl::Span<const size_t>> ParseIndices(absl::string_view bytes, size_t count,
                                                      int bits, size_t n, absl::string_view codec) {
  DCHECK_EQ(bytes.size(), PackedIndexBytes(count, bits));
  thread_local std::vector<size_t> indices;
  indices.resize(count);
  BitReader reader(bytes);
  for (size_t j = 0; j < count; ++j) {
    uint64_t index = 0;
    TAMP_RETURN_IF_ERROR(reader.Read(bits, &index));
    if (index >= n) {
      return absl::InvalidArgumentError(absl::StrCat(codec, " index ", index, " (entry ", j,
                                                     ") is out of range for ", n, " elements"));
    }
    if (j > 0 && index <= indices[j - 1]) {
      return absl::InvalidArgumentError(absl::StrCat(codec,
                                                     " indices not strictly increasing: entry ", j,
                                                     " is ", index, " after ", indices[j - 1]));
    }
    indices[j] = static_cast<size_t>(index);
  }
  // Padding must be zero so that every chunk has exactly one valid encoding.
  if (const int padding = static_cast<int>(reader.bits_remaining()); padding > 0) {
    uint64_t pad = 0;
    TAMP_RETURN_IF_ERROR(reader.Read(padding, &pad));
    if (pad != 0) {
      return absl::InvalidArgumentError(absl::StrCat(codec, " index padding bits are not zero"));
    }
  }
  return absl::Span<const size_t>(indices);
}

absl::StatusOr<IndexedValues> ParseIndexedValues(absl::string_view body, size_t k, size_t n,
                                                 ValueFormat format, absl::string_view codec) {
  const int bits = IndexBits(n);
  const size_t index_bytes = PackedIndexBytes(k, bits);
  const size_t expected = index_bytes + ValueBytes(format) * k;
  if (body.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(codec, " payload body is ", body.size(),
                                                   " bytes, expected ", expected, " (k = ", k, ", ",
                                                   bits, " bits per index)"));
  }
  TAMP_ASSIGN_OR_RETURN(const absl::Span<const size_t> indices,
                        ParseIndices(body.substr(0, index_bytes), k, bits, n, codec));
  return IndexedValues{indices, body.data() + index_bytes};
}

size_t EntriesKept(const config::Codec& spec, size_t n) {
  if (spec.has_count()) return std::min<uint64_t>(spec.count(), n);
  const double k = std::round(spec.ratio() * static_cast<double>(n));
  if (k < 1) return 1;
  if (k >= static_cast<double>(n)) return n;
  return static_cast<size_t>(k);
}

absl::Status ValidateRatio(const config::Codec& spec, absl::string_view field_path,
                           absl::string_view codec) {
  if (!spec.has_ratio()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field_path, ": codec '", codec, "' needs 'ratio'"));
  }
  // Written so that NaN fails too.
  if (!(spec.ratio() > 0 && spec.ratio() <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field_path, ".ratio: must be in (0, 1], got ", spec.ratio()));
  }
  return absl::OkStatus();
}

absl::Status ValidateRatioOrCount(const config::Codec& spec, absl::string_view field_path,
                                  absl::string_view codec) {
  if (spec.has_ratio() == spec.has_count()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field_path, ": codec '", codec, "' needs exactly one of 'ratio' and 'count', got ",
        spec.has_ratio() ? "both" : "neither"));
  }
  if (spec.has_ratio()) return ValidateRatio(spec, field_path, codec);
  if (spec.count() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(field_path, ".count: must be >= 1, got 0"));
  }
  return absl::OkStatus();
}

}  // namespace tamp::compress

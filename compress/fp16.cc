#include "compress/fp16.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compress/internal/quantize.h"
#include "compress/wire_format.h"
#include "glog/logging.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define TAMP_FP16_X86 1
#include <immintrin.h>
#else
#define TAMP_FP16_X86 0
#endif

namespace tamp::compress {
namespace {

using internal::kTile;

// ---------------------------------------------------------------------------------------
// Portable kernel: whole tiles go through loops of fixed trip count, which vectorise.
// ---------------------------------------------------------------------------------------

void PortableToHalves(const float* in, size_t n, char* out) {
  uint16_t halves[kTile];
  size_t start = 0;
  for (; start + kTile <= n; start += kTile) {
    for (size_t i = 0; i < kTile; ++i) halves[i] = FloatToFp16(in[start + i]);
    std::memcpy(out + 2 * start, halves, sizeof(halves));
  }
  for (size_t i = start; i < n; ++i) halves[i - start] = FloatToFp16(in[i]);
  std::memcpy(out + 2 * start, halves, 2 * (n - start));
}

void PortableToFloats(const char* in, size_t n, float* out) {
  uint16_t halves[kTile];
  size_t start = 0;
  for (; start + kTile <= n; start += kTile) {
    std::memcpy(halves, in + 2 * start, sizeof(halves));
    for (size_t i = 0; i < kTile; ++i) out[start + i] = Fp16ToFloat(halves[i]);
  }
  std::memcpy(halves, in + 2 * start, 2 * (n - start));
  for (size_t i = start; i < n; ++i) out[i] = Fp16ToFloat(halves[i - start]);
}

// ---------------------------------------------------------------------------------------
// F16C kernel: 8 values per instruction; the tail goes through the portable code.
// ---------------------------------------------------------------------------------------

#if TAMP_FP16_X86

__attribute__((target("avx,f16c"))) void F16cToHalves(const float* in, size_t n, char* out) {
  size_t i = 0;
  const __m256 wire_nan = _mm256_castsi256_ps(_mm256_set1_epi32(kWireNaNBits));
  for (; i + 8 <= n; i += 8) {
    // vcvtps2ph keeps a NaN's sign and top payload bits; the wire's NaN is canonical, and
    // 0x7fc00000 converts to it (0x7e00).
    const __m256 x = _mm256_loadu_ps(in + i);
    const __m256 canonical = _mm256_blendv_ps(x, wire_nan, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    // The rounding mode is in the instruction, not taken from MXCSR.
    const __m128i halves = _mm256_cvtps_ph(canonical, _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), halves);
  }
  PortableToHalves(in + i, n - i, out + 2 * i);
}

__attribute__((target("avx,f16c"))) void F16cToFloats(const char* in, size_t n, float* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(halves));
  }
  PortableToFloats(in + 2 * i, n - i, out + i);
}

bool DetectF16c() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
}

#else

bool DetectF16c() { return false; }

#endif  // TAMP_FP16_X86

Fp16Kernel BestKernel() {
  static const Fp16Kernel kernel = DetectF16c() ? Fp16Kernel::kF16c : Fp16Kernel::kPortable;
  return kernel;
}

}  // namespace

bool Fp16KernelSupported(Fp16Kernel kernel) {
  return kernel == Fp16Kernel::kPortable || BestKernel() == Fp16Kernel::kF16c;
}

void FloatsToFp16sWith(Fp16Kernel kernel, const float* in, size_t n, char* out) {
  CHECK(Fp16KernelSupported(kernel));
#if TAMP_FP16_X86
  if (kernel == Fp16Kernel::kF16c) return F16cToHalves(in, n, out);
#endif
  PortableToHalves(in, n, out);
}

void Fp16sToFloatsWith(Fp16Kernel kernel, const char* in, size_t n, float* out) {
  CHECK(Fp16KernelSupported(kernel));
#if TAMP_FP16_X86
  if (kernel == Fp16Kernel::kF16c) return F16cToFloats(in, n, out);
#endif
  PortableToFloats(in, n, out);
}

void FloatsToFp16s(const float* in, size_t n, char* out) {
  FloatsToFp16sWith(BestKernel(), in, n, out);
}

void Fp16sToFloats(const char* in, size_t n, float* out) {
  Fp16sToFloatsWith(BestKernel(), in, n, out);
}

std::unique_ptr<Codec> Fp16Codec::Create(const config::Codec& /*spec*/, size_t num_elements) {
  return std::make_unique<Fp16Codec>(num_elements);
}

size_t Fp16Codec::PayloadBytes(size_t num_elements) { return kHeaderBytes + 2 * num_elements; }

absl::Status Fp16Codec::Encode(absl::Span<const float> input, const RandomKey& /*key*/,
                               std::string* payload) {
  CHECK_EQ(input.size(), size());
  payload->clear();
  payload->reserve(MaxPayloadBytes());
  AppendHeader(CodecId::kFp16, kVersion, size(), payload);
  payload->resize(MaxPayloadBytes());
  FloatsToFp16s(input.data(), size(), payload->data() + kHeaderBytes);
  return absl::OkStatus();
}

absl::Status Fp16Codec::Decode(absl::string_view payload, const RandomKey& /*key*/,
                               absl::Span<float> out) const {
  CHECK_EQ(out.size(), size());
  TAMP_ASSIGN_OR_RETURN(const absl::string_view body,
                        ParseHeader(payload, CodecId::kFp16, kVersion, size()));
  if (body.size() != 2 * size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("fp16 payload body is ", body.size(), " bytes, expected ", 2 * size()));
  }
  Fp16sToFloats(body.data(), size(), out.data());
  return absl::OkStatus();
}

}  // namespace tamp::compress

// Per-value math of the quantizing and sparsifying codecs, as functions that compile both for
// the host (gcc) and for the device (nvcc). Internal to compress/cuda/.
//
// Each function restates, operation for operation, the CPU codec it names (compress/*.cc),
// so GPU payloads are byte-identical to the CPU's:
//   - float and double arithmetic goes through AddRn()/MulRn()/... : on the device the _rn
//     intrinsics (never contracted into FMAs, IEEE rounding whatever nvcc's flags), on the
//     host plain operators (compress/BUILD compiles the CPU codecs with -ffp-contract=off,
//     and the host users of this header do the same);
//   - conversions float -> int truncate and int -> float round to nearest, on both sides;
//   - NaN bit patterns that reach the wire are constants (kQuietNaNBits, kQuietHalfNaNBits,
//     kQuietBf16NaNBits: compress/wire_format.h's canonical NaNs), never computed or copied
//     from the input, since the device's arithmetic returns its own canonical NaN.
// compress/cuda/emulation_test.cc runs these on the host against the CPU codecs (no GPU
// needed); compress/cuda/device_codec_test.cc runs the kernels built from them.
#ifndef TAMP_COMPRESS_CUDA_INTERNAL_CODEC_MATH_H_
#define TAMP_COMPRESS_CUDA_INTERNAL_CODEC_MATH_H_

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TAMP_HD __host__ __device__ __forceinline__
#else
#define TAMP_HD inline
#endif

namespace tamp::compress::cuda_internal {

// The wire's NaNs (compress/wire_format.h kWireNaNBits, kWireHalfNaNBits, kWireBf16NaNBits).
inline constexpr uint32_t kQuietNaNBits = 0x7fc00000u;  // std::numeric_limits<float>::quiet_NaN()
inline constexpr uint16_t kQuietHalfNaNBits = 0x7e00;
inline constexpr uint16_t kQuietBf16NaNBits = 0x7fc0;
inline constexpr float kFloatMax = 3.402823466e38f;

// ---------------------------------------------------------------------------------------
// Bits and correctly rounded arithmetic
// ---------------------------------------------------------------------------------------

TAMP_HD uint32_t FloatBits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
#endif
}

TAMP_HD float BitsFloat(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
#endif
}

TAMP_HD float QuietNaN() { return BitsFloat(kQuietNaNBits); }

// compress/wire_format.h WireFloatBits(): x's bits, any NaN as kQuietNaNBits.
TAMP_HD uint32_t WireFloatBits(float x) {
  const uint32_t bits = FloatBits(x);
  return (bits & 0x7fffffffu) > 0x7f800000u ? kQuietNaNBits : bits;
}

#if defined(__CUDA_ARCH__)
TAMP_HD float AddRn(float a, float b) { return __fadd_rn(a, b); }
TAMP_HD float SubRn(float a, float b) { return __fsub_rn(a, b); }
TAMP_HD float MulRn(float a, float b) { return __fmul_rn(a, b); }
TAMP_HD float DivRn(float a, float b) { return __fdiv_rn(a, b); }
TAMP_HD double DAddRn(double a, double b) { return __dadd_rn(a, b); }
TAMP_HD double DSubRn(double a, double b) { return __dsub_rn(a, b); }
TAMP_HD double DMulRn(double a, double b) { return __dmul_rn(a, b); }
TAMP_HD double DDivRn(double a, double b) { return __ddiv_rn(a, b); }
TAMP_HD double DSqrtRn(double a) { return __dsqrt_rn(a); }
TAMP_HD float DoubleToFloat(double a) { return __double2float_rn(a); }
TAMP_HD float AbsF(float a) { return fabsf(a); }
TAMP_HD double AbsD(double a) { return fabs(a); }
TAMP_HD bool IsNaN(float a) { return isnan(a); }
TAMP_HD bool IsFiniteF(float a) { return isfinite(a); }
TAMP_HD bool IsFiniteD(double a) { return isfinite(a); }
#else
TAMP_HD float AddRn(float a, float b) { return a + b; }
TAMP_HD float SubRn(float a, float b) { return a - b; }
TAMP_HD float MulRn(float a, float b) { return a * b; }
TAMP_HD float DivRn(float a, float b) { return a / b; }
TAMP_HD double DAddRn(double a, double b) { return a + b; }
TAMP_HD double DSubRn(double a, double b) { return a - b; }
TAMP_HD double DMulRn(double a, double b) { return a * b; }
TAMP_HD double DDivRn(double a, double b) { return a / b; }
TAMP_HD double DSqrtRn(double a) { return __builtin_sqrt(a); }
TAMP_HD float DoubleToFloat(double a) { return static_cast<float>(a); }
TAMP_HD float AbsF(float a) { return __builtin_fabsf(a); }
TAMP_HD double AbsD(double a) { return __builtin_fabs(a); }
TAMP_HD bool IsNaN(float a) { return __builtin_isnan(a); }
TAMP_HD bool IsFiniteF(float a) { return __builtin_isfinite(a); }
TAMP_HD bool IsFiniteD(double a) { return __builtin_isfinite(a); }
#endif

// The uniform of a Philox word, PhiloxStream::ToUniform(): (bits >> 8) * 2^-24, exact.
TAMP_HD float Uniform(uint32_t random) {
  return MulRn(static_cast<float>(static_cast<int32_t>(random >> 8)), 1.0f / 16777216.0f);
}

// The uniform of a 16-bit value (PhiloxStream::Bits16()), PhiloxStream::ToUniform16():
// bits16 * 2^-16, exact.
TAMP_HD float Uniform16(uint32_t bits16) {
  return MulRn(static_cast<float>(static_cast<int32_t>(bits16)), 1.0f / 65536.0f);
}

// Error feedback (compress/error_feedback.cc, RESIDUAL): what is encoded, and what is kept.
TAMP_HD float Compensate(float input, float residual) { return AddRn(input, residual); }
TAMP_HD float NextResidual(float scale, float compensated, float decoded) {
  return MulRn(scale, SubRn(compensated, decoded));
}

// ---------------------------------------------------------------------------------------
// Verdicts of the body checks
// ---------------------------------------------------------------------------------------

// Why a body is invalid. The verdict of a check is the smallest (element << 8 | reason) over
// everything wrong, kValid when nothing is; element is the first element concerned (n for
// the padding).
enum QuantReason : uint32_t {
  kReasonNone = 0,
  kReasonPadding = 1,          // Padding bits after the last code are not zero.
  kReasonBadStat = 2,          // A norm, scale or (min, max) pair is not allowed.
  kReasonNonzeroCode = 3,      // A code must be 0 (NaN or zero bucket/scale).
  kReasonLevelTooLarge = 4,    // qsgd level > s.
  kReasonSignWithoutLevel = 5, // qsgd sign bit on level 0.
  kReasonCodeThree = 6,        // terngrad code 3.
  kReasonIndexRange = 7,       // topk index >= n.
  kReasonIndexOrder = 8,       // topk indices not strictly increasing.
  kReasonCountRange = 9,       // threshold count exceeds n.
};
inline constexpr unsigned long long kValid = ~0ull;

TAMP_HD unsigned long long Verdict(uint64_t element, uint32_t reason) {
  return (static_cast<unsigned long long>(element) << 8) | reason;
}

// ---------------------------------------------------------------------------------------
// fp16 (compress/fp16.h FloatToFp16(), Fp16ToFloat())
// ---------------------------------------------------------------------------------------

TAMP_HD int32_t Select(bool condition, int32_t a, int32_t b) { return condition ? a : b; }

TAMP_HD uint16_t FloatToFp16(float x) {
  const int32_t bits = static_cast<int32_t>(FloatBits(x));
  const int32_t sign = (bits >> 16) & 0x8000;
  const int32_t magnitude = bits & 0x7fffffff;
  const int32_t normal = (magnitude - (112 << 23) + 0xfff + ((magnitude >> 13) & 1)) >> 13;
  const int32_t clamped = magnitude < 0x38800000 ? magnitude : 0x38800000;
  const float scaled = MulRn(BitsFloat(static_cast<uint32_t>(clamped)), 16777216.0f);
  const int32_t whole_int = static_cast<int32_t>(scaled);
  const float fraction = SubRn(scaled, static_cast<float>(whole_int));
  const int32_t round_up =
      Select(fraction > 0.5f, 1, Select(fraction == 0.5f, whole_int & 1, 0));
  const int32_t subnormal = whole_int + round_up;
  int32_t half = Select(magnitude < 0x38800000, subnormal, normal);
  half = Select(magnitude >= 0x477ff000, 0x7c00, half);
  return static_cast<uint16_t>(Select(magnitude > 0x7f800000, kQuietHalfNaNBits, sign | half));
}

TAMP_HD float Fp16ToFloat(uint16_t half) {
  const int32_t sign = static_cast<int32_t>(half & 0x8000) << 16;
  const int32_t magnitude = half & 0x7fff;
  const int32_t normal = (magnitude << 13) + (112 << 23);
  const int32_t infinity = (magnitude << 13) + (224 << 23);
  const int32_t nan = infinity | 0x00400000;
  const float subnormal = MulRn(static_cast<float>(magnitude), 1.0f / 16777216.0f);
  int32_t bits = Select(magnitude < 0x0400, static_cast<int32_t>(FloatBits(subnormal)), normal);
  bits = Select(magnitude >= 0x7c00, infinity, bits);
  bits = Select(magnitude > 0x7c00, nan, bits);
  bits |= sign;
  return BitsFloat(static_cast<uint32_t>(bits));
}

// ---------------------------------------------------------------------------------------
// bf16 (compress/bf16.h FloatToBf16(), Bf16ToFloat())
// ---------------------------------------------------------------------------------------

TAMP_HD uint16_t FloatToBf16(float x) {
  const uint32_t bits = FloatBits(x);
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const int32_t magnitude = static_cast<int32_t>(bits & 0x7fffffffu);
  return static_cast<uint16_t>(magnitude > 0x7f800000 ? kQuietBf16NaNBits : rounded);
}

TAMP_HD float Bf16ToFloat(uint16_t half) { return BitsFloat(static_cast<uint32_t>(half) << 16); }

// ---------------------------------------------------------------------------------------
// fp16 values of the sparse codecs (compress/sparse.cc FloatToHalf(), HalfToFloat()):
// saturating at +-65504, unlike the fp16 codec.
// ---------------------------------------------------------------------------------------

TAMP_HD uint16_t FloatToHalfSaturating(float x) {
  const uint32_t f = FloatBits(x);
  const uint16_t sign = static_cast<uint16_t>((f >> 16) & 0x8000);
  const uint32_t a = f & 0x7fffffffu;
  if (a > 0x7f800000u) return kQuietHalfNaNBits;
  if (a == 0x7f800000u) return sign | 0x7c00;
  if (a >= 0x477ff000u) return sign | 0x7bff;
  if (a >= 0x38800000u) {
    const uint32_t m = a - (112u << 23);
    return sign | static_cast<uint16_t>((m + 0xfffu + ((m >> 13) & 1)) >> 13);
  }
  if (a <= 0x33000000u) return sign;
  const uint32_t exponent = a >> 23;
  const uint32_t significand = (a & 0x7fffffu) | 0x800000u;
  const int shift = 126 - static_cast<int>(exponent);
  uint32_t q = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (q & 1))) ++q;
  return sign | static_cast<uint16_t>(q);
}

TAMP_HD float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ff;
  if (exponent == 0x1f) return BitsFloat(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return BitsFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
  return BitsFloat(sign | FloatBits(MulRn(static_cast<float>(mantissa), 1.0f / 16777216.0f)));
}

// Value j of an aligned value array (the bodies of randomblock and randomk): stores c, and
// *decoded is what the receiver decodes (sparse.cc's rules: fp32 with the wire's NaN, or
// saturating fp16).
TAMP_HD void StoreSparseValue(bool fp16, unsigned char* values, uint64_t j, float c,
                              float* decoded) {
  if (fp16) {
    const uint16_t h = FloatToHalfSaturating(c);
    reinterpret_cast<uint16_t*>(values)[j] = h;
    *decoded = HalfToFloat(h);
  } else {
    const uint32_t bits = WireFloatBits(c);
    reinterpret_cast<uint32_t*>(values)[j] = bits;
    *decoded = BitsFloat(bits);
  }
}

TAMP_HD float LoadSparseValue(bool fp16, const unsigned char* values, uint64_t j) {
  if (fp16) return HalfToFloat(reinterpret_cast<const uint16_t*>(values)[j]);
  return BitsFloat(reinterpret_cast<const uint32_t*>(values)[j]);
}

// The key of compress/select.h MagnitudeKey(): |x|'s bits, NaN as +inf.
inline constexpr uint32_t kInfinityKey = 0x7f800000u;
TAMP_HD uint32_t MagnitudeKey(float x) {
  const uint32_t bits = FloatBits(x) & 0x7fffffffu;
  return bits < kInfinityKey ? bits : kInfinityKey;
}

// ---------------------------------------------------------------------------------------
// natural (compress/natural.cc EncodeValues(), DecodeValues()): 9-bit codes
// ---------------------------------------------------------------------------------------

inline constexpr int kNaturalBits = 9;
inline constexpr uint32_t kNaturalNaNCode = 0x100;

// `random16`: the value's PhiloxStream::Bits16().
TAMP_HD uint32_t NaturalCode(float x, uint32_t random16) {
  const int32_t bits = static_cast<int32_t>(FloatBits(x));
  const int32_t magnitude = bits & 0x7fffffff;
  const int32_t exponent = magnitude >> 23;
  const int32_t mantissa = bits & 0x7fffff;
  const int32_t up = (static_cast<int32_t>(random16) << 7) < mantissa ? 1 : 0;
  const int32_t power = exponent + up;
  const int32_t sign = (bits < 0 && power != 0) ? 0x100 : 0;
  const int32_t code = power | sign;
  return magnitude > 0x7f800000 ? kNaturalNaNCode : static_cast<uint32_t>(code);
}

TAMP_HD float NaturalValue(uint32_t code) {
  const uint32_t power = ((code & 0x100u) << 23) | ((code & 0xffu) << 23);
  return BitsFloat(code == kNaturalNaNCode ? 0x7fc00000u : power);
}

// ---------------------------------------------------------------------------------------
// qsgd (compress/qsgd.cc): norms, codes of B = bit_width(levels) + 1 bits
// ---------------------------------------------------------------------------------------

// Partial sum `lane` (0..7) of a bucket's squares: values lane, lane + 8, ... in order.
// `value(j)` returns value j of the bucket as float.
template <typename ValueAt>
TAMP_HD double QsgdLaneSquares(const ValueAt& value, uint32_t length, int lane) {
  double sum = 0;
  for (uint32_t j = lane; j < length; j += 8) {
    const double v = value(j);
    sum = DAddRn(sum, DMulRn(v, v));
  }
  return sum;
}

// The bucket norm from the 8 partial sums: pairwise, sqrt, NaN unless a finite fp32.
TAMP_HD float QsgdNormFromLanes(const double* s) {
  const double total = DAddRn(DAddRn(DAddRn(s[0], s[1]), DAddRn(s[2], s[3])),
                              DAddRn(DAddRn(s[4], s[5]), DAddRn(s[6], s[7])));
  const double root = DSqrtRn(total);
  if (!(root <= static_cast<double>(kFloatMax))) return QuietNaN();
  return DoubleToFloat(root);
}

// levels / norm, once per bucket.
TAMP_HD float QsgdInverse(float norm, float levels) { return DivRn(levels, norm); }

// Code of x in a bucket with norm > 0 (finite); inverse = QsgdInverse(); `random16`: the
// value's PhiloxStream::Bits16().
TAMP_HD uint32_t QsgdCode(float x, uint32_t random16, float inverse, float levels,
                          uint32_t sign_bit) {
  const int32_t bits = static_cast<int32_t>(FloatBits(x));
  float v = MulRn(AbsF(x), inverse);
  v = v < levels ? v : levels;
  const int32_t whole = static_cast<int32_t>(v);
  const float fraction = SubRn(v, static_cast<float>(whole));
  const int32_t level = whole + (Uniform16(random16) < fraction ? 1 : 0);
  const bool negative = bits < 0 && level > 0;
  return static_cast<uint32_t>(level) | (negative ? sign_bit : 0u);
}

// Value of a code; scale = norm / levels (fp32).
TAMP_HD float QsgdValue(uint32_t code, float scale, uint32_t level_mask, int level_bits) {
  const float magnitude = MulRn(static_cast<float>(static_cast<int32_t>(code & level_mask)), scale);
  return BitsFloat(FloatBits(magnitude) | (code >> level_bits << 31));
}

// ---------------------------------------------------------------------------------------
// terngrad (compress/terngrad.cc): one scale, 2-bit codes 0, 1 (+1), 2 (-1)
// ---------------------------------------------------------------------------------------

inline constexpr double kTernClipSigmas = 2.5;  // TernGradCodec::kClipSigmas

// Partial statistics of lane k of a segment (its values k, k + 8, ..., in order).
// Plain data (no initialisers), so it can live in shared memory; start from ZeroTernLane().
struct TernLane {
  double sum;      // of d = x - shift
  double squares;  // of d * d
  float max_abs;
};

TAMP_HD TernLane ZeroTernLane() { return TernLane{0.0, 0.0, 0.0f}; }

TAMP_HD void TernAccumulate(float x, double shift, TernLane* lane) {
  const double d = DSubRn(static_cast<double>(x), shift);
  lane->sum = DAddRn(lane->sum, d);
  lane->squares = DAddRn(lane->squares, DMulRn(d, d));
  const float a = AbsF(x);
  lane->max_abs = a > lane->max_abs ? a : lane->max_abs;
}

// A segment's statistics, or several segments' (terngrad.cc's Partial).
struct TernPartial {
  double sum;
  double squares;
  float max_abs;
};

// A segment's partial from its 8 lanes: sums pairwise, the first largest magnitude.
TAMP_HD TernPartial TernSegmentPartial(const TernLane* l) {
  TernPartial p;
  p.sum = DAddRn(DAddRn(DAddRn(l[0].sum, l[1].sum), DAddRn(l[2].sum, l[3].sum)),
                 DAddRn(DAddRn(l[4].sum, l[5].sum), DAddRn(l[6].sum, l[7].sum)));
  p.squares =
      DAddRn(DAddRn(DAddRn(l[0].squares, l[1].squares), DAddRn(l[2].squares, l[3].squares)),
             DAddRn(DAddRn(l[4].squares, l[5].squares), DAddRn(l[6].squares, l[7].squares)));
  p.max_abs = l[0].max_abs;  // *std::max_element(...)
  for (int k = 1; k < 8; ++k) p.max_abs = p.max_abs < l[k].max_abs ? l[k].max_abs : p.max_abs;
  return p;
}

// Two partials combined in the tree (std::max for the magnitudes).
TAMP_HD TernPartial AddTernPartials(const TernPartial& a, const TernPartial& b) {
  return TernPartial{DAddRn(a.sum, b.sum), DAddRn(a.squares, b.squares),
                     a.max_abs < b.max_abs ? b.max_abs : a.max_abs};
}

// TernGradCodec::Scale() from the whole chunk's partial (n values).
TAMP_HD float TernScale(const TernPartial& total, uint64_t n) {
  const double sum = total.sum;
  const double squares = total.squares;
  if (!IsFiniteD(squares)) return QuietNaN();
  const double count = static_cast<double>(n);
  double variance = DDivRn(DSubRn(squares, DDivRn(DMulRn(sum, sum), count)), count);
  variance = 0.0 < variance ? variance : 0.0;  // std::max(0.0, variance)
  const float largest = total.max_abs;
  const double clip = DMulRn(kTernClipSigmas, DSqrtRn(variance));
  if (clip == 0 || clip >= static_cast<double>(largest)) return largest;
  return DoubleToFloat(clip);
}

// `random16`: the value's PhiloxStream::Bits16().
TAMP_HD uint32_t TernCode(float x, uint32_t random16, float scale) {
  const int32_t bits = static_cast<int32_t>(FloatBits(x));
  if (!(MulRn(Uniform16(random16), scale) < AbsF(x))) return 0;
  return bits < 0 ? 2u : 1u;
}

TAMP_HD float TernValue(uint32_t code, float scale) {
  const int32_t c = static_cast<int32_t>(code);
  return MulRn(static_cast<float>((c & 1) - (c >> 1)), scale);
}

// ---------------------------------------------------------------------------------------
// maxmin (compress/maxmin.cc): (min, max) per bucket, codes of `bits` bits
// ---------------------------------------------------------------------------------------

// Lane k of a bucket's range: values k, k + 8, ... in order.
struct RangeLane {
  float lo;
  float hi;
  float poison;  // NaN once a value is NaN or +-inf.
};

template <typename ValueAt>
TAMP_HD RangeLane MaxMinLane(const ValueAt& value, uint32_t length, int lane) {
  RangeLane r{BitsFloat(0x7f800000u), BitsFloat(0xff800000u), 0.0f};
  for (uint32_t j = lane; j < length; j += 8) {
    const float v = value(j);
    r.lo = v < r.lo ? v : r.lo;
    r.hi = v > r.hi ? v : r.hi;
    r.poison = AddRn(r.poison, SubRn(v, v));
  }
  return r;
}

// BucketRange() from its 8 lanes: (min, max), or (NaN, NaN).
TAMP_HD void MaxMinRangeFromLanes(const RangeLane* l, float* min, float* max) {
  float lo = l[0].lo, hi = l[0].hi, poison = l[0].poison;
  for (int k = 1; k < 8; ++k) {
    lo = l[k].lo < lo ? l[k].lo : lo;  // std::min(lo, l[k].lo)
    hi = hi < l[k].hi ? l[k].hi : hi;  // std::max(hi, l[k].hi)
    poison = AddRn(poison, l[k].poison);
  }
  if (IsNaN(poison) || !IsFiniteF(SubRn(hi, lo))) {
    *min = QuietNaN();
    *max = QuietNaN();
    return;
  }
  *min = lo;
  *max = hi;
}

// Whether a bucket's codes are all 0 (NaN bucket, or max == min).
TAMP_HD bool MaxMinZeroCodesOnly(float min, float max) { return !(max > min); }

TAMP_HD float MaxMinStep(float min, float max, int bits) {
  return DivRn(SubRn(max, min), static_cast<float>((1 << bits) - 1));
}

TAMP_HD uint32_t MaxMinCode(float x, uint32_t random, float min, float step, int bits,
                            bool stochastic) {
  const float top = static_cast<float>((1 << bits) - 1);
  float q = DivRn(SubRn(x, min), step);
  q = q < top ? q : top;
  const int32_t whole = static_cast<int32_t>(q);
  const float fraction = SubRn(q, static_cast<float>(whole));
  const bool up = stochastic ? Uniform(random) < fraction : fraction >= 0.5f;
  return static_cast<uint32_t>(whole + (up ? 1 : 0));
}

TAMP_HD float MaxMinValue(uint32_t code, float min, float step) {
  return AddRn(min, MulRn(static_cast<float>(static_cast<int32_t>(code)), step));
}

// ---------------------------------------------------------------------------------------
// efsign (compress/efsign.cc): the scale's partial sums
// ---------------------------------------------------------------------------------------

// A segment's sums of |x| (efsign.cc's SumMagnitudes() partials): the fast one (fp32 quads)
// and the double-only one, used when the fast total is not finite.
struct EfSignPartial {
  double fast;
  double slow;
};

TAMP_HD EfSignPartial AddEfSignPartials(const EfSignPartial& a, const EfSignPartial& b) {
  return EfSignPartial{DAddRn(a.fast, b.fast), DAddRn(a.slow, b.slow)};
}

// Lane l (0..15) of a 64-value block holding q[0..3] = x_l, x_l+16, x_l+32, x_l+48: the fast
// sum adds (|q0| + |q1|) + (|q2| + |q3|) (fp32) as one double, the slow one each |q| in turn.
TAMP_HD void EfSignAddQuad(const float* q, EfSignPartial* lane) {
  const float quad = AddRn(AddRn(AbsF(q[0]), AbsF(q[1])), AddRn(AbsF(q[2]), AbsF(q[3])));
  lane->fast = DAddRn(lane->fast, static_cast<double>(quad));
  for (int j = 0; j < 4; ++j) lane->slow = DAddRn(lane->slow, AbsD(static_cast<double>(q[j])));
}

// One level of compress/internal/segments.h PairwiseLevels(): out[i] from the m partials of
// `in` (i < (m + 1) / 2). The levels alternate between two buffers, so every i of a level
// can run at once.
template <typename T, typename Add>
TAMP_HD void PairwiseStep(const T* in, T* out, uint64_t m, uint64_t i, const Add& add) {
  out[i] = 2 * i + 1 < m ? add(in[2 * i], in[2 * i + 1]) : in[2 * i];
}

// The scale from the total (sum of the 16 lanes in order, or the double-only fallback).
TAMP_HD float EfSignScale(double total, uint64_t n) {
  const float scale = DoubleToFloat(DDivRn(total, static_cast<double>(n)));
  return IsNaN(scale) ? QuietNaN() : scale;
}

// ---------------------------------------------------------------------------------------
// Bit streams (compress/internal/quantize.h PackCodes(): code j at bits j*B.., LSB first)
// ---------------------------------------------------------------------------------------

// Bytes of `count` packed `bits`-wide codes: ceil(count * bits / 8).
TAMP_HD uint64_t PackedBytes(uint64_t count, int bits) {
  return (count / 8) * bits + ((count % 8) * bits + 7) / 8;
}

// BitSink: appends codes (1..32 bits) to a little-endian stream starting at a 4-byte aligned
// `out`; whole 32-bit words are stored as such, the last partial word byte by byte (Finish).
class BitSink {
 public:
  TAMP_HD explicit BitSink(unsigned char* out) : out_(out) {}
  TAMP_HD void Put(uint32_t code, int bits) {
    acc_ |= static_cast<uint64_t>(code) << filled_;
    filled_ += bits;
    if (filled_ >= 32) {
      *reinterpret_cast<uint32_t*>(out_) = static_cast<uint32_t>(acc_);
      out_ += 4;
      acc_ >>= 32;
      filled_ -= 32;
    }
  }
  // Stores the pending bits, zero-padded to a byte.
  TAMP_HD void Finish() {
    for (int b = 0; b < filled_; b += 8) *out_++ = static_cast<unsigned char>(acc_ >> b);
    acc_ = 0;
    filled_ = 0;
  }

 private:
  unsigned char* out_;
  uint64_t acc_ = 0;
  int filled_ = 0;
};

// BitSource: reads codes written by BitSink. `bytes` is how many bytes of the stream remain
// at `in` (4-byte aligned); whole words are loaded as such, a final partial word bytewise.
class BitSource {
 public:
  TAMP_HD BitSource(const unsigned char* in, uint64_t bytes) : in_(in), bytes_(bytes) {}
  TAMP_HD uint32_t Get(int bits) {
    if (filled_ < bits) {
      uint64_t word = 0;
      if (bytes_ >= 4) {
        word = *reinterpret_cast<const uint32_t*>(in_);
        in_ += 4;
        bytes_ -= 4;
      } else {
        for (int b = 0; bytes_ > 0; b += 8, --bytes_) word |= static_cast<uint64_t>(*in_++) << b;
      }
      acc_ |= word << filled_;
      filled_ += 32;
    }
    const uint32_t code = static_cast<uint32_t>(acc_ & ((uint64_t{1} << bits) - 1));
    acc_ >>= bits;
    filled_ -= bits;
    return code;
  }
  // The bits left in the current word after the last Get() (the padding, at the end).
  TAMP_HD uint32_t Rest() const { return static_cast<uint32_t>(acc_); }

 private:
  const unsigned char* in_;
  uint64_t bytes_;
  uint64_t acc_ = 0;
  int filled_ = 0;
};

// Code j (bits wide) of a packed stream of `total_bytes` bytes, by random access.
TAMP_HD uint32_t CodeAt(const unsigned char* stream, uint64_t total_bytes, uint64_t j, int bits) {
  const uint64_t first = j * static_cast<uint64_t>(bits);
  const uint64_t byte = first / 8;
  uint64_t window = 0;
  for (int b = 0; b < 8 && byte + b < total_bytes; ++b) {
    window |= static_cast<uint64_t>(stream[byte + b]) << (8 * b);
  }
  return static_cast<uint32_t>((window >> (first % 8)) & ((uint64_t{1} << bits) - 1));
}

}  // namespace tamp::compress::cuda_internal

#endif  // TAMP_COMPRESS_CUDA_INTERNAL_CODEC_MATH_H_

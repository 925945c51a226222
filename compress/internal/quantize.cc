#include "compress/internal/quantize.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <cstring>

#include "glog/logging.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define TAMP_QUANTIZE_X86 1
#include <immintrin.h>
#else
#define TAMP_QUANTIZE_X86 0
#endif

namespace tamp::compress::internal {
namespace {

// ---------------------------------------------------------------------------------------
// Philox
// ---------------------------------------------------------------------------------------

// The words PhiloxStream builds from a RandomKey (base/philox.h): key (k0, k1) and the
// constant counter words c1..c3 after the block number c0.
struct PhiloxWords {
  uint32_t k0, k1, c1, c2, c3;
};

PhiloxWords WordsOf(const RandomKey& key) {
  return {static_cast<uint32_t>(key.seed), static_cast<uint32_t>(key.seed >> 32),
          static_cast<uint32_t>(key.step), key.chunk ^ static_cast<uint32_t>(key.step >> 32),
          key.worker};
}

// Philox-4x32-10 constants (Random123).
constexpr uint32_t kM0 = 0xD2511F53u;
constexpr uint32_t kM1 = 0xCD9E8D57u;
constexpr uint32_t kW0 = 0x9E3779B9u;
constexpr uint32_t kW1 = 0xBB67AE85u;
constexpr int kRounds = 10;

// The block generators write blocks [first_block, first_block + num_blocks) to `out` (any
// alignment) as 16 bytes each: its 4 words in order, each in the host's byte order.

// One block at a time.
void PortableBlocks(const RandomKey& key, uint32_t first_block, size_t num_blocks, void* out) {
  const PhiloxStream stream(key);
  for (size_t b = 0; b < num_blocks; ++b) {
    const auto block = stream.Block(first_block + static_cast<uint32_t>(b));
    std::memcpy(static_cast<char*>(out) + 16 * b, block.v, 16);
  }
}

#if TAMP_QUANTIZE_X86

// 16 blocks per step with 32-bit lanes: lane l of vector x_w is counter word w of block l.
// mul_epu32 multiplies the even lanes (as 64-bit products); shifting the input right by 32
// gives the odd ones, and two blends put the low and high halves back in 32-bit lanes.

__attribute__((target("avx2"))) inline void MulHiLo(__m256i x, __m256i m, __m256i* hi,
                                                    __m256i* lo) {
  const __m256i even = _mm256_mul_epu32(x, m);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), m);
  *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  *hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

// 8 blocks in 4 vectors (word-major) -> 32 words in block order at out.
__attribute__((target("avx2"))) inline void StoreBlocks8(__m256i x0, __m256i x1, __m256i x2,
                                                         __m256i x3, char* out) {
  // Within each 128-bit lane: r_k holds block 4L + k of lane L.
  const __m256i a = _mm256_unpacklo_epi32(x0, x1);
  const __m256i b = _mm256_unpackhi_epi32(x0, x1);
  const __m256i c = _mm256_unpacklo_epi32(x2, x3);
  const __m256i d = _mm256_unpackhi_epi32(x2, x3);
  const __m256i r0 = _mm256_unpacklo_epi64(a, c);
  const __m256i r1 = _mm256_unpackhi_epi64(a, c);
  const __m256i r2 = _mm256_unpacklo_epi64(b, d);
  const __m256i r3 = _mm256_unpackhi_epi64(b, d);
  auto* p = reinterpret_cast<__m256i*>(out);
  _mm256_storeu_si256(p + 0, _mm256_permute2x128_si256(r0, r1, 0x20));  // Blocks 0, 1.
  _mm256_storeu_si256(p + 1, _mm256_permute2x128_si256(r2, r3, 0x20));  // Blocks 2, 3.
  _mm256_storeu_si256(p + 2, _mm256_permute2x128_si256(r0, r1, 0x31));  // Blocks 4, 5.
  _mm256_storeu_si256(p + 3, _mm256_permute2x128_si256(r2, r3, 0x31));  // Blocks 6, 7.
}

// num_blocks is a multiple of 16.
__attribute__((target("avx2"))) void Avx2Blocks(const PhiloxWords& w, uint32_t first_block,
                                                size_t num_blocks, char* out) {
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(kM0));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(kM1));
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (size_t b = 0; b < num_blocks; b += 16) {
    const uint32_t base = first_block + static_cast<uint32_t>(b);
    __m256i x0[2], x1[2], x2[2], x3[2];
    for (int v = 0; v < 2; ++v) {
      x0[v] = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(base + 8 * v)), iota);
      x1[v] = _mm256_set1_epi32(static_cast<int>(w.c1));
      x2[v] = _mm256_set1_epi32(static_cast<int>(w.c2));
      x3[v] = _mm256_set1_epi32(static_cast<int>(w.c3));
    }
    uint32_t k0 = w.k0, k1 = w.k1;
    for (int r = 0; r < kRounds; ++r) {
      const __m256i vk0 = _mm256_set1_epi32(static_cast<int>(k0));
      const __m256i vk1 = _mm256_set1_epi32(static_cast<int>(k1));
      for (int v = 0; v < 2; ++v) {
        __m256i hi0, lo0, hi1, lo1;
        MulHiLo(x0[v], m0, &hi0, &lo0);
        MulHiLo(x2[v], m1, &hi1, &lo1);
        x0[v] = _mm256_xor_si256(_mm256_xor_si256(hi1, x1[v]), vk0);
        x1[v] = lo1;
        x2[v] = _mm256_xor_si256(_mm256_xor_si256(hi0, x3[v]), vk1);
        x3[v] = lo0;
      }
      k0 += kW0;
      k1 += kW1;
    }
    for (int v = 0; v < 2; ++v) StoreBlocks8(x0[v], x1[v], x2[v], x3[v], out + 16 * (b + 8 * v));
  }
}

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_epi32() and trip -Wmaybe-uninitialized
// (GCC bug 105593, fixed in 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// 16 blocks per step as two sets of 8, one block per 64-bit lane: only the low 32 bits of a
// lane are a counter word (mul_epu32 reads nothing else; the high bits are don't-cares), so
// the 64-bit product is both results at once: lo = the product, hi = the product >> 32.
// That spares the odd-lane shuffling of the 32-bit-lane layout (AVX2 above).

// One round for a set: (x0, x1, x2, x3) <- (hi(x2 * m1) ^ x1 ^ k0, lo(x2 * m1),
//                                          hi(x0 * m0) ^ x3 ^ k1, lo(x0 * m0)).
__attribute__((target("avx512f"))) inline void Avx512Round(__m512i* x, __m512i m0, __m512i m1,
                                                           __m512i k0, __m512i k1) {
  const __m512i p0 = _mm512_mul_epu32(x[0], m0);
  const __m512i p1 = _mm512_mul_epu32(x[2], m1);
  // 0x96: three-way xor.
  x[0] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p1, 32), x[1], k0, 0x96);
  x[1] = p1;
  x[2] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p0, 32), x[3], k1, 0x96);
  x[3] = p0;
}

// The 8 blocks of a set (words in the low halves of the lanes) to 128 bytes in block order.
__attribute__((target("avx512f"))) inline void Avx512StoreSet(const __m512i* x, char* out) {
  // Lane b of w01 = words 0 and 1 of block b as one 64-bit value (word 0 low), w23 likewise.
  const __m512i w01 = _mm512_mask_blend_epi32(0xAAAA, x[0], _mm512_slli_epi64(x[1], 32));
  const __m512i w23 = _mm512_mask_blend_epi32(0xAAAA, x[2], _mm512_slli_epi64(x[3], 32));
  // Interleave: w01[0] w23[0] w01[1] w23[1] ... (index 8 + b picks w23[b]).
  const __m512i first = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11);
  const __m512i second = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
  _mm512_storeu_si512(out, _mm512_permutex2var_epi64(w01, first, w23));        // Blocks 0-3.
  _mm512_storeu_si512(out + 64, _mm512_permutex2var_epi64(w01, second, w23));  // Blocks 4-7.
}

// num_blocks is a multiple of 16.
__attribute__((target("avx512f"))) void Avx512Blocks(const PhiloxWords& w, uint32_t first_block,
                                                     size_t num_blocks, char* out) {
  const __m512i m0 = _mm512_set1_epi64(kM0);
  const __m512i m1 = _mm512_set1_epi64(kM1);
  const __m512i iota = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
  // The round keys, broadcast from memory by the rounds (no register per key).
  uint32_t keys[kRounds][2];
  for (int r = 0; r < kRounds; ++r) {
    keys[r][0] = w.k0 + static_cast<uint32_t>(r) * kW0;
    keys[r][1] = w.k1 + static_cast<uint32_t>(r) * kW1;
  }
  for (size_t b = 0; b < num_blocks; b += 16) {
    __m512i x[2][4];
    for (int v = 0; v < 2; ++v) {
      // Counter word 0 is the 32-bit block number: added in 32-bit lanes, so it wraps as
      // PhiloxStream's does (the high halves are don't-cares).
      const uint32_t base = first_block + static_cast<uint32_t>(b) + 8 * v;
      x[v][0] = _mm512_add_epi32(_mm512_set1_epi64(base), iota);
      x[v][1] = _mm512_set1_epi64(w.c1);
      x[v][2] = _mm512_set1_epi64(w.c2);
      x[v][3] = _mm512_set1_epi64(w.c3);
    }
    for (int r = 0; r < kRounds; ++r) {
      const __m512i k0 = _mm512_set1_epi64(keys[r][0]);
      const __m512i k1 = _mm512_set1_epi64(keys[r][1]);
      Avx512Round(x[0], m0, m1, k0, k1);
      Avx512Round(x[1], m0, m1, k0, k1);
    }
    Avx512StoreSet(x[0], out + 16 * b);
    Avx512StoreSet(x[1], out + 16 * (b + 8));
  }
}

#pragma GCC diagnostic pop

PhiloxKernel DetectKernel() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return PhiloxKernel::kAvx512;
  if (__builtin_cpu_supports("avx2")) return PhiloxKernel::kAvx2;
  return PhiloxKernel::kPortable;
}

#else  // !TAMP_QUANTIZE_X86

PhiloxKernel DetectKernel() { return PhiloxKernel::kPortable; }

#endif  // TAMP_QUANTIZE_X86

PhiloxKernel BestKernel() {
  static const PhiloxKernel kernel = DetectKernel();
  return kernel;
}

constexpr bool kLittleEndian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

// The first `count` (<= 8) halves of block `block` in PhiloxStream::Bits16() order.
void SplitBlock(const RandomKey& key, uint32_t block, size_t count, uint16_t* out) {
  const auto words = PhiloxStream(key).Block(block);
  for (size_t k = 0; k < count; ++k) {
    out[k] = static_cast<uint16_t>(words.v[k >> 1] >> (16 * (k & 1)));
  }
}

// ---------------------------------------------------------------------------------------
// Code packing
// ---------------------------------------------------------------------------------------

// 8 codes of B bits -> B bytes, in two 64-bit words (bits 0-63 and 64-127 of the group).
// The loops unroll, so every shift is a constant and the straddle tests fold away.
template <int B>
inline void PackGroup(const uint32_t* codes, char* out) {
  uint64_t lo = 0, hi = 0;
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    const int p = j * B;
    const uint64_t code = codes[j];
    if (p < 64) {
      lo |= code << p;
      if (p + B > 64) hi |= code >> (64 - p);
    } else {
      hi |= code << (p - 64);
    }
  }
  if constexpr (B <= 8) {
    std::memcpy(out, &lo, B);
  } else {
    std::memcpy(out, &lo, 8);
    std::memcpy(out + 8, &hi, B - 8);
  }
}

// B bytes -> 8 codes. The words are loaded straight from `in` (never through a partly
// written stack buffer, whose reload would stall on store forwarding); bytes 8..B-1 are the
// top of the 8 bytes ending at in + B.
template <int B>
inline void UnpackGroup(const char* in, uint32_t* codes) {
  uint64_t lo = 0, hi = 0;
  if constexpr (B < 8) {
    std::memcpy(&lo, in, B);
  } else {
    std::memcpy(&lo, in, 8);
    if constexpr (B > 8) {
      std::memcpy(&hi, in + B - 8, 8);
      hi >>= 8 * (16 - B);
    }
  }
  constexpr uint64_t kMask = (uint64_t{1} << B) - 1;
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    const int p = j * B;
    uint64_t code;
    if (p < 64) {
      code = lo >> p;
      if (p + B > 64) code |= hi << (64 - p);
    } else {
      code = hi >> (p - 64);
    }
    codes[j] = static_cast<uint32_t>(code & kMask);
  }
}

#if TAMP_QUANTIZE_X86

// 9-bit codes (natural; qsgd with 128..255 levels), 32 codes = 36 bytes per step, for CPUs
// with AVX-512 VBMI; about 2.5x the speed of PackGroup<9>. Codes are merged pairwise in
// registers (9 -> 18 -> 36 -> 72 bits per lane) and the 9 bytes of each 128-bit lane are
// gathered into 36 contiguous bytes.
// GCC bug 105593 again (see Avx512Blocks).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

__attribute__((target("avx512bw,avx512vbmi"))) void Pack9Avx512(const uint32_t* codes,
                                                                size_t steps, char* out) {
  const __m512i pair = _mm512_set1_epi32(0x02000001);  // 16-bit multipliers 1 and 2^9.
  const __m512i low18 = _mm512_set1_epi64(0x3FFFF);
  const __m512i odd4 = _mm512_setr_epi64(0, 4, 0, 4, 0, 4, 0, 4);
  const __m512i even = _mm512_setr_epi64(-1, 0, -1, 0, -1, 0, -1, 0);
  alignas(64) uint8_t gather[64];  // Output byte o = byte o % 9 of 128-bit lane o / 9.
  for (int o = 0; o < 64; ++o) gather[o] = static_cast<uint8_t>(o < 36 ? o / 9 * 16 + o % 9 : 0);
  const __m512i compact = _mm512_load_si512(gather);
  for (size_t step = 0; step < steps; ++step) {
    const uint32_t* c = codes + 32 * step;
    const __m256i low = _mm512_cvtepi32_epi16(_mm512_loadu_si512(c));
    const __m256i high = _mm512_cvtepi32_epi16(_mm512_loadu_si512(c + 16));
    const __m512i c16 = _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
    // 32-bit lanes: c0 | c1 << 9.
    const __m512i p = _mm512_madd_epi16(c16, pair);
    // 64-bit lanes: p0 | p1 << 18 (0xE4: low18 ? p : p >> 14).
    const __m512i q = _mm512_ternarylogic_epi64(p, _mm512_srli_epi64(p, 14), low18, 0xE4);
    // 128-bit lanes: q0 | q1 << 36, q1 shifted by 4 bits, then by 4 bytes (0xEA: a & b | c).
    const __m512i q1 = _mm512_maskz_mov_epi64(0xAA, _mm512_sllv_epi64(q, odd4));
    const __m512i r = _mm512_ternarylogic_epi64(q, even, _mm512_bsrli_epi128(q1, 4), 0xEA);
    _mm512_mask_storeu_epi8(out + 36 * step, (uint64_t{1} << 36) - 1,
                            _mm512_permutexvar_epi8(compact, r));
  }
}

#pragma GCC diagnostic pop

bool DetectPack9Avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vbmi");
}

#else  // !TAMP_QUANTIZE_X86

bool DetectPack9Avx512() { return false; }

#endif  // TAMP_QUANTIZE_X86

bool HasPack9Avx512() {
  static const bool has = DetectPack9Avx512();
  return has;
}

// Widths of 4, 8 and 16 bits: whole bytes at a time, loops the compiler vectorises.
// `bytes` = PackedBytes of a multiple of 8 codes.
template <int B>
TAMP_QUANTIZE_KERNEL void PackBytes(const uint32_t* codes, size_t bytes, uint8_t* out) {
  if constexpr (B == 16) {
    for (size_t i = 0; i < bytes / 2; ++i) {
      out[2 * i] = static_cast<uint8_t>(codes[i]);
      out[2 * i + 1] = static_cast<uint8_t>(codes[i] >> 8);
    }
  } else {
    constexpr int kPerByte = 8 / B;
    for (size_t i = 0; i < bytes; ++i) {
      uint32_t byte = 0;
      for (int j = 0; j < kPerByte; ++j) byte |= codes[kPerByte * i + j] << (B * j);
      out[i] = static_cast<uint8_t>(byte);
    }
  }
}

template <int B>
TAMP_QUANTIZE_KERNEL void UnpackBytes(const uint8_t* in, size_t bytes, uint32_t* codes) {
  if constexpr (B == 16) {
    for (size_t i = 0; i < bytes / 2; ++i) codes[i] = in[2 * i] | (uint32_t{in[2 * i + 1]} << 8);
  } else {
    constexpr int kPerByte = 8 / B;
    constexpr uint32_t kMask = (1u << B) - 1;
    for (size_t i = 0; i < bytes; ++i) {
      for (int j = 0; j < kPerByte; ++j) codes[kPerByte * i + j] = (in[i] >> (B * j)) & kMask;
    }
  }
}

// The widths PackBytes/UnpackBytes serve (for 1 and 2 bits, measured slower than the
// 8-codes-per-step path).
constexpr bool IsByteFriendly(int bits) { return bits == 4 || bits == 8 || bits == 16; }

template <int B>
void PackCodesT(const uint32_t* codes, size_t count, char* out) {
  const size_t groups = count / 8;
  if constexpr (IsByteFriendly(B)) {
    PackBytes<B>(codes, B * groups, reinterpret_cast<uint8_t*>(out));
  } else {
    size_t done = 0;  // Groups.
#if TAMP_QUANTIZE_X86
    if (B == 9 && HasPack9Avx512()) {
      Pack9Avx512(codes, groups / 4, out);
      done = groups / 4 * 4;
    }
#endif
    for (size_t g = done; g < groups; ++g) PackGroup<B>(codes + 8 * g, out + B * g);
  }
  if (const size_t rest = count % 8; rest > 0) {
    uint32_t last[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::copy(codes + 8 * groups, codes + count, last);
    char bytes[B];
    PackGroup<B>(last, bytes);
    std::memcpy(out + B * groups, bytes, (rest * B + 7) / 8);
  }
}

template <int B>
bool UnpackCodesT(const char* in, size_t count, uint32_t* codes) {
  const size_t groups = count / 8;
  if constexpr (IsByteFriendly(B)) {
    UnpackBytes<B>(reinterpret_cast<const uint8_t*>(in), B * groups, codes);
  } else {
    for (size_t g = 0; g < groups; ++g) UnpackGroup<B>(in + B * g, codes + 8 * g);
  }
  const size_t rest = count % 8;
  if (rest == 0) return true;
  char bytes[B] = {};
  const size_t used = (rest * B + 7) / 8;
  std::memcpy(bytes, in + B * groups, used);
  uint32_t last[8];
  UnpackGroup<B>(bytes, last);
  std::copy(last, last + rest, codes + 8 * groups);
  // The padding is zero iff re-packing the `rest` codes alone gives the same bytes.
  for (size_t j = rest; j < 8; ++j) last[j] = 0;
  char repacked[B];
  PackGroup<B>(last, repacked);
  return std::memcmp(repacked, bytes, used) == 0;
}

}  // namespace

bool PhiloxKernelSupported(PhiloxKernel kernel) {
  switch (kernel) {
    case PhiloxKernel::kPortable:
      return true;
    case PhiloxKernel::kAvx2:
      return BestKernel() != PhiloxKernel::kPortable;
    case PhiloxKernel::kAvx512:
      return BestKernel() == PhiloxKernel::kAvx512;
  }
  return false;
}

namespace {

// Blocks [first_block, first_block + num_blocks) to `out` (see PortableBlocks()), with
// `kernel` for the whole 16-block groups.
void BlocksWith(PhiloxKernel kernel, const RandomKey& key, uint32_t first_block,
                size_t num_blocks, void* out) {
  DCHECK(PhiloxKernelSupported(kernel));
  size_t done = 0;
#if TAMP_QUANTIZE_X86
  if (kernel != PhiloxKernel::kPortable) {
    done = num_blocks / 16 * 16;
    if (kernel == PhiloxKernel::kAvx512) {
      Avx512Blocks(WordsOf(key), first_block, done, static_cast<char*>(out));
    } else {
      Avx2Blocks(WordsOf(key), first_block, done, static_cast<char*>(out));
    }
  }
#endif
  PortableBlocks(key, first_block + static_cast<uint32_t>(done), num_blocks - done,
                 static_cast<char*>(out) + 16 * done);
}

}  // namespace

void PhiloxBitsWith(PhiloxKernel kernel, const RandomKey& key, uint64_t first, size_t count,
                    uint32_t* out) {
  DCHECK_EQ(first % 4, 0u);
  DCHECK_LE(first + count, uint64_t{1} << 34);
  const uint32_t first_block = static_cast<uint32_t>(first / 4);
  const size_t blocks = count / 4;
  BlocksWith(kernel, key, first_block, blocks, out);
  if (const size_t rest = count % 4; rest > 0) {
    uint32_t last[4];
    PortableBlocks(key, first_block + static_cast<uint32_t>(blocks), 1, last);
    std::memcpy(out + 4 * blocks, last, 4 * rest);
  }
}

void PhiloxBits(const RandomKey& key, uint64_t first, size_t count, uint32_t* out) {
  PhiloxBitsWith(BestKernel(), key, first, count, out);
}

void PhiloxBits16With(PhiloxKernel kernel, const RandomKey& key, uint64_t first, size_t count,
                      uint16_t* out) {
  DCHECK_EQ(first % 8, 0u);
  DCHECK_LE(first + count, uint64_t{1} << 35);
  const uint32_t first_block = static_cast<uint32_t>(first / 8);
  const size_t blocks = count / 8;
  // A block's bytes are its eight halves in Bits16() order where words are little-endian.
  if constexpr (kLittleEndian) {
    BlocksWith(kernel, key, first_block, blocks, out);
  } else {
    for (size_t b = 0; b < blocks; ++b) SplitBlock(key, first_block + static_cast<uint32_t>(b), 8, out + 8 * b);
  }
  if (const size_t rest = count % 8; rest > 0) {
    SplitBlock(key, first_block + static_cast<uint32_t>(blocks), rest, out + 8 * blocks);
  }
}

void PhiloxBits16(const RandomKey& key, uint64_t first, size_t count, uint16_t* out) {
  PhiloxBits16With(BestKernel(), key, first, count, out);
}

void PackCodes(const uint32_t* codes, size_t count, int bits, char* out) {
  switch (bits) {
#define TAMP_PACK_CASE(B) \
  case B:                 \
    return PackCodesT<B>(codes, count, out);
    TAMP_PACK_CASE(1)
    TAMP_PACK_CASE(2)
    TAMP_PACK_CASE(3)
    TAMP_PACK_CASE(4)
    TAMP_PACK_CASE(5)
    TAMP_PACK_CASE(6)
    TAMP_PACK_CASE(7)
    TAMP_PACK_CASE(8)
    TAMP_PACK_CASE(9)
    TAMP_PACK_CASE(10)
    TAMP_PACK_CASE(11)
    TAMP_PACK_CASE(12)
    TAMP_PACK_CASE(13)
    TAMP_PACK_CASE(14)
    TAMP_PACK_CASE(15)
    TAMP_PACK_CASE(16)
#undef TAMP_PACK_CASE
  }
  LOG(FATAL) << "PackCodes: unsupported code width " << bits;
}

bool UnpackCodes(const char* in, size_t count, int bits, uint32_t* codes) {
  switch (bits) {
#define TAMP_UNPACK_CASE(B) \
  case B:                   \
    return UnpackCodesT<B>(in, count, codes);
    TAMP_UNPACK_CASE(1)
    TAMP_UNPACK_CASE(2)
    TAMP_UNPACK_CASE(3)
    TAMP_UNPACK_CASE(4)
    TAMP_UNPACK_CASE(5)
    TAMP_UNPACK_CASE(6)
    TAMP_UNPACK_CASE(7)
    TAMP_UNPACK_CASE(8)
    TAMP_UNPACK_CASE(9)
    TAMP_UNPACK_CASE(10)
    TAMP_UNPACK_CASE(11)
    TAMP_UNPACK_CASE(12)
    TAMP_UNPACK_CASE(13)
    TAMP_UNPACK_CASE(14)
    TAMP_UNPACK_CASE(15)
    TAMP_UNPACK_CASE(16)
#undef TAMP_UNPACK_CASE
  }
  LOG(FATAL) << "UnpackCodes: unsupported code width " << bits;
  return false;
}

bool AnyNonzero(const uint32_t* codes, size_t count) {
  uint32_t any = 0;
  for (size_t j = 0; j < count; ++j) any |= codes[j];
  return any != 0;
}

absl::Status ValidateBucketSize(const config::Codec& spec, absl::string_view field_path,
                                uint32_t max_bucket_size) {
  if (spec.has_bucket_size() && (spec.bucket_size() < 1 || spec.bucket_size() > max_bucket_size)) {
    return absl::InvalidArgumentError(absl::StrCat(field_path, ".bucket_size: must be in [1, ",
                                                   max_bucket_size, "], got ", spec.bucket_size()));
  }
  return absl::OkStatus();
}

}  // namespace tamp::compress::internal

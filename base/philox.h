// Counter-based random numbers (Philox-4x32-10 from Random123), identical on host and device.
//
// A stream is keyed by (seed, step, chunk, worker); element i of the stream is a pure
// function of the key and i, so any thread (CPU or GPU) can draw element i directly and
// every platform draws the same numbers. Workers that must agree on a random choice
// (random-k, random-block) use worker = kSharedStream.
//
// Example:
//   tamp::PhiloxStream rng({.seed = 7, .step = 3, .chunk = 1, .worker = 0});
//   uint32_t r = rng.Bits(i);        // 32 random bits, element i
//   float u = rng.Uniform(i);        // in [0, 1)
//   uint32_t h = rng.Bits16(i);      // 16 random bits, element i of the 16-bit stream
#ifndef TAMP_BASE_PHILOX_H_
#define TAMP_BASE_PHILOX_H_

#include <cstdint>

#include <Random123/philox.h>

#if defined(__CUDACC__)
#define TAMP_HOST_DEVICE __host__ __device__
#else
#define TAMP_HOST_DEVICE
#endif

namespace tamp {

inline constexpr uint32_t kSharedStream = 0xFFFFFFFFu;

struct RandomKey {
  uint64_t seed = 0;
  uint64_t step = 0;
  uint32_t chunk = 0;
  uint32_t worker = 0;
};

class PhiloxStream {
 public:
  TAMP_HOST_DEVICE explicit PhiloxStream(const RandomKey& key) {
    key_ = {{static_cast<uint32_t>(key.seed), static_cast<uint32_t>(key.seed >> 32)}};
    step_lo_ = static_cast<uint32_t>(key.step);
    // The step's high bits are folded into the chunk word so 2^32+ steps stay distinct.
    chunk_ = key.chunk ^ static_cast<uint32_t>(key.step >> 32);
    worker_ = key.worker;
  }

  // Four independent 32-bit words for block b (elements 4b..4b+3).
  TAMP_HOST_DEVICE r123::Philox4x32::ctr_type Block(uint32_t b) const {
    r123::Philox4x32 philox;
    r123::Philox4x32::ctr_type ctr = {{b, step_lo_, chunk_, worker_}};
    return philox(ctr, key_);
  }

  // 32 random bits for element i.
  TAMP_HOST_DEVICE uint32_t Bits(uint64_t i) const {
    return Block(static_cast<uint32_t>(i >> 2)).v[i & 3];
  }

  // 16 random bits for element i of the 16-bit stream, which deals out each block's 128 bits
  // to eight elements: element i is half i & 1 (0: the low half) of word (i >> 1) & 3 of
  // block i >> 3. Stochastic rounding that needs only 2^-16 resolution draws half as many
  // blocks from it as from Bits(). i < 2^35.
  TAMP_HOST_DEVICE uint32_t Bits16(uint64_t i) const {
    return (Block(static_cast<uint32_t>(i >> 3)).v[(i >> 1) & 3] >> (16 * (i & 1))) & 0xFFFFu;
  }

  // Uniform float in [0, 1) with 24 bits of resolution, for element i.
  TAMP_HOST_DEVICE float Uniform(uint64_t i) const { return ToUniform(Bits(i)); }

  TAMP_HOST_DEVICE static float ToUniform(uint32_t bits) {
    return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
  }

  // Uniform float in [0, 1) with 16 bits of resolution, of a Bits16() value (exact).
  TAMP_HOST_DEVICE static float ToUniform16(uint32_t bits16) {
    return static_cast<float>(static_cast<int32_t>(bits16)) * (1.0f / 65536.0f);
  }

 private:
  r123::Philox4x32::key_type key_;
  uint32_t step_lo_;
  uint32_t chunk_;
  uint32_t worker_;
};

}  // namespace tamp

#endif  // TAMP_BASE_PHILOX_H_

// Per-thread work of GPU random-k (compress/randomk.h), written once for host and device.
// Internal to compress/cuda/.
//
// The k positions are RandomKCodec::Positions()' own (Floyd's algorithm is a sequential
// chain of draws, so the host draws them, as every CPU worker does, and they are uploaded
// as 32-bit indices); the device gathers and scatters. Body: the k values in position order
// (fp32 with the wire's NaN, or saturating fp16); every body of the right length is valid.
// With error feedback the positions' residuals are written by their entries, which mark
// them in a bitmap; then every other element's residual is s * c.
#ifndef TAMP_COMPRESS_CUDA_INTERNAL_RANDOMK_AGENT_H_
#define TAMP_COMPRESS_CUDA_INTERNAL_RANDOMK_AGENT_H_

#include <cstdint>

#include "compress/cuda/internal/codec_math.h"
#include "compress/cuda/internal/quantize_agent.h"

namespace tamp::compress::cuda_internal {

struct RandomKLayout {
  uint64_t n = 0;
  uint64_t k = 0;
  bool fp16_values = false;

  TAMP_HD uint64_t body_bytes() const { return k * (fp16_values ? 2 : 4); }
  TAMP_HD uint64_t bitmap_words() const { return (n + 31) / 32; }
};

// Marks element i in the bitmap (several entries' threads share a word on the device).
TAMP_HD void MarkTaken(uint32_t* taken, uint64_t i) {
#if defined(__CUDA_ARCH__)
  atomicOr(&taken[i / 32], 1u << (i % 32));
#else
  taken[i / 32] |= 1u << (i % 32);
#endif
}

TAMP_HD bool IsTaken(const uint32_t* taken, uint64_t i) {
  return (taken[i / 32] >> (i % 32)) & 1u;
}

// Entry j of an encode: the value of c at positions[j] into the body; with `residual`, that
// element's new residual (and its mark in `taken`).
TAMP_HD void EncodeRandomKEntry(const RandomKLayout& l, const uint32_t* positions, uint64_t j,
                                const GlobalSource& source, float* residual,
                                float residual_scale, uint32_t* taken, unsigned char* body) {
  const uint64_t i = positions[j];
  const float c = source(i);
  float decoded;
  StoreSparseValue(l.fp16_values, body, j, c, &decoded);
  if (residual == nullptr) return;
  residual[i] = NextResidual(residual_scale, c, decoded);
  MarkTaken(taken, i);
}

// Element i after the entries: unless sent, its residual becomes s * (c - 0).
TAMP_HD void EncodeRandomKRest(uint64_t i, const GlobalSource& source, float* residual,
                               float residual_scale, const uint32_t* taken) {
  if (!IsTaken(taken, i)) residual[i] = NextResidual(residual_scale, source(i), 0.0f);
}

// Entry j of a decode: out[positions[j]] = (or +=) its value (`out` zeroed first for =).
TAMP_HD void DecodeRandomKEntry(const RandomKLayout& l, const uint32_t* positions, uint64_t j,
                                const unsigned char* body, float* out, bool accumulate) {
  const uint64_t i = positions[j];
  const float v = LoadSparseValue(l.fp16_values, body, j);
  out[i] = accumulate ? AddRn(out[i], v) : v;
}

}  // namespace tamp::compress::cuda_internal

#endif  // TAMP_COMPRESS_CUDA_INTERNAL_RANDOMK_AGENT_H_

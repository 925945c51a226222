// Per-thread work of GPU random-block (compress/randomblock.h), written once for host and
// device. Internal to compress/cuda/.
//
// The B blocks of L values sit at starts drawn from the shared stream (every worker and the
// server draw the same), one per segment [floor(s n / B), floor((s + 1) n / B)). A thread
// per block draws its start (BlockStart(), randomblock.cc's BlockStarts() with
// compress/sparse.h UniformDraws); then a thread per chunk element finds its segment
// (SegmentOf()) and whether it lies in that segment's block: if so, value j = s * L +
// offset of the body is its value (fp32 with the wire's NaN, or saturating fp16). Body:
// the m = B * L values, nothing else; every body is valid once its length is. Without error
// feedback (and for a += decode) only the m entries are touched: a thread per entry
// (ElementOf()).
#ifndef TAMP_COMPRESS_CUDA_INTERNAL_RANDOMBLOCK_AGENT_H_
#define TAMP_COMPRESS_CUDA_INTERNAL_RANDOMBLOCK_AGENT_H_

#include <cstdint>

#include "base/philox.h"
#include "compress/cuda/internal/codec_math.h"

namespace tamp::compress::cuda_internal {

struct RandomBlockLayout {
  uint64_t n = 0;
  uint64_t blocks = 0;        // B = min(num_blocks, k).
  uint64_t block_length = 0;  // L = floor(k / B).
  bool fp16_values = false;

  TAMP_HD uint64_t entries() const { return blocks * block_length; }
  TAMP_HD uint64_t value_bytes() const { return fp16_values ? 2 : 4; }
  TAMP_HD uint64_t body_bytes() const { return entries() * value_bytes(); }
};

// As RandomBlockCodec's constructor: k >= 1, num_blocks >= 1.
inline RandomBlockLayout MakeRandomBlockLayout(uint64_t n, uint64_t k, uint64_t num_blocks,
                                               bool fp16_values) {
  RandomBlockLayout l;
  l.n = n;
  l.blocks = num_blocks < k ? num_blocks : k;
  l.block_length = k / l.blocks;
  l.fp16_values = fp16_values;
  return l;
}

// floor(s n / B): n < 2^32 and s <= B <= n, so the product fits 64 bits.
TAMP_HD uint64_t SegmentBegin(const RandomBlockLayout& l, uint64_t s) {
  return s * l.n / l.blocks;
}

// The segment holding element i: the largest s with floor(s n / B) <= i, i.e. s n < (i + 1) B.
TAMP_HD uint64_t SegmentOf(const RandomBlockLayout& l, uint64_t i) {
  return ((i + 1) * l.blocks - 1) / l.n;
}

// The high 64 bits of a * b (UniformDraws::Below()'s 128-bit product).
TAMP_HD uint64_t MulHigh64(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(a, b);
#else
  return static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
#endif
}

// Block s's start: SegmentBegin(s) + UniformDraws::Below(s, segment length - L + 1) on the
// shared stream of `key`.
TAMP_HD uint64_t BlockStart(const RandomBlockLayout& l, const RandomKey& key, uint64_t s) {
  const PhiloxStream stream(RandomKey{key.seed, key.step, key.chunk, kSharedStream});
  const r123::Philox4x32::ctr_type words = stream.Block(static_cast<uint32_t>(s >> 1));
  const int lane = static_cast<int>(s & 1) * 2;
  const uint64_t bits = uint64_t{words.v[lane]} | (uint64_t{words.v[lane + 1]} << 32);
  const uint64_t begin = SegmentBegin(l, s);
  const uint64_t length = SegmentBegin(l, s + 1) - begin;
  return begin + MulHigh64(bits, length - l.block_length + 1);
}

// Body entry of element i given the block starts, or -1 when i is in no block.
TAMP_HD int64_t EntryOf(const RandomBlockLayout& l, const uint64_t* starts, uint64_t i) {
  const uint64_t s = SegmentOf(l, i);
  const uint64_t start = starts[s];
  if (i < start || i - start >= l.block_length) return -1;
  return static_cast<int64_t>(s * l.block_length + (i - start));
}

// The element of body entry j (j < entries()).
TAMP_HD uint64_t ElementOf(const RandomBlockLayout& l, const uint64_t* starts, uint64_t j) {
  return starts[j / l.block_length] + j % l.block_length;
}

// Element i of an encode: its value into the body when in a block, and (with_residual)
// residual_scale * (c - decoded) as its new residual, where c is its compensated value.
TAMP_HD float EncodeBlockElement(const RandomBlockLayout& l, const uint64_t* starts, uint64_t i,
                                 float c, float residual_scale, unsigned char* body) {
  float decoded = 0.0f;
  const int64_t j = EntryOf(l, starts, i);
  if (j >= 0) StoreSparseValue(l.fp16_values, body, static_cast<uint64_t>(j), c, &decoded);
  return NextResidual(residual_scale, c, decoded);
}

// Element i of a decode: the value it decodes to (0 outside the blocks); with `accumulate`
// `out` + that value, as the CPU's AddValues() (elements outside the blocks untouched).
TAMP_HD float DecodeBlockElement(const RandomBlockLayout& l, const uint64_t* starts,
                                 const unsigned char* body, uint64_t i, float out,
                                 bool accumulate) {
  const int64_t j = EntryOf(l, starts, i);
  if (j < 0) return accumulate ? out : 0.0f;
  const float v = LoadSparseValue(l.fp16_values, body, static_cast<uint64_t>(j));
  return accumulate ? AddRn(out, v) : v;
}

}  // namespace tamp::compress::cuda_internal

#endif  // TAMP_COMPRESS_CUDA_INTERNAL_RANDOMBLOCK_AGENT_H_

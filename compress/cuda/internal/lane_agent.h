// The lane path of the quantizing codecs (a value per thread), written once for host and
// device: compress/cuda/quantize.cu's encode_lanes_kernel and decode_lanes_kernel map these
// agents onto threads, internal/emulation.h runs them on the host. Internal to compress/cuda/.
#ifndef TAMP_COMPRESS_CUDA_INTERNAL_LANE_AGENT_H_
#define TAMP_COMPRESS_CUDA_INTERNAL_LANE_AGENT_H_

#include <cstdint>

#include "compress/cuda/internal/codec_math.h"
#include "compress/cuda/internal/quantize_agent.h"

namespace tamp::compress::cuda_internal {

// Whether a codec takes the lane path: a warp encodes a group with each lane holding one
// value (coalesced loads and stores of values, residuals and signum's momentum, in
// registers: no tile), the group's code words put together across the lanes; a decode is a
// value per thread. It serves any codec whose code of a value depends on that value alone
// (and on its own state), draws no random words and has a width dividing 32, but was faster
// than the tile only for signum, whose momentum the tile's threads read and write 32 values
// apart; none, fp16, bf16, signsgd and efsign were slower on it (docs/gpu.md, "GPU codec
// speed").
TAMP_HD bool UsesLanePath(const QuantLayout& l) { return l.kind == QuantKind::kSignum; }

// The code of value i (lane i % 32 of group i / 32), shifted to its place in its word of
// the code stream; a word is the OR of its 32 / bits lanes' (LanePlacedCode() of lanes
// w * 32 / bits ... of the group, whose first lane stores it: StoreCodeWord()).
TAMP_HD uint32_t LanePlacedCode(const QuantLayout& l, uint64_t i, uint32_t code) {
  const uint32_t per_word = 32 / static_cast<uint32_t>(l.bits);
  return code << ((i % kGroup) % per_word * static_cast<uint32_t>(l.bits));
}

// Word `word` of the code stream (4-byte aligned at `codes`), stored or loaded whole, or
// bytewise where the stream ends inside it (the body holds only code_bytes).
TAMP_HD void StoreCodeWord(const QuantLayout& l, unsigned char* codes, uint64_t word,
                           uint32_t value) {
  const uint64_t first = 4 * word;
  if (first + 4 <= l.code_bytes) {
    reinterpret_cast<uint32_t*>(codes)[word] = value;
    return;
  }
  for (uint64_t b = first; b < l.code_bytes; ++b) {
    codes[b] = static_cast<unsigned char>(value >> (8 * (b - first)));
  }
}
TAMP_HD uint32_t LoadCodeWord(const QuantLayout& l, const unsigned char* codes, uint64_t word) {
  const uint64_t first = 4 * word;
  if (first + 4 <= l.code_bytes) return reinterpret_cast<const uint32_t*>(codes)[word];
  uint32_t value = 0;
  for (uint64_t b = first; b < l.code_bytes; ++b) value |= uint32_t{codes[b]} << (8 * (b - first));
  return value;
}

// Encodes value i, whose compensated value (source(i)) is c, on the lane path: returns its
// code (0 past the chunk's end, so the padding stays zero) and, with error feedback, stores
// its new residual. The kernels load c apart from this, several values ahead.
TAMP_HD uint32_t EncodeLane(const QuantLayout& l, uint64_t i, float c, float* residual,
                            float residual_scale, float* state, const unsigned char* body) {
  if (i >= l.n) return 0;
  float decoded;
  const uint32_t code = EncodeValue(l, body, i, c, 0, state, &decoded);
  if (residual != nullptr) residual[i] = NextResidual(residual_scale, c, decoded);
  return code;
}

// The word of the code stream that holds value i's code on the lane path, and the value
// decoded from that word (`accumulator`: out[i] before, for +=).
TAMP_HD uint64_t LaneWord(const QuantLayout& l, uint64_t i) {
  return i * static_cast<uint64_t>(l.bits) / 32;
}
TAMP_HD float DecodeLane(const QuantLayout& l, uint64_t i, const unsigned char* body,
                         uint32_t word, float accumulator, bool accumulate) {
  const uint32_t shift = static_cast<uint32_t>(i * static_cast<uint64_t>(l.bits) % 32);
  const uint32_t mask = l.bits == 32 ? 0xFFFFFFFFu : (1u << l.bits) - 1;
  const float v = DecodeValue(l, body, i, (word >> shift) & mask);
  return accumulate ? AddRn(accumulator, v) : v;
}

}  // namespace tamp::compress::cuda_internal

#endif  // TAMP_COMPRESS_CUDA_INTERNAL_LANE_AGENT_H_

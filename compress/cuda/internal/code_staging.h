// Where a tile's codes wait in shared memory: the staging area of the quantize tile kernels
// (compress/cuda/quantize.cu), written once for host and device so that the emulation
// (internal/emulation.h) stages them the same way. Internal to compress/cuda/.
#ifndef TAMP_COMPRESS_CUDA_INTERNAL_CODE_STAGING_H_
#define TAMP_COMPRESS_CUDA_INTERNAL_CODE_STAGING_H_

#include <cstdint>

#include "compress/cuda/internal/quantize_agent.h"

namespace tamp::compress::cuda_internal {

// Codes staged in shared memory, for codes of 16 bits or more (none, fp16, bf16), where a
// group's codes are 64 or 128 bytes and a warp's word stores or loads straight to the body,
// that far apart, made the encode and decode several times slower than the copy they
// amount to; for narrower codes staging cost more than it saved (docs/gpu.md, "GPU codec
// speed"). A tile's groups write (encode) or read (decode) their codes in a staging area,
// group t of the tile (thread t) at word t * CodeStride(l), and the block moves the tile's
// stretch of the code stream between the staging area and the body with coalesced word
// loads and stores. The stride is odd (bits, or bits + 1) so that the 32 threads of a warp
// touching their w-th words hit 32 different banks.
TAMP_HD bool StagesCodes(const QuantLayout& l) { return l.bits >= 16; }
TAMP_HD uint32_t CodeStride(const QuantLayout& l) { return static_cast<uint32_t>(l.bits) | 1u; }
// The staging area's size in bytes (the largest, for 32-bit codes: kMaxStagedCodeBytes).
TAMP_HD uint32_t StagedCodeBytes(const QuantLayout& l) { return 4 * kTileGroups * CodeStride(l); }
inline constexpr uint32_t kMaxStagedCodeBytes = 4 * kTileGroups * 33;
// Where tile `tile`'s codes start in the code stream, and how many bytes they take.
TAMP_HD uint64_t TileCodeOffset(const QuantLayout& l, uint64_t tile) {
  return 4 * static_cast<uint64_t>(l.bits) * kTileGroups * tile;
}
TAMP_HD uint32_t TileCodeBytes(const QuantLayout& l, uint64_t tile) {
  const uint64_t left = l.code_bytes - TileCodeOffset(l, tile);
  const uint64_t full = 4 * static_cast<uint64_t>(l.bits) * kTileGroups;
  return static_cast<uint32_t>(left < full ? left : full);
}
// Where group g's codes go (encode) or come from (decode): its region of the staging area
// `codes` (StagesCodes()), or its place in the code stream `codes` (not).
TAMP_HD unsigned char* GroupCodes(const QuantLayout& l, uint64_t g, unsigned char* codes) {
  return StagesCodes(l) ? codes + 4 * CodeStride(l) * (g % kTileGroups)
                        : codes + 4 * static_cast<uint64_t>(l.bits) * g;
}
TAMP_HD const unsigned char* GroupCodes(const QuantLayout& l, uint64_t g,
                                        const unsigned char* codes) {
  return GroupCodes(l, g, const_cast<unsigned char*>(codes));
}

// Byte p of a tile's stretch of the code stream in the staging area (a multiple of 4 where p
// is: a group's 4 * bits bytes stay contiguous).
TAMP_HD uint32_t StagedByte(const QuantLayout& l, uint32_t p) {
  const uint32_t group_bytes = 4 * static_cast<uint32_t>(l.bits);
  return p / group_bytes * 4 * CodeStride(l) + p % group_bytes;
}

// Word start, start + step, start + 2 step, ... of a tile's stretch of the code stream and
// its word in the staging area (StagedByte(l, 4 w) / 4), without a division per word: the
// tile kernels' copy loops, a word per thread and kThreads apart.
class StagedWordWalk {
 public:
  TAMP_HD StagedWordWalk(const QuantLayout& l, uint32_t start, uint32_t step)
      : bits_(static_cast<uint32_t>(l.bits)),
        stride_(CodeStride(l)),
        group_(start / bits_),
        word_(start % bits_),
        step_groups_(step / bits_),
        step_words_(step % bits_) {}
  TAMP_HD uint32_t Staged() const { return group_ * stride_ + word_; }
  TAMP_HD void Advance() {
    group_ += step_groups_;
    word_ += step_words_;
    if (word_ >= bits_) {
      word_ -= bits_;
      ++group_;
    }
  }

 private:
  uint32_t bits_, stride_, group_, word_, step_groups_, step_words_;
};

}  // namespace tamp::compress::cuda_internal

#endif  // TAMP_COMPRESS_CUDA_INTERNAL_CODE_STAGING_H_

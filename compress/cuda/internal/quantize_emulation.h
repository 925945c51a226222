// Host emulation of compress/cuda/quantize.cu's kernels (none, fp16, bf16, natural, signsgd,
// signum, efsign, qsgd, terngrad, maxmin): the agents of internal/quantize_agent.h,
// code_staging.h and lane_agent.h run thread after thread, block after block, in the order
// of the kernels' phases. Internal, testonly: internal/emulation.h's Emulated codec uses it.
#ifndef TAMP_COMPRESS_CUDA_INTERNAL_QUANTIZE_EMULATION_H_
#define TAMP_COMPRESS_CUDA_INTERNAL_QUANTIZE_EMULATION_H_

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "base/philox.h"
#include "compress/cuda/internal/code_staging.h"
#include "compress/cuda/internal/lane_agent.h"
#include "compress/cuda/internal/quantize_agent.h"

namespace tamp::compress::cuda_internal {

// encode_tile_kernel of quantize.cu, block by block: stage the tile, (fused) bucket stats
// from it, the groups' codes into the staging area and residuals into the tile, then the
// codes and the residuals back.
inline void EmulateEncodeTiles(const QuantLayout& l, const RandomKey& key,
                               const GlobalSource& source, float* residual, float residual_scale,
                               float* state, unsigned char* body) {
  std::vector<float> tile(kTilePadded);
  std::vector<unsigned char> staged(StagedCodeBytes(l));
  for (uint64_t first = 0; first < l.n; first += kFusedTile) {
    const uint32_t length = static_cast<uint32_t>(std::min<uint64_t>(kFusedTile, l.n - first));
    for (uint32_t j = 0; j < length; ++j) tile[Padded(j)] = source(first + j);
    const TileValues values{tile.data(), first};
    if (UsesFusedStats(l)) {
      const uint64_t bucket0 = first / l.bucket_size;
      const uint32_t buckets = (length + l.bucket_size - 1) / l.bucket_size;
      std::vector<LaneStat> lanes(8 * buckets);
      for (uint32_t p = 0; p < 8 * buckets; ++p) {
        const uint64_t b = bucket0 + p / 8;
        const BucketView<TileValues> view{&values, b * l.bucket_size};
        lanes[p] = BucketLaneStat(l, view, BucketLength(l, b), static_cast<int>(p % 8));
      }
      for (uint32_t lb = 0; lb < buckets; ++lb) {
        StoreBucketStats(l, lanes.data() + 8 * lb, bucket0 + lb, body);
      }
    }
    for (uint64_t g = first / kGroup; g < l.groups() && g < (first + kFusedTile) / kGroup; ++g) {
      EncodeGroup(l, key, g, values, residual != nullptr, residual_scale, state, body,
                  GroupCodes(l, g, StagesCodes(l) ? staged.data() : body + l.stats_bytes));
    }
    if (StagesCodes(l)) {
      const uint64_t tile_index = first / kFusedTile;
      unsigned char* codes = body + l.stats_bytes + TileCodeOffset(l, tile_index);
      for (uint32_t p = 0; p < TileCodeBytes(l, tile_index); ++p) {
        codes[p] = staged[StagedByte(l, p)];
      }
    }
    if (residual == nullptr) continue;
    for (uint32_t j = 0; j < length; ++j) residual[first + j] = tile[Padded(j)];
  }
}

// encode_lanes_kernel of quantize.cu, warp by warp: each lane's code and residual, then each
// word the OR of its lanes' placed codes as the warp's butterfly of __shfl_xor_sync gives
// it to every lane of the word, stored by the word's first lane.
inline void EmulateEncodeLanes(const QuantLayout& l, const GlobalSource& source, float* residual,
                               float residual_scale, float* state, unsigned char* body) {
  const uint32_t per_word = 32 / static_cast<uint32_t>(l.bits);
  for (uint64_t g = 0; g < l.groups(); ++g) {
    uint32_t lanes[kGroup];
    for (uint32_t lane = 0; lane < kGroup; ++lane) {
      const uint64_t i = g * kGroup + lane;
      const float c = i < l.n ? source(i) : 0.0f;
      lanes[lane] =
          LanePlacedCode(l, i, EncodeLane(l, i, c, residual, residual_scale, state, body));
    }
    for (uint32_t mask = 1; mask < per_word; mask <<= 1) {
      uint32_t shuffled[kGroup];
      for (uint32_t lane = 0; lane < kGroup; ++lane) shuffled[lane] = lanes[lane ^ mask];
      for (uint32_t lane = 0; lane < kGroup; ++lane) lanes[lane] |= shuffled[lane];
    }
    for (uint32_t lane = 0; lane < kGroup; lane += per_word) {
      const uint64_t word = (g * kGroup + lane) * static_cast<uint64_t>(l.bits) / 32;
      StoreCodeWord(l, body + l.stats_bytes, word, lanes[lane]);
    }
  }
}

// decode_lanes_kernel of quantize.cu: a value per thread.
inline void EmulateDecodeLanes(const QuantLayout& l, const unsigned char* body, float* out,
                               bool accumulate) {
  for (uint64_t i = 0; i < l.n; ++i) {
    const uint32_t word = LoadCodeWord(l, body + l.stats_bytes, LaneWord(l, i));
    out[i] = DecodeLane(l, i, body, word, out[i], accumulate);
  }
}

// chunk_segments_kernel and chunk_tree_kernel of quantize.cu: the whole chunk's partial.
inline ChunkPartial EmulateChunkStats(const QuantLayout& l, const GlobalSource& source) {
  std::vector<ChunkPartial> a(NumSegments(l)), b(NumSegments(l));
  for (uint64_t segment = 0; segment < NumSegments(l); ++segment) {  // chunk_segments_kernel
    TernLane tern[8];
    EfSignPartial ef[16];
    for (int lane = 0; lane < ChunkLanes(l); ++lane) {
      if (l.kind == QuantKind::kTernGrad) {
        tern[lane] = TernSegmentLane(l, source, segment, lane, static_cast<double>(source(0)));
      } else {
        ef[lane] = EfSignSegmentLane(l, source, segment, lane);
      }
    }
    a[segment] = SegmentPartial(l, tern, ef);
  }
  const AddChunkPartials add{l.kind == QuantKind::kTernGrad};  // chunk_tree_kernel
  for (uint64_t m = NumSegments(l); m > 1; m = (m + 1) / 2) {
    for (uint64_t i = 0; i < (m + 1) / 2; ++i) PairwiseStep(a.data(), b.data(), m, i, add);
    std::swap(a, b);
  }
  return a[0];
}

// EncodeQuant() of quantize.cu, phase by phase.
inline void EmulateEncodeQuant(const QuantLayout& l, const RandomKey& key, const float* input,
                               float* residual, float residual_scale, float* state,
                               unsigned char* body) {
  const GlobalSource source{input, residual};
  if ((l.kind == QuantKind::kQsgd || l.kind == QuantKind::kMaxMin) && !UsesFusedStats(l)) {
    std::vector<LaneStat> lanes(8 * l.buckets);  // bucket_lanes_kernel, bucket_stats_kernel
    for (uint64_t p = 0; p < 8 * l.buckets; ++p) {
      const uint64_t b = p / 8;
      const BucketView<GlobalSource> view{&source, b * l.bucket_size};
      lanes[p] = BucketLaneStat(l, view, BucketLength(l, b), static_cast<int>(p % 8));
    }
    for (uint64_t b = 0; b < l.buckets; ++b) StoreBucketStats(l, lanes.data() + 8 * b, b, body);
  }
  if (l.kind == QuantKind::kTernGrad || l.kind == QuantKind::kEfSign) {
    StoreChunkScale(l, EmulateChunkStats(l, source), body);
  }
  if (UsesLanePath(l)) {
    EmulateEncodeLanes(l, source, residual, residual_scale, state, body);
  } else {
    EmulateEncodeTiles(l, key, source, residual, residual_scale, state, body);
  }
}

// decode_tile_kernel of quantize.cu, block by block.
inline void EmulateDecodeTiles(const QuantLayout& l, const unsigned char* body, float* out,
                               bool accumulate) {
  std::vector<float> tile(kTilePadded);
  std::vector<unsigned char> staged(StagedCodeBytes(l));
  for (uint64_t first = 0; first < l.n; first += kFusedTile) {
    const uint32_t length = static_cast<uint32_t>(std::min<uint64_t>(kFusedTile, l.n - first));
    if (StagesCodes(l)) {
      const uint64_t tile_index = first / kFusedTile;
      const unsigned char* stream = body + l.stats_bytes + TileCodeOffset(l, tile_index);
      for (uint32_t p = 0; p < TileCodeBytes(l, tile_index); ++p) {
        staged[StagedByte(l, p)] = stream[p];
      }
    }
    if (accumulate) {
      for (uint32_t j = 0; j < length; ++j) tile[Padded(j)] = out[first + j];
    }
    const unsigned char* codes = StagesCodes(l) ? staged.data() : body + l.stats_bytes;
    for (uint64_t g = first / kGroup; g < l.groups() && g < (first + kFusedTile) / kGroup; ++g) {
      DecodeGroup(l, g, body, GroupCodes(l, g, codes), TileValues{tile.data(), first},
                  accumulate);
    }
    for (uint32_t j = 0; j < length; ++j) out[first + j] = tile[Padded(j)];
  }
}

// DecodeQuant() of quantize.cu: the lane path or the tiles.
inline void EmulateDecodeQuant(const QuantLayout& l, const unsigned char* body, float* out,
                               bool accumulate) {
  if (UsesLanePath(l)) {
    EmulateDecodeLanes(l, body, out, accumulate);
  } else {
    EmulateDecodeTiles(l, body, out, accumulate);
  }
}

inline unsigned long long EmulateCheckQuant(const QuantLayout& l, const unsigned char* body) {
  unsigned long long verdict = kValid;
  for (uint64_t g = 0; g < l.groups(); ++g) verdict = std::min(verdict, CheckGroup(l, g, body));
  for (uint64_t b = 0; b < NumStats(l); ++b) verdict = std::min(verdict, CheckStat(l, body, b));
  return std::min(verdict, CheckPadding(l, body));
}

}  // namespace tamp::compress::cuda_internal

#endif  // TAMP_COMPRESS_CUDA_INTERNAL_QUANTIZE_EMULATION_H_

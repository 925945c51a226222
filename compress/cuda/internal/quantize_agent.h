// Per-thread work of the GPU quantizing codecs (none, fp16, bf16, natural, signsgd, signum,
// efsign, qsgd, terngrad, maxmin), written once for host and device. Internal to compress/cuda/.
//
// The kernels of compress/cuda/quantize.cu are thin loops over these "agents", and
// compress/cuda/emulation_test.cc runs the very same agents on the host, one simulated
// thread after another, against the CPU codecs: so everything but the CUDA plumbing
// (launch shapes, shared memory, barriers) is checked byte for byte on any machine.
//
// Body layout (the CPU codecs'): [stats][codes]. stats: qsgd 4 bytes (norm) per bucket,
// maxmin 8 (min, max) per bucket, terngrad and efsign 4 (one scale), others none. codes: n
// codes of `bits` bits, PackCodes order (none: 32-bit codes, the values' wire bits). Every
// stats size is a multiple of 4, so the code stream is 4-byte aligned whenever the body is.
//
// Work split: a group is 32 consecutive values [32g, 32g + 32) ∩ [0, n); its codes fill
// exactly `bits` 32-bit words (4 * bits bytes at 4 * bits * g into the code stream), so a
// thread encodes or decodes a group with word-sized stores and no cooperation, and a group
// covers 8 whole Philox blocks (4 of the 16-bit stream). The values (input, residual,
// decoded output) move between device memory and a block's tile of kFusedTile values in
// shared memory with coalesced loads and stores (consecutive threads, consecutive values);
// the groups read and write the tile (TileValues), never device memory. A group's codes go
// to the body directly, or for codes of 16 bits and more through a staging area beside the
// tile (internal/code_staging.h). signum takes the lane path instead (internal/lane_agent.h).
#ifndef TAMP_COMPRESS_CUDA_INTERNAL_QUANTIZE_AGENT_H_
#define TAMP_COMPRESS_CUDA_INTERNAL_QUANTIZE_AGENT_H_

#include <cstdint>

#include "base/philox.h"
#include "compress/cuda/internal/codec_math.h"

namespace tamp::compress::cuda_internal {

inline constexpr uint32_t kGroup = 32;  // Values per thread.

// Tuning constants shared with the kernels (quantize.cu): the fused stats path stages
// kFusedTile values per block (256 threads x kGroup) and takes power-of-two buckets of at
// least kFusedMinBucket values (at most 64 buckets per tile).
inline constexpr uint32_t kFusedTile = 8192;
inline constexpr uint32_t kFusedMinBucket = 128;
inline constexpr uint32_t kTileGroups = kFusedTile / kGroup;  // A tile block's threads.
// Not a tuning constant: the segment of terngrad's and efsign's statistics is part of their
// wire format (compress/internal/segments.h kStatSegment).
inline constexpr uint32_t kStatSegment = 8192;

enum class QuantKind : int {
  kNone,
  kFp16,
  kBf16,
  kNatural,
  kSignSgd,
  kSignum,  // signsgd's body of the momentum m, kept in device memory (EncodeGroup's `state`).
  kEfSign,
  kQsgd,
  kTernGrad,
  kMaxMin,
};

// QuantLayout
//
// Everything a kernel needs to know about one codec instance; plain data.
struct QuantLayout {
  QuantKind kind = QuantKind::kFp16;
  uint64_t n = 0;
  int bits = 16;               // Code width.
  uint32_t bucket_size = 0;    // qsgd, maxmin; 0 otherwise.
  uint64_t buckets = 0;        // qsgd, maxmin: ceil(n / bucket_size).
  uint32_t levels = 0;         // qsgd s.
  bool stochastic = false;     // maxmin.
  float decay = 0.0f;          // signum: m = decay * m + gain * c (signum.cc's b and c).
  float gain = 0.0f;
  uint64_t stats_bytes = 0;    // Bytes before the code stream.
  uint64_t code_bytes = 0;     // PackedBytes(n, bits).

  TAMP_HD uint64_t groups() const { return (n + kGroup - 1) / kGroup; }
  TAMP_HD uint64_t body_bytes() const { return stats_bytes + code_bytes; }
};

// Makes the layout of a codec; the parameters are those of the CPU codec (validated there).
inline QuantLayout MakeQuantLayout(QuantKind kind, uint64_t n, uint32_t levels = 0,
                                   uint32_t bucket_size = 0, int bits = 0,
                                   bool stochastic = false) {
  QuantLayout l;
  l.kind = kind;
  l.n = n;
  switch (kind) {
    case QuantKind::kNone:
      l.bits = 32;
      break;
    case QuantKind::kFp16:
    case QuantKind::kBf16:
      l.bits = 16;
      break;
    case QuantKind::kNatural:
      l.bits = kNaturalBits;
      break;
    case QuantKind::kSignSgd:
    case QuantKind::kSignum:
      l.bits = 1;
      break;
    case QuantKind::kEfSign:
      l.bits = 1;
      l.stats_bytes = 4;
      break;
    case QuantKind::kQsgd: {
      int width = 0;
      while ((levels >> width) != 0) ++width;  // bit_width(levels)
      l.bits = width + 1;
      l.levels = levels;
      l.bucket_size = bucket_size;
      l.buckets = (n + bucket_size - 1) / bucket_size;
      l.stats_bytes = 4 * l.buckets;
      break;
    }
    case QuantKind::kTernGrad:
      l.bits = 2;
      l.stats_bytes = 4;
      break;
    case QuantKind::kMaxMin:
      l.bits = bits;
      l.bucket_size = bucket_size;
      l.buckets = (n + bucket_size - 1) / bucket_size;
      l.stochastic = stochastic;
      l.stats_bytes = 8 * l.buckets;
      break;
  }
  l.code_bytes = PackedBytes(n, l.bits);
  return l;
}

// Whether a codec draws Philox words.
TAMP_HD bool UsesRandom(const QuantLayout& l) {
  return l.kind == QuantKind::kNatural || l.kind == QuantKind::kQsgd ||
         l.kind == QuantKind::kTernGrad || (l.kind == QuantKind::kMaxMin && l.stochastic);
}

// Whether its randomness is the 16-bit stream (PhiloxStream::Bits16(), 8 values per Philox
// block) rather than a word per value (Bits()).
TAMP_HD bool UsesRandom16(const QuantLayout& l) {
  return l.kind == QuantKind::kNatural || l.kind == QuantKind::kQsgd ||
         l.kind == QuantKind::kTernGrad;
}

// A tile of kFusedTile values of the chunk, from element `first`, in shared memory (or a host
// array in the emulation): element i at Padded(i - first), one pad float per 32 so that a warp
// reading 32 different groups (stride 33) is free of bank conflicts. Serves as Source (value
// of element i) and as the sink of residuals and decoded values (At()).
inline constexpr uint32_t kTilePadded = kFusedTile + kFusedTile / 32;
TAMP_HD uint32_t Padded(uint64_t j) { return static_cast<uint32_t>(j + (j >> 5)); }

struct TileValues {
  float* tile;
  uint64_t first;
  TAMP_HD float& At(uint64_t i) const { return tile[Padded(i - first)]; }
  TAMP_HD float operator()(uint64_t i) const { return At(i); }
};

// Values of a group come from `Source`: an object with `float operator()(uint64_t i)` giving
// the compensated value c_i (input, or input + residual) of chunk element i.
struct GlobalSource {
  const float* input;
  const float* residual;  // Null: no error feedback.
  TAMP_HD float operator()(uint64_t i) const {
    return residual == nullptr ? input[i] : Compensate(input[i], residual[i]);
  }
};

// Per-bucket statistics as stored in the body (read back by the quantize pass).
TAMP_HD float LoadStat(const unsigned char* body, uint64_t index) {
  return reinterpret_cast<const float*>(body)[index];
}
TAMP_HD void StoreStat(unsigned char* body, uint64_t index, float value) {
  reinterpret_cast<float*>(body)[index] = value;
}

// ---------------------------------------------------------------------------------------
// Encode: one group
// ---------------------------------------------------------------------------------------

// The code of value c (element i) and, through *decoded, what the receiver will decode it to.
// `stats` is the body (stats first); `random` the element's Philox word, or its 16-bit value
// where UsesRandom16(); `state` signum's momentum (n values; null for the others), stepped.
TAMP_HD uint32_t EncodeValue(const QuantLayout& l, const unsigned char* stats, uint64_t i,
                             float c, uint32_t random, float* state, float* decoded) {
  switch (l.kind) {
    case QuantKind::kNone: {  // compress/none.cc: the wire bits (NaN canonical).
      const uint32_t bits = WireFloatBits(c);
      *decoded = BitsFloat(bits);
      return bits;
    }
    case QuantKind::kFp16: {
      const uint16_t h = FloatToFp16(c);
      *decoded = Fp16ToFloat(h);
      return h;
    }
    case QuantKind::kBf16: {
      const uint16_t h = FloatToBf16(c);
      *decoded = Bf16ToFloat(h);
      return h;
    }
    case QuantKind::kNatural: {
      const uint32_t code = NaturalCode(c, random);
      *decoded = NaturalValue(code);
      return code;
    }
    case QuantKind::kSignSgd: {
      const bool negative = c < 0.0f;
      *decoded = negative ? -1.0f : 1.0f;  // UnpackSigns(plane, 1.0f): 1 * (+-1)
      return negative ? 1u : 0u;
    }
    case QuantKind::kSignum: {  // signum.cc Step(), then signsgd's sign (NaN counts as +).
      const float m = AddRn(MulRn(l.decay, state[i]), MulRn(l.gain, c));
      state[i] = m;
      const bool negative = m < 0.0f;
      *decoded = negative ? -1.0f : 1.0f;
      return negative ? 1u : 0u;
    }
    case QuantKind::kEfSign: {
      const bool negative = c < 0.0f;
      *decoded = MulRn(LoadStat(stats, 0), negative ? -1.0f : 1.0f);
      return negative ? 1u : 0u;
    }
    case QuantKind::kQsgd: {
      const uint64_t b = i / l.bucket_size;
      const float norm = LoadStat(stats, b);
      const uint32_t sign_bit = 1u << (l.bits - 1);
      const float levels = static_cast<float>(l.levels);
      const uint32_t code =
          norm > 0 ? QsgdCode(c, random, QsgdInverse(norm, levels), levels, sign_bit) : 0u;
      *decoded = QsgdValue(code, DivRn(norm, static_cast<float>(l.levels)), sign_bit - 1,
                           l.bits - 1);
      return code;
    }
    case QuantKind::kTernGrad: {
      const float scale = LoadStat(stats, 0);
      const uint32_t code = scale > 0 ? TernCode(c, random, scale) : 0u;
      *decoded = TernValue(code, scale);
      return code;
    }
    case QuantKind::kMaxMin: {
      const uint64_t b = i / l.bucket_size;
      const float min = LoadStat(stats, 2 * b), max = LoadStat(stats, 2 * b + 1);
      const float step = MaxMinStep(min, max, l.bits);
      const uint32_t code =
          MaxMinZeroCodesOnly(min, max) ? 0u : MaxMinCode(c, random, min, step, l.bits, l.stochastic);
      *decoded = MaxMinValue(code, min, step);
      return code;
    }
  }
  return 0;
}

// Encodes group g: its codes (4 * bits bytes, fewer for the chunk's last group) to `codes`
// (its place in the staging area), and (with_residual) the new residual
// residual_scale * (c - decoded) over c in the tile (tile.At(i)). The group's values are in
// `tile`; the stats of its buckets are already in `body`; `state` as for EncodeValue().
TAMP_HD void EncodeGroup(const QuantLayout& l, const RandomKey& key, uint64_t g,
                         const TileValues& tile, bool with_residual, float residual_scale,
                         float* state, const unsigned char* body, unsigned char* codes) {
  const uint64_t first = g * kGroup;
  const uint32_t count = l.n - first < kGroup ? static_cast<uint32_t>(l.n - first) : kGroup;
  BitSink sink(codes);
  const bool random = UsesRandom(l);
  const bool random16 = UsesRandom16(l);
  const uint32_t per_block = random16 ? 8 : 4;  // Values per Philox block.
  const PhiloxStream stream(key);
  for (uint32_t q = 0; q * per_block < count; ++q) {
    r123::Philox4x32::ctr_type words = {{0, 0, 0, 0}};
    if (random) words = stream.Block(static_cast<uint32_t>(first / per_block + q));
    for (uint32_t e = 0; e < per_block && per_block * q + e < count; ++e) {
      const uint64_t i = first + per_block * q + e;
      const float c = tile(i);
      // Bits16(i): half e & 1 of word e >> 1; Bits(i): word e.
      const uint32_t r = random16 ? (words.v[e >> 1] >> (16 * (e & 1))) & 0xFFFFu : words.v[e];
      float decoded;
      sink.Put(EncodeValue(l, body, i, c, r, state, &decoded), l.bits);
      if (with_residual) tile.At(i) = NextResidual(residual_scale, c, decoded);
    }
  }
  sink.Finish();
}

// ---------------------------------------------------------------------------------------
// Decode and validate: one group
// ---------------------------------------------------------------------------------------

TAMP_HD float DecodeValue(const QuantLayout& l, const unsigned char* body, uint64_t i,
                          uint32_t code) {
  switch (l.kind) {
    case QuantKind::kNone:
      return BitsFloat(code);
    case QuantKind::kFp16:
      return Fp16ToFloat(static_cast<uint16_t>(code));
    case QuantKind::kBf16:
      return Bf16ToFloat(static_cast<uint16_t>(code));
    case QuantKind::kNatural:
      return NaturalValue(code);
    case QuantKind::kSignSgd:
    case QuantKind::kSignum:
      return code ? -1.0f : 1.0f;
    case QuantKind::kEfSign:
      return MulRn(LoadStat(body, 0), code ? -1.0f : 1.0f);
    case QuantKind::kQsgd: {
      const uint32_t sign_bit = 1u << (l.bits - 1);
      const float scale =
          DivRn(LoadStat(body, i / l.bucket_size), static_cast<float>(l.levels));
      return QsgdValue(code, scale, sign_bit - 1, l.bits - 1);
    }
    case QuantKind::kTernGrad:
      return TernValue(code, LoadStat(body, 0));
    case QuantKind::kMaxMin: {
      const uint64_t b = i / l.bucket_size;
      const float min = LoadStat(body, 2 * b), max = LoadStat(body, 2 * b + 1);
      return MaxMinValue(code, min, MaxMinStep(min, max, l.bits));
    }
  }
  return 0;
}

// tile.At(i) = (or +=) the decoded values of group g, whose codes are at `codes` (its place
// in the staging area); with `accumulate` the tile holds the accumulator's values first.
// The stats are read from `body`.
TAMP_HD void DecodeGroup(const QuantLayout& l, uint64_t g, const unsigned char* body,
                         const unsigned char* codes, const TileValues& out, bool accumulate) {
  const uint64_t first = g * kGroup;
  const uint32_t count = l.n - first < kGroup ? static_cast<uint32_t>(l.n - first) : kGroup;
  const uint64_t offset = 4 * static_cast<uint64_t>(l.bits) * g;
  BitSource source(codes, l.code_bytes - offset);
  for (uint32_t j = 0; j < count; ++j) {
    const uint64_t i = first + j;
    const float v = DecodeValue(l, body, i, source.Get(l.bits));
    out.At(i) = accumulate ? AddRn(out.At(i), v) : v;
  }
}

// Whether every stat is allowed: qsgd norms NaN or finite >= +0; terngrad scale likewise;
// efsign scale with the sign bit clear; maxmin pairs (NaN, NaN) or finite, min <= max,
// max - min finite. Returns kValid or the verdict of bucket b's problem.
TAMP_HD unsigned long long CheckStat(const QuantLayout& l, const unsigned char* body, uint64_t b) {
  switch (l.kind) {
    case QuantKind::kQsgd:
    case QuantKind::kTernGrad: {
      const float v = LoadStat(body, b);
      const bool ok = IsNaN(v) || ((FloatBits(v) >> 31) == 0 && IsFiniteF(v));
      return ok ? kValid : Verdict(l.kind == QuantKind::kQsgd ? b * l.bucket_size : 0, kReasonBadStat);
    }
    case QuantKind::kEfSign:
      return (FloatBits(LoadStat(body, 0)) >> 31) == 0 ? kValid : Verdict(0, kReasonBadStat);
    case QuantKind::kMaxMin: {
      const float min = LoadStat(body, 2 * b), max = LoadStat(body, 2 * b + 1);
      const bool ok = (IsNaN(min) && IsNaN(max)) ||
                      (IsFiniteF(min) && IsFiniteF(max) && min <= max && IsFiniteF(SubRn(max, min)));
      return ok ? kValid : Verdict(b * l.bucket_size, kReasonBadStat);
    }
    default:
      return kValid;
  }
}

// Stats to check: buckets for qsgd and maxmin, one for terngrad and efsign, else none.
TAMP_HD uint64_t NumStats(const QuantLayout& l) {
  if (l.kind == QuantKind::kQsgd || l.kind == QuantKind::kMaxMin) return l.buckets;
  return l.stats_bytes > 0 ? 1 : 0;
}

// kValid, or the verdict for the padding bits after the last code.
TAMP_HD unsigned long long CheckPadding(const QuantLayout& l, const unsigned char* body) {
  const int used = static_cast<int>((l.n % 8) * l.bits % 8);
  if (used == 0) return kValid;
  const unsigned last = body[l.stats_bytes + l.code_bytes - 1];
  return (last >> used) == 0 ? kValid : Verdict(l.n, kReasonPadding);
}

// The smallest verdict among the codes of group g (stats assumed valid; a bad stat is
// reported by CheckStat, and its bucket's codes are then judged by the rules below anyway).
TAMP_HD unsigned long long CheckGroup(const QuantLayout& l, uint64_t g, const unsigned char* body) {
  if (l.kind != QuantKind::kQsgd && l.kind != QuantKind::kTernGrad && l.kind != QuantKind::kMaxMin) {
    return kValid;  // Every code is valid.
  }
  const uint64_t first = g * kGroup;
  const uint32_t count = l.n - first < kGroup ? static_cast<uint32_t>(l.n - first) : kGroup;
  const uint64_t offset = 4 * static_cast<uint64_t>(l.bits) * g;
  BitSource source(body + l.stats_bytes + offset, l.code_bytes - offset);
  for (uint32_t j = 0; j < count; ++j) {
    const uint64_t i = first + j;
    const uint32_t code = source.Get(l.bits);
    switch (l.kind) {
      case QuantKind::kQsgd: {
        const float norm = LoadStat(body, i / l.bucket_size);
        const uint32_t sign_bit = 1u << (l.bits - 1);
        if (!(norm > 0)) {
          if (code != 0) return Verdict(i, kReasonNonzeroCode);
        } else if ((code & (sign_bit - 1)) > l.levels) {
          return Verdict(i, kReasonLevelTooLarge);
        } else if (code == sign_bit) {
          return Verdict(i, kReasonSignWithoutLevel);
        }
        break;
      }
      case QuantKind::kTernGrad: {
        if (code == 3) return Verdict(i, kReasonCodeThree);
        if (!(LoadStat(body, 0) > 0) && code != 0) return Verdict(i, kReasonNonzeroCode);
        break;
      }
      case QuantKind::kMaxMin: {
        const uint64_t b = i / l.bucket_size;
        if (MaxMinZeroCodesOnly(LoadStat(body, 2 * b), LoadStat(body, 2 * b + 1)) && code != 0) {
          return Verdict(i, kReasonNonzeroCode);
        }
        break;
      }
      default:
        break;
    }
  }
  return kValid;
}

// ---------------------------------------------------------------------------------------
// Statistics
// ---------------------------------------------------------------------------------------

// Values of one bucket through a Source: value(j) = source(begin + j).
template <typename Source>
struct BucketView {
  const Source* source;
  uint64_t begin;
  TAMP_HD float operator()(uint64_t j) const { return (*source)(begin + j); }
};

// Bucket b's length.
TAMP_HD uint32_t BucketLength(const QuantLayout& l, uint64_t b) {
  const uint64_t begin = b * l.bucket_size;
  return l.n - begin < l.bucket_size ? static_cast<uint32_t>(l.n - begin) : l.bucket_size;
}

// Lane statistics of one bucket, as stored between the stats passes: qsgd a double (sum of
// squares), maxmin a RangeLane. Union so that one scratch array serves both.
union LaneStat {
  double squares;
  RangeLane range;
};

template <typename View>
TAMP_HD LaneStat BucketLaneStat(const QuantLayout& l, const View& view, uint32_t length,
                                int lane) {
  LaneStat s;
  if (l.kind == QuantKind::kQsgd) {
    s.squares = QsgdLaneSquares(view, length, lane);
  } else {
    s.range = MaxMinLane(view, length, lane);
  }
  return s;
}

// Writes bucket b's stats into the body from its 8 lane stats.
TAMP_HD void StoreBucketStats(const QuantLayout& l, const LaneStat* lanes, uint64_t b,
                              unsigned char* body) {
  if (l.kind == QuantKind::kQsgd) {
    double s[8];
    for (int k = 0; k < 8; ++k) s[k] = lanes[k].squares;
    StoreStat(body, b, QsgdNormFromLanes(s));
  } else {
    RangeLane r[8];
    for (int k = 0; k < 8; ++k) r[k] = lanes[k].range;
    float min, max;
    MaxMinRangeFromLanes(r, &min, &max);
    StoreStat(body, 2 * b, min);
    StoreStat(body, 2 * b + 1, max);
  }
}

// Whole-chunk statistics (terngrad, efsign), compress/internal/segments.h's order: per
// segment of kStatSegment values, ChunkLanes() lanes (a thread each on the device), the
// segment's partial from its lanes, then the partials' pairwise tree (PairwiseStep()).
TAMP_HD uint64_t NumSegments(const QuantLayout& l) {
  return (l.n + kStatSegment - 1) / kStatSegment;
}
TAMP_HD int ChunkLanes(const QuantLayout& l) { return l.kind == QuantKind::kTernGrad ? 8 : 16; }

// A segment's partial or the tree's: terngrad's or efsign's.
union ChunkPartial {
  TernPartial tern;
  EfSignPartial ef;
};

// terngrad lane k of segment `segment`: its values k, k + 8, ... minus `shift` (the chunk's
// first value), in order.
template <typename Source>
TAMP_HD TernLane TernSegmentLane(const QuantLayout& l, const Source& source, uint64_t segment,
                                 int k, double shift) {
  TernLane lane = ZeroTernLane();
  const uint64_t first = segment * kStatSegment;
  const uint64_t end = l.n - first < kStatSegment ? l.n : first + kStatSegment;
  for (uint64_t i = first + k; i < end; i += 8) TernAccumulate(source(i), shift, &lane);
  return lane;
}

// efsign lane `lane` (0..15) of segment `segment`: over its 64-value blocks (the chunk's last
// one padded with +0), the values lane, lane + 16, lane + 32, lane + 48 of each.
template <typename Source>
TAMP_HD EfSignPartial EfSignSegmentLane(const QuantLayout& l, const Source& source,
                                        uint64_t segment, int lane) {
  EfSignPartial sums{0.0, 0.0};
  const uint64_t first = segment * kStatSegment;
  const uint64_t end = l.n - first < kStatSegment ? l.n : first + kStatSegment;
  for (uint64_t block = first; block < end; block += 64) {
    float q[4];
    for (int j = 0; j < 4; ++j) {
      const uint64_t i = block + lane + 16 * j;
      q[j] = i < l.n ? source(i) : 0.0f;
    }
    EfSignAddQuad(q, &sums);
  }
  return sums;
}

// A segment's partial from its ChunkLanes() lanes (terngrad: TernLane; efsign: the lane
// sums, added in lane order from 0).
TAMP_HD ChunkPartial SegmentPartial(const QuantLayout& l, const TernLane* tern,
                                    const EfSignPartial* ef) {
  ChunkPartial p;
  if (l.kind == QuantKind::kTernGrad) {
    p.tern = TernSegmentPartial(tern);
  } else {
    p.ef = EfSignPartial{0.0, 0.0};
    for (int k = 0; k < 16; ++k) p.ef = AddEfSignPartials(p.ef, ef[k]);
  }
  return p;
}

// The tree's addition.
struct AddChunkPartials {
  bool tern;
  TAMP_HD ChunkPartial operator()(const ChunkPartial& a, const ChunkPartial& b) const {
    ChunkPartial r;
    if (tern) {
      r.tern = AddTernPartials(a.tern, b.tern);
    } else {
      r.ef = AddEfSignPartials(a.ef, b.ef);
    }
    return r;
  }
};

// Stores the scale from the whole chunk's partial. efsign uses the double-only sum when the
// fast one is not finite (efsign.cc): NaN if any value is NaN, +inf if any is infinite, else
// finite.
TAMP_HD void StoreChunkScale(const QuantLayout& l, const ChunkPartial& total,
                             unsigned char* body) {
  if (l.kind == QuantKind::kTernGrad) {
    StoreStat(body, 0, TernScale(total.tern, l.n));
    return;
  }
  const double sum = IsFiniteD(total.ef.fast) ? total.ef.fast : total.ef.slow;
  StoreStat(body, 0, EfSignScale(sum, l.n));
}

// Whether qsgd/maxmin compute their bucket stats inside the quantize kernel: buckets that
// tile kFusedTile exactly, and few enough per tile for the lane scratch.
TAMP_HD bool UsesFusedStats(const QuantLayout& l) {
  if (l.kind != QuantKind::kQsgd && l.kind != QuantKind::kMaxMin) return false;
  const uint32_t d = l.bucket_size;
  return d >= kFusedMinBucket && d <= kFusedTile && (d & (d - 1)) == 0;
}

}  // namespace tamp::compress::cuda_internal

#endif  // TAMP_COMPRESS_CUDA_INTERNAL_QUANTIZE_AGENT_H_

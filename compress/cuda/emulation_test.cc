// Host emulation of the GPU codecs against the CPU codecs. Runs on any machine.
//
// The GPU kernels (quantize.cu, topk.cu) are thin maps of the per-thread agents in
// internal/quantize_agent.h and internal/topk_agent.h onto threads. This test runs the same
// agents on the host, simulated thread after simulated thread, in the order of the kernels'
// phases, and requires:
//   - payload bodies byte-identical to the CPU codec's (compress/*.cc), with and without
//     error feedback, for every codec, parameter path and chunk size in test_cases.h;
//   - residuals bitwise equal to ErrorFeedback RESIDUAL's (NaN matching any NaN);
//   - decoded values (= and +=) bitwise equal to the CPU decoder's;
//   - the body checks accepting and rejecting exactly what the CPU decoder does, on
//     thousands of corrupted payloads.
// What it cannot check is the CUDA plumbing itself (grids, shared memory, barriers, CUB);
// device_codec_test.cc does that on a GPU.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "compress/codec.h"
#include "compress/cuda/internal/quantize_agent.h"
#include "compress/cuda/internal/randomblock_agent.h"
#include "compress/cuda/internal/randomk_agent.h"
#include "compress/cuda/internal/test_cases.h"
#include "compress/cuda/internal/topk_agent.h"
#include "compress/efsign.h"
#include "compress/error_feedback.h"
#include "compress/randomk.h"
#include "compress/registry.h"
#include "compress/signum.h"
#include "compress/sparse.h"
#include "compress/terngrad.h"
#include "compress/topk.h"
#include "compress/wire_format.h"
#include "gtest/gtest.h"
#include "kernels/cuda_testing.h"

namespace tamp::compress::cuda_internal {
namespace {

using cuda_testing::Flavor;
using kernels::testing::CompareBitwise;
using kernels::testing::CompareBytes;

// A 4-byte aligned byte buffer (the kernels' bodies are cudaMalloc'd).
class Body {
 public:
  explicit Body(size_t bytes) : words_((bytes + 3) / 4 + 1, 0), bytes_(bytes) {}
  unsigned char* data() { return reinterpret_cast<unsigned char*>(words_.data()); }
  std::string str() { return std::string(reinterpret_cast<const char*>(data()), bytes_); }
  void Set(absl::string_view bytes) { std::memcpy(data(), bytes.data(), bytes.size()); }

 private:
  std::vector<uint32_t> words_;
  size_t bytes_;
};

// ---------------------------------------------------------------------------------------
// Emulated kernels
// ---------------------------------------------------------------------------------------

// encode_tile_kernel of quantize.cu, block by block: stage the tile, (fused) bucket stats
// from it, the groups' codes and residuals into it, the residuals back.
void EmulateEncodeTiles(const QuantLayout& l, const RandomKey& key, const GlobalSource& source,
                        float* residual, float residual_scale, float* state,
                        unsigned char* body) {
  std::vector<float> tile(kTilePadded);
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
      EncodeGroup(l, key, g, values, residual != nullptr, residual_scale, state, body);
    }
    if (residual == nullptr) continue;
    for (uint32_t j = 0; j < length; ++j) residual[first + j] = tile[Padded(j)];
  }
}

// chunk_segments_kernel and chunk_tree_kernel of quantize.cu: the whole chunk's partial.
ChunkPartial EmulateChunkStats(const QuantLayout& l, const GlobalSource& source) {
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
void EmulateEncodeQuant(const QuantLayout& l, const RandomKey& key, const float* input,
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
  EmulateEncodeTiles(l, key, source, residual, residual_scale, state, body);  // encode_tile
}

// decode_tile_kernel of quantize.cu, block by block.
void EmulateDecodeTiles(const QuantLayout& l, const unsigned char* body, float* out,
                        bool accumulate) {
  std::vector<float> tile(kTilePadded);
  for (uint64_t first = 0; first < l.n; first += kFusedTile) {
    const uint32_t length = static_cast<uint32_t>(std::min<uint64_t>(kFusedTile, l.n - first));
    if (accumulate) {
      for (uint32_t j = 0; j < length; ++j) tile[Padded(j)] = out[first + j];
    }
    for (uint64_t g = first / kGroup; g < l.groups() && g < (first + kFusedTile) / kGroup; ++g) {
      DecodeGroup(l, g, body, TileValues{tile.data(), first}, accumulate);
    }
    for (uint32_t j = 0; j < length; ++j) out[first + j] = tile[Padded(j)];
  }
}

unsigned long long EmulateCheckQuant(const QuantLayout& l, const unsigned char* body) {
  unsigned long long verdict = kValid;
  for (uint64_t g = 0; g < l.groups(); ++g) verdict = std::min(verdict, CheckGroup(l, g, body));
  for (uint64_t b = 0; b < NumStats(l); ++b) verdict = std::min(verdict, CheckStat(l, body, b));
  return std::min(verdict, CheckPadding(l, body));
}

// EncodeTopK() of topk.cu, pass by pass (the tile passes sequentially, same formulas).
void EmulateEncodeTopK(const TopKLayout& l, const float* input, float* residual,
                       float residual_scale, unsigned char* body) {
  const GlobalSource source{input, residual};
  std::vector<float> staged(l.n);
  for (uint64_t i = 0; i < l.n; ++i) {
    staged[i] = source(i);
    if (residual != nullptr) residual[i] = staged[i];
  }
  const float* values = residual != nullptr ? residual : input;
  SelectState s = InitialSelectState();
  for (int level = 0; level < kTopKLevels; ++level) {
    std::vector<uint32_t> histogram(kTopKBins, 0);
    for (uint64_t i = 0; i < l.n; ++i) {
      const uint32_t key = MagnitudeKey(values[i]);
      if (InLevel(s, key)) ++histogram[LevelBin(level, key)];
    }
    uint32_t bin;
    uint64_t bin_above;
    FindBin(histogram.data(), LevelMask(level) + 1, l.k - s.above, &bin, &bin_above);
    AdvanceSelect(&s, level, bin, bin_above, l.k);
  }
  constexpr uint64_t kTile = 4096;
  const uint64_t tiles = (l.n + kTile - 1) / kTile;
  std::vector<unsigned long long> counts(tiles, 0), offsets(tiles, 0);
  for (uint64_t i = 0; i < l.n; ++i) {
    const uint32_t key = MagnitudeKey(values[i]);
    counts[i / kTile] += key > s.prefix ? (1ull << 32) : (key == s.prefix ? 1ull : 0ull);
  }
  for (uint64_t t = 1; t < tiles; ++t) offsets[t] = offsets[t - 1] + counts[t - 1];
  std::vector<uint32_t> indices(l.k);
  for (uint64_t t = 0; t < tiles; ++t) {
    const uint64_t eq_before = offsets[t] & 0xffffffffull;
    uint64_t eq_rank = eq_before;
    uint64_t position = (offsets[t] >> 32) + std::min<uint64_t>(eq_before, s.ties);
    for (uint64_t i = t * kTile; i < std::min(l.n, (t + 1) * kTile); ++i) {
      const float c = values[i];
      const uint32_t key = MagnitudeKey(c);
      bool take = key > s.prefix;
      if (key == s.prefix) take = eq_rank++ < s.ties;
      float decoded = 0.0f;
      if (take) {
        indices[position] = static_cast<uint32_t>(i);
        StoreValue(l, body, position, c, &decoded);
        ++position;
      }
      if (residual != nullptr) residual[i] = NextResidual(residual_scale, c, decoded);
    }
  }
  for (uint64_t g = 0; g < l.index_groups(); ++g) PackIndexGroup(l, indices.data(), g, body);
}

unsigned long long EmulateCheckTopK(const TopKLayout& l, const unsigned char* body) {
  unsigned long long verdict = kValid;
  for (uint64_t g = 0; g < l.index_groups(); ++g) {
    verdict = std::min(verdict, CheckIndexGroup(l, g, body));
  }
  return verdict;
}

// EncodeRandomBlock() and DecodeRandomBlock() of randomblock.cu.
std::vector<uint64_t> EmulateBlockStarts(const RandomBlockLayout& l, const RandomKey& key) {
  std::vector<uint64_t> starts(l.blocks);
  for (uint64_t s = 0; s < l.blocks; ++s) starts[s] = BlockStart(l, key, s);
  return starts;
}

void EmulateEncodeRandomBlock(const RandomBlockLayout& l, const RandomKey& key,
                              const float* input, float* residual, float residual_scale,
                              unsigned char* body) {
  const std::vector<uint64_t> starts = EmulateBlockStarts(l, key);
  if (residual == nullptr) {  // encode_entries_kernel
    for (uint64_t j = 0; j < l.entries(); ++j) {
      float decoded;
      StoreSparseValue(l.fp16_values, body, j, input[ElementOf(l, starts.data(), j)], &decoded);
    }
    return;
  }
  const GlobalSource source{input, residual};  // encode_elements_kernel
  for (uint64_t i = 0; i < l.n; ++i) {
    residual[i] = EncodeBlockElement(l, starts.data(), i, source(i), residual_scale, body);
  }
}

void EmulateDecodeRandomBlock(const RandomBlockLayout& l, const RandomKey& key,
                              const unsigned char* body, float* out, bool accumulate) {
  const std::vector<uint64_t> starts = EmulateBlockStarts(l, key);
  if (accumulate) {  // decode_entries_kernel
    for (uint64_t j = 0; j < l.entries(); ++j) {
      const uint64_t i = ElementOf(l, starts.data(), j);
      out[i] = AddRn(out[i], LoadSparseValue(l.fp16_values, body, j));
    }
    return;
  }
  for (uint64_t i = 0; i < l.n; ++i) {  // decode_elements_kernel
    out[i] = DecodeBlockElement(l, starts.data(), body, i, 0.0f, false);
  }
}

// EncodeRandomK() and DecodeRandomK() of randomk.cu, with the host's positions.
std::vector<uint32_t> RandomKPositions(const RandomKLayout& l, const RandomKey& key) {
  const absl::Span<const size_t> drawn = RandomKCodec::Positions(key, l.n, l.k);
  return std::vector<uint32_t>(drawn.begin(), drawn.end());
}

void EmulateEncodeRandomK(const RandomKLayout& l, const RandomKey& key, const float* input,
                          float* residual, float residual_scale, unsigned char* body) {
  const std::vector<uint32_t> positions = RandomKPositions(l, key);
  std::vector<uint32_t> taken(l.bitmap_words(), 0);
  const GlobalSource source{input, residual};
  for (uint64_t j = 0; j < l.k; ++j) {  // encode_entries_kernel
    EncodeRandomKEntry(l, positions.data(), j, source, residual, residual_scale, taken.data(),
                       body);
  }
  if (residual == nullptr) return;
  for (uint64_t i = 0; i < l.n; ++i) {  // encode_rest_kernel
    EncodeRandomKRest(i, source, residual, residual_scale, taken.data());
  }
}

void EmulateDecodeRandomK(const RandomKLayout& l, const RandomKey& key,
                          const unsigned char* body, float* out, bool accumulate) {
  const std::vector<uint32_t> positions = RandomKPositions(l, key);
  if (!accumulate) std::fill(out, out + l.n, 0.0f);
  for (uint64_t j = 0; j < l.k; ++j) {
    DecodeRandomKEntry(l, positions.data(), j, body, out, accumulate);
  }
}

// ---------------------------------------------------------------------------------------
// One codec instance, emulated
// ---------------------------------------------------------------------------------------

struct Emulated {
  bool topk = false;
  bool randomblock = false;
  bool randomk = false;
  QuantLayout quant;
  TopKLayout top;
  RandomBlockLayout blocks;
  RandomKLayout random;
  mutable std::vector<float> state;  // signum's momentum, stepped by every Encode.

  size_t body_bytes() const {
    if (randomblock) return blocks.body_bytes();
    if (randomk) return random.body_bytes();
    return topk ? top.body_bytes() : quant.body_bytes();
  }
  void Encode(const RandomKey& key, const float* input, float* residual, float s,
              unsigned char* body) const {
    if (randomk) EmulateEncodeRandomK(random, key, input, residual, s, body);
    else if (randomblock) EmulateEncodeRandomBlock(blocks, key, input, residual, s, body);
    else if (topk) EmulateEncodeTopK(top, input, residual, s, body);
    else EmulateEncodeQuant(quant, key, input, residual, s, state.data(), body);
  }
  unsigned long long Check(const unsigned char* body) const {
    if (randomblock || randomk) return kValid;  // Every body of the right length.
    return topk ? EmulateCheckTopK(top, body) : EmulateCheckQuant(quant, body);
  }
  void Decode(const RandomKey& key, const unsigned char* body, float* out,
              bool accumulate) const {
    if (randomk) {
      EmulateDecodeRandomK(random, key, body, out, accumulate);
    } else if (randomblock) {
      EmulateDecodeRandomBlock(blocks, key, body, out, accumulate);
    } else if (topk) {
      if (!accumulate) std::fill(out, out + top.n, 0.0f);
      for (uint64_t g = 0; g < top.index_groups(); ++g) {
        ScatterIndexGroup(top, g, body, out, accumulate);
      }
    } else {
      EmulateDecodeTiles(quant, body, out, accumulate);
    }
  }
};

// As DeviceCodec::Create() maps a spec.
Emulated MakeEmulated(const config::Codec& spec, size_t n) {
  Emulated e;
  const std::string& name = spec.name();
  if (name == "none") e.quant = MakeQuantLayout(QuantKind::kNone, n);
  if (name == "fp16") e.quant = MakeQuantLayout(QuantKind::kFp16, n);
  if (name == "bf16") e.quant = MakeQuantLayout(QuantKind::kBf16, n);
  if (name == "natural") e.quant = MakeQuantLayout(QuantKind::kNatural, n);
  if (name == "signsgd") e.quant = MakeQuantLayout(QuantKind::kSignSgd, n);
  if (name == "signum") {  // As DeviceCodec::Create() and SignumCodec.
    const double beta = spec.has_momentum() ? spec.momentum() : SignumCodec::kDefaultMomentum;
    e.quant = MakeQuantLayout(QuantKind::kSignum, n);
    e.quant.decay = static_cast<float>(beta);
    e.quant.gain = static_cast<float>(1.0 - beta);
    e.state.assign(n, 0.0f);
  }
  if (name == "efsign") e.quant = MakeQuantLayout(QuantKind::kEfSign, n);
  if (name == "terngrad") e.quant = MakeQuantLayout(QuantKind::kTernGrad, n);
  if (name == "qsgd") {
    e.quant = MakeQuantLayout(QuantKind::kQsgd, n, spec.levels(),
                              spec.has_bucket_size() ? spec.bucket_size() : 512);
  }
  if (name == "maxmin") {
    e.quant = MakeQuantLayout(QuantKind::kMaxMin, n, 0,
                              spec.has_bucket_size() ? spec.bucket_size() : 512,
                              static_cast<int>(spec.bits()), spec.stochastic());
  }
  if (name == "randomk") {
    e.randomk = true;
    e.random = RandomKLayout{n, EntriesKept(spec, n), spec.fp16_values()};
  }
  if (name == "randomblock") {
    e.randomblock = true;
    e.blocks = MakeRandomBlockLayout(n, EntriesKept(spec, n),
                                     spec.has_num_blocks() ? spec.num_blocks() : 1,
                                     spec.fp16_values());
  }
  if (name == "topk" || name == "dgc") {
    e.topk = true;
    e.top = MakeTopKLayout(n, TopKCodec::EntriesKept(spec, n), spec.fp16_values());
  }
  return e;
}

// ---------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------

class EmulationTest : public ::testing::TestWithParam<cuda_testing::SpecCase> {};

TEST_P(EmulationTest, EncodeAndDecodeMatchCpuCodec) {
  const config::Codec& spec = GetParam().spec;
  for (const size_t n : cuda_testing::Sizes()) {
    for (const Flavor flavor : {Flavor::kGradient, Flavor::kSpecial, Flavor::kHuge}) {
      SCOPED_TRACE(::testing::Message() << "n " << n << " flavor " << static_cast<int>(flavor));
      auto cpu = CreateCodec(spec, n);
      ASSERT_TRUE(cpu.ok()) << cpu.status();
      const Emulated gpu = MakeEmulated(spec, n);
      ASSERT_EQ(kHeaderBytes + gpu.body_bytes(), (*cpu)->MaxPayloadBytes());
      const std::vector<float> x = cuda_testing::Values(n, 1000 + n, flavor);
      const RandomKey key = cuda_testing::Key(static_cast<uint32_t>(n));

      // Plain encode.
      std::string payload;
      ASSERT_TRUE((*cpu)->Encode(x, key, &payload).ok());
      Body body(gpu.body_bytes());
      gpu.Encode(key, x.data(), nullptr, 1.0f, body.data());
      ASSERT_TRUE(CompareBytes("body", body.str(), payload.substr(kHeaderBytes)));

      // Decode, = and +=.
      std::vector<float> cpu_out(n), gpu_out(n);
      ASSERT_TRUE((*cpu)->Decode(payload, key, absl::MakeSpan(cpu_out)).ok());
      gpu.Decode(key, body.data(), gpu_out.data(), false);
      EXPECT_TRUE(CompareBitwise("decoded", gpu_out, cpu_out));
      std::vector<float> cpu_acc = cuda_testing::Values(n, 7, Flavor::kGradient);
      std::vector<float> gpu_acc = cpu_acc;
      ASSERT_TRUE((*cpu)->DecodeAdd(payload, key, absl::MakeSpan(cpu_acc)).ok());
      gpu.Decode(key, body.data(), gpu_acc.data(), true);
      EXPECT_TRUE(CompareBitwise("accumulated", gpu_acc, cpu_acc));
      EXPECT_EQ(gpu.Check(body.data()), kValid);

      // Two steps of fused error feedback against ErrorFeedback RESIDUAL.
      for (const float scale : {1.0f, 0.5f}) {
        SCOPED_TRACE(::testing::Message() << "residual scale " << scale);
        config::ErrorFeedback ef_spec;
        ef_spec.set_kind(config::ErrorFeedback::RESIDUAL);
        ef_spec.set_scale(scale);
        auto memory = ErrorFeedback::Create(ef_spec, n);
        ASSERT_TRUE(memory.ok()) << memory.status();
        std::vector<float> residual(n, 0.0f);
        for (int step = 0; step < 2; ++step) {
          const std::vector<float> g =
              step == 0 ? x : cuda_testing::Values(n, 2000 + n, Flavor::kGradient);
          const RandomKey step_key{.seed = 42, .step = static_cast<uint64_t>(step),
                                   .chunk = 1, .worker = 0};
          ASSERT_TRUE((*memory)->Compress(**cpu, g, step_key, &payload).ok());
          gpu.Encode(step_key, g.data(), residual.data(), scale, body.data());
          ASSERT_TRUE(CompareBytes("EF body", body.str(), payload.substr(kHeaderBytes)))
              << "step " << step;
          ASSERT_TRUE(CompareBitwise("residual", residual, (*memory)->residual()))
              << "step " << step;
        }
      }
    }
  }
}

// The device's arithmetic returns its own NaN (0x7fffffff) where the CPU keeps the input's
// bits, so under fused error feedback the agents see other NaNs than the CPU codec does. The
// wire's NaNs are canonical (compress/wire_format.h), so the bodies must still match.
TEST_P(EmulationTest, DeviceNaNsGiveTheCpuBody) {
  const config::Codec& spec = GetParam().spec;
  for (const size_t n : {size_t{33}, size_t{1000}, size_t{4097}}) {
    SCOPED_TRACE(::testing::Message() << "n " << n);
    auto cpu = CreateCodec(spec, n);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    const Emulated gpu = MakeEmulated(spec, n);
    std::vector<float> x = cuda_testing::Values(n, 1000 + n, Flavor::kSpecial);
    for (size_t i = 5; i < n; i += 11) x[i] = cuda_testing::FromBits(0xffa5a5a5u ^ (i & 0xff));
    const RandomKey key = cuda_testing::Key(static_cast<uint32_t>(n));
    std::string payload;
    ASSERT_TRUE((*cpu)->Encode(x, key, &payload).ok());
    const std::vector<float> device_x = cuda_testing::WithDeviceNaNs(x);
    Body body(gpu.body_bytes());
    gpu.Encode(key, device_x.data(), nullptr, 1.0f, body.data());
    EXPECT_TRUE(CompareBytes("body", body.str(), payload.substr(kHeaderBytes)));
  }
}

// Corrupted bodies: the emulated check rejects exactly what the CPU decoder rejects.
TEST_P(EmulationTest, ChecksAgreeWithCpuDecoder) {
  const config::Codec& spec = GetParam().spec;
  std::mt19937 rng(5);
  int rejected = 0;
  for (const size_t n : {size_t{1}, size_t{33}, size_t{1000}, size_t{8199}}) {
    auto cpu = CreateCodec(spec, n);
    ASSERT_TRUE(cpu.ok());
    const Emulated gpu = MakeEmulated(spec, n);
    for (const Flavor flavor : {Flavor::kGradient, Flavor::kSpecial}) {
      const std::vector<float> x = cuda_testing::Values(n, 300 + n, flavor);
      const RandomKey key = cuda_testing::Key(1);
      std::string payload;
      ASSERT_TRUE((*cpu)->Encode(x, key, &payload).ok());
      const size_t body_bytes = payload.size() - kHeaderBytes;
      for (int trial = 0; trial < 200; ++trial) {
        std::string bad = payload;
        const int edits = 1 + trial % 3;
        for (int e = 0; e < edits; ++e) {
          const size_t at = kHeaderBytes + rng() % body_bytes;
          if (trial % 2 == 0) {
            bad[at] ^= static_cast<char>(1u << (rng() % 8));
          } else {
            bad[at] = static_cast<char>(rng());
          }
        }
        std::vector<float> out(n);
        const bool cpu_ok = (*cpu)->Decode(bad, key, absl::MakeSpan(out)).ok();
        Body body(body_bytes);
        body.Set(absl::string_view(bad).substr(kHeaderBytes));
        const bool gpu_ok = gpu.Check(body.data()) == kValid;
        ASSERT_EQ(gpu_ok, cpu_ok) << "n " << n << " trial " << trial;
        rejected += !cpu_ok;
      }
    }
  }
  RecordProperty("rejected", rejected);
}

// The chunk statistics of terngrad and efsign in compress/internal/segments.h's order (per
// segment, then pairwise), on inputs where another order gives other sums: 1e16 (ulp 2) in
// lane 0 of the first segment absorbs ones added to it one at a time, but not a segment's
// sum of them (terngrad_test and efsign_test hold the numbers).
TEST(EmulationChunkStatsTest, SegmentsAndTreeAsTheCpuCodecs) {
  std::vector<float> x(5 * 8192 + 100, 0.0f);
  x[8] = 1e16f;
  for (size_t i = 8192; i < x.size(); i += 8) x[i] = (i / 8192) % 2 ? 1.0f : -1.0f;
  const GlobalSource source{x.data(), nullptr};

  const ChunkPartial tern = EmulateChunkStats(MakeQuantLayout(QuantKind::kTernGrad, x.size()),
                                              source);
  const TernGradCodec::Moments cpu = TernGradCodec::ShiftedMoments(x);
  EXPECT_EQ(tern.tern.sum, cpu.sum);
  EXPECT_EQ(tern.tern.squares, cpu.squares);
  EXPECT_EQ(tern.tern.max_abs, cpu.max_abs);
  EXPECT_NE(cpu.sum, static_cast<double>(1e16f));  // The ones count.

  const ChunkPartial ef = EmulateChunkStats(MakeQuantLayout(QuantKind::kEfSign, x.size()), source);
  EXPECT_EQ(ef.ef.fast, EfSignCodec::MagnitudeSum(x));
  EXPECT_NE(ef.ef.fast, static_cast<double>(1e16f));
  x[16] = std::numeric_limits<float>::max();  // With x[0 + 16 * j] pairs overflowing fp32:
  x[48] = std::numeric_limits<float>::max();  // the double-only sums.
  const ChunkPartial slow = EmulateChunkStats(MakeQuantLayout(QuantKind::kEfSign, x.size()),
                                              source);
  EXPECT_FALSE(std::isfinite(slow.ef.fast));
  EXPECT_EQ(slow.ef.slow, EfSignCodec::MagnitudeSum(x));
}

INSTANTIATE_TEST_SUITE_P(
    AllCodecs, EmulationTest, ::testing::ValuesIn(cuda_testing::AllSpecs()),
    [](const ::testing::TestParamInfo<cuda_testing::SpecCase>& info) { return info.param.label; });

}  // namespace
}  // namespace tamp::compress::cuda_internal

// Host emulation of the GPU codecs against the CPU codecs. Runs on any machine.
//
// The GPU kernels (quantize.cu, topk.cu, randomblock.cu, randomk.cu) are thin maps of the
// per-thread agents in internal/*_agent.h onto threads. internal/emulation.h runs the same
// agents on the host, simulated thread after simulated thread, in the order of the kernels'
// phases, and this test requires:
//   - payload bodies byte-identical to the CPU codec's (compress/*.cc), with and without
//     error feedback, for every codec, parameter path and chunk size in test_cases.h;
//   - residuals bitwise equal to ErrorFeedback RESIDUAL's (NaN matching any NaN), and for
//     the sparse codecs u and v bitwise equal to ErrorFeedback DGC_MOMENTUM's, step after
//     step;
//   - decoded values (= and +=) bitwise equal to the CPU decoder's;
//   - the body checks accepting and rejecting exactly what the CPU decoder does, on
//     thousands of corrupted payloads;
//   - top-k's every path to its cutoff (level 0's gather, the candidates pass, the whole
//     chunk), floors and capacities forced to each side of each boundary, candidates in
//     shuffled orders.
// What it cannot check is the CUDA plumbing itself (grids, shared memory, barriers, CUB);
// device_codec_test.cc does that on a GPU.
#include <algorithm>
#include <cmath>
#include <functional>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "compress/codec.h"
#include "compress/cuda/internal/emulation.h"
#include "compress/cuda/internal/test_cases.h"
#include "compress/efsign.h"
#include "compress/error_feedback.h"
#include "compress/registry.h"
#include "compress/terngrad.h"
#include "compress/wire_format.h"
#include "gtest/gtest.h"
#include "kernels/cuda_testing.h"

namespace tamp::compress::cuda_internal {
namespace {

using cuda_testing::Flavor;
using kernels::testing::CompareBitwise;
using kernels::testing::CompareBytes;

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
      gpu.Encode(key, x.data(), {}, body.data());
      const size_t encoded = gpu.EncodedBytes(body.data());
      ASSERT_TRUE(CompareBytes("body", body.str(encoded), payload.substr(kHeaderBytes)));

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
      EXPECT_TRUE(gpu.Accepts(body.data(), encoded));

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
          gpu.Encode(step_key, g.data(), SparseFeedback{residual.data(), nullptr, scale},
                     body.data());
          ASSERT_TRUE(CompareBytes("EF body", body.str(gpu.EncodedBytes(body.data())),
                                   payload.substr(kHeaderBytes)))
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
    gpu.Encode(key, device_x.data(), {}, body.data());
    EXPECT_TRUE(CompareBytes("body", body.str(gpu.EncodedBytes(body.data())),
                             payload.substr(kHeaderBytes)));
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
        const bool gpu_ok = gpu.Accepts(body.data(), body_bytes);
        ASSERT_EQ(gpu_ok, cpu_ok) << "n " << n << " trial " << trial;
        rejected += !cpu_ok;
      }
    }
  }
  RecordProperty("rejected", rejected);
}

// DGC_MOMENTUM fused into the sparse encodes (topk.cu): over several steps, with NaNs and
// infinities entering u and v at one of them, the bodies, v and u equal ErrorFeedback
// DGC_MOMENTUM's around the CPU codec.
class EmulationDgcTest : public ::testing::TestWithParam<cuda_testing::SpecCase> {};

TEST_P(EmulationDgcTest, MomentumCorrectionAndMaskingAsTheCpu) {
  const config::Codec& spec = GetParam().spec;
  for (const size_t n : {size_t{1}, size_t{33}, size_t{4097}, size_t{8199}}) {
    for (const float momentum : {0.9f, 0.5f}) {
      SCOPED_TRACE(::testing::Message() << "n " << n << " momentum " << momentum);
      auto cpu = CreateCodec(spec, n);
      ASSERT_TRUE(cpu.ok()) << cpu.status();
      config::ErrorFeedback ef_spec;
      ef_spec.set_kind(config::ErrorFeedback::DGC_MOMENTUM);
      ef_spec.set_momentum(momentum);
      auto memory = ErrorFeedback::Create(ef_spec, n);
      ASSERT_TRUE(memory.ok()) << memory.status();
      const Emulated gpu = MakeEmulated(spec, n);
      std::vector<float> u(n, 0.0f), v(n, 0.0f);
      Body body(gpu.body_bytes());
      size_t masked = 0;  // Elements whose u went back to 0 at a step: the masking happened.
      for (int step = 0; step < 4; ++step) {
        SCOPED_TRACE(::testing::Message() << "step " << step);
        const std::vector<float> g = cuda_testing::Values(
            n, 3000 + 7 * step + n, step == 2 ? Flavor::kSpecial : Flavor::kGradient);
        const RandomKey key{.seed = 42, .step = static_cast<uint64_t>(step), .chunk = 1,
                            .worker = 0};
        std::string payload;
        ASSERT_TRUE((*memory)->Compress(**cpu, g, key, &payload).ok());
        gpu.Encode(key, g.data(), SparseFeedback{v.data(), u.data(), 1.0f, momentum},
                   body.data());
        ASSERT_TRUE(CompareBytes("body", body.str(gpu.EncodedBytes(body.data())),
                                 payload.substr(kHeaderBytes)));
        ASSERT_TRUE(CompareBitwise("v", v, (*memory)->residual()));
        ASSERT_TRUE(CompareBitwise("u", u, (*memory)->velocity()));
        for (size_t i = 0; i < n; ++i) masked += u[i] == 0.0f && g[i] != 0.0f;
      }
      if (n > 1) {
        EXPECT_GT(masked, 0u);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    SparseCodecs, EmulationDgcTest, ::testing::ValuesIn(cuda_testing::DgcMomentumSpecs()),
    [](const ::testing::TestParamInfo<cuda_testing::SpecCase>& info) { return info.param.label; });

// GPU top-k's ways to its cutoff (topk_agent.h TopKPath): level 0's gather above a floor,
// the candidates pass where that gather missed part of the cutoff's bin or overflowed, the
// whole chunk where the bin alone overflows; candidates in any order. Each gives the CPU's
// body, residual, u and v. Floors and capacities are forced around each boundary.
class EmulationTopKPathTest : public ::testing::TestWithParam<cuda_testing::TopKCase> {};

// What the gathers see of x at k: the start of the cutoff's level-0 bin, the keys at or
// above it, and the keys in it.
struct Bins {
  uint32_t floor = 0;
  uint64_t from_floor = 0;
  uint64_t in_bin = 0;
};
Bins BinsOf(const std::vector<float>& x, uint64_t k) {
  std::vector<uint32_t> keys;
  for (const float v : x) keys.push_back(MagnitudeKey(v));
  std::nth_element(keys.begin(), keys.begin() + (k - 1), keys.end(), std::greater<uint32_t>());
  Bins b;
  b.floor = BinFloor(keys[k - 1]);
  for (const uint32_t key : keys) {
    b.from_floor += key >= b.floor;
    b.in_bin += BinFloor(key) == b.floor;
  }
  return b;
}

TEST_P(EmulationTopKPathTest, EveryPathGivesTheCpuSelection) {
  const cuda_testing::TopKCase& c = GetParam();
  const size_t n = c.x.size();
  const config::Codec spec = c.Spec();
  auto cpu = CreateCodec(spec, n);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  Emulated gpu = MakeEmulated(spec, n);
  const Bins bins = BinsOf(c.x, c.k);
  std::vector<float> rotated = c.x;  // Step 1's gradient: other values, the same kinds.
  std::rotate(rotated.begin(), rotated.begin() + n / 3, rotated.end());

  const uint64_t capacity = gpu.candidates.capacity;
  // Where level 0's gather does not hold, the candidates pass gathers in_bin keys.
  const auto again = [&](uint64_t cap) {
    return CandidatesFit(bins.in_bin, cap) ? TopKPath::kCandidates : TopKPath::kWholeChunk;
  };
  const uint32_t above = bins.floor + (1u << 20);  // One bin too high.
  const struct {
    CandidateOptions options;
    TopKPath path;  // Of the plain encode and step 0 (where c is the input).
  } runs[] = {
      {{capacity, 0}, c.path},  // The sampled floor.
      {{capacity, 5}, c.path},
      {{n, 0, false, 0}, TopKPath::kLevelZeroGather},  // Everything gathered, just fits.
      {{n - 1, 0, false, 0}, again(n - 1)},
      {{bins.from_floor, 7, false, bins.floor}, TopKPath::kLevelZeroGather},  // Just fits.
      {{bins.from_floor - 1, 3, false, bins.floor}, again(bins.from_floor - 1)},
      {{bins.in_bin, 9, false, above}, TopKPath::kCandidates},  // Just fits.
      {{bins.in_bin - 1, 0, false, above}, TopKPath::kWholeChunk},
      {{0, 0}, TopKPath::kWholeChunk},
  };
  for (const auto& run : runs) {
    SCOPED_TRACE(::testing::Message()
                 << "capacity " << run.options.capacity << " shuffle " << run.options.shuffle_seed
                 << " floor " << (run.options.sampled_floor ? -1 : int64_t{run.options.floor}));
    gpu.candidates = run.options;
    std::string payload;
    ASSERT_TRUE((*cpu)->Encode(c.x, {}, &payload).ok());
    Body body(gpu.body_bytes());
    gpu.Encode({}, c.x.data(), {}, body.data());
    EXPECT_EQ(gpu.last_path, run.path);
    ASSERT_TRUE(CompareBytes("body", body.str(), payload.substr(kHeaderBytes)));

    for (const auto kind : {config::ErrorFeedback::RESIDUAL, config::ErrorFeedback::DGC_MOMENTUM}) {
      SCOPED_TRACE(config::ErrorFeedback::Kind_Name(kind));
      config::ErrorFeedback ef_spec;
      ef_spec.set_kind(kind);
      if (kind == config::ErrorFeedback::RESIDUAL) {
        ef_spec.set_scale(0.5f);
      } else {
        ef_spec.set_momentum(0.9f);
      }
      auto memory = ErrorFeedback::Create(ef_spec, n);
      ASSERT_TRUE(memory.ok()) << memory.status();
      std::vector<float> u(n, 0.0f), v(n, 0.0f);
      const SparseFeedback feedback = kind == config::ErrorFeedback::RESIDUAL
                                          ? SparseFeedback{v.data(), nullptr, 0.5f}
                                          : SparseFeedback{v.data(), u.data(), 1.0f, 0.9f};
      for (int step = 0; step < 2; ++step) {
        const std::vector<float>& g = step == 0 ? c.x : rotated;
        ASSERT_TRUE((*memory)->Compress(**cpu, g, {}, &payload).ok());
        gpu.Encode({}, g.data(), feedback, body.data());
        if (step == 0) {
          EXPECT_EQ(gpu.last_path, run.path);
        }
        ASSERT_TRUE(CompareBytes("EF body", body.str(), payload.substr(kHeaderBytes)))
            << "step " << step;
        ASSERT_TRUE(CompareBitwise("residual or v", v, (*memory)->residual())) << "step " << step;
        if (feedback.dgc()) {
          ASSERT_TRUE(CompareBitwise("u", u, (*memory)->velocity())) << "step " << step;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, EmulationTopKPathTest, ::testing::ValuesIn(cuda_testing::TopKCases()),
    [](const ::testing::TestParamInfo<cuda_testing::TopKCase>& info) { return info.param.label; });

// The sampled floor on gradient-like chunks (normal values, and normal values over a wide
// range of scales) at the usual ratios: level 0's gather holds, so c is read twice.
TEST(EmulationTopKSampleTest, GradientsTakeTheTwoReadPath) {
  const size_t n = size_t{1} << 20;
  std::vector<float> normal(n);
  std::mt19937 rng(3);
  std::normal_distribution<float> draw(0.0f, 1.0f);
  for (float& v : normal) v = draw(rng);
  std::vector<float> scaled = cuda_testing::Values(n, 4, Flavor::kGradient);
  for (const std::vector<float>* x : {&normal, &scaled}) {
    for (const double ratio : {0.001, 0.01, 0.1, 0.3}) {
      SCOPED_TRACE(::testing::Message() << (x == &normal ? "normal" : "scaled") << " ratio "
                                        << ratio);
      config::Codec spec = cuda_testing::NamedSpec("topk");
      spec.set_ratio(ratio);
      auto cpu = CreateCodec(spec, n);
      ASSERT_TRUE(cpu.ok()) << cpu.status();
      const Emulated gpu = MakeEmulated(spec, n);
      std::string payload;
      ASSERT_TRUE((*cpu)->Encode(*x, {}, &payload).ok());
      Body body(gpu.body_bytes());
      gpu.Encode({}, x->data(), {}, body.data());
      EXPECT_EQ(gpu.last_path, TopKPath::kLevelZeroGather);
      EXPECT_TRUE(CompareBytes("body", body.str(), payload.substr(kHeaderBytes)));
    }
  }
}

// The tile kernels' staging of codes (internal/code_staging.h StagedByte(), StagedWordWalk): for
// every code width, each byte of a full tile's code stretch has its own place inside the
// staging area, a group's bytes stay together at its thread's region, the walk of a thread's
// words (kFusedTile / kGroup threads apart) finds the same places, and the 32 threads of a
// warp storing their w-th words hit 32 different banks. The payloads through the staging are
// EmulationTest's.
TEST(EmulationStagingTest, EveryCodeByteHasItsOwnPlace) {
  for (int bits = 1; bits <= 32; ++bits) {
    SCOPED_TRACE(::testing::Message() << "bits " << bits);
    QuantLayout l = MakeQuantLayout(QuantKind::kMaxMin, 3 * kFusedTile, 0, 512, 8);
    l.bits = bits;
    l.code_bytes = PackedBytes(l.n, bits);
    ASSERT_EQ(TileCodeBytes(l, 1), 4u * bits * kTileGroups);
    ASSERT_LE(StagedCodeBytes(l), kMaxStagedCodeBytes);
    std::vector<bool> taken(StagedCodeBytes(l), false);
    for (uint32_t p = 0; p < TileCodeBytes(l, 1); ++p) {
      const uint32_t place = StagedByte(l, p);
      ASSERT_LT(place, StagedCodeBytes(l)) << "byte " << p;
      ASSERT_FALSE(taken[place]) << "byte " << p;
      taken[place] = true;
      const uint32_t group = p / (4 * bits);
      ASSERT_EQ(place, 4 * CodeStride(l) * group + p % (4 * bits)) << "byte " << p;
    }
    for (uint32_t thread = 0; thread < kTileGroups; ++thread) {
      StagedWordWalk walk(l, thread, kTileGroups);
      for (uint32_t w = thread; w < TileCodeBytes(l, 1) / 4; w += kTileGroups, walk.Advance()) {
        ASSERT_EQ(4 * walk.Staged(), StagedByte(l, 4 * w)) << "thread " << thread << " word " << w;
      }
    }
    for (int w = 0; w < bits; ++w) {
      std::vector<bool> bank(32, false);
      for (uint32_t thread = 0; thread < 32; ++thread) {
        const uint32_t b = (thread * CodeStride(l) + w) % 32;
        EXPECT_FALSE(bank[b]) << "word " << w << " thread " << thread;
        bank[b] = true;
      }
    }
  }
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

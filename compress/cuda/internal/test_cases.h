// Inputs and codec specs shared by compress/cuda/emulation_test.cc (host, runs everywhere)
// and compress/cuda/device_codec_test.cc (GPU). Internal, testonly.
#ifndef TAMP_COMPRESS_CUDA_INTERNAL_TEST_CASES_H_
#define TAMP_COMPRESS_CUDA_INTERNAL_TEST_CASES_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/philox.h"
#include "compress/cuda/internal/topk_agent.h"
#include "proto/config.pb.h"

namespace tamp::compress::cuda_testing {

struct SpecCase {
  std::string label;
  config::Codec spec;
};

// gtest prints the label rather than the bytes.
inline void PrintTo(const SpecCase& c, std::ostream* os) { *os << c.label; }

inline config::Codec NamedSpec(const std::string& name) {
  config::Codec spec;
  spec.set_name(name);
  return spec;
}

// Every GPU codec, with parameters that take each code path: fused and two-pass bucket stats,
// buckets of 1 and of odd sizes, all maxmin widths, fp16 top-k values.
inline std::vector<SpecCase> AllSpecs() {
  std::vector<SpecCase> cases;
  for (const char* name : {"none", "fp16", "bf16", "natural", "signsgd", "efsign", "terngrad"}) {
    cases.push_back({name, NamedSpec(name)});
  }
  cases.push_back({"signum", NamedSpec("signum")});  // Default momentum 0.9.
  config::Codec signum = NamedSpec("signum");
  signum.set_momentum(0.3);
  cases.push_back({"signum_m30", signum});
  for (const auto& [levels, bucket] : std::vector<std::pair<uint32_t, uint32_t>>{
           {1, 512}, {127, 512}, {255, 128}, {7, 100}, {32767, 1}, {3, 8192}, {15, 20000}}) {
    config::Codec spec = NamedSpec("qsgd");
    spec.set_levels(levels);
    spec.set_bucket_size(bucket);
    cases.push_back({absl::StrCat("qsgd_s", levels, "_d", bucket), spec});
  }
  for (int bits = 1; bits <= 8; ++bits) {
    for (const bool stochastic : {false, true}) {
      config::Codec spec = NamedSpec("maxmin");
      spec.set_bits(bits);
      spec.set_bucket_size(bits % 2 == 0 ? 512 : 37);
      spec.set_stochastic(stochastic);
      cases.push_back({absl::StrCat("maxmin_b", bits, stochastic ? "_stoch" : "_near", "_d",
                                    spec.bucket_size()),
                       spec});
    }
  }
  for (const double ratio : {0.01, 0.3, 1.0}) {
    for (const bool fp16 : {false, true}) {
      config::Codec spec = NamedSpec("topk");
      spec.set_ratio(ratio);
      spec.set_fp16_values(fp16);
      cases.push_back({absl::StrCat("topk_r", static_cast<int>(ratio * 100), fp16 ? "_fp16" : ""),
                       spec});
    }
  }
  config::Codec one = NamedSpec("topk");
  one.set_count(1);
  cases.push_back({"topk_count1", one});
  for (const bool fp16 : {false, true}) {  // topk's selection under dgc's id.
    config::Codec spec = NamedSpec("dgc");
    spec.set_ratio(0.01);
    spec.set_fp16_values(fp16);
    cases.push_back({fp16 ? "dgc_r1_fp16" : "dgc_r1", spec});
  }
  // Thresholds that select some, none but the infinities and NaNs, and every non-zero; at
  // the ties' magnitude 0.125 (not sent: |x| must exceed it) and a double just below it
  // (rounded down to the float below 0.125, so the ties are sent).
  for (const auto& [label, threshold, fp16] : std::vector<std::tuple<std::string, double, bool>>{
           {"threshold_t5", 0.05, false},
           {"threshold_t5_fp16", 0.05, true},
           {"threshold_at_ties", 0.125, false},
           {"threshold_below_ties", 0.125 - 1e-12, false},
           {"threshold_none", 1e30, false},
           {"threshold_all", 1e-300, false},
           {"threshold_all_fp16", 1e-300, true}}) {
    config::Codec spec = NamedSpec("threshold");
    spec.set_threshold(threshold);
    spec.set_fp16_values(fp16);
    cases.push_back({label, spec});
  }
  for (const double ratio : {0.01, 0.3, 1.0}) {
    for (const bool fp16 : {false, true}) {
      config::Codec spec = NamedSpec("randomk");
      spec.set_ratio(ratio);
      spec.set_fp16_values(fp16);
      cases.push_back({absl::StrCat("randomk_r", static_cast<int>(ratio * 100),
                                    fp16 ? "_fp16" : ""),
                       spec});
    }
  }
  for (const double ratio : {0.01, 0.3, 1.0}) {
    for (const uint64_t blocks : {1, 4, 1000}) {
      config::Codec spec = NamedSpec("randomblock");
      spec.set_ratio(ratio);
      spec.set_num_blocks(blocks);
      spec.set_fp16_values(blocks == 4);
      cases.push_back({absl::StrCat("randomblock_r", static_cast<int>(ratio * 100), "_b", blocks,
                                    blocks == 4 ? "_fp16" : ""),
                       spec});
    }
  }
  return cases;
}

// The codecs whose encode fuses DGC_MOMENTUM (DeviceCodec::FusesDgcMomentum()), with
// parameters where some selected values decode to 0 (fp16 underflow, zeros when everything
// is sent) and so are not masked.
inline std::vector<SpecCase> DgcMomentumSpecs() {
  std::vector<SpecCase> cases;
  for (const auto& [label, ratio, fp16] : std::vector<std::tuple<std::string, double, bool>>{
           {"topk_r1", 0.01, false}, {"topk_r30_fp16", 0.3, true}, {"topk_r100_fp16", 1.0, true}}) {
    config::Codec spec = NamedSpec("topk");
    spec.set_ratio(ratio);
    spec.set_fp16_values(fp16);
    cases.push_back({label, spec});
  }
  config::Codec dgc = NamedSpec("dgc");
  dgc.set_ratio(0.01);
  cases.push_back({"dgc_r1", dgc});
  for (const bool fp16 : {false, true}) {
    config::Codec spec = NamedSpec("threshold");
    spec.set_threshold(0.05);
    spec.set_fp16_values(fp16);
    cases.push_back({fp16 ? "threshold_t5_fp16" : "threshold_t5", spec});
  }
  return cases;
}

// Chunk sizes around the group (32), Philox block (4), byte (8), tile and bucket boundaries.
inline std::vector<size_t> Sizes() { return {1, 3, 8, 31, 32, 33, 1000, 4097, 8192, 8199, 20011}; }

enum class Flavor {
  kGradient,  // Normal values with a wide range of magnitudes, some exact zeros and ties.
  kSpecial,   // The same plus NaNs (signs and payloads), +-inf, -0, subnormals and huge values.
  kHuge,      // Values near FLT_MAX (efsign's double-only fallback, maxmin range overflow).
};

inline float FromBits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

// What the device makes of x: the same values, every NaN as the device's arithmetic returns
// it (0x7fffffff: what c = g + r gives on the GPU for a NaN g, whatever g's bits).
inline std::vector<float> WithDeviceNaNs(std::vector<float> x) {
  for (float& v : x) {
    if (std::isnan(v)) v = FromBits(0x7fffffffu);
  }
  return x;
}

inline std::vector<float> Values(size_t n, uint32_t seed, Flavor flavor) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-12, 2);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    x[i] = normal(rng) * std::ldexp(1.0f, exponent(rng));
    if (i % 17 == 5) x[i] = 0.0f;
    if (i % 23 == 7) x[i] = 0.125f;  // Ties for top-k.
    if (flavor == Flavor::kHuge) {
      x[i] = (i % 2 ? 3.0e38f : -2.9e38f) * (0.9f + 0.1f * static_cast<float>(i % 11) / 11.0f);
    }
  }
  if (flavor == Flavor::kSpecial) {
    const float specials[] = {-0.0f, std::numeric_limits<float>::quiet_NaN(),
                              std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity(), 1e-40f, -3e-45f, 6.5e4f,
                              -65519.0f, 65520.0f, 3.4e38f, FromBits(0xffc01234u),
                              FromBits(0x7f800001u)};
    for (size_t j = 0; j < sizeof(specials) / sizeof(specials[0]) && j * 97 < n; ++j) {
      x[j * 97] = specials[j];
    }
  }
  return x;
}

// Inputs for GPU top-k's ways to its cutoff (topk_agent.h TopKPath): level 0's gather above
// the sampled floor, the candidates pass (the sample missed), or the whole chunk (the
// cutoff's level-0 bin holds more than CandidateCapacity() = min(n, 4k + 65536) keys).
// `path`: the one each takes.
struct TopKCase {
  std::string label;
  std::vector<float> x;
  uint64_t k = 1;
  bool fp16_values = false;
  cuda_internal::TopKPath path = cuda_internal::TopKPath::kLevelZeroGather;

  config::Codec Spec() const {
    config::Codec spec = NamedSpec("topk");
    spec.set_count(k);
    spec.set_fp16_values(fp16_values);
    return spec;
  }
};

inline void PrintTo(const TopKCase& c, std::ostream* os) { *os << c.label; }

inline std::vector<TopKCase> TopKCases() {
  using cuda_internal::TopKPath;
  std::vector<TopKCase> cases;
  {  // 4118 ties at 0.5 (every third entry), 13 entries above them, the rest below; the
     // 2487 ties taken run through the first two tiles of 4096.
    std::vector<float> x = Values(3 * 4096 + 77, 11, Flavor::kGradient);
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = i % 3 == 0 ? (i % 2 ? -0.5f : 0.5f) : 0.01f * std::tanh(x[i]);
      if (i % 1000 == 1) x[i] = -2.0f;
    }
    cases.push_back({"ties_across_tiles", x, 2500});
  }
  const std::vector<float> special = Values(20011, 12, Flavor::kSpecial);
  cases.push_back({"specials_k1", special, 1});  // A NaN or an infinity.
  cases.push_back({"specials_k6", special, 6});  // Among the NaNs and infinities.
  cases.push_back({"specials_r1", special, 200});
  cases.push_back({"specials_r1_fp16", special, 200, true});  // Saturated and rounded.
  cases.push_back({"gradient_k_n", Values(4099, 13, Flavor::kGradient), 4099});
  cases.push_back({"gradient_r30_fp16", Values(8199, 14, Flavor::kGradient), 2460, true});
  cases.push_back({"all_equal", std::vector<float>(2 * 4096 + 5, -0.75f), 100});
  const size_t large = (size_t{1} << 18) + 3;
  {  // The sample (every 64th entry from the 32nd, kSampleSize of them) sees only the 1.0s,
     // the 20000th largest is among the rest, in [1e-3, 2e-3): its bin holds about n/8.
    std::vector<float> x(size_t{1} << 18);
    for (size_t i = 0; i < x.size(); ++i) {
      const float spread = static_cast<float>((i * 7919) % 1000) / 1000.0f;
      x[i] = i % 64 == 32 ? 1.0f : 1e-3f * (1.0f + spread);
    }
    cases.push_back({"sample_misses", x, 20000, false, TopKPath::kCandidates});
  }
  // Past the capacity (69536 at k = 1000): every entry is in the cutoff's bin.
  cases.push_back({"all_equal_large", std::vector<float>(large, 0.25f), 1000, false,
                   TopKPath::kWholeChunk});
  std::vector<float> sparse(large, 0.0f);  // The cutoff is 0 (with -0s among the zeros).
  for (size_t i = 0; i < large; i += 5003) sparse[i] = i % 2 ? 1.0f + i : -3.0f;
  for (size_t i = 7; i < large; i += 3) sparse[i] = -0.0f;
  cases.push_back({"mostly_zero_large", sparse, 1000, false, TopKPath::kWholeChunk});
  return cases;
}

inline RandomKey Key(uint32_t chunk) { return RandomKey{.seed = 42, .step = 7, .chunk = chunk, .worker = 3}; }

}  // namespace tamp::compress::cuda_testing

#endif  // TAMP_COMPRESS_CUDA_INTERNAL_TEST_CASES_H_

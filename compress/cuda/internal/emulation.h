// Host emulation of the GPU codecs' kernels: the agents of compress/cuda/internal/*_agent.h
// run thread after thread, in the order of the kernels' phases (quantize.cu's in
// internal/quantize_emulation.h; topk.cu, randomblock.cu, randomk.cu and powersgd.cu's
// here). Emulated is one DeviceCodec, as
// DeviceCodec::Create() maps a spec, or powersgd's worker (EmulatedPowerSgdKernels).
// Internal, testonly: compress/cuda/emulation_test.cc and powersgd_emulation_test.cc compare
// it with the CPU codecs.
//
// Single-threaded; each call owns its scratch. What it cannot show is the CUDA plumbing
// (grids, shared memory, barriers, CUB): device_codec_test.cc runs the kernels on a GPU.
#ifndef TAMP_COMPRESS_CUDA_INTERNAL_EMULATION_H_
#define TAMP_COMPRESS_CUDA_INTERNAL_EMULATION_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/philox.h"
#include "compress/cuda/internal/powersgd_agent.h"
#include "compress/cuda/internal/quantize_agent.h"
#include "compress/cuda/internal/quantize_emulation.h"
#include "compress/cuda/internal/randomblock_agent.h"
#include "compress/cuda/internal/randomk_agent.h"
#include "compress/cuda/internal/topk_agent.h"
#include "compress/cuda/powersgd_rounds.h"
#include "compress/randomk.h"
#include "compress/signum.h"
#include "compress/sparse.h"
#include "compress/threshold.h"
#include "compress/topk.h"
#include "proto/config.pb.h"

namespace tamp::compress::cuda_internal {

// A 4-byte aligned byte buffer (the kernels' bodies are cudaMalloc'd).
class Body {
 public:
  explicit Body(size_t bytes) : words_((bytes + 3) / 4 + 1, 0), bytes_(bytes) {}
  unsigned char* data() { return reinterpret_cast<unsigned char*>(words_.data()); }
  std::string str() { return str(bytes_); }
  std::string str(size_t bytes) {
    return std::string(reinterpret_cast<const char*>(data()), bytes);
  }
  void Set(absl::string_view bytes) { std::memcpy(data(), bytes.data(), bytes.size()); }

 private:
  std::vector<uint32_t> words_;
  size_t bytes_;
};

// ---------------------------------------------------------------------------------------
// Emulated kernels (the quantizing codecs': internal/quantize_emulation.h)
// ---------------------------------------------------------------------------------------

// count_kernel of topk.cu: per tile, TileCount() summed over c (staged in the memory first
// when `stage` is on), and one extra tile of 0 whose scanned offset is the total.
inline std::vector<unsigned long long> EmulateCountTiles(uint64_t n, const float* values,
                                                         const SparseFeedback& stage,
                                                         const SelectState& s) {
  std::vector<unsigned long long> counts((n + kTopKTile - 1) / kTopKTile + 1, 0);
  for (uint64_t i = 0; i < n; ++i) {
    const float c = stage.on() ? StageCompensated(stage, values, i) : values[i];
    counts[TileOf(i)] += TileCount(s, MagnitudeKey(c));
  }
  return counts;
}

// ScanAndSelect() of topk.cu, once the cutoff is in `s` and the tile counts in `counts`:
// the scan (over the extra tile too: its offset is threshold's count), threshold's count
// into `count` (null for top-k), select, pack. `c_values`: c.
inline void EmulateScanAndSelect(const TopKLayout& host_layout, const float* c_values,
                                 const SparseFeedback& feedback, const SelectState& s,
                                 const std::vector<unsigned long long>& counts,
                                 unsigned char* count, unsigned char* entries) {
  const uint64_t n = host_layout.n;
  const uint64_t tiles = counts.size() - 1;
  std::vector<unsigned long long> offsets(tiles + 1, 0);
  for (uint64_t t = 1; t <= tiles; ++t) offsets[t] = offsets[t - 1] + counts[t - 1];
  if (count != nullptr) StoreCount(count, offsets[tiles] >> 32);  // store_count_kernel
  const TopKLayout l = CountedLayout(host_layout, count);
  std::vector<uint32_t> indices(l.k);
  for (uint64_t t = 0; t < tiles; ++t) {  // select_kernel
    const uint64_t eq_before = offsets[t] & 0xffffffffull;
    uint64_t eq_rank = eq_before;
    uint64_t position = (offsets[t] >> 32) + std::min<uint64_t>(eq_before, s.ties);
    for (uint64_t i = t * kTopKTile; i < std::min<uint64_t>(n, (t + 1) * kTopKTile); ++i) {
      const float c = c_values[i];
      const uint32_t key = MagnitudeKey(c);
      bool take = key > s.prefix;
      if (key == s.prefix) take = eq_rank++ < s.ties;
      float decoded = 0.0f;
      if (take) {
        indices[position] = static_cast<uint32_t>(i);
        StoreValue(l, entries, position, c, &decoded);
        ++position;
        if (feedback.dgc() && DgcMasks(decoded)) feedback.velocity[i] = 0.0f;
      }
      if (feedback.on()) feedback.residual[i] = NextMemory(feedback, c, decoded);
    }
  }
  for (uint64_t g = 0; g < l.index_groups(); ++g) PackIndexGroup(l, indices.data(), g, entries);
}

// The emulated top-k's candidate scratch: its capacity (the kernels': CandidateCapacity()),
// the floor of level 0's gather (the kernels': the sample's) and the order in which the
// blocks' atomics place the candidates (shuffle_seed 0: tile after tile; else the tiles in
// a shuffled order and the gathered candidates shuffled again, an order the device may
// well produce).
struct CandidateOptions {
  uint64_t capacity = 0;
  uint32_t shuffle_seed = 0;
  bool sampled_floor = true;  // false: `floor` instead.
  uint32_t floor = 0;
};

// prepare_kernel of topk.cu: the floor of level 0's gather, from kSampleSize keys of c.
inline uint32_t EmulateSampleFloor(const TopKLayout& l, const float* input,
                                   const SparseFeedback& feedback, uint64_t capacity) {
  const uint32_t rank = SampleRank(l, capacity);
  if (rank == 0) return 0;
  std::vector<uint32_t> keys(kSampleSize);
  for (uint32_t j = 0; j < kSampleSize; ++j) {
    keys[j] = MagnitudeKey(PeekCompensated(feedback, input, SamplePosition(l.n, j)));
  }
  std::sort(keys.begin(), keys.end(), std::greater<uint32_t>());
  return BinFloor(keys[rank - 1]);
}

// The blocks of a tile pass in the order their atomics ran: tile after tile, or shuffled.
inline std::vector<uint64_t> TileOrder(uint64_t tiles, std::mt19937* rng, bool shuffle) {
  std::vector<uint64_t> order(tiles);
  for (uint64_t t = 0; t < tiles; ++t) order[t] = t;
  if (shuffle) std::shuffle(order.begin(), order.end(), *rng);
  return order;
}

// Appends a gathered entry: stored within the capacity, counted always (the atomic).
inline void Gather(uint32_t key, uint64_t i, uint64_t capacity, std::vector<Candidate>* out,
                   GatherState* g) {
  if (g->count < capacity) out->push_back({key, static_cast<uint32_t>(i)});
  ++g->count;
}

// level_kernel of topk.cu: the histogram of `level` over the keys that agree with the
// state's prefix, from the candidates when they fit, else from the whole of c; then
// find_kernel.
inline void EmulateLevel(int level, uint64_t n, const float* values,
                         const std::vector<Candidate>& candidates, bool fit, SelectState* s,
                         uint64_t k) {
  std::vector<uint32_t> histogram(kTopKBins, 0);
  const uint64_t m = fit ? candidates.size() : n;
  for (uint64_t i = 0; i < m; ++i) {
    const uint32_t key = fit ? candidates[i].key : MagnitudeKey(values[i]);
    if (InLevel(*s, key)) ++histogram[LevelBin(level, key)];
  }
  uint32_t bin;
  uint64_t bin_above;
  FindBin(histogram.data(), LevelMask(level) + 1, k - s->above, &bin, &bin_above);
  AdvanceSelect(s, level, bin, bin_above, k);
}

// EncodeTopK() of topk.cu, pass by pass (the tile passes sequentially, same formulas).
inline TopKPath EmulateEncodeTopK(const TopKLayout& l, const float* input,
                                  const SparseFeedback& feedback, unsigned char* body,
                                  const CandidateOptions& options) {
  const uint64_t capacity = options.capacity;
  GatherState g{0, 0, 0};  // prepare_kernel
  g.floor = options.sampled_floor ? EmulateSampleFloor(l, input, feedback, capacity)
                                  : options.floor;
  const uint64_t tiles = (l.n + kTopKTile - 1) / kTopKTile;
  std::mt19937 rng(options.shuffle_seed);
  const bool shuffle = options.shuffle_seed != 0;

  // level_zero_kernel: stages c, histograms level 0, gathers the keys >= floor.
  std::vector<Candidate> candidates;
  std::vector<uint32_t> histogram(kTopKBins, 0);
  for (const uint64_t t : TileOrder(tiles, &rng, shuffle)) {
    for (uint64_t i = t * kTopKTile; i < std::min<uint64_t>(l.n, (t + 1) * kTopKTile); ++i) {
      const uint32_t key = MagnitudeKey(
          feedback.on() ? StageCompensated(feedback, input, i) : input[i]);
      ++histogram[LevelBin(0, key)];
      if (key >= g.floor) Gather(key, i, capacity, &candidates, &g);
    }
  }
  const float* values = feedback.on() ? feedback.residual : input;
  SelectState s = InitialSelectState();
  uint32_t bin;  // find_kernel, level 0, and its verdict on the gather.
  uint64_t bin_above;
  FindBin(histogram.data(), LevelMask(0) + 1, l.k, &bin, &bin_above);
  AdvanceSelect(&s, 0, bin, bin_above, l.k);
  g.again = !GatherHolds(s, g, capacity);
  std::vector<unsigned long long> counts(tiles + 1, 0);
  if (g.again) {  // candidates_kernel: gathers b0 afresh, counts the keys above it.
    g.count = 0;
    candidates.clear();
    for (const uint64_t t : TileOrder(tiles, &rng, shuffle)) {
      uint64_t above = 0;
      for (uint64_t i = t * kTopKTile; i < std::min<uint64_t>(l.n, (t + 1) * kTopKTile); ++i) {
        const uint32_t key = MagnitudeKey(values[i]);
        const Standing standing = StandingOf(s, key);
        above += standing == Standing::kAbove;
        if (standing == Standing::kCandidate) Gather(key, i, capacity, &candidates, &g);
      }
      counts[t] = TileCountOf(above, 0);
    }
  }
  const bool fit = CandidatesFit(g.count, capacity);
  if (shuffle) std::shuffle(candidates.begin(), candidates.end(), rng);

  for (int level = 1; level < kTopKLevels; ++level) {
    EmulateLevel(level, l.n, values, candidates, fit, &s, l.k);
  }
  if (fit) {  // tile_count_kernel: the candidates' shares added to the tiles' counts.
    for (const Candidate& c : candidates) counts[TileOf(c.index)] += TileCount(s, c.key);
  } else {  // The same, counted over the whole chunk.
    counts = EmulateCountTiles(l.n, values, SparseFeedback{}, s);
  }
  EmulateScanAndSelect(l, values, feedback, s, counts, nullptr, body);
  if (!g.again) return TopKPath::kLevelZeroGather;
  return fit ? TopKPath::kCandidates : TopKPath::kWholeChunk;
}

// EncodeThreshold() of topk.cu: the cutoff is known, so only the tile passes (the count
// pass stages c).
inline void EmulateEncodeThreshold(const TopKLayout& l, uint32_t key_floor, const float* input,
                                   const SparseFeedback& feedback, unsigned char* body) {
  const SelectState s = ThresholdState(key_floor);
  const std::vector<unsigned long long> counts = EmulateCountTiles(l.n, input, feedback, s);
  EmulateScanAndSelect(l, feedback.on() ? feedback.residual : input, feedback, s, counts, body,
                       body + kCountBytes);
}

// CheckTopK(), CheckThreshold() (count: the body's count field, null for top-k).
inline unsigned long long EmulateCheckEntries(const TopKLayout& host_layout,
                                              const unsigned char* count,
                                              const unsigned char* entries) {
  if (count != nullptr && CheckCount(host_layout, count) != kValid) {
    return CheckCount(host_layout, count);
  }
  const TopKLayout l = CountedLayout(host_layout, count);
  unsigned long long verdict = kValid;
  for (uint64_t g = 0; g < l.index_groups(); ++g) {
    verdict = std::min(verdict, CheckIndexGroup(l, g, entries));
  }
  return verdict;
}

// DecodeTopK(), DecodeThreshold().
inline void EmulateDecodeEntries(const TopKLayout& host_layout, const unsigned char* count,
                                 const unsigned char* entries, float* out, bool accumulate) {
  const TopKLayout l = CountedLayout(host_layout, count);
  if (!accumulate) std::fill(out, out + l.n, 0.0f);
  for (uint64_t g = 0; g < l.index_groups(); ++g) {
    ScatterIndexGroup(l, g, entries, out, accumulate);
  }
}

// EncodeRandomBlock() and DecodeRandomBlock() of randomblock.cu.
inline std::vector<uint64_t> EmulateBlockStarts(const RandomBlockLayout& l, const RandomKey& key) {
  std::vector<uint64_t> starts(l.blocks);
  for (uint64_t s = 0; s < l.blocks; ++s) starts[s] = BlockStart(l, key, s);
  return starts;
}

inline void EmulateEncodeRandomBlock(const RandomBlockLayout& l, const RandomKey& key,
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

inline void EmulateDecodeRandomBlock(const RandomBlockLayout& l, const RandomKey& key,
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
inline std::vector<uint32_t> RandomKPositions(const RandomKLayout& l, const RandomKey& key) {
  const absl::Span<const size_t> drawn = RandomKCodec::Positions(key, l.n, l.k);
  return std::vector<uint32_t>(drawn.begin(), drawn.end());
}

inline void EmulateEncodeRandomK(const RandomKLayout& l, const RandomKey& key, const float* input,
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

inline void EmulateDecodeRandomK(const RandomKLayout& l, const RandomKey& key,
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
  bool threshold = false;  // With `top` (k = n) and key_floor.
  uint32_t key_floor = 0;
  bool randomblock = false;
  bool randomk = false;
  QuantLayout quant;
  TopKLayout top;
  RandomBlockLayout blocks;
  RandomKLayout random;
  CandidateOptions candidates;            // topk's scratch (capacity as the kernels').
  mutable TopKPath last_path = TopKPath::kLevelZeroGather;  // Of the last topk Encode.
  mutable std::vector<float> state;  // signum's momentum, stepped by every Encode.

  // The largest body (DeviceCodec::BodyBytes()), and the length of an encoded one.
  size_t body_bytes() const {
    if (randomblock) return blocks.body_bytes();
    if (randomk) return random.body_bytes();
    if (threshold) return ThresholdBodyBytes(top, top.n);
    return topk ? top.body_bytes() : quant.body_bytes();
  }
  size_t EncodedBytes(const unsigned char* body) const {
    return threshold ? ThresholdBodyBytes(top, LoadCount(body)) : body_bytes();
  }
  // With `feedback`: RESIDUAL for every codec (its residual and scale), DGC_MOMENTUM for
  // the sparse ones (DeviceCodec::FusesDgcMomentum()).
  void Encode(const RandomKey& key, const float* input, const SparseFeedback& feedback,
              unsigned char* body) const {
    float* residual = feedback.residual;
    const float s = feedback.scale;
    if (randomk) {
      EmulateEncodeRandomK(random, key, input, residual, s, body);
    } else if (randomblock) {
      EmulateEncodeRandomBlock(blocks, key, input, residual, s, body);
    } else if (threshold) {
      EmulateEncodeThreshold(top, key_floor, input, feedback, body);
    } else if (topk) {
      last_path = EmulateEncodeTopK(top, input, feedback, body, candidates);
    } else {
      EmulateEncodeQuant(quant, key, input, residual, s, state.data(), body);
    }
  }
  // Whether a body of `length` bytes is accepted: DeviceCodec::CheckedBody()'s length check
  // on the host (threshold's count), then the device's.
  bool Accepts(const unsigned char* body, size_t length) const {
    if (threshold) {
      if (length < kCountBytes || LoadCount(body) > top.n) return false;
      if (length != ThresholdBodyBytes(top, LoadCount(body))) return false;
      return EmulateCheckEntries(top, body, body + kCountBytes) == kValid;
    }
    if (length != body_bytes()) return false;
    if (randomblock || randomk) return true;  // Every body of the right length.
    return (topk ? EmulateCheckEntries(top, nullptr, body) : EmulateCheckQuant(quant, body)) ==
           kValid;
  }
  void Decode(const RandomKey& key, const unsigned char* body, float* out, bool accumulate) const {
    if (randomk) {
      EmulateDecodeRandomK(random, key, body, out, accumulate);
    } else if (randomblock) {
      EmulateDecodeRandomBlock(blocks, key, body, out, accumulate);
    } else if (threshold) {
      EmulateDecodeEntries(top, body, body + kCountBytes, out, accumulate);
    } else if (topk) {
      EmulateDecodeEntries(top, nullptr, body, out, accumulate);
    } else {
      EmulateDecodeQuant(quant, body, out, accumulate);
    }
  }
};

// As DeviceCodec::Create() maps a spec.
inline Emulated MakeEmulated(const config::Codec& spec, size_t n) {
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
    e.quant =
        MakeQuantLayout(QuantKind::kMaxMin, n, 0, spec.has_bucket_size() ? spec.bucket_size() : 512,
                        static_cast<int>(spec.bits()), spec.stochastic());
  }
  if (name == "randomk") {
    e.randomk = true;
    e.random = RandomKLayout{n, EntriesKept(spec, n), spec.fp16_values()};
  }
  if (name == "randomblock") {
    e.randomblock = true;
    e.blocks = MakeRandomBlockLayout(
        n, EntriesKept(spec, n), spec.has_num_blocks() ? spec.num_blocks() : 1, spec.fp16_values());
  }
  if (name == "threshold") {
    e.threshold = true;
    e.top = MakeTopKLayout(n, n, spec.fp16_values());
    e.key_floor = ThresholdCodec::KeyFloor(spec.threshold());
  }
  if (name == "topk" || name == "dgc") {
    e.topk = true;
    e.top = MakeTopKLayout(n, TopKCodec::EntriesKept(spec, n), spec.fp16_values());
    e.candidates.capacity = CandidateCapacity(e.top);
  }
  return e;
}

// ---------------------------------------------------------------------------------------
// powersgd (the worker's side)
// ---------------------------------------------------------------------------------------

// The kernels of powersgd.cu on host memory, thread after thread, as a PowerSgdWorker's
// backend (compress/cuda/powersgd_rounds.h): the worker's host code is the real one.
class EmulatedPowerSgdKernels final : public cuda::PowerSgdKernels {
 public:
  explicit EmulatedPowerSgdKernels(const PowerSgdLayout& l)
      : l_(l), matrix_(l.matrix_values()), p_hat_(l.p_values()), q_local_(l.q_values()) {}

  absl::Status Assemble(const float* input, const float* residual, void*) override {
    const GlobalSource source{input, residual};
    for (uint64_t f = 0; f < l_.matrix_values(); ++f) matrix_[f] = MatrixEntry(l_, f, source);
    return absl::OkStatus();
  }
  absl::Status Project(absl::Span<const float> q, absl::Span<float> p, void*) override {
    for (uint64_t e = 0; e < l_.p_values(); ++e) {
      p[e] = ProjectEntry(l_, matrix_.data(), q.data(), e);
    }
    return absl::OkStatus();
  }
  absl::Status ProjectBack(absl::Span<const float> p_hat, absl::Span<float> q_local,
                           void*) override {
    std::copy(p_hat.begin(), p_hat.end(), p_hat_.begin());
    for (uint64_t e = 0; e < l_.q_values(); ++e) {
      q_local_[e] = ProjectBackEntry(l_, matrix_.data(), p_hat_.data(), e);
    }
    std::copy(q_local_.begin(), q_local_.end(), q_local.begin());
    return absl::OkStatus();
  }
  absl::Status Finish(float* residual, float residual_scale, void*) override {
    for (uint64_t t = 0; t < l_.n; ++t) {
      FinishEntry(l_, matrix_.data(), p_hat_.data(), q_local_.data(), t, residual, residual_scale);
    }
    return absl::OkStatus();
  }

 private:
  const PowerSgdLayout l_;
  std::vector<float> matrix_, p_hat_, q_local_;
};

// A PowerSgdWorker on the emulated kernels.
inline absl::StatusOr<std::unique_ptr<cuda::PowerSgdWorker>> MakeEmulatedPowerSgd(
    const config::Codec& spec, const ChunkShape& shape) {
  return cuda::PowerSgdWorker::Create(
      spec, shape,
      [](const PowerSgdLayout& l) -> absl::StatusOr<std::unique_ptr<cuda::PowerSgdKernels>> {
        return std::make_unique<EmulatedPowerSgdKernels>(l);
      });
}

}  // namespace tamp::compress::cuda_internal

#endif  // TAMP_COMPRESS_CUDA_INTERNAL_EMULATION_H_

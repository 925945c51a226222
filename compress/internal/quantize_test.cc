#include "compress/internal/quantize.h"

#include <cstdint>
#include <iostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "compress/wire_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp::compress::internal {
namespace {

using ::testing::ElementsAre;

const char* KernelName(PhiloxKernel kernel) {
  switch (kernel) {
    case PhiloxKernel::kPortable:
      return "portable";
    case PhiloxKernel::kAvx2:
      return "avx2";
    case PhiloxKernel::kAvx512:
      return "avx512";
  }
  return "?";
}

const std::vector<RandomKey>& TestKeys() {
  static const auto* keys = new std::vector<RandomKey>{
      {},
      {.seed = 7, .step = 3, .chunk = 1, .worker = 0},
      {.seed = 0x0123456789abcdefull,
       .step = (uint64_t{5} << 32) | 9,
       .chunk = 77,
       .worker = kSharedStream},
  };
  return *keys;
}

// (first, count) with `first` a multiple of 8: whole and partial 16-block groups, partial
// blocks, the last blocks before the 2^32-block limit of a stream of `per_block` elements
// per block.
std::vector<std::pair<uint64_t, size_t>> TestRanges(uint64_t per_block) {
  const uint64_t end = per_block << 32;
  return {{0, 0},    {0, 1},       {0, 3},     {0, 4},          {0, 5},
          {0, 7},    {0, 9},       {0, 63},    {0, 64},         {0, 65},
          {0, 129},  {8, 1000},    {1024, 1024}, {64, 257},     {end - 1024, 1024},
          {end - 72, 72}};
}

// Runs check(kernel) for every kernel this machine supports (at least the portable one).
template <typename Check>
void ForEachSupportedKernel(Check check) {
  int kernels_run = 0;
  for (PhiloxKernel kernel :
       {PhiloxKernel::kPortable, PhiloxKernel::kAvx2, PhiloxKernel::kAvx512}) {
    if (!PhiloxKernelSupported(kernel)) {
      std::cout << "Philox kernel " << KernelName(kernel) << " not supported here, skipped\n";
      continue;
    }
    ++kernels_run;
    check(kernel);
  }
  EXPECT_GE(kernels_run, 1);
}

TEST(PhiloxBitsTest, EveryKernelDrawsExactlyThePhiloxStreamWords) {
  ForEachSupportedKernel([](PhiloxKernel kernel) {
    for (const RandomKey& key : TestKeys()) {
      const PhiloxStream stream(key);
      for (const auto& [first, count] : TestRanges(4)) {
        std::vector<uint32_t> out(count + 1, 0xdeadbeef);
        PhiloxBitsWith(kernel, key, first, count, out.data());
        for (size_t j = 0; j < count; ++j) {
          ASSERT_EQ(out[j], stream.Bits(first + j))
              << KernelName(kernel) << " first " << first << " j " << j;
        }
        EXPECT_EQ(out[count], 0xdeadbeef) << "wrote past the end";
      }
    }
  });
  // The default picks a supported kernel and agrees too.
  const RandomKey& key = TestKeys()[2];
  std::vector<uint32_t> out(100);
  PhiloxBits(key, 8, out.size(), out.data());
  for (size_t j = 0; j < out.size(); ++j) EXPECT_EQ(out[j], PhiloxStream(key).Bits(8 + j));
}

TEST(PhiloxBits16Test, EveryKernelDrawsExactlyThe16BitStream) {
  ForEachSupportedKernel([](PhiloxKernel kernel) {
    for (const RandomKey& key : TestKeys()) {
      const PhiloxStream stream(key);
      for (const auto& [first, count] : TestRanges(8)) {
        std::vector<uint16_t> out(count + 1, 0xbeef);
        PhiloxBits16With(kernel, key, first, count, out.data());
        for (size_t j = 0; j < count; ++j) {
          ASSERT_EQ(out[j], stream.Bits16(first + j))
              << KernelName(kernel) << " first " << first << " j " << j;
        }
        EXPECT_EQ(out[count], 0xbeef) << "wrote past the end";
      }
    }
  });
  const RandomKey& key = TestKeys()[1];
  std::vector<uint16_t> out(100);
  PhiloxBits16(key, 16, out.size(), out.data());
  for (size_t j = 0; j < out.size(); ++j) EXPECT_EQ(out[j], PhiloxStream(key).Bits16(16 + j));
}

TEST(PhiloxBits16Test, SplitsEachBlockIntoEightHalvesLowFirst) {
  const RandomKey key = {.seed = 42, .step = 1, .chunk = 2, .worker = 3};
  const PhiloxStream stream(key);
  for (uint32_t block : {0u, 1u, 12345u, 0xFFFFFFFFu}) {
    const auto words = stream.Block(block);
    for (int k = 0; k < 8; ++k) {
      const uint32_t word = words.v[k / 2];
      EXPECT_EQ(stream.Bits16(uint64_t{8} * block + k), k % 2 == 0 ? word & 0xFFFF : word >> 16)
          << "block " << block << " half " << k;
    }
  }
  EXPECT_EQ(PhiloxStream::ToUniform16(0), 0.0f);
  EXPECT_EQ(PhiloxStream::ToUniform16(0xFFFF), 1.0f - 1.0f / 65536);
}

TEST(PackedBytesTest, IsCeilOfCountTimesBitsOverEight) {
  for (int bits = 1; bits <= 16; ++bits) {
    for (uint64_t count : {0, 1, 2, 7, 8, 9, 15, 16, 17, 1000, 1001}) {
      EXPECT_EQ(PackedBytes(count, bits), (count * bits + 7) / 8) << count << " x " << bits;
    }
  }
  EXPECT_EQ(PackedBytes(uint64_t{1} << 34, 9), (uint64_t{9} << 34) / 8);
}

TEST(PackCodesTest, MatchesBitWriterAndRoundTrips) {
  std::mt19937 rng(11);
  for (int bits = 1; bits <= 16; ++bits) {
    for (size_t count : {0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 100, 1024}) {
      std::vector<uint32_t> codes(count);
      for (uint32_t& code : codes) code = rng() & ((1u << bits) - 1);
      std::string expected;
      BitWriter writer(&expected);
      for (uint32_t code : codes) writer.Write(code, bits);
      writer.Finish();

      std::string packed(PackedBytes(count, bits), '\x55');
      PackCodes(codes.data(), count, bits, packed.data());
      ASSERT_EQ(packed, expected) << count << " codes of " << bits << " bits";
      std::vector<uint32_t> unpacked(count + 1, 12345);
      EXPECT_TRUE(UnpackCodes(packed.data(), count, bits, unpacked.data()));
      EXPECT_TRUE(PaddingIsZero(packed.data(), count, bits));
      unpacked.pop_back();
      ASSERT_EQ(unpacked, codes) << count << " codes of " << bits << " bits";
    }
  }
}

TEST(PackCodesTest, HandPackedNineBitCodes) {
  // 0x1ff, 0x001, 0x100: bits 0-8, 9-17, 18-26 of the stream.
  const uint32_t codes[] = {0x1ff, 0x001, 0x100};
  char out[4];
  PackCodes(codes, 3, 9, out);
  EXPECT_THAT(std::vector<uint8_t>(out, out + 4), ElementsAre(0xff, 0x03, 0x00, 0x04));
}

TEST(UnpackCodesTest, ReportsNonzeroPadding) {
  for (int bits = 1; bits <= 16; ++bits) {
    for (size_t count : {1, 3, 7, 9, 13}) {
      const uint64_t used = count * bits;
      if (used % 8 == 0) continue;
      std::string packed(PackedBytes(count, bits), '\0');
      packed.back() = static_cast<char>(1u << (used % 8));  // The first padding bit.
      std::vector<uint32_t> codes(count);
      EXPECT_FALSE(UnpackCodes(packed.data(), count, bits, codes.data())) << count << "x" << bits;
      EXPECT_FALSE(PaddingIsZero(packed.data(), count, bits)) << count << "x" << bits;
      packed.back() = static_cast<char>(1u << (used % 8 - 1));  // The last code bit.
      EXPECT_TRUE(UnpackCodes(packed.data(), count, bits, codes.data()));
      EXPECT_TRUE(PaddingIsZero(packed.data(), count, bits));
    }
  }
}

TEST(ForEachBucketSegmentTest, SplitsATileAtBucketBoundaries) {
  std::vector<std::tuple<uint64_t, size_t, size_t>> pieces;
  auto record = [&](uint64_t b, size_t begin, size_t end) { pieces.emplace_back(b, begin, end); };
  ForEachBucketSegment(1024, 1024, 500, record);  // Elements 1024..2047.
  EXPECT_THAT(pieces, ElementsAre(std::make_tuple(2, 0, 476), std::make_tuple(3, 476, 976),
                                  std::make_tuple(4, 976, 1024)));
  pieces.clear();
  ForEachBucketSegment(0, 5, 1 << 20, record);
  EXPECT_THAT(pieces, ElementsAre(std::make_tuple(0, 0, 5)));
  pieces.clear();
  ForEachBucketSegment(8, 3, 1, record);
  EXPECT_THAT(pieces, ElementsAre(std::make_tuple(8, 0, 1), std::make_tuple(9, 1, 2),
                                  std::make_tuple(10, 2, 3)));
}

}  // namespace
}  // namespace tamp::compress::internal

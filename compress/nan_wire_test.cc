// No payload depends on a NaN's bits: every codec's wire holds canonical NaNs only.
//
// Why: GPU arithmetic returns the canonical NaN (0x7fffffff on NVIDIA devices), while x86
// keeps an operand's NaN payload and sign. Under error feedback the encoded value is
// computed (g + r), so a GPU worker and a CPU worker hold differently-coded NaNs for the same
// gradient. Payloads must not show the difference, or the CPU/GPU byte-identity fails at the
// first NaN (compress/cuda/README.md).
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "compress/codec.h"
#include "compress/registry.h"
#include "gtest/gtest.h"

namespace tamp::compress {
namespace {

float FromBits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

// NaNs as different machines produce them: x86's default (0xffc00000 from 0/0), the GPU's,
// quiet and signalling ones with payloads, both signs.
constexpr uint32_t kNaNs[] = {0x7fc00000u, 0xffc00000u, 0x7fffffffu, 0xffffffffu,
                              0x7f800001u, 0xff800001u, 0x7fc01234u, 0xffa5a5a5u};

// n values, every third a NaN of kind `nan` (or of varying kinds when nan < 0), so sparse
// codecs with random positions still pick some.
std::vector<float> Input(size_t n, int nan) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(static_cast<int>(i % 29) - 14) * 0.125f;
    if (i % 3 == 1) {
      const size_t kind = nan < 0 ? (i / 3) % std::size(kNaNs) : static_cast<size_t>(nan);
      x[i] = FromBits(kNaNs[kind]);
    }
  }
  return x;
}

std::vector<config::Codec> Specs() {
  std::vector<config::Codec> specs;
  for (const CodecInfo& info : ListCodecs()) {
    if (info.rounds != 1) continue;  // powersgd: its payloads are computed factors, not values.
    specs.push_back(info.example);
    for (const std::string& parameter : info.parameters) {
      if (parameter != "fp16_values") continue;
      config::Codec fp16 = info.example;
      fp16.set_fp16_values(true);
      specs.push_back(fp16);
    }
  }
  return specs;
}

std::string Encode(const config::Codec& spec, const std::vector<float>& x) {
  auto codec = CreateCodec(spec, x.size());
  EXPECT_TRUE(codec.ok()) << codec.status();
  if (!codec.ok()) return "";
  std::string payload;
  const RandomKey key{.seed = 9, .step = 3, .chunk = 1, .worker = 0};
  EXPECT_TRUE((*codec)->Encode(x, key, &payload).ok());
  return payload;
}

TEST(NanWireTest, PayloadsDoNotDependOnNaNBits) {
  constexpr size_t kN = 1000;
  for (const config::Codec& spec : Specs()) {
    SCOPED_TRACE(spec.ShortDebugString());
    const std::string canonical = Encode(spec, Input(kN, 0));
    for (int nan = -1; nan < static_cast<int>(std::size(kNaNs)); ++nan) {
      const std::string payload = Encode(spec, Input(kN, nan));
      ASSERT_EQ(payload.size(), canonical.size());
      size_t first = 0;
      while (first < payload.size() && payload[first] == canonical[first]) ++first;
      EXPECT_EQ(first, payload.size())
          << "NaNs " << (nan < 0 ? std::string("mixed") : absl::StrCat(nan)) << ": byte "
          << first << " is 0x" << absl::BytesToHexString(payload.substr(first, 4))
          << ", with 0x7fc00000 NaNs 0x" << absl::BytesToHexString(canonical.substr(first, 4));
    }
  }
}

}  // namespace
}  // namespace tamp::compress

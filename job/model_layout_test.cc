#include "job/model_layout.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace tamp {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

config::Model Parse(const std::string& text) {
  config::Model model;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &model)) << text;
  return model;
}

struct Summary {
  std::string name;
  std::vector<int64_t> shape;
  int64_t fan_in;
  bool is_bias;
  bool operator==(const Summary& o) const {
    return name == o.name && shape == o.shape && fan_in == o.fan_in && is_bias == o.is_bias;
  }
  friend std::ostream& operator<<(std::ostream& os, const Summary& s) {
    os << s.name << " [";
    for (int64_t d : s.shape) os << d << ",";
    return os << "] fan_in " << s.fan_in << (s.is_bias ? " bias" : "");
  }
};

std::vector<Summary> Tensors(const std::string& text) {
  auto tensors = ModelTensors(Parse(text));
  EXPECT_TRUE(tensors.ok()) << tensors.status();
  std::vector<Summary> out;
  if (!tensors.ok()) return out;
  for (const TensorSpec& t : *tensors) out.push_back({t.name, t.shape, t.fan_in, t.is_bias});
  return out;
}

TEST(ModelLayoutTest, PatternsAreExactNamesOrGlobsWhoseStarTakesAnyRun) {
  EXPECT_TRUE(TensorNameMatches("fc1.*", "fc1.weight"));
  EXPECT_TRUE(TensorNameMatches("fc1.weight", "fc1.weight"));
  EXPECT_FALSE(TensorNameMatches("fc1.weight", "fc1.weight2"));
  EXPECT_FALSE(TensorNameMatches("fc1.*", "fc10"));
  EXPECT_TRUE(TensorNameMatches("fc*.weight", "fc1.weight"));
  EXPECT_FALSE(TensorNameMatches("fc*.weight", "fc1.bias"));
  // A transformer's attention weights, every layer; '*' takes dots and runs of any length.
  EXPECT_TRUE(TensorNameMatches("blocks.*.attn.*.weight", "blocks.0.attn.qkv.weight"));
  EXPECT_TRUE(TensorNameMatches("blocks.*.attn.*.weight", "blocks.11.attn.out.proj.weight"));
  EXPECT_FALSE(TensorNameMatches("blocks.*.attn.*.weight", "blocks.0.mlp.fc.weight"));
  EXPECT_FALSE(TensorNameMatches("blocks.*.attn.*.weight", "blocks.0.attn.qkv.bias"));
  EXPECT_TRUE(TensorNameMatches("*.bias", "fc2.bias"));
  EXPECT_TRUE(TensorNameMatches("*", ""));
  EXPECT_TRUE(TensorNameMatches("a**b", "ab"));
  EXPECT_TRUE(TensorNameMatches("*a*a*", "banana"));
  EXPECT_FALSE(TensorNameMatches("*a*a*a*a*", "banana"));
  for (const char* pattern : {"fc1.weight", "fc1.*", "*", "fc*.weight"}) {
    EXPECT_TRUE(IsTensorPattern(pattern));
  }
  EXPECT_FALSE(IsTensorPattern(""));
}

TEST(ModelLayoutTest, MlpTensors) {
  EXPECT_THAT(Tensors("kind: MLP hidden: [64]"),
              ElementsAre(Summary{"fc1.weight", {64, 784}, 784, false},
                          Summary{"fc1.bias", {64}, 784, true},
                          Summary{"fc2.weight", {10, 64}, 64, false},
                          Summary{"fc2.bias", {10}, 64, true}));
}

// conv weights [out, in, k, k] with fan_in in * k * k; 28 -> 14 -> 7 after two pools.
TEST(ModelLayoutTest, CnnTensors) {
  EXPECT_THAT(Tensors("kind: CNN conv_channels: [32, 64] kernel_size: 5 fc_hidden: [128]"),
              ElementsAre(Summary{"conv1.weight", {32, 1, 5, 5}, 25, false},
                          Summary{"conv1.bias", {32}, 25, true},
                          Summary{"conv2.weight", {64, 32, 5, 5}, 800, false},
                          Summary{"conv2.bias", {64}, 800, true},
                          Summary{"fc1.weight", {128, 64 * 7 * 7}, 3136, false},
                          Summary{"fc1.bias", {128}, 3136, true},
                          Summary{"fc2.weight", {10, 128}, 128, false},
                          Summary{"fc2.bias", {10}, 128, true}));
  // Three pools: 28 -> 14 -> 7 -> 3 (rounding down); no hidden fc layer.
  EXPECT_THAT(Tensors("kind: CNN conv_channels: [4, 4, 8] kernel_size: 3"),
              ElementsAre(Summary{"conv1.weight", {4, 1, 3, 3}, 9, false},
                          Summary{"conv1.bias", {4}, 9, true},
                          Summary{"conv2.weight", {4, 4, 3, 3}, 36, false},
                          Summary{"conv2.bias", {4}, 36, true},
                          Summary{"conv3.weight", {8, 4, 3, 3}, 36, false},
                          Summary{"conv3.bias", {8}, 36, true},
                          Summary{"fc1.weight", {10, 8 * 3 * 3}, 72, false},
                          Summary{"fc1.bias", {10}, 72, true}));
}

void ExpectInvalid(const std::string& text, const std::string& message) {
  auto tensors = ModelTensors(Parse(text));
  ASSERT_FALSE(tensors.ok()) << text;
  EXPECT_EQ(tensors.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tensors.status().message(), HasSubstr(message));
}

TEST(ModelLayoutTest, ErrorsNameTheField) {
  ExpectInvalid("", "model.kind: unsupported model kind KIND_UNSPECIFIED (supported: MLP, CNN, LAYOUT, REGISTERED)");
  ExpectInvalid("kind: MLP hidden: [0]", "model.hidden[0]: width must be in [1, 65536], got 0");
  ExpectInvalid("kind: MLP conv_channels: 4", "model.conv_channels: is for kind CNN");
  ExpectInvalid("kind: MLP kernel_size: 3", "model.kernel_size: is for kind CNN");
  ExpectInvalid("kind: MLP fc_hidden: 4", "model.fc_hidden: is for kind CNN");

  const std::string cnn = "kind: CNN conv_channels: [2, 3] kernel_size: 3 ";
  ExpectInvalid(cnn + "hidden: 4", "model.hidden: is for kind MLP");
  ExpectInvalid("kind: CNN conv_channels: 2", "model.kernel_size: must be odd ('same' padding) "
                                              "and in [1, 15], got 0");
  ExpectInvalid("kind: CNN conv_channels: 2 kernel_size: 4", "model.kernel_size");
  ExpectInvalid("kind: CNN conv_channels: 2 kernel_size: 17", "got 17");
  ExpectInvalid("kind: CNN kernel_size: 3", "model.conv_channels: a CNN has 1 to 4 convolution "
                                            "layers");
  ExpectInvalid("kind: CNN kernel_size: 3 conv_channels: [1, 1, 1, 1, 1]", "got 5");
  ExpectInvalid("kind: CNN kernel_size: 3 conv_channels: [4, 0]",
                "model.conv_channels[1]: channels must be in [1, 1024], got 0");
  ExpectInvalid("kind: CNN kernel_size: 3 conv_channels: [4, 1025]", "model.conv_channels[1]");
  ExpectInvalid(cnn + "fc_hidden: [8, 0]",
                "model.fc_hidden[1]: width must be in [1, 65536], got 0");
}

}  // namespace
}  // namespace tamp

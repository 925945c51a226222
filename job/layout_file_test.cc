#include "job/layout_file.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kLayout[] = R"(# two layers
tamp-layout 1
conv1.weight 4 3 3 3   # a convolution
bn1.weight 4
bn1.bias 4
fc.weight 10 4
)";

std::string LayoutError(const std::string& text) {
  absl::StatusOr<std::vector<TensorSpec>> tensors = ParseLayout(text, "x.layout");
  EXPECT_FALSE(tensors.ok()) << text;
  return std::string(tensors.status().message());
}

TEST(ParseLayoutTest, NamesShapesAndInitialisation) {
  absl::StatusOr<std::vector<TensorSpec>> tensors = ParseLayout(kLayout, "x.layout");
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  ASSERT_EQ(tensors->size(), 4u);
  EXPECT_EQ((*tensors)[0].name, "conv1.weight");
  EXPECT_THAT((*tensors)[0].shape, ElementsAre(4, 3, 3, 3));
  EXPECT_EQ((*tensors)[0].fan_in, 27);
  EXPECT_FALSE((*tensors)[0].is_bias);
  EXPECT_THAT((*tensors)[1].shape, ElementsAre(4));
  EXPECT_TRUE((*tensors)[1].is_bias);
  EXPECT_EQ((*tensors)[3].fan_in, 4);
}

TEST(ParseLayoutTest, ErrorsNameFileLineAndProblem) {
  EXPECT_EQ(LayoutError(""), "x.layout: empty; the first line must be 'tamp-layout 1'");
  EXPECT_EQ(LayoutError("a 1\n"), "x.layout:1: the first line must be 'tamp-layout 1'");
  EXPECT_EQ(LayoutError("tamp-layout 2\n"),
            "x.layout:1: this build reads tamp-layout version 1, the file says 2");
  EXPECT_EQ(LayoutError("tamp-layout 1\n"), "x.layout: the layout has no tensors");
  EXPECT_EQ(LayoutError("tamp-layout 1\n\na 2 x\n"),
            "x.layout:3: tensor 'a': dimension 2 'x' is not an integer in [1, 2^40]");
  EXPECT_EQ(LayoutError("tamp-layout 1\na 0\n"),
            "x.layout:2: tensor 'a': dimension 1 '0' is not an integer in [1, 2^40]");
  EXPECT_EQ(LayoutError("tamp-layout 1\na\n"),
            "x.layout:2: tensor 'a' has 0 dimensions; a tensor has 1 to 8");
  EXPECT_EQ(LayoutError("tamp-layout 1\na 1\nb 2\na 3\n"),
            "x.layout:4: tensor 'a' is already at line 2");
  EXPECT_EQ(LayoutError("tamp-layout 1\na* 1\n"),
            "x.layout:2: tensor name 'a*': character '*' is not a letter, digit or one of ._-/");
}

constexpr char kProfile[] = R"(tamp-profile 1
scale 2   # twice as slow as written
layer 1 2 conv1.weight bn1.*
layer 0.5 1.5 fc.weight
)";

TEST(ParseProfileTest, ScaledTimesAndReadyTimesInBackwardOrder) {
  const std::vector<TensorSpec> tensors = *ParseLayout(kLayout, "x.layout");
  absl::StatusOr<LayerProfile> profile = ParseProfile(kProfile, "x.profile", tensors);
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_DOUBLE_EQ(profile->scale, 2);
  ASSERT_EQ(profile->layers.size(), 2u);
  EXPECT_THAT(profile->layers[0].tensors, ElementsAre(0, 1, 2));
  EXPECT_DOUBLE_EQ(profile->step_ms(), 10);  // 2 * (1 + 2 + 0.5 + 1.5)
  // Forward 3 ms, then fc's backward (3 ms), then layer 1's (4 ms).
  EXPECT_THAT(profile->TensorReadyMs(4), ElementsAre(10, 10, 10, 6));
  EXPECT_FALSE(profile->compute_on_cpu);  // Version 1: an accelerator's.
}

std::string ProfileError(const std::string& text) {
  const std::vector<TensorSpec> tensors = *ParseLayout(kLayout, "x.layout");
  absl::StatusOr<LayerProfile> profile = ParseProfile(text, "x.profile", tensors);
  EXPECT_FALSE(profile.ok()) << text;
  return std::string(profile.status().message());
}

TEST(ParseProfileTest, ErrorsNameFileLineAndProblem) {
  const std::string head = "tamp-profile 1\nscale 1\n";
  const std::string rest = "layer 1 1 bn1.* fc.weight\n";
  EXPECT_EQ(ProfileError("tamp-profile 3\n"),
            "x.profile:1: this build reads tamp-profile version 1 to 2, the file says 3");
  EXPECT_EQ(ProfileError(head + "layer 1 x conv1.weight\n" + rest),
            "x.profile:3: layer: backward ms 'x' is not a number");
  EXPECT_EQ(ProfileError(head + "layer -1 1 conv1.weight\n" + rest),
            "x.profile:3: layer: forward ms -1 is negative");
  EXPECT_EQ(ProfileError(head + "layer 1 1\n"),
            "x.profile:3: layer: expected FORWARD_MS BACKWARD_MS and at least one tensor");
  EXPECT_EQ(ProfileError(head + "layer 1 1 conv1.weight conv2.weight\n"),
            "x.profile:3: layer: 'conv2.weight' matches no tensor of the layout");
  EXPECT_EQ(ProfileError(head + "layer 1 1 conv1.weight bn1.weight\n" + rest),
            "x.profile:4: layer: tensor 'bn1.weight' is already in the layer at line 3");
  EXPECT_EQ(ProfileError(head + "layer 1 1 conv1.weight\nlayer 1 1 bn1.*\n"),
            "x.profile: tensor 'fc.weight' of the layout is in no layer");
  EXPECT_EQ(ProfileError("tamp-profile 1\nlayer 1 1 conv1.weight\n" + rest),
            "x.profile: no 'scale' line (write 'scale 1' for the times as given)");
  EXPECT_EQ(ProfileError(head + "scale 2\n"), "x.profile:3: scale: already given at line 2");
  EXPECT_EQ(ProfileError("tamp-profile 1\nscale 0\n"),
            "x.profile:2: scale: expected one finite number > 0");
  EXPECT_EQ(ProfileError(head + "layers 1 1 conv1.weight\n"),
            "x.profile:3: unknown key 'layers' (expected 'scale' or 'layer')");
}

// Version 2's compute line: where the workers' compute runs (default accelerator).
TEST(ParseProfileTest, VersionTwoSaysWhereComputeRuns) {
  const std::vector<TensorSpec> tensors = *ParseLayout(kLayout, "x.layout");
  const std::string layers = "scale 1\nlayer 1 2 conv1.weight bn1.*\nlayer 0.5 1.5 fc.weight\n";
  absl::StatusOr<LayerProfile> cpu =
      ParseProfile("tamp-profile 2\ncompute cpu\n" + layers, "x.profile", tensors);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_TRUE(cpu->compute_on_cpu);
  EXPECT_DOUBLE_EQ(cpu->step_ms(), 5);
  absl::StatusOr<LayerProfile> unsaid = ParseProfile("tamp-profile 2\n" + layers, "x.profile",
                                                     tensors);
  ASSERT_TRUE(unsaid.ok()) << unsaid.status();
  EXPECT_FALSE(unsaid->compute_on_cpu);
  EXPECT_EQ(ProfileError("tamp-profile 2\ncompute gpu\n" + layers),
            "x.profile:2: compute: expected 'cpu' or 'accelerator'");
  EXPECT_EQ(ProfileError("tamp-profile 2\ncompute cpu\ncompute cpu\n" + layers),
            "x.profile:3: compute: already given at line 2");
  EXPECT_EQ(ProfileError("tamp-profile 1\ncompute cpu\n" + layers),
            "x.profile:2: compute: needs 'tamp-profile 2' as the first line (version 1 has no "
            "compute line)");
  EXPECT_EQ(ProfileError("tamp-profile 2\nlayers 1 1 conv1.weight\n"),
            "x.profile:2: unknown key 'layers' (expected 'scale', 'compute' or 'layer')");
}

// The shipped models (models/make_layouts.py): the published tensor and parameter counts,
// and profiles that cover every tensor.
TEST(LoadLayoutFileTest, ShippedModels) {
  struct Expected {
    const char* name;
    size_t tensors;
    int64_t params;
  };
  for (const Expected& model : {Expected{"resnet50", 161, 25557032},
                                Expected{"bert_base", 199, 109482240},
                                Expected{"gpt2_small", 148, 124439808}}) {
    SCOPED_TRACE(model.name);
    const std::string base = absl::StrCat("models/", model.name);
    absl::StatusOr<std::vector<TensorSpec>> tensors = LoadLayoutFile(base + ".layout");
    ASSERT_TRUE(tensors.ok()) << tensors.status();
    EXPECT_EQ(tensors->size(), model.tensors);
    int64_t params = 0;
    for (const TensorSpec& tensor : *tensors) params += tensor.elements();
    EXPECT_EQ(params, model.params);
    absl::StatusOr<LayerProfile> profile = LoadProfileFile(base + ".profile", *tensors);
    ASSERT_TRUE(profile.ok()) << profile.status();
    EXPECT_GT(profile->step_ms(), 10);
    // The performance model requires every ready time within the step, to the last bit.
    const std::vector<double> ready = profile->TensorReadyMs(tensors->size());
    EXPECT_LE(*std::max_element(ready.begin(), ready.end()), profile->step_ms());
  }
}

TEST(LoadLayoutFileTest, MissingFileIsNotFound) {
  absl::StatusOr<std::vector<TensorSpec>> tensors = LoadLayoutFile("/nonexistent/x.layout");
  EXPECT_EQ(tensors.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(tensors.status().message(), HasSubstr("/nonexistent/x.layout"));
}

}  // namespace
}  // namespace tamp

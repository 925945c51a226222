#include "worker/fashion_mnist.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"
#include "worker/idx_reader.h"

namespace tamp {
namespace {

constexpr uint32_t kRows = 28;
constexpr uint32_t kCols = 28;
constexpr int kClasses = 10;

std::string JoinPath(const std::string& dir, absl::string_view name) {
  if (dir.empty() || dir.back() == '/') return absl::StrCat(dir, name);
  return absl::StrCat(dir, "/", name);
}

// Keeps the first `n` elements and releases the rest.
void Truncate(std::vector<uint8_t>& v, size_t n) {
  if (n == v.size()) return;
  v.resize(n);
  v.shrink_to_fit();
}

}  // namespace

absl::StatusOr<Dataset> LoadFashionMnist(const std::string& dir, Split split, uint32_t limit) {
  const char* prefix = split == Split::kTrain ? "train" : "t10k";
  const std::string images_path = JoinPath(dir, absl::StrCat(prefix, "-images-idx3-ubyte.gz"));
  const std::string labels_path = JoinPath(dir, absl::StrCat(prefix, "-labels-idx1-ubyte.gz"));
  TAMP_ASSIGN_OR_RETURN(IdxArray images, ReadIdxFile(images_path));
  TAMP_ASSIGN_OR_RETURN(IdxArray labels, ReadIdxFile(labels_path));

  if (images.dims.size() != 3 || images.dims[1] != kRows || images.dims[2] != kCols) {
    return absl::InvalidArgumentError(
        absl::StrCat(images_path, ": expected images of shape N x 28 x 28, file has ",
                     absl::StrJoin(images.dims, " x ")));
  }
  if (labels.dims.size() != 1 || labels.dims[0] != images.dims[0]) {
    return absl::InvalidArgumentError(
        absl::StrCat(labels_path, ": expected ", images.dims[0], " labels (one per image in ",
                     images_path, "), file has shape ", absl::StrJoin(labels.dims, " x ")));
  }
  const auto bad_label = std::find_if(labels.data.begin(), labels.data.end(),
                                      [](uint8_t label) { return label >= kClasses; });
  if (bad_label != labels.data.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(labels_path, ": label ", int{*bad_label}, " at index ",
                     bad_label - labels.data.begin(), " is outside [0, ", kClasses, ")"));
  }

  const uint32_t total = images.dims[0];
  Dataset dataset;
  dataset.size = limit == 0 ? total : std::min(limit, total);
  dataset.rows = kRows;
  dataset.cols = kCols;
  dataset.images = std::move(images.data);
  dataset.labels = std::move(labels.data);
  Truncate(dataset.images, dataset.size * kRows * kCols);
  Truncate(dataset.labels, dataset.size);
  return dataset;
}

void NormalizeImages(const uint8_t* pixels, int64_t count, float* out) {
  for (int64_t i = 0; i < count; ++i) {
    out[i] = (static_cast<float>(pixels[i]) / 255.0f - kFashionMnistMean) / kFashionMnistStd;
  }
}

}  // namespace tamp

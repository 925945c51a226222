// Fashion-MNIST: 28x28 grey-scale images of clothing in 10 classes, 60000 for training and
// 10000 for testing, stored as four gzip-compressed IDX files in one directory:
//   train-images-idx3-ubyte.gz  [60000, 28, 28]    train-labels-idx1-ubyte.gz  [60000]
//   t10k-images-idx3-ubyte.gz   [10000, 28, 28]    t10k-labels-idx1-ubyte.gz   [10000]
//
// Errors: those of ReadIdxFile (worker/idx_reader.h) for a file that is missing or not a
// valid IDX file; INVALID_ARGUMENT, naming the file, for a valid IDX file whose content is
// not Fashion-MNIST (images not [N, 28, 28], labels not [N], a label outside [0, 10)).
//
// Thread safety: both functions have no shared state and may run concurrently.
//
// Example:
//   TAMP_ASSIGN_OR_RETURN(Dataset train, LoadFashionMnist(dir, Split::kTrain, /*limit=*/0));
//   std::vector<float> x(64 * kImageSize);
//   NormalizeImages(train.images.data(), x.size(), x.data());  // the first 64 images
#ifndef TAMP_WORKER_FASHION_MNIST_H_
#define TAMP_WORKER_FASHION_MNIST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tamp {

// Mean and standard deviation of a Fashion-MNIST training pixel scaled to [0, 1].
inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;

struct Dataset {
  int64_t size = 0;             // Examples.
  int rows = 0;                 // 28
  int cols = 0;                 // 28
  std::vector<uint8_t> images;  // [size, rows, cols] row-major, pixels 0..255.
  std::vector<uint8_t> labels;  // [size], each in [0, 10).
};

enum class Split { kTrain, kTest };

// LoadFashionMnist()
//
// Loads one split from `dir`. With `limit` > 0 keeps only the first min(limit, N) examples;
// 0 keeps all N.
absl::StatusOr<Dataset> LoadFashionMnist(const std::string& dir, Split split, uint32_t limit);

// NormalizeImages()
//
// out[i] = (pixels[i] / 255 - kFashionMnistMean) / kFashionMnistStd for i in [0, count).
void NormalizeImages(const uint8_t* pixels, int64_t count, float* out);

}  // namespace tamp

#endif  // TAMP_WORKER_FASHION_MNIST_H_

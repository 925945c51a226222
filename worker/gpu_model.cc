#include "worker/gpu_model.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/cpu_models.h"

#if TAMP_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <algorithm>
#include <limits>

#include "base/status_macros.h"
#include "glog/logging.h"
#include "kernels/cnn_layers.h"
#include "kernels/cuda_check.h"
#include "kernels/device.h"
#include "kernels/layers.h"
#include "worker/internal/gradient_staging.h"
#endif

namespace tamp {

#if TAMP_HAVE_CUDA
namespace {

using internal::CudaError;
using internal::GradientStaging;
using internal::PinnedArray;
using internal::Stream;

// ---------------------------------------------------------------------------------------
// GpuNet: the MLP (no conv layers) and the CNN on the device
// ---------------------------------------------------------------------------------------

// The layers, buffers and order of worker/cnn_cpu.cc (an MLP is the case without conv
// layers, its first fc layer reading the input): see worker/cnn_cpu.h for the shapes.
class GpuNet final : public Model {
 public:
  static absl::StatusOr<std::unique_ptr<GpuNet>> Create(std::vector<TensorSpec> tensors,
                                                        int max_batch);

  // Device memory: the client reads the gradients and writes the weights there, on the
  // stream memory() names (GradientStaging's).
  absl::Span<float> params() override { return absl::MakeSpan(params_dev_.data(), total_); }
  absl::Span<const float> grads() const override {
    return absl::MakeConstSpan(grads_dev_.data(), total_);
  }
  TensorMemory memory() const override {
    return TensorMemory::Cuda(device_, reinterpret_cast<uintptr_t>(staging_.stream()));
  }

  float TrainStep(const float* x, const uint8_t* labels, int batch,
                  const std::function<void(int)>& on_tensor_ready) override;
  int64_t CountCorrect(const float* x, const uint8_t* labels, int batch) override;
  absl::Status ReadParams(absl::Span<float> host) override;
  absl::Status status() const override { return error_; }

 private:
  struct ConvLayer {
    int in_channels = 0, out_channels = 0, kernel = 0, side = 0;
    int weight = 0, bias = 0;  // Tensor indices.
    kernels::DeviceArray<float> columns, z, pooled;
    kernels::DeviceArray<uint8_t> argmax;
  };

  GpuNet(std::vector<TensorSpec> tensors, int max_batch, int device,
         kernels::CublasHandle cublas, GradientStaging staging);
  absl::Status Allocate();
  int num_fc() const { return static_cast<int>(widths_.size()) - 1; }
  int fc_weight(int l) const { return 2 * (static_cast<int>(conv_.size()) + l - 1); }
  float* param(int t) { return params_dev_.data() + offsets_[t]; }
  float* grad(int t) { return grads_dev_.data() + offsets_[t]; }
  // The input of fc layer l: the flattened last pool (or, for an MLP, x) for l = 1.
  float* fc_input(int l) {
    return l > 1 ? fc_act_[l - 1].data() : (conv_.empty() ? x_.data() : fc_act_[0].data());
  }
  cudaStream_t compute() const { return compute_.get(); }

  absl::Status Upload(const float* x, const uint8_t* labels, int batch);
  absl::Status Forward(int batch);
  // Backward after the loss; marks every gradient produced, appending its tensor to `order`.
  absl::Status Backward(int batch, std::vector<int>* order);
  absl::Status Stage(int t, std::vector<int>* order);
  // Keeps the first error in error_.
  void Fail(absl::Status status);

  std::vector<TensorSpec> tensors_;
  std::vector<size_t> offsets_;
  size_t total_ = 0;
  int max_batch_;
  int device_;
  Stream compute_;  // Before cublas_, which is bound to it: destroyed after the handle.
  kernels::CublasHandle cublas_;
  GradientStaging staging_;
  absl::Status error_;

  PinnedArray<float> x_host_;
  PinnedArray<int32_t> labels_host_;
  PinnedArray<float> out_host_;  // Losses [B], or logits [B, 10] for CountCorrect.
  // params_dev_ is the replica the client writes: the only copy of the weights.
  kernels::DeviceArray<float> params_dev_, grads_dev_, x_, losses_, scratch_;
  kernels::DeviceArray<int32_t> labels_;
  std::vector<ConvLayer> conv_;
  std::vector<int> widths_;  // Fully connected w_0 .. w_L.
  // fc_act_[l], l in [1, L]: [B, w_l], a_l = relu(z_l) (logits for L), then dloss/dz_l;
  // fc_act_[0]: the flattened last pool (CNN only).
  std::vector<kernels::DeviceArray<float>> fc_act_;
};

absl::StatusOr<std::unique_ptr<GpuNet>> GpuNet::Create(std::vector<TensorSpec> tensors,
                                                       int max_batch) {
  int device = 0;
  TAMP_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  TAMP_ASSIGN_OR_RETURN(kernels::CublasHandle cublas, kernels::CublasHandle::Create());
  TAMP_ASSIGN_OR_RETURN(GradientStaging staging, GradientStaging::Create(tensors.size()));
  std::unique_ptr<GpuNet> net(new GpuNet(std::move(tensors), max_batch, device,
                                         std::move(cublas), std::move(staging)));
  TAMP_RETURN_IF_ERROR(net->Allocate());
  return net;
}

GpuNet::GpuNet(std::vector<TensorSpec> tensors, int max_batch, int device,
               kernels::CublasHandle cublas, GradientStaging staging)
    : tensors_(std::move(tensors)),
      max_batch_(max_batch),
      device_(device),
      cublas_(std::move(cublas)),
      staging_(std::move(staging)) {
  for (const TensorSpec& spec : tensors_) {
    offsets_.push_back(total_);
    total_ += spec.elements();
  }
}

absl::Status GpuNet::Allocate() {
  TAMP_RETURN_IF_ERROR(compute_.Init());
  const size_t batch = static_cast<size_t>(max_batch_);
  TAMP_ASSIGN_OR_RETURN(x_host_, PinnedArray<float>::Create(batch * kImageSize));
  TAMP_ASSIGN_OR_RETURN(labels_host_, PinnedArray<int32_t>::Create(batch));
  TAMP_ASSIGN_OR_RETURN(out_host_, PinnedArray<float>::Create(batch * kNumClasses));
  TAMP_ASSIGN_OR_RETURN(params_dev_, kernels::DeviceArray<float>::Create(total_));
  TAMP_ASSIGN_OR_RETURN(grads_dev_, kernels::DeviceArray<float>::Create(total_));
  TAMP_ASSIGN_OR_RETURN(x_, kernels::DeviceArray<float>::Create(batch * kImageSize));
  TAMP_ASSIGN_OR_RETURN(labels_, kernels::DeviceArray<int32_t>::Create(batch));
  TAMP_ASSIGN_OR_RETURN(losses_, kernels::DeviceArray<float>::Create(batch));
  // Zeros, as the CPU models start; on the client's stream, waited for before it writes.
  TAMP_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(params_dev_.data(), 0, total_ * sizeof(float), staging_.stream()));
  TAMP_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(staging_.stream()));

  // Conv layers: the leading 4-d weights (the CPU model's Create has checked the chain).
  int side = kImageSide;
  size_t t = 0;
  for (; t < tensors_.size() && tensors_[t].shape.size() == 4; t += 2) {
    ConvLayer layer;
    layer.out_channels = static_cast<int>(tensors_[t].shape[0]);
    layer.in_channels = static_cast<int>(tensors_[t].shape[1]);
    layer.kernel = static_cast<int>(tensors_[t].shape[2]);
    layer.side = side;
    layer.weight = static_cast<int>(t);
    layer.bias = static_cast<int>(t + 1);
    const size_t plane = static_cast<size_t>(side) * side;
    const size_t pooled = static_cast<size_t>(side / 2) * (side / 2);
    TAMP_ASSIGN_OR_RETURN(layer.columns,
                          kernels::DeviceArray<float>::Create(
                              size_t{1} * layer.in_channels * layer.kernel * layer.kernel *
                              batch * plane));
    TAMP_ASSIGN_OR_RETURN(layer.z, kernels::DeviceArray<float>::Create(
                                       size_t{1} * layer.out_channels * batch * plane));
    TAMP_ASSIGN_OR_RETURN(layer.pooled, kernels::DeviceArray<float>::Create(
                                            size_t{1} * layer.out_channels * batch * pooled));
    TAMP_ASSIGN_OR_RETURN(layer.argmax, kernels::DeviceArray<uint8_t>::Create(
                                            size_t{1} * layer.out_channels * batch * pooled));
    conv_.push_back(std::move(layer));
    side /= 2;
  }
  widths_.push_back(conv_.empty() ? kImageSize : conv_.back().out_channels * side * side);
  for (; t < tensors_.size(); t += 2) widths_.push_back(static_cast<int>(tensors_[t].shape[0]));
  fc_act_.resize(widths_.size());
  int max_input = 0;
  for (int l = 0; l <= num_fc(); ++l) {
    if (l > 0 || !conv_.empty()) {
      TAMP_ASSIGN_OR_RETURN(fc_act_[l], kernels::DeviceArray<float>::Create(batch * widths_[l]));
    }
    if (l < num_fc()) max_input = std::max(max_input, widths_[l]);
  }
  TAMP_ASSIGN_OR_RETURN(scratch_, kernels::DeviceArray<float>::Create(batch * max_input));
  return absl::OkStatus();
}

void GpuNet::Fail(absl::Status status) {
  if (error_.ok()) error_ = std::move(status);
}

absl::Status GpuNet::ReadParams(absl::Span<float> host) {
  if (!error_.ok()) return error_;
  if (host.size() != total_) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReadParams: host buffer holds ", host.size(), " values, params ", total_));
  }
  // On the client's stream, after its last write; compute is idle between calls (each
  // TrainStep and CountCorrect ends with a synchronisation).
  const cudaError_t copied = cudaMemcpyAsync(host.data(), params_dev_.data(),
                                             total_ * sizeof(float), cudaMemcpyDeviceToHost,
                                             staging_.stream());
  if (copied != cudaSuccess) {
    Fail(absl::InternalError(CudaError("ReadParams: cudaMemcpyAsync", copied)));
    return error_;
  }
  const cudaError_t synced = cudaStreamSynchronize(staging_.stream());
  if (synced != cudaSuccess) {
    Fail(absl::InternalError(CudaError("ReadParams: cudaStreamSynchronize", synced)));
    return error_;
  }
  return absl::OkStatus();
}

absl::Status GpuNet::Upload(const float* x, const uint8_t* labels, int batch) {
  CHECK_GE(batch, 1);
  CHECK_LE(batch, max_batch_);
  // Through pinned memory: the copies are asynchronous, and the previous step's copies have
  // finished (each step ends with a synchronisation).
  std::copy(x, x + static_cast<size_t>(batch) * kImageSize, x_host_.data());
  TAMP_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(x_.data(), x_host_.data(),
                                            static_cast<size_t>(batch) * kImageSize *
                                                sizeof(float),
                                            cudaMemcpyHostToDevice, compute()));
  if (labels == nullptr) return absl::OkStatus();
  for (int i = 0; i < batch; ++i) {
    if (labels[i] >= kNumClasses) {  // As the CPU models' CHECK: a caller's bug.
      LOG(FATAL) << "label of example " << i << " is " << int{labels[i]};
    }
    labels_host_.data()[i] = labels[i];
  }
  TAMP_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(labels_.data(), labels_host_.data(),
                                            static_cast<size_t>(batch) * sizeof(int32_t),
                                            cudaMemcpyHostToDevice, compute()));
  return absl::OkStatus();
}

absl::Status GpuNet::Forward(int batch) {
  const float* in = x_.data();
  for (ConvLayer& layer : conv_) {
    const size_t n = static_cast<size_t>(batch) * layer.side * layer.side;
    TAMP_RETURN_IF_ERROR(kernels::ConvForward(cublas_, in, param(layer.weight),
                                              layer.in_channels, layer.out_channels, batch,
                                              layer.side, layer.kernel, layer.columns.data(),
                                              layer.z.data(), compute()));
    TAMP_RETURN_IF_ERROR(kernels::ConvBiasRelu(layer.z.data(), param(layer.bias),
                                               layer.out_channels, n, compute()));
    TAMP_RETURN_IF_ERROR(kernels::MaxPool2x2Forward(layer.z.data(), layer.out_channels * batch,
                                                    layer.side, layer.pooled.data(),
                                                    layer.argmax.data(), compute()));
    in = layer.pooled.data();
  }
  if (!conv_.empty()) {
    const ConvLayer& last = conv_.back();
    TAMP_RETURN_IF_ERROR(kernels::FlattenChannelMajor(
        in, last.out_channels, batch, static_cast<size_t>(last.side / 2) * (last.side / 2),
        fc_act_[0].data(), compute()));
  }
  for (int l = 1; l <= num_fc(); ++l) {
    float* z = fc_act_[l].data();
    TAMP_RETURN_IF_ERROR(kernels::LinearForward(cublas_, fc_input(l), param(fc_weight(l)),
                                                param(fc_weight(l) + 1), z, batch,
                                                widths_[l - 1], widths_[l], compute()));
    if (l < num_fc()) {
      TAMP_RETURN_IF_ERROR(
          kernels::ReluForward(z, z, static_cast<size_t>(batch) * widths_[l], compute()));
    }
  }
  return absl::OkStatus();
}

absl::Status GpuNet::Stage(int t, std::vector<int>* order) {
  TAMP_RETURN_IF_ERROR(staging_.Produced(t, compute()));
  order->push_back(t);
  return absl::OkStatus();
}

absl::Status GpuNet::Backward(int batch, std::vector<int>* order) {
  // Fully connected layers, last first; on entry to layer l, fc_act_[l] holds dz_l.
  for (int l = num_fc(); l >= 1; --l) {
    const int n_in = widths_[l - 1], n_out = widths_[l];
    const int w = fc_weight(l), b = w + 1;
    const float* dz = fc_act_[l].data();
    TAMP_RETURN_IF_ERROR(kernels::BiasGrad(dz, grad(b), batch, n_out, false, compute()));
    TAMP_RETURN_IF_ERROR(Stage(b, order));
    TAMP_RETURN_IF_ERROR(kernels::LinearBackwardParams(cublas_, fc_input(l), dz, grad(w),
                                                       nullptr, batch, n_in, n_out, false,
                                                       compute()));
    TAMP_RETURN_IF_ERROR(Stage(w, order));
    if (l == 1 && conv_.empty()) return absl::OkStatus();  // No gradient for the input.
    // da_{l-1} = dz_l W_l, masked by relu' into fc_act_[l-1] (l > 1), or for l = 1 the
    // gradient of the flattened pool, left in scratch_.
    TAMP_RETURN_IF_ERROR(kernels::LinearBackwardInput(cublas_, dz, param(w), scratch_.data(),
                                                      batch, n_in, n_out, compute()));
    if (l > 1) {
      float* a = fc_act_[l - 1].data();
      TAMP_RETURN_IF_ERROR(kernels::ReluBackward(a, scratch_.data(), a,
                                                 static_cast<size_t>(batch) * n_in, compute()));
    }
  }
  const ConvLayer& last = conv_.back();
  TAMP_RETURN_IF_ERROR(kernels::UnflattenChannelMajor(
      scratch_.data(), last.out_channels, batch,
      static_cast<size_t>(last.side / 2) * (last.side / 2), conv_.back().pooled.data(),
      compute()));
  for (int i = static_cast<int>(conv_.size()) - 1; i >= 0; --i) {
    ConvLayer& layer = conv_[i];
    const size_t n = static_cast<size_t>(batch) * layer.side * layer.side;
    float* dz = layer.z.data();
    TAMP_RETURN_IF_ERROR(kernels::MaxPoolReluBackward(layer.pooled.data(), layer.argmax.data(),
                                                      layer.out_channels * batch, layer.side,
                                                      dz, compute()));
    TAMP_RETURN_IF_ERROR(
        kernels::ConvBiasGrad(dz, layer.out_channels, n, grad(layer.bias), compute()));
    TAMP_RETURN_IF_ERROR(Stage(layer.bias, order));
    TAMP_RETURN_IF_ERROR(kernels::ConvBackwardWeights(
        cublas_, dz, layer.columns.data(), layer.in_channels, layer.out_channels, batch,
        layer.side, layer.kernel, grad(layer.weight), compute()));
    TAMP_RETURN_IF_ERROR(Stage(layer.weight, order));
    if (i == 0) break;
    TAMP_RETURN_IF_ERROR(kernels::ConvBackwardData(
        cublas_, param(layer.weight), dz, layer.in_channels, layer.out_channels, batch,
        layer.side, layer.kernel, layer.columns.data(), conv_[i - 1].pooled.data(), compute()));
  }
  return absl::OkStatus();
}

float GpuNet::TrainStep(const float* x, const uint8_t* labels, int batch,
                        const std::function<void(int)>& on_tensor_ready) {
  constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
  if (!error_.ok()) return kNan;
  // Everything is enqueued first (the host runs ahead of the GPU); then each gradient goes
  // to on_tensor_ready in backward's order, handed to the staging stream on the device, so
  // the client's encode of it waits for that gradient alone while the GPU computes the
  // layers below.
  std::vector<int> order;
  order.reserve(tensors_.size());
  absl::Status enqueued = [&]() -> absl::Status {
    TAMP_RETURN_IF_ERROR(Upload(x, labels, batch));
    TAMP_RETURN_IF_ERROR(Forward(batch));
    float* logits = fc_act_[num_fc()].data();
    TAMP_RETURN_IF_ERROR(kernels::SoftmaxCrossEntropy(logits, labels_.data(), losses_.data(),
                                                      logits, batch, kNumClasses, compute()));
    TAMP_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out_host_.data(), losses_.data(),
                                              static_cast<size_t>(batch) * sizeof(float),
                                              cudaMemcpyDeviceToHost, compute()));
    return Backward(batch, &order);
  }();
  if (enqueued.ok()) {
    for (int t : order) {
      const absl::Status handed = staging_.HandOff(t);
      if (!handed.ok()) {
        Fail(handed);
        return kNan;
      }
      if (on_tensor_ready) on_tensor_ready(t);
    }
  }
  if (!enqueued.ok()) {
    Fail(enqueued);
    return kNan;
  }
  if (const cudaError_t synced = cudaStreamSynchronize(compute()); synced != cudaSuccess) {
    Fail(absl::InternalError(CudaError("TrainStep: cudaStreamSynchronize", synced)));
    return kNan;
  }
  double loss_sum = 0.0;  // As the CPU models: the per-example losses summed in double.
  for (int i = 0; i < batch; ++i) loss_sum += out_host_.data()[i];
  return static_cast<float>(loss_sum / batch);
}

int64_t GpuNet::CountCorrect(const float* x, const uint8_t* labels, int batch) {
  if (!error_.ok()) return 0;
  const absl::Status done = [&]() -> absl::Status {
    TAMP_RETURN_IF_ERROR(Upload(x, nullptr, batch));
    TAMP_RETURN_IF_ERROR(Forward(batch));
    TAMP_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        out_host_.data(), fc_act_[num_fc()].data(),
        static_cast<size_t>(batch) * kNumClasses * sizeof(float), cudaMemcpyDeviceToHost,
        compute()));
    TAMP_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(compute()));
    return absl::OkStatus();
  }();
  if (!done.ok()) {
    Fail(done);
    return 0;
  }
  int64_t correct = 0;
  for (int i = 0; i < batch; ++i) {
    const float* z = out_host_.data() + static_cast<size_t>(i) * kNumClasses;
    if (std::max_element(z, z + kNumClasses) - z == labels[i]) ++correct;
  }
  return correct;
}

}  // namespace

absl::StatusOr<int> SelectCudaDevice(uint32_t local_rank) {
  int count = 0;
  if (const cudaError_t error = cudaGetDeviceCount(&count); error != cudaSuccess) {
    return absl::FailedPreconditionError(CudaError("cudaGetDeviceCount", error));
  }
  if (count < 1) return absl::FailedPreconditionError("cudaGetDeviceCount: no devices");
  const int device = static_cast<int>(local_rank % static_cast<uint32_t>(count));
  if (local_rank >= static_cast<uint32_t>(count)) {
    LOG(WARNING) << "local rank " << local_rank << " shares GPU " << device << ": this host shows "
                 << count << " GPU(s) to more workers";
  }
  cudaDeviceProp prop;
  if (const cudaError_t error = cudaGetDeviceProperties(&prop, device); error != cudaSuccess) {
    return absl::FailedPreconditionError(CudaError("cudaGetDeviceProperties", error));
  }
  const int capability = 10 * prop.major + prop.minor;
  if (capability < kernels::kMinComputeCapability) {
    return absl::FailedPreconditionError(
        absl::StrCat("device ", device, " (", prop.name, ") is sm_", capability,
                     "; the kernels need sm_", kernels::kMinComputeCapability, " or newer"));
  }
  if (const cudaError_t error = cudaSetDevice(device); error != cudaSuccess) {
    return absl::FailedPreconditionError(CudaError("cudaSetDevice", error));
  }
  return device;
}

#else  // !TAMP_HAVE_CUDA

namespace {
constexpr char kBuiltWithoutCuda[] =
    "this tamp_worker was built without CUDA (no toolkit where it was built, or "
    "TAMP_DISABLE_CUDA=1)";
}  // namespace

absl::StatusOr<int> SelectCudaDevice(uint32_t) {
  return absl::FailedPreconditionError(kBuiltWithoutCuda);
}

#endif  // TAMP_HAVE_CUDA

absl::StatusOr<std::unique_ptr<Model>> CreateGpuModel(const config::Model& config,
                                                      std::vector<TensorSpec> tensors,
                                                      int max_batch) {
  if (config.kind() != config::Model::MLP && config.kind() != config::Model::CNN) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.kind: no GPU model for ", config::Model::Kind_Name(config.kind())));
  }
  // One set of rules for the tensor chain: the CPU model's (it allocates for one example).
  if (absl::StatusOr<std::unique_ptr<Model>> checked = CreateCpuModel(config, tensors, 1);
      !checked.ok()) {
    return checked.status();
  }
  if (max_batch < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_batch must be >= 1, got ", max_batch));
  }
#if TAMP_HAVE_CUDA
  absl::StatusOr<std::unique_ptr<GpuNet>> net = GpuNet::Create(std::move(tensors), max_batch);
  if (!net.ok()) return net.status();
  return std::unique_ptr<Model>(std::move(*net));
#else
  return absl::FailedPreconditionError(kBuiltWithoutCuda);
#endif
}

}  // namespace tamp

// The built-in MLP and CNN on a CUDA device (config `device: CUDA`, worker/worker_main.cc).
//
// Contents:
//   SelectCudaDevice(local_rank)   the GPU this worker takes, made current; the first CUDA call
//   CreateGpuModel(...)            the Model (worker/model.h) of the config on that GPU
//
// The math is worker/mlp_cpu.h's and worker/cnn_cpu.h's, layer for layer, on the GPU:
// cuBLAS for the matrix work (kernels/layers.h), the kernels of kernels/cnn_layers.h for
// convolution and pooling. Forward and backward run on a compute stream. The weights and
// gradients stay on the device: params() and grads() are device spans, memory() is
// TensorMemory::Cuda(this GPU, the staging stream), and the worker client's device path
// (worker/client.h, worker/device_backend.h) reads and writes them there. As backward
// produces a tensor's gradient, GradientStaging (worker/internal/gradient_staging.h) makes
// the staging stream wait for it on the device, and TrainStep hands it to on_tensor_ready
// while the GPU goes on with backward: the client encodes it on that stream with
// compress/cuda/'s codecs (or, for a codec without a GPU version such as powersgd, copies
// it through pinned memory and encodes it on the host), so only payloads cross PCIe.
//
// The client decodes the shards' answers into params() on the device (or, for a pull codec
// without a GPU version, on the host, copying the chunk there and back): nothing copies the
// whole replica per step. Every worker, GPU or CPU, holds the same bytes: the GPU decodes
// are byte-identical to the CPU codecs' (compress/cuda/, tested against them) and the
// update is the same fp32 add (w += u, rounded once; --fmad=false), so each replica is the
// same sequence of adds from the same start, and a resync or rejoin copies the shards'
// exact weights in. ReadParams() copies the weights to the host (--dump_weights).
//
// Builds without CUDA (tools/cuda.bzl) keep both functions; they return FAILED_PRECONDITION
// ("this tamp_worker was built without CUDA ...").
//
// Threading: as worker/model.h. CUDA starts in SelectCudaDevice(), never before it: a
// process that forks (tamp run) does so before any CUDA call.
//
// Example:
//   TAMP_ASSIGN_OR_RETURN(int gpu, SelectCudaDevice(placement.local_rank));
//   TAMP_ASSIGN_OR_RETURN(auto model, CreateGpuModel(config.model(), tensors, 64));
#ifndef TAMP_WORKER_GPU_MODEL_H_
#define TAMP_WORKER_GPU_MODEL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "job/model_layout.h"
#include "proto/config.pb.h"
#include "worker/model.h"

namespace tamp {

// SelectCudaDevice()
//
// Device local_rank % (visible devices): workers on one host each take their own GPU, and
// wrap around when there are more workers than GPUs (logged). Makes it the calling thread's
// current device. FAILED_PRECONDITION, the message the one-line cause ("cudaGetDeviceCount:
// cudaErrorNoDevice (no CUDA-capable device is detected)", "device 0 (Tesla T4) is sm_75;
// the kernels need sm_80 or newer", "this tamp_worker was built without CUDA ..."), when
// there is no usable device.
absl::StatusOr<int> SelectCudaDevice(uint32_t local_rank);

// CreateGpuModel()
//
// The MLP or CNN of `config` (its tensors: ModelTensors(config), checked as the CPU models
// check them, errors naming the tensor) for batches of up to max_batch, on the current
// device. Parameters start at zero. RESOURCE_EXHAUSTED when the device is out of memory;
// INVALID_ARGUMENT for another model kind.
absl::StatusOr<std::unique_ptr<Model>> CreateGpuModel(const config::Model& config,
                                                      std::vector<TensorSpec> tensors,
                                                      int max_batch);

}  // namespace tamp

#endif  // TAMP_WORKER_GPU_MODEL_H_

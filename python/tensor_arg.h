// TensorArg: a Python array seen as the fp32 elements the client reads or writes, without a
// copy, through the buffer protocol (numpy arrays, torch CPU tensors' .numpy() views, any
// memoryview), DLPack's `__dlpack__()` (torch, JAX, CuPy, numpy) or a DLPack capsule itself
// (the legacy interface: torch.utils.dlpack.to_dlpack(t), cupy's toDlpack()), in host memory
// or on a CUDA device (DLPack kDLCUDA).
//
// The array must be fp32, C-contiguous (row major, the layout's order) and, where the client
// writes it, writable (the buffer protocol says so; DLPack 0.x cannot). A refusal is
// INVALID_ARGUMENT naming the tensor and the problem. A CUDA array is first checked against
// this process (worker/cuda_backend.h CheckCudaTensor: FAILED_PRECONDITION, 'tensor "w" is on
// cuda:0 but this process sees no CUDA device (...)') from `__dlpack_device__()`, before it
// is exported; then exported with `__dlpack__(stream=S)`, S the caller's stream, so that the
// producer orders its pending work on the array before what the client enqueues on S.
// A capsule was exported without a stream: its device memory is taken as ready on the legacy
// default stream. The client reads a capsule and leaves it unconsumed (named "dltensor"), so
// its producer's destructor frees it; a host tensor's capsule costs its producer less than
// the two Python calls `__dlpack_device__()` and `__dlpack__()` (tamp.torch passes its CPU
// tensors so, 18 of them a step for the examples' MLP).
//
// Blocking and threading: From() needs the GIL; the span may be used without it (the view
// holds the exporter's buffer or capsule, and so the memory, until destruction). Destroy
// with the GIL held.
//
// Example:
//   TAMP_ASSIGN_OR_RETURN(TensorArgs out, TensorArgs::From(list, names, Access::kWrite, s));
//   { py::gil_scoped_release release; status = client.Wait(out.spans(), out.memory()); }
#ifndef TAMP_PYTHON_TENSOR_ARG_H_
#define TAMP_PYTHON_TENSOR_ARG_H_

#include <Python.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "job/model_layout.h"
#include "worker/device_backend.h"

namespace tamp::python {

enum class Access { kRead, kWrite };

class TensorArg {
 public:
  // A view of `array`; `name` is the tensor's, for errors. The client checks the size.
  // `stream`: the caller's CUDA stream, with DLPack's numbering (1: the legacy default).
  static absl::StatusOr<TensorArg> From(PyObject* array, absl::string_view name,
                                        Access access, uintptr_t stream = 1);
  TensorArg(TensorArg&& other) noexcept;
  TensorArg& operator=(TensorArg&&) = delete;
  ~TensorArg();

  absl::Span<float> span() const { return span_; }
  // INVALID_ARGUMENT naming the tensor unless the array has the `registered` shape or is
  // flat (one dimension: the client checks its size): a [6, 4] array for a [4, 6] tensor has
  // the right size and the wrong layout.
  absl::Status CheckShape(absl::string_view name, absl::Span<const int64_t> registered) const;
  // Where span() lies (host, or a CUDA device with the caller's stream).
  const TensorMemory& memory() const { return memory_; }

 private:
  TensorArg() = default;
  static absl::StatusOr<TensorArg> FromBuffer(PyObject* array, absl::string_view name,
                                              Access access);
  static absl::StatusOr<TensorArg> FromDlpack(PyObject* array, absl::string_view name,
                                              uintptr_t stream);
  // Takes `capsule` (a new reference to a valid "dltensor" capsule); `device_checked`: a CUDA
  // tensor's device was checked and exported onto `stream`. `what` names it in errors.
  static absl::StatusOr<TensorArg> FromCapsule(PyObject* capsule, absl::string_view name,
                                               uintptr_t stream, bool device_checked,
                                               absl::string_view what);

  absl::Span<float> span_;
  TensorMemory memory_;
  // The array's shape (its first kMaxTensorDims extents, a layout's most; ndim_ may be larger).
  std::array<int64_t, kMaxTensorDims> dims_{};
  int ndim_ = 0;
  bool has_buffer_ = false;
  Py_buffer buffer_{};         // Released at destruction when has_buffer_.
  PyObject* capsule_ = nullptr;  // Owned reference to a "dltensor" capsule, or null.
};

// The views of a list of arrays, one per layout tensor, in layout order.
class TensorArgs {
 public:
  // `arrays` must be a sequence of names.size() arrays, all in one place (host memory, or
  // one CUDA device); errors name the tensor.
  // `shapes`: the job's, by tensor (TensorArg::CheckShape()).
  static absl::StatusOr<TensorArgs> From(PyObject* arrays, absl::Span<const std::string> names,
                                         absl::Span<const std::vector<int64_t>> shapes,
                                         Access access, uintptr_t stream = 1);

  absl::Span<const absl::Span<float>> spans() const { return spans_; }
  const TensorMemory& memory() const { return memory_; }

 private:
  std::vector<TensorArg> args_;
  std::vector<absl::Span<float>> spans_;
  TensorMemory memory_;
};

}  // namespace tamp::python

#endif  // TAMP_PYTHON_TENSOR_ARG_H_

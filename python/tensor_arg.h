// TensorArg: a Python array seen as the fp32 elements the client reads or writes, without a
// copy, through the buffer protocol (numpy arrays, torch CPU tensors' .numpy() views, any
// memoryview) or DLPack's `__dlpack__()` (torch, JAX, CuPy host arrays, numpy).
//
// The array must be fp32, C-contiguous (row major, the layout's order), in host memory and,
// where the client writes it, writable (the buffer protocol says so; DLPack 0.x cannot). A
// refusal is INVALID_ARGUMENT naming the tensor and the problem.
//
// Blocking and threading: From() needs the GIL; the span may be used without it (the view
// holds the exporter's buffer or capsule, and so the memory, until destruction). Destroy
// with the GIL held.
//
// Example:
//   TAMP_ASSIGN_OR_RETURN(TensorArgs grads, TensorArgs::From(list, names, Access::kRead));
//   { py::gil_scoped_release release; status = client.Wait(grads.spans()); }
#ifndef TAMP_PYTHON_TENSOR_ARG_H_
#define TAMP_PYTHON_TENSOR_ARG_H_

#include <Python.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace tamp::python {

enum class Access { kRead, kWrite };

class TensorArg {
 public:
  // A view of `array`; `name` is the tensor's, for errors. The client checks the size.
  static absl::StatusOr<TensorArg> From(PyObject* array, absl::string_view name,
                                        Access access);
  TensorArg(TensorArg&& other) noexcept;
  TensorArg& operator=(TensorArg&&) = delete;
  ~TensorArg();

  absl::Span<float> span() const { return span_; }

 private:
  TensorArg() = default;
  static absl::StatusOr<TensorArg> FromBuffer(PyObject* array, absl::string_view name,
                                              Access access);
  static absl::StatusOr<TensorArg> FromDlpack(PyObject* array, absl::string_view name);

  absl::Span<float> span_;
  bool has_buffer_ = false;
  Py_buffer buffer_{};         // Released at destruction when has_buffer_.
  PyObject* capsule_ = nullptr;  // Owned reference to a "dltensor" capsule, or null.
};

// The views of a list of arrays, one per layout tensor, in layout order.
class TensorArgs {
 public:
  // `arrays` must be a sequence of names.size() arrays; errors name the tensor.
  static absl::StatusOr<TensorArgs> From(PyObject* arrays, absl::Span<const std::string> names,
                                         Access access);

  absl::Span<const absl::Span<float>> spans() const { return spans_; }

 private:
  std::vector<TensorArg> args_;
  std::vector<absl::Span<float>> spans_;
};

}  // namespace tamp::python

#endif  // TAMP_PYTHON_TENSOR_ARG_H_

#include "python/tensor_arg.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "python/dlpack.h"
#include "worker/cuda_backend.h"

namespace tamp::python {
namespace {

// numpy's and torch's name of a DLPack element type: "float64", "int32", "bool", "float16x4"
// (lanes), "DLPack type code 3, 64 bits" for a code without one.
std::string DLPackTypeName(const dlpack::DLDataType& type) {
  const char* kind = type.code == dlpack::kDLInt       ? "int"
                     : type.code == dlpack::kDLUInt    ? "uint"
                     : type.code == dlpack::kDLFloat   ? "float"
                     : type.code == dlpack::kDLBfloat  ? "bfloat"
                     : type.code == dlpack::kDLComplex ? "complex"
                                                       : nullptr;
  std::string name = type.code == dlpack::kDLBool ? std::string("bool")
                     : kind != nullptr ? absl::StrCat(kind, int{type.bits})
                                       : absl::StrCat("DLPack type code ", int{type.code}, ", ",
                                                      int{type.bits}, " bits");
  if (type.lanes != 1) absl::StrAppend(&name, "x", type.lanes);
  return name;
}

absl::Status Refuse(absl::string_view name, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("tensor \"", name, "\": ", problem));
}

// The type name of `object`, for errors ("torch.Tensor", "numpy.ndarray").
std::string TypeName(PyObject* object) {
  PyTypeObject* type = Py_TYPE(object);
  PyObject* module = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__module__");
  std::string name = type->tp_name;
  if (module != nullptr && PyUnicode_Check(module)) {
    const char* text = PyUnicode_AsUTF8(module);
    if (text != nullptr && std::strcmp(text, "builtins") != 0 && name.find('.') == std::string::npos) {
      name = absl::StrCat(text, ".", name);
    }
  }
  Py_XDECREF(module);
  PyErr_Clear();
  return name;
}

// The pending Python error's message (and clears it).
std::string TakePythonError() {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  std::string message = "unknown error";
  if (value != nullptr) {
    PyObject* text = PyObject_Str(value);
    if (text != nullptr && PyUnicode_AsUTF8(text) != nullptr) message = PyUnicode_AsUTF8(text);
    Py_XDECREF(text);
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  PyErr_Clear();
  return message;
}

bool IsFloat32Format(const char* format) {
  // struct-module codes: native, native-aligned or little-endian float (x86-64, aarch64).
  return format != nullptr && (std::strcmp(format, "f") == 0 || std::strcmp(format, "=f") == 0 ||
                               std::strcmp(format, "<f") == 0 || std::strcmp(format, "@f") == 0);
}

}  // namespace

TensorArg::TensorArg(TensorArg&& other) noexcept
    : span_(other.span_),
      memory_(other.memory_),
      dims_(other.dims_),
      ndim_(other.ndim_),
      has_buffer_(std::exchange(other.has_buffer_, false)),
      buffer_(other.buffer_),
      capsule_(std::exchange(other.capsule_, nullptr)) {}

TensorArg::~TensorArg() {
  if (has_buffer_) PyBuffer_Release(&buffer_);
  Py_XDECREF(capsule_);
}

absl::StatusOr<TensorArg> TensorArg::From(PyObject* array, absl::string_view name, Access access,
                                          uintptr_t stream) {
  // The buffer protocol first: it says whether the memory is writable, DLPack 0.x does not.
  if (PyObject_CheckBuffer(array)) return FromBuffer(array, name, access);
  if (PyCapsule_CheckExact(array)) {
    if (!PyCapsule_IsValid(array, dlpack::kCapsuleName)) {
      const char* capsule_name = PyCapsule_GetName(array);
      PyErr_Clear();
      return Refuse(name, absl::StrCat("a capsule named \"", capsule_name ? capsule_name : "",
                                       "\" is not a DLPack tensor (\"", dlpack::kCapsuleName,
                                       "\"; \"used_dltensor\" is one already consumed)"));
    }
    Py_INCREF(array);
    return FromCapsule(array, name, stream, /*device_checked=*/false, "DLPack capsule");
  }
  if (PyObject_HasAttrString(array, "__dlpack__")) return FromDlpack(array, name, stream);
  return Refuse(name, absl::StrCat("a ", TypeName(array),
                                   " is neither a buffer (numpy array, memoryview) nor a DLPack "
                                   "array (__dlpack__) or capsule"));
}

absl::StatusOr<TensorArg> TensorArg::FromBuffer(PyObject* array, absl::string_view name,
                                                Access access) {
  TensorArg arg;
  if (PyObject_GetBuffer(array, &arg.buffer_, PyBUF_RECORDS_RO) != 0) {
    return Refuse(name, TakePythonError());
  }
  arg.has_buffer_ = true;  // From here on, the destructor releases it.
  const Py_buffer& view = arg.buffer_;
  if (!IsFloat32Format(view.format) || view.itemsize != 4) {
    return Refuse(name, absl::StrCat("expected float32 elements, got a ", TypeName(array),
                                     " of format '", view.format ? view.format : "B",
                                     "' (", view.itemsize, "-byte items)"));
  }
  if (!PyBuffer_IsContiguous(&view, 'C')) {
    return Refuse(name, absl::StrCat("the ", TypeName(array),
                                     " is not C-contiguous; pass a contiguous copy"));
  }
  if (access == Access::kWrite && view.readonly) {
    return Refuse(name, absl::StrCat("the ", TypeName(array),
                                     " is read-only, and the client writes into it"));
  }
  arg.span_ = absl::Span<float>(static_cast<float*>(view.buf), static_cast<size_t>(view.len / 4));
  arg.ndim_ = view.ndim;
  for (int d = 0; d < std::min(view.ndim, kMaxTensorDims); ++d) arg.dims_[d] = view.shape[d];
  return arg;
}

absl::StatusOr<TensorArg> TensorArg::FromDlpack(PyObject* array, absl::string_view name,
                                                uintptr_t stream) {
  // A CUDA array is checked against this process before it is exported, and exported onto
  // the caller's stream. Without __dlpack_device__ (DLPack < 0.6) it comes out as the
  // producer pleases: ready on the legacy default stream (stream=None).
  bool on_cuda = false;
  if (PyObject_HasAttrString(array, "__dlpack_device__")) {
    PyObject* device = PyObject_CallMethod(array, "__dlpack_device__", nullptr);
    if (device == nullptr) return Refuse(name, TakePythonError());
    int device_type = 0, device_id = 0;
    const bool parsed = PyArg_ParseTuple(device, "ii", &device_type, &device_id) != 0;
    Py_DECREF(device);
    if (!parsed) {
      return Refuse(name, absl::StrCat("__dlpack_device__() of a ", TypeName(array),
                                       " is not a (device_type, device_id) pair: ",
                                       TakePythonError()));
    }
    on_cuda = device_type == dlpack::kDLCUDA;
    if (on_cuda) TAMP_RETURN_IF_ERROR(CheckCudaTensor(name, device_id));
  }
  PyObject* capsule = on_cuda ? PyObject_CallMethod(array, "__dlpack__", "(K)",
                                                    static_cast<unsigned long long>(stream))
                              : PyObject_CallMethod(array, "__dlpack__", nullptr);
  if (capsule == nullptr) return Refuse(name, TakePythonError());
  if (!PyCapsule_IsValid(capsule, dlpack::kCapsuleName)) {
    Py_DECREF(capsule);
    return Refuse(name, absl::StrCat("__dlpack__() of a ", TypeName(array),
                                     " did not return a \"dltensor\" capsule"));
  }
  return FromCapsule(capsule, name, stream, on_cuda, TypeName(array));
}

absl::StatusOr<TensorArg> TensorArg::FromCapsule(PyObject* capsule, absl::string_view name,
                                                 uintptr_t stream, bool device_checked,
                                                 absl::string_view what) {
  TensorArg arg;
  arg.capsule_ = capsule;  // From here on, the destructor releases it.
  const dlpack::DLTensor& tensor = static_cast<dlpack::DLManagedTensor*>(
      PyCapsule_GetPointer(capsule, dlpack::kCapsuleName))->dl_tensor;
  const int32_t device = tensor.device.device_type;
  if (device == dlpack::kDLCUDA) {
    if (!device_checked) {
      TAMP_RETURN_IF_ERROR(CheckCudaTensor(name, tensor.device.device_id));
      stream = 1;  // What the producer assumed, exporting without a stream.
    }
    arg.memory_ = TensorMemory::Cuda(tensor.device.device_id, stream);
  } else if (device != dlpack::kDLCPU && device != dlpack::kDLCUDAHost &&
             device != dlpack::kDLROCMHost) {
    return Refuse(name, absl::StrCat("the ", what, " is on DLPack device type ", device,
                                     "; the client takes host memory and CUDA devices"));
  }
  if (tensor.dtype.code != dlpack::kDLFloat || tensor.dtype.bits != 32 || tensor.dtype.lanes != 1) {
    return Refuse(name, absl::StrCat("expected float32 elements, got a ", what, " of ",
                                     DLPackTypeName(tensor.dtype), " (DLPack)"));
  }
  int64_t elements = 1;
  for (int32_t d = 0; d < tensor.ndim; ++d) elements *= tensor.shape[d];
  if (tensor.strides != nullptr && elements > 1) {
    // Row major: each dimension's stride is the product of the later extents; a dimension
    // of extent 1 may carry any stride.
    int64_t expected = 1;
    for (int32_t d = tensor.ndim - 1; d >= 0; --d) {
      if (tensor.shape[d] != 1 && tensor.strides[d] != expected) {
        return Refuse(name, absl::StrCat("the ", what,
                                         " is not C-contiguous; pass a contiguous copy"));
      }
      expected *= tensor.shape[d];
    }
  }
  float* data = reinterpret_cast<float*>(static_cast<char*>(tensor.data) + tensor.byte_offset);
  arg.span_ = absl::Span<float>(data, static_cast<size_t>(elements));
  arg.ndim_ = tensor.ndim;
  for (int d = 0; d < std::min<int>(tensor.ndim, kMaxTensorDims); ++d) arg.dims_[d] = tensor.shape[d];
  return arg;
}

absl::Status TensorArg::CheckShape(absl::string_view name,
                                   absl::Span<const int64_t> registered) const {
  if (ndim_ == 1 ||
      (static_cast<size_t>(ndim_) == registered.size() && ndim_ <= kMaxTensorDims &&
       std::equal(registered.begin(), registered.end(), dims_.begin()))) {
    return absl::OkStatus();
  }
  auto shape = [](auto dims) { return absl::StrCat("[", absl::StrJoin(dims, ", "), "]"); };
  return Refuse(name, absl::StrCat(
      "shape ",
      ndim_ <= kMaxTensorDims ? shape(absl::MakeConstSpan(dims_.data(), ndim_))
                        : absl::StrCat("of ", ndim_, " dimensions"),
      ", but the job registered ", shape(registered),
      ": pass that shape, or a flat array of its elements"));
}

absl::StatusOr<TensorArgs> TensorArgs::From(PyObject* arrays, absl::Span<const std::string> names,
                                            absl::Span<const std::vector<int64_t>> shapes,
                                            Access access, uintptr_t stream) {
  PyObject* sequence = PySequence_Fast(arrays, "expected a list of tensors");
  if (sequence == nullptr) return absl::InvalidArgumentError(TakePythonError());
  const Py_ssize_t count = PySequence_Fast_GET_SIZE(sequence);
  TensorArgs args;
  absl::Status status;
  if (static_cast<size_t>(count) != names.size()) {
    status = absl::InvalidArgumentError(absl::StrCat("expected ", names.size(),
                                                     " tensors (the job's, in its order), got ",
                                                     count));
  }
  args.args_.reserve(names.size());
  for (Py_ssize_t t = 0; status.ok() && t < count; ++t) {
    absl::StatusOr<TensorArg> arg =
        TensorArg::From(PySequence_Fast_GET_ITEM(sequence, t), names[t], access, stream);
    if (!arg.ok()) {
      status = arg.status();
    } else if (absl::Status shaped = arg->CheckShape(names[t], shapes[t]); !shaped.ok()) {
      status = shaped;
    } else if (t > 0 && !arg->memory().SameDevice(args.memory_)) {
      status = Refuse(names[t], absl::StrCat("on ", arg->memory().Name(), " but tensor \"",
                                             names[0], "\" is on ", args.memory_.Name(),
                                             ": one call's tensors must be in one place"));
    } else {
      args.memory_ = arg->memory();
      args.spans_.push_back(arg->span());
      args.args_.push_back(*std::move(arg));
    }
  }
  Py_DECREF(sequence);
  if (!status.ok()) return status;
  return args;
}

}  // namespace tamp::python

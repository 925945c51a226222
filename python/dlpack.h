// The DLPack ABI (v0.x, the one `__dlpack__` capsules carry), declared from the DLPack
// specification (https://dmlc.github.io/dlpack/latest/c_api.html) so the binding needs no
// DLPack package. Only what the binding reads is declared; layouts match the spec's C structs.
//
// A producer's `__dlpack__()` returns a PyCapsule named "dltensor" holding a DLManagedTensor*.
// A consumer that does not rename the capsule leaves its ownership with the producer: the
// capsule's destructor calls `deleter`. The binding does that, holding the capsule (and so the
// memory) for the duration of one call.
#ifndef TAMP_PYTHON_DLPACK_H_
#define TAMP_PYTHON_DLPACK_H_

#include <cstdint>

namespace tamp::dlpack {

inline constexpr char kCapsuleName[] = "dltensor";

// DLDeviceType values the binding accepts: memory the CPU can read and write, and CUDA
// device memory.
inline constexpr int32_t kDLCPU = 1;
inline constexpr int32_t kDLCUDA = 2;
inline constexpr int32_t kDLCUDAHost = 3;  // Pinned host memory.
inline constexpr int32_t kDLROCMHost = 11;

// DLDataTypeCode
inline constexpr uint8_t kDLInt = 0;
inline constexpr uint8_t kDLUInt = 1;
inline constexpr uint8_t kDLFloat = 2;
inline constexpr uint8_t kDLBfloat = 4;
inline constexpr uint8_t kDLComplex = 5;
inline constexpr uint8_t kDLBool = 6;

struct DLDevice {
  int32_t device_type;  // DLDeviceType, a C enum (int).
  int32_t device_id;
};

struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // In elements; null means compact row major.
  uint64_t byte_offset;
};

struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

}  // namespace tamp::dlpack

#endif  // TAMP_PYTHON_DLPACK_H_

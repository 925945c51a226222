// Test helpers for CUDA code: skipping without a device, and GPU-vs-CPU comparisons.
//
// Contents:
//   TAMP_SKIP_WITHOUT_CUDA()     GTEST_SKIP()s with "no CUDA device: skipping (<reason>)", or
//                                fails where kernels::CudaRequired() (TAMP_REQUIRE_CUDA=1)
//   CompareClose()               |gpu - cpu| <= abs_tol + rel_tol * |cpu| everywhere, else
//                                a failure listing the first mismatches (llm.c's
//                                validate_result)
//   CompareBitwise()             bit-identical floats (NaN == NaN whatever the payload)
//   CompareBytes()               identical byte strings; names the first differing bytes
//   Synchronize(), Allocate(), Upload(), Download()
//                                device arrays and host vector <-> DeviceArray, synchronously
//                                (CUDA builds); Upload()/Download() also as values that
//                                record a failure with ADD_FAILURE()
//
// Each returns a ::testing::AssertionResult, never CHECKs (a device fault fails the test, not
// the binary), so use them as
//   ASSERT_TRUE(Upload<float>(x, &d_x));
//   EXPECT_TRUE(CompareClose("dW", d_dw, cpu, 1e-5, 1e-4));   // A DeviceArray or a host span.
//
// Works in every build: the comparisons are plain C++, and TAMP_SKIP_WITHOUT_CUDA() skips
// when the build has no CUDA at all.
#ifndef TAMP_KERNELS_CUDA_TESTING_H_
#define TAMP_KERNELS_CUDA_TESTING_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "kernels/device.h"

// On the device machine a skip would let a run that never touched a GPU pass, so there
// (TAMP_REQUIRE_CUDA=1) it is a failure.
#define TAMP_SKIP_WITHOUT_CUDA()                                                          \
  do {                                                                                    \
    if (!::tamp::kernels::CudaDeviceAvailable()) {                                        \
      if (::tamp::kernels::CudaRequired()) {                                              \
        GTEST_FAIL() << "no CUDA device, and TAMP_REQUIRE_CUDA=1 makes that a failure ("  \
                     << ::tamp::kernels::CudaDeviceUnavailableReason() << ")";            \
      }                                                                                   \
      GTEST_SKIP() << "no CUDA device: skipping ("                                        \
                   << ::tamp::kernels::CudaDeviceUnavailableReason() << ")";              \
    }                                                                                     \
  } while (0)

namespace tamp::kernels::testing {

// How many mismatches a comparison lists before it stops.
inline constexpr int kMaxListedMismatches = 10;

// CompareClose()
//
// Success iff gpu.size() == cpu.size() and, for every i, |gpu[i] - cpu[i]| <= abs_tol +
// rel_tol * |cpu[i]| (NaN matches only NaN, inf only the same inf). The failure message
// lists the first mismatches as "name[i]: gpu G, cpu C, |diff| D > tol T" and the count.
inline ::testing::AssertionResult CompareClose(absl::string_view name, absl::Span<const float> gpu,
                                               absl::Span<const float> cpu, double abs_tol,
                                               double rel_tol) {
  if (gpu.size() != cpu.size()) {
    return ::testing::AssertionFailure()
           << name << ": gpu has " << gpu.size() << " values, cpu " << cpu.size();
  }
  std::ostringstream listed;
  size_t mismatches = 0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    const double g = gpu[i], c = cpu[i];
    const double tolerance = abs_tol + rel_tol * std::fabs(c);
    bool ok;
    if (std::isnan(c) || std::isnan(g)) {
      ok = std::isnan(c) && std::isnan(g);
    } else if (std::isinf(c) || std::isinf(g)) {
      ok = g == c;
    } else {
      ok = std::fabs(g - c) <= tolerance;
    }
    if (ok) continue;
    if (++mismatches <= kMaxListedMismatches) {
      listed << "\n  " << name << "[" << i << "]: gpu " << g << ", cpu " << c << ", |diff| "
             << std::fabs(g - c) << " > tol " << tolerance;
    }
  }
  if (mismatches == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << name << ": " << mismatches << " of " << gpu.size()
                                       << " values differ (abs_tol " << abs_tol << ", rel_tol "
                                       << rel_tol << "); first ones:" << listed.str();
}

// CompareBitwise()
//
// Success iff the floats are bit-identical, except that any NaN matches any NaN (CPUs keep
// an operand's NaN payload, GPUs return the canonical NaN).
inline ::testing::AssertionResult CompareBitwise(absl::string_view name,
                                                 absl::Span<const float> gpu,
                                                 absl::Span<const float> cpu) {
  if (gpu.size() != cpu.size()) {
    return ::testing::AssertionFailure()
           << name << ": gpu has " << gpu.size() << " values, cpu " << cpu.size();
  }
  std::ostringstream listed;
  size_t mismatches = 0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    uint32_t g, c;
    std::memcpy(&g, &gpu[i], 4);
    std::memcpy(&c, &cpu[i], 4);
    if (g == c || (std::isnan(gpu[i]) && std::isnan(cpu[i]))) continue;
    if (++mismatches <= kMaxListedMismatches) {
      listed << "\n  " << name << "[" << i << "]: gpu " << gpu[i] << " (0x" << std::hex << g
             << "), cpu " << cpu[i] << " (0x" << c << ")" << std::dec;
    }
  }
  if (mismatches == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << name << ": " << mismatches << " of " << gpu.size()
                                       << " values differ bitwise; first ones:" << listed.str();
}

// CompareBytes()
//
// Success iff the byte strings are identical; otherwise lists the first differing offsets.
inline ::testing::AssertionResult CompareBytes(absl::string_view name, absl::string_view gpu,
                                               absl::string_view cpu) {
  std::ostringstream listed;
  size_t mismatches = 0;
  const size_t common = gpu.size() < cpu.size() ? gpu.size() : cpu.size();
  for (size_t i = 0; i < common; ++i) {
    if (gpu[i] == cpu[i]) continue;
    if (++mismatches <= kMaxListedMismatches) {
      listed << "\n  " << name << " byte " << i << ": gpu 0x" << std::hex
             << (static_cast<unsigned>(gpu[i]) & 0xff) << ", cpu 0x"
             << (static_cast<unsigned>(cpu[i]) & 0xff) << std::dec;
    }
  }
  if (mismatches == 0 && gpu.size() == cpu.size()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << name << ": gpu " << gpu.size() << " bytes, cpu " << cpu.size() << " bytes, "
         << mismatches << " of the first " << common << " differ" << listed.str();
}

#if TAMP_HAVE_CUDA

// The helpers below never CHECK: after a device fault every CUDA call fails, and a test
// binary that aborts there (or in a destructor, see FreeDeviceMemory()) hides the report of
// the fault and of every test after it. They return a failure naming the CUDA error instead,
// so the test fails, unwinds and the binary goes on.

// StatusAssertion()
//
// Success for OK, else a failure carrying the status.
inline ::testing::AssertionResult StatusAssertion(const absl::Status& status) {
  if (status.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << status;
}

// Synchronize()
//
// Waits for the default stream; a failure names the CUDA error (a fault in an earlier
// kernel shows up here).
inline ::testing::AssertionResult Synchronize() {
  return StatusAssertion(
      CudaErrorToStatus(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize(nullptr)",
                        __FILE__, __LINE__));
}

// Upload(), Download()
//
// A host vector to a new device array (*out), and a device array to a host vector (*out),
// synchronously. *out is left alone on failure.
//   DeviceArray<float> d_x;
//   ASSERT_TRUE(Upload<float>(x, &d_x));
//   std::vector<float> y;
//   ASSERT_TRUE(Download(d_y, &y));
// Allocate()
//
// A new uninitialised device array of `size` values (*out).
template <typename T>
::testing::AssertionResult Allocate(size_t size, DeviceArray<T>* out) {
  absl::StatusOr<DeviceArray<T>> array = DeviceArray<T>::Create(size);
  if (!array.ok()) return StatusAssertion(array.status());
  *out = *std::move(array);
  return ::testing::AssertionSuccess();
}

template <typename T>
::testing::AssertionResult Upload(absl::Span<const T> host, DeviceArray<T>* out) {
  absl::StatusOr<DeviceArray<T>> array = DeviceArray<T>::Create(host.size());
  if (!array.ok()) return StatusAssertion(array.status());
  if (absl::Status copied = array->CopyFromHost(host.data(), host.size(), nullptr);
      !copied.ok()) {
    return StatusAssertion(copied);
  }
  if (::testing::AssertionResult synced = Synchronize(); !synced) return synced;
  *out = *std::move(array);
  return ::testing::AssertionSuccess();
}

template <typename T>
::testing::AssertionResult Download(const DeviceArray<T>& array, std::vector<T>* out) {
  std::vector<T> host(array.size());
  if (absl::Status copied = array.CopyToHost(host.data(), host.size(), nullptr); !copied.ok()) {
    return StatusAssertion(copied);
  }
  if (::testing::AssertionResult synced = Synchronize(); !synced) return synced;
  *out = std::move(host);
  return ::testing::AssertionSuccess();
}

// Upload(host), Download(array)
//
// The same as values, for use inside expressions. A failure is recorded with ADD_FAILURE()
// (the test fails and goes on, nothing aborts) and an empty array or vector comes back.
//   EXPECT_TRUE(CompareBitwise("w", Download(d_w), w_cpu));
template <typename T>
DeviceArray<T> Upload(absl::Span<const T> host) {
  DeviceArray<T> array;
  if (::testing::AssertionResult uploaded = Upload<T>(host, &array); !uploaded) {
    ADD_FAILURE() << "Upload: " << uploaded.message();
  }
  return array;
}

template <typename T>
std::vector<T> Download(const DeviceArray<T>& array) {
  std::vector<T> host;
  if (::testing::AssertionResult downloaded = Download(array, &host); !downloaded) {
    ADD_FAILURE() << "Download: " << downloaded.message();
  }
  return host;
}

// CompareClose(), CompareBitwise() of a device array: Download() first; a failed download
// is a failed comparison naming `name` and the CUDA error.
inline ::testing::AssertionResult CompareClose(absl::string_view name,
                                               const DeviceArray<float>& gpu,
                                               absl::Span<const float> cpu, double abs_tol,
                                               double rel_tol) {
  std::vector<float> host;
  if (::testing::AssertionResult got = Download(gpu, &host); !got) {
    return ::testing::AssertionFailure() << name << ": download failed: " << got.message();
  }
  return CompareClose(name, host, cpu, abs_tol, rel_tol);
}

inline ::testing::AssertionResult CompareBitwise(absl::string_view name,
                                                 const DeviceArray<float>& gpu,
                                                 absl::Span<const float> cpu) {
  std::vector<float> host;
  if (::testing::AssertionResult got = Download(gpu, &host); !got) {
    return ::testing::AssertionFailure() << name << ": download failed: " << got.message();
  }
  return CompareBitwise(name, host, cpu);
}

#endif  // TAMP_HAVE_CUDA

}  // namespace tamp::kernels::testing

#endif  // TAMP_KERNELS_CUDA_TESTING_H_

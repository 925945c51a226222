// Test helpers for CUDA code: skipping without a device, and GPU-vs-CPU comparisons.
//
// Contents:
//   TAMP_SKIP_WITHOUT_CUDA()     GTEST_SKIP()s with "no CUDA device: skipping (<reason>)"
//   CompareClose()               |gpu - cpu| <= abs_tol + rel_tol * |cpu| everywhere, else
//                                a failure listing the first mismatches (llm.c's
//                                validate_result)
//   CompareBitwise()             bit-identical floats (NaN == NaN whatever the payload)
//   CompareBytes()               identical byte strings; names the first differing bytes
//   Upload(), Download()         host vector <-> DeviceArray, synchronously (CUDA builds)
//
// Each Compare*() returns a ::testing::AssertionResult, so use it as
//   EXPECT_TRUE(CompareClose("dW", gpu, cpu, 1e-5, 1e-4));
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

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "glog/logging.h"
#include "gtest/gtest.h"
#include "kernels/device.h"

#define TAMP_SKIP_WITHOUT_CUDA()                                                          \
  do {                                                                                    \
    if (!::tamp::kernels::CudaDeviceAvailable()) {                                        \
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

// Upload(), Download()
//
// A host vector to a new device array and back (synchronous; CHECK-fails on CUDA errors,
// which in a test is the right outcome).
template <typename T>
DeviceArray<T> Upload(absl::Span<const T> host) {
  auto array = DeviceArray<T>::Create(host.size());
  CHECK(array.ok()) << array.status();
  CHECK(array->CopyFromHost(host.data(), host.size(), nullptr).ok());
  TAMP_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  return *std::move(array);
}

template <typename T>
std::vector<T> Download(const DeviceArray<T>& array) {
  std::vector<T> host(array.size());
  CHECK(array.CopyToHost(host.data(), host.size(), nullptr).ok());
  TAMP_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  return host;
}

#endif  // TAMP_HAVE_CUDA

}  // namespace tamp::kernels::testing

#endif  // TAMP_KERNELS_CUDA_TESTING_H_

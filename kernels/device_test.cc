// kernels/device.h and the test helpers of kernels/cuda_testing.h: CUDA errors come back as
// failures and log lines, never as an abort, so one device fault cannot take the test binary
// (and its report) down. Without a device every CUDA call fails, which is the error path;
// with one, the same tests check the success path.
#include "kernels/device.h"

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "glog/logging.h"
#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"
#include "kernels/cuda_testing.h"

namespace tamp::kernels {
namespace {

TEST(DeviceTest, AvailabilityHasAReasonWhenFalse) {
  EXPECT_EQ(CudaDeviceAvailable(), CudaDeviceUnavailableReason().empty());
  if (!CudaDeviceAvailable()) {
    std::cout << "CudaDeviceUnavailableReason(): " << CudaDeviceUnavailableReason() << "\n";
  }
}

// Sets TAMP_REQUIRE_CUDA (or unsets it, for nullptr) for one scope, then restores what it
// was: on a device the test binary itself runs with TAMP_REQUIRE_CUDA=1.
class RequireCuda {
 public:
  explicit RequireCuda(const char* value) {
    const char* before = std::getenv("TAMP_REQUIRE_CUDA");
    if (before != nullptr) before_ = before;
    if (value == nullptr) {
      unsetenv("TAMP_REQUIRE_CUDA");
    } else {
      setenv("TAMP_REQUIRE_CUDA", value, 1);
    }
  }
  ~RequireCuda() {
    if (before_.has_value()) {
      setenv("TAMP_REQUIRE_CUDA", before_->c_str(), 1);
    } else {
      unsetenv("TAMP_REQUIRE_CUDA");
    }
  }

 private:
  std::optional<std::string> before_;
};

TEST(DeviceTest, CudaRequiredOnlyForTheValueOne) {
  {
    RequireCuda unset(nullptr);
    EXPECT_FALSE(CudaRequired());
  }
  {
    RequireCuda required("1");
    EXPECT_TRUE(CudaRequired());
  }
  {
    RequireCuda required("0");
    EXPECT_FALSE(CudaRequired());
  }
}

void SkipWithoutCuda() { TAMP_SKIP_WITHOUT_CUDA(); }

// The device machine sets TAMP_REQUIRE_CUDA=1: a test that would skip there fails instead,
// so a run that never reached a GPU cannot pass.
TEST(CudaTestingTest, SkipIsAFailureWhereCudaIsRequired) {
  RequireCuda required("1");
  if (CudaDeviceAvailable()) {
    EXPECT_NO_FATAL_FAILURE(SkipWithoutCuda());
  } else {
    EXPECT_FATAL_FAILURE(SkipWithoutCuda(), "no CUDA device, and TAMP_REQUIRE_CUDA=1");
  }
}

#if TAMP_HAVE_CUDA

// Collects ERROR lines while alive.
class ErrorLines : public google::LogSink {
 public:
  ErrorLines() { google::AddLogSink(this); }
  ~ErrorLines() override { google::RemoveLogSink(this); }
  void send(google::LogSeverity severity, const char* /*full_filename*/,
            const char* /*base_filename*/, int /*line*/, const struct ::tm* /*tm_time*/,
            const char* message, size_t message_len) override {
    if (severity == google::GLOG_ERROR) lines.emplace_back(message, message_len);
  }
  std::vector<std::string> lines;
};

// What a destructor meets after a device fault: cudaFree failing. Without a device any
// cudaFree of a non-null pointer fails; with one, freeing a pointer that cudaMalloc never
// returned does.
TEST(DeviceTest, FreeDeviceMemoryLogsAFailureInsteadOfAborting) {
  ErrorLines errors;
  FreeDeviceMemory(reinterpret_cast<void*>(0x1000));
  ASSERT_EQ(errors.lines.size(), 1u);
  EXPECT_NE(errors.lines[0].find("cudaFree(0x1000) failed: cuda"), std::string::npos)
      << errors.lines[0];
}

// Pinned memory and events: errors as Status without a device; with one, an event waits for
// a copy into pinned memory.
TEST(DeviceTest, PinnedBufferAndEvent) {
  auto pinned = PinnedBuffer::Create(64);
  auto event = CudaEvent::Create();
  if (!CudaDeviceAvailable()) {
    EXPECT_FALSE(pinned.ok());
    EXPECT_NE(pinned.status().message().find("cudaMallocHost"), std::string::npos)
        << pinned.status();
    EXPECT_FALSE(event.ok());
    return;
  }
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_EQ(pinned->size(), 64u);
  EXPECT_TRUE(event->Wait().ok());  // Never recorded: returns at once.
  const std::vector<float> host(16, 2.5f);
  DeviceArray<float> array;
  ASSERT_TRUE(testing::Upload<float>(host, &array));
  ASSERT_TRUE(array.CopyToHost(reinterpret_cast<float*>(pinned->data()), 16, nullptr).ok());
  ASSERT_TRUE(event->Record(nullptr).ok());
  ASSERT_TRUE(event->Wait().ok());
  EXPECT_EQ(reinterpret_cast<const float*>(pinned->data())[15], 2.5f);
}

// Reserve grows a buffer only when asked for more; without a device it fails and leaves the
// buffer empty.
TEST(DeviceTest, PinnedBufferReserveGrowsOnlyWhenAskedForMore) {
  PinnedBuffer buffer;
  EXPECT_TRUE(buffer.Reserve(0).ok());  // Nothing to pin.
  EXPECT_EQ(buffer.data(), nullptr);
  const absl::Status status = buffer.Reserve(64);
  if (!CudaDeviceAvailable()) {
    EXPECT_NE(status.message().find("cudaMallocHost"), std::string::npos) << status;
    EXPECT_EQ(buffer.size(), 0u);
    EXPECT_EQ(buffer.data(), nullptr);
    return;
  }
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(buffer.size(), 64u);
  const unsigned char* const first = buffer.data();
  ASSERT_TRUE(buffer.Reserve(16).ok());  // Already large enough: the same memory.
  EXPECT_EQ(buffer.data(), first);
  EXPECT_EQ(buffer.size(), 64u);
  ASSERT_TRUE(buffer.Reserve(4096).ok());
  EXPECT_EQ(buffer.size(), 4096u);
  EXPECT_NE(buffer.data(), nullptr);
}

// The value forms, which record failures instead of returning them.
void UploadAsValue() {
  static const float kHost[] = {1.0f, 2.0f};
  EXPECT_EQ(testing::Upload<float>(kHost).data(), nullptr);
}
void DownloadAsValue() {
  static DeviceArray<float>* const kEmpty = new DeviceArray<float>();
  const std::vector<float> host = testing::Download(*kEmpty);
  EXPECT_TRUE(host.empty());
}

TEST(CudaTestingTest, HelpersReturnFailuresInsteadOfAborting) {
  const std::vector<float> host = {1.0f, -2.0f, 3.5f};
  DeviceArray<float> array;
  const ::testing::AssertionResult uploaded = testing::Upload<float>(host, &array);
  if (!CudaDeviceAvailable()) {
    EXPECT_FALSE(uploaded);
    EXPECT_NE(std::string(uploaded.message()).find("cudaMalloc"), std::string::npos)
        << uploaded.message();
    EXPECT_EQ(array.data(), nullptr);  // *out untouched.
    DeviceArray<float> other;
    EXPECT_FALSE(testing::Allocate<float>(4, &other));
    EXPECT_FALSE(testing::Synchronize());
    EXPECT_FALSE(testing::CompareBitwise("x", array, host));
    EXPECT_NONFATAL_FAILURE(UploadAsValue(), "Upload: ");
    EXPECT_NONFATAL_FAILURE(DownloadAsValue(), "Download: ");
    return;
  }
  ASSERT_TRUE(uploaded);
  std::vector<float> back;
  ASSERT_TRUE(testing::Download(array, &back));
  EXPECT_EQ(back, host);
  EXPECT_TRUE(testing::CompareBitwise("x", array, host));
  EXPECT_TRUE(testing::Synchronize());
}

#endif  // TAMP_HAVE_CUDA

}  // namespace
}  // namespace tamp::kernels

#include "tools/tamp/transport_probe.h"

#include "gtest/gtest.h"

namespace tamp::perf {
namespace {

// The figures depend on the machine; their range does not: a loopback gRPC message costs
// more than 1 us and less than 5 ms of CPU, and moving a byte through protobuf, HTTP/2 and
// the socket on both ends (at least four copies) takes longer than one memcpy (~0.05 ns) and
// far less than 1 us.
TEST(MeasureTransportCpuTest, MeasuresMessageAndByteCostsOverLoopback) {
  absl::StatusOr<TransportCpu> cpu = MeasureTransportCpu();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_GT(cpu->ms_per_message, 1e-3);
  EXPECT_LT(cpu->ms_per_message, 5.0);
  EXPECT_GT(cpu->ms_per_byte, 0.05e-6);  // 0.05 ns
  EXPECT_LT(cpu->ms_per_byte, 1e-3);     // 1 us
}

}  // namespace
}  // namespace tamp::perf

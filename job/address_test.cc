#include "job/address.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp {
namespace {

using ::testing::HasSubstr;

TEST(AddressTest, HostAndPortAreAccepted) {
  for (const char* address : {"localhost:5000", "10.0.0.7:1", "node-3.cluster:65535",
                              "[::1]:8470", "[fe80::1%eth0]:9000"}) {
    EXPECT_TRUE(ValidateHostPort(address, "TAMP_SERVERS").ok()) << address;
  }
}

TEST(AddressTest, WhatIsNotHostAndPortIsNamed) {
  for (const char* address : {"localhost", "localhost:", ":5000", "host:0", "host:65536",
                              "host:50x", "::1:5000", "[]:5000", "host:-1"}) {
    const absl::Status refused = ValidateHostPort(address, "TAMP_SERVERS");
    EXPECT_TRUE(absl::IsInvalidArgument(refused)) << address;
    EXPECT_THAT(refused.message(),
                HasSubstr(std::string("TAMP_SERVERS: '") + address + "' is not host:port"));
  }
}

TEST(AddressTest, AServerListNamesABadOrRepeatedAddress) {
  EXPECT_TRUE(ValidateServerList({"a:1", "a:2", "b:1"}, "--servers").ok());
  EXPECT_TRUE(ValidateServerList({}, "--servers").ok());
  EXPECT_THAT(ValidateServerList({"a:1", "a"}, "--servers").message(),
              HasSubstr("--servers: 'a' is not host:port"));
  EXPECT_EQ(ValidateServerList({"a:1", "b:2", "a:1"}, "cluster.server_addresses").message(),
            "cluster.server_addresses: 'a:1' is given twice (servers 0 and 2): each server needs "
            "an address of its own");
}

}  // namespace
}  // namespace tamp

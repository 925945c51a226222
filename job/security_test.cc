#include "job/security.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "job/config.h"

namespace tamp {
namespace {

config::RunConfig Parse(const std::string& cluster) {
  absl::StatusOr<config::RunConfig> config = ParseConfig(
      "version: 1 cluster { num_servers: 1 num_workers: 1 " + cluster +
          " } model { kind: MLP hidden: [4] } optimizer { learning_rate: 0.1 }",
      "test");
  EXPECT_TRUE(config.ok()) << config.status();
  ApplyDefaults(&*config);
  return *config;
}

TEST(SecurityTest, Loopback) {
  for (const char* host : {"127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "LOCALHOST",
                           "::ffff:127.0.0.1"}) {
    EXPECT_TRUE(IsLoopbackHost(host)) << host;
  }
  for (const char* host : {"0.0.0.0", "10.0.0.1", "::", "example.org", "128.0.0.1", ""}) {
    EXPECT_FALSE(IsLoopbackHost(host)) << host;
  }
  EXPECT_EQ(HostOfAddress("10.0.0.1:80"), "10.0.0.1");
  EXPECT_EQ(HostOfAddress("[::1]:80"), "::1");
}

TEST(SecurityTest, ExistingLoopbackConfigsNeedNothing) {
  EXPECT_TRUE(ValidateConfig(Parse("")).ok());
  EXPECT_TRUE(ValidateConfig(Parse(R"(server_addresses: ["localhost:1"])")).ok());
}

TEST(SecurityTest, NonLoopbackNeedsTlsOrExplicitPlaintext) {
  absl::Status status = ValidateConfig(Parse(R"(host: "0.0.0.0")"));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("cluster.host"), absl::string_view::npos) << status;
  status = ValidateConfig(Parse(R"(server_addresses: ["10.0.0.1:4000"])"));
  EXPECT_NE(status.message().find("cluster.server_addresses[0]"), absl::string_view::npos)
      << status;
  EXPECT_TRUE(ValidateConfig(Parse(R"(host: "0.0.0.0" plaintext: true)")).ok());
  EXPECT_TRUE(
      ValidateConfig(Parse(R"(host: "0.0.0.0" tls { cert_file: "c" key_file: "k" ca_file: "a" })"))
          .ok());
}

TEST(SecurityTest, TlsFieldsAreChecked) {
  absl::Status status = ValidateConfig(Parse(R"(tls { cert_file: "c" key_file: "k" })"));
  EXPECT_NE(status.message().find("cluster.tls.ca_file"), absl::string_view::npos) << status;
  status = ValidateConfig(
      Parse(R"(plaintext: true tls { cert_file: "c" key_file: "k" ca_file: "a" })"));
  EXPECT_NE(status.message().find("cluster.plaintext"), absl::string_view::npos) << status;
  status = ValidateConfig(
      Parse(R"(tls { cert_file: "c" key_file: "k" ca_file: "a" client_cert_file: "x" })"));
  EXPECT_NE(status.message().find("cluster.tls.client_key_file"), absl::string_view::npos)
      << status;
}

TEST(SecurityTest, ValidationDefaultsAndRange) {
  const config::RunConfig config = Parse("");
  EXPECT_EQ(config.validation().max_message_bytes(), 256u << 20);
  EXPECT_EQ(config.validation().nonfinite_policy(), config::Validation::REJECT);
  config::RunConfig small = config;
  small.mutable_validation()->set_max_message_bytes(100);
  EXPECT_NE(ValidateConfig(small).message().find("validation.max_message_bytes"),
            absl::string_view::npos);
}

TEST(SecurityTest, TokenFromFileTrimmedElseEnvironment) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/token";
  std::ofstream(path) << "\n  abc def \t\n";
  config::Cluster cluster;
  cluster.set_job_token_file(path);
  EXPECT_EQ(*LoadJobToken(cluster), "abc def");
  std::ofstream(path) << " \n";
  EXPECT_EQ(LoadJobToken(cluster).status().code(), absl::StatusCode::kInvalidArgument);
  cluster.set_job_token_file(path + ".missing");
  EXPECT_EQ(LoadJobToken(cluster).status().code(), absl::StatusCode::kNotFound);
  cluster.clear_job_token_file();
  unsetenv(kJobTokenEnv);
  EXPECT_EQ(*LoadJobToken(cluster), "");
  setenv(kJobTokenEnv, " from-env\n", 1);
  EXPECT_EQ(*LoadJobToken(cluster), "from-env");
  unsetenv(kJobTokenEnv);
}

// A variable that is set but blank must not turn admission off, as a blank file does not.
TEST(SecurityTest, BlankTokenVariableIsRefused) {
  config::Cluster cluster;
  for (const char* blank : {"", " ", " \t\n\r "}) {
    setenv(kJobTokenEnv, blank, 1);
    const absl::StatusOr<std::string> token = LoadJobToken(cluster);
    EXPECT_EQ(token.status().code(), absl::StatusCode::kInvalidArgument)
        << "'" << blank << "': " << (token.ok() ? "'" + *token + "'" : token.status().ToString());
    EXPECT_NE(token.status().message().find(kJobTokenEnv), absl::string_view::npos);
  }
  unsetenv(kJobTokenEnv);
}

TEST(SecurityTest, QuoteRequestBoundsAndEscapes) {
  EXPECT_EQ(QuoteRequest("fc1.weight"), "fc1.weight");
  EXPECT_EQ(QuoteRequest(std::string("a\0b\n\xff\"", 6)), "a\\x00b\\x0a\\xff\"");
  const std::string huge(1 << 20, 'x');
  EXPECT_EQ(QuoteRequest(huge),
            std::string(kMaxQuotedBytes, 'x') + "...(1048576 bytes)");
  // The worst case, every byte escaped, stays within 4 bytes per kept byte plus the tail.
  const std::string binary(1 << 20, '\x01');
  EXPECT_LE(QuoteRequest(binary).size(), 4 * kMaxQuotedBytes + 32);
}

TEST(SecurityTest, TokensEqual) {
  EXPECT_TRUE(TokensEqual("abc", "abc"));
  EXPECT_FALSE(TokensEqual("abd", "abc"));
  EXPECT_FALSE(TokensEqual("ab", "abc"));
  EXPECT_FALSE(TokensEqual("abcd", "abc"));
  EXPECT_FALSE(TokensEqual("", "abc"));
  EXPECT_TRUE(TokensEqual("", ""));
}

}  // namespace
}  // namespace tamp

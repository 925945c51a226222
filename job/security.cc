#include "job/security.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace tamp {
namespace {

absl::Status FieldError(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
}

}  // namespace

bool IsLoopbackHost(absl::string_view host) {
  if (absl::ConsumePrefix(&host, "[")) absl::ConsumeSuffix(&host, "]");
  if (absl::EqualsIgnoreCase(host, "localhost")) return true;
  const std::string text(host);
  in_addr v4;
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6;
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    return IN6_IS_ADDR_LOOPBACK(&v6) ||
           (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127);
  }
  return false;
}

std::string HostOfAddress(absl::string_view address) {
  if (absl::StartsWith(address, "[")) {
    const size_t end = address.find(']');
    if (end != absl::string_view::npos) return std::string(address.substr(1, end - 1));
  }
  const size_t colon = address.rfind(':');
  return std::string(colon == absl::string_view::npos ? address : address.substr(0, colon));
}

bool PlaintextAllowed(const config::Cluster& cluster, absl::string_view host) {
  return cluster.plaintext() || IsLoopbackHost(host);
}

absl::Status ValidateSecurity(const config::RunConfig& config) {
  const config::Cluster& cluster = config.cluster();
  if (cluster.has_tls()) {
    if (cluster.plaintext()) {
      return FieldError("cluster.plaintext", "cannot be true together with cluster.tls");
    }
    const config::Tls& tls = cluster.tls();
    if (tls.cert_file().empty()) return FieldError("cluster.tls.cert_file", "is required");
    if (tls.key_file().empty()) return FieldError("cluster.tls.key_file", "is required");
    if (tls.ca_file().empty()) return FieldError("cluster.tls.ca_file", "is required");
    if (tls.client_cert_file().empty() != tls.client_key_file().empty()) {
      return FieldError(tls.client_cert_file().empty() ? "cluster.tls.client_cert_file"
                                                       : "cluster.tls.client_key_file",
                        "client_cert_file and client_key_file go together");
    }
    return absl::OkStatus();
  }
  if (cluster.plaintext()) return absl::OkStatus();
  if (!IsLoopbackHost(cluster.host())) {
    return FieldError("cluster.host",
                      absl::StrCat("'", cluster.host(), "' is not a loopback address: configure "
                                   "cluster.tls, or set cluster.plaintext: true to allow "
                                   "unencrypted connections"));
  }
  for (int i = 0; i < cluster.server_addresses_size(); ++i) {
    if (!IsLoopbackHost(HostOfAddress(cluster.server_addresses(i)))) {
      return FieldError(absl::StrCat("cluster.server_addresses[", i, "]"),
                        absl::StrCat("'", cluster.server_addresses(i),
                                     "' is not a loopback address: configure cluster.tls, or set "
                                     "cluster.plaintext: true to allow unencrypted connections"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> LoadJobToken(const config::Cluster& cluster) {
  if (!cluster.job_token_file().empty()) {
    std::ifstream file(cluster.job_token_file());
    if (!file) {
      return absl::NotFoundError(absl::StrCat("cluster.job_token_file: '",
                                              cluster.job_token_file(), "' cannot be read"));
    }
    std::stringstream text;
    text << file.rdbuf();
    const std::string token(absl::StripAsciiWhitespace(text.str()));
    if (token.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cluster.job_token_file: '", cluster.job_token_file(), "' holds no token"));
    }
    return token;
  }
  const char* env = std::getenv(kJobTokenEnv);
  if (env == nullptr) return std::string();
  const std::string token(absl::StripAsciiWhitespace(env));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "environment variable ", kJobTokenEnv, " is set but holds no token; set a token or "
        "unset it"));
  }
  return token;
}

std::string QuoteRequest(absl::string_view text, size_t max_bytes) {
  const absl::string_view kept = text.substr(0, max_bytes);
  std::string quoted;
  quoted.reserve(kept.size());
  for (const char c : kept) {
    if (absl::ascii_isprint(static_cast<unsigned char>(c))) {
      quoted.push_back(c);
    } else {
      absl::StrAppend(&quoted, "\\x", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
    }
  }
  if (kept.size() < text.size()) absl::StrAppend(&quoted, "...(", text.size(), " bytes)");
  return quoted;
}

bool TokensEqual(absl::string_view presented, absl::string_view expected) {
  // Every byte of both is read whatever the contents; only the lengths steer the loop.
  unsigned char diff = presented.size() == expected.size() ? 0 : 1;
  const size_t n = std::max(presented.size(), expected.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char a = i < presented.size() ? presented[i] : 0;
    const unsigned char b = i < expected.size() ? expected[i] : 0;
    diff |= a ^ b;
  }
  // Keep the compiler from turning the loop into an early exit.
  volatile unsigned char result = diff;
  return result == 0;
}

}  // namespace tamp

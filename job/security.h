// Admission and transport settings of a job (config.cluster: job_token_file, tls, plaintext),
// without gRPC: validation, the job token, loopback addresses. The gRPC credentials built from
// them live in protocol/grpc_security.h.
//
// Rules (README, "Security"):
//   - tls set: every connection is TLS; cert_file, key_file and ca_file are required;
//     require_client_cert makes it mutual. Exclusive with plaintext.
//   - no tls, plaintext: true: plaintext, on any address (the operator said so).
//   - no tls, no plaintext: plaintext only on loopback: cluster.host and every entry of
//     cluster.server_addresses must be loopback (127.0.0.0/8, ::1, localhost), and a server
//     refuses to bind another address. Existing local configs keep working unchanged.
//   - a token (job_token_file, else env TAMP_JOB_TOKEN) is independent of TLS; without TLS it
//     crosses the wire in the clear, so it only keeps out mistakes, not eavesdroppers.
//
// Example:
//   TAMP_RETURN_IF_ERROR(ValidateSecurity(config));
//   TAMP_ASSIGN_OR_RETURN(std::string token, LoadJobToken(config.cluster()));
#ifndef TAMP_JOB_SECURITY_H_
#define TAMP_JOB_SECURITY_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/config.pb.h"

namespace tamp {

// The environment variable that holds the job token when cluster.job_token_file is unset.
inline constexpr char kJobTokenEnv[] = "TAMP_JOB_TOKEN";

// IsLoopbackHost()
//
// True for "localhost", IPv4 127.0.0.0/8 and IPv6 ::1 (bracketed or not). `host` has no port.
bool IsLoopbackHost(absl::string_view host);

// HostOfAddress()
//
// The host of "host:port" or "[v6]:port", brackets removed.
std::string HostOfAddress(absl::string_view address);

// PlaintextAllowed()
//
// Whether a plaintext connection on `host` is allowed: cluster.plaintext, or `host` loopback.
// Meaningless when TLS is configured (cluster.has_tls()).
bool PlaintextAllowed(const config::Cluster& cluster, absl::string_view host);

// ValidateSecurity()
//
// Checks cluster.tls / plaintext / job_token_file by the rules above; errors name the field.
// Does not read the files (the processes that need them do, and report what is wrong).
absl::Status ValidateSecurity(const config::RunConfig& config);

// LoadJobToken()
//
// The job token: the content of cluster.job_token_file, whitespace-trimmed, or else the
// environment variable TAMP_JOB_TOKEN, trimmed. Empty only when neither is set (no admission
// check). An unreadable token file is NOT_FOUND; a file or a set variable that holds only
// whitespace is INVALID_ARGUMENT, since its owner meant to require a token.
absl::StatusOr<std::string> LoadJobToken(const config::Cluster& cluster);

// Most bytes of a request's text QuoteRequest() keeps by default.
inline constexpr size_t kMaxQuotedBytes = 256;

// QuoteRequest()
//
// `text` taken from a request (a tensor name, a codec spec), fit to quote in a refusal's
// status message or log line: its first `max_bytes` bytes, each byte outside printable ASCII
// written as \xNN, then "...(N bytes)" when `text` is longer. Refusals quote requests only
// through it, so the size of what they answer and log does not grow with the request's.
std::string QuoteRequest(absl::string_view text, size_t max_bytes = kMaxQuotedBytes);

// TokensEqual()
//
// Compares a presented token with the expected one in time that depends only on their
// lengths, not on where they first differ.
bool TokensEqual(absl::string_view presented, absl::string_view expected);

}  // namespace tamp

#endif  // TAMP_JOB_SECURITY_H_

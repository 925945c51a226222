// gRPC credentials and the job token as metadata, from config.cluster (job/security.h has
// the rules).
//
// Example (server):
//   TAMP_ASSIGN_OR_RETURN(auto credentials, MakeServerCredentials(config.cluster(), host));
//   builder.AddListeningPort(address, credentials, &port);
// Example (worker):
//   TAMP_ASSIGN_OR_RETURN(auto credentials, MakeChannelCredentials(config.cluster(), address));
//   grpc::ChannelArguments args;
//   AddTlsChannelArguments(config.cluster(), &args);
//   auto channel = grpc::CreateCustomChannel(address, credentials, args);
//   grpc::ClientContext context;
//   AttachJobToken(token, &context);
#ifndef TAMP_PROTOCOL_GRPC_SECURITY_H_
#define TAMP_PROTOCOL_GRPC_SECURITY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/grpcpp.h"
#include "proto/config.pb.h"

namespace tamp {

// The metadata keys a token may come in: "authorization" with value "Bearer <token>" (what
// workers send), or "x-tamp-token" with the bare token.
inline constexpr char kAuthorizationKey[] = "authorization";
inline constexpr char kTokenKey[] = "x-tamp-token";

// MakeServerCredentials()
//
// TLS credentials from cluster.tls (the files are read here; NOT_FOUND names an unreadable
// one), mutual when require_client_cert. Without tls: insecure credentials when plaintext is
// allowed on `host` (PlaintextAllowed), else FAILED_PRECONDITION naming cluster.plaintext.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const config::Cluster& cluster, absl::string_view host);

// MakeChannelCredentials()
//
// The worker's side of MakeServerCredentials() for a channel to `address` ("host:port").
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const config::Cluster& cluster, absl::string_view address);

// CertificateNameNote()
//
// With cluster.tls, where the server's certificate (cert_file) does not name the host
// workers verify it as (tls.server_name_override, else `dialed_host`, the host of this
// server's address in the placement): a warning that they will refuse it, naming what the
// certificate holds and the two ways out. "" otherwise, and where `dialed_host` is empty or
// a wildcard (0.0.0.0, ::) and no override is set: nothing to check against.
std::string CertificateNameNote(const config::Cluster& cluster, const std::string& dialed_host);

// AddTlsChannelArguments()
//
// cluster.tls.server_name_override as the SSL target name; nothing otherwise.
void AddTlsChannelArguments(const config::Cluster& cluster, grpc::ChannelArguments* args);

// AttachJobToken()
//
// Adds "authorization: Bearer <token>" to the call; nothing when `token` is empty.
void AttachJobToken(const std::string& token, grpc::ClientContext* context);

// PresentedToken()
//
// The token a call carries ("authorization: Bearer T" or "x-tamp-token: T"), or empty.
std::string PresentedToken(const grpc::CallbackServerContext& context);

}  // namespace tamp

#endif  // TAMP_PROTOCOL_GRPC_SECURITY_H_

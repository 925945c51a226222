#include "protocol/grpc_security.h"

#include <fstream>
#include <sstream>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "job/security.h"
#include "protocol/tls_files.h"

namespace tamp {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, absl::string_view field) {
  std::ifstream file(path);
  if (!file) {
    return absl::NotFoundError(absl::StrCat(field, ": '", path, "' cannot be read"));
  }
  std::stringstream text;
  text << file.rdbuf();
  if (text.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": '", path, "' is empty"));
  }
  return text.str();
}

struct Pems {
  std::string cert, key, ca;
};

// The server's files, or the client's (client_cert_file / client_key_file when set), read
// and checked as gRPC will use them (protocol/tls_files.h).
absl::StatusOr<Pems> ReadPems(const config::Tls& tls, bool client) {
  TlsFiles files;
  const bool own = client && !tls.client_cert_file().empty();
  files.cert_field = own ? "cluster.tls.client_cert_file" : "cluster.tls.cert_file";
  files.cert_path = own ? tls.client_cert_file() : tls.cert_file();
  files.key_field = own ? "cluster.tls.client_key_file" : "cluster.tls.key_file";
  files.key_path = own ? tls.client_key_file() : tls.key_file();
  files.ca_field = "cluster.tls.ca_file";
  files.ca_path = tls.ca_file();
  files.verify_chain = !client;
  for (auto [field, path, pem] : {std::tie(files.cert_field, files.cert_path, files.cert_pem),
                                  std::tie(files.key_field, files.key_path, files.key_pem),
                                  std::tie(files.ca_field, files.ca_path, files.ca_pem)}) {
    absl::StatusOr<std::string> text = ReadPem(path, field);
    if (!text.ok()) return text.status();
    pem = *std::move(text);
  }
  if (absl::Status usable = CheckTlsFiles(files, absl::Now()); !usable.ok()) return usable;
  return Pems{std::move(files.cert_pem), std::move(files.key_pem), std::move(files.ca_pem)};
}

absl::Status PlaintextRefused(absl::string_view host) {
  return absl::FailedPreconditionError(absl::StrCat(
      "'", host, "' is not a loopback address and cluster.tls is not set: configure "
      "cluster.tls, or set cluster.plaintext: true to allow unencrypted connections"));
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const config::Cluster& cluster, absl::string_view host) {
  if (!cluster.has_tls()) {
    if (!PlaintextAllowed(cluster, host)) return PlaintextRefused(host);
    return grpc::InsecureServerCredentials();
  }
  absl::StatusOr<Pems> pems = ReadPems(cluster.tls(), /*client=*/false);
  if (!pems.ok()) return pems.status();
  grpc::SslServerCredentialsOptions options(
      cluster.tls().require_client_cert()
          ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
          : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_root_certs = pems->ca;
  options.pem_key_cert_pairs.push_back({pems->key, pems->cert});
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const config::Cluster& cluster, absl::string_view address) {
  if (!cluster.has_tls()) {
    const std::string host = HostOfAddress(address);
    if (!PlaintextAllowed(cluster, host)) return PlaintextRefused(host);
    return grpc::InsecureChannelCredentials();
  }
  absl::StatusOr<Pems> pems = ReadPems(cluster.tls(), /*client=*/true);
  if (!pems.ok()) return pems.status();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = pems->ca;
  options.pem_private_key = pems->key;
  options.pem_cert_chain = pems->cert;
  return grpc::SslCredentials(options);
}

std::string CertificateNameNote(const config::Cluster& cluster, const std::string& dialed_host) {
  if (!cluster.has_tls()) return "";
  const std::string& override_name = cluster.tls().server_name_override();
  const std::string& name = override_name.empty() ? dialed_host : override_name;
  if (name.empty() || name == "0.0.0.0" || name == "::" || name == "[::]") return "";
  absl::StatusOr<std::string> pem = ReadPem(cluster.tls().cert_file(), "cluster.tls.cert_file");
  if (!pem.ok()) return "";  // Refused where the credentials are made, by name.
  const absl::Status named = CheckCertificateNames(*pem, name);
  if (named.ok() || absl::IsInvalidArgument(named)) return "";
  return absl::StrCat(
      "cluster.tls.cert_file '", cluster.tls().cert_file(), "': ", named.message(), ": workers ",
      override_name.empty()
          ? absl::StrCat("that dial '", name, "' will refuse this server (reissue the "
                         "certificate for that name, or set cluster.tls.server_name_override "
                         "to a name it holds)")
          : absl::StrCat("verify it as cluster.tls.server_name_override '", name,
                         "' and will refuse this server (set the override to a name it holds)"));
}

void AddTlsChannelArguments(const config::Cluster& cluster, grpc::ChannelArguments* args) {
  if (cluster.has_tls() && !cluster.tls().server_name_override().empty()) {
    args->SetSslTargetNameOverride(cluster.tls().server_name_override());
  }
}

void AttachJobToken(const std::string& token, grpc::ClientContext* context) {
  if (!token.empty()) context->AddMetadata(kAuthorizationKey, absl::StrCat("Bearer ", token));
}

std::string PresentedToken(const grpc::CallbackServerContext& context) {
  const auto& metadata = context.client_metadata();
  if (auto it = metadata.find(kAuthorizationKey); it != metadata.end()) {
    absl::string_view value(it->second.data(), it->second.size());
    if (absl::ConsumePrefix(&value, "Bearer ")) return std::string(value);
  }
  if (auto it = metadata.find(kTokenKey); it != metadata.end()) {
    return std::string(it->second.data(), it->second.size());
  }
  return std::string();
}

}  // namespace tamp

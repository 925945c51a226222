// What gRPC would refuse of cluster.tls's files, found when they are read and said by name:
// a file that holds no PEM certificate or key, a key that is not the certificate's, a
// certificate that has expired or is not yet valid, and (the servers' own) a certificate
// that cluster.tls.ca_file does not sign. gRPC finds the first two only when the server
// starts listening ("Invalid private key") and the others only at each handshake, where a
// worker sees a lost connection.
//
// Example:
//   TlsFiles files;
//   files.cert_field = "cluster.tls.cert_file";
//   files.cert_path = tls.cert_file();
//   files.cert_pem = ...;  // And the key's and the CA's the same way.
//   files.verify_chain = true;  // A server's certificate.
//   TAMP_RETURN_IF_ERROR(CheckTlsFiles(files, absl::Now()));
#ifndef TAMP_PROTOCOL_TLS_FILES_H_
#define TAMP_PROTOCOL_TLS_FILES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace tamp {

// One side's PEM texts, each with the config field and path it came from (for messages).
struct TlsFiles {
  std::string cert_field, cert_path, cert_pem;  // The certificate chain, leaf first.
  std::string key_field, key_path, key_pem;
  std::string ca_field, ca_path, ca_pem;  // The CA certificates both sides trust.
  // The servers' certificate must chain to ca_pem (workers verify it with the same file);
  // a worker's is checked by the servers only when they require one, with their own file.
  bool verify_chain = false;
};

// CheckTlsFiles()
//
// OK when gRPC can use the files at `now`; INVALID_ARGUMENT naming the field, the path and
// what is wrong otherwise. A certificate that becomes valid within 10 minutes of `now` is
// taken (clocks differ; the peer checks it with its own).
absl::Status CheckTlsFiles(const TlsFiles& files, absl::Time now);

// CheckCertificateNames()
//
// OK when the first certificate of `cert_pem` names `host` (a DNS name, wildcards as TLS
// takes them, or an IP address) in its subjectAltName, as a worker that dials `host`
// verifies it; FAILED_PRECONDITION listing the names it holds otherwise, and
// INVALID_ARGUMENT when `cert_pem` holds no certificate.
absl::Status CheckCertificateNames(const std::string& cert_pem, const std::string& host);

}  // namespace tamp

#endif  // TAMP_PROTOCOL_TLS_FILES_H_

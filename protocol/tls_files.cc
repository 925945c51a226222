#include "protocol/tls_files.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <arpa/inet.h>

#include <ctime>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tamp {
namespace {

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct KeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
struct StoreFree {
  void operator()(X509_STORE* store) const { X509_STORE_free(store); }
};
struct StoreCtxFree {
  void operator()(X509_STORE_CTX* ctx) const { X509_STORE_CTX_free(ctx); }
};
struct StackFree {
  void operator()(STACK_OF(X509)* stack) const { sk_X509_free(stack); }
};
using Cert = std::unique_ptr<X509, X509Free>;

std::unique_ptr<BIO, BioFree> ReadOnlyBio(const std::string& text) {
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// Every PEM certificate in `text`, in order.
std::vector<Cert> ReadCertificates(const std::string& text) {
  std::vector<Cert> certs;
  auto bio = ReadOnlyBio(text);
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certs.emplace_back(cert);
  }
  ERR_clear_error();  // The end of the text reads as an error.
  return certs;
}

// "2026-12-04 16:40:08 UTC", or "?" where OpenSSL cannot convert the time.
std::string TimeText(const ASN1_TIME* time) {
  std::tm parts{};
  if (ASN1_TIME_to_tm(time, &parts) != 1) return "?";
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S UTC", &parts);
  return text;
}

absl::Status Refused(const std::string& field, const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": '", path, "' ", what));
}

}  // namespace

absl::Status CheckTlsFiles(const TlsFiles& files, absl::Time now) {
  std::vector<Cert> chain = ReadCertificates(files.cert_pem);
  if (chain.empty()) return Refused(files.cert_field, files.cert_path, "holds no PEM certificate");
  auto key_bio = ReadOnlyBio(files.key_pem);
  std::unique_ptr<EVP_PKEY, KeyFree> key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (key == nullptr) {
    return Refused(files.key_field, files.key_path,
                   "holds no PEM private key (an encrypted key is not taken: gRPC has no "
                   "passphrase to open it)");
  }
  X509* leaf = chain.front().get();
  const int matches = X509_check_private_key(leaf, key.get());
  ERR_clear_error();
  if (matches != 1) {
    return Refused(files.key_field, files.key_path,
                   absl::StrCat("is not the key of the certificate in ", files.cert_field, " '",
                                files.cert_path, "'"));
  }
  time_t now_t = absl::ToTimeT(now);
  if (X509_cmp_time(X509_get0_notAfter(leaf), &now_t) < 0) {
    return Refused(files.cert_field, files.cert_path,
                   absl::StrCat("holds a certificate that expired on ",
                                TimeText(X509_get0_notAfter(leaf))));
  }
  time_t soon = absl::ToTimeT(now + absl::Minutes(10));
  if (X509_cmp_time(X509_get0_notBefore(leaf), &soon) > 0) {
    return Refused(files.cert_field, files.cert_path,
                   absl::StrCat("holds a certificate not valid before ",
                                TimeText(X509_get0_notBefore(leaf)), " (is this clock right?)"));
  }
  if (!files.verify_chain) return absl::OkStatus();

  std::vector<Cert> authorities = ReadCertificates(files.ca_pem);
  if (authorities.empty()) return Refused(files.ca_field, files.ca_path, "holds no PEM certificate");
  std::unique_ptr<X509_STORE, StoreFree> store(X509_STORE_new());
  for (const Cert& authority : authorities) X509_STORE_add_cert(store.get(), authority.get());
  // The certificates after the leaf (intermediates), as the peer receives them.
  std::unique_ptr<STACK_OF(X509), StackFree> intermediates(sk_X509_new_null());
  for (size_t i = 1; i < chain.size(); ++i) sk_X509_push(intermediates.get(), chain[i].get());
  std::unique_ptr<X509_STORE_CTX, StoreCtxFree> context(X509_STORE_CTX_new());
  if (store == nullptr || intermediates == nullptr || context == nullptr ||
      X509_STORE_CTX_init(context.get(), store.get(), leaf, intermediates.get()) != 1) {
    ERR_clear_error();
    return absl::ResourceExhaustedError("cannot verify the TLS certificate: OpenSSL is out of memory");
  }
  // The leaf's dates are checked above, against a tolerance; a chain that ends at any
  // certificate of the CA file is the peer's too (an intermediate CA there is enough).
  X509_STORE_CTX_set_flags(context.get(), X509_V_FLAG_NO_CHECK_TIME | X509_V_FLAG_PARTIAL_CHAIN);
  const int verified = X509_verify_cert(context.get());
  const int error = X509_STORE_CTX_get_error(context.get());
  ERR_clear_error();
  if (verified != 1) {
    return Refused(files.cert_field, files.cert_path,
                   absl::StrCat("holds a certificate that ", files.ca_field, " '", files.ca_path,
                                "' does not sign (", X509_verify_cert_error_string(error),
                                "): the workers, who verify it with that file, would refuse it"));
  }
  return absl::OkStatus();
}

absl::Status CheckCertificateNames(const std::string& cert_pem, const std::string& host) {
  std::vector<Cert> chain = ReadCertificates(cert_pem);
  if (chain.empty()) return absl::InvalidArgumentError("the certificate file holds no PEM certificate");
  X509* leaf = chain.front().get();
  std::string bare = host;
  if (bare.size() > 2 && bare.front() == '[' && bare.back() == ']') bare = bare.substr(1, bare.size() - 2);
  const bool matches = X509_check_ip_asc(leaf, bare.c_str(), 0) == 1 ||
                       X509_check_host(leaf, bare.data(), bare.size(), 0, nullptr) == 1;
  ERR_clear_error();
  if (matches) return absl::OkStatus();
  std::vector<std::string> names;
  auto* alt_names = static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(leaf, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; alt_names != nullptr && i < sk_GENERAL_NAME_num(alt_names); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(alt_names, i);
    if (name->type == GEN_DNS) {
      const ASN1_STRING* text = name->d.dNSName;
      names.push_back(absl::StrCat(
          "DNS:", std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(text)),
                              ASN1_STRING_length(text))));
    } else if (name->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* ip = name->d.iPAddress;
      const int length = ASN1_STRING_length(ip);
      char text[INET6_ADDRSTRLEN] = "?";
      if (length == 4 || length == 16) {
        inet_ntop(length == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(ip), text, sizeof(text));
      }
      names.push_back(absl::StrCat("IP:", text));
    }
  }
  GENERAL_NAMES_free(alt_names);
  ERR_clear_error();
  return absl::FailedPreconditionError(absl::StrCat(
      "the certificate names ", names.empty() ? "no host (no subjectAltName)" : absl::StrJoin(names, ", "),
      ", not '", host, "'"));
}

}  // namespace tamp

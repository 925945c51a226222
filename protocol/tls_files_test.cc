// CheckTlsFiles() on a throwaway PKI (tests/gen_certs.sh, valid 2 days from now): the files
// gRPC takes pass, and each kind of file it would refuse is named.
#include "protocol/tls_files.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp {
namespace {

using ::testing::HasSubstr;

class TlsFilesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = new std::string(absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/tls_files_certs"));
    const std::string command = absl::StrCat("bash tests/gen_certs.sh '", *dir_, "' >/dev/null");
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }
  static std::string Read(const std::string& name) {
    std::ifstream file(absl::StrCat(*dir_, "/", name));
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
  }
  // A server's files: CERT and KEY (names in the PKI) with ca.crt.
  static TlsFiles Files(const std::string& cert, const std::string& key, bool server = true) {
    TlsFiles files;
    files.cert_field = "cluster.tls.cert_file";
    files.cert_path = cert;
    files.cert_pem = Read(cert);
    files.key_field = "cluster.tls.key_file";
    files.key_path = key;
    files.key_pem = Read(key);
    files.ca_field = "cluster.tls.ca_file";
    files.ca_path = "ca.crt";
    files.ca_pem = Read("ca.crt");
    files.verify_chain = server;
    return files;
  }
  static std::string* dir_;
};
std::string* TlsFilesTest::dir_ = nullptr;

TEST_F(TlsFilesTest, TheFilesGrpcTakesPass) {
  EXPECT_TRUE(CheckTlsFiles(Files("server.crt", "server.key"), absl::Now()).ok());
  // A worker's certificate is not checked against the CA file: the servers check it, with
  // theirs, only when they require one.
  EXPECT_TRUE(CheckTlsFiles(Files("rogue_client.crt", "rogue_client.key", /*server=*/false),
                            absl::Now())
                  .ok());
  // The chain with its CA after the leaf, as some CAs hand it out.
  TlsFiles chained = Files("server.crt", "server.key");
  chained.cert_pem += Read("ca.crt");
  EXPECT_TRUE(CheckTlsFiles(chained, absl::Now()).ok());
  // A certificate issued a moment ago on a clock a little ahead of this one.
  EXPECT_TRUE(CheckTlsFiles(Files("server.crt", "server.key"), absl::Now() - absl::Minutes(5))
                  .ok());
}

TEST_F(TlsFilesTest, AKeyThatIsNotTheCertificatesIsNamed) {
  const absl::Status status = CheckTlsFiles(Files("server.crt", "client.key"), absl::Now());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "cluster.tls.key_file: 'client.key' is not the key of the certificate in "
            "cluster.tls.cert_file 'server.crt'");
  // The worker's side too.
  EXPECT_FALSE(CheckTlsFiles(Files("client.crt", "server.key", false), absl::Now()).ok());
}

TEST_F(TlsFilesTest, FilesThatAreNotPemAreNamed) {
  TlsFiles files = Files("server.crt", "server.key");
  files.cert_pem = Read("server.key");  // The key where the certificate belongs.
  EXPECT_EQ(CheckTlsFiles(files, absl::Now()).message(),
            "cluster.tls.cert_file: 'server.crt' holds no PEM certificate");
  files = Files("server.crt", "server.key");
  files.key_pem = Read("server.crt");
  EXPECT_THAT(CheckTlsFiles(files, absl::Now()).message(),
              HasSubstr("cluster.tls.key_file: 'server.key' holds no PEM private key"));
  files = Files("server.crt", "server.key");
  files.ca_pem = "not a certificate\n";
  EXPECT_EQ(CheckTlsFiles(files, absl::Now()).message(),
            "cluster.tls.ca_file: 'ca.crt' holds no PEM certificate");
}

TEST_F(TlsFilesTest, ACertificateOutsideItsDatesIsNamed) {
  const TlsFiles files = Files("server.crt", "server.key");
  const absl::Status expired = CheckTlsFiles(files, absl::Now() + absl::Hours(72));
  EXPECT_EQ(expired.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(expired.message(),
              HasSubstr("cluster.tls.cert_file: 'server.crt' holds a certificate that expired "
                        "on 20"));
  EXPECT_THAT(expired.message(), HasSubstr(" UTC"));
  EXPECT_THAT(CheckTlsFiles(files, absl::Now() - absl::Hours(24)).message(),
              HasSubstr("holds a certificate not valid before 20"));
}

TEST_F(TlsFilesTest, AServerCertificateTheCaFileDoesNotSignIsNamed) {
  const absl::Status status =
      CheckTlsFiles(Files("rogue_client.crt", "rogue_client.key"), absl::Now());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("cluster.tls.cert_file: 'rogue_client.crt' holds a certificate that "
                        "cluster.tls.ca_file 'ca.crt' does not sign ("));
  EXPECT_THAT(status.message(), HasSubstr("the workers, who verify it with that file, would "
                                          "refuse it"));
  // The rogue CA in the CA file: signed.
  TlsFiles trusted = Files("rogue_client.crt", "rogue_client.key");
  trusted.ca_pem += Read("rogue_ca.crt");
  EXPECT_TRUE(CheckTlsFiles(trusted, absl::Now()).ok());
}

// The server certificate of tests/gen_certs.sh names 127.0.0.1, ::1 and localhost.
TEST_F(TlsFilesTest, TheHostsACertificateNamesAreChecked) {
  const std::string cert = Read("server.crt");
  for (const char* host : {"127.0.0.1", "localhost", "::1", "[::1]"}) {
    EXPECT_TRUE(CheckCertificateNames(cert, host).ok()) << host;
  }
  const absl::Status other = CheckCertificateNames(cert, "tamp-server-0.tamp-server");
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(other.message(), "the certificate names IP:127.0.0.1, IP:::1, DNS:localhost, not "
                             "'tamp-server-0.tamp-server'");
  EXPECT_FALSE(CheckCertificateNames(cert, "10.0.0.1").ok());
  // The CA's certificate has no subjectAltName.
  EXPECT_THAT(CheckCertificateNames(Read("ca.crt"), "localhost").message(),
              HasSubstr("the certificate names no host (no subjectAltName)"));
  EXPECT_EQ(CheckCertificateNames("", "localhost").code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tamp

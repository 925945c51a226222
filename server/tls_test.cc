// Admission and TLS of the service (issue 7): a throwaway PKI made with the openssl CLI
// (tests/gen_certs.sh) in TEST_TMPDIR; shard 0 of the test job served with the credentials
// MakeServerCredentials() builds from config.cluster.tls (mutual TLS) and a job token.
// TLS + token works; no token, a wrong token, no client certificate, a certificate from
// another CA and a plaintext client are all refused, and the refused calls change nothing.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "job/security.h"
#include "protocol/grpc_security.h"
#include "protocol/handshake.h"
#include "server/service.h"
#include "server/shard.h"
#include "server/test_job.h"

namespace tamp {
namespace {

using ::tamp::testing::EncodePush;
using ::tamp::testing::TestConfig;
using ::tamp::testing::TestGradient;
using ::tamp::testing::TestLayout;

constexpr char kToken[] = "tls-test-token";

std::string TmpDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new std::string(absl::StrCat(TmpDir(), "/certs"));
    const std::string command = absl::StrCat("bash tests/gen_certs.sh '", *certs_, "' >/dev/null");
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    std::ofstream(absl::StrCat(*certs_, "/token")) << "  " << kToken << "\n";
  }
  static std::string Cert(const std::string& name) { return absl::StrCat(*certs_, "/", name); }

  void SetUp() override {
    config_ = TestConfig([](config::RunConfig& c) {
      config::Cluster* cluster = c.mutable_cluster();
      cluster->set_job_token_file(Cert("token"));
      config::Tls* tls = cluster->mutable_tls();
      tls->set_cert_file(Cert("server.crt"));
      tls->set_key_file(Cert("server.key"));
      tls->set_ca_file(Cert("ca.crt"));
      tls->set_client_cert_file(Cert("client.crt"));
      tls->set_client_key_file(Cert("client.key"));
      tls->set_require_client_cert(true);
    });
    layout_ = TestLayout(config_);
    shard_ = *Shard::Create(config_, layout_, 0);
    absl::StatusOr<std::string> token = LoadJobToken(config_.cluster());
    ASSERT_TRUE(token.ok()) << token.status();
    ASSERT_EQ(*token, kToken);  // Trimmed.
    service_ = std::make_unique<ParameterServerService>(shard_.get(), *token);
    auto credentials = MakeServerCredentials(config_.cluster(), "127.0.0.1");
    ASSERT_TRUE(credentials.ok()) << credentials.status();
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", *credentials, &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_NE(port_, 0);
  }

  void TearDown() override {
    if (server_ == nullptr) return;
    shard_->Close(absl::UnavailableError("server shutting down"));
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }

  std::string Address() const { return absl::StrCat("127.0.0.1:", port_); }

  // A stub over `credentials` (default: what a worker of config_ uses).
  std::unique_ptr<rpc::ParameterServer::Stub> Stub(
      std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr) {
    if (credentials == nullptr) {
      auto made = MakeChannelCredentials(config_.cluster(), Address());
      EXPECT_TRUE(made.ok()) << made.status();
      credentials = *made;
    }
    return rpc::ParameterServer::NewStub(grpc::CreateChannel(Address(), credentials));
  }

  static void Prepare(grpc::ClientContext* context) {
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  }

  grpc::Status Handshake(rpc::ParameterServer::Stub& stub, const std::string& token,
                         uint32_t worker = 0) {
    grpc::ClientContext context;
    Prepare(&context);
    AttachJobToken(token, &context);
    rpc::HandshakeRequest request;
    FillHandshake(layout_, config_, worker, 0, 16, 32, &request);
    rpc::HandshakeResponse response;
    return stub.Handshake(&context, request, &response);
  }

  grpc::Status Push(rpc::ParameterServer::Stub& stub, const std::string& token, uint32_t worker,
                    uint32_t chunk, const std::string& metadata_key = kAuthorizationKey) {
    grpc::ClientContext context;
    Prepare(&context);
    if (!token.empty()) {
      context.AddMetadata(metadata_key, metadata_key == kAuthorizationKey
                                            ? absl::StrCat("Bearer ", token)
                                            : token);
    }
    rpc::PushPullRequest request;
    request.set_worker_rank(worker);
    request.set_chunk_id(chunk);
    const size_t n = layout_.chunks[chunk].chunk.length;
    request.set_payload(EncodePush(config_, layout_, 0, chunk, worker, TestGradient(n, 0, worker)));
    rpc::PushPullResponse response;
    return stub.PushPull(&context, request, &response);
  }

  static std::string* certs_;
  config::RunConfig config_;
  JobLayout layout_;
  std::unique_ptr<Shard> shard_;
  std::unique_ptr<ParameterServerService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};
std::string* TlsTest::certs_ = nullptr;

TEST_F(TlsTest, MutualTlsWithTheTokenWorksForBothWorkers) {
  auto stub = Stub();
  ASSERT_TRUE(Handshake(*stub, kToken).ok());
  const uint32_t chunk = shard_->chunk_ids().front();
  grpc::Status statuses[2];
  std::thread worker0([&] { statuses[0] = Push(*stub, kToken, 0, chunk); });
  // The other worker sends the token in the x-tamp-token form.
  std::thread worker1([&] { statuses[1] = Push(*stub, kToken, 1, chunk, kTokenKey); });
  worker0.join();
  worker1.join();
  for (const grpc::Status& status : statuses) EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(shard_->Snapshot(chunk)->step, 1u);
}

TEST_F(TlsTest, MissingOrWrongTokenIsUnauthenticatedAndChangesNothing) {
  auto stub = Stub();
  const uint32_t chunk = shard_->chunk_ids().front();
  const Shard::ChunkSnapshot before = *shard_->Snapshot(chunk);
  for (const std::string& token : {std::string(), std::string("tls-test-tokem"),
                                  std::string("tls-test-token-longer"), std::string("t")}) {
    grpc::Status status = Handshake(*stub, token);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << "'" << token << "'";
    status = Push(*stub, token, 0, chunk);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << "'" << token << "'";
    grpc::ClientContext context;
    Prepare(&context);
    AttachJobToken(token, &context);
    rpc::PullWeightsResponse response;
    EXPECT_EQ(stub->PullWeights(&context, rpc::PullWeightsRequest(), &response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(response.chunks_size(), 0);
  }
  const Shard::ChunkSnapshot after = *shard_->Snapshot(chunk);
  EXPECT_EQ(after.arrived, before.arrived);
  EXPECT_EQ(after.accumulator, before.accumulator);
  EXPECT_EQ(after.weights, before.weights);
  EXPECT_EQ(after.step, before.step);
}

TEST_F(TlsTest, ClientWithoutACertificateIsRefused) {
  grpc::SslCredentialsOptions options;
  std::ifstream ca(Cert("ca.crt"));
  options.pem_root_certs.assign(std::istreambuf_iterator<char>(ca), {});
  auto stub = Stub(grpc::SslCredentials(options));
  const grpc::Status status = Handshake(*stub, kToken);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
}

TEST_F(TlsTest, ClientCertificateFromAnotherCaIsRefused) {
  config::RunConfig rogue = config_;
  rogue.mutable_cluster()->mutable_tls()->set_client_cert_file(Cert("rogue_client.crt"));
  rogue.mutable_cluster()->mutable_tls()->set_client_key_file(Cert("rogue_client.key"));
  auto credentials = MakeChannelCredentials(rogue.cluster(), Address());
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  auto stub = Stub(*credentials);
  EXPECT_EQ(Handshake(*stub, kToken).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsTest, PlaintextClientAgainstATlsServerFails) {
  auto stub = Stub(grpc::InsecureChannelCredentials());
  const grpc::Status status = Handshake(*stub, kToken);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
}

TEST_F(TlsTest, ServerCertificateMustNameTheHost) {
  // The server's certificate names 127.0.0.1, ::1 and localhost; a worker that expects
  // another name refuses it.
  config::RunConfig other = config_;
  other.mutable_cluster()->mutable_tls()->set_server_name_override("ps.example.org");
  auto credentials = MakeChannelCredentials(other.cluster(), Address());
  ASSERT_TRUE(credentials.ok());
  grpc::ChannelArguments args;
  AddTlsChannelArguments(other.cluster(), &args);
  auto stub = rpc::ParameterServer::NewStub(grpc::CreateCustomChannel(Address(), *credentials, args));
  EXPECT_EQ(Handshake(*stub, kToken).error_code(), grpc::StatusCode::UNAVAILABLE);
  // The server warns of it at start (tamp_server, --check too), naming both names.
  EXPECT_EQ(CertificateNameNote(other.cluster(), "127.0.0.1"),
            absl::StrCat("cluster.tls.cert_file '", Cert("server.crt"),
                         "': the certificate names IP:127.0.0.1, IP:::1, DNS:localhost, not "
                         "'ps.example.org': workers verify it as "
                         "cluster.tls.server_name_override 'ps.example.org' and will refuse "
                         "this server (set the override to a name it holds)"));
  EXPECT_NE(CertificateNameNote(config_.cluster(), "tamp-server-0.tamp-server")
                .find("workers that dial 'tamp-server-0.tamp-server' will refuse this server"),
            std::string::npos);
  // Names it holds, a wildcard listen address, no TLS: nothing to say.
  EXPECT_EQ(CertificateNameNote(config_.cluster(), "localhost"), "");
  EXPECT_EQ(CertificateNameNote(config_.cluster(), "0.0.0.0"), "");
  EXPECT_EQ(CertificateNameNote(config::Cluster(), "tamp-server-0.tamp-server"), "");
}

TEST(PlaintextRuleTest, PlaintextOnlyOnLoopbackUnlessExplicit) {
  config::Cluster cluster;
  EXPECT_TRUE(MakeServerCredentials(cluster, "127.0.0.1").ok());
  EXPECT_TRUE(MakeServerCredentials(cluster, "::1").ok());
  EXPECT_EQ(MakeServerCredentials(cluster, "0.0.0.0").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(MakeChannelCredentials(cluster, "10.1.2.3:4000").status().code(),
            absl::StatusCode::kFailedPrecondition);
  cluster.set_plaintext(true);
  EXPECT_TRUE(MakeServerCredentials(cluster, "0.0.0.0").ok());
  EXPECT_TRUE(MakeChannelCredentials(cluster, "10.1.2.3:4000").ok());
}

}  // namespace
}  // namespace tamp

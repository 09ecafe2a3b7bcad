// The daemon's security model end to end: the real `transposed` (shared testing::DaemonProcess)
// with an admin token, with TLS and with mutual TLS, driven by the real C++ client and
// transposectl. Certificates are made at test time with the openssl command.
#include <google/protobuf/descriptor.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "server/grpc/security.h"
#include "testing/daemon_process.h"
#include "testing/test_files.h"
#include "transposed/v1/transposed.grpc.pb.h"

namespace transposed {
namespace {

namespace fs = std::filesystem;

constexpr char kToken[] = "s3cret-admin-token-0123456789";

Problem Small() {
  Problem p;
  p.rows = 32;
  p.cols = 48;
  p.dtype = DType::kF32;
  return p;
}

v1::TuneRequest SmallTune() {
  v1::TuneRequest r;
  *r.mutable_problem() = ProblemToProto(Small());
  r.set_budget_seconds(2);
  return r;
}

class SecurityE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/security_e2e.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ / "token") << kToken << "\n";
  }
  void TearDown() override {
    if (daemon_) (void)daemon_->Stop();
    if (!HasFailure()) {
      if (daemon_) daemon_->RemoveDir();
      fs::remove_all(dir_);
    }
  }

  // A CA, a server certificate for localhost / 127.0.0.1 and a client certificate, both signed
  // by the CA; and a second CA that signed nothing the daemon trusts.
  void MakeCertificates() {
    const std::string d = dir_.string();
    const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    std::ofstream(dir_ / "server.ext") << "subjectAltName=DNS:localhost,IP:127.0.0.1\n";
    std::ofstream(dir_ / "client.ext") << "extendedKeyUsage=clientAuth\n";
    const std::string script =
        "set -e; cd " + d + "; exec 2>openssl.log;" +
        "openssl req -x509" + key + " -keyout ca.key -out ca.pem -days 2 -subj /CN=test-ca;" +
        "openssl req -x509" + key + " -keyout other.key -out other.pem -days 2 -subj /CN=other;" +
        "openssl req" + key + " -keyout server.key -out server.csr -subj /CN=localhost;" +
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2"
        " -extfile server.ext -out server.pem;" +
        "openssl req" + key + " -keyout client.key -out client.csr -subj /CN=batch-job;" +
        "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2"
        " -extfile client.ext -out client.pem;" +
        "openssl req" + key + " -keyout rogue.key -out rogue.csr -subj /CN=rogue;" +
        "openssl x509 -req -in rogue.csr -CA other.pem -CAkey other.key -CAcreateserial -days 2"
        " -extfile client.ext -out rogue.pem";
    const int rc = std::system(("bash -c '" + script + "'").c_str());
    ASSERT_EQ(rc, 0) << testing::ReadFile(dir_ / "openssl.log");
  }

  void StartDaemon(std::vector<std::string> extra) {
    testing::DaemonOptions o;
    o.binary = TRANSPOSED_BINARY;
    o.extra_args = std::move(extra);
    daemon_ = std::make_unique<testing::DaemonProcess>(o);
    Status s = daemon_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  std::unique_ptr<Client> Connect(ClientOptions o) {
    o.deadline_seconds = 60;
    auto c = Client::Connect(daemon_->address(), o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }

  std::string Path(const char* name) const { return (dir_ / name).string(); }

  fs::path dir_;
  std::unique_ptr<testing::DaemonProcess> daemon_;
};

TEST_F(SecurityE2eTest, AdminRpcsNeedTheTokenLookupsStayOpen) {
  StartDaemon({"--admin-token-file", Path("token")});
  auto anonymous = Connect({});
  ASSERT_NE(anonymous, nullptr);
  // Lookups are open.
  auto a = anonymous->GetConfig(Small());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(anonymous->ListDevices().ok());
  EXPECT_TRUE(anonymous->ListEntries(v1::ListEntriesRequest()).ok());
  // Admin RPCs are not, from loopback either.
  v1::DeleteEntriesRequest all;
  all.set_all(true);
  auto del = anonymous->DeleteEntries(all);
  EXPECT_EQ(del.status().code(), StatusCode::kUnauthenticated) << del.status().ToString();
  auto tune = anonymous->Tune(SmallTune());
  EXPECT_EQ(tune.status().code(), StatusCode::kUnauthenticated) << tune.status().ToString();
  // TuneMany is open (the cached problem is skipped); with force it re-tunes: admin.
  v1::TuneManyRequest many;
  *many.add_problems() = SmallTune().problem();
  int answers = 0;
  auto count = [&answers](const v1::TuneManyProgress& m) {
    answers += m.progress().has_answer() ? 1 : 0;
    return Status::OK();
  };
  Status open = anonymous->TuneMany(many, count);
  EXPECT_TRUE(open.ok()) << open.ToString();
  EXPECT_EQ(answers, 1);
  many.set_force(true);
  Status forced = anonymous->TuneMany(many, count);
  EXPECT_EQ(forced.code(), StatusCode::kUnauthenticated) << forced.ToString();
  ClientOptions wrong;
  wrong.token = "not-the-token-at-all";
  auto w = Connect(wrong);
  EXPECT_EQ(w->DeleteEntries(all).status().code(), StatusCode::kUnauthenticated);
  // The cache is intact.
  auto hit = anonymous->GetConfig(Small(), v1::DeviceSelector(), v1::CACHE_ONLY);
  EXPECT_TRUE(hit.ok()) << hit.status().ToString();
  // With the token.
  ClientOptions admin;
  admin.token = kToken;
  auto ok = Connect(admin);
  auto tuned = ok->Tune(SmallTune());
  EXPECT_TRUE(tuned.ok()) << tuned.status().ToString();
  Status forced_with_token = ok->TuneMany(many, count);
  EXPECT_TRUE(forced_with_token.ok()) << forced_with_token.ToString();
  auto deleted = ok->DeleteEntries(all);
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(*deleted, 1);
  const std::string log = testing::ReadFile(daemon_->log());
  EXPECT_NE(log.find("rpc=DeleteEntries peer="), std::string::npos) << log;
  EXPECT_EQ(log.find(kToken), std::string::npos) << "the token leaked into the log";
}

// Every RPC the gate table calls admin refuses a caller without the token, whatever its handler:
// an empty request to each (as raw bytes, so RPCs added later are covered by the table alone)
// answers UNAUTHENTICATED; every open RPC does not.
TEST_F(SecurityE2eTest, EveryAdminRpcRefusesACallerWithoutTheToken) {
  StartDaemon({"--admin-token-file", Path("token")});
  // Through a message type of the same file, so that its descriptors are linked in.
  const google::protobuf::ServiceDescriptor* service =
      v1::GetConfigRequest::descriptor()->file()->FindServiceByName("Transposer");
  ASSERT_NE(service, nullptr);
  grpc::GenericStub stub(grpc::CreateChannel(daemon_->address(), grpc::InsecureChannelCredentials()));
  int admin = 0;
  for (int i = 0; i < service->method_count(); ++i) {
    const std::string& name = service->method(i)->name();
    grpc::Slice empty(std::string{});
    grpc::ByteBuffer request(&empty, 1), response;  // an empty message
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    std::promise<grpc::Status> done;
    stub.UnaryCall(&ctx, "/" + service->full_name() + "/" + name, grpc::StubOptions(), &request,
                   &response, [&done](grpc::Status s) { done.set_value(std::move(s)); });
    const grpc::Status status = done.get_future().get();
    if (IsAdminMethod(name)) {
      ++admin;
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
          << name << ": " << status.error_message()
          << " (an admin RPC's handler must call GrpcTransposer::Authorize first)";
    } else {
      EXPECT_NE(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << name;
      EXPECT_NE(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << name;
    }
  }
  EXPECT_GE(admin, 4);  // Tune, DeleteEntries, ExportEntries, ImportEntries
}

TEST_F(SecurityE2eTest, TlsAndMutualTls) {
  MakeCertificates();
  StartDaemon({"--tls-cert", Path("server.pem"), "--tls-key", Path("server.key")});
  // Plaintext to a TLS daemon fails.
  auto plain = Connect({});
  EXPECT_EQ(plain->ListDevices().status().code(), StatusCode::kUnavailable);
  // TLS with the CA works; with a CA that did not sign the server's certificate it does not.
  ClientOptions tls;
  tls.tls_ca_file = Path("ca.pem");
  auto good = Connect(tls);
  auto answer = good->GetConfig(Small());
  EXPECT_TRUE(answer.ok()) << answer.status().ToString();
  ClientOptions wrong_ca;
  wrong_ca.tls_ca_file = Path("other.pem");
  EXPECT_EQ(Connect(wrong_ca)->ListDevices().status().code(), StatusCode::kUnavailable);
  ASSERT_TRUE(daemon_->Stop().ok());

  // Mutual TLS: no certificate or one from another CA is refused; the CA's client certificate
  // works and, without a token file, may call the admin RPCs.
  StartDaemon({"--tls-cert", Path("server.pem"), "--tls-key", Path("server.key"),
               "--tls-client-ca", Path("ca.pem")});
  EXPECT_FALSE(Connect(tls)->ListDevices().ok());
  ClientOptions rogue = tls;
  rogue.tls_cert_file = Path("rogue.pem");
  rogue.tls_key_file = Path("rogue.key");
  EXPECT_FALSE(Connect(rogue)->ListDevices().ok());
  ClientOptions mutual = tls;
  mutual.tls_cert_file = Path("client.pem");
  mutual.tls_key_file = Path("client.key");
  auto m = Connect(mutual);
  auto devices = m->ListDevices();
  EXPECT_TRUE(devices.ok()) << devices.status().ToString();
  auto tuned = m->Tune(SmallTune());
  EXPECT_TRUE(tuned.ok()) << tuned.status().ToString();
  const std::string log = testing::ReadFile(daemon_->log());
  EXPECT_NE(log.find("transport=mtls"), std::string::npos) << log;
}

// --peer over mutual TLS: daemon a serves mTLS only; b asks it with --peer-tls-ca and a client
// certificate and gets a's answer (SOURCE_PEER); c, asking in plaintext, and d, expecting another
// name on a's certificate, get nothing from a and tune themselves.
TEST_F(SecurityE2eTest, PeersOverMutualTls) {
  MakeCertificates();
  StartDaemon({"--tls-cert", Path("server.pem"), "--tls-key", Path("server.key"),
               "--tls-client-ca", Path("ca.pem"), "--instance-id", "node-a"});
  ClientOptions mutual;
  mutual.tls_ca_file = Path("ca.pem");
  mutual.tls_cert_file = Path("client.pem");
  mutual.tls_key_file = Path("client.key");
  auto tuned = Connect(mutual)->GetConfig(Small());
  ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();
  ASSERT_EQ(tuned->source(), v1::SOURCE_TUNED);

  auto ask = [&](const std::string& instance, std::vector<std::string> peer_flags) {
    testing::DaemonOptions o;
    o.binary = TRANSPOSED_BINARY;
    o.extra_args = {"--instance-id", instance, "--peer", daemon_->address(), "--peer-timeout",
                    "30"};
    o.extra_args.insert(o.extra_args.end(), peer_flags.begin(), peer_flags.end());
    testing::DaemonProcess d(o);
    Status s = d.Start();
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) return v1::SOURCE_UNSPECIFIED;
    ClientOptions plain;
    plain.deadline_seconds = 120;
    auto c = Client::Connect(d.address(), plain);
    auto a = (*c)->GetConfig(Small());
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    const std::string log = testing::ReadFile(d.log());
    EXPECT_TRUE(d.Stop().ok());
    if (!HasFailure()) d.RemoveDir();
    if (a.ok() && a->source() == v1::SOURCE_PEER)
      EXPECT_EQ(a->variant().name(), tuned->variant().name()) << log;
    return a.ok() ? a->source() : v1::SOURCE_UNSPECIFIED;
  };
  const std::vector<std::string> peer_mtls = {"--peer-tls-ca", Path("ca.pem"), "--peer-tls-cert",
                                              Path("client.pem"), "--peer-tls-key",
                                              Path("client.key")};
  EXPECT_EQ(ask("node-b", peer_mtls), v1::SOURCE_PEER);
  EXPECT_EQ(ask("node-c", {}), v1::SOURCE_TUNED);
  std::vector<std::string> wrong_name = peer_mtls;
  wrong_name.insert(wrong_name.end(), {"--peer-tls-server-name", "not-the-daemon.example"});
  EXPECT_EQ(ask("node-d", wrong_name), v1::SOURCE_TUNED);
}

// The connection caps hold for TLS too (checked at accept, before the handshake): with
// --max-connections-per-client 2, two TLS clients holding their connections are served, a third
// is refused (UNAVAILABLE), and served once the others are gone.
TEST_F(SecurityE2eTest, ConnectionCapHoldsForTls) {
  MakeCertificates();
  StartDaemon({"--tls-cert", Path("server.pem"), "--tls-key", Path("server.key"),
               "--max-connections-per-client", "2"});
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = testing::ReadFile(dir_ / "ca.pem");
  auto list_devices = [&](std::shared_ptr<grpc::Channel> channel) {
    auto stub = v1::Transposer::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    v1::ListDevicesResponse r;
    return stub->ListDevices(&ctx, v1::ListDevicesRequest(), &r);
  };
  auto channel = [&]() {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
    return grpc::CreateCustomChannel(daemon_->address(), grpc::SslCredentials(ssl), args);
  };
  std::vector<std::shared_ptr<grpc::Channel>> held = {channel(), channel()};
  for (auto& c : held) {
    grpc::Status s = list_devices(c);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  EXPECT_EQ(list_devices(channel()).error_code(), grpc::StatusCode::UNAVAILABLE);
  held.clear();  // closes their connections
  grpc::Status s;
  for (int i = 0; i < 600 && !(s = list_devices(channel())).ok(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_TRUE(s.ok()) << s.error_message();
  const std::string log = testing::ReadFile(daemon_->log());
  EXPECT_NE(log.find("refused a connection from ipv4:127.0.0.1"), std::string::npos) << log;
}

TEST_F(SecurityE2eTest, TransposectlSendsTheTokenAndSpeaksTls) {
  MakeCertificates();
  StartDaemon({"--tls-cert", Path("server.pem"), "--tls-key", Path("server.key"),
               "--admin-token-file", Path("token")});
  const std::string ctl = std::string(TRANSPOSECTL_BINARY) + " --server " + daemon_->address() +
                          " --tls-ca " + Path("ca.pem") + " ";
  const std::string out = Path("ctl.out");
  auto run = [&](const std::string& args) {
    const int rc = std::system((ctl + args + " >" + out + " 2>&1").c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  };
  EXPECT_EQ(run("get --rows 16 --cols 16 --dtype f32"), 0) << testing::ReadFile(out);
  EXPECT_EQ(run("delete --all"), 1) << testing::ReadFile(out);
  EXPECT_NE(testing::ReadFile(out).find("UNAUTHENTICATED"), std::string::npos)
      << testing::ReadFile(out);
  EXPECT_EQ(run("--token-file " + Path("token") + " delete --all"), 0)
      << testing::ReadFile(out);

  // Issue 37: plaintext to this TLS daemon. transposectl says what to try (not a bare "Socket
  // closed"); the daemon logs the client's mistake below error.
  const std::string plain = std::string(TRANSPOSECTL_BINARY) + " --server " + daemon_->address() +
                            " devices >" + out + " 2>&1";
  const int rc = std::system(plain.c_str());
  EXPECT_EQ(WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, 3) << testing::ReadFile(out);
  EXPECT_NE(testing::ReadFile(out).find("the daemon may require TLS: --tls-ca"), std::string::npos)
      << testing::ReadFile(out);
  std::string log;
  for (int i = 0;
       i < 50 && (log = testing::ReadFile(daemon_->log())).find("andshake") == std::string::npos;
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_NE(log.find("andshake"), std::string::npos) << log;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);)
    if (line.find("andshake") != std::string::npos) {
      // "2026-...T...  LEVEL [tid] message": the level is the second word.
      std::istringstream words(line);
      std::string time, level;
      words >> time >> level;
      EXPECT_TRUE(level == "info" || level == "debug") << "logged at " << level << ": " << line;
    }
}

}  // namespace
}  // namespace transposed

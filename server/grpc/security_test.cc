#include "server/grpc/security.h"

#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "testing/test_files.h"
#include "transposed/v1/transposed.grpc.pb.h"

namespace transposed {
namespace {

TEST(SecurityTest, AdminMethodsAreTheOnesThatChangeTheCache) {
  EXPECT_TRUE(IsAdminMethod("Tune"));
  EXPECT_TRUE(IsAdminMethod("DeleteEntries"));
  EXPECT_FALSE(IsAdminMethod("GetConfig"));
  EXPECT_FALSE(IsAdminMethod("ListDevices"));
  EXPECT_FALSE(IsAdminMethod("ListEntries"));
  // TuneMany tunes only what is missing, like GetConfig; with force it re-tunes, like Tune.
  EXPECT_TRUE(IsOpenMethod("TuneMany"));
  EXPECT_FALSE(IsAdminMethod("TuneMany"));
  EXPECT_TRUE(IsAdminMethod("TuneMany.force"));
  const AdminGate plain("", /*mtls=*/false);
  EXPECT_TRUE(plain.Authorize("TuneMany", "ipv4:10.0.0.7:1", "", false).ok());
  EXPECT_EQ(plain.Authorize("TuneMany.force", "ipv4:10.0.0.7:1", "", false).code(),
            StatusCode::kPermissionDenied);
}

// Every RPC of the service is classified: admin (needs the token) or open. A new RPC in the
// proto fails here until it is put in kAdminMethods or kOpenMethods (server/grpc/security.cc).
TEST(SecurityTest, EveryRpcOfTheServiceIsAdminOrOpen) {
  // Through a message type of the same file, so that its descriptors are linked in.
  const google::protobuf::ServiceDescriptor* service =
      v1::GetConfigRequest::descriptor()->file()->FindServiceByName("Transposer");
  ASSERT_NE(service, nullptr);
  ASSERT_GT(service->method_count(), 4);
  for (int i = 0; i < service->method_count(); ++i) {
    const std::string& m = service->method(i)->name();
    EXPECT_NE(IsAdminMethod(m), IsOpenMethod(m))
        << "RPC " << m << ": put it in exactly one of kAdminMethods (changes or bulk-reads the "
        << "cache: the admin token) and kOpenMethods in server/grpc/security.cc";
  }
}

TEST(SecurityTest, LoopbackPeers) {
  EXPECT_TRUE(IsLoopbackPeer("ipv4:127.0.0.1:5000"));
  EXPECT_TRUE(IsLoopbackPeer("ipv4:127.1.2.3:5000"));
  EXPECT_TRUE(IsLoopbackPeer("ipv6:[::1]:5000"));
  EXPECT_TRUE(IsLoopbackPeer("unix:/run/t.sock"));
  EXPECT_FALSE(IsLoopbackPeer("ipv4:10.0.0.7:5000"));
  EXPECT_FALSE(IsLoopbackPeer("ipv6:[fe80::1]:5000"));
  EXPECT_FALSE(IsLoopbackPeer("ipv4:1127.0.0.1:5000"));
  EXPECT_FALSE(IsLoopbackPeer(""));
}

TEST(SecurityTest, WithATokenOnlyTheTokenCounts) {
  const AdminGate gate("0123456789abcdef-secret", /*mtls=*/true);
  const char* local = "ipv4:127.0.0.1:1";
  EXPECT_TRUE(gate.Authorize("GetConfig", local, "", false).ok());
  EXPECT_TRUE(gate.Authorize("ListEntries", "ipv4:10.1.1.1:1", "", false).ok());
  Status s = gate.Authorize("DeleteEntries", local, "", true);
  EXPECT_EQ(s.code(), StatusCode::kUnauthenticated) << s.ToString();
  EXPECT_NE(s.message().find("authorization: Bearer"), std::string::npos);
  EXPECT_EQ(gate.Authorize("Tune", local, "Bearer wrong", false).code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(gate.Authorize("Tune", local, "Bearer 0123456789abcdef-secre", false).code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(gate.Authorize("Tune", local, "Bearer 0123456789abcdef-secretX", false).code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(gate.Authorize("Tune", local, "0123456789abcdef-secret", false).code(),
            StatusCode::kUnauthenticated);
  EXPECT_TRUE(gate.Authorize("Tune", "ipv4:10.1.1.1:1", "Bearer 0123456789abcdef-secret", false)
                  .ok());
}

TEST(SecurityTest, WithoutATokenLoopbackOrAVerifiedCertificate) {
  const AdminGate plain("", /*mtls=*/false);
  EXPECT_TRUE(plain.Authorize("Tune", "ipv4:127.0.0.1:1", "", false).ok());
  Status s = plain.Authorize("DeleteEntries", "ipv4:10.0.0.7:1", "", false);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("--admin-token-file"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("'ipv4:10.0.0.7:1'"), std::string::npos) << s.message();
  // A certificate only counts when the daemon verifies them.
  EXPECT_EQ(plain.Authorize("Tune", "ipv4:10.0.0.7:1", "", true).code(),
            StatusCode::kPermissionDenied);
  const AdminGate mtls("", /*mtls=*/true);
  EXPECT_TRUE(mtls.Authorize("Tune", "ipv4:10.0.0.7:1", "", true).ok());
  EXPECT_EQ(mtls.Authorize("Tune", "ipv4:10.0.0.7:1", "", false).code(),
            StatusCode::kPermissionDenied);
}

TEST(SecurityTest, TokenFiles) {
  testing::TempDir temp("security_test");
  ASSERT_TRUE(temp.ok()) << "mkdtemp failed";
  const std::filesystem::path& dir = temp.path();
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  };
  auto t = ReadTokenFile(write("ok", "  0123456789abcdefXYZ\n"), "--admin-token-file");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(*t, "0123456789abcdefXYZ");
  EXPECT_EQ(ReadTokenFile(write("short", "abc\n"), "--admin-token-file").status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_FALSE(ReadTokenFile(write("two", "0123456789abcdef\nsecond line\n"), "f").ok());
  EXPECT_FALSE(ReadTokenFile(write("empty", "\n"), "f").ok());
  auto missing = ReadTokenFile((dir / "missing").string(), "--admin-token-file");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message().rfind("--admin-token-file: cannot read", 0), 0u);
}

TEST(SecurityTest, CredentialFlagsMustComeInPairs) {
  SecurityOptions o;
  EXPECT_TRUE(MakeServerCredentials(o).ok());
  o.tls_cert = "/nonexistent/cert.pem";
  EXPECT_EQ(MakeServerCredentials(o).status().code(), StatusCode::kInvalidArgument);
  o.tls_key = "/nonexistent/key.pem";
  auto c = MakeServerCredentials(o);
  EXPECT_EQ(c.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.status().message().rfind("--tls-cert: cannot read", 0), 0u);
  SecurityOptions ca_only;
  ca_only.tls_client_ca = "/x.pem";
  EXPECT_EQ(MakeServerCredentials(ca_only).status().code(), StatusCode::kInvalidArgument);
}

TEST(SecurityTest, PemFilesMustHoldTheRightBlock) {
  const std::string cert = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  const std::string rsa = "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n";
  const std::string pkcs8 = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n";
  EXPECT_TRUE(CheckPemBlock(cert, "CERTIFICATE", "c.pem", "--tls-cert").ok());
  EXPECT_TRUE(CheckPemBlock(rsa, "PRIVATE KEY", "k.pem", "--tls-key").ok());
  EXPECT_TRUE(CheckPemBlock(pkcs8, "PRIVATE KEY", "k.pem", "--tls-key").ok());
  EXPECT_TRUE(CheckPemBlock("subject=x\n" + cert + cert, "CERTIFICATE", "c.pem", "f").ok());
  // A placeholder, a key where the certificate belongs, a block that never ends.
  auto placeholder = CheckPemBlock("REPLACE-ME\n", "CERTIFICATE", "c.pem", "--tls-cert");
  EXPECT_EQ(placeholder.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(placeholder.message().rfind("--tls-cert: ", 0), 0u) << placeholder.message();
  EXPECT_FALSE(CheckPemBlock(pkcs8, "CERTIFICATE", "k.pem", "--tls-cert").ok());
  EXPECT_FALSE(CheckPemBlock(cert, "PRIVATE KEY", "c.pem", "--tls-key").ok());
  EXPECT_FALSE(CheckPemBlock("-----BEGIN CERTIFICATE-----\nMIIB\n", "CERTIFICATE", "c", "f").ok());

  testing::TempDir temp("security_test_pem");
  ASSERT_TRUE(temp.ok()) << "mkdtemp failed";
  const std::filesystem::path& dir = temp.path();
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  };
  SecurityOptions o;
  o.tls_cert = write("cert.pem", "REPLACE-ME\n");
  o.tls_key = write("key.pem", pkcs8);
  auto c = MakeServerCredentials(o);
  EXPECT_EQ(c.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(c.status().message().find("--tls-cert"), std::string::npos) << c.status().message();
}

}  // namespace
}  // namespace transposed

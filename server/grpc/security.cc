#include "server/grpc/security.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/text.h"

namespace transposed {
namespace {

// Every RPC that changes the cache. Keep in step with the proto's service.
constexpr std::string_view kAdminMethods[] = {
    "Tune",           // always re-tunes and overwrites the cached winner
    "DeleteEntries",  // prunes the cache
    "ImportEntries",  // writes entries from elsewhere
    "ExportEntries",  // reads the whole cache out in one go
    // Not an RPC of its own: a TuneMany with force re-tunes and overwrites cached winners, as
    // Tune; its handler asks the gate under this name.
    "TuneMany.force",
};

// Every RPC anyone who can connect may call. Each RPC of the Transposer service is in exactly one
// of the two tables (security_test checks that against the proto).
constexpr std::string_view kOpenMethods[] = {
    "GetConfig",    // a lookup; tunes a miss once (never overwrites a cached winner)
    "ListDevices",  // the daemon's devices
    "ListEntries",  // the cache, a page at a time
    "TuneMany",     // pre-tunes a list: cached ones skipped, misses tuned once (as GetConfig);
                    // with force it is admin ("TuneMany.force")
};

// Compares without an early exit, so that the time taken says nothing about the token.
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = a.size() < b.size() ? a.size() : b.size();
  for (size_t i = 0; i < n; ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::FailedPrecondition(flag + ": cannot read " + Quote(path) + ": " +
                                      std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    return Status::FailedPrecondition(flag + ": " + Quote(path) + " is empty");
  return text;
}

Status CheckPemBlock(const std::string& text, const std::string& kind, const std::string& path,
                     const std::string& flag) {
  // "-----BEGIN CERTIFICATE-----", or for keys "-----BEGIN [RSA |EC |ENCRYPTED ]PRIVATE KEY-----".
  for (size_t at = text.find("-----BEGIN "); at != std::string::npos;
       at = text.find("-----BEGIN ", at + 1)) {
    const size_t end = text.find("-----", at + 11);
    if (end == std::string::npos) break;
    const std::string label = text.substr(at + 11, end - at - 11);
    if (label.size() >= kind.size() &&
        label.compare(label.size() - kind.size(), kind.size(), kind) == 0 &&
        text.find("-----END " + label + "-----", end) != std::string::npos)
      return Status::OK();
  }
  return Status::FailedPrecondition(flag + ": " + Quote(path) + " holds no PEM " + kind +
                                    " block (-----BEGIN ...-----/-----END ...-----)");
}

StatusOr<std::string> ReadTokenFile(const std::string& path, const std::string& flag) {
  TR_ASSIGN_OR_RETURN(std::string text, ReadPemFile(path, flag));
  const auto b = text.find_first_not_of(" \t\r\n");
  const auto e = text.find_last_not_of(" \t\r\n");
  std::string token = text.substr(b, e - b + 1);
  for (char c : token) {
    if (c < 0x21 || c > 0x7e)
      return Status::FailedPrecondition(flag + ": " + Quote(path) +
                                        ": the token must be one line of printable ASCII");
  }
  if (token.size() < 16)
    return Status::FailedPrecondition(flag + ": " + Quote(path) + ": the token has " +
                                      std::to_string(token.size()) +
                                      " characters, at least 16 are required");
  return token;
}

StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const SecurityOptions& o) {
  if (o.tls_cert.empty() != o.tls_key.empty())
    return Status::InvalidArgument("--tls-cert and --tls-key: give both or neither");
  if (o.tls_cert.empty()) {
    if (!o.tls_client_ca.empty())
      return Status::InvalidArgument("--tls-client-ca: needs --tls-cert and --tls-key");
    return grpc::InsecureServerCredentials();
  }
  TR_ASSIGN_OR_RETURN(std::string cert, ReadPemFile(o.tls_cert, "--tls-cert"));
  TR_RETURN_IF_ERROR(CheckPemBlock(cert, "CERTIFICATE", o.tls_cert, "--tls-cert"));
  TR_ASSIGN_OR_RETURN(std::string key, ReadPemFile(o.tls_key, "--tls-key"));
  TR_RETURN_IF_ERROR(CheckPemBlock(key, "PRIVATE KEY", o.tls_key, "--tls-key"));
  grpc::SslServerCredentialsOptions ssl(
      o.tls_client_ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                              : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  if (!o.tls_client_ca.empty()) {
    TR_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPemFile(o.tls_client_ca, "--tls-client-ca"));
    TR_RETURN_IF_ERROR(
        CheckPemBlock(ssl.pem_root_certs, "CERTIFICATE", o.tls_client_ca, "--tls-client-ca"));
  }
  ssl.pem_key_cert_pairs.push_back({key, cert});
  return grpc::SslServerCredentials(ssl);
}

Status CheckServerCredentials(const std::shared_ptr<grpc::ServerCredentials>& credentials) {
  static std::atomic<int> probes{0};
  grpc::ServerBuilder builder;
  int bound = 0;
  builder.AddListeningPort("unix-abstract:transposed-credentials-check-" +
                               std::to_string(getpid()) + "-" + std::to_string(probes++),
                           credentials, &bound);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound == 0)
    return Status::FailedPrecondition(
        "--tls-cert/--tls-key: gRPC refused the certificate and key (see gRPC's message above: a "
        "key that does not belong to the certificate, or a PEM block that does not parse)");
  server->Shutdown();
  return Status::OK();
}

bool IsAdminMethod(std::string_view method) {
  for (std::string_view m : kAdminMethods)
    if (m == method) return true;
  return false;
}

bool IsOpenMethod(std::string_view method) {
  for (std::string_view m : kOpenMethods)
    if (m == method) return true;
  return false;
}

bool IsLoopbackPeer(std::string_view peer) {
  return peer.rfind("ipv4:127.", 0) == 0 || peer.rfind("ipv6:[::1]:", 0) == 0 ||
         peer.rfind("ipv6:%5B::1%5D:", 0) == 0 || peer.rfind("unix:", 0) == 0 ||
         peer.rfind("ipv6:[::ffff:127.", 0) == 0;
}

Status AdminGate::Authorize(std::string_view method, std::string_view peer,
                            std::string_view authorization, bool peer_verified) const {
  if (!IsAdminMethod(method)) return Status::OK();
  const std::string what = std::string(method) + " is an admin RPC";
  if (!token_.empty()) {
    constexpr std::string_view kBearer = "Bearer ";
    if (authorization.empty())
      return Status::Unauthenticated(what + ": send the daemon's admin token as metadata "
                                            "'authorization: Bearer <token>' (transposectl "
                                            "--token-file)");
    if (authorization.size() <= kBearer.size() ||
        authorization.substr(0, kBearer.size()) != kBearer ||
        !ConstantTimeEquals(authorization.substr(kBearer.size()), token_))
      return Status::Unauthenticated(what + ": the admin token does not match");
    return Status::OK();
  }
  if (mtls_ && peer_verified) return Status::OK();
  if (IsLoopbackPeer(peer)) return Status::OK();
  return Status::PermissionDenied(what + " and the daemon has no --admin-token-file: only "
                                  "clients on its own machine" +
                                  std::string(mtls_ ? " or with a verified certificate" : "") +
                                  " may call it (peer " + Quote(peer) + ")");
}

Status AdminGate::Authorize(std::string_view method, const grpc::ServerContextBase& context) const {
  if (!IsAdminMethod(method)) return Status::OK();
  std::string_view authorization;
  const auto& md = context.client_metadata();
  auto it = md.find("authorization");
  if (it != md.end()) authorization = std::string_view(it->second.data(), it->second.size());
  bool verified = false;
  if (auto auth = context.auth_context()) verified = auth->IsPeerAuthenticated();
  return Authorize(method, context.peer(), authorization, verified);
}

}  // namespace transposed

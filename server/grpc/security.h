// Transport security and the admin check of the daemon.
//
// Transport: plaintext by default; TLS with --tls-cert/--tls-key (PEM files); mutual TLS with
// --tls-client-ca as well (every client must present a certificate that CA signed, checked by
// gRPC before any RPC runs).
//
// Admin RPCs (the table kAdminMethods: Tune, which always re-tunes and overwrites the cache, and
// DeleteEntries; add import/export and any other RPC that changes the cache there) need one of:
//   - the bearer token of --admin-token-file, sent as metadata "authorization: Bearer <token>"
//     (when a token is configured, nothing else counts);
//   - without a token file: a client certificate verified by --tls-client-ca (mTLS identity),
//     or a loopback peer (127.0.0.0/8, ::1, a unix socket).
// TuneMany is open (like GetConfig it only tunes what is missing), except with force = true,
// which re-tunes like Tune: its handler asks the gate for "TuneMany.force", an admin method.
// Everything else (GetConfig, ListDevices, ListEntries, health, reflection) is open to whoever can
// connect. AdminGate::Authorize answers UNAUTHENTICATED for a missing or wrong token and
// PERMISSION_DENIED for a remote peer when no token is configured.
//
// Thread-safety: AdminGate is immutable after construction; Authorize may run on any thread.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace transposed {

struct SecurityOptions {
  std::string tls_cert;          // PEM certificate chain of the server
  std::string tls_key;           // PEM private key of the server
  std::string tls_client_ca;     // PEM CA bundle: requires and verifies client certificates
  std::string admin_token_file;  // the bearer token of the admin RPCs (one line)
};

// Server credentials for the options: insecure without tls_cert, TLS, or mTLS. INVALID_ARGUMENT
// naming the flag when only one of cert/key is given, or a client CA without a certificate;
// FAILED_PRECONDITION naming the file when one cannot be read, is empty or holds no PEM
// block of the right kind (CheckPemBlock).
StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const SecurityOptions& options);
// Whether gRPC accepts `credentials` for a listening port: it parses a certificate and key only
// when a port is added, and the daemon's port is an external connection acceptor
// (server/daemon/listener.h), which reports no failure. So a throwaway server is started on a
// process-private abstract unix socket and stopped again. FAILED_PRECONDITION naming
// --tls-cert/--tls-key when gRPC refuses them (its own reason is in its log line).
Status CheckServerCredentials(const std::shared_ptr<grpc::ServerCredentials>& credentials);

// Reads a token file: one line, surrounding whitespace dropped, at least 16 bytes, printable
// ASCII. FAILED_PRECONDITION naming the file otherwise.
StatusOr<std::string> ReadTokenFile(const std::string& path, const std::string& flag);

// Reads a whole (PEM) file; FAILED_PRECONDITION "<flag>: cannot read <path>: ..." or "...: empty".
StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& flag);

// OK when `text` holds a complete PEM block whose label ends with `kind` ("CERTIFICATE",
// "PRIVATE KEY": also "RSA PRIVATE KEY", "EC PRIVATE KEY"); FAILED_PRECONDITION naming the flag
// and file otherwise (a placeholder, a key given as the certificate). Structure only: whether
// the bytes inside parse is gRPC's to say when the server starts.
Status CheckPemBlock(const std::string& text, const std::string& kind, const std::string& path,
                     const std::string& flag);

// The admin RPCs, by method name as the service spells it ("Tune", "DeleteEntries").
// To add an RPC: put it in kAdminMethods (server/grpc/security.cc) if it changes or bulk-reads the
// cache, else in kOpenMethods; security_test fails for an RPC of the proto in neither table. The
// handler of an admin RPC must call AdminGate::Authorize (GrpcTransposer::Authorize) before it
// does anything; security_e2e_test calls every admin RPC without the token and expects
// UNAUTHENTICATED.
bool IsAdminMethod(std::string_view method);
// The RPCs open to whoever can connect ("GetConfig", "ListDevices", "ListEntries").
bool IsOpenMethod(std::string_view method);

class AdminGate {
 public:
  // `token` empty: no token configured. `mtls`: client certificates are verified.
  AdminGate(std::string token, bool mtls) : token_(std::move(token)), mtls_(mtls) {}
  AdminGate() = default;

  // OK for a call of a method that is not an admin method, or one the caller may make (see the
  // file comment). `peer` is ServerContext::peer() ("ipv4:127.0.0.1:5000"), `authorization` the
  // value of the call's "authorization" metadata ("" when absent), `peer_verified` whether the
  // peer presented a verified client certificate.
  Status Authorize(std::string_view method, std::string_view peer, std::string_view authorization,
                   bool peer_verified) const;
  // The same, reading the call's metadata and peer from its context.
  Status Authorize(std::string_view method, const grpc::ServerContextBase& context) const;

  bool has_token() const { return !token_.empty(); }

 private:
  std::string token_;
  bool mtls_ = false;
};

// Whether a gRPC peer string is on this machine: "ipv4:127.x.x.x:port", "ipv6:[::1]:port",
// "unix:...".
bool IsLoopbackPeer(std::string_view peer);

}  // namespace transposed

// Peers: on a cache miss, before tuning, ask the other daemons of the fleet (`--peer HOST:PORT`,
// repeatable) for a cached answer for a device of the same class.
//
// Every --peer is resolved (getaddrinfo) at each lookup to all its addresses, so one name that
// resolves to many daemons (a Kubernetes headless Service) counts as all of them. All addresses
// are candidates; `fanout` of them, drawn at random at each lookup, are asked at once with
// GetConfig{device_class, CACHE_ONLY} under one short deadline; the fastest answer measured on the
// class wins. A miss thus costs `fanout` lookups, not one per node (N nodes missing together cost
// N * fanout, not N * N); the draw spreads the load. Peers find what another node already has,
// but do not stop a herd from tuning the same problem on every node: the shared store
// (server/fleet/fleet_flight.h) does. A peer that is down, slow, of another class or
// without the entry simply does not answer: no peer is required for anything to work. A daemon
// that is its own peer (it is in the Service too) answers NOT_FOUND, since it is asking because
// it missed; cache-only requests never consult peers, so questions are never forwarded again.
//
// MakePeerLookup turns a PeerSet into the service's peer lookup (ServiceOptions::peer_lookup).
//
// Thread-safety: Lookup, and the function MakePeerLookup returns, may be called from many threads
// at once.
#pragma once

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/mutex.h"
#include "core/status.h"
#include "server/service.h"
#include "transposed/v1/transposed.grpc.pb.h"

namespace transposed {

struct PeerOptions {
  std::vector<std::string> peers;  // HOST:PORT each; [v6addr]:PORT for IPv6 literals
  double deadline_seconds = 2.0;   // for one lookup, all peers together
  int max_addresses = 64;          // most addresses resolved per lookup (all peers together)
  int fanout = 4;                  // addresses asked per lookup, drawn at random from those
  // Credentials of the channels to peers (TLS or mutual TLS: --peer-tls-*, made by
  // ChannelCredentialsFor of client/client.h); default: insecure.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // With TLS credentials, the name a peer's certificate must carry; empty: the host of its
  // --peer entry (a name that resolves to many daemons is checked as that name, not the address).
  bool tls = false;
  std::string tls_server_name;
};

class PeerSet {
 public:
  // INVALID_ARGUMENT naming `--peer` for an entry that is not HOST:PORT with a port in 1..65535.
  static StatusOr<std::unique_ptr<PeerSet>> Create(PeerOptions options);

  // The fastest cached answer of the peers for `problem` on a device of `device_class`, or
  // nullopt when none has one within the deadline. `problem.device` is ignored.
  std::optional<v1::Answer> Lookup(const std::string& device_class, const v1::Problem& problem)
      EXCLUDES(mu_);

  const std::vector<std::string>& peers() const { return options_.peers; }

 private:
  explicit PeerSet(PeerOptions options) : options_(std::move(options)) {}
  struct Address {
    std::string address;  // "1.2.3.4:50051", "[::1]:50051"
    std::string host;     // the host of the --peer entry it was resolved from
  };
  // The addresses of every peer right now.
  std::vector<Address> Resolve() const;
  std::shared_ptr<v1::Transposer::Stub> StubFor(const Address& address);

  const PeerOptions options_;
  Mutex mu_;
  std::map<std::string, std::shared_ptr<v1::Transposer::Stub>> stubs_ GUARDED_BY(mu_);
  std::mt19937_64 random_ GUARDED_BY(mu_){std::random_device{}()};
};

// The service's peer lookup over `peers` (which must outlive it): asks for the problem on a device
// of `device`'s class and turns the peer's Answer into a TuneResult the way an import does
// (Answer -> ExportedEntry -> ExportedEntryFromProto), so it is validated like any entry from
// outside. An answer that fails is logged, counted as refused at door "peer" through `observer`
// (may be null) and taken as no answer.
PeerLookupFn MakePeerLookup(PeerSet* peers, ServiceObserver* observer);

}  // namespace transposed

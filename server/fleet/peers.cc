#include "server/fleet/peers.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>

#include "core/device_class.h"
#include "server/grpc/convert.h"

namespace transposed {
namespace {

// Splits "host:port" / "[v6]:port". false when malformed.
bool SplitHostPort(const std::string& s, std::string* host, std::string* port) {
  size_t colon;
  if (!s.empty() && s[0] == '[') {
    const size_t close = s.find(']');
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':') return false;
    *host = s.substr(1, close - 1);
    colon = close + 1;
  } else {
    colon = s.rfind(':');
    if (colon == std::string::npos || colon == 0) return false;
    *host = s.substr(0, colon);
    if (host->find(':') != std::string::npos) return false;  // unbracketed IPv6
  }
  *port = s.substr(colon + 1);
  if (port->empty() || port->size() > 5) return false;
  for (char c : *port)
    if (c < '0' || c > '9') return false;
  const int p = std::atoi(port->c_str());
  return p >= 1 && p <= 65535 && !host->empty();
}

}  // namespace

StatusOr<std::unique_ptr<PeerSet>> PeerSet::Create(PeerOptions options) {
  if (options.peers.size() > 256)
    return Status::InvalidArgument("--peer: at most 256 peers, got " +
                                   std::to_string(options.peers.size()));
  for (const auto& p : options.peers) {
    std::string host, port;
    if (p.size() > 300 || !SplitHostPort(p, &host, &port)) {
      return Status::InvalidArgument("--peer: expected HOST:PORT with a port in 1..65535, got '" +
                                     p.substr(0, 100) + "'");
    }
  }
  if (options.fanout < 1 || options.fanout > options.max_addresses)
    return Status::InvalidArgument("--peer-fanout: must be in 1.." +
                                   std::to_string(options.max_addresses));
  if (!(options.deadline_seconds > 0) || options.deadline_seconds > 60)
    return Status::InvalidArgument("--peer-timeout: must be in (0, 60] seconds");
  if (!options.credentials) options.credentials = grpc::InsecureChannelCredentials();
  return std::unique_ptr<PeerSet>(new PeerSet(std::move(options)));
}

std::vector<PeerSet::Address> PeerSet::Resolve() const {
  std::vector<Address> out;
  std::set<std::string> seen;
  for (const auto& p : options_.peers) {
    std::string host, port;
    if (!SplitHostPort(p, &host, &port)) continue;  // checked in Create
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
    if (rc != 0) {
      spdlog::debug("peer {}: cannot resolve: {}", p, gai_strerror(rc));
      continue;
    }
    for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
      char ip[INET6_ADDRSTRLEN] = {0};
      std::string address;
      if (a->ai_family == AF_INET) {
        inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, ip, sizeof(ip));
        address = std::string(ip) + ":" + port;
      } else if (a->ai_family == AF_INET6) {
        inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, ip,
                  sizeof(ip));
        address = "[" + std::string(ip) + "]:" + port;
      } else {
        continue;
      }
      if (seen.insert(address).second) out.push_back(Address{address, host});
      if (static_cast<int>(out.size()) >= options_.max_addresses) break;
    }
    freeaddrinfo(res);
    if (static_cast<int>(out.size()) >= options_.max_addresses) break;
  }
  return out;
}

std::shared_ptr<v1::Transposer::Stub> PeerSet::StubFor(const Address& address) {
  // The certificate is checked against the name the operator wrote, not the resolved address.
  const std::string name = !options_.tls              ? std::string()
                           : options_.tls_server_name.empty() ? address.host
                                                              : options_.tls_server_name;
  const std::string key = address.address + " " + name;
  MutexLock l(&mu_);
  auto it = stubs_.find(key);
  if (it != stubs_.end()) return it->second;
  if (stubs_.size() >= 1024) stubs_.clear();  // addresses come and go (pods): stay bounded
  grpc::ChannelArguments args;
  if (!name.empty()) args.SetSslTargetNameOverride(name);
  auto stub = std::shared_ptr<v1::Transposer::Stub>(v1::Transposer::NewStub(
      grpc::CreateCustomChannel(address.address, options_.credentials, args)));
  stubs_[key] = stub;
  return stub;
}

std::optional<v1::Answer> PeerSet::Lookup(const std::string& device_class,
                                          const v1::Problem& problem) {
  auto addresses = Resolve();
  if (addresses.empty()) return std::nullopt;
  if (static_cast<int>(addresses.size()) > options_.fanout) {
    MutexLock l(&mu_);
    std::shuffle(addresses.begin(), addresses.end(), random_);
    addresses.resize(options_.fanout);
  }
  v1::GetConfigRequest request;
  *request.mutable_problem() = problem;
  request.mutable_problem()->clear_device();
  request.set_device_class(device_class);
  request.set_policy(v1::CACHE_ONLY);
  const auto deadline =
      std::chrono::system_clock::now() +
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::duration<double>(options_.deadline_seconds));

  // One async call per address on one completion queue; wait until all finished or the deadline.
  struct Call {
    std::string address;
    grpc::ClientContext context;
    v1::Answer answer;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<v1::Answer>> reader;
  };
  grpc::CompletionQueue cq;
  std::vector<std::unique_ptr<Call>> calls;
  for (const auto& address : addresses) {
    auto call = std::make_unique<Call>();
    call->address = address.address;
    call->context.set_deadline(deadline);
    call->reader = StubFor(address)->AsyncGetConfig(&call->context, request, &cq);
    call->reader->Finish(&call->answer, &call->status, call.get());
    calls.push_back(std::move(call));
  }
  std::optional<v1::Answer> best;
  std::string best_from;
  for (size_t done = 0; done < calls.size(); ++done) {
    void* tag = nullptr;
    bool ok = false;
    if (!cq.Next(&tag, &ok)) break;
    auto* call = static_cast<Call*>(tag);
    if (!call->status.ok()) {
      spdlog::debug("peer {}: {} {}", call->address, static_cast<int>(call->status.error_code()),
                    call->status.error_message());
      continue;
    }
    // Only an answer for our class, and a sane one, is taken.
    if (call->answer.device().device_class() != device_class || !(call->answer.gbps() > 0)) {
      continue;
    }
    if (!best || call->answer.gbps() > best->gbps()) {
      best = call->answer;
      best_from = call->address;
    }
  }
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
  if (best) spdlog::info("peer {} has {} for class {}", best_from, best->variant().name(), device_class);
  return best;
}

PeerLookupFn MakePeerLookup(PeerSet* peers, ServiceObserver* observer) {
  return [peers, observer](const DeviceInfo& device,
                           const Problem& problem) -> std::optional<TuneResult> {
    std::optional<v1::Answer> answer = peers->Lookup(ClassOf(device).key, ProblemToProto(problem));
    if (!answer) return std::nullopt;
    v1::ExportedEntry entry;
    *entry.mutable_measured_on() = answer->measured_on();
    *entry.mutable_answer() = *std::move(answer);
    StatusOr<TuneResult> row = ExportedEntryFromProto(entry);
    if (!row.ok()) {
      if (observer != nullptr) observer->OnEntryRefused("peer");
      spdlog::warn("peer answer for {} refused: {}", problem.Key(), row.status().ToString());
      return std::nullopt;
    }
    return std::move(row).value();
  };
}

}  // namespace transposed

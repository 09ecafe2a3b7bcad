#include "server/grpc/connection_limiter.h"

#include <arpa/inet.h>
#include <grpc/support/sync.h>
#include <grpcpp/support/channel_arguments.h>
#include <grpcpp/version_info.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace transposed {

// gRPC's socket mutator interface, as src/core/lib/iomgr/socket_mutator.h of gRPC 1.51 declares
// it (that header is not installed; the channel argument GRPC_ARG_SOCKET_MUTATOR and the opaque
// type grpc_socket_mutator are). The layout has been the same since mutate_fd_2 was added
// (gRPC 1.34) and still is in the gRPC of 2025; the version check below makes a newer gRPC a
// build error until this has been checked against it (connection_limiter_test checks the
// behaviour).
static_assert(GRPC_CPP_VERSION_MAJOR == 1 && GRPC_CPP_VERSION_MINOR >= 34 &&
                  GRPC_CPP_VERSION_MINOR <= 60,
              "check the socket mutator layout in connection_limiter.cc against this gRPC");
namespace {
enum GrpcFdUsage : int {  // grpc_fd_usage
  kClientConnection = 0,
  kServerListener = 1,
  kServerConnection = 2,
};
struct GrpcMutateSocketInfo {  // grpc_mutate_socket_info
  int fd;
  GrpcFdUsage usage;
};
struct GrpcSocketMutatorVtable {  // grpc_socket_mutator_vtable
  bool (*mutate_fd)(int fd, grpc_socket_mutator* mutator);
  int (*compare)(grpc_socket_mutator* a, grpc_socket_mutator* b);
  void (*destroy)(grpc_socket_mutator* mutator);
  bool (*mutate_fd_2)(const GrpcMutateSocketInfo* info, grpc_socket_mutator* mutator);
};
}  // namespace

// grpc_socket_mutator's layout (vtable, refcount), then ours.
struct ConnectionLimiter::Mutator {
  const GrpcSocketMutatorVtable* vtable;
  gpr_refcount refcount;
  ConnectionLimiter* owner;

  static Mutator* Of(grpc_socket_mutator* m) { return reinterpret_cast<Mutator*>(m); }
  grpc_socket_mutator* AsGrpc() { return reinterpret_cast<grpc_socket_mutator*>(this); }

  static bool MutateFd(int, grpc_socket_mutator*) { return true; }  // used only without _2
  static int Compare(grpc_socket_mutator* a, grpc_socket_mutator* b) {
    return a < b ? -1 : a > b ? 1 : 0;
  }
  // The limiter holds the first reference for its lifetime, so this never runs before it is
  // destroyed, and the limiter frees the object itself.
  static void Destroy(grpc_socket_mutator*) {}
  static bool MutateFd2(const GrpcMutateSocketInfo* info, grpc_socket_mutator* m) {
    if (info->usage != kServerConnection) return true;
    if (Of(m)->owner->Admit(info->fd)) return true;
    // Refused. Returning false would make gRPC 1.51 leak the descriptor and stop accepting; so
    // end the stream instead: gRPC's first read sees EOF and closes the descriptor (with
    // SO_LINGER 0, the close resets the connection and leaves no TIME_WAIT behind).
    const linger no_linger{1, 0};
    setsockopt(info->fd, SOL_SOCKET, SO_LINGER, &no_linger, sizeof(no_linger));
    shutdown(info->fd, SHUT_RDWR);
    return true;
  }
  static constexpr GrpcSocketMutatorVtable kVtable = {&MutateFd, &Compare, &Destroy, &MutateFd2};
};

namespace {

// Sets GRPC_ARG_SOCKET_MUTATOR on the server's channel arguments, with a new reference.
class MutatorOption final : public grpc::ServerBuilderOption {
 public:
  MutatorOption(grpc_socket_mutator* mutator, gpr_refcount* refcount)
      : mutator_(mutator), refcount_(refcount) {}
  void UpdateArguments(grpc::ChannelArguments* args) override {
    gpr_ref(refcount_);  // SetSocketMutator takes over one reference
    args->SetSocketMutator(mutator_);
  }
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>*) override {}

 private:
  grpc_socket_mutator* const mutator_;
  gpr_refcount* const refcount_;
};

}  // namespace

ConnectionLimiter::ConnectionLimiter(int per_client, int total, RefusalObserver observer,
                                     int guard_fd)
    : per_client_(per_client),
      total_(total),
      observer_(std::move(observer)),
      guard_fd_(guard_fd) {
  mutator_ = std::make_unique<Mutator>();
  mutator_->vtable = &Mutator::kVtable;
  gpr_ref_init(&mutator_->refcount, 1);
  mutator_->owner = this;
}

ConnectionLimiter::~ConnectionLimiter() = default;

std::unique_ptr<grpc::ServerBuilderOption> ConnectionLimiter::ServerBuilderOption() {
  return std::make_unique<MutatorOption>(mutator_->AsGrpc(), &mutator_->refcount);
}

std::string ConnectionLimiter::ClientOf(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "";
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    return std::string("ipv4:") + text;
  }
  if (addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], text, sizeof(text));
      return std::string("ipv4:") + text;
    }
    inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
    return std::string("ipv6:[") + text + "]";
  }
  if (addr.ss_family == AF_UNIX) return "unix";
  return "family:" + std::to_string(addr.ss_family);
}

bool ConnectionLimiter::Alive(const Connection& c) {
  struct stat st {};
  return fstat(c.fd, &st) == 0 && static_cast<uint64_t>(st.st_dev) == c.dev &&
         static_cast<uint64_t>(st.st_ino) == c.ino;
}

void ConnectionLimiter::Prune(const std::string& client) {
  auto it = open_.find(client);
  if (it == open_.end()) return;
  auto& conns = it->second;
  size_t kept = 0;
  for (const Connection& c : conns)
    if (Alive(c)) conns[kept++] = c;
  open_total_ -= static_cast<int>(conns.size() - kept);
  conns.resize(kept);
  if (conns.empty()) open_.erase(it);
}

void ConnectionLimiter::PruneAll() {
  for (auto it = open_.begin(); it != open_.end();) {
    const std::string client = (it++)->first;  // Prune may erase the entry
    Prune(client);
  }
}

bool ConnectionLimiter::Admit(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return true;  // gRPC finds out for itself
  const Connection conn{fd, static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
  std::string client = ClientOf(fd);
  MutexLock lock(&mu_);
  if (guard_fd_ > 0 && fd >= guard_fd_) {
    Refuse(client, "descriptors", fd);
    return false;
  }
  // Drops the client's closed connections (also one whose descriptor number this connection
  // reuses: its inode differs). Other clients' closed ones wait for PruneAll.
  Prune(client);
  if (per_client_ > 0) {
    auto it = open_.find(client);
    const int open = it == open_.end() ? 0 : static_cast<int>(it->second.size());
    if (open >= per_client_) {
      Refuse(client, "per_client", open);
      return false;
    }
  }
  if (total_ > 0 && open_total_ >= total_) {
    PruneAll();
    if (open_total_ >= total_) {
      Refuse(client, "total", open_total_);
      return false;
    }
  }
  open_[client].push_back(conn);
  ++open_total_;
  return true;
}

void ConnectionLimiter::Refuse(const std::string& client, const char* cap, int open) {
  ++refused_;
  ++refused_unlogged_;
  const auto now = std::chrono::steady_clock::now();
  if (!logged_ || now - last_log_ >= std::chrono::seconds(10)) {
    const bool per_client = std::strcmp(cap, "per_client") == 0;
    if (std::strcmp(cap, "descriptors") == 0) {
      spdlog::warn(
          "refused a connection from {}: it was accepted on descriptor {}, at or above the guard "
          "{} kept free for accept (the descriptor limit less an eighth / 2); the newest "
          "connections are shed, open ones stay; {} refused since the last such line (logged at "
          "most every 10 s)",
          client, open, guard_fd_, refused_unlogged_);
    } else {
    spdlog::warn(
        "refused a connection from {}: {} {} connections open (at most {}, {}); {} refused since "
        "the last such line (logged at most every 10 s)",
        client, per_client ? "it has" : "the daemon has", open,
        per_client ? per_client_ : total_,
        per_client ? "--max-connections-per-client" : "--max-connections", refused_unlogged_);
    }
    refused_unlogged_ = 0;
    last_log_ = now;
    logged_ = true;
  }
  if (observer_) observer_(cap);
}

int ConnectionLimiter::Open(const std::string& client) {
  MutexLock lock(&mu_);
  Prune(client);
  auto it = open_.find(client);
  return it == open_.end() ? 0 : static_cast<int>(it->second.size());
}

int ConnectionLimiter::OpenTotal() {
  MutexLock lock(&mu_);
  PruneAll();
  return open_total_;
}

int64_t ConnectionLimiter::refused() const {
  MutexLock lock(&mu_);
  return refused_;
}

}  // namespace transposed

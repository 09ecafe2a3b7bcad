#include "server/daemon/notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace transposed {

Status NotifyServiceManager(const std::string& socket_path, const std::string& state) {
  if (socket_path.empty()) return Status::OK();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if ((socket_path[0] != '/' && socket_path[0] != '@') ||
      socket_path.size() >= sizeof(addr.sun_path))
    return Status::InvalidArgument("NOTIFY_SOCKET: not an AF_UNIX socket path: " + socket_path);
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
  if (socket_path[0] == '@') addr.sun_path[0] = '\0';  // the abstract namespace
  const socklen_t len =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + socket_path.size());
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return Status::Unavailable(std::string("NOTIFY_SOCKET: socket: ") + std::strerror(errno));
  const ssize_t sent = sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                              reinterpret_cast<const sockaddr*>(&addr), len);
  const int error = errno;
  close(fd);
  if (sent < 0 || static_cast<size_t>(sent) != state.size())
    return Status::Unavailable("NOTIFY_SOCKET " + socket_path + ": " +
                               (sent < 0 ? std::strerror(error) : "short send"));
  return Status::OK();
}

}  // namespace transposed

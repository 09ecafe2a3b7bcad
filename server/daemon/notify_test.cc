// systemd readiness without libsystemd (server/daemon/notify.h): the datagram reaches a socket
// bound where $NOTIFY_SOCKET says (a path or an abstract name); and the real daemon, started with
// $NOTIFY_SOCKET, says READY=1 once it serves (its port file written) and STOPPING=1 on SIGTERM.
#include "server/daemon/notify.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "testing/daemon_process.h"
#include "testing/test_files.h"

namespace transposed {
namespace {

// A datagram socket bound at `path` ('@': abstract), as systemd's.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.data(), path.size());
    if (path[0] == '@') addr.sun_path[0] = '\0';
    bound_ = bind(fd_, reinterpret_cast<const sockaddr*>(&addr),
                  static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size())) == 0;
  }
  ~NotifySocket() {
    close(fd_);
    if (path_[0] == '/') unlink(path_.c_str());
  }
  bool bound() const { return bound_; }
  // The next datagram within `ms`, "" if none.
  std::string Receive(int ms) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, ms) != 1) return "";
    char buf[512];
    const ssize_t n = recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, n) : "";
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool bound_ = false;
};

TEST(NotifyTest, SendsTheStateToThePathOrAbstractSocket) {
  testing::TempDir dir("notify_test");
  const std::string path = (dir.path() / "notify").string();
  NotifySocket s(path);
  ASSERT_TRUE(s.bound());
  ASSERT_TRUE(NotifyServiceManager(path, "READY=1").ok());
  EXPECT_EQ(s.Receive(1000), "READY=1");

  const std::string abstract = "@transposed-notify-test-" + std::to_string(getpid());
  NotifySocket a(abstract);
  ASSERT_TRUE(a.bound());
  ASSERT_TRUE(NotifyServiceManager(abstract, "STOPPING=1").ok());
  EXPECT_EQ(a.Receive(1000), "STOPPING=1");

  EXPECT_TRUE(NotifyServiceManager("", "READY=1").ok()) << "no $NOTIFY_SOCKET: nothing to do";
  EXPECT_EQ(NotifyServiceManager("relative", "READY=1").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(NotifyServiceManager((dir.path() / "absent").string(), "READY=1").code(),
            StatusCode::kUnavailable);
}

TEST(NotifyTest, TheDaemonSaysReadyOnceServingAndStoppingOnSigterm) {
  testing::TempDir dir("notify_daemon");
  const std::string path = (dir.path() / "notify").string();
  NotifySocket s(path);
  ASSERT_TRUE(s.bound());
  testing::DaemonOptions options;
  options.binary = TRANSPOSED_DAEMON;
  testing::DaemonProcess d(options);
  ASSERT_EQ(setenv("NOTIFY_SOCKET", path.c_str(), 1), 0);
  const Status started = d.Start();  // returns once the port file is there
  unsetenv("NOTIFY_SOCKET");
  ASSERT_TRUE(started.ok()) << started.ToString();
  const std::string ready = s.Receive(10000);
  EXPECT_EQ(ready.rfind("READY=1\n", 0), 0u) << ready;
  EXPECT_NE(ready.find("(port " + std::to_string(d.port()) + ")"), std::string::npos) << ready;
  EXPECT_TRUE(d.Stop().ok());
  EXPECT_EQ(s.Receive(10000), "STOPPING=1");
  if (!::testing::Test::HasFailure()) d.RemoveDir();
}

}  // namespace
}  // namespace transposed

#include "testing/redis_process.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

extern char** environ;

namespace transposed::testing {
namespace fs = std::filesystem;

int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    socklen_t len = sizeof(addr);
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

namespace {

// Sends PING (inline command) and reads the answer; true on +PONG (or -NOAUTH: it answers).
bool Answers(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = false;
  timeval tv{0, 200000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      write(fd, "PING\r\n", 6) == 6) {
    char buf[64] = {0};
    const ssize_t n = read(fd, buf, sizeof(buf) - 1);
    ok = n > 0 && (std::string(buf).rfind("+PONG", 0) == 0 ||
                   std::string(buf).rfind("-NOAUTH", 0) == 0);
  }
  close(fd);
  return ok;
}

}  // namespace

RedisProcess::RedisProcess(RedisOptions options) : options_(std::move(options)) {}

RedisProcess::~RedisProcess() {
  Kill();
  std::error_code ec;
  if (!dir_.empty()) fs::remove_all(dir_, ec);
}

std::string RedisProcess::log() const {
  std::ifstream in(dir_ / "redis.log");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status RedisProcess::Start() {
  if (pid_ > 0) return Status::OK();
  if (dir_.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr ? tmp : "/tmp") + "/redis-test-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr) return Status::Internal("mkdtemp failed");
    dir_ = buf.data();
  }
  if (port_ == 0) port_ = FreeLoopbackPort();
  std::vector<std::string> args = {options_.binary,  "--port",       std::to_string(port_),
                                   "--bind",         "127.0.0.1",    "--save",
                                   "",               "--appendonly", "no",
                                   "--dir",          dir_.string(),  "--logfile",
                                   (dir_ / "redis.log").string()};
  if (!options_.password.empty()) {
    args.push_back("--requirepass");
    args.push_back(options_.password);
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0)
    return Status::Unavailable("cannot run " + options_.binary + " (is redis-server installed?)");
  pid_ = pid;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < until) {
    if (Answers(port_)) return Status::OK();
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return Status::Unavailable("redis-server exited at start:\n" + log());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Kill();
  return Status::Unavailable("redis-server did not answer within 10 s:\n" + log());
}

void RedisProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGCONT);
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

void RedisProcess::Pause() {
  if (pid_ > 0) kill(pid_, SIGSTOP);
}

void RedisProcess::Resume() {
  if (pid_ > 0) kill(pid_, SIGCONT);
}

}  // namespace transposed::testing

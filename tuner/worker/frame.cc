#include "tuner/worker/frame.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <algorithm>
#include <cstring>

namespace transposed::worker {
namespace {

bool IsSocket(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
}

Status WriteAll(int fd, const char* data, size_t n) {
  const bool sock = IsSocket(fd);
  while (n > 0) {
    ssize_t w = sock ? send(fd, data, n, MSG_NOSIGNAL) : write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::Unavailable(std::string("write failed: ") + std::strerror(errno));
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return Status::OK();
}

// Reads exactly n bytes before the deadline (steady clock; no deadline when has_deadline false).
Status ReadAll(int fd, char* data, size_t n, bool has_deadline,
               std::chrono::steady_clock::time_point deadline) {
  while (n > 0) {
    int wait_ms = -1;
    if (has_deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return Status::DeadlineExceeded("timed out waiting for the worker");
      wait_ms = static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
    }
    struct pollfd pfd = {fd, POLLIN, 0};
    int pr = poll(&pfd, 1, wait_ms);
    if (pr < 0) {
      if (errno == EINTR) continue;
      return Status::Unavailable(std::string("poll failed: ") + std::strerror(errno));
    }
    if (pr == 0) continue;  // re-evaluates the deadline
    ssize_t r = read(fd, data, n);
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return Status::Unavailable(std::string("read failed: ") + std::strerror(errno));
    }
    if (r == 0) return Status::Unavailable("end of stream");
    data += r;
    n -= static_cast<size_t>(r);
  }
  return Status::OK();
}

uint32_t LoadLe32(const unsigned char* b) {
  return static_cast<uint32_t>(b[0]) | (static_cast<uint32_t>(b[1]) << 8) |
         (static_cast<uint32_t>(b[2]) << 16) | (static_cast<uint32_t>(b[3]) << 24);
}

}  // namespace

std::string EncodeFrame(const std::string& payload) {
  const uint32_t n = static_cast<uint32_t>(payload.size());
  std::string out;
  out.reserve(4 + payload.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += payload;
  return out;
}

Status DecodeFrame(const std::string& buffer, std::string* payload, size_t* consumed) {
  if (buffer.size() < 4) return Status::Unavailable("incomplete frame header");
  const uint32_t n = LoadLe32(reinterpret_cast<const unsigned char*>(buffer.data()));
  if (n > kMaxFrameBytes) {
    return Status::InvalidArgument("frame of " + std::to_string(n) + " bytes exceeds the limit");
  }
  if (buffer.size() < 4 + static_cast<size_t>(n)) return Status::Unavailable("incomplete frame");
  payload->assign(buffer, 4, n);
  *consumed = 4 + static_cast<size_t>(n);
  return Status::OK();
}

Status WriteFrame(int fd, const std::string& payload) {
  if (payload.size() > kMaxFrameBytes) return Status::InvalidArgument("frame too large");
  const std::string frame = EncodeFrame(payload);
  return WriteAll(fd, frame.data(), frame.size());
}

Status ReadFrame(int fd, std::string* payload, int timeout_ms) {
  const bool has_deadline = timeout_ms >= 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  unsigned char header[4];
  TR_RETURN_IF_ERROR(ReadAll(fd, reinterpret_cast<char*>(header), 4, has_deadline, deadline));
  const uint32_t n = LoadLe32(header);
  if (n > kMaxFrameBytes) {
    return Status::InvalidArgument("frame of " + std::to_string(n) + " bytes exceeds the limit");
  }
  payload->assign(n, '\0');
  if (n > 0) TR_RETURN_IF_ERROR(ReadAll(fd, payload->data(), n, has_deadline, deadline));
  return Status::OK();
}

}  // namespace transposed::worker

// Files and sockets of the tests that run the real daemon: TempDir, a fresh directory removed with
// everything in it when the TempDir goes; ReadFile and CountOccurrences, to read what a daemon
// wrote (its log, its port file); ConnectFrom, a raw TCP connection to a loopback port from a
// chosen loopback source address (127.0.0.x: one client host each, for the connection caps), and
// SendHttp2Preface, which makes it look like a gRPC client's; OpenFilesOf, a process's descriptors.
//
// Thread-safety: plain functions; a TempDir is used by one test.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>

namespace transposed::testing {

class TempDir {
 public:
  // mkdtemp("/tmp/<prefix>.XXXXXX"); ok() is false (path() empty) when that failed.
  explicit TempDir(const std::string& prefix);
  ~TempDir();  // removes the directory and its contents (errors ignored)
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  bool ok() const { return !path_.empty(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// The whole file; "" when it cannot be read.
std::string ReadFile(const std::filesystem::path& path);

// How many times `needle` (not empty) occurs in `text`, without overlaps.
int CountOccurrences(const std::string& text, const std::string& needle);

// A TCP socket bound to `source` (an IPv4 address of this host, e.g. 127.0.0.2) and connected to
// 127.0.0.1:port. nonblocking: the connect goes on in the background (a connect in progress is
// no error). Else connect_timeout_s > 0 bounds a blocking connect (SO_SNDTIMEO, which stays set
// for sends; 0: the kernel's own SYN retries). The descriptor, or -1.
int ConnectFrom(const char* source, int port, bool nonblocking, int connect_timeout_s = 0);

// Sends the HTTP/2 client preface and an empty SETTINGS frame, as a gRPC client opens its
// connection; false when the send failed (e.g. the connection was reset).
bool SendHttp2Preface(int fd);

// The descriptors process `pid` has open (/proc/PID/fd); 0 when it cannot be read.
int OpenFilesOf(pid_t pid);

}  // namespace transposed::testing

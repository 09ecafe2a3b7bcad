// DaemonProcess: the one helper that spawns the real `transposed` daemon for tests.
//
// Start() runs the daemon binary in a fresh temporary directory (database, log, port file there)
// on an ephemeral port of 127.0.0.1 and waits until it has written its port file; Stop() sends
// SIGTERM and waits for a graceful exit. C++ tests use the class directly; tests written in other
// languages (CMake scripts, Python, shell) run under `with_daemon` (testing/with_daemon.cc), which
// starts one daemon, exports its address as TRANSPOSED_SERVER and runs their command. Tests of
// the binary's own flags (server/e2e/daemon_test.cc) set DaemonOptions::exact_args: the daemon gets
// exactly their arguments, Start() only spawns it, and they wait with WaitPort() and Wait().
// Thread-compatible: one thread drives a DaemonProcess.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace transposed::testing {

struct DaemonOptions {
  std::string binary;                 // path of `transposed`
  std::string backend = "cpu";        // --backend
  double tune_budget_seconds = 5;     // --tune-budget
  std::vector<std::string> extra_args;
  // Where the temporary directory is made; empty: $TMPDIR, else /tmp.
  std::string temp_root;
  double start_timeout_seconds = 60;
  // > 0: the daemon's descriptor limit, soft and hard (RLIMIT_NOFILE, set with prlimit(2) right
  // after the spawn, so the daemon cannot raise it), to test running out of descriptors.
  uint64_t max_open_files = 0;
  // The database (--db); empty: cache.db in the temporary directory.
  std::string db;
  // >= 0: the daemon runs as this user and group id (through setpriv(1), which needs root), and
  // the temporary directory is handed to that user; to test file modes that root would ignore.
  int run_as_uid = -1;
  // true: run `binary` with exactly extra_args (none of the flags above), and Start() returns once
  // it is spawned, without waiting for a port (the test may expect it to refuse to start); wait
  // with WaitPort() and Wait(). The temporary directory still holds the daemon's stdout/stderr.
  bool exact_args = false;
};

class DaemonProcess {
 public:
  explicit DaemonProcess(DaemonOptions options);
  ~DaemonProcess();  // stops the daemon (SIGTERM, then SIGKILL) if it still runs
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  // Makes the directory, spawns the daemon, waits for its port. UNAVAILABLE with the daemon's
  // stderr and log when it exits first or does not serve within the timeout. After Stop(), starts
  // it again in the same directory, on the same database (a restart; the port may change).
  Status Start();
  // SIGTERM, then waits up to `seconds` for exit 0 (INTERNAL otherwise, after a SIGKILL).
  Status Stop(double seconds = 30);
  // Sends a signal to the running daemon (SIGHUP: reopen the log file).
  Status Signal(int sig);
  // Waits up to `seconds` for the daemon to exit; its exit code, or -1 when it did not exit in
  // time (it still runs then) or died of a signal.
  int Wait(double seconds);
  // Waits up to `seconds` for a port number in `port_file` (exact_args: the test's --port-file)
  // and sets port() and address(); UNAVAILABLE when the daemon exits first or the time runs out.
  Status WaitPort(const std::filesystem::path& port_file, double seconds = 60);

  const std::string& address() const { return address_; }  // "127.0.0.1:PORT"
  int port() const { return port_; }
  pid_t pid() const { return pid_; }  // -1 when not running
  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path db() const {
    return options_.db.empty() ? dir_ / "cache.db" : std::filesystem::path(options_.db);
  }
  std::filesystem::path log() const { return dir_ / "daemon.log"; }
  // Removes the temporary directory (call after Stop when the test passed).
  void RemoveDir();

 private:
  DaemonOptions options_;
  std::filesystem::path dir_;
  pid_t pid_ = -1;
  int port_ = 0;
  std::string address_;
};

// GET http://127.0.0.1:port/path (HTTP/1.0); the body of a 200 answer, or "" with *error.
std::string HttpGet(int port, const std::string& path, std::string* error);
// The Prometheus text format: "name{label="v",...} value" per sample line -> value.
std::map<std::string, double> ParseMetrics(const std::string& text);

}  // namespace transposed::testing

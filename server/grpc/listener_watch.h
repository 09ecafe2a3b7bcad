// ListenerWatch: notices when gRPC stops accepting connections, so the daemon can rebuild its
// server instead of staying alive but deaf.
//
// gRPC 1.51 (Debian 12) stops polling a listening socket for good when accept4 fails with
// anything but EAGAIN, ECONNABORTED or EINTR, e.g. EMFILE once every descriptor is taken by
// client connections; it only logs "Failed accept4: <error>". InstallGrpcLogHook routes gRPC's
// log lines (gpr_log) into spdlog, which also puts them into the daemon's log file, and reports
// that line to the watch. main.cc then shuts the server down (closing every connection, which
// frees the descriptors), and builds a new one on the same port; clients reconnect by themselves.
//
// Thread-safety: every method may be called from any thread (the hook runs on gRPC's threads).
#pragma once

#include <string>

#include "core/mutex.h"
#include "core/thread_annotations.h"

namespace transposed {

class ListenerWatch {
 public:
  // The process's watch, fed by the hook.
  static ListenerWatch& Get();

  // Records an accept failure (`what`: gRPC's message) and wakes Wait.
  void Notify(std::string what) EXCLUDES(mu_);
  // Makes every Wait return false from now on (the daemon is shutting down).
  void Stop() EXCLUDES(mu_);
  // Blocks until an accept failure was noticed since the last Wait (true, *what says which) or
  // Stop was called (false).
  bool Wait(std::string* what) EXCLUDES(mu_);
  // Accept failures noticed so far.
  int failures() const EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  CondVar cv_;
  int failures_ GUARDED_BY(mu_) = 0;
  int seen_ GUARDED_BY(mu_) = 0;
  bool stopped_ GUARDED_BY(mu_) = false;
  std::string last_ GUARDED_BY(mu_);
};

// Routes gRPC's log into spdlog (until RemoveGrpcLogHook; then to stderr) and reports accept
// failures to ListenerWatch::Get(). Call once spdlog is set up.
void InstallGrpcLogHook();
// Call before spdlog shuts down.
void RemoveGrpcLogHook();

}  // namespace transposed

// The gRPC log hook: gRPC's own log lines (gpr_log) go into spdlog, so into the daemon's log file
// with its format, instead of to stderr.
//
// Thread-safety: the hook runs on gRPC's threads; install and remove it from main.
#pragma once

namespace transposed {

// Routes gRPC's log into spdlog (until RemoveGrpcLogHook; then to stderr). Call once spdlog is
// set up.
void InstallGrpcLogHook();
// Call before spdlog shuts down.
void RemoveGrpcLogHook();

}  // namespace transposed

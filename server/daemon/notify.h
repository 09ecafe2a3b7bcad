// systemd's readiness protocol (sd_notify(3)) without libsystemd: one datagram ("READY=1",
// "STOPPING=1", "STATUS=...") to the AF_UNIX socket systemd names in $NOTIFY_SOCKET for a unit of
// Type=notify (a path, or an abstract socket when it starts with '@'). The daemon reads the
// variable once at start (daemon.cc) and says READY=1 once it serves (listening, port file
// written), STOPPING=1 when a signal stops it. Without $NOTIFY_SOCKET nothing is sent.
// Thread-safe (a socket per call).
#pragma once

#include <string>

#include "core/status.h"

namespace transposed {

// Sends `state` to the notify socket `socket_path` (as $NOTIFY_SOCKET gives it). OK without
// sending when `socket_path` is empty; INVALID_ARGUMENT for a path that is no AF_UNIX address;
// UNAVAILABLE with the system's reason when the datagram cannot be sent.
Status NotifyServiceManager(const std::string& socket_path, const std::string& state);

}  // namespace transposed

#include "server/grpc/listener_watch.h"

#include <grpc/support/log.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdio>
#include <cstring>

namespace transposed {

ListenerWatch& ListenerWatch::Get() {
  static ListenerWatch* watch = new ListenerWatch();  // never destroyed: gRPC may log at exit
  return *watch;
}

void ListenerWatch::Notify(std::string what) {
  {
    MutexLock lock(&mu_);
    ++failures_;
    last_ = std::move(what);
  }
  cv_.SignalAll();
}

void ListenerWatch::Stop() {
  {
    MutexLock lock(&mu_);
    stopped_ = true;
  }
  cv_.SignalAll();
}

bool ListenerWatch::Wait(std::string* what) {
  MutexLock lock(&mu_);
  while (!stopped_ && seen_ == failures_) cv_.Wait(&mu_);
  if (stopped_) return false;
  seen_ = failures_;
  *what = last_;
  return true;
}

int ListenerWatch::failures() const {
  MutexLock lock(&mu_);
  return failures_;
}

namespace {

std::atomic<bool> g_to_spdlog{false};

void GrpcLog(gpr_log_func_args* args) {
  const char* message = args->message != nullptr ? args->message : "";
  // tcp_server_posix.cc: the listener is abandoned after this line (see the header).
  if (std::strncmp(message, "Failed accept4", 14) == 0) ListenerWatch::Get().Notify(message);
  const char* file = args->file != nullptr ? args->file : "?";
  if (!g_to_spdlog.load()) {
    std::fprintf(stderr, "grpc %s %s:%d %s\n", gpr_log_severity_string(args->severity), file,
                 args->line, message);
    return;
  }
  switch (args->severity) {
    case GPR_LOG_SEVERITY_ERROR:
      spdlog::error("grpc: {} ({}:{})", message, file, args->line);
      break;
    case GPR_LOG_SEVERITY_INFO:
      spdlog::info("grpc: {} ({}:{})", message, file, args->line);
      break;
    default:
      spdlog::debug("grpc: {} ({}:{})", message, file, args->line);
  }
}

}  // namespace

void InstallGrpcLogHook() {
  g_to_spdlog.store(true);
  gpr_set_log_function(GrpcLog);
}

void RemoveGrpcLogHook() { g_to_spdlog.store(false); }

}  // namespace transposed

#include "server/grpc/grpc_log.h"

#include <grpc/support/log.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdio>
#include <cstring>

namespace transposed {

namespace {

std::atomic<bool> g_to_spdlog{false};

void GrpcLog(gpr_log_func_args* args) {
  const char* message = args->message != nullptr ? args->message : "";
  const char* file = args->file != nullptr ? args->file : "?";
  if (!g_to_spdlog.load()) {
    std::fprintf(stderr, "grpc %s %s:%d %s\n", gpr_log_severity_string(args->severity), file,
                 args->line, message);
    return;
  }
  switch (args->severity) {
    case GPR_LOG_SEVERITY_ERROR:
      // A client's failed TLS handshake (a plaintext client, one that does not trust this
      // certificate, a port scanner) is the client's mistake, not the daemon's: info.
      if (std::strstr(message, "andshake") != nullptr) {
        spdlog::info(
            "grpc: a client's TLS handshake failed (a plaintext client, or one without "
            "the CA?): {} ({}:{})",
            message, file, args->line);
        break;
      }
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

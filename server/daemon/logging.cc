#include "server/daemon/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>

namespace transposed {

ReopenableFileSink::ReopenableFileSink(const std::string& path) {
  file_.open(path, /*truncate=*/false);
}

void ReopenableFileSink::Reopen() {
  std::lock_guard<std::mutex> lock(mutex_);
  file_.reopen(/*truncate=*/false);
}

void ReopenableFileSink::sink_it_(const spdlog::details::log_msg& msg) {
  spdlog::memory_buf_t formatted;
  formatter_->format(msg, formatted);
  file_.write(formatted);
}

void ReopenableFileSink::flush_() { file_.flush(); }

bool SetUpDaemonLogging(const std::string& log_file, const std::string& log_level,
                        std::shared_ptr<ReopenableFileSink>* file_sink) {
  std::shared_ptr<spdlog::logger> logger;
  try {
    if (log_file.empty()) {
      logger = spdlog::stderr_logger_mt("transposed");
    } else {
      *file_sink = std::make_shared<ReopenableFileSink>(log_file);
      logger = std::make_shared<spdlog::logger>("transposed", *file_sink);
    }
  } catch (const spdlog::spdlog_ex& e) {
    std::fprintf(stderr, "transposed: --log-file %s: %s\n", log_file.c_str(), e.what());
    return false;
  }
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%t] %v");
  logger->set_level(spdlog::level::from_str(log_level));
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
  return true;
}

}  // namespace transposed

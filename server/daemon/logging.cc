#include "server/daemon/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <memory>

namespace transposed {
namespace {

// %* of the JSON pattern: the message as the body of a JSON string (quote, backslash and control
// bytes escaped; a log line never ends a JSON object early, whatever the message holds).
class JsonMessageFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    static constexpr char kHex[] = "0123456789abcdef";
    for (const char c : msg.payload) {
      const auto u = static_cast<unsigned char>(c);
      if (c == '"' || c == '\\') {
        dest.push_back('\\');
        dest.push_back(c);
      } else if (u < 0x20) {
        const char esc[] = {'\\', 'u', '0', '0', kHex[u >> 4], kHex[u & 15]};
        dest.append(esc, esc + sizeof esc);
      } else {
        dest.push_back(c);
      }
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonMessageFlag>();
  }
};

}  // namespace

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
                        const std::string& log_format,
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
  if (log_format == "json") {
    // One JSON object per line, the time in UTC.
    auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
    formatter->add_flag<JsonMessageFlag>('*').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","thread":%t,"message":"%*"})");
    logger->set_formatter(std::move(formatter));
  } else {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%t] %v");
  }
  logger->set_level(spdlog::level::from_str(log_level));
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
  return true;
}

}  // namespace transposed

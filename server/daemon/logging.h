// The daemon's log: spdlog's default logger "transposed", to a file (flushed on every line, so
// tests and tail -f see it at once) or to stderr, with the pattern
// "2026-01-01T12:00:00.123 info [tid] message", or with --log-format json one JSON object per
// line: {"time":"2026-01-01T12:00:00.123Z","level":"info","thread":123,"message":"..."} (UTC; the
// message escaped as a JSON string). A file log can be reopened (SIGHUP, after logrotate moved
// the file away).
//
// Thread-safety: SetUpDaemonLogging runs once, on main's thread, before other threads log;
// ReopenableFileSink::Reopen may be called from any thread (the sink's own mutex).
#pragma once

#include <spdlog/details/file_helper.h>
#include <spdlog/sinks/base_sink.h>

#include <memory>
#include <mutex>
#include <string>

namespace transposed {

// spdlog's basic_file_sink with a Reopen().
class ReopenableFileSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit ReopenableFileSink(const std::string& path);
  // Closes the file and opens the same path again (a new file if the old one was moved).
  void Reopen();

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override;
  void flush_() override;

 private:
  spdlog::details::file_helper file_;
};

// Makes the default logger: to `log_file` (empty: stderr) at `log_level` (a spdlog level name),
// in `log_format` ("text" or "json").
// False, after saying why on stderr, when the file cannot be opened. *file_sink is set when
// logging to a file.
bool SetUpDaemonLogging(const std::string& log_file, const std::string& log_level,
                        const std::string& log_format,
                        std::shared_ptr<ReopenableFileSink>* file_sink);

}  // namespace transposed

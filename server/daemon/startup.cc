#include "server/daemon/startup.h"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>

#include "core/suggest.h"
#include "core/text.h"

namespace transposed {

StatusOr<ListenAddress> ParseListenAddress(const std::string& value) {
  ListenAddress out;
  auto bad = [&value](const std::string& why) {
    return Status::InvalidArgument("--listen: " + why + ", got " + Quote(value) +
                                   " (expected HOST:PORT, [IPV6]:PORT or unix:PATH)");
  };
  for (const char* prefix : {"unix:", "unix-abstract:"}) {
    if (value.rfind(prefix, 0) == 0) {
      out.unix_socket = true;
      out.abstract_socket = std::strcmp(prefix, "unix-abstract:") == 0;
      out.loopback = true;
      out.host = value.substr(std::strlen(prefix));
      if (out.host.empty()) return bad("empty socket path");
      return out;
    }
  }
  std::string port;
  if (!value.empty() && value[0] == '[') {
    const auto close = value.find(']');
    if (close == std::string::npos) return bad("unbalanced '['");
    out.host = value.substr(1, close - 1);
    if (close + 1 >= value.size() || value[close + 1] != ':') return bad("no :PORT after ']'");
    port = value.substr(close + 2);
  } else {
    const auto colon = value.rfind(':');
    if (colon == std::string::npos) return bad("no :PORT");
    out.host = value.substr(0, colon);
    if (out.host.find(':') != std::string::npos) return bad("an IPv6 host needs [brackets]");
    port = value.substr(colon + 1);
  }
  if (out.host.empty()) return bad("empty host (use 127.0.0.1 or 0.0.0.0)");
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    return bad("the port must be a number in 0..65535");
  const long p = std::stol(port);
  if (p > 65535) return bad("the port must be a number in 0..65535");
  out.port = static_cast<int>(p);
  out.loopback = out.host == "localhost" || out.host == "::1" || out.host.rfind("127.", 0) == 0;
  return out;
}

Status CheckConfigFile(const CLI::App& app, const std::string& path) {
  std::vector<CLI::ConfigItem> items;
  try {
    items = app.get_config_formatter_base()->from_file(path);
  } catch (const CLI::Error& e) {
    return Status::InvalidArgument(path + ": " + e.what());
  }
  for (const CLI::ConfigItem& item : items) {
    if (!item.parents.empty()) {
      return Status::InvalidArgument(path + ": section [" + Escape(item.parents.front()) +
                                     "] is not supported (every key belongs at the top level)");
    }
    const std::string name = item.name;
    if (name == "++" || name == "--") continue;  // section markers (reported above)
    const CLI::Option* opt = app.get_option_no_throw("--" + name);
    if (opt != nullptr && opt != app.get_config_ptr()) continue;
    // The keys are the long flags spelled as they are: `tune_budget` is refused like any other
    // unknown key (CLI11 would ignore it), with the spelling it meant.
    std::vector<std::string> keys;
    for (const CLI::Option* o : app.get_options()) {
      if (o == app.get_config_ptr()) continue;
      for (const std::string& l : o->get_lnames()) keys.push_back(l);
    }
    std::string dashed = name;
    for (char& c : dashed)
      if (c == '_') c = '-';
    std::string hint = ClosestName(dashed, keys);
    if (hint.empty() && dashed != name && std::find(keys.begin(), keys.end(), dashed) != keys.end())
      hint = dashed;
    return Status::InvalidArgument(
        path + ": unknown key " + Quote(name) +
        (hint.empty() ? "" : " (did you mean " + hint + "?)") +
        "; the keys are the long flags spelled with dashes, see transposed --help");
  }
  return Status::OK();
}

uint64_t RaiseFileLimit(std::string* note) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) {
    *note = std::string("getrlimit(RLIMIT_NOFILE): ") + std::strerror(errno);
    return 0;
  }
  const rlim_t old_soft = lim.rlim_cur;
  if (lim.rlim_cur == lim.rlim_max) {
    *note = "descriptor limit " + std::to_string(lim.rlim_cur) + " (already the hard limit)";
    return lim.rlim_cur;
  }
  lim.rlim_cur = lim.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &lim) != 0) {
    *note = "descriptor limit " + std::to_string(old_soft) + " (raising it to the hard limit " +
            std::to_string(lim.rlim_max) + " failed: " + std::strerror(errno) + ")";
    return old_soft;
  }
  *note = "descriptor limit raised from " + std::to_string(old_soft) + " to the hard limit " +
          std::to_string(lim.rlim_max);
  return lim.rlim_max;
}

DescriptorBudget MakeDescriptorBudget(uint64_t limit, uint64_t open_now, int somaxconn) {
  DescriptorBudget b;
  b.limit = limit;
  b.open_now = open_now;
  if (limit == 0 || limit > (uint64_t{1} << 30)) {
    b.max_connections = DescriptorBudget::kMaxDefaultConnections;
    return b;
  }
  b.burst = std::max<uint64_t>(8, limit / 8);
  const uint64_t kept = open_now + DescriptorBudget::kOwnFiles + b.burst;
  b.max_connections = static_cast<int>(std::min<uint64_t>(
      DescriptorBudget::kMaxDefaultConnections, limit > kept ? limit - kept : 1));
  b.guard_fd = static_cast<int>(limit - b.burst / 2);
  const int queue = static_cast<int>(std::max<uint64_t>(8, b.burst / 2));
  if (somaxconn <= 0 || queue < somaxconn) b.accept_queue = queue;
  return b;
}

int SystemAcceptQueueCap() {
  std::ifstream in("/proc/sys/net/core/somaxconn");
  int v = 0;
  return in >> v && v > 0 ? v : 4096;
}

uint64_t CountOpenFiles() {
  std::error_code ec;
  uint64_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return ec ? 0 : n;
}

}  // namespace transposed

#include "tuner/cuda/worker_protocol.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

namespace transposed::cuda_worker {
namespace {

using nlohmann::json;

// Reads a required field of type T; INVALID_ARGUMENT naming it if missing or of the wrong type.
template <typename T>
Status Get(const json& j, const char* key, T* out) {
  if (!j.is_object()) return Status::InvalidArgument("expected a JSON object");
  auto it = j.find(key);
  if (it == j.end()) return Status::InvalidArgument(std::string("missing field '") + key + "'");
  try {
    *out = it->get<T>();
  } catch (const json::exception& e) {
    return Status::InvalidArgument(std::string("field '") + key + "': " + e.what());
  }
  return Status::OK();
}

// Optional field: leaves *out unchanged when missing.
template <typename T>
Status GetOpt(const json& j, const char* key, T* out) {
  if (!j.is_object() || !j.contains(key)) return Status::OK();
  return Get(j, key, out);
}

bool IsSocket(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
}

Status WriteAll(int fd, const char* data, size_t n) {
  const bool sock = IsSocket(fd);
  while (n > 0) {
    ssize_t w = sock ? send(fd, data, n, MSG_NOSIGNAL) : write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::Unavailable(std::string("write failed: ") + std::strerror(errno));
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return Status::OK();
}

// Reads exactly n bytes before the deadline (steady clock; no deadline when has_deadline false).
Status ReadAll(int fd, char* data, size_t n, bool has_deadline,
               std::chrono::steady_clock::time_point deadline) {
  while (n > 0) {
    int wait_ms = -1;
    if (has_deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return Status::DeadlineExceeded("timed out waiting for the worker");
      wait_ms = static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
    }
    struct pollfd pfd = {fd, POLLIN, 0};
    int pr = poll(&pfd, 1, wait_ms);
    if (pr < 0) {
      if (errno == EINTR) continue;
      return Status::Unavailable(std::string("poll failed: ") + std::strerror(errno));
    }
    if (pr == 0) continue;  // re-evaluates the deadline
    ssize_t r = read(fd, data, n);
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return Status::Unavailable(std::string("read failed: ") + std::strerror(errno));
    }
    if (r == 0) return Status::Unavailable("end of stream");
    data += r;
    n -= static_cast<size_t>(r);
  }
  return Status::OK();
}

uint32_t LoadLe32(const unsigned char* b) {
  return static_cast<uint32_t>(b[0]) | (static_cast<uint32_t>(b[1]) << 8) |
         (static_cast<uint32_t>(b[2]) << 16) | (static_cast<uint32_t>(b[3]) << 24);
}

}  // namespace

std::string EncodeFrame(const std::string& payload) {
  const uint32_t n = static_cast<uint32_t>(payload.size());
  std::string out;
  out.reserve(4 + payload.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += payload;
  return out;
}

Status DecodeFrame(const std::string& buffer, std::string* payload, size_t* consumed) {
  if (buffer.size() < 4) return Status::Unavailable("incomplete frame header");
  const uint32_t n = LoadLe32(reinterpret_cast<const unsigned char*>(buffer.data()));
  if (n > kMaxFrameBytes) {
    return Status::InvalidArgument("frame of " + std::to_string(n) + " bytes exceeds the limit");
  }
  if (buffer.size() < 4 + static_cast<size_t>(n)) return Status::Unavailable("incomplete frame");
  payload->assign(buffer, 4, n);
  *consumed = 4 + static_cast<size_t>(n);
  return Status::OK();
}

Status WriteFrame(int fd, const std::string& payload) {
  if (payload.size() > kMaxFrameBytes) return Status::InvalidArgument("frame too large");
  const std::string frame = EncodeFrame(payload);
  return WriteAll(fd, frame.data(), frame.size());
}

Status ReadFrame(int fd, std::string* payload, int timeout_ms) {
  const bool has_deadline = timeout_ms >= 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  unsigned char header[4];
  TR_RETURN_IF_ERROR(ReadAll(fd, reinterpret_cast<char*>(header), 4, has_deadline, deadline));
  const uint32_t n = LoadLe32(header);
  if (n > kMaxFrameBytes) {
    return Status::InvalidArgument("frame of " + std::to_string(n) + " bytes exceeds the limit");
  }
  payload->assign(n, '\0');
  if (n > 0) TR_RETURN_IF_ERROR(ReadAll(fd, payload->data(), n, has_deadline, deadline));
  return Status::OK();
}

json ProblemToJson(const Problem& p) {
  return json{{"rows", p.rows},   {"cols", p.cols},
              {"batch", p.batch}, {"dtype", std::string(DTypeName(p.dtype))},
              {"ld_in", p.ld_in}, {"ld_out", p.ld_out}};
}

StatusOr<Problem> ProblemFromJson(const json& j) {
  Problem p;
  std::string dtype;
  TR_RETURN_IF_ERROR(Get(j, "rows", &p.rows));
  TR_RETURN_IF_ERROR(Get(j, "cols", &p.cols));
  TR_RETURN_IF_ERROR(Get(j, "batch", &p.batch));
  TR_RETURN_IF_ERROR(Get(j, "dtype", &dtype));
  TR_RETURN_IF_ERROR(Get(j, "ld_in", &p.ld_in));
  TR_RETURN_IF_ERROR(Get(j, "ld_out", &p.ld_out));
  auto t = ParseDType(dtype);
  if (!t) return Status::InvalidArgument("field 'dtype': unknown dtype '" + dtype + "'");
  p.dtype = *t;
  return p;
}

json CandidateToJson(const Candidate& c) {
  json params = json::object();
  for (const auto& [k, v] : c.params) params[k] = v;
  return json{{"name", c.name}, {"params", params}};
}

StatusOr<Candidate> CandidateFromJson(const json& j) {
  Candidate c;
  TR_RETURN_IF_ERROR(Get(j, "name", &c.name));
  TR_RETURN_IF_ERROR(Get(j, "params", &c.params));
  return c;
}

json MeasureOptionsToJson(const MeasureOptions& o) {
  return json{{"warmup", o.warmup},
              {"min_samples", o.min_samples},
              {"min_seconds", o.min_seconds},
              {"max_samples", o.max_samples}};
}

StatusOr<MeasureOptions> MeasureOptionsFromJson(const json& j) {
  MeasureOptions o;
  TR_RETURN_IF_ERROR(Get(j, "warmup", &o.warmup));
  TR_RETURN_IF_ERROR(Get(j, "min_samples", &o.min_samples));
  TR_RETURN_IF_ERROR(Get(j, "min_seconds", &o.min_seconds));
  TR_RETURN_IF_ERROR(Get(j, "max_samples", &o.max_samples));
  if (o.warmup < 0 || o.min_samples < 1 || o.max_samples < o.min_samples || o.min_seconds < 0) {
    return Status::InvalidArgument("measure options out of range");
  }
  return o;
}

json MeasurementToJson(const Measurement& m) {
  return json{{"valid", m.valid},   {"error", m.error},  {"median_s", m.median_s},
              {"min_s", m.min_s},   {"max_s", m.max_s},  {"samples", m.samples},
              {"warmup", m.warmup}, {"method", m.method}};
}

StatusOr<Measurement> MeasurementFromJson(const json& j) {
  Measurement m;
  TR_RETURN_IF_ERROR(Get(j, "valid", &m.valid));
  TR_RETURN_IF_ERROR(Get(j, "error", &m.error));
  TR_RETURN_IF_ERROR(Get(j, "median_s", &m.median_s));
  TR_RETURN_IF_ERROR(Get(j, "min_s", &m.min_s));
  TR_RETURN_IF_ERROR(Get(j, "max_s", &m.max_s));
  TR_RETURN_IF_ERROR(Get(j, "samples", &m.samples));
  TR_RETURN_IF_ERROR(Get(j, "warmup", &m.warmup));
  TR_RETURN_IF_ERROR(Get(j, "method", &m.method));
  return m;
}

json DeviceInfoToJson(const DeviceInfo& d) {
  json attrs = json::object();
  for (const auto& [k, v] : d.attributes) attrs[k] = v;
  return json{{"backend", d.backend},
              {"index", d.index},
              {"uuid", d.uuid},
              {"name", d.name},
              {"memory_bytes", d.memory_bytes},
              {"attributes", attrs},
              {"library_version", d.library_version}};
}

StatusOr<DeviceInfo> DeviceInfoFromJson(const json& j) {
  DeviceInfo d;
  TR_RETURN_IF_ERROR(Get(j, "backend", &d.backend));
  TR_RETURN_IF_ERROR(Get(j, "index", &d.index));
  TR_RETURN_IF_ERROR(Get(j, "uuid", &d.uuid));
  TR_RETURN_IF_ERROR(Get(j, "name", &d.name));
  TR_RETURN_IF_ERROR(Get(j, "memory_bytes", &d.memory_bytes));
  TR_RETURN_IF_ERROR(Get(j, "attributes", &d.attributes));
  TR_RETURN_IF_ERROR(GetOpt(j, "library_version", &d.library_version));
  return d;
}

json OkResponse() { return json{{"ok", true}}; }

json ErrorResponse(const Status& s, bool fatal) {
  json r{{"ok", false}, {"code", static_cast<int>(s.code())}, {"message", s.message()}};
  if (fatal) r["fatal"] = true;
  return r;
}

Status ResponseStatus(const json& response) {
  bool ok = false;
  Status st = Get(response, "ok", &ok);
  if (!st.ok()) return Status::Internal("malformed worker response: " + st.message());
  if (ok) return Status::OK();
  int code = static_cast<int>(StatusCode::kUnknown);
  std::string message;
  (void)GetOpt(response, "code", &code);
  (void)GetOpt(response, "message", &message);
  if (code == 0) code = static_cast<int>(StatusCode::kUnknown);  // an error is never OK
  return Status(static_cast<StatusCode>(code), message);
}

StatusOr<json> ParseJsonObject(const std::string& payload) {
  json j = json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::InvalidArgument("payload is not a JSON object");
  }
  return j;
}

}  // namespace transposed::cuda_worker

// The wire protocol between the daemon-side CudaBackend and its `transposed-worker` process.
//
// Each message is one frame: a 4-byte little-endian length followed by that many bytes of UTF-8
// JSON (one object). The daemon sends a request {"op": ..., ...}; the worker answers with exactly
// one response {"ok": true, ...} or {"ok": false, "code": <StatusCode>, "message": ...}; a
// response may carry "fatal": true, meaning the worker's CUDA context is broken and the worker
// exits right after sending it. Ops: describe, open, check, measure, ceiling, close (see
// docs/cuda-backend.md). This file also holds the JSON codecs of the tuner's value types, shared
// by both sides. Plain functions over file descriptors; thread-compatible (one fd, one thread).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/problem.h"
#include "core/status.h"
#include "tuner/backend.h"
#include "tuner/cuda/worker_constants.h"

namespace transposed::cuda_worker {

// Frames: 4-byte little-endian length, then the payload.
std::string EncodeFrame(const std::string& payload);
// Parses one frame from the front of `buffer`: OK and fills *payload and *consumed when a whole
// frame is there; UNAVAILABLE ("incomplete") when more bytes are needed; INVALID_ARGUMENT when
// the length is over kMaxFrameBytes.
Status DecodeFrame(const std::string& buffer, std::string* payload, size_t* consumed);

// Writes a whole frame to fd (retrying on EINTR/partial writes; no SIGPIPE on sockets).
Status WriteFrame(int fd, const std::string& payload);
// Reads one whole frame from fd. timeout_ms < 0: no limit. DEADLINE_EXCEEDED on timeout,
// UNAVAILABLE on EOF or a broken connection, INVALID_ARGUMENT on an oversized frame.
Status ReadFrame(int fd, std::string* payload, int timeout_ms);

// JSON codecs. The From* functions return INVALID_ARGUMENT naming the missing or bad field.
nlohmann::json ProblemToJson(const Problem& p);
StatusOr<Problem> ProblemFromJson(const nlohmann::json& j);
nlohmann::json CandidateToJson(const Candidate& c);
StatusOr<Candidate> CandidateFromJson(const nlohmann::json& j);
nlohmann::json MeasureOptionsToJson(const MeasureOptions& o);
StatusOr<MeasureOptions> MeasureOptionsFromJson(const nlohmann::json& j);
nlohmann::json MeasurementToJson(const Measurement& m);
StatusOr<Measurement> MeasurementFromJson(const nlohmann::json& j);
nlohmann::json DeviceInfoToJson(const DeviceInfo& d);
StatusOr<DeviceInfo> DeviceInfoFromJson(const nlohmann::json& j);

// Responses.
nlohmann::json OkResponse();
nlohmann::json ErrorResponse(const Status& s, bool fatal = false);
// The Status a response carries: OK for {"ok":true}, else its code and message.
Status ResponseStatus(const nlohmann::json& response);
// Parses a payload as a JSON object (INVALID_ARGUMENT when it is not one).
StatusOr<nlohmann::json> ParseJsonObject(const std::string& payload);

}  // namespace transposed::cuda_worker

// Frames of the worker protocol: a 4-byte little-endian length, then that many bytes (a
// serialized worker.proto message). Plain functions over file descriptors; thread-compatible
// (one fd, one thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace transposed::worker {

// Frames larger than this are rejected (a corrupted length must not allocate gigabytes).
inline constexpr uint32_t kMaxFrameBytes = 64u << 20;

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

}  // namespace transposed::worker

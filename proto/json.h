// The one JSON mapping of transposed's messages: protobuf's JSON printer with one set of options
// (the .proto's field names, every primitive field printed even when it is zero, enums by name
// such as "SOURCE_CACHE", 64-bit integers as strings, as protobuf's JSON mapping says). Every
// `transposectl --json` output (single daemon or fleet), every `transposectl export` line and so
// every `transposed --seed` file goes through it; protobuf's JSON parser (and any other language's
// protobuf library) reads it back. The layout is the only choice: one line (streams, export) or
// indented (one reply). Pure functions; thread-safe.
#pragma once

#include <google/protobuf/message.h>
#include <google/protobuf/util/json_util.h>

#include <string>

#include "core/status.h"

namespace transposed {

enum class JsonLayout { kLine, kIndented };

// The options: the same for every message, only add_whitespace follows the layout.
google::protobuf::util::JsonPrintOptions ProtoJsonOptions(JsonLayout layout);

// The message in the one mapping (no trailing newline). INTERNAL if the printer fails.
StatusOr<std::string> ProtoToJson(const google::protobuf::Message& message, JsonLayout layout);

}  // namespace transposed

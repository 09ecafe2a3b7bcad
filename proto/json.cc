#include "proto/json.h"

namespace transposed {

google::protobuf::util::JsonPrintOptions ProtoJsonOptions(JsonLayout layout) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  options.add_whitespace = layout == JsonLayout::kIndented;
  return options;
}

StatusOr<std::string> ProtoToJson(const google::protobuf::Message& message, JsonLayout layout) {
  std::string out;
  auto s = google::protobuf::util::MessageToJsonString(message, &out, ProtoJsonOptions(layout));
  if (!s.ok()) return Status::Internal("JSON printer: " + std::string(s.message()));
  // add_whitespace ends the text with a newline; the callers add their own.
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace transposed

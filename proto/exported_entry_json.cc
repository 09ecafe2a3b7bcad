#include "proto/exported_entry_json.h"

#include <google/protobuf/util/json_util.h>

#include "proto/json.h"

namespace transposed {

StatusOr<std::string> ExportedEntryToLine(const v1::ExportedEntry& entry) {
  return ProtoToJson(entry, JsonLayout::kLine);
}

StatusOr<v1::ExportedEntry> ExportedEntryFromLine(const std::string& line) {
  if (line.size() > kMaxExportedLineBytes)
    return Status::InvalidArgument("not an ExportedEntry: longer than 64 MiB");
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  v1::ExportedEntry entry;
  auto s = google::protobuf::util::JsonStringToMessage(line, &entry, options);
  if (!s.ok())
    return Status::InvalidArgument("not an ExportedEntry: " +
                                   std::string(s.message()).substr(0, 300));
  return entry;
}

bool IsBlankLine(const std::string& line) {
  return line.find_first_not_of(" \t\r") == std::string::npos;
}

}  // namespace transposed

#include "client/fleet.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>

#include "client/format.h"
#include "proto/json.h"

namespace transposed {
namespace {

std::string Trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

Status AddUnique(std::string address, const std::string& where, std::set<std::string>* seen,
                 std::vector<std::string>* out) {
  if (seen->insert(address).second) out->push_back(std::move(address));
  if (out->size() > kMaxFleetNodes) {
    return Status::InvalidArgument(where + ": more than " + std::to_string(kMaxFleetNodes) +
                                   " daemons");
  }
  return Status::OK();
}

std::string AnswerLine(const v1::Answer& a) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "device=%d  %-24s  %-32s  %9.1f GB/s  ratio=%.3f  %s",
                a.device().index(), ProblemLabel(a.problem()).c_str(),
                VariantLabel(a.variant()).c_str(), a.gbps(), a.ratio(),
                SourceName(a.source()).c_str());
  return buf;
}

}  // namespace

StatusOr<std::vector<std::string>> ParseServerList(const std::string& list,
                                                   const std::string& field) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  size_t start = 0;
  int position = 0;
  while (true) {
    const size_t comma = list.find(',', start);
    std::string item = Trim(list.substr(start, comma == std::string::npos ? std::string::npos
                                                                          : comma - start));
    ++position;
    if (item.empty()) {
      return Status::InvalidArgument(field + ": element " + std::to_string(position) +
                                     " is empty (expected HOST:PORT,HOST:PORT,...)");
    }
    TR_RETURN_IF_ERROR(AddUnique(std::move(item), field, &seen, &out));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

StatusOr<std::vector<std::string>> ReadServersFile(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return Status::NotFound("--servers-file: cannot read " + path + ": " + std::strerror(errno));
  std::vector<std::string> out;
  std::set<std::string> seen;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    std::string item = Trim(line);
    if (item.empty() || item[0] == '#') continue;
    if (item.find_first_of(" \t,") != std::string::npos) {
      return Status::InvalidArgument("--servers-file: " + path + ":" + std::to_string(number) +
                                     ": one HOST:PORT per line, got '" + item.substr(0, 200) + "'");
    }
    TR_RETURN_IF_ERROR(AddUnique(std::move(item), "--servers-file " + path, &seen, &out));
  }
  if (out.empty()) return Status::InvalidArgument("--servers-file: " + path + " lists no daemon");
  return out;
}

std::vector<NodeResult> FanOut(const std::vector<std::string>& addresses,
                               const FleetOptions& options, const NodeCall& call) {
  std::vector<NodeResult> results(addresses.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < addresses.size(); i = next++) {
      NodeResult& r = results[i];
      r.node = addresses[i];
      auto client = Client::Connect(addresses[i], options.client);
      if (!client.ok()) {
        r.status = client.status();
        continue;
      }
      r.status = call(**client, &r.rows);
      for (auto& row : r.rows) row.set_node(r.node);
    }
  };
  const int threads = static_cast<int>(std::min<size_t>(
      addresses.size(),
      static_cast<size_t>(std::clamp(options.parallelism, 1, kMaxFleetParallelism))));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  return results;
}

v1::FleetReply MergeFleet(const std::vector<NodeResult>& results, FleetOrder order,
                          bool not_found_is_miss) {
  v1::FleetReply reply;
  reply.set_nodes(static_cast<int32_t>(results.size()));
  std::vector<const v1::FleetRow*> rows;
  for (const auto& r : results)
    for (const auto& row : r.rows) rows.push_back(&row);
  if (order == FleetOrder::kNewestFirst) {
    auto tuned_at = [](const v1::FleetRow* row) -> int64_t {
      if (row->has_entry()) return row->entry().answer().tuned_at_unix_ms();
      if (row->has_answer()) return row->answer().tuned_at_unix_ms();
      return 0;
    };
    std::stable_sort(rows.begin(), rows.end(), [&](const v1::FleetRow* a, const v1::FleetRow* b) {
      return tuned_at(a) > tuned_at(b);
    });
  }
  for (const auto* row : rows) *reply.add_rows() = *row;
  for (const auto& r : results) {
    if (r.status.ok()) continue;
    const bool miss = not_found_is_miss && r.status.code() == StatusCode::kNotFound;
    if (miss) {
      reply.set_missed(reply.missed() + 1);
    } else {
      reply.set_failed(reply.failed() + 1);
    }
    v1::FleetRow* row = reply.add_rows();
    row->set_node(r.node);
    row->mutable_error()->set_code(StatusCodeName(r.status.code()));
    row->mutable_error()->set_message(r.status.message());
  }
  return reply;
}

std::string FleetToText(const v1::FleetReply& reply, const std::string& what) {
  size_t width = 0;
  for (const auto& row : reply.rows()) width = std::max(width, row.node().size());
  std::string out;
  int items = 0;
  for (const auto& row : reply.rows()) {
    std::string node = row.node();
    node.resize(width, ' ');
    std::string text;
    switch (row.item_case()) {
      case v1::FleetRow::kDevice:
        text = DeviceToText(row.device());
        ++items;
        break;
      case v1::FleetRow::kEntry:
        text = EntryToText(row.entry());
        ++items;
        break;
      case v1::FleetRow::kAnswer:
        text = AnswerLine(row.answer());
        ++items;
        break;
      case v1::FleetRow::kError:
        text = row.error().code() + ": " + row.error().message();
        break;
      case v1::FleetRow::ITEM_NOT_SET:
        break;
    }
    // Candidate lines of an entry are indented under it, the node column kept blank.
    size_t pos = 0;
    while ((pos = text.find('\n', pos)) != std::string::npos) {
      text.insert(pos + 1, std::string(width + 2, ' '));
      pos += 1;
    }
    out += node + "  " + text + "\n";
  }
  out += std::to_string(items) + " " + what + " from " + std::to_string(reply.nodes()) +
         (reply.nodes() == 1 ? " daemon" : " daemons");
  if (reply.missed() > 0) out += ", " + std::to_string(reply.missed()) + " without it";
  if (reply.failed() > 0) out += ", " + std::to_string(reply.failed()) + " failed";
  return out + "\n";
}

StatusOr<std::string> FleetToJson(const v1::FleetReply& reply) {
  return ProtoToJson(reply, JsonLayout::kIndented);
}

}  // namespace transposed

// TransposeService's stored entries (service.h): listing (whole or by page), deleting and
// merging entries measured elsewhere, and the device lookups that show an entry for this daemon.
#include <string>
#include <utility>
#include <vector>

#include "core/device_class.h"
#include "store/entry_validation.h"
#include "server/service.h"

namespace transposed {

StatusOr<StoreFilter> TransposeService::ResolveQuery(const EntryQuery& query) const {
  StoreFilter filter = query.filter;
  if (query.device.has_value()) {
    TR_ASSIGN_OR_RETURN(const int device, ResolveDevice(*query.device, "filter.device"));
    // A device's entries are those it is served: measured on any device of its class.
    filter.device_class = tuners_[device]->device_class();
  }
  return filter;
}

StatusOr<std::vector<TuneResult>> TransposeService::ListEntries(const EntryQuery& query,
                                                                bool include_candidates,
                                                                int limit) {
  if (limit < 0)
    return Status::InvalidArgument("limit: must be >= 0 (0: no limit), got " +
                                   std::to_string(limit));
  TR_ASSIGN_OR_RETURN(StoreFilter filter, ResolveQuery(query));
  TR_ASSIGN_OR_RETURN(auto entries, store_->List(filter, include_candidates, limit));
  for (auto& e : entries) {
    e.device.index = LocalIndexOf(e.device);
  }
  return entries;
}

StatusOr<EntryPage> TransposeService::ListEntryPage(const EntryQuery& query,
                                                    bool include_candidates, int page_size,
                                                    const std::string& page_token) {
  if (page_size < 0)
    return Status::InvalidArgument("page_size: must be >= 0 (0: " +
                                   std::to_string(kDefaultPageSize) + "), got " +
                                   std::to_string(page_size));
  if (page_size == 0) page_size = kDefaultPageSize;
  page_size = std::min(page_size, kMaxPageSize);
  std::optional<EntryCursor> after;
  if (!page_token.empty()) {
    TR_ASSIGN_OR_RETURN(after, ParseEntryPageToken(page_token));
  }
  TR_ASSIGN_OR_RETURN(StoreFilter filter, ResolveQuery(query));
  std::vector<EntryCursor> cursors;
  // One more than the page: whether it exists says whether there is a next page. The store stops
  // early once the entries hold kMaxEntryPageBytes; then the page ends there.
  TR_ASSIGN_OR_RETURN(auto entries,
                      store_->List(filter, include_candidates, page_size + 1,
                                   after ? &*after : nullptr, &cursors, kMaxEntryPageBytes));
  size_t bytes = 0;
  for (const auto& e : entries) bytes += ApproxEntryBytes(e);
  EntryPage page;
  page.more = static_cast<int>(entries.size()) > page_size || bytes >= kMaxEntryPageBytes;
  if (static_cast<int>(entries.size()) > page_size) entries.resize(page_size);
  for (size_t i = 0; i < entries.size(); ++i) {
    TuneResult& e = entries[i];
    e.device.index = LocalIndexOf(e.device);
    page.resume_tokens.push_back(EntryPageToken(cursors[i]));
  }
  page.entries = std::move(entries);
  return page;
}

StatusOr<int64_t> TransposeService::DeleteEntries(const EntryQuery& query, bool all) {
  if (query.empty() && !all)
    return Status::InvalidArgument("filter: empty filter deletes everything; set all=true");
  TR_ASSIGN_OR_RETURN(StoreFilter filter, ResolveQuery(query));
  auto deleted = store_->Delete(filter);
  answers_.Invalidate();
  return deleted;
}

int TransposeService::LocalIndexOf(const DeviceInfo& device) const {
  const std::string fp = device.Fingerprint();
  for (const auto& tuner : tuners_)
    if (tuner->fingerprint() == fp) return tuner->index();
  return -1;
}

int TransposeService::DeviceIndexOfClass(const DeviceInfo& device) const {
  const std::string cls = ClassOf(device).key;
  for (const auto& tuner : tuners_)
    if (tuner->device_class() == cls) return tuner->index();
  return -1;
}

void TransposeService::CountRefusedEntry(const char* door) const {
  if (options_.observer != nullptr) options_.observer->OnEntryRefused(door);
}

StatusOr<MergeCounts> TransposeService::MergeEntries(const std::vector<TuneResult>& results) {
  MergeCounts counts;
  for (const TuneResult& r : results) {
    bool known = false;
    for (const auto& tuner : tuners_)
      known = known || tuner->device().library_version == r.device.library_version;
    if (!known) {
      ++counts.refused_library_version;
      continue;
    }
    auto merged = store_->Merge(r);
    answers_.Invalidate();
    TR_ASSIGN_OR_RETURN(bool stored, std::move(merged));
    ++(stored ? counts.imported : counts.kept_existing);
  }
  return counts;
}

}  // namespace transposed

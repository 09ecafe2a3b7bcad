// The entry and device RPCs of GrpcTransposer (grpc_service.h), answered on the calling thread
// (ListDevices, ListEntries, DeleteEntries, ImportEntries) or streamed from the store page by
// page (ExportEntries). GetConfig is in grpc_service.cc, Tune and TuneMany in tune_rpcs.cc.
#include <functional>
#include <string>
#include <vector>

#include "core/text.h"
#include "proto/grpc_status.h"
#include "server/grpc/convert.h"
#include "server/grpc/grpc_service.h"

namespace transposed {
namespace {

// The most bytes of entries one ListEntries answer carries (a default client accepts 4 MiB): the
// service's page bound (server/service.h), measured here in serialised bytes.
constexpr size_t kMaxListReplyBytes = kMaxEntryPageBytes;

v1::DeviceLoad DeviceLoadToProto(const DeviceLoad& l) {
  v1::DeviceLoad out;
  out.set_state(std::string(LoadStateName(l.state)));
  out.set_source(l.sample.source);
  out.set_detail(l.sample.detail);
  out.set_utilization_percent(l.sample.utilization_percent);
  out.set_other_processes(l.sample.other_processes);
  out.set_sampled_at_unix_ms(l.sampled_at_unix_ms);
  out.set_tune_contention(l.tune_contention);
  out.set_tune_ceiling_gbps(l.tune_ceiling_gbps);
  out.set_idle_ceiling_gbps(l.idle_ceiling_gbps);
  out.set_background_waiting(l.background_waiting);
  out.set_background_abandoned(l.background_abandoned);
  out.set_last_abandoned(l.last_abandoned);
  return out;
}

}  // namespace

grpc::ServerUnaryReactor* GrpcTransposer::ListDevices(grpc::CallbackServerContext* context,
                                                      const v1::ListDevicesRequest* /*request*/,
                                                      v1::ListDevicesResponse* response) {
  const std::vector<DeviceLoad> loads = service_->DeviceLoads();
  const std::vector<DeviceHealthStatus> health = service_->DeviceHealthStatuses();
  for (const auto& d : service_->ListDevices()) {
    v1::Device* out = response->add_devices();
    *out = DeviceToProto(d);
    if (d.index >= 0 && static_cast<size_t>(d.index) < loads.size())
      *out->mutable_load() = DeviceLoadToProto(loads[d.index]);
    if (d.index >= 0 && static_cast<size_t>(d.index) < health.size()) {
      const DeviceHealthStatus& h = health[d.index];
      v1::DeviceHealth* to = out->mutable_health();
      to->set_slow(h.slow);
      to->set_reason(h.reason);
      to->set_ceiling_ratio(h.ratio);
      to->set_verdicts(h.verdicts);
      to->set_class_devices(h.class_devices);
    }
  }
  Note(context, "devices=" + std::to_string(response->devices_size()));
  return FinishNow(context, Status::OK());
}

grpc::ServerUnaryReactor* GrpcTransposer::ListEntries(grpc::CallbackServerContext* context,
                                                      const v1::ListEntriesRequest* request,
                                                      v1::ListEntriesResponse* response) {
  auto query = EntryQueryFromProto(request->filter());
  Status status = query.status();
  if (status.ok()) status = CheckFieldLength("page_token", request->page_token());
  if (status.ok()) {
    const int page_size = request->page_size() != 0 ? request->page_size() : request->limit();
    // `limit` is the older name of page_size: an error names the field the client set.
    auto page = request->page_size() == 0 && request->limit() < 0
                    ? StatusOr<EntryPage>(Status::InvalidArgument(
                          "limit: must be >= 0 (0: " + std::to_string(kDefaultPageSize) +
                          "), got " + std::to_string(request->limit())))
                    : service_->ListEntryPage(*query, request->include_candidates(), page_size,
                                              request->page_token());
    status = page.status();
    if (page.ok()) {
      const std::vector<DeviceInfo> devices = service_->ListDevices();
      size_t bytes = 0;
      for (size_t i = 0; i < page->entries.size(); ++i) {
        const TuneResult& e = page->entries[i];
        v1::Entry entry;
        // Shown for the device of this daemon it is served to (one of its class), with the
        // instance it was measured on; of no class here: for that instance itself.
        const int served = service_->DeviceIndexOfClass(e.device);
        if (served >= 0) {
          TuneResult shown = e;
          shown.device = devices[static_cast<size_t>(served)];
          *entry.mutable_answer() = AnswerToProto(shown, AnswerSource::kCache, &e.device);
        } else {
          *entry.mutable_answer() = AnswerToProto(e, AnswerSource::kCache);
        }
        for (const auto& c : e.candidates)
          *entry.add_candidates() = CandidateResultToProto(c, e.device.backend, e.problem.bytes());
        bytes += entry.ByteSizeLong();
        // Keep the answer under kMaxListReplyBytes (it always carries at least one entry).
        if (i > 0 && bytes > kMaxListReplyBytes) {
          response->set_next_page_token(page->resume_tokens[i - 1]);
          break;
        }
        *response->add_entries() = std::move(entry);
        if (i + 1 == page->entries.size() && page->more)
          response->set_next_page_token(page->resume_tokens[i]);
      }
    }
  }
  Note(context, "entries=" + std::to_string(response->entries_size()) +
                    " more=" + (response->next_page_token().empty() ? "false" : "true"));
  return FinishNow(context, status);
}

grpc::ServerUnaryReactor* GrpcTransposer::DeleteEntries(grpc::CallbackServerContext* context,
                                                        const v1::DeleteEntriesRequest* request,
                                                        v1::DeleteEntriesResponse* response) {
  if (Status auth = Authorize("DeleteEntries", context); !auth.ok()) {
    Note(context, "refused");
    return FinishNow(context, auth);
  }
  auto query = EntryQueryFromProto(request->filter());
  Status status = query.status();
  if (status.ok()) {
    auto deleted = service_->DeleteEntries(*query, request->all());
    status = deleted.status();
    if (deleted.ok()) response->set_deleted(*deleted);
  }
  Note(context, "deleted=" + std::to_string(response->deleted()));
  return FinishNow(context, status);
}

namespace {

// Entries read from the store at once by an export: memory holds one page of them (with their
// candidates), whatever the size of the cache.
constexpr int kExportPageSize = 100;

// Streams the entries of `query` page by page from the store, one Write at a time; finishes with
// `status` when it is not OK, else after the last entry (or with the error of a page that could
// not be read). `on_finish` gets the number of entries sent, before the status goes out.
class ExportCall : public grpc::ServerWriteReactor<v1::ExportedEntry> {
 public:
  ExportCall(TransposeService* service, EntryQuery query, Status status,
             std::function<void(int64_t)> on_finish)
      : service_(service),
        query_(std::move(query)),
        status_(std::move(status)),
        on_finish_(std::move(on_finish)) {
    Next();
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      if (on_finish_) on_finish_(sent_);
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away during the export"));
      return;
    }
    Next();
  }
  void OnDone() override { delete this; }

 private:
  void Next() {
    if (status_.ok() && next_ >= page_.entries.size() && (first_page_ || page_.more)) {
      first_page_ = false;
      page_.entries.clear();  // the old page goes before the new one comes
      auto page = service_->ListEntryPage(query_, /*include_candidates=*/true, kExportPageSize,
                                          resume_token_);
      if (page.ok()) {
        page_ = std::move(page).value();
        next_ = 0;
        if (!page_.resume_tokens.empty()) resume_token_ = page_.resume_tokens.back();
      } else {
        status_ = page.status();
      }
    }
    if (!status_.ok() || next_ >= page_.entries.size()) {
      if (on_finish_) on_finish_(sent_);
      Finish(ToGrpcStatus(status_));
      return;
    }
    message_ = ExportedEntryToProto(page_.entries[next_++]);
    ++sent_;
    StartWrite(&message_);
  }
  TransposeService* const service_;
  const EntryQuery query_;
  Status status_;
  const std::function<void(int64_t)> on_finish_;
  EntryPage page_;
  bool first_page_ = true;
  std::string resume_token_;
  size_t next_ = 0;
  int64_t sent_ = 0;
  v1::ExportedEntry message_;
};

}  // namespace

grpc::ServerWriteReactor<v1::ExportedEntry>* GrpcTransposer::ExportEntries(
    grpc::CallbackServerContext* context, const v1::ExportEntriesRequest* request) {
  if (Status auth = Authorize("ExportEntries", context); !auth.ok()) {
    Note(context, "refused");
    return new ExportCall(service_, EntryQuery(), std::move(auth), nullptr);
  }
  EntryQuery query;
  query.filter.device_class = request->device_class();
  Status status = CheckFieldLength("device_class", request->device_class());
  const std::string device_class = Quote(request->device_class());
  return new ExportCall(service_, std::move(query), std::move(status),
                        [this, context, device_class](int64_t sent) {
                          Note(context, "device_class=" + device_class +
                                            " entries=" + std::to_string(sent));
                        });
}

grpc::ServerUnaryReactor* GrpcTransposer::ImportEntries(grpc::CallbackServerContext* context,
                                                        const v1::ImportEntriesRequest* request,
                                                        v1::ImportEntriesResponse* response) {
  if (Status auth = Authorize("ImportEntries", context); !auth.ok()) {
    Note(context, "refused");
    return FinishNow(context, auth);
  }
  Status status;
  if (request->entries_size() > kMaxImportBatch) {
    status = Status::InvalidArgument("entries: at most " + std::to_string(kMaxImportBatch) +
                                     " per call, got " + std::to_string(request->entries_size()));
  } else {
    response->set_received(request->entries_size());
    std::vector<TuneResult> valid;
    for (int i = 0; i < request->entries_size(); ++i) {
      auto r = ExportedEntryFromProto(request->entries(i));
      if (r.ok()) {
        valid.push_back(std::move(r).value());
        continue;
      }
      response->set_invalid(response->invalid() + 1);
      service_->CountRefusedEntry("import");
      if (response->errors_size() < 20)
        response->add_errors("entries[" + std::to_string(i) + "]." + r.status().message());
    }
    auto counts = service_->MergeEntries(valid);
    status = counts.status();
    if (counts.ok()) {
      response->set_imported(counts->imported);
      response->set_kept_existing(counts->kept_existing);
      response->set_refused_library_version(counts->refused_library_version);
      if (counts->refused_library_version > 0 && response->errors_size() < 20) {
        response->add_errors(std::to_string(counts->refused_library_version) +
                             " entries measured with a kernel library version this daemon does "
                             "not have (it has " + service_->ListDevices()[0].library_version +
                             ")");
      }
    }
  }
  Note(context, "received=" + std::to_string(response->received()) +
                    " imported=" + std::to_string(response->imported()) +
                    " kept_existing=" + std::to_string(response->kept_existing()) +
                    " refused_library_version=" +
                    std::to_string(response->refused_library_version()) +
                    " invalid=" + std::to_string(response->invalid()));
  return FinishNow(context, status);
}

}  // namespace transposed

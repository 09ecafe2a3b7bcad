#include "server/grpc_service.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "core/text.h"
#include "core/mutex.h"
#include "proto/grpc_status.h"
#include "proto/problem_proto.h"
#include "server/convert.h"

namespace transposed {

namespace {

// How a request named its device, for the log line when there is no answer to take it from.
std::string DescribeSelector(const v1::DeviceSelector& s) {
  switch (s.selector_case()) {
    case v1::DeviceSelector::kIndex:
      return std::to_string(s.index());
    case v1::DeviceSelector::kUuid:
      return Quote(s.uuid());
    case v1::DeviceSelector::SELECTOR_NOT_SET:
      break;
  }
  return "0";
}

// The problem as the log shows it: the parsed problem, or the raw fields when it did not parse.
std::string DescribeProblem(const StatusOr<Problem>& parsed, const v1::Problem& raw) {
  if (parsed.ok()) return parsed->ToString();
  return std::to_string(raw.rows()) + "x" + std::to_string(raw.cols()) + " " + Quote(raw.dtype());
}

const Status& ClientGone() {
  static const Status* s = new Status(Status::Cancelled(
      "the client went away or its deadline passed; the tune goes on and will be cached"));
  return *s;
}

// The most bytes of entries one ListEntries answer carries (a default client accepts 4 MiB).
constexpr size_t kMaxListReplyBytes = 3 << 20;

}  // namespace

Status GrpcTransposer::Admit(const char* method, const grpc::CallbackServerContext* context,
                             CallLimiter::Slot* slot) const {
  if (limiter_ == nullptr) return Status::OK();
  StatusOr<CallLimiter::Slot> s = limiter_->Acquire(context->peer());
  if (!s.ok()) {
    spdlog::warn("rpc={} peer={} refused status={}", method, Quote(context->peer()),
                 s.status().ToString());
    return s.status();
  }
  *slot = std::move(s).value();
  return Status::OK();
}

Status GrpcTransposer::Authorize(const char* method,
                                 const grpc::CallbackServerContext* context) const {
  Status s = gate_.Authorize(method, *context);
  if (!s.ok())
    spdlog::warn("rpc={} peer={} refused status={}", method, Quote(context->peer()), s.ToString());
  return s;
}

// One GetConfig call. Owned by shared_ptrs: its own (dropped in OnDone) and the service's
// callback (dropped when answered or detached); `finished_` picks the one answer that is sent.
class GrpcTransposer::GetConfigCall : public grpc::ServerUnaryReactor {
 public:
  static grpc::ServerUnaryReactor* Start(GrpcTransposer* owner,
                                         grpc::CallbackServerContext* context,
                                         const v1::GetConfigRequest& request,
                                         v1::Answer* response) {
    std::shared_ptr<GetConfigCall> call(new GetConfigCall(owner, context, response));
    call->self_ = call;
    call->Begin(request);
    return call.get();
  }

  void OnCancel() override {
    std::shared_ptr<TransposeService::Waiter> waiter;
    {
      MutexLock l(&mu_);
      cancelled_ = true;
      waiter.swap(waiter_);
    }
    owner_->service_->Detach(waiter);
    Complete(ClientGone());
  }

  void OnDone() override {
    slot_.Release();
    owner_->inflight_.fetch_sub(1);
    self_.reset();  // may delete this
  }

 private:
  GetConfigCall(GrpcTransposer* owner, grpc::CallbackServerContext* context, v1::Answer* response)
      : owner_(owner), context_(context), response_(response) {
    owner_->inflight_.fetch_add(1);
  }

  void Begin(const v1::GetConfigRequest& request) {
    problem_ = DescribeProblem(ProblemFromProto(request.problem()), request.problem());
    device_ = DescribeSelector(request.problem().device());
    const StatusOr<ConfigRequest> req = ConfigRequestFromProto(request);
    if (!req.ok()) {
      Complete(req.status());
      return;
    }
    if (Status admitted = owner_->Admit("GetConfig", context_, &slot_); !admitted.ok()) {
      Complete(admitted);
      return;
    }
    std::shared_ptr<GetConfigCall> self = self_;
    auto waiter = owner_->service_->StartGetConfig(
        *req, [self](StatusOr<ConfigAnswer> answer) { self->Complete(answer); });
    bool detach = false;
    {
      MutexLock l(&mu_);
      if (cancelled_) {
        detach = true;
      } else {
        waiter_ = waiter;
      }
    }
    if (detach) owner_->service_->Detach(waiter);
  }

  // The first call sends the answer; later ones (a tune ending after the client left) do nothing.
  void Complete(const StatusOr<ConfigAnswer>& answer) {
    if (finished_.exchange(true)) return;
    std::string source = "-";
    if (answer.ok()) {
      *response_ = AnswerToProto(answer->result, answer->source, &answer->measured_on);
      if (answer->source == AnswerSource::kNearest ||
          answer->source == AnswerSource::kHeuristic) {
        // Chosen, not measured, for this problem: no instance measured it, it is not stored.
        response_->clear_measured_on();
        response_->clear_origin();
      }
      if (answer->nearest_problem.has_value())
        *response_->mutable_nearest_problem() = ProblemToProto(*answer->nearest_problem);
      device_ = std::to_string(answer->device_index);
      source = AnswerSourceName(answer->source);
    }
    owner_->Note(context_, "problem=" + problem_ + " device=" + device_ + " source=" + source);
    Finish(ToGrpcStatus(answer.status()));
  }

  GrpcTransposer* const owner_;
  grpc::CallbackServerContext* const context_;
  v1::Answer* const response_;  // gRPC's, valid until OnDone; written only by the finisher
  std::shared_ptr<GetConfigCall> self_;  // set in Start, dropped in OnDone
  std::string problem_;                  // for the note; written before any answer can come
  std::string device_;                   // written by Begin, then only by the finisher
  std::atomic<bool> finished_{false};
  CallLimiter::Slot slot_;  // taken by Begin, given back by OnDone
  Mutex mu_;
  bool cancelled_ GUARDED_BY(mu_) = false;
  std::shared_ptr<TransposeService::Waiter> waiter_ GUARDED_BY(mu_);
};

// One Tune call: candidate results arrive on the device worker's thread and are written one at a
// time (gRPC allows one write in flight); the answer or the error finishes the stream after them.
// Every gRPC operation is started outside mu_, decided under it (Pump).
class GrpcTransposer::TuneCall : public grpc::ServerWriteReactor<v1::TuneProgress> {
 public:
  static grpc::ServerWriteReactor<v1::TuneProgress>* Start(GrpcTransposer* owner,
                                                           grpc::CallbackServerContext* context,
                                                           const v1::TuneRequest& request) {
    std::shared_ptr<TuneCall> call(new TuneCall(owner, context));
    call->self_ = call;
    call->Begin(request);
    return call.get();
  }

  void OnWriteDone(bool ok) override {
    if (ok) {
      {
        MutexLock l(&mu_);
        writing_ = false;
        pending_.pop_front();
        ++streamed_;
      }
      Pump();
      return;
    }
    // The stream is broken: the client is gone.
    ClientLeft(/*write_done=*/true);
  }

  void OnCancel() override { ClientLeft(/*write_done=*/false); }

  void OnDone() override {
    slot_.Release();
    owner_->inflight_.fetch_sub(1);
    self_.reset();  // may delete this
  }

 private:
  TuneCall(GrpcTransposer* owner, grpc::CallbackServerContext* context)
      : owner_(owner), context_(context) {
    owner_->inflight_.fetch_add(1);
  }

  void Begin(const v1::TuneRequest& request) {
    problem_ = DescribeProblem(ProblemFromProto(request.problem()), request.problem());
    {
      MutexLock l(&mu_);
      device_ = DescribeSelector(request.problem().device());
    }
    if (Status auth = owner_->Authorize("Tune", context_); !auth.ok()) {
      End(auth, std::nullopt);
      return;
    }
    const StatusOr<ForcedTuneRequest> parsed = TuneRequestFromProto(request);
    if (!parsed.ok()) {
      End(parsed.status(), std::nullopt);
      return;
    }
    if (Status admitted = owner_->Admit("Tune", context_, &slot_); !admitted.ok()) {
      End(admitted, std::nullopt);
      return;
    }
    const ForcedTuneRequest& req = *parsed;
    // The backend name of the device the tune runs on, for the streamed variants.
    std::string backend;
    if (auto idx = owner_->service_->ResolveDevice(req.device); idx.ok())
      backend = owner_->service_->ListDevices()[*idx].backend;
    const int64_t bytes = req.problem.bytes();
    std::shared_ptr<TuneCall> self = self_;
    auto progress = [self, backend, bytes](const CandidateResult& r, int index, int total) {
      v1::TuneProgress msg;
      msg.set_index(index);
      msg.set_total(total);
      *msg.mutable_candidate() = CandidateResultToProto(r, backend, bytes);
      self->Enqueue(std::move(msg));
    };
    auto done = [self](StatusOr<ConfigAnswer> answer) {
      if (!answer.ok()) {
        self->End(answer.status(), std::nullopt);
        return;
      }
      v1::TuneProgress msg;
      *msg.mutable_answer() = AnswerToProto(answer->result, answer->source, &answer->measured_on);
      self->End(Status::OK(), std::move(msg), answer->device_index);
    };
    auto waiter = owner_->service_->StartTune(req, std::move(progress), std::move(done));
    bool detach = false;
    {
      MutexLock l(&mu_);
      if (cancelled_) {
        detach = true;
      } else {
        waiter_ = waiter;
      }
    }
    if (detach) owner_->service_->Detach(waiter);
  }

  // Drops what is not written yet (the write in flight stays until OnWriteDone), detaches from the
  // tune and ends the stream CANCELLED.
  void ClientLeft(bool write_done) {
    std::shared_ptr<TransposeService::Waiter> waiter;
    {
      MutexLock l(&mu_);
      if (write_done) writing_ = false;
      while (pending_.size() > (writing_ ? 1u : 0u)) pending_.pop_back();
      cancelled_ = true;
      final_ = ClientGone();
      waiter.swap(waiter_);
    }
    owner_->service_->Detach(waiter);
    Pump();
  }

  void Enqueue(v1::TuneProgress msg) {
    {
      MutexLock l(&mu_);
      if (final_.has_value()) return;
      last_index_ = msg.index();
      last_total_ = msg.total();
      pending_.push_back(std::move(msg));
    }
    Pump();
  }

  // The answer (the last message) or an error.
  void End(const Status& status, std::optional<v1::TuneProgress> last, int device = -1) {
    {
      MutexLock l(&mu_);
      if (final_.has_value()) return;
      if (last.has_value()) {
        last->set_index(last_index_);
        last->set_total(last_total_);
        pending_.push_back(std::move(*last));
      }
      if (device >= 0) device_ = std::to_string(device);
      final_ = status;
    }
    Pump();
  }

  // Starts the next write, or finishes once everything is written.
  void Pump() {
    const v1::TuneProgress* write = nullptr;
    std::optional<Status> finish;
    {
      MutexLock l(&mu_);
      if (writing_ || finished_) return;
      if (!pending_.empty()) {
        writing_ = true;
        write = &pending_.front();  // a deque keeps it in place while more are pushed
      } else if (final_.has_value()) {
        finished_ = true;
        finish = *final_;
        owner_->Note(context_, "problem=" + problem_ + " device=" + device_ +
                                   " source=tuned candidates=" + std::to_string(streamed_));
      }
    }
    if (write != nullptr) StartWrite(write);
    if (finish.has_value()) Finish(ToGrpcStatus(*finish));
  }

  GrpcTransposer* const owner_;
  grpc::CallbackServerContext* const context_;
  std::shared_ptr<TuneCall> self_;  // set in Start, dropped in OnDone
  std::string problem_;             // for the note, written before any answer can come
  CallLimiter::Slot slot_;          // taken by Begin, given back by OnDone
  Mutex mu_;
  std::string device_ GUARDED_BY(mu_);
  std::deque<v1::TuneProgress> pending_ GUARDED_BY(mu_);  // front: the write in flight
  bool writing_ GUARDED_BY(mu_) = false;
  bool finished_ GUARDED_BY(mu_) = false;
  bool cancelled_ GUARDED_BY(mu_) = false;
  std::optional<Status> final_ GUARDED_BY(mu_);  // how the stream ends, once known
  int streamed_ GUARDED_BY(mu_) = 0;
  int last_index_ GUARDED_BY(mu_) = 0;
  int last_total_ GUARDED_BY(mu_) = 0;
  std::shared_ptr<TransposeService::Waiter> waiter_ GUARDED_BY(mu_);
};

grpc::ServerUnaryReactor* GrpcTransposer::GetConfig(grpc::CallbackServerContext* context,
                                                    const v1::GetConfigRequest* request,
                                                    v1::Answer* response) {
  return GetConfigCall::Start(this, context, *request, response);
}

grpc::ServerWriteReactor<v1::TuneProgress>* GrpcTransposer::Tune(
    grpc::CallbackServerContext* context, const v1::TuneRequest* request) {
  return TuneCall::Start(this, context, *request);
}

grpc::ServerUnaryReactor* GrpcTransposer::ListDevices(grpc::CallbackServerContext* context,
                                                      const v1::ListDevicesRequest* /*request*/,
                                                      v1::ListDevicesResponse* response) {
  for (const auto& d : service_->ListDevices()) *response->add_devices() = DeviceToProto(d);
  Note(context, "devices=" + std::to_string(response->devices_size()));
  auto* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* GrpcTransposer::ListEntries(grpc::CallbackServerContext* context,
                                                      const v1::ListEntriesRequest* request,
                                                      v1::ListEntriesResponse* response) {
  auto query = EntryQueryFromProto(request->filter());
  Status status = query.status();
  if (status.ok()) status = CheckFieldLength("page_token", request->page_token());
  if (status.ok()) {
    const int page_size = request->page_size() != 0 ? request->page_size() : request->limit();
    auto page = service_->ListEntryPage(*query, request->include_candidates(), page_size,
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
  auto* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerUnaryReactor* GrpcTransposer::DeleteEntries(grpc::CallbackServerContext* context,
                                                        const v1::DeleteEntriesRequest* request,
                                                        v1::DeleteEntriesResponse* response) {
  if (Status auth = Authorize("DeleteEntries", context); !auth.ok()) {
    Note(context, "refused");
    auto* reactor = context->DefaultReactor();
    reactor->Finish(ToGrpcStatus(auth));
    return reactor;
  }
  auto query = EntryQueryFromProto(request->filter());
  Status status = query.status();
  if (status.ok()) {
    auto deleted = service_->DeleteEntries(*query, request->all());
    status = deleted.status();
    if (deleted.ok()) response->set_deleted(*deleted);
  }
  Note(context, "deleted=" + std::to_string(response->deleted()));
  auto* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

namespace {

// Streams a list of entries, one Write at a time; finishes with `status` after the last.
class ExportCall : public grpc::ServerWriteReactor<v1::ExportedEntry> {
 public:
  ExportCall(std::vector<TuneResult> entries, Status status)
      : entries_(std::move(entries)), status_(std::move(status)) {
    Next();
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away during the export"));
      return;
    }
    Next();
  }
  void OnDone() override { delete this; }

 private:
  void Next() {
    if (!status_.ok() || next_ >= entries_.size()) {
      Finish(ToGrpcStatus(status_));
      return;
    }
    message_ = ExportedEntryToProto(entries_[next_++]);
    StartWrite(&message_);
  }
  std::vector<TuneResult> entries_;
  Status status_;
  size_t next_ = 0;
  v1::ExportedEntry message_;
};

}  // namespace

grpc::ServerWriteReactor<v1::ExportedEntry>* GrpcTransposer::ExportEntries(
    grpc::CallbackServerContext* context, const v1::ExportEntriesRequest* request) {
  if (Status auth = Authorize("ExportEntries", context); !auth.ok()) {
    Note(context, "refused");
    return new ExportCall({}, std::move(auth));
  }
  Status status = CheckFieldLength("device_class", request->device_class());
  std::vector<TuneResult> entries;
  if (status.ok()) {
    EntryQuery query;
    query.filter.device_class = request->device_class();
    auto listed = service_->ListEntries(query, /*include_candidates=*/true, /*limit=*/0);
    status = listed.status();
    if (listed.ok()) entries = std::move(listed).value();
  }
  Note(context, "device_class=" + Quote(request->device_class()) +
                    " entries=" + std::to_string(entries.size()));
  return new ExportCall(std::move(entries), std::move(status));
}

grpc::ServerUnaryReactor* GrpcTransposer::ImportEntries(grpc::CallbackServerContext* context,
                                                        const v1::ImportEntriesRequest* request,
                                                        v1::ImportEntriesResponse* response) {
  if (Status auth = Authorize("ImportEntries", context); !auth.ok()) {
    Note(context, "refused");
    auto* reactor = context->DefaultReactor();
    reactor->Finish(ToGrpcStatus(auth));
    return reactor;
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
  auto* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace transposed

#include "server/grpc_service.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <string>

#include "core/text.h"
#include "proto/grpc_status.h"
#include "server/convert.h"

namespace transposed {

namespace {

using Clock = std::chrono::steady_clock;

double MillisSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

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

RequestContext ContextOf(grpc::ServerContext* context, const std::atomic<bool>* write_failed) {
  RequestContext ctx;
  ctx.is_cancelled = [context, write_failed] {
    return context->IsCancelled() || (write_failed != nullptr && write_failed->load());
  };
  return ctx;
}

}  // namespace

class GrpcTransposer::InflightGuard {
 public:
  explicit InflightGuard(std::atomic<int>* n) : n_(n) { n_->fetch_add(1); }
  ~InflightGuard() { n_->fetch_sub(1); }
  InflightGuard(const InflightGuard&) = delete;
  InflightGuard& operator=(const InflightGuard&) = delete;

 private:
  std::atomic<int>* n_;
};

grpc::Status GrpcTransposer::GetConfig(grpc::ServerContext* context,
                                       const v1::GetConfigRequest* request, v1::Answer* response) {
  InflightGuard guard(&inflight_);
  const auto start = Clock::now();
  StatusOr<Problem> problem = ProblemFromProto(request->problem());
  std::string device = DescribeSelector(request->problem().device());
  std::string source = "-";
  StatusOr<ConfigRequest> req = ConfigRequestFromProto(*request);
  Status status = req.status();
  if (status.ok()) {
    auto answer = service_->GetConfig(*req, ContextOf(context, nullptr));
    status = answer.status();
    if (answer.ok()) {
      *response = AnswerToProto(answer->result, answer->source);
      device = std::to_string(answer->device_index);
      source = AnswerSourceName(answer->source);
    }
  }
  spdlog::info("rpc=GetConfig problem={} device={} source={} latency_ms={:.3f} status={}",
               DescribeProblem(problem, request->problem()), device, source, MillisSince(start),
               status.ToString());
  return ToGrpcStatus(status);
}

grpc::Status GrpcTransposer::Tune(grpc::ServerContext* context, const v1::TuneRequest* request,
                                  grpc::ServerWriter<v1::TuneProgress>* writer) {
  InflightGuard guard(&inflight_);
  const auto start = Clock::now();
  StatusOr<Problem> problem = ProblemFromProto(request->problem());
  std::string device = DescribeSelector(request->problem().device());
  StatusOr<ForcedTuneRequest> parsed = TuneRequestFromProto(*request);
  Status status = parsed.status();
  int streamed = 0;
  if (status.ok()) {
    const ForcedTuneRequest& req = *parsed;
    std::atomic<bool> write_failed{false};
    int last_index = 0, last_total = 0;
    std::string backend = "";
    {
      // The backend name of the device the tune runs on, for the streamed variants.
      auto idx = service_->ResolveDevice(req.device);
      if (idx.ok()) backend = service_->ListDevices()[*idx].backend;
    }
    const int64_t bytes = problem->bytes();
    // Called on this RPC's thread (TransposeService::Tune drains the worker's results here), so
    // the writer is only ever used by one thread.
    auto progress = [&](const CandidateResult& r, int index, int total) {
      if (write_failed.load()) return;
      v1::TuneProgress msg;
      msg.set_index(index);
      msg.set_total(total);
      *msg.mutable_candidate() = CandidateResultToProto(r, backend, bytes);
      last_index = index;
      last_total = total;
      if (writer->Write(msg)) {
        ++streamed;
      } else {
        write_failed.store(true);
      }
    };
    auto answer = service_->Tune(req, progress, ContextOf(context, &write_failed));
    status = answer.status();
    if (answer.ok()) {
      device = std::to_string(answer->device_index);
      v1::TuneProgress msg;
      msg.set_index(last_index);
      msg.set_total(last_total);
      *msg.mutable_answer() = AnswerToProto(answer->result, answer->source);
      if (!writer->Write(msg))
        status = Status::Cancelled("the client went away before the answer was written");
    }
  }
  spdlog::info(
      "rpc=Tune problem={} device={} source=tuned candidates={} latency_ms={:.3f} status={}",
      DescribeProblem(problem, request->problem()), device, streamed, MillisSince(start),
      status.ToString());
  return ToGrpcStatus(status);
}

grpc::Status GrpcTransposer::ListDevices(grpc::ServerContext* /*context*/,
                                         const v1::ListDevicesRequest* /*request*/,
                                         v1::ListDevicesResponse* response) {
  InflightGuard guard(&inflight_);
  const auto start = Clock::now();
  for (const auto& d : service_->ListDevices()) *response->add_devices() = DeviceToProto(d);
  spdlog::info("rpc=ListDevices devices={} latency_ms={:.3f} status=OK", response->devices_size(),
               MillisSince(start));
  return grpc::Status::OK;
}

grpc::Status GrpcTransposer::ListEntries(grpc::ServerContext* /*context*/,
                                         const v1::ListEntriesRequest* request,
                                         v1::ListEntriesResponse* response) {
  InflightGuard guard(&inflight_);
  const auto start = Clock::now();
  auto query = EntryQueryFromProto(request->filter());
  Status status = query.status();
  if (status.ok()) {
    auto entries = service_->ListEntries(*query, request->include_candidates(), request->limit());
    status = entries.status();
    if (entries.ok()) {
      for (const auto& e : *entries) {
        v1::Entry* entry = response->add_entries();
        *entry->mutable_answer() = AnswerToProto(e, AnswerSource::kCache);
        for (const auto& c : e.candidates)
          *entry->add_candidates() = CandidateResultToProto(c, e.device.backend, e.problem.bytes());
      }
    }
  }
  spdlog::info("rpc=ListEntries entries={} latency_ms={:.3f} status={}", response->entries_size(),
               MillisSince(start), status.ToString());
  return ToGrpcStatus(status);
}

grpc::Status GrpcTransposer::DeleteEntries(grpc::ServerContext* /*context*/,
                                           const v1::DeleteEntriesRequest* request,
                                           v1::DeleteEntriesResponse* response) {
  InflightGuard guard(&inflight_);
  const auto start = Clock::now();
  auto query = EntryQueryFromProto(request->filter());
  Status status = query.status();
  if (status.ok()) {
    auto deleted = service_->DeleteEntries(*query, request->all());
    status = deleted.status();
    if (deleted.ok()) response->set_deleted(*deleted);
  }
  spdlog::info("rpc=DeleteEntries deleted={} latency_ms={:.3f} status={}", response->deleted(),
               MillisSince(start), status.ToString());
  return ToGrpcStatus(status);
}

}  // namespace transposed

#include "tuner/worker/serve.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <utility>

#include "tuner/worker/codec.h"
#include "tuner/worker/frame.h"

namespace transposed::worker {

namespace {

const char* RequestName(pb::Request::RequestCase c) {
  switch (c) {
    case pb::Request::kDescribe:
      return "describe";
    case pb::Request::kCandidates:
      return "candidates";
    case pb::Request::kOpen:
      return "open";
    case pb::Request::kClose:
      return "close";
    case pb::Request::kCheck:
      return "check";
    case pb::Request::kMeasure:
      return "measure";
    case pb::Request::kCeiling:
      return "ceiling";
    case pb::Request::kLoad:
      return "load";
    case pb::Request::REQUEST_NOT_SET:
      break;
  }
  return "unknown";
}

}  // namespace

pb::Response Dispatch(Engine* e, const Status& init_error, const pb::Request& req) {
  if (req.request_case() == pb::Request::REQUEST_NOT_SET)
    return ErrorResponse(Status::InvalidArgument("request: no request kind set"));
  if (e == nullptr) return ErrorResponse(init_error);
  pb::Response r;
  switch (req.request_case()) {
    case pb::Request::kDescribe: {
      auto d = e->Describe();
      if (!d.ok()) return ErrorResponse(d.status());
      *r.mutable_describe()->mutable_device() = DeviceToProto(*d);
      ToProto(e->Family(), r.mutable_describe()->mutable_family());
      return r;
    }
    case pb::Request::kCandidates: {
      auto p = ProblemFromProto(req.candidates().problem());
      if (!p.ok()) return ErrorResponse(p.status());
      if (Status valid = ValidateProblem(*p); !valid.ok()) return ErrorResponse(valid);
      auto* out = r.mutable_candidates();
      for (const Candidate& c : FamilyCandidates(e->Family(), *p))
        *out->add_candidates() = VariantToProto(c, "");
      return r;
    }
    case pb::Request::kOpen: {
      auto p = ProblemFromProto(req.open().problem());
      if (!p.ok()) return ErrorResponse(p.status());
      Status s = e->Open(*p);
      if (!s.ok()) return ErrorResponse(s);
      r.mutable_open();
      return r;
    }
    case pb::Request::kClose: {
      Status s = e->Close();
      if (!s.ok()) return ErrorResponse(s);
      r.mutable_close();
      return r;
    }
    case pb::Request::kCheck: {
      auto c = VariantFromProto("candidate", req.check().candidate());
      if (!c.ok()) return ErrorResponse(c.status());
      Status s = e->Check(*c);
      if (!s.ok()) return ErrorResponse(s);
      r.mutable_check();
      return r;
    }
    case pb::Request::kMeasure: {
      auto o = FromProto(req.measure().options());
      if (!o.ok()) return ErrorResponse(o.status());
      auto c = VariantFromProto("candidate", req.measure().candidate());
      if (!c.ok()) return ErrorResponse(c.status());
      auto m = e->Measure(*c, *o);
      if (!m.ok()) return ErrorResponse(m.status());
      *r.mutable_measure()->mutable_measurement() = MeasurementToProto(*m, 0);
      return r;
    }
    case pb::Request::kCeiling: {
      auto o = FromProto(req.ceiling().options());
      if (!o.ok()) return ErrorResponse(o.status());
      auto m = e->MeasureCeiling(*o);
      if (!m.ok()) return ErrorResponse(m.status());
      *r.mutable_ceiling()->mutable_measurement() = MeasurementToProto(*m, 0);
      return r;
    }
    case pb::Request::kLoad: {
      const LoadSample l = e->Load();
      auto* out = r.mutable_load();
      out->set_source(l.source);
      out->set_detail(l.detail);
      out->set_utilization_percent(l.utilization_percent);
      out->set_other_processes(l.other_processes);
      return r;
    }
    case pb::Request::REQUEST_NOT_SET:
      break;
  }
  return ErrorResponse(Status::InvalidArgument("request: unknown request kind"));
}

int Serve(Engine* engine, const Status& init_error, int in_fd, int out_fd) {
  for (;;) {
    std::string payload;
    Status s = ReadFrame(in_fd, &payload, -1);
    if (!s.ok()) {
      if (s.code() == StatusCode::kUnavailable) return kExitOk;  // the daemon closed the pipe
      std::fprintf(stderr, "worker: %s\n", s.ToString().c_str());
      return kExitProtocol;
    }
    pb::Request req;
    pb::Response response;
    if (!req.ParseFromString(payload)) {
      response = ErrorResponse(Status::InvalidArgument("request: not a worker Request message"));
    } else {
      const auto start = std::chrono::steady_clock::now();
      response = Dispatch(engine, init_error, req);
      // The request's own time, then the engine's phases inside it.
      TimeBreakdown phases;
      phases.Add(std::string("worker.") + RequestName(req.request_case()),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      if (engine != nullptr) phases.Merge(engine->TakePhases());
      ToProto(phases, &response);
    }
    const bool broken = engine != nullptr && engine->broken();
    if (broken) {
      if (!response.has_error()) {
        response = ErrorResponse(Status::Internal("the device context broke during the request"));
      }
      response.mutable_error()->set_fatal(true);
    }
    Status ws = WriteFrame(out_fd, response.SerializeAsString());
    if (broken) {
      std::fprintf(stderr, "worker: device context broken (%s); exiting\n",
                   response.error().message().c_str());
      std::fflush(stderr);
      _exit(kExitBroken);  // no teardown of a broken context
    }
    if (!ws.ok()) return kExitOk;  // the daemon went away
  }
}

int ServeStdio(StatusOr<std::unique_ptr<Engine>> engine) {
  const int out_fd = dup(1);
  if (out_fd < 0 || dup2(2, 1) < 0) {
    std::perror("worker: dup");
    return kExitUsage;
  }
  Status init_error;
  std::unique_ptr<Engine> e;
  if (engine.ok()) {
    e = std::move(engine).value();
  } else {
    init_error = engine.status();
    std::fprintf(stderr, "worker: %s\n", init_error.ToString().c_str());
  }
  return Serve(e.get(), init_error, 0, out_fd);
}

}  // namespace transposed::worker

// transposed-worker: the measuring process of one GPU (see tuner/cuda/cuda_backend.h).
//
//   transposed-worker --list                  prints the number of visible CUDA devices
//   transposed-worker --device N [--enable-test-faults]
//       serves framed JSON requests (tuner/cuda/worker_protocol.h) on stdin, answers on stdout;
//       exits 0 when stdin closes, kExitStickyError right after answering a request that broke
//       the CUDA context.
// Anything else written to stdout by libraries goes to stderr: the protocol owns the real stdout.

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "tuner/cuda/gpu_worker.h"
#include "tuner/cuda/worker_protocol.h"

namespace transposed::cuda_worker {
namespace {

using nlohmann::json;

json Dispatch(GpuWorker* w, const Status& init_error, const json& req) {
  std::string op;
  if (req.contains("op") && req["op"].is_string()) op = req["op"].get<std::string>();
  if (op.empty()) return ErrorResponse(Status::InvalidArgument("request without 'op'"));
  if (w == nullptr) return ErrorResponse(init_error);

  if (op == "describe") {
    auto d = w->Describe();
    if (!d.ok()) return ErrorResponse(d.status());
    json r = OkResponse();
    r["device"] = DeviceInfoToJson(*d);
    return r;
  }
  if (op == "open") {
    auto p = ProblemFromJson(req.value("problem", json()));
    if (!p.ok()) return ErrorResponse(p.status());
    Status s = w->Open(*p);
    return s.ok() ? OkResponse() : ErrorResponse(s);
  }
  if (op == "close") {
    Status s = w->Close();
    return s.ok() ? OkResponse() : ErrorResponse(s);
  }
  if (op == "check" || op == "measure") {
    auto c = CandidateFromJson(req.value("candidate", json()));
    if (!c.ok()) return ErrorResponse(c.status());
    if (op == "check") {
      Status s = w->Check(*c);
      return s.ok() ? OkResponse() : ErrorResponse(s);
    }
    auto o = MeasureOptionsFromJson(req.value("options", json()));
    if (!o.ok()) return ErrorResponse(o.status());
    auto m = w->Measure(*c, *o);
    if (!m.ok()) return ErrorResponse(m.status());
    json r = OkResponse();
    r["measurement"] = MeasurementToJson(*m);
    return r;
  }
  if (op == "ceiling") {
    auto o = MeasureOptionsFromJson(req.value("options", json()));
    if (!o.ok()) return ErrorResponse(o.status());
    auto m = w->MeasureCeiling(*o);
    if (!m.ok()) return ErrorResponse(m.status());
    json r = OkResponse();
    r["measurement"] = MeasurementToJson(*m);
    return r;
  }
  return ErrorResponse(Status::InvalidArgument("unknown op '" + op + "'"));
}

int Serve(int device, bool faults) {
  // The protocol gets a private copy of stdout; fd 1 then points at stderr.
  const int out_fd = dup(1);
  if (out_fd < 0 || dup2(2, 1) < 0) {
    std::perror("transposed-worker: dup");
    return kExitUsage;
  }
  std::unique_ptr<GpuWorker> worker;
  Status init_error;
  auto created = CreateGpuWorker(device, faults);
  if (created.ok()) {
    worker = std::move(created).value();
  } else {
    init_error = created.status();
    std::fprintf(stderr, "transposed-worker: device %d: %s\n", device,
                 init_error.ToString().c_str());
  }
  for (;;) {
    std::string payload;
    Status s = ReadFrame(0, &payload, -1);
    if (!s.ok()) {
      if (s.code() == StatusCode::kUnavailable) return kExitOk;  // the daemon closed the pipe
      std::fprintf(stderr, "transposed-worker: %s\n", s.ToString().c_str());
      return kExitProtocol;
    }
    json response;
    auto req = ParseJsonObject(payload);
    if (!req.ok()) {
      response = ErrorResponse(req.status());
    } else {
      response = Dispatch(worker.get(), init_error, *req);
    }
    const bool broken = worker != nullptr && worker->context_broken();
    if (broken) response["fatal"] = true;
    Status ws = WriteFrame(out_fd, response.dump());
    if (broken) {
      std::fprintf(stderr, "transposed-worker: CUDA context broken (%s); exiting\n",
                   response.value("message", std::string()).c_str());
      std::fflush(stderr);
      _exit(kExitStickyError);  // no CUDA teardown on a broken context
    }
    if (!ws.ok()) return kExitOk;  // the daemon went away
  }
}

int Main(int argc, char** argv) {
  int device = -1;
  bool list = false, faults = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--list") {
      list = true;
    } else if (a == "--enable-test-faults") {
      faults = true;
    } else if (a == "--device" && i + 1 < argc) {
      char* end = nullptr;
      long v = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || v < 0 || v > 1024) {
        std::fprintf(stderr, "transposed-worker: bad --device '%s'\n", argv[i]);
        return kExitUsage;
      }
      device = static_cast<int>(v);
    } else {
      std::fprintf(stderr, "usage: transposed-worker --list | --device N [--enable-test-faults]\n");
      return kExitUsage;
    }
  }
  if (list) {
    auto n = CudaDeviceCount();
    if (!n.ok()) std::fprintf(stderr, "transposed-worker: %s\n", n.status().ToString().c_str());
    std::printf("%d\n", n.ok() ? *n : 0);
    return kExitOk;
  }
  if (device < 0) {
    std::fprintf(stderr, "usage: transposed-worker --list | --device N [--enable-test-faults]\n");
    return kExitUsage;
  }
  return Serve(device, faults);
}

}  // namespace
}  // namespace transposed::cuda_worker

int main(int argc, char** argv) { return transposed::cuda_worker::Main(argc, argv); }

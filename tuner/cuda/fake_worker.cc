// transposed-fake-worker: a stand-in for transposed-worker in tests without a GPU.
//
// It speaks the real wire protocol (worker_protocol.h) but fakes the device: describe returns a
// made-up GPU, open/check/close succeed, measure returns timings derived from the candidate's
// name, and its "method" records this process's pid and how many opens it served, so tests can
// see restarts. It fails like the real worker does:
//   candidate kFaultCandidateName           answers {"fatal": true}, then exits kExitStickyError
//   candidate named by $FAKE_WORKER_CRASH_ON  aborts (SIGABRT) without answering
// `--list` prints $FAKE_WORKER_DEVICES (default 1). Single-threaded.

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "tuner/cuda/worker_protocol.h"

namespace transposed::cuda_worker {
namespace {

using nlohmann::json;

json Measured(const std::string& name, int opens) {
  // A deterministic, name-dependent time: the fake has no clock worth measuring.
  const double t = 1e-6 * static_cast<double>(1 + std::hash<std::string>()(name) % 1000);
  std::vector<double> samples = {t, t * 1.01, t * 0.99};
  json method = {{"timer", "fake"}, {"pid", static_cast<int>(getpid())}, {"opens", opens}};
  return MeasurementToJson(Measurement::FromSamples(samples, 1, method.dump()));
}

int Serve(int index) {
  const char* crash_env = std::getenv("FAKE_WORKER_CRASH_ON");
  const std::string crash_on = crash_env ? crash_env : "";
  int opens = 0;
  bool open = false;
  for (;;) {
    std::string payload;
    if (!ReadFrame(0, &payload, -1).ok()) return kExitOk;
    auto req = ParseJsonObject(payload);
    if (!req.ok()) return kExitProtocol;
    const std::string op = req->value("op", std::string());
    json r = OkResponse();
    if (op == "describe") {
      DeviceInfo d;
      d.backend = "cuda";
      d.index = index;
      d.uuid = "GPU-fake-" + std::to_string(index);
      d.name = "Fake GPU";
      d.memory_bytes = uint64_t{1} << 34;
      d.attributes = {{"fake", "1"}};
      d.library_version = "fake";
      r["device"] = DeviceInfoToJson(d);
    } else if (op == "open") {
      auto p = ProblemFromJson(req->value("problem", json()));
      if (!p.ok()) {
        r = ErrorResponse(p.status());
      } else {
        ++opens;
        open = true;
      }
    } else if (op == "close") {
      open = false;
    } else if (op == "check" || op == "measure" || op == "ceiling") {
      std::string name = "copy";
      if (op != "ceiling") name = req->value("candidate", json()).value("name", std::string());
      if (!open) {
        r = ErrorResponse(Status::FailedPrecondition("no problem is open in the worker"));
      } else if (name == kFaultCandidateName) {
        r = ErrorResponse(Status::Internal("running " + name +
                                           ": cudaErrorIllegalAddress (fake illegal address)"),
                          /*fatal=*/true);
        (void)WriteFrame(1, r.dump());
        _exit(kExitStickyError);
      } else if (!crash_on.empty() && name == crash_on) {
        std::abort();
      } else if (op != "check") {
        r["measurement"] = Measured(name, opens);
      }
    } else {
      r = ErrorResponse(Status::InvalidArgument("unknown op '" + op + "'"));
    }
    if (!WriteFrame(1, r.dump()).ok()) return kExitOk;
  }
}

}  // namespace
}  // namespace transposed::cuda_worker

int main(int argc, char** argv) {
  using namespace transposed::cuda_worker;
  if (argc == 2 && std::string(argv[1]) == "--list") {
    const char* n = std::getenv("FAKE_WORKER_DEVICES");
    std::printf("%s\n", n ? n : "1");
    return kExitOk;
  }
  int index = 0;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--device") index = std::atoi(argv[i + 1]);
  }
  return Serve(index);
}

// transposed-fake-worker: the test-only worker executable (never installed): FakeEngine
// (fake_engine.h) served by the real serve loop (serve.h).
//
//   transposed-fake-worker --list [--devices N]     prints N (default 1)
//   transposed-fake-worker --device I [--backend NAME] [--candidates N] [--with-fault]
//                          [--crash-on NAME] [--stderr-line TEXT] [--measure-delay SECONDS]
//                          [--load-file PATH] [--own-utilization SECONDS] [--busy-slowdown F]
//                          [--slowdown F]
// --stderr-line writes TEXT to stderr at start (tests that the daemon logs worker stderr).
// --measure-delay makes every measurement take that long (tests that lookups never wait behind
// a tune). --load-file scripts the busy signal, --own-utilization makes it count the fake's own
// measurements for that long, --busy-slowdown makes its measurements F times as long while the
// script reads busy, --slowdown makes every measurement F times as long (a slow device)
// (fake_engine.h FakeEngineOptions).

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "tuner/worker/fake_engine.h"
#include "tuner/worker/serve.h"

int main(int argc, char** argv) {
  using namespace transposed::worker;
  FakeEngineOptions o;
  bool list = false;
  int devices = 1;
  std::string stderr_line;
  auto usage = [] {
    std::fprintf(stderr,
                 "usage: transposed-fake-worker --list [--devices N] | --device I [--backend NAME]"
                 " [--candidates N] [--with-fault] [--crash-on NAME] [--stderr-line TEXT]"
                 " [--measure-delay SECONDS] [--load-file PATH] [--own-utilization SECONDS]"
                 " [--busy-slowdown F] [--slowdown F]\n");
    return kExitUsage;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--list") {
      list = true;
    } else if (a == "--with-fault") {
      o.with_fault = true;
    } else if (a == "--devices" && has_value) {
      devices = std::atoi(argv[++i]);
    } else if (a == "--device" && has_value) {
      o.index = std::atoi(argv[++i]);
    } else if (a == "--backend" && has_value) {
      o.backend = argv[++i];
    } else if (a == "--candidates" && has_value) {
      o.candidates = std::atoi(argv[++i]);
    } else if (a == "--crash-on" && has_value) {
      o.crash_on = argv[++i];
    } else if (a == "--measure-delay" && has_value) {
      o.measure_delay_s = std::atof(argv[++i]);
    } else if (a == "--own-utilization" && has_value) {
      o.own_utilization_s = std::atof(argv[++i]);
    } else if (a == "--busy-slowdown" && has_value) {
      o.busy_slowdown = std::atof(argv[++i]);
    } else if (a == "--slowdown" && has_value) {
      o.slowdown = std::atof(argv[++i]);
    } else if (a == "--load-file" && has_value) {
      o.load_file = argv[++i];
    } else if (a == "--stderr-line" && has_value) {
      stderr_line = argv[++i];
    } else {
      return usage();
    }
  }
  if (list) {
    std::printf("%d\n", devices);
    return kExitOk;
  }
  if (!stderr_line.empty()) std::fprintf(stderr, "%s\n", stderr_line.c_str());
  return ServeStdio(std::unique_ptr<Engine>(std::make_unique<FakeEngine>(o)));
}

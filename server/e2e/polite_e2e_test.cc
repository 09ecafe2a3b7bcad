// Polite tuning (server/polite.h, issue 26) through the real path: the `transposed` binary with
// its worker backend running the fake worker (transposed-fake-worker), whose busy signal the test
// scripts through --load-file (the fake's stand-in for NVML), driven over gRPC. A background
// (ANSWER_NOW) tune on a busy device waits for an idle window, or runs under the duty-cycle cap,
// or is abandoned after --background-max-wait; a tune a caller waits for runs at once, is marked
// as measured under contention, never replaces a result measured idle, and is measured again
// once the device is idle. With a shared store (a real redis-server), a busy node's miss is tuned
// by an idle node of the class, and the busy node gets the result.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "testing/daemon_process.h"
#include "testing/grpc_health.h"
#include "testing/redis_process.h"
#include "testing/requests.h"
#include "testing/test_files.h"
#include "transposed/v1/transposed.grpc.pb.h"

namespace transposed {
namespace {

namespace fs = std::filesystem;
using testing::GetConfigRequestFor;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Polls `done` every 50 ms for up to `seconds`; whether it became true.
bool WaitFor(double seconds, const std::function<bool()>& done) {
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return done();
}

class PoliteE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(temp_.ok()) << "mkdtemp failed";
    dir_ = temp_.path();
    load_ = dir_ / "load";
    SetLoad(0, 0);
  }

  // A fake device's busy signal from now on: utilization %, other compute processes.
  void SetLoad(int utilization, int others) { SetLoad(load_, utilization, others); }
  void SetLoad(const fs::path& file, int utilization, int others) {
    const fs::path tmp = file.string() + ".tmp";
    std::ofstream(tmp) << utilization << " " << others << "\n";
    fs::rename(tmp, file);
  }

  // A daemon on the fake worker (each measurement `delay_s`) whose busy signal is `load`.
  std::unique_ptr<testing::DaemonProcess> Daemon(const fs::path& load, double delay_s,
                                                 std::vector<std::string> args,
                                                 const std::string& worker_args = "") {
    const fs::path worker = load.string() + "-worker";
    std::ofstream(worker) << "#!/bin/sh\nexec '" << TRANSPOSED_FAKE_WORKER << "' --load-file '"
                          << load.string() << "' --measure-delay " << delay_s
                          << " --candidates 4 " << worker_args << " \"$@\"\n";
    fs::permissions(worker, fs::perms::owner_all);
    testing::DaemonOptions o;
    o.binary = TRANSPOSED_BINARY;
    o.backend = "cuda";
    o.tune_budget_seconds = 60;
    o.temp_root = dir_.string();
    o.extra_args = {"--worker", worker.string()};
    // Fast samples unless the test says otherwise.
    if (std::find(args.begin(), args.end(), "--load-sample-interval") == args.end())
      o.extra_args.insert(o.extra_args.end(), {"--load-sample-interval", "0.1"});
    o.extra_args.insert(o.extra_args.end(), args.begin(), args.end());
    auto d = std::make_unique<testing::DaemonProcess>(o);
    const Status started = d->Start();
    EXPECT_TRUE(started.ok()) << started.ToString();
    return d;
  }
  // Two daemons sharing `redis` (started here): a busy node (95% utilization, another process;
  // --fleet-defer fleet_defer_s) and an idle one, each with worker delay delay_s; returns once
  // both report their load state and both shared-store connections are up (on a loaded machine
  // the idle node's could still be connecting, and the busy node then waited its whole
  // --fleet-defer and tuned by itself).
  struct FleetPair {
    std::unique_ptr<testing::DaemonProcess> busy, idle;
    std::unique_ptr<v1::Transposer::Stub> busy_stub, idle_stub;
  };
  void StartFleetPair(testing::RedisProcess* redis, int fleet_defer_s, double delay_s,
                      FleetPair* f) {
    const Status up = redis->Start();
    ASSERT_TRUE(up.ok()) << up.ToString();
    const fs::path busy_load = dir_ / "busy-load", idle_load = dir_ / "idle-load";
    SetLoad(busy_load, 95, 1);
    SetLoad(idle_load, 2, 1);
    f->busy = Daemon(busy_load, delay_s,
                     {"--shared-store", redis->url(), "--fleet-defer",
                      std::to_string(fleet_defer_s)});
    f->idle = Daemon(idle_load, delay_s, {"--shared-store", redis->url()});
    ASSERT_GT(f->busy->port(), 0);
    ASSERT_GT(f->idle->port(), 0);
    f->busy_stub = Stub(*f->busy);
    f->idle_stub = Stub(*f->idle);
    ASSERT_TRUE(WaitFor(10, [&] { return Load(f->busy_stub.get()).state() == "busy"; }));
    ASSERT_TRUE(WaitFor(10, [&] { return Load(f->idle_stub.get()).state() == "idle"; }));
    for (auto* d : {f->busy.get(), f->idle.get()}) {
      ASSERT_TRUE(WaitFor(10, [&] {
        std::string bytes;
        return testing::HealthCheck(d->address(), "transposed.shared_store", &bytes).ok() &&
               bytes == testing::kServing;
      }));
    }
  }

  static std::unique_ptr<v1::Transposer::Stub> Stub(const testing::DaemonProcess& d) {
    return v1::Transposer::NewStub(
        grpc::CreateChannel(d.address(), grpc::InsecureChannelCredentials()));
  }

  // Starts the test's daemon on the fake worker (each measurement `delay_s`) with `args`.
  void Start(double delay_s, std::vector<std::string> args, const std::string& worker_args = "") {
    daemon_ = Daemon(load_, delay_s, std::move(args), worker_args);
    ASSERT_GT(daemon_->port(), 0);
    stub_ = Stub(*daemon_);
  }

  static grpc::Status Get(v1::Transposer::Stub* stub, const v1::GetConfigRequest& req,
                          v1::Answer* a) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 60s);
    return stub->GetConfig(&ctx, req, a);
  }
  grpc::Status Get(const v1::GetConfigRequest& req, v1::Answer* a) {
    return Get(stub_.get(), req, a);
  }
  // The cached answer of rows x cols, or NOT_FOUND.
  grpc::Status Cached(int64_t rows, int64_t cols, v1::Answer* a) {
    return Get(GetConfigRequestFor(rows, cols, v1::CACHE_ONLY), a);
  }
  static v1::DeviceLoad Load(v1::Transposer::Stub* stub) {
    grpc::ClientContext ctx;
    v1::ListDevicesResponse r;
    const grpc::Status s = stub->ListDevices(&ctx, v1::ListDevicesRequest(), &r);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return r.devices_size() > 0 ? r.devices(0).load() : v1::DeviceLoad();
  }
  v1::DeviceLoad Load() { return Load(stub_.get()); }
  std::string Log() { return testing::ReadFile(daemon_->log()); }

  testing::TempDir temp_{"transposed_polite_e2e"};  // removed after the daemons below stop
  fs::path dir_;
  fs::path load_;
  std::unique_ptr<testing::DaemonProcess> daemon_;
  std::unique_ptr<v1::Transposer::Stub> stub_;
};

TEST_F(PoliteE2ETest, BusySignalInListDevices) {
  Start(0, {});
  SetLoad(95, 1);
  ASSERT_TRUE(WaitFor(10, [&] { return Load().state() == "busy"; })) << Load().DebugString();
  v1::DeviceLoad l = Load();
  EXPECT_EQ(l.source(), "fake");
  EXPECT_EQ(l.utilization_percent(), 95);
  EXPECT_EQ(l.other_processes(), 1);
  EXPECT_GT(l.sampled_at_unix_ms(), 0);
  // Utilization with no other process is the daemon's own: idle.
  SetLoad(95, 0);
  ASSERT_TRUE(WaitFor(10, [&] { return Load().state() == "idle"; })) << Load().DebugString();
  // No source: unknown, with the reason.
  std::filesystem::remove(load_);
  ASSERT_TRUE(WaitFor(10, [&] { return Load().state() == "unknown"; })) << Load().DebugString();
  EXPECT_NE(Load().detail().find("no load in"), std::string::npos) << Load().DebugString();
  EXPECT_NE(Log().find("device 0 load busy (utilization 95%, 1 other process)"),
            std::string::npos);
}

// The tune's own evidence joins the signal: on the busy device the fake's measurements take 3x
// as long (a job shares it), and the copy ceiling's drop against the idle ceiling of that size
// marks the result and shows in ListDevices and the metrics.
TEST_F(PoliteE2ETest, TheCeilingsDropIsInListDevicesAndTheMetrics) {
  Start(0, {"--metrics-listen", "127.0.0.1:0", "--remeasure-contended", "false"},
        "--busy-slowdown 3");
  v1::Answer idle, busy;
  ASSERT_TRUE(Get(GetConfigRequestFor(64, 96, v1::TUNE_IF_MISSING), &idle).ok());
  EXPECT_EQ(idle.contention(), "");
  SetLoad(95, 1);
  ASSERT_TRUE(WaitFor(10, [&] { return Load().state() == "busy"; }));
  ASSERT_TRUE(Get(GetConfigRequestFor(96, 64, v1::TUNE_IF_MISSING), &busy).ok());  // the same bytes
  EXPECT_NE(busy.contention().find("67% below the device's idle"), std::string::npos)
      << busy.contention();
  const v1::DeviceLoad l = Load();
  EXPECT_NE(l.tune_contention().find("67% below the device's idle"), std::string::npos)
      << l.DebugString();
  EXPECT_NEAR(l.tune_ceiling_gbps(), busy.ceiling_gbps(), 1e-6 * busy.ceiling_gbps());
  EXPECT_NEAR(l.idle_ceiling_gbps(), idle.ceiling_gbps(), 1e-6 * idle.ceiling_gbps());

  std::smatch m;
  const std::string log = Log();
  ASSERT_TRUE(std::regex_search(log, m, std::regex(R"(metrics on \S+ \(port (\d+)\))"))) << log;
  std::string error;
  const std::string text = testing::HttpGet(std::stoi(m[1]), "/metrics", &error);
  ASSERT_FALSE(text.empty()) << error;
  double ratio = -1;
  for (const auto& [series, value] : testing::ParseMetrics(text))
    if (series.rfind("transposed_device_tune_ceiling_ratio{", 0) == 0) ratio = value;
  EXPECT_NEAR(ratio, 1.0 / 3, 1e-3) << text;
}

TEST_F(PoliteE2ETest, BackgroundTuneWaitsForAnIdleWindow) {
  Start(0, {"--background-duty-cycle", "0"});
  SetLoad(95, 1);
  ASSERT_TRUE(WaitFor(10, [&] { return Load().state() == "busy"; }));
  v1::Answer a;
  ASSERT_TRUE(Get(GetConfigRequestFor(64, 96, v1::ANSWER_NOW), &a).ok());
  EXPECT_NE(a.source(), v1::SOURCE_TUNED);
  ASSERT_TRUE(WaitFor(10, [&] { return Load().background_waiting() == 1; }))
      << Load().DebugString();
  std::this_thread::sleep_for(1s);  // still waiting: nothing measured
  EXPECT_EQ(Cached(64, 96, &a).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(Log().find("tune deferred device=0"), std::string::npos);

  SetLoad(3, 1);  // the job went idle
  ASSERT_TRUE(WaitFor(20, [&] { return Cached(64, 96, &a).ok(); }));
  EXPECT_EQ(a.contention(), "");  // measured in the idle window
  EXPECT_EQ(Load().background_waiting(), 0);
  EXPECT_EQ(Load().background_abandoned(), 0);
}

TEST_F(PoliteE2ETest, BackgroundTuneAbandonedWhenNoWindowComes) {
  Start(0, {"--background-duty-cycle", "0", "--background-max-wait", "1"});
  SetLoad(95, 1);
  ASSERT_TRUE(WaitFor(10, [&] { return Load().state() == "busy"; }));
  v1::Answer a;
  ASSERT_TRUE(Get(GetConfigRequestFor(64, 96, v1::ANSWER_NOW), &a).ok());
  ASSERT_TRUE(WaitFor(15, [&] { return Load().background_abandoned() == 1; }))
      << Load().DebugString();
  const v1::DeviceLoad l = Load();
  EXPECT_NE(l.last_abandoned().find("64x96"), std::string::npos) << l.last_abandoned();
  EXPECT_NE(l.last_abandoned().find("no idle window within 1 s"), std::string::npos)
      << l.last_abandoned();
  EXPECT_EQ(l.background_waiting(), 0);
  EXPECT_EQ(Cached(64, 96, &a).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(Log().find("tune abandoned device=0 problem=64x96"), std::string::npos);
  // The next ANSWER_NOW miss queues the tune again; now the device is idle, it runs.
  SetLoad(0, 1);
  ASSERT_TRUE(Get(GetConfigRequestFor(64, 96, v1::ANSWER_NOW), &a).ok());
  ASSERT_TRUE(WaitFor(20, [&] { return Cached(64, 96, &a).ok(); }));
}

TEST_F(PoliteE2ETest, BackgroundTuneUnderTheDutyCycleCap) {
  Start(0.02, {"--background-duty-cycle", "0.1", "--remeasure-contended", "false"});
  // Idle: a background tune at full speed.
  v1::Answer idle;
  ASSERT_TRUE(Get(GetConfigRequestFor(64, 96, v1::ANSWER_NOW), &idle).ok());
  ASSERT_TRUE(WaitFor(30, [&] { return Cached(64, 96, &idle).ok(); }));
  EXPECT_EQ(idle.contention(), "");
  // Busy: the same work at a tenth of the device's time.
  SetLoad(95, 1);
  ASSERT_TRUE(WaitFor(10, [&] { return Load().state() == "busy"; }));
  v1::Answer busy;
  ASSERT_TRUE(Get(GetConfigRequestFor(96, 64, v1::ANSWER_NOW), &busy).ok());
  ASSERT_TRUE(WaitFor(10, [&] { return Load().background_waiting() == 1; }));
  ASSERT_TRUE(WaitFor(90, [&] { return Cached(96, 64, &busy).ok(); }));
  EXPECT_NE(busy.contention().find("device busy: utilization 95%, 1 other process"),
            std::string::npos) << busy.contention();
  EXPECT_NE(busy.contention().find("throttled to 10% of the device"), std::string::npos)
      << busy.contention();
  // The calls took at most a tenth of the wall time: at least ~10x the idle tune (5x: margin).
  EXPECT_GT(busy.tune_seconds(), 5 * idle.tune_seconds())
      << "busy " << busy.tune_seconds() << " s, idle " << idle.tune_seconds() << " s";
  EXPECT_NE(Log().find("tune throttled device=0 problem=96x64"), std::string::npos);
}

TEST_F(PoliteE2ETest, AWaitedForTuneRunsIsMarkedAndMeasuredAgainWhenIdle) {
  Start(0, {});
  SetLoad(95, 1);
  ASSERT_TRUE(WaitFor(10, [&] { return Load().state() == "busy"; }));
  v1::Answer a;
  const grpc::Status s = Get(GetConfigRequestFor(64, 96, v1::TUNE_IF_MISSING), &a);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(a.source(), v1::SOURCE_TUNED);
  EXPECT_NE(a.contention().find("device busy: utilization 95%, 1 other process"),
            std::string::npos) << a.contention();
  ASSERT_TRUE(Cached(64, 96, &a).ok());
  EXPECT_NE(a.contention(), "");  // stored with its mark
  std::this_thread::sleep_for(1s);  // busy: not measured again yet
  ASSERT_TRUE(Cached(64, 96, &a).ok());
  EXPECT_NE(a.contention(), "");

  SetLoad(0, 1);
  ASSERT_TRUE(WaitFor(20, [&] { return Cached(64, 96, &a).ok() && a.contention().empty(); }))
      << a.contention();
  EXPECT_NE(Log().find("re-measure queued device=0 problem=64x96"), std::string::npos);
}

// A job that runs in bursts (a duty cycle) reads idle between them: a re-measure waits for a
// whole --remeasure-idle-window without a busy sample, sampled at the window interval, and
// not for the first idle sample (which started it beside the job's next burst, marked again).
TEST_F(PoliteE2ETest, ARemeasureWaitsForASustainedIdleWindow) {
  Start(0, {"--remeasure-idle-window", "1.5"});
  SetLoad(95, 1);
  ASSERT_TRUE(WaitFor(10, [&] { return Load().state() == "busy"; }));
  v1::Answer a;
  ASSERT_TRUE(Get(GetConfigRequestFor(64, 96, v1::TUNE_IF_MISSING), &a).ok());
  ASSERT_NE(a.contention(), "");
  // 4 s of a job busy 0.5 s, idle 0.5 s: idle samples, never 1.5 s of them.
  for (int i = 0; i < 4; ++i) {
    SetLoad(0, 1);
    std::this_thread::sleep_for(500ms);
    SetLoad(95, 1);
    std::this_thread::sleep_for(500ms);
  }
  EXPECT_EQ(Log().find("re-measure queued device=0 problem=64x96"), std::string::npos) << Log();
  ASSERT_TRUE(Cached(64, 96, &a).ok());
  EXPECT_NE(a.contention(), "");

  SetLoad(0, 1);  // the job ends
  const auto idle = Clock::now();
  ASSERT_TRUE(WaitFor(20, [&] {
    return Log().find("re-measure queued device=0 problem=64x96") != std::string::npos;
  }));
  EXPECT_GE(std::chrono::duration<double>(Clock::now() - idle).count(), 1.4);
  ASSERT_TRUE(WaitFor(20, [&] { return Cached(64, 96, &a).ok() && a.contention().empty(); }))
      << a.contention();
}

TEST_F(PoliteE2ETest, AResultMeasuredIdleIsNeverReplacedByOneUnderContention) {
  Start(0, {});
  v1::Answer first;
  ASSERT_TRUE(Get(GetConfigRequestFor(64, 96, v1::TUNE_IF_MISSING), &first).ok());
  EXPECT_EQ(first.contention(), "");
  SetLoad(95, 1);
  ASSERT_TRUE(WaitFor(10, [&] { return Load().state() == "busy"; }));
  // A forced re-tune on the busy device: answered, marked, not stored over the idle result.
  v1::TuneRequest tr;
  *tr.mutable_problem() = GetConfigRequestFor(64, 96, v1::TUNE_IF_MISSING).problem();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 60s);
  auto reader = stub_->Tune(&ctx, tr);
  v1::TuneProgress p;
  v1::Answer retuned;
  while (reader->Read(&p))
    if (p.has_answer()) retuned = p.answer();
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_NE(retuned.contention(), "");
  v1::Answer stored;
  ASSERT_TRUE(Cached(64, 96, &stored).ok());
  EXPECT_EQ(stored.contention(), "");
  EXPECT_EQ(stored.tuned_at_unix_ms(), first.tuned_at_unix_ms());
  EXPECT_NE(Log().find("the stored result, measured on an idle device, is kept"),
            std::string::npos);
}

// The mark is in the database: a daemon restarted on it measures the result again once the
// device is idle (it used to remember the marks in memory only).
TEST_F(PoliteE2ETest, AResultMeasuredUnderContentionIsMeasuredAgainAfterARestart) {
  Start(0, {});
  SetLoad(95, 1);
  ASSERT_TRUE(WaitFor(10, [&] { return Load().state() == "busy"; }));
  v1::Answer a;
  ASSERT_TRUE(Get(GetConfigRequestFor(64, 96, v1::TUNE_IF_MISSING), &a).ok());
  EXPECT_NE(a.contention(), "");
  const Status stopped = daemon_->Stop();  // still busy: not measured again before the restart
  ASSERT_TRUE(stopped.ok()) << stopped.ToString();

  SetLoad(0, 1);
  const Status started = daemon_->Start();  // same directory, same database
  ASSERT_TRUE(started.ok()) << started.ToString();
  stub_ = Stub(*daemon_);
  ASSERT_TRUE(WaitFor(20, [&] { return Cached(64, 96, &a).ok() && a.contention().empty(); }))
      << a.contention() << "\n" << Log();
  EXPECT_NE(Log().find("device 0: 1 stored result measured under contention"), std::string::npos);
  EXPECT_NE(Log().find("re-measure queued device=0 problem=64x96"), std::string::npos);
}

// Once the job goes idle, the deferred tunes start one after the other as soon as the driver's
// window stops counting the daemon's own last tune, not at the idle sampling interval (2 s) or
// after the whole --load-settle each: the device is sampled at --window-sample-interval while
// tunes wait. Here the fake's own utilization lasts 0.5 s; with a settle of 2 s, waiting it out
// took 5 x 2 s for the six shapes.
TEST_F(PoliteE2ETest, DeferredTunesAreStoredPromptlyOnceTheJobGoesIdle) {
  Start(0.005, {"--background-duty-cycle", "0", "--load-sample-interval", "2", "--load-settle",
                "2"}, "--own-utilization 0.5");
  SetLoad(95, 1);
  ASSERT_TRUE(WaitFor(10, [&] { return Load().state() == "busy"; }));
  const int64_t shapes[][2] = {{64, 96}, {96, 64}, {80, 48}, {48, 80}, {32, 72}, {72, 32}};
  v1::Answer a;
  for (const auto& s : shapes)
    ASSERT_TRUE(Get(GetConfigRequestFor(s[0], s[1], v1::ANSWER_NOW), &a).ok());
  ASSERT_TRUE(WaitFor(10, [&] { return Load().background_waiting() == 1; }));

  SetLoad(3, 1);  // the job went idle
  const auto idle = Clock::now();
  for (const auto& s : shapes) {
    ASSERT_TRUE(WaitFor(30, [&] { return Cached(s[0], s[1], &a).ok(); })) << s[0] << "x" << s[1];
    EXPECT_EQ(a.contention(), "") << s[0] << "x" << s[1];
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - idle).count();
  // About 6 x (0.5 s + a tune); waiting out the settle took over 10 s.
  EXPECT_LT(seconds, 8) << Log();
  EXPECT_EQ(Load().background_abandoned(), 0);
}

// The driver's utilization counts the daemon's own kernels for a while after a tune (an H200
// read 96-98% right after one, with an idle job holding a context): taken for another job's,
// every tune after the first was deferred ~2 s and marked as measured under contention.
TEST_F(PoliteE2ETest, TheDaemonsOwnWorkIsNotTakenForAnotherJobs) {
  Start(0.01, {"--background-duty-cycle", "0"}, "--own-utilization 0.5");
  SetLoad(0, 1);  // an idle job holds a context on the device
  ASSERT_TRUE(WaitFor(10, [&] { return Load().state() == "idle"; }));
  v1::Answer a;
  const int64_t shapes[][2] = {{64, 96}, {96, 64}, {80, 48}};
  for (const auto& s : shapes)
    ASSERT_TRUE(Get(GetConfigRequestFor(s[0], s[1], v1::ANSWER_NOW), &a).ok());
  for (const auto& s : shapes) {
    ASSERT_TRUE(WaitFor(30, [&] { return Cached(s[0], s[1], &a).ok(); }));
    EXPECT_EQ(a.contention(), "") << s[0] << "x" << s[1];
  }
  EXPECT_EQ(Log().find("tune deferred"), std::string::npos) << Log();
}

TEST_F(PoliteE2ETest, ABusyNodesMissIsTunedByAnIdleNodeOfTheClass) {
  testing::RedisProcess redis;
  FleetPair f;
  ASSERT_NO_FATAL_FAILURE(StartFleetPair(&redis, /*fleet_defer_s=*/30, /*delay_s=*/0.01, &f));
  auto &busy = f.busy, &idle = f.idle;
  auto &busy_stub = f.busy_stub, &idle_stub = f.idle_stub;

  // A caller on the busy node waits; the idle node tunes; the busy node gets the class's result.
  v1::Answer a;
  const auto start = Clock::now();
  const grpc::Status s = Get(busy_stub.get(), GetConfigRequestFor(64, 96, v1::TUNE_IF_MISSING), &a);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_TRUE(s.ok()) << s.error_message();
  const std::string busy_log = testing::ReadFile(busy->log());
  const std::string idle_log = testing::ReadFile(idle->log());
  EXPECT_EQ(a.source(), v1::SOURCE_SHARED) << "busy node:\n" << busy_log << "\nidle node:\n"
                                           << idle_log;
  EXPECT_EQ(a.contention(), "");
  EXPECT_LT(seconds, 25) << "answered by the busy node's own tune after the deferral";
  EXPECT_NE(busy_log.find("asking the class's idle nodes to tune it"), std::string::npos);
  EXPECT_EQ(busy_log.find("tune start device=0 problem=64x96"), std::string::npos) << busy_log;
  EXPECT_NE(idle_log.find("tune for the class device=0 problem=64x96"), std::string::npos)
      << idle_log;
  EXPECT_NE(idle_log.find("tune done device=0 problem=64x96"), std::string::npos);
  // Stored on the busy node too.
  ASSERT_TRUE(Get(busy_stub.get(), GetConfigRequestFor(64, 96, v1::CACHE_ONLY), &a).ok());
}

// A model's first steps ask for many new problems at once (ANSWER_NOW: each miss queues a
// background tune). Every one of them is tuned by the idle node, not only the first: the idle node
// took a want only while it had nothing queued or running, so the wants that came during its
// first tune were ignored and the busy node tuned them itself once --fleet-defer ran out.
TEST_F(PoliteE2ETest, EveryMissOfABusyNodeIsTunedByTheIdleNode) {
  testing::RedisProcess redis;
  FleetPair f;
  ASSERT_NO_FATAL_FAILURE(StartFleetPair(&redis, /*fleet_defer_s=*/60, /*delay_s=*/0.05, &f));
  auto &busy = f.busy, &idle = f.idle;
  auto &busy_stub = f.busy_stub, &idle_stub = f.idle_stub;
  const int64_t shapes[][2] = {{64, 96}, {96, 64}, {80, 48}, {48, 80}, {112, 40}, {40, 112}};
  v1::Answer a;
  for (const auto& s : shapes)
    ASSERT_TRUE(Get(busy_stub.get(), GetConfigRequestFor(s[0], s[1], v1::ANSWER_NOW), &a).ok());
  // Well within --fleet-defer: the busy node's own tunes would come only after it.
  for (const auto& s : shapes) {
    EXPECT_TRUE(WaitFor(40, [&] {
      return Get(busy_stub.get(), GetConfigRequestFor(s[0], s[1], v1::CACHE_ONLY), &a).ok();
    })) << s[0] << "x" << s[1];
  }
  const std::string busy_log = testing::ReadFile(busy->log());
  const std::string idle_log = testing::ReadFile(idle->log());
  for (const auto& s : shapes) {
    const std::string problem = std::to_string(s[0]) + "x" + std::to_string(s[1]);
    EXPECT_EQ(busy_log.find("tune start device=0 problem=" + problem), std::string::npos)
        << problem << "\n" << busy_log;
    EXPECT_NE(idle_log.find("tune for the class device=0 problem=" + problem), std::string::npos)
        << problem << "\n" << idle_log;
  }
}

}  // namespace
}  // namespace transposed

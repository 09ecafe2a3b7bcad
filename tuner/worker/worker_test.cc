// Tests of the generic out-of-process backend (tuner/worker/), without a GPU: framing, the codec
// of worker.proto, the child-process handling (stderr into the log included), the serve loop
// over FakeEngine, and worker death/restart through the test-only transposed-fake-worker.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/placements.h"
#include "tuner/tuner.h"
#include "tuner/worker/codec.h"
#include "tuner/worker/fake_engine.h"
#include "tuner/worker/frame.h"
#include "tuner/worker/process.h"
#include "tuner/worker/serve.h"
#include "tuner/worker/worker_backend.h"

namespace transposed::worker {
namespace {

std::string FakeWorkerPath() {
  const char* e = std::getenv("TRANSPOSED_FAKE_WORKER");
  return e && *e ? e : TRANSPOSED_FAKE_WORKER_PATH;
}

pb::Request DescribeRequest() {
  pb::Request r;
  r.mutable_describe();
  return r;
}

TEST(FrameTest, EncodeDecodeRoundTrip) {
  for (const std::string& payload :
       {std::string(), std::string("{}"), std::string(70000, 'x'), std::string("a\0b", 3)}) {
    std::string frame = EncodeFrame(payload);
    ASSERT_EQ(frame.size(), payload.size() + 4);
    std::string out;
    size_t consumed = 0;
    ASSERT_TRUE(DecodeFrame(frame + "trailing", &out, &consumed).ok());
    EXPECT_EQ(out, payload);
    EXPECT_EQ(consumed, frame.size());
    // Every strict prefix is incomplete.
    for (size_t cut : {size_t{0}, size_t{3}, frame.size() - 1}) {
      if (cut >= frame.size()) continue;
      EXPECT_EQ(DecodeFrame(frame.substr(0, cut), &out, &consumed).code(),
                StatusCode::kUnavailable);
    }
  }
}

TEST(FrameTest, LengthIsLittleEndian) {
  std::string frame = EncodeFrame(std::string(0x0102, 'y'));
  EXPECT_EQ(static_cast<unsigned char>(frame[0]), 0x02);
  EXPECT_EQ(static_cast<unsigned char>(frame[1]), 0x01);
  EXPECT_EQ(frame[2], 0);
  EXPECT_EQ(frame[3], 0);
}

TEST(FrameTest, OversizedLengthRejected) {
  std::string frame = "\xff\xff\xff\x7f";
  std::string out;
  size_t consumed = 0;
  EXPECT_EQ(DecodeFrame(frame, &out, &consumed).code(), StatusCode::kInvalidArgument);
}

TEST(FrameTest, SocketRoundTripEofAndTimeout) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  const std::string big(1 << 20, 'z');  // larger than a socket buffer: needs partial writes
  std::thread writer([&] {
    EXPECT_TRUE(WriteFrame(sv[0], "first").ok());
    EXPECT_TRUE(WriteFrame(sv[0], big).ok());
  });
  std::string a, b;
  ASSERT_TRUE(ReadFrame(sv[1], &a, 5000).ok());
  ASSERT_TRUE(ReadFrame(sv[1], &b, 5000).ok());
  writer.join();
  EXPECT_EQ(a, "first");
  EXPECT_EQ(b, big);
  // Nothing more arrives: a timeout, then EOF once the writer closes.
  EXPECT_EQ(ReadFrame(sv[1], &a, 50).code(), StatusCode::kDeadlineExceeded);
  close(sv[0]);
  EXPECT_EQ(ReadFrame(sv[1], &a, 1000).code(), StatusCode::kUnavailable);
  // Writing to a closed peer is an error, not a SIGPIPE.
  EXPECT_FALSE(WriteFrame(sv[1], "x").ok());
  close(sv[1]);
}

// The worker carries the API's Problem through its one mapping (proto/problem_proto.h): every
// field survives the wire, the exactness included.
TEST(CodecTest, ProblemRoundTrip) {
  Problem p;
  p.rows = 4097;
  p.cols = 3001;
  p.batch = 3;
  p.dtype = DType::kBF16;
  p.ld_in = 3008;
  p.ld_out = 4100;
  pb::OpenRequest m;
  *m.mutable_problem() = ProblemToProto(p);
  pb::OpenRequest wire;
  ASSERT_TRUE(wire.ParseFromString(m.SerializeAsString()));
  auto back = ProblemFromProto(wire.problem());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, p);
  EXPECT_EQ(back->exactness, Exactness::kBit);
  p.dtype = DType::kF64;
  p.exactness = Exactness::kValue;
  *m.mutable_problem() = ProblemToProto(p);
  ASSERT_TRUE(wire.ParseFromString(m.SerializeAsString()));
  back = ProblemFromProto(wire.problem());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->exactness, Exactness::kValue);
  wire.mutable_problem()->set_dtype("f7");
  auto bad = ProblemFromProto(wire.problem());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("problem.dtype"), std::string::npos);
}

TEST(CodecTest, CandidateAndOptionsRoundTrip) {
  Candidate c{"tile64x64.rows8.vec16.swz",
              {{"tile_rows", 64}, {"vec_bytes", 16}, {"big", 1LL << 40}}};
  pb::MeasureRequest cm;
  *cm.mutable_candidate() = VariantToProto(c, "");
  pb::MeasureRequest cwire;
  ASSERT_TRUE(cwire.ParseFromString(cm.SerializeAsString()));
  StatusOr<Candidate> cb = VariantFromProto("candidate", cwire.candidate());
  ASSERT_TRUE(cb.ok()) << cb.status().ToString();
  EXPECT_EQ(cb->name, c.name);
  EXPECT_EQ(cb->params, c.params);
  cm.mutable_candidate()->clear_name();
  EXPECT_EQ(VariantFromProto("candidate", cm.candidate()).status().message(),
            "candidate.name: must not be empty");

  MeasureOptions o{3, 17, 0.0123, 999, 3, 2.5e-4};
  pb::MeasureOptions om;
  ToProto(o, &om);
  auto ob = FromProto(om);
  ASSERT_TRUE(ob.ok());
  EXPECT_EQ(ob->warmup, 3);
  EXPECT_EQ(ob->min_samples, 17);
  EXPECT_EQ(ob->min_seconds, 0.0123);
  EXPECT_EQ(ob->max_samples, 999);
  EXPECT_EQ(ob->placements, 3);  // the buffer placements cross to the worker
  EXPECT_EQ(ob->cutoff_s, 2.5e-4);  // so does the quick pass's screening cutoff
  om.set_cutoff_s(-1);
  EXPECT_NE(FromProto(om).status().message().find("options.cutoff_s"), std::string::npos);
  om.set_cutoff_s(0);
  om.clear_placements();         // unset: one
  EXPECT_EQ(FromProto(om)->placements, 1);
  om.set_placements(kMaxPlacements + 1);
  EXPECT_NE(FromProto(om).status().message().find("options.placements"), std::string::npos);
  o.max_samples = 2;  // below min_samples
  ToProto(o, &om);
  auto bad = FromProto(om);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("max_samples"), std::string::npos);
}

TEST(CodecTest, MeasurementDoublesAreExact) {
  MeasureMethod how;
  how.timer = "cuda_event";
  how.op = "memcpy_d2d";
  how.launches_per_sample = 7;
  how.buffers = 13;
  how.working_set_bytes = int64_t{1} << 40;
  how.cache_bytes = 52428800;
  how.working_set_capped = true;
  how.threads = 3;
  how.sm_clock_khz = 1980000;
  how.memory_clock_khz = 2619000;
  how.preempted_retaken = 4;
  how.preempted_kept = 5;
  how.alternatives_median_s = {{"memcpy_d2d", 1.0 / 7.0}, {"copy16_kernel", 2.0 / 7.0}};
  how.final_rounds = 3;
  how.remeasured_after_rel_spread = 0.1 + 0.2;
  Measurement m = Measurement::FromSamples({1.0 / 3.0, 2.718281828459045e-5, 1e-7}, 2, how);
  pb::MeasureResponse mm;
  *mm.mutable_measurement() = MeasurementToProto(m, 0);
  pb::MeasureResponse wire;
  ASSERT_TRUE(wire.ParseFromString(mm.SerializeAsString()));
  StatusOr<Measurement> parsed = MeasurementFromProto("measurement", wire.measurement(), false);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const Measurement& back = *parsed;
  EXPECT_EQ(back.valid, m.valid);
  EXPECT_EQ(back.median_s, m.median_s);
  EXPECT_EQ(back.min_s, m.min_s);
  EXPECT_EQ(back.max_s, m.max_s);
  EXPECT_EQ(back.samples, 3);
  EXPECT_EQ(back.warmup, 2);
  EXPECT_EQ(back.method, m.method);
  StatusOr<Measurement> bb = MeasurementFromProto(
      "measurement", MeasurementToProto(Measurement::Invalid("worker died"), 0), false);
  ASSERT_TRUE(bb.ok());
  EXPECT_FALSE(bb->valid);
  EXPECT_EQ(bb->error, "worker died");
}

// The method goes through the API's bounded mapping (proto/measure_method_proto.h): a worker
// cannot hand the daemon an unbounded string.
TEST(CodecTest, MeasurementMethodIsBounded) {
  v1::Measurement mm = MeasurementToProto(Measurement::Invalid("x"), 0);
  mm.mutable_method()->set_op(std::string(65, 'o'));
  StatusOr<Measurement> bad = MeasurementFromProto("measurement", mm, false);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("measurement.method.op"), std::string::npos)
      << bad.status().message();
}

TEST(CodecTest, DeviceInfoRoundTripKeepsFingerprint) {
  DeviceInfo d;
  d.backend = "cuda";
  d.index = 2;
  d.uuid = "GPU-01234567-89ab-cdef-0123-456789abcdef";
  d.name = "NVIDIA H100 80GB HBM3";
  d.memory_bytes = 85520809984ULL;
  d.attributes = {{"compute_capability", "9.0"}, {"l2_bytes", "52428800"}};
  d.library_version = "0.1.0+kabc";
  pb::DescribeResponse m;
  *m.mutable_device() = DeviceToProto(d);
  pb::DescribeResponse wire;
  ASSERT_TRUE(wire.ParseFromString(m.SerializeAsString()));
  StatusOr<DeviceInfo> back = DeviceFromProto("device", wire.device());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->uuid, d.uuid);
  EXPECT_EQ(back->attributes, d.attributes);
  EXPECT_EQ(back->Fingerprint(), d.Fingerprint());
  m.mutable_device()->clear_library_version();  // a worker that cannot say what it runs
  EXPECT_EQ(DeviceFromProto("device", m.device()).status().message(),
            "device.library_version: must not be empty");
}

TEST(CodecTest, Errors) {
  Status s = Status::ResourceExhausted("too big");
  pb::Response r = ErrorResponse(s, /*fatal=*/true);
  ASSERT_TRUE(r.has_error());
  EXPECT_TRUE(r.error().fatal());
  EXPECT_EQ(ErrorStatus(r.error()), s);
  pb::Error unknown;
  unknown.set_code(77);
  unknown.set_message("?");
  EXPECT_EQ(ErrorStatus(unknown).code(), StatusCode::kUnknown);
  // An error with code 0 is still an error.
  pb::Error zero;
  EXPECT_FALSE(ErrorStatus(zero).ok());
}

// --- the serve loop, in-process over a socket pair ----------------------------------------------

TEST(ServeTest, DispatchAnswersEveryRequestKindWithItsTypedResponse) {
  FakeEngine engine({});
  Problem p{64, 48, 1, DType::kF32, 0, 0};
  pb::Request req;
  EXPECT_TRUE(Dispatch(&engine, Status::OK(), req).has_error());  // no kind set
  EXPECT_TRUE(Dispatch(&engine, Status::OK(), DescribeRequest()).has_describe());
  *req.mutable_candidates()->mutable_problem() = ProblemToProto(p);
  pb::Response cands = Dispatch(&engine, Status::OK(), req);
  ASSERT_TRUE(cands.has_candidates());
  EXPECT_EQ(cands.candidates().candidates_size(), 4);
  // Check before Open: FAILED_PRECONDITION from the engine, as an error response.
  req.Clear();
  req.mutable_check()->mutable_candidate()->set_name("fake.c0");
  pb::Response early = Dispatch(&engine, Status::OK(), req);
  ASSERT_TRUE(early.has_error());
  EXPECT_EQ(ErrorStatus(early.error()).code(), StatusCode::kFailedPrecondition);
  req.Clear();
  *req.mutable_open()->mutable_problem() = ProblemToProto(p);
  EXPECT_TRUE(Dispatch(&engine, Status::OK(), req).has_open());
  req.Clear();
  req.mutable_check()->mutable_candidate()->set_name("fake.c0");
  EXPECT_TRUE(Dispatch(&engine, Status::OK(), req).has_check());
  req.Clear();
  req.mutable_measure()->mutable_candidate()->set_name("fake.c0");
  ToProto(MeasureOptions{}, req.mutable_measure()->mutable_options());
  pb::Response m = Dispatch(&engine, Status::OK(), req);
  ASSERT_TRUE(m.has_measure());
  EXPECT_TRUE(m.measure().measurement().valid());
  // Out-of-range options name the field.
  req.mutable_measure()->mutable_options()->set_min_samples(0);
  pb::Response bad = Dispatch(&engine, Status::OK(), req);
  ASSERT_TRUE(bad.has_error());
  EXPECT_NE(bad.error().message().find("min_samples"), std::string::npos);
  req.Clear();
  ToProto(MeasureOptions{}, req.mutable_ceiling()->mutable_options());
  EXPECT_TRUE(Dispatch(&engine, Status::OK(), req).has_ceiling());
  req.Clear();
  req.mutable_close();
  EXPECT_TRUE(Dispatch(&engine, Status::OK(), req).has_close());
  // Without an engine every request gets the initialisation error.
  pb::Response none = Dispatch(nullptr, Status::Unavailable("no driver"), DescribeRequest());
  ASSERT_TRUE(none.has_error());
  EXPECT_EQ(ErrorStatus(none.error()), Status::Unavailable("no driver"));
}

TEST(ServeTest, LoopServesFramesUntilTheDaemonCloses) {
  int in[2], out[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, in), 0);
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, out), 0);
  FakeEngine engine({});
  int code = -1;
  std::thread loop([&] { code = Serve(&engine, Status::OK(), in[1], out[1]); });
  ASSERT_TRUE(WriteFrame(in[0], DescribeRequest().SerializeAsString()).ok());
  std::string payload;
  ASSERT_TRUE(ReadFrame(out[0], &payload, 5000).ok());
  pb::Response r;
  ASSERT_TRUE(r.ParseFromString(payload));
  ASSERT_TRUE(r.has_describe());
  EXPECT_EQ(r.describe().device().uuid(), "GPU-fake-0");
  // Garbage is answered with an error, and the loop goes on.
  ASSERT_TRUE(WriteFrame(in[0], std::string("\xff\xff\xff", 3)).ok());
  ASSERT_TRUE(ReadFrame(out[0], &payload, 5000).ok());
  ASSERT_TRUE(r.ParseFromString(payload));
  EXPECT_TRUE(r.has_error());
  close(in[0]);
  loop.join();
  EXPECT_EQ(code, kExitOk);
  close(in[1]);
  close(out[0]);
  close(out[1]);
}

TEST(WorkerProcessTest, ReportsExitAndSignal) {
  WorkerProcess sh("/bin/sh", {"-c", "exit 7"});
  ASSERT_TRUE(sh.Start().ok());
  auto r = sh.Call(DescribeRequest(), 10);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("exit code 7"), std::string::npos) << r.status().message();
  EXPECT_FALSE(sh.running());

  WorkerProcess killed("/bin/sh", {"-c", "kill -9 $$"});
  ASSERT_TRUE(killed.Start().ok());
  r = killed.Call(DescribeRequest(), 10);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("signal 9"), std::string::npos) << r.status().message();
}

TEST(WorkerProcessTest, HungChildIsKilledAtTheTimeout) {
  WorkerProcess hang("/bin/sh", {"-c", "exec sleep 30"});
  ASSERT_TRUE(hang.Start().ok());
  auto t0 = std::chrono::steady_clock::now();
  auto r = hang.Call(DescribeRequest(), 0.3);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("timed out"), std::string::npos);
  EXPECT_NE(r.status().message().find("signal 9"), std::string::npos) << r.status().message();
  EXPECT_LT(s, 10.0);
  EXPECT_FALSE(hang.running());
}

TEST(WorkerProcessTest, RunAndCapture) {
  auto out = RunAndCapture("/bin/sh", {"-c", "echo 3"}, 10);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "3\n");
  EXPECT_FALSE(RunAndCapture("/bin/sh", {"-c", "exit 1"}, 10).ok());
  EXPECT_EQ(RunAndCapture("/bin/sh", {"-c", "exec sleep 30"}, 0.2).status().code(),
            StatusCode::kDeadlineExceeded);
  // stderr, when asked for, comes line by line (the daemon logs a worker's `--list` complaints).
  std::vector<std::string> lines;
  out = RunAndCapture("/bin/sh", {"-c", "echo out; echo err1 >&2; printf err2 >&2"}, 10,
                      [&](int, const std::string& line) { lines.push_back(line); });
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, "out\n");
  EXPECT_EQ(lines, (std::vector<std::string>{"err1", "err2"}));
}

// --- worker death and restart, through the test-only fake worker --------------------------------


class FakeWorkerTest : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> Make(std::vector<std::string> args = {}) {
    WorkerBackendOptions o;
    o.path = FakeWorkerPath();
    o.args = std::move(args);
    o.on_stderr = [this](int, const std::string& line) {
      std::lock_guard<std::mutex> lock(mu_);
      stderr_lines_.push_back(line);
    };
    auto b = MakeWorkerBackends(o);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    if (!b.ok() || b->size() != 1) return nullptr;
    return std::move((*b)[0]);
  }
  Problem P() const {
    Problem p;
    p.rows = 512;
    p.cols = 384;
    p.dtype = DType::kF32;
    return p;
  }
  std::vector<std::string> StderrLines() {
    std::lock_guard<std::mutex> lock(mu_);
    return stderr_lines_;
  }

  std::mutex mu_;
  std::vector<std::string> stderr_lines_;
};

TEST_F(FakeWorkerTest, OneBackendPerListedDevice) {
  WorkerBackendOptions o;
  o.path = FakeWorkerPath();
  o.args = {"--devices", "3", "--backend", "fakegpu"};
  auto backends = MakeWorkerBackends(o);
  ASSERT_TRUE(backends.ok()) << backends.status().ToString();
  ASSERT_EQ(backends->size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ((*backends)[i]->device().backend, "fakegpu");
    EXPECT_EQ((*backends)[i]->device().index, i);
    EXPECT_EQ((*backends)[i]->device().uuid, "GPU-fake-" + std::to_string(i));
  }
  o.args = {"--devices", "0"};
  auto none = MakeWorkerBackends(o);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST_F(FakeWorkerTest, MissingWorkerIsAnError) {
  WorkerBackendOptions o;
  o.path = "/nonexistent/transposed-worker";
  EXPECT_FALSE(MakeWorkerBackends(o).ok());
}

TEST_F(FakeWorkerTest, CandidatesComeFromTheEngine) {
  auto plain = Make();
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(plain->device().uuid, "GPU-fake-0");
  auto cands = plain->Candidates(P());
  ASSERT_EQ(cands.size(), 4u);
  EXPECT_EQ(cands[2].name, "fake.c2");
  EXPECT_EQ(cands[2].params.at("c"), 2);
  auto faulty = Make({"--with-fault"});
  ASSERT_NE(faulty, nullptr);
  auto fc = faulty->Candidates(P());
  ASSERT_EQ(fc.size(), cands.size() + 1);
  EXPECT_EQ(fc.back().name, kFakeFaultCandidate);
  // A value-exact f32 problem crosses the worker protocol: the engine offers one more candidate
  // (what the CUDA engine does with cublas.geam), which checks there and nowhere else.
  Problem value = P();
  value.exactness = Exactness::kValue;
  auto vc = plain->Candidates(value);
  ASSERT_EQ(vc.size(), cands.size() + 1);
  EXPECT_EQ(vc.back().name, kFakeValueExactCandidate);
  {
    auto session = plain->Open(value);
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    EXPECT_TRUE((*session)->Check(vc.back()).ok());
  }
  {
    auto session = plain->Open(P());
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    EXPECT_EQ((*session)->Check(vc.back()).code(), StatusCode::kFailedPrecondition);
  }
  Problem i32_value = value;
  i32_value.dtype = DType::kI32;
  EXPECT_EQ(plain->Candidates(i32_value).size(), cands.size());
  // A bad problem: no candidate is offered.
  Problem bad = P();
  bad.rows = 0;
  EXPECT_TRUE(plain->Candidates(bad).empty());
}

// The daemon side lists candidates from the family the worker described at start: the same list
// the worker computes (asked here through the protocol's candidates request), and without a
// request to the worker, so a worker busy measuring (here: stopped) never delays the listing.
TEST_F(FakeWorkerTest, CandidatesAreListedInTheDaemonWithoutAskingTheWorker) {
  auto backend = Make({"--with-fault", "--candidates", "6"});
  ASSERT_NE(backend, nullptr);
  FakeEngineOptions fo;
  fo.with_fault = true;
  fo.candidates = 6;
  FakeEngine engine(fo);
  Problem value = P();
  value.exactness = Exactness::kValue;
  Problem i64 = P();
  i64.dtype = DType::kI64;
  i64.exactness = Exactness::kValue;
  for (const Problem& p : {P(), value, i64}) {
    pb::Request req;
    *req.mutable_candidates()->mutable_problem() = ProblemToProto(p);
    const pb::Response r = Dispatch(&engine, Status::OK(), req);
    ASSERT_TRUE(r.has_candidates()) << p.ToString();
    std::vector<std::string> worker_names, daemon_names;
    for (const auto& v : r.candidates().candidates()) worker_names.push_back(v.name());
    for (const Candidate& c : backend->Candidates(p)) daemon_names.push_back(c.name);
    EXPECT_EQ(daemon_names, worker_names) << p.ToString();
  }
  const pid_t pid = WorkerPid(*backend);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(pid, SIGSTOP), 0);
  const auto start = std::chrono::steady_clock::now();
  const size_t listed = backend->Candidates(value).size();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  kill(pid, SIGCONT);
  EXPECT_EQ(listed, 6u + 1 + 1);  // c0..c5, the fault, the value-exact stand-in
  EXPECT_LT(seconds, 1.0);
  EXPECT_EQ(backend->worker_restarts(), 0);
  EXPECT_EQ(WorkerPid(*backend), pid);
}

TEST_F(FakeWorkerTest, WorkerStderrGoesToTheLog) {
  auto backend = Make({"--stderr-line", "hello from the worker"});
  ASSERT_NE(backend, nullptr);
  ASSERT_FALSE(backend->Candidates(P()).empty());
  // The line is read by the stderr thread; wait for it (generously: CI machines are loaded).
  for (int i = 0; i < 6000; ++i) {
    auto lines = StderrLines();
    if (std::find(lines.begin(), lines.end(), "hello from the worker") != lines.end()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ADD_FAILURE() << "the worker's stderr line never reached on_stderr";
}

TEST_F(FakeWorkerTest, TuneSurvivesAFatalCandidateAndTheWorkerIsRestarted) {
  auto backend = Make({"--with-fault"});
  ASSERT_NE(backend, nullptr);
  TuneOptions opt;
  auto r = RunTune(*backend, P(), opt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  bool saw_fault = false;
  for (const auto& c : r->candidates) {
    if (c.candidate.name != kFakeFaultCandidate) continue;
    saw_fault = true;
    EXPECT_FALSE(c.measurement.valid);
    EXPECT_EQ(c.phase, Phase::kCheck);
    EXPECT_NE(c.measurement.error.find("worker died"), std::string::npos) << c.measurement.error;
    EXPECT_NE(c.measurement.error.find("IllegalAddress"), std::string::npos);
    EXPECT_NE(c.measurement.error.find("exit code 3"), std::string::npos);
    EXPECT_NE(c.measurement.error.find("restarted"), std::string::npos);
  }
  EXPECT_TRUE(saw_fault);
  EXPECT_EQ(backend->worker_restarts(), 1);
  EXPECT_NE(r->best.name, kFakeFaultCandidate);
  EXPECT_TRUE(r->best_measurement.valid);
  EXPECT_EQ(r->valid, static_cast<int>(r->candidates.size()) - 1);
  // The worker's "device context broken" line reached the log.
  bool logged = false;
  for (const auto& l : StderrLines()) logged |= l.find("broken") != std::string::npos;
  EXPECT_TRUE(logged);
  auto r2 = RunTune(*backend, P(), opt);
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_EQ(r2->best.name, r->best.name);
}

TEST_F(FakeWorkerTest, TheWorkersRequestTimesReachTheTunesBreakdown) {
  auto backend = Make();
  ASSERT_NE(backend, nullptr);
  TuneOptions opt;
  auto r = RunTune(*backend, P(), opt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const TimeBreakdown& b = r->breakdown;
  // Every request the session sent came back with the worker's own time of it.
  EXPECT_EQ(b.count("worker.open"), 1);
  EXPECT_EQ(b.count("worker.check"), 4);
  EXPECT_EQ(b.count("worker.check"), b.count("tune.check"));
  EXPECT_EQ(b.count("worker.measure"), b.count("tune.quick") + b.count("tune.final"));
  EXPECT_EQ(b.count("tune.final.ceiling_warmup"), 1);
  EXPECT_EQ(b.count("worker.ceiling"),
            b.count("tune.quick.ceiling") + b.count("tune.final.ceiling_warmup") +
                b.count("tune.final.ceiling") + b.count("tune.remeasure.ceiling"));
  // The round trip (daemon side) holds the worker's part.
  EXPECT_GE(b.seconds("tune.check"), b.seconds("worker.check"));
}

TEST_F(FakeWorkerTest, CrashMidSessionIsRecordedAndTheSessionContinues) {
  auto backend = Make({"--crash-on", "fake.c1"});
  ASSERT_NE(backend, nullptr);
  auto cands = backend->Candidates(P());
  ASSERT_GE(cands.size(), 3u);
  auto session = backend->Open(P());
  ASSERT_TRUE(session.ok());
  auto m0 = (*session)->Measure(cands[0], MeasureOptions{});
  ASSERT_TRUE(m0.ok());
  const pid_t first = WorkerPid(*backend);
  Status crash = (*session)->Check(cands[1]);
  EXPECT_EQ(crash.code(), StatusCode::kAborted);
  EXPECT_NE(crash.message().find("worker died"), std::string::npos) << crash.message();
  EXPECT_NE(crash.message().find("signal 6"), std::string::npos) << crash.message();
  EXPECT_NE(crash.message().find(cands[1].name), std::string::npos);
  // The same session goes on with a new worker that has the problem open again.
  auto m2 = (*session)->Measure(cands[2], MeasureOptions{});
  ASSERT_TRUE(m2.ok()) << m2.status().ToString();
  EXPECT_NE(WorkerPid(*backend), first);
  EXPECT_EQ(m2->median_s, FakeEngine::SecondsFor(cands[2].name, P()));
  EXPECT_EQ(backend->worker_restarts(), 1);
}

TEST_F(FakeWorkerTest, KilledWorkerIsRestartedByTheNextRequestAndCounted) {
  auto backend = Make();
  ASSERT_NE(backend, nullptr);
  const pid_t first = WorkerPid(*backend);  // started by MakeWorkerBackends (describe)
  ASSERT_GT(first, 0);
  EXPECT_EQ(backend->worker_restarts(), 0);
  // Killed while idle: listing candidates needs no worker (nothing restarts); the next request
  // to it (opening a session) restarts it and succeeds.
  ASSERT_EQ(kill(first, SIGKILL), 0);
  auto cands = backend->Candidates(P());
  ASSERT_EQ(cands.size(), 4u);
  EXPECT_EQ(backend->worker_restarts(), 0);
  auto session = backend->Open(P());
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  EXPECT_EQ(backend->worker_restarts(), 1);
  const pid_t second = WorkerPid(*backend);
  EXPECT_GT(second, 0);
  EXPECT_NE(second, first);

  // Killed with a session open: the next session request either finds it dead before sending
  // (restarts it, re-opens the problem, succeeds) or sees it die (ABORTED, restarted); either
  // way the request after that runs on a new worker with the problem open again.
  ASSERT_TRUE((*session)->Measure(cands[0], MeasureOptions{}).ok());
  ASSERT_EQ(kill(second, SIGKILL), 0);
  auto m = (*session)->Measure(cands[1], MeasureOptions{});
  if (!m.ok()) {
    EXPECT_EQ(m.status().code(), StatusCode::kAborted) << m.status().ToString();
    EXPECT_NE(m.status().message().find("restarted"), std::string::npos) << m.status().message();
    m = (*session)->Measure(cands[1], MeasureOptions{});
  }
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->median_s, FakeEngine::SecondsFor(cands[1].name, P()));
  EXPECT_GT(WorkerPid(*backend), 0);
  EXPECT_NE(WorkerPid(*backend), second);
  EXPECT_EQ(backend->worker_restarts(), 2);
}

TEST_F(FakeWorkerTest, SessionsTakeTurnsOnOneWorker) {
  auto backend = Make();
  ASSERT_NE(backend, nullptr);
  Problem q = P();
  q.rows = 100;
  auto a = backend->Open(P());
  auto b = backend->Open(q);
  ASSERT_TRUE(a.ok() && b.ok());
  auto cands = backend->Candidates(P());
  // Alternating sessions re-open their own problem in the one worker each time.
  auto ma = (*a)->Measure(cands[0], MeasureOptions{});
  auto mb = (*b)->Measure(cands[0], MeasureOptions{});
  ASSERT_TRUE(ma.ok() && mb.ok());
  const pid_t pid = WorkerPid(*backend);
  EXPECT_EQ(ma->median_s, FakeEngine::SecondsFor(cands[0].name, P()));
  EXPECT_EQ(mb->median_s, FakeEngine::SecondsFor(cands[0].name, q));
  EXPECT_NE(ma->median_s, mb->median_s);
  // And back: a re-opens its problem again, on the same worker.
  auto ma2 = (*a)->Measure(cands[0], MeasureOptions{});
  ASSERT_TRUE(ma2.ok());
  EXPECT_EQ(ma2->median_s, ma->median_s);
  EXPECT_EQ(WorkerPid(*backend), pid);
  EXPECT_EQ(backend->worker_restarts(), 0);
}

}  // namespace
}  // namespace transposed::worker

// Unit tests of the CUDA backend's daemon side, runnable without a GPU: the wire protocol
// (framing, codecs), the child-process handling, MakeCudaBackends on a machine without a GPU,
// and worker death/restart through a fake worker that speaks the real protocol.
#include "tuner/cuda/worker_protocol.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "tuner/cuda/cuda_backend.h"
#include "tuner/cuda/worker_process.h"
#include "tuner/tuner.h"

namespace transposed::cuda_worker {
namespace {

using nlohmann::json;

// The executables under test: from the environment (a bundle run elsewhere), else the build's.
std::string WorkerPath() {
  const char* e = std::getenv("TRANSPOSED_WORKER");
  return e && *e ? e : TRANSPOSED_WORKER_PATH;
}
std::string FakeWorkerPath() {
  const char* e = std::getenv("TRANSPOSED_FAKE_WORKER");
  return e && *e ? e : TRANSPOSED_FAKE_WORKER_PATH;
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

TEST(CodecTest, ProblemRoundTrip) {
  Problem p;
  p.rows = 4097;
  p.cols = 3001;
  p.batch = 3;
  p.dtype = DType::kBF16;
  p.ld_in = 3008;
  p.ld_out = 4100;
  auto back = ProblemFromJson(ProblemToJson(p));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, p);

  json j = ProblemToJson(p);
  j.erase("cols");
  auto missing = ProblemFromJson(j);
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("cols"), std::string::npos);
  j = ProblemToJson(p);
  j["dtype"] = "f7";
  EXPECT_EQ(ProblemFromJson(j).status().code(), StatusCode::kInvalidArgument);
  j = ProblemToJson(p);
  j["rows"] = "many";
  EXPECT_EQ(ProblemFromJson(j).status().code(), StatusCode::kInvalidArgument);
}

TEST(CodecTest, CandidateAndOptionsRoundTrip) {
  Candidate c{"tile64x64.rows8.vec16.swz",
              {{"tile_rows", 64}, {"vec_bytes", 16}, {"big", 1LL << 40}}};
  auto cb = CandidateFromJson(CandidateToJson(c));
  ASSERT_TRUE(cb.ok());
  EXPECT_EQ(cb->name, c.name);
  EXPECT_EQ(cb->params, c.params);

  MeasureOptions o{3, 17, 0.0123, 999};
  auto ob = MeasureOptionsFromJson(MeasureOptionsToJson(o));
  ASSERT_TRUE(ob.ok());
  EXPECT_EQ(ob->warmup, 3);
  EXPECT_EQ(ob->min_samples, 17);
  EXPECT_EQ(ob->min_seconds, 0.0123);
  EXPECT_EQ(ob->max_samples, 999);
  o.max_samples = 2;  // below min_samples
  EXPECT_EQ(MeasureOptionsFromJson(MeasureOptionsToJson(o)).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(CodecTest, MeasurementDoublesAreExact) {
  Measurement m = Measurement::FromSamples({1.0 / 3.0, 2.718281828459045e-5, 1e-7}, 2,
                                           R"({"timer":"cuda_event","buffers":13})");
  auto back = MeasurementFromJson(json::parse(MeasurementToJson(m).dump()));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->valid, m.valid);
  EXPECT_EQ(back->median_s, m.median_s);  // bit-exact through text
  EXPECT_EQ(back->min_s, m.min_s);
  EXPECT_EQ(back->max_s, m.max_s);
  EXPECT_EQ(back->samples, 3);
  EXPECT_EQ(back->warmup, 2);
  EXPECT_EQ(back->method, m.method);
  Measurement bad = Measurement::Invalid("worker died");
  auto bb = MeasurementFromJson(MeasurementToJson(bad));
  ASSERT_TRUE(bb.ok());
  EXPECT_FALSE(bb->valid);
  EXPECT_EQ(bb->error, "worker died");
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
  auto back = DeviceInfoFromJson(DeviceInfoToJson(d));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->index, 2);
  EXPECT_EQ(back->uuid, d.uuid);
  EXPECT_EQ(back->attributes, d.attributes);
  EXPECT_EQ(back->Fingerprint(), d.Fingerprint());
}

TEST(CodecTest, Responses) {
  EXPECT_TRUE(ResponseStatus(OkResponse()).ok());
  Status s = Status::ResourceExhausted("too big");
  json r = ErrorResponse(s, /*fatal=*/true);
  EXPECT_TRUE(r.value("fatal", false));
  EXPECT_EQ(ResponseStatus(r), s);
  EXPECT_EQ(ResponseStatus(json{{"nothing", 1}}).code(), StatusCode::kInternal);
  // An error response with code 0 is still an error.
  EXPECT_FALSE(ResponseStatus(json{{"ok", false}, {"code", 0}}).ok());
  EXPECT_FALSE(ParseJsonObject("[1,2]").ok());
  EXPECT_FALSE(ParseJsonObject("{bad").ok());
  EXPECT_TRUE(ParseJsonObject(R"({"op":"describe"})").ok());
}

TEST(WorkerProcessTest, ReportsExitAndSignal) {
  WorkerProcess sh("/bin/sh", {"-c", "exit 7"});
  ASSERT_TRUE(sh.Start().ok());
  auto r = sh.Call(json{{"op", "describe"}}, 10);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("exit code 7"), std::string::npos) << r.status().message();
  EXPECT_FALSE(sh.running());

  WorkerProcess killed("/bin/sh", {"-c", "kill -9 $$"});
  ASSERT_TRUE(killed.Start().ok());
  r = killed.Call(json{{"op", "describe"}}, 10);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("signal 9"), std::string::npos) << r.status().message();
}

TEST(WorkerProcessTest, HungChildIsKilledAtTheTimeout) {
  WorkerProcess hang("/bin/sh", {"-c", "exec sleep 30"});
  ASSERT_TRUE(hang.Start().ok());
  auto t0 = std::chrono::steady_clock::now();
  auto r = hang.Call(json{{"op", "describe"}}, 0.3);
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
}

// The real worker: on a machine without a GPU (CI) MakeCudaBackends is an empty vector, not an
// error; on a GPU machine, one backend per device that `--list` reports.
TEST(MakeCudaBackendsTest, OneBackendPerListedDevice) {
  auto listed = RunAndCapture(WorkerPath(), {"--list"}, 60);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  const int count = std::atoi(listed->c_str());
  CudaBackendOptions o;
  o.worker_path = WorkerPath();
  auto backends = MakeCudaBackends(o);
  ASSERT_TRUE(backends.ok()) << backends.status().ToString();
  ASSERT_EQ(static_cast<int>(backends->size()), count);
  for (int i = 0; i < count; ++i) {
    EXPECT_EQ((*backends)[i]->device().backend, "cuda");
    EXPECT_EQ((*backends)[i]->device().index, i);
    EXPECT_EQ((*backends)[i]->device().uuid.rfind("GPU-", 0), 0u);
  }
}

TEST(MakeCudaBackendsTest, MissingWorkerIsAnError) {
  CudaBackendOptions o;
  o.worker_path = "/nonexistent/transposed-worker";
  EXPECT_EQ(MakeCudaBackends(o).status().code(), StatusCode::kNotFound);
}

// --- worker death and restart, through the fake worker ------------------------------------------

int PidOf(const Measurement& m) { return json::parse(m.method).value("pid", -1); }

class FakeWorkerTest : public ::testing::Test {
 protected:
  void SetUp() override { unsetenv("FAKE_WORKER_CRASH_ON"); }
  void TearDown() override { unsetenv("FAKE_WORKER_CRASH_ON"); }

  std::unique_ptr<Backend> Make(bool faults) {
    CudaBackendOptions o;
    o.worker_path = FakeWorkerPath();
    o.enable_test_faults = faults;
    auto b = MakeCudaBackends(o);
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
};

TEST_F(FakeWorkerTest, DescribesOneDeviceAndOffersTheFaultOnlyWhenEnabled) {
  auto plain = Make(false);
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(plain->device().uuid, "GPU-fake-0");
  auto cands = plain->Candidates(P());
  ASSERT_FALSE(cands.empty());
  for (const auto& c : cands) EXPECT_NE(c.name, kFaultCandidateName);

  auto faulty = Make(true);
  ASSERT_NE(faulty, nullptr);
  auto fc = faulty->Candidates(P());
  ASSERT_EQ(fc.size(), cands.size() + 1);
  EXPECT_EQ(fc.back().name, kFaultCandidateName);
}

TEST_F(FakeWorkerTest, TuneSurvivesAFatalCandidateAndTheWorkerIsRestarted) {
  auto backend = Make(true);
  ASSERT_NE(backend, nullptr);
  TuneOptions opt;
  auto r = RunTune(*backend, P(), opt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  bool saw_fault = false;
  for (const auto& c : r->candidates) {
    if (c.candidate.name != kFaultCandidateName) continue;
    saw_fault = true;
    EXPECT_FALSE(c.measurement.valid);
    EXPECT_EQ(c.phase, Phase::kCheck);
    EXPECT_NE(c.measurement.error.find("worker died"), std::string::npos) << c.measurement.error;
    EXPECT_NE(c.measurement.error.find("IllegalAddress"), std::string::npos);
    EXPECT_NE(c.measurement.error.find("exit code 3"), std::string::npos);
    EXPECT_NE(c.measurement.error.find("restarted"), std::string::npos);
  }
  EXPECT_TRUE(saw_fault);
  EXPECT_NE(r->best.name, kFaultCandidateName);
  EXPECT_TRUE(r->best_measurement.valid);
  EXPECT_EQ(r->valid, static_cast<int>(r->candidates.size()) - 1);
  // The final pass ran after the fault (the fault is the last candidate): a new worker.
  auto r2 = RunTune(*backend, P(), opt);
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_EQ(r2->best.name, r->best.name);
}

TEST_F(FakeWorkerTest, CrashMidSessionIsRecordedAndTheSessionContinues) {
  auto backend = Make(false);
  ASSERT_NE(backend, nullptr);
  auto cands = backend->Candidates(P());
  ASSERT_GE(cands.size(), 3u);
  // The worker is spawned with the environment of MakeCudaBackends' caller at (re)start time.
  setenv("FAKE_WORKER_CRASH_ON", cands[1].name.c_str(), 1);
  auto restarted = Make(false);  // a worker that crashes on cands[1]
  ASSERT_NE(restarted, nullptr);
  auto session = restarted->Open(P());
  ASSERT_TRUE(session.ok());
  auto m0 = (*session)->Measure(cands[0], MeasureOptions{});
  ASSERT_TRUE(m0.ok());
  Status crash = (*session)->Check(cands[1]);
  EXPECT_EQ(crash.code(), StatusCode::kAborted);
  EXPECT_NE(crash.message().find("worker died"), std::string::npos) << crash.message();
  EXPECT_NE(crash.message().find("signal 6"), std::string::npos) << crash.message();
  EXPECT_NE(crash.message().find(cands[1].name), std::string::npos);
  // The same session goes on with a new worker that has the problem open again.
  auto m2 = (*session)->Measure(cands[2], MeasureOptions{});
  ASSERT_TRUE(m2.ok()) << m2.status().ToString();
  EXPECT_NE(PidOf(*m0), PidOf(*m2));
  EXPECT_EQ(json::parse(m2->method).value("opens", 0), 1);
}

TEST_F(FakeWorkerTest, SessionsTakeTurnsOnOneWorker) {
  auto backend = Make(false);
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
  EXPECT_EQ(json::parse(ma->method).value("opens", 0), 3);  // a, b, a again
  EXPECT_EQ(json::parse(mb->method).value("opens", 0), 4);
  EXPECT_EQ(PidOf(*ma), PidOf(*mb));
}

}  // namespace
}  // namespace transposed::cuda_worker

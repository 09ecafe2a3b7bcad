// GPU tests of the CUDA backend (label gpu): every candidate checks bit-exact, measurements are
// sane against the copy ceiling, and a deliberately faulting candidate is survived.
// The worker is found through $TRANSPOSED_WORKER, else next to this binary; the fault test runs
// the test-only transposed-worker-faults ($TRANSPOSED_WORKER_FAULTS, else next to this binary).
#include "tuner/cuda/cuda_backend.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "testing/problems.h"
#include "tuner/cuda/worker_constants.h"
#include "tuner/tuner.h"

namespace transposed {
namespace {



class CudaBackendTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    CudaBackendOptions o;
    auto b = MakeCudaBackends(o);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    ASSERT_FALSE(b->empty()) << "no GPU visible";
    backends_ = new std::vector<std::unique_ptr<Backend>>(std::move(*b));
  }
  static void TearDownTestSuite() {
    delete backends_;
    backends_ = nullptr;
  }
  Backend& gpu() { return *(*backends_)[0]; }
  static std::vector<std::unique_ptr<Backend>>* backends_;
};
std::vector<std::unique_ptr<Backend>>* CudaBackendTest::backends_ = nullptr;

TEST_F(CudaBackendTest, DescribesTheDevice) {
  const DeviceInfo& d = gpu().device();
  EXPECT_EQ(d.backend, "cuda");
  EXPECT_EQ(d.uuid.rfind("GPU-", 0), 0u) << d.uuid;
  EXPECT_EQ(d.uuid.size(), 40u) << d.uuid;
  EXPECT_FALSE(d.name.empty());
  EXPECT_GT(d.memory_bytes, 1ULL << 30);
  for (const char* k : {"compute_capability", "sm_count", "l2_bytes", "driver_version",
                        "runtime_version", "memory_bus_width", "shared_mem_per_block_optin"}) {
    ASSERT_TRUE(d.attributes.count(k)) << k;
  }
  EXPECT_GT(std::stoll(d.attributes.at("l2_bytes")), 0);
  EXPECT_GT(std::stoll(d.attributes.at("sm_count")), 0);
  EXPECT_FALSE(d.library_version.empty());
  std::printf("device: %s %s cc %s, %s SMs, L2 %s B\n", d.name.c_str(), d.uuid.c_str(),
              d.attributes.at("compute_capability").c_str(), d.attributes.at("sm_count").c_str(),
              d.attributes.at("l2_bytes").c_str());
}

TEST_F(CudaBackendTest, EveryCandidateChecksBitExact) {
  const Problem problems[] = {
      MakeTestProblem(1000, 777, DType::kF32),
      MakeTestProblem(4097, 3001, DType::kF16, 1, 3008, 4100),  // gaps on both sides
      MakeTestProblem(65536, 8, DType::kI8),                    // skinny, tall
      MakeTestProblem(8, 65536, DType::kF32),                   // skinny, wide
      MakeTestProblem(130, 257, DType::kF64, 3),                // batched, odd
      MakeTestProblem(64, 96, DType::kC128),                    // 16-byte elements
  };
  for (const Problem& p : problems) {
    auto cands = gpu().Candidates(p);
    ASSERT_FALSE(cands.empty()) << p.ToString();
    auto session = gpu().Open(p);
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    int checked = 0;
    for (const Candidate& c : cands) {
      Status s = (*session)->Check(c);
      EXPECT_TRUE(s.ok()) << p.ToString() << " " << c.name << ": " << s.ToString();
      ++checked;
    }
    std::printf("%s: %d candidates checked\n", p.ToString().c_str(), checked);
  }
}

TEST_F(CudaBackendTest, UnknownOrUnfitCandidateIsRejected) {
  auto session = gpu().Open(MakeTestProblem(256, 256, DType::kF32));
  ASSERT_TRUE(session.ok());
  EXPECT_FALSE((*session)->Check(Candidate{"no.such.kernel", {}}).ok());
  // The fault candidate exists only when enabled: refused, not run.
  Status s = (*session)->Check(Candidate{cuda_worker::kFaultCandidateName, {}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  // The session still works.
  auto cands = gpu().Candidates(MakeTestProblem(256, 256, DType::kF32));
  EXPECT_TRUE((*session)->Check(cands.front()).ok());
}

TEST_F(CudaBackendTest, MeasurementsAreSaneAndRotateBeyondL2) {
  const int64_t l2 = std::stoll(gpu().device().attributes.at("l2_bytes"));
  for (const Problem& p : {MakeTestProblem(1024, 1024, DType::kF32), MakeTestProblem(8192, 8192, DType::kF32)}) {
    auto session = gpu().Open(p);
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    MeasureOptions opt{2, 10, 0.005, 1000};
    auto ceiling = (*session)->MeasureCeiling(opt);
    ASSERT_TRUE(ceiling.ok()) << ceiling.status().ToString();
    ASSERT_TRUE(ceiling->valid);
    EXPECT_GT(ceiling->median_s, 0);
    EXPECT_GE(ceiling->samples, 10);
    const MeasureMethod& cm = ceiling->method;
    EXPECT_EQ(cm.timer, "cuda_event");
    EXPECT_TRUE(cm.op == "memcpy_d2d" || cm.op == "copy16_kernel") << cm.op;
    EXPECT_EQ(cm.alternatives_median_s.size(), 2u);
    EXPECT_EQ(cm.alternatives_median_s.at(cm.op), ceiling->median_s);
    double best = 0;
    std::string best_name;
    for (const Candidate& c : gpu().Candidates(p)) {
      ASSERT_TRUE((*session)->Check(c).ok()) << c.name;
      auto m = (*session)->Measure(c, opt);
      ASSERT_TRUE(m.ok()) << c.name << ": " << m.status().ToString();
      ASSERT_TRUE(m->valid);
      EXPECT_GT(m->median_s, 0);
      EXPECT_LE(m->min_s, m->median_s);
      EXPECT_GE(m->max_s, m->median_s);
      EXPECT_GE(m->samples, opt.min_samples);
      const MeasureMethod& mm = m->method;
      EXPECT_EQ(mm.timer, "cuda_event");
      EXPECT_EQ(mm.op, "transpose");
      EXPECT_GE(mm.buffers, 1);
      EXPECT_GT(mm.cache_bytes, 0);
      const int64_t ws = mm.working_set_bytes;
      // Enough buffers to exceed 2x L2, unless one pair alone already does.
      EXPECT_TRUE(ws > 2 * l2 || mm.buffers == 1) << ws << " bytes in " << mm.buffers;
      EXPECT_GT(ws, l2) << ws;
      const double g = EffectiveGBps(p.bytes(), m->median_s);
      if (g > best) {
        best = g;
        best_name = c.name;
      }
    }
    const double ceil_g = EffectiveGBps(p.bytes(), ceiling->median_s);
    std::printf("%s: best %s %.1f GB/s, ceiling %.1f GB/s (%s), ratio %.3f\n", p.ToString().c_str(),
                best_name.c_str(), best, ceil_g, cm.op.c_str(),
                best / ceil_g);
    EXPECT_GT(best, 0);
    EXPECT_LT(best / ceil_g, 1.2);
    EXPECT_GT(best / ceil_g, 0.3);  // the family's best is a real transpose kernel
  }
}

// Buffer placements (core/placements.h) through the real worker: a problem whose pair exceeds 4
// L2 sizes, asked for 3, is measured over 3 buffer sets (transpose and ceiling), each set with its
// share of the samples; asked for one, or small, over its one.
TEST_F(CudaBackendTest, BigProblemsAreMeasuredOverThreePlacements) {
  const int64_t l2 = std::stoll(gpu().device().attributes.at("l2_bytes"));
  const Problem big = MakeTestProblem(8192, 8192, DType::kF32);  // a 512 MiB pair
  ASSERT_GT(big.in_alloc_bytes() + big.out_alloc_bytes(), 4 * l2);
  auto session = gpu().Open(big);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  const Candidate c = gpu().Candidates(big).front();
  ASSERT_TRUE((*session)->Check(c).ok()) << c.name;
  MeasureOptions three{2, 9, 0.005, 1000, 3};
  auto m = (*session)->Measure(c, three);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_TRUE(m->valid);
  EXPECT_EQ(m->method.placements, 3);
  EXPECT_GE(m->samples, three.min_samples);  // 3 sets x ceil(9 / 3)
  EXPECT_EQ(m->warmup, 3);                   // one per set
  EXPECT_LE(m->min_s, m->median_s);
  EXPECT_GE(m->max_s, m->median_s);
  auto ceiling = (*session)->MeasureCeiling(three);
  ASSERT_TRUE(ceiling.ok()) << ceiling.status().ToString();
  EXPECT_EQ(ceiling->method.placements, 3);
  // The sets stay allocated: a check after them still passes on the first set.
  EXPECT_TRUE((*session)->Check(c).ok()) << c.name;
  MeasureOptions one = three;
  one.placements = 1;
  m = (*session)->Measure(c, one);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->method.placements, 1);
  const double g3 = EffectiveGBps(big.bytes(), ceiling->median_s);
  std::printf("%s: %s over 3 placements, ceiling %.1f GB/s\n", big.ToString().c_str(),
              c.name.c_str(), g3);

  const Problem small = MakeTestProblem(1024, 1024, DType::kF32);
  session = gpu().Open(small);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  const Candidate s = gpu().Candidates(small).front();
  ASSERT_TRUE((*session)->Check(s).ok()) << s.name;
  m = (*session)->Measure(s, three);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->method.placements, 1);
}

TEST_F(CudaBackendTest, TooLargeProblemIsResourceExhausted) {
  const uint64_t mem = gpu().device().memory_bytes;
  Problem p = MakeTestProblem(static_cast<int64_t>(mem / 4 / 65536) + 1024, 65536, DType::kF32);
  auto s = gpu().Open(p);
  EXPECT_EQ(s.status().code(), StatusCode::kResourceExhausted) << s.status().ToString();
}

// The test-only worker whose engine offers the faulting candidate: $TRANSPOSED_WORKER_FAULTS,
// else transposed-worker-faults next to this binary.
std::string FaultsWorkerPath() {
  if (const char* e = std::getenv("TRANSPOSED_WORKER_FAULTS"); e && *e) return e;
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  std::string dir = n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string();
  dir = dir.substr(0, dir.rfind('/') + 1);
  return dir + "transposed-worker-faults";
}

// A fresh backend per test on the test-only worker (so its restart count starts at 0).
class CudaBackendFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CudaBackendOptions o;
    o.worker_path = FaultsWorkerPath();
    auto b = MakeCudaBackends(o);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    ASSERT_FALSE(b->empty()) << "no GPU visible";
    backends_ = std::move(*b);
  }
  Backend& faults_gpu() { return *backends_[0]; }
  std::vector<std::unique_ptr<Backend>> backends_;
};

TEST_F(CudaBackendFaultTest, FaultingCandidateIsSurvived) {
  Backend& gpu = faults_gpu();
  const Problem p = MakeTestProblem(2048, 2048, DType::kF32);
  auto cands = gpu.Candidates(p);
  ASSERT_EQ(cands.back().name, cuda_worker::kFaultCandidateName);

  TuneOptions opt;
  auto r = RunTune(gpu, p, opt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  bool saw = false;
  for (const auto& c : r->candidates) {
    if (c.candidate.name != cuda_worker::kFaultCandidateName) {
      EXPECT_TRUE(c.measurement.valid) << c.candidate.name << ": " << c.measurement.error;
      continue;
    }
    saw = true;
    EXPECT_FALSE(c.measurement.valid);
    EXPECT_NE(c.measurement.error.find("worker died"), std::string::npos) << c.measurement.error;
    EXPECT_NE(c.measurement.error.find("IllegalAddress"), std::string::npos) << c.measurement.error;
    EXPECT_NE(c.measurement.error.find("restarted"), std::string::npos) << c.measurement.error;
    std::printf("fault recorded: %s\n", c.measurement.error.c_str());
  }
  EXPECT_TRUE(saw);
  EXPECT_EQ(gpu.worker_restarts(), 1);  // what transposed_worker_restarts_total reports
  EXPECT_NE(r->best.name, cuda_worker::kFaultCandidateName);
  EXPECT_TRUE(r->best_measurement.valid);
  std::printf("tune with fault: %.3f s, best %s %.1f GB/s\n", r->tune_seconds, r->best.name.c_str(),
              r->gbps());

  // A second tune on the restarted worker works, and so does a new problem.
  auto r2 = RunTune(gpu, p, opt);
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_NE(r2->best.name, cuda_worker::kFaultCandidateName);
  auto r3 = RunTune(gpu, MakeTestProblem(1000, 3000, DType::kF16), opt);
  ASSERT_TRUE(r3.ok()) << r3.status().ToString();
  EXPECT_GT(r3->gbps(), 0);
}

// The check reuses one reference output per open problem and poisons the output before each
// candidate: a wrong byte and a write into a gap between output rows are still caught, and a
// correct candidate checked after them, or after measurements and the ceiling wrote the output,
// still passes.
TEST_F(CudaBackendFaultTest, ChecksCatchWrongBytesAndGapWritesOnAReusedReference) {
  Backend& gpu = faults_gpu();
  for (const Problem& p : {MakeTestProblem(1000, 700, DType::kF32, 1, 0, 1004), MakeTestProblem(2048, 1024, DType::kU8),
                           MakeTestProblem(333, 257, DType::kF16, 3, 260, 340)}) {
    SCOPED_TRACE(p.ToString());
    auto cands = gpu.Candidates(p);
    ASSERT_GE(cands.size(), 2u);
    const Candidate good = cands.front();
    auto session = gpu.Open(p);
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    Session& s = **session;
    int checks = 0, failed = 0;
    auto check = [&](const Candidate& c) {
      ++checks;
      Status st = s.Check(c);
      if (!st.ok()) ++failed;
      return st;
    };
    EXPECT_TRUE(check(good).ok());
    const Candidate wrong{cuda_worker::kWrongOutputCandidateName, {}};
    const Candidate gap{cuda_worker::kGapWriteCandidateName, {}};
    Status w = check(wrong);
    EXPECT_EQ(w.code(), StatusCode::kFailedPrecondition) << w.ToString();
    EXPECT_NE(w.message().find("mismatching"), std::string::npos) << w.ToString();
    EXPECT_TRUE(check(good).ok());
    Status g = check(gap);
    EXPECT_EQ(g.code(), StatusCode::kFailedPrecondition) << g.ToString();
    if (p.out_ld() > p.rows)
      EXPECT_NE(g.message().find("outside the matrix"), std::string::npos) << g.ToString();
    EXPECT_TRUE(check(good).ok());
    // Timed launches and the copy ceiling write pair 0's output (gaps included): the next check
    // starts from its own poison.
    ASSERT_TRUE(s.Measure(cands[1], MeasureOptions{1, 3, 0, 10}).ok());
    ASSERT_TRUE(s.MeasureCeiling(MeasureOptions{1, 3, 0, 10}).ok());
    EXPECT_TRUE(check(cands[1]).ok());
    EXPECT_EQ(check(wrong).code(), StatusCode::kFailedPrecondition);
    EXPECT_TRUE(check(good).ok());
    ASSERT_EQ(failed, 3);
    // Every failure here follows a passing check, so it failed on the reused reference and was
    // run once more on fresh input (GpuMeasurer::Check): one more poison and compare each.
    const TimeBreakdown phases = s.TakePhases();
    const int references = phases.count("worker.check.reference");
    const int compares = phases.count("worker.check.compare");
    EXPECT_EQ(phases.count("worker.check.poison"), compares);
    EXPECT_EQ(compares, checks + failed);
    // The reference is computed for the first check, for each retry, and for the check after a
    // failure (which leaves none); every other check reuses it - here the one after the
    // measurements and the ceiling - so there are fewer references than comparisons.
    EXPECT_EQ(references, 1 + 2 * failed);
    EXPECT_LT(references, compares);
    std::printf("%s: %d checks, %d comparisons, %d references\n", p.ToString().c_str(), checks,
                compares, references);
  }
}

}  // namespace
}  // namespace transposed

#include "tuner/cpu_backend.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/version.h"

namespace transposed {
namespace {

using Byte = unsigned char;

DType DTypeOfSize(int size) {
  switch (size) {
    case 1:
      return DType::kU8;
    case 2:
      return DType::kF16;
    case 4:
      return DType::kF32;
    case 8:
      return DType::kF64;
    default:
      return DType::kC128;
  }
}

Problem Make(int64_t rows, int64_t cols, int esize, int64_t batch = 1, int64_t ld_in = 0,
             int64_t ld_out = 0) {
  Problem p;
  p.rows = rows;
  p.cols = cols;
  p.batch = batch;
  p.dtype = DTypeOfSize(esize);
  p.ld_in = ld_in;
  p.ld_out = ld_out;
  return p;
}

// The shapes every candidate must get right: degenerate, odd, batched, strided, and one large
// enough (>= kCpuMinParallelBytes even at 1 byte per element) for the multi-threaded candidates.
std::vector<Problem> Shapes(int esize) {
  return {Make(1, 1, esize),
          Make(1, 300, esize),
          Make(300, 1, esize),
          Make(31, 33, esize),
          Make(257, 129, esize),
          Make(17, 23, esize, 3),
          Make(19, 21, esize, 1, 29, 24),
          Make(9, 40, esize, 4, 41, 13),
          Make(520, 515, esize)};
}

std::vector<Byte> RandomBytes(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<Byte> v(static_cast<size_t>(n));
  for (Byte& b : v) b = static_cast<Byte>(gen());
  return v;
}

TEST(CpuReferenceTest, MatchesTheLayoutFormula) {
  for (int es : {1, 2, 4, 8, 16}) {
    for (const Problem& p : {Make(5, 7, es, 3, 9, 6), Make(1, 4, es), Make(31, 33, es)}) {
      const std::vector<Byte> in = RandomBytes(p.in_alloc_bytes(), 7);
      std::vector<Byte> out = RandomBytes(p.out_alloc_bytes(), 8);
      const std::vector<Byte> before = out;
      cpu_internal::ReferenceTranspose(p, in.data(), out.data());
      std::vector<Byte> expected = before;
      for (int64_t b = 0; b < p.batch; ++b)
        for (int64_t i = 0; i < p.rows; ++i)
          for (int64_t j = 0; j < p.cols; ++j)
            std::memcpy(&expected[((b * p.cols + j) * p.out_ld() + i) * es],
                        &in[((b * p.rows + i) * p.in_ld() + j) * es], es);
      EXPECT_EQ(out, expected) << p.ToString();
    }
  }
}

TEST(CpuBackendTest, EveryCandidateIsCorrectOnEveryShapeAndElementSize) {
  CpuBackendOptions o;
  o.max_threads = 4;  // multi-threaded candidates even on a small machine
  CpuBackend backend(o);
  for (int es : {1, 2, 4, 8, 16}) {
    int multi_threaded = 0;
    for (const Problem& p : Shapes(es)) {
      StatusOr<std::unique_ptr<Session>> s = backend.Open(p);
      ASSERT_TRUE(s.ok()) << p.ToString() << ": " << s.status().ToString();
      for (const Candidate& c : backend.Candidates(p)) {
        Status st = (*s)->Check(c);
        EXPECT_TRUE(st.ok()) << c.name << " on " << p.ToString() << ": " << st.ToString();
        if (c.params.at("threads") > 1) ++multi_threaded;
      }
    }
    EXPECT_GE(multi_threaded, 10) << "element size " << es;  // 5 tiles x threads {2, 4}
  }
}

TEST(CpuBackendTest, MultiThreadedCandidatesOnlyForLargeProblems) {
  CpuBackendOptions o;
  o.max_threads = 8;
  CpuBackend backend(o);
  auto names = [&](const Problem& p) {
    std::set<std::string> n;
    for (const Candidate& c : backend.Candidates(p)) n.insert(c.name);
    return n;
  };
  const std::set<std::string> small = names(Make(64, 64, 4));
  EXPECT_EQ(small.size(), 2u + 5u);
  EXPECT_TRUE(small.count("cpu.naive"));
  EXPECT_TRUE(small.count("cpu.naive.colwrite"));
  EXPECT_TRUE(small.count("cpu.tile32.t1"));
  const std::set<std::string> large = names(Make(1024, 1024, 4));
  EXPECT_EQ(large.size(), 2u + 5u * 4u);  // threads 1, 2, 4, 8
  for (const char* n : {"cpu.tile8.t2", "cpu.tile64.t4", "cpu.tile128.t8"})
    EXPECT_TRUE(large.count(n)) << n;
  // Deterministic order.
  std::vector<std::string> a, b;
  for (const Candidate& c : backend.Candidates(Make(1024, 1024, 4))) a.push_back(c.name);
  for (const Candidate& c : backend.Candidates(Make(1024, 1024, 4))) b.push_back(c.name);
  EXPECT_EQ(a, b);

  CpuBackendOptions one;
  one.max_threads = 1;
  CpuBackend single(one);
  for (const Candidate& c : single.Candidates(Make(1024, 1024, 4)))
    EXPECT_EQ(c.params.at("threads"), 1) << c.name;
}

TEST(CpuConfigTest, NamesAndParamsRoundTrip) {
  CpuBackendOptions o;
  o.max_threads = 4;
  o.enable_test_faults = true;
  CpuBackend backend(o);
  for (const Candidate& c : backend.Candidates(Make(600, 600, 4, 1, 0, 601))) {
    StatusOr<CpuConfig> config = CpuConfig::FromCandidate(c);
    ASSERT_TRUE(config.ok()) << c.name;
    const Candidate back = config->ToCandidate();
    EXPECT_EQ(back.name, c.name);
    EXPECT_EQ(back.params, c.params);
    // The name alone is enough.
    EXPECT_TRUE(CpuConfig::FromCandidate({c.name, {}}).ok()) << c.name;
  }
  for (const char* bad : {"", "cpu.tile", "cpu.tile33.t1", "cpu.tile32.t0", "cpu.tile32.tx",
                          "cpu.tile32", "gpu.tile32.t1", "cpu.naive.x"}) {
    EXPECT_EQ(CpuConfig::FromCandidate({bad, {}}).status().code(), StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_FALSE(CpuConfig::FromCandidate({"cpu.tile32.t1", {{"tile", 16}, {"threads", 1}}}).ok());
}

TEST(CpuBackendTest, WrongTransposesAreCaughtByTheCheck) {
  CpuBackendOptions o;
  o.enable_test_faults = true;
  CpuBackend backend(o);
  for (int es : {1, 4, 16}) {
    const Problem p = Make(6, 5, es, 2, 7, 9);  // batched, gaps on both sides
    StatusOr<std::unique_ptr<Session>> s = backend.Open(p);
    ASSERT_TRUE(s.ok());
    Status skip = (*s)->Check({"cpu.test.skiplast", {}});
    EXPECT_EQ(skip.code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(skip.message().find("cpu.test.skiplast: mismatch at batch 1, row 5, col 4"),
              std::string::npos)
        << skip.message();
    Status gap = (*s)->Check({"cpu.test.gapwrite", {}});
    EXPECT_EQ(gap.code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(gap.message().find("ld gap"), std::string::npos) << gap.message();
    // A failed check leaves the session clean for the next candidate.
    EXPECT_TRUE((*s)->Check({"cpu.tile8.t1", {}}).ok());
    EXPECT_TRUE((*s)->Check({"cpu.naive", {}}).ok());
  }
}

TEST(CpuCompareTest, NamesTheFirstMismatchOrGap) {
  const Problem p = Make(3, 4, 4, 2, 0, 5);  // output: 2 x 4 rows of ld 5, 3 used
  const std::vector<Byte> expected = RandomBytes(p.out_alloc_bytes(), 3);
  EXPECT_TRUE(cpu_internal::CompareOutput(p, expected.data(), expected.data()).ok());

  // Batch 1, output row 2 (input col 2), output col 1 (input row 1).
  std::vector<Byte> actual = expected;
  actual[((1 * 4 + 2) * 5 + 1) * 4 + 3] ^= 0x80;
  Status s = cpu_internal::CompareOutput(p, expected.data(), actual.data());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("mismatch at batch 1, row 1, col 2"), std::string::npos)
      << s.message();

  // Gap: batch 0, output row 1, column 3 (>= rows).
  actual = expected;
  actual[(1 * 5 + 3) * 4] ^= 1;
  s = cpu_internal::CompareOutput(p, expected.data(), actual.data());
  EXPECT_NE(s.message().find("ld gap"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("output row 1, column 3"), std::string::npos) << s.message();
}

TEST(CpuBackendTest, RejectsUnknownDisabledAndOversizedCandidates) {
  CpuBackendOptions o;
  o.max_threads = 2;
  CpuBackend backend(o);
  StatusOr<std::unique_ptr<Session>> s = backend.Open(Make(8, 8, 4));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->Check({"cpu.bogus", {}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*s)->Check({"cpu.test.skiplast", {}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*s)->Check({"cpu.tile8.t3", {}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*s)->Measure({"cpu.bogus", {}}, MeasureOptions{}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(CpuBackendTest, OpenTooLargeIsResourceExhausted) {
  CpuBackend backend;
  Problem p = Make(int64_t{1} << 20, int64_t{1} << 20, 4);
  EXPECT_EQ(backend.Open(p).status().code(), StatusCode::kResourceExhausted);
  p.rows = 0;
  EXPECT_EQ(backend.Open(p).status().code(), StatusCode::kInvalidArgument);
}

TEST(CpuBackendTest, MeasureAndCeilingGiveSanePositiveTimes) {
  CpuBackendOptions o;
  o.max_threads = 2;
  CpuBackend backend(o);
  const Problem p = Make(512, 384, 4);  // 768 KiB: multi-threaded candidates and ceiling
  StatusOr<std::unique_ptr<Session>> s = backend.Open(p);
  ASSERT_TRUE(s.ok());
  MeasureOptions opt;
  opt.warmup = 1;
  opt.min_samples = 4;
  opt.min_seconds = 0.002;
  opt.max_samples = 200;
  const std::pair<const char*, int> cases[] = {
      {"cpu.naive", 1}, {"cpu.tile32.t1", 1}, {"cpu.tile32.t2", 2}};
  for (const auto& [name, threads] : cases) {
    StatusOr<Measurement> m = (*s)->Measure({name, {}}, opt);
    ASSERT_TRUE(m.ok()) << name << ": " << m.status().ToString();
    EXPECT_TRUE(m->valid);
    EXPECT_GE(m->samples, opt.min_samples);
    EXPECT_LE(m->samples, opt.max_samples);
    EXPECT_EQ(m->warmup, 1);
    EXPECT_GT(m->min_s, 0);
    EXPECT_LE(m->min_s, m->median_s);
    EXPECT_LE(m->median_s, m->max_s);
    EXPECT_LT(m->median_s, 1.0);  // a 768 KiB transpose, even unoptimised under sanitizers
    EXPECT_NE(m->method.find("\"timer\":\"steady_clock\""), std::string::npos) << m->method;
    EXPECT_NE(m->method.find("\"buffers\":"), std::string::npos) << m->method;
    EXPECT_NE(m->method.find("\"threads\":" + std::to_string(threads)), std::string::npos)
        << m->method;
  }
  // The timed working set exceeds twice the last-level cache unless the cap says otherwise.
  StatusOr<Measurement> m = (*s)->Measure({"cpu.naive", {}}, opt);
  ASSERT_TRUE(m.ok());
  const int64_t l3 = std::stoll(backend.device().attributes.at("l3_bytes"));
  if (l3 > 0 && m->method.find("\"working_set_capped\":false") != std::string::npos) {
    const size_t at = m->method.find("\"working_set_bytes\":") + 20;
    EXPECT_GT(std::stoll(m->method.substr(at)), 2 * l3) << m->method;
  }
  // A larger min_seconds takes more samples.
  MeasureOptions longer = opt;
  longer.min_seconds = 0.05;
  longer.max_samples = 100000;
  StatusOr<Measurement> lm = (*s)->Measure({"cpu.tile32.t1", {}}, longer);
  ASSERT_TRUE(lm.ok());
  EXPECT_GE(lm->max_s * lm->samples, 0.05);

  StatusOr<Measurement> c = (*s)->MeasureCeiling(opt);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->valid);
  EXPECT_GT(c->median_s, 0);
  EXPECT_NE(c->method.find("\"op\":\"memcpy\""), std::string::npos) << c->method;
  // The check pair is one of the rotated buffers: checks still pass after measuring.
  EXPECT_TRUE((*s)->Check({"cpu.tile16.t2", {}}).ok());
}

TEST(CpuBackendTest, ChecksStillPassAfterMeasuringAStridedProblem) {
  // The ceiling's memcpy runs over the check buffers' ld gaps; checks must not be confused.
  CpuBackend backend;
  const Problem p = Make(100, 70, 4, 2, 75, 104);
  StatusOr<std::unique_ptr<Session>> s = backend.Open(p);
  ASSERT_TRUE(s.ok());
  MeasureOptions opt{1, 3, 0.0, 10};
  ASSERT_TRUE((*s)->MeasureCeiling(opt).ok());
  ASSERT_TRUE((*s)->Measure({"cpu.naive", {}}, opt).ok());
  for (const Candidate& c : backend.Candidates(p)) EXPECT_TRUE((*s)->Check(c).ok()) << c.name;
}

TEST(CpuBackendTest, DeviceInfoIsCompleteAndStable) {
  CpuBackend a, b;
  const DeviceInfo& d = a.device();
  EXPECT_EQ(d.backend, "cpu");
  EXPECT_FALSE(d.name.empty());
  EXPECT_EQ(d.uuid.rfind("cpu-", 0), 0u) << d.uuid;
  EXPECT_EQ(d.uuid.size(), 4u + 16u);
  EXPECT_GT(d.memory_bytes, 0u);
  EXPECT_EQ(d.library_version, kLibraryVersion);
  for (const char* k : {"cores", "threads_max", "l1d_bytes", "l2_bytes", "l3_bytes", "arch"})
    EXPECT_TRUE(d.attributes.count(k)) << k;
  EXPECT_GE(std::stoi(d.attributes.at("cores")), 1);
  EXPECT_EQ(std::stoi(d.attributes.at("threads_max")), a.max_threads());
  EXPECT_EQ(d.Fingerprint(), b.device().Fingerprint());
  EXPECT_EQ(d.uuid, b.device().uuid);
  // A different thread limit is a different device identity (the candidates differ).
  CpuBackendOptions o;
  o.max_threads = a.max_threads() + 1;
  CpuBackend c(o);
  EXPECT_EQ(c.device().uuid, d.uuid);
  EXPECT_NE(c.device().Fingerprint(), d.Fingerprint());
}

TEST(CpuInternalTest, ParseCacheSize) {
  EXPECT_EQ(cpu_internal::ParseCacheSize("32K"), 32 * 1024);
  EXPECT_EQ(cpu_internal::ParseCacheSize("1024K\n"), 1024 * 1024);
  EXPECT_EQ(cpu_internal::ParseCacheSize("32M"), 32 << 20);
  EXPECT_EQ(cpu_internal::ParseCacheSize("512"), 512);
  EXPECT_FALSE(cpu_internal::ParseCacheSize(""));
  EXPECT_FALSE(cpu_internal::ParseCacheSize("K"));
  EXPECT_FALSE(cpu_internal::ParseCacheSize("12Q"));
  EXPECT_FALSE(cpu_internal::ParseCacheSize("-4K"));
}

TEST(ThreadPoolTest, RunsEveryShareExactlyOnce) {
  ThreadPool pool(4);
  for (int round = 0; round < 200; ++round) {
    const int n = 1 + round % 6;  // includes n > max_threads (clamped to 4)
    std::vector<std::atomic<int>> hits(8);
    pool.Run(n, [&](int t) { hits[t].fetch_add(1); });
    const int expected = std::min(n, 4);
    for (int t = 0; t < 8; ++t)
      EXPECT_EQ(hits[t].load(), t < expected ? 1 : 0) << round << " " << t;
  }
}

TEST(ThreadPoolTest, WorkersSeeTheCallersData) {
  ThreadPool pool(3);
  std::vector<int64_t> data(3000);
  for (int round = 0; round < 50; ++round) {
    pool.Run(3, [&](int t) {
      for (int64_t i = t * 1000; i < (t + 1) * 1000; ++i) data[i] = i * round;
    });
    int64_t sum = 0;
    for (int64_t v : data) sum += v;
    EXPECT_EQ(sum, int64_t{round} * 2999 * 3000 / 2);
  }
}

}  // namespace
}  // namespace transposed

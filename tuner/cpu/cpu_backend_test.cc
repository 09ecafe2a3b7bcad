#include "tuner/cpu/cpu_backend.h"

#include <gtest/gtest.h>

#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/version.h"
#include "testing/problems.h"

namespace transposed {
namespace {

using Byte = unsigned char;

constexpr auto Make = [](auto... args) { return MakeTestProblemOfSize(args...); };

// The shapes every candidate must get right: degenerate, odd, batched, strided, one large
// enough (>= kCpuMinParallelBytes even at 1 byte per element) for the multi-threaded candidates,
// and two whose output (>= kCpuMinStreamingBytes, 64-byte aligned rows, odd column counts, one
// batched with gaps on both sides) gets the streaming-store candidates at every element size.
std::vector<Problem> Shapes(int esize) {
  return {Make(1, 1, esize),
          Make(1, 300, esize),
          Make(300, 1, esize),
          Make(31, 33, esize),
          Make(257, 129, esize),
          Make(17, 23, esize, 3),
          Make(19, 21, esize, 1, 29, 24),
          Make(9, 40, esize, 4, 41, 13),
          Make(520, 515, esize),
          Make(1024, 1031, esize),
          Make(320, 1029, esize, 2, 1030, 1088)};
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
    int multi_threaded = 0, streaming = 0, walks = 0;
    for (const Problem& p : Shapes(es)) {
      StatusOr<std::unique_ptr<Session>> s = backend.Open(p);
      ASSERT_TRUE(s.ok()) << p.ToString() << ": " << s.status().ToString();
      for (const Candidate& c : backend.Candidates(p)) {
        Status st = (*s)->Check(c);
        EXPECT_TRUE(st.ok()) << c.name << " on " << p.ToString() << ": " << st.ToString();
        if (c.params.at("threads") > 1) ++multi_threaded;
        if (c.params.count("nt") && c.params.at("nt") == 1) ++streaming;
        if (c.params.count("wrun")) ++walks;
      }
    }
    EXPECT_GE(multi_threaded, 4) << "element size " << es;  // b4, 3 walks, 2 tiles on 4 threads
    EXPECT_GE(streaming, 8) << "element size " << es;  // b4 and 3 walks on the last 2 shapes
    EXPECT_GE(walks, 12) << "element size " << es;      // 3 shapes x (plain, nt) on 2 shapes
  }
}

// Every SIMD configuration (each level this CPU has, every square blocking and column-walk
// shape, plain and streaming stores, one and three threads) on odd, degenerate, batched and
// strided shapes, with the buffers aligned and misaligned, bit-exact against the reference, for
// every element size.
TEST(CpuSimdTest, EveryConfigurationMatchesTheReference) {
  ThreadPool pool(3);
  std::vector<CpuConfig> configs;
  // {block, wrun, rrun}: the square blockings, then column walks (the backend's shapes, a
  // one-line shape, and runs that are not a power of two).
  const int layouts[][3] = {{1, 0, 0},     {4, 0, 0},      {16, 0, 0},   {1, 256, 512},
                            {1, 512, 256}, {1, 1024, 512}, {1, 64, 64},  {1, 192, 320}};
  for (cpu_simd::Isa isa : cpu_simd::SupportedIsas())
    for (const auto& layout : layouts)
      for (bool nt : {false, true})
        for (int threads : {1, 3}) {
          CpuConfig c;
          c.kind = CpuConfig::Kind::kSimd;
          c.isa = static_cast<int>(isa);
          c.block = layout[0];
          c.wrun = layout[1];
          c.rrun = layout[2];
          c.nt = nt;
          c.threads = threads;
          configs.push_back(c);
        }
  for (int es : {1, 2, 4, 8, 16}) {
    const std::vector<Problem> shapes = {
        Make(1, 1, es),          Make(7, 13, es),   Make(64, 64, es),
        Make(65, 129, es, 2),    Make(1000, 999, es), Make(67, 130, es, 3, 131, 70),
        Make(128, 64, es, 2, 200, 192)};  // strided, output rows 64-byte aligned (nt path)
    for (const Problem& p : shapes) {
      ASSERT_TRUE(ValidateProblem(p).ok()) << p.ToString();
      for (int64_t misalign : {int64_t{0}, int64_t{es}}) {
        std::vector<Byte> in = RandomBytes(p.in_alloc_bytes() + 64 + misalign, 11);
        std::vector<Byte> expected = RandomBytes(p.out_alloc_bytes(), 12);
        const Byte* src = in.data() + misalign;
        cpu_internal::ReferenceTranspose(p, src, expected.data());
        // A 64-byte aligned output buffer (std::vector's is not), shifted by `misalign`.
        std::vector<Byte> storage(static_cast<size_t>(p.out_alloc_bytes() + 128));
        Byte* out = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) +
                    misalign;
        // Every element flipped, the ld gaps as they were: a gap write or a missed element
        // is a mismatch.
        std::vector<Byte> poisoned = expected;
        for (int64_t b = 0; b < p.batch; ++b)
          for (int64_t r = 0; r < p.cols; ++r)
            for (int64_t k = 0; k < p.rows * es; ++k)
              poisoned[static_cast<size_t>((b * p.cols + r) * p.out_ld() * es + k)] ^= 0x5a;
        for (const CpuConfig& c : configs) {
          std::memcpy(out, poisoned.data(), poisoned.size());
          Status st = cpu_internal::RunConfig(c, p, src, out, &pool);
          ASSERT_TRUE(st.ok()) << c.ToCandidate().name << ": " << st.ToString();
          Status cmp = cpu_internal::CompareOutput(p, expected.data(), out);
          EXPECT_TRUE(cmp.ok()) << c.ToCandidate().name << " on " << p.ToString() << " misalign "
                                << misalign << ": " << cmp.ToString();
        }
      }
    }
  }
}

TEST(CpuSimdTest, LevelsAndEdges) {
  const std::vector<cpu_simd::Isa> isas = cpu_simd::SupportedIsas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), cpu_simd::Isa::kBase);
  for (cpu_simd::Isa isa : isas) {
    EXPECT_TRUE(cpu_simd::IsaSupported(isa));
    for (int es : {1, 2, 4, 8, 16}) {
      const int k = cpu_simd::BlockEdge(isa, es);
      const int m = cpu_simd::MicroEdge(isa, es);
      EXPECT_GE(k, 1);
      EXPECT_LE(k, 16);
      EXPECT_EQ(m * es, 64) << cpu_simd::IsaName(isa) << " " << es;  // one line per row
      EXPECT_EQ(m % k, 0);
    }
  }
  EXPECT_EQ(cpu_simd::BlockEdge(cpu_simd::Isa::kBase, 4), 4);  // 16-byte vectors: 4 x f32
}

TEST(CpuSimdTest, StreamCopyCopiesEveryByteAtEveryAlignment) {
  // The ceiling's streaming copy: unaligned heads, whole lines, 16-byte rest, ragged tails.
  std::vector<unsigned char> src(4096 + 64), dst(4096 + 64);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  for (int64_t offset : {0, 1, 15, 16, 33, 63}) {
    for (int64_t bytes : {0, 1, 15, 16, 17, 63, 64, 65, 127, 200, 4000}) {
      std::fill(dst.begin(), dst.end(), 0xEE);
      cpu_simd::StreamCopy(dst.data() + offset, src.data() + 3, bytes);
      for (int64_t i = 0; i < static_cast<int64_t>(dst.size()); ++i) {
        const bool inside = i >= offset && i < offset + bytes;
        ASSERT_EQ(dst[i], inside ? src[i - offset + 3] : 0xEE)
            << "offset " << offset << " bytes " << bytes << " at " << i;
      }
    }
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
  const std::string best = cpu_simd::IsaName(cpu_simd::SupportedIsas().back());
  const std::set<std::string> small = names(Make(64, 64, 4));
  EXPECT_TRUE(small.count("cpu.naive"));
  EXPECT_TRUE(small.count("cpu.naive.colwrite"));
  for (int tile : {8, 16, 32, 64, 128})
    EXPECT_TRUE(small.count("cpu.tile" + std::to_string(tile) + ".t1")) << tile;
  EXPECT_TRUE(small.count("cpu." + best + ".b1.t1"));
  EXPECT_TRUE(small.count("cpu." + best + ".b4.t1"));  // 64 x 64 f32 is 4 x 4 micro-tiles...
  EXPECT_FALSE(small.count("cpu." + best + ".b16.t1"));  // ...so b16 would walk it as b4 does
  for (const Candidate& c : backend.Candidates(Make(64, 64, 4)))
    EXPECT_EQ(c.params.at("threads"), 1) << c.name;

  const std::set<std::string> large = names(Make(1024, 1024, 4));
  for (std::string n : {"cpu.tile32.t8", "cpu.tile64.t8", "cpu.naive"})
    EXPECT_TRUE(large.count(n)) << n;
  for (const char* b : {".b4.t8", ".b4.t1", ".w256.r512.t8", ".w512.r256.t8", ".w1024.r512.t8",
                        ".b4.t8.nt", ".w256.r512.t8.nt"})
    EXPECT_TRUE(large.count("cpu." + best + b)) << best << b;
  EXPECT_FALSE(large.count("cpu." + best + ".b1.t8"));   // never won in parallel
  EXPECT_FALSE(large.count("cpu." + best + ".b16.t8"));  // the column walks do it better
  EXPECT_FALSE(large.count("cpu.tile8.t8"));
  // Outputs below kCpuMinStreamingBytes: no streaming stores.
  for (const Candidate& c : backend.Candidates(Make(256, 512, 4)))
    EXPECT_EQ(c.name.find(".nt"), std::string::npos) << c.name;
  // Above kCpuMaxNaiveBytes: no naive loops, no scalar tiles. Streaming-store variants.
  const Problem huge = Make(4096, 4096, 4);
  const std::set<std::string> h = names(huge);
  EXPECT_FALSE(h.count("cpu.naive"));
  EXPECT_FALSE(h.count("cpu.naive.colwrite"));
  EXPECT_FALSE(h.count("cpu.tile32.t8"));
  EXPECT_TRUE(h.count("cpu." + best + ".b4.t8.nt"));
  EXPECT_TRUE(h.count("cpu." + best + ".w1024.r512.t8.nt"));
  EXPECT_LE(h.size(), 12u);  // few candidates: a 64 MiB tune must stay quick
  for (const Candidate& c : backend.Candidates(Make(4097, 4096, 4)))  // odd output ld: no .nt
    EXPECT_EQ(c.name.find(".nt"), std::string::npos) << c.name;
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
  for (const char* good : {"cpu.sse2.b1.t1", "cpu.avx2.b4.t2.nt", "cpu.avx512.b16.t8",
                           "cpu.avx512.w1024.r512.t2.nt", "cpu.sse2.w64.r65536.t1"}) {
    StatusOr<CpuConfig> c = CpuConfig::FromCandidate({good, {}});
    ASSERT_TRUE(c.ok()) << good;
    EXPECT_EQ(c->kind, CpuConfig::Kind::kSimd);
    EXPECT_EQ(c->ToCandidate().name, good);
  }
  StatusOr<CpuConfig> walk = CpuConfig::FromCandidate({"cpu.avx2.w512.r256.t3", {}});
  ASSERT_TRUE(walk.ok());
  EXPECT_EQ(walk->wrun, 512);
  EXPECT_EQ(walk->rrun, 256);
  EXPECT_EQ(walk->threads, 3);
  EXPECT_FALSE(walk->nt);
  for (const char* bad : {"", "cpu.tile", "cpu.tile33.t1", "cpu.tile32.t0", "cpu.tile32.tx",
                          "cpu.tile32", "gpu.tile32.t1", "cpu.naive.x", "cpu.sse2.b0.t1",
                          "cpu.sse2.b01.t1", "cpu.mmx.b1.t1", "cpu.avx2.b4.t2.x", "cpu.avx2.b4",
                          "cpu.avx2.b4.t0", "cpu.avx2.b4.t1.nt.nt", "cpu.sse2.4.t1",
                          "cpu.sse2.w512.t1", "cpu.sse2.w512.r.t1", "cpu.sse2.w100.r512.t1",
                          "cpu.sse2.w0.r512.t1", "cpu.sse2.w512.r131072.t1",
                          "cpu.sse2.r512.w512.t1", "cpu.sse2.w512.r512.b4.t1",
                          "cpu.sse2.w0512.r512.t1", "cpu.sse2.w512.r512.t1.nt.x"}) {
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

// Under an address-space limit (`ulimit -v`) that admission cannot see, the allocation failure
// names the bytes. Run in a child, so the limit does not touch the test process.
TEST(CpuBackendTest, AllocationFailureNamesTheBytes) {
  const Problem p = Make(8192, 8192, 4);  // 256 MiB input, output and reference each
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    CpuBackend backend;
    rlimit as{};
    getrlimit(RLIMIT_AS, &as);
    as.rlim_cur = 512ull << 20;  // above what the process maps now, below 768 MiB of buffers
    if (setrlimit(RLIMIT_AS, &as) != 0) _exit(2);
    const std::string message = backend.Open(p).status().ToString();
    if (write(fds[1], message.data(), message.size()) < 0) _exit(3);
    _exit(0);
  }
  close(fds[1]);
  std::string message;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) message.append(buf, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_NE(message.find("RESOURCE_EXHAUSTED"), std::string::npos) << message;
  EXPECT_NE(message.find("805306368 bytes (input 268435456, output and reference 268435456 each)"),
            std::string::npos)
      << message;
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
    EXPECT_EQ(m->method.timer, "steady_clock");
    EXPECT_EQ(m->method.op, "transpose");
    EXPECT_GE(m->method.buffers, 1);
    EXPECT_EQ(m->method.threads, threads);
  }
  // The timed working set is at least twice the last-level cache unless the cap says otherwise.
  StatusOr<Measurement> m = (*s)->Measure({"cpu.naive", {}}, opt);
  ASSERT_TRUE(m.ok());
  const int64_t l3 = std::stoll(backend.device().attributes.at("l3_bytes"));
  if (l3 > 0 && !m->method.working_set_capped) {
    EXPECT_GE(m->method.working_set_bytes, 2 * l3);
  }
  // Screening: a first run at or over the cutoff is the measurement (the tuner's quick pass);
  // one under it takes every sample asked for.
  MeasureOptions screened = opt;
  screened.cutoff_s = 1e-9;
  StatusOr<Measurement> sm = (*s)->Measure({"cpu.naive", {}}, screened);
  ASSERT_TRUE(sm.ok()) << sm.status().ToString();
  EXPECT_TRUE(sm->valid);
  EXPECT_EQ(sm->samples, 1);
  screened.cutoff_s = 60;
  sm = (*s)->Measure({"cpu.naive", {}}, screened);
  ASSERT_TRUE(sm.ok()) << sm.status().ToString();
  EXPECT_GE(sm->samples, opt.min_samples);
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
  // The faster of the plain and the streaming-store copy (cpu_simd::StreamCopy).
  EXPECT_TRUE(c->method.op == "memcpy" || c->method.op == "stream-copy") << c->method.op;
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

TEST(CpuInternalTest, ParseCpuMax) {
  EXPECT_FALSE(cpu_internal::ParseCpuMax("max 100000"));
  EXPECT_EQ(cpu_internal::ParseCpuMax("200000 100000\n"), 2);
  EXPECT_EQ(cpu_internal::ParseCpuMax("150000 100000"), 1);
  EXPECT_EQ(cpu_internal::ParseCpuMax("50000 100000"), 1);  // at least one
  EXPECT_FALSE(cpu_internal::ParseCpuMax(""));
  EXPECT_FALSE(cpu_internal::ParseCpuMax("100000"));
  EXPECT_FALSE(cpu_internal::ParseCpuMax("x 100000"));
  EXPECT_FALSE(cpu_internal::ParseCpuMax("100000 0"));
}

// `taskset -c N` in miniature: a backend made by a thread restricted to one CPU uses one thread.
TEST(CpuBackendTest, ThreadsFollowTheAffinityMask) {
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
  const UsableCpus all = ReadUsableCpus();
  EXPECT_EQ(static_cast<int>(all.cpus.size()), CPU_COUNT(&saved));
  EXPECT_GE(all.count, 1);
  EXPECT_LE(all.count, static_cast<int>(all.cpus.size()));
  if (all.quota > 0) EXPECT_LE(all.count, all.quota);
  EXPECT_EQ(std::stoi(CpuBackend().device().attributes.at("threads_max")), all.count);

  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(all.cpus.back(), &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  const UsableCpus pinned = ReadUsableCpus();
  CpuBackend backend;
  ASSERT_EQ(sched_setaffinity(0, sizeof(saved), &saved), 0);
  EXPECT_EQ(pinned.cpus, std::vector<int>{all.cpus.back()});
  EXPECT_EQ(pinned.count, 1);
  EXPECT_EQ(backend.max_threads(), 1);
  for (const Candidate& c : backend.Candidates(Make(2048, 2048, 4)))
    EXPECT_EQ(c.params.at("threads"), 1) << c.name;
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

TEST(ThreadPoolTest, PoolThreadsSeeTheCallersData) {
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

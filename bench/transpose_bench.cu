// transpose_bench: effective bandwidth of the transpose family against the device-to-device copy
// ceiling and cuBLAS geam, on one GPU, in one run.
//
// For each problem it measures, each with warm-up, repeated timed samples and the median:
//   memcpy       cudaMemcpyAsync device-to-device of the same bytes (the ceiling);
//   cublas_geam  cublas{S,D}geam with op(A) = A^T (f32/f64 only; cuBLAS is loaded with dlopen, so
//                the column is skipped with a warning where no libcublas is found);
//   naive, tile, tile_padded  the textbook kernels (naive, tile32x32.rows8.pad0/pad1);
//   family_best  every configuration EnumerateConfigs offers, the best by median.
// Every launch of a sample goes to the next of N rotating input/output pairs, N chosen so the
// pairs together exceed 4x the L2 size read from the device; one sample is one replay of a CUDA
// graph holding one launch per pair (so launch gaps do not dominate small problems), divided by
// N. Effective bandwidth is 2 * bytes / time. Every family configuration timed is first checked
// bit-exactly against the reference kernel on a poisoned output; a failing one is reported and
// never ranked.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench/problems.h"
#include "core/problem.h"
#include "kernels/device_check.cuh"
#include "transposed/kernels/config.h"
#include "transposed/kernels/launch.h"

namespace transposed {
namespace {

using kernels::TransposeConfig;

#define BENCH_CUDA(expr)                                                                          \
  do {                                                                                            \
    cudaError_t e_ = (expr);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(2);                                                                               \
    }                                                                                             \
  } while (0)

// ---- cuBLAS through dlopen (no link-time dependency; CI has no libcublas necessarily).
struct Cublas {
  using CreateFn = int (*)(void**);
  using DestroyFn = int (*)(void*);
  using SetStreamFn = int (*)(void*, cudaStream_t);
  using GetVersionFn = int (*)(void*, int*);
  using SgeamFn = int (*)(void*, int, int, int, int, const float*, const float*, int, const float*,
                          const float*, int, float*, int);
  using DgeamFn = int (*)(void*, int, int, int, int, const double*, const double*, int,
                          const double*, const double*, int, double*, int);
  void* lib = nullptr;
  void* handle = nullptr;
  SgeamFn sgeam = nullptr;
  DgeamFn dgeam = nullptr;
  SetStreamFn set_stream = nullptr;
  int version = 0;
  std::string where;

  bool Load() {
    for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
      lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (lib) {
        where = name;
        break;
      }
    }
    if (!lib) return false;
    auto create = reinterpret_cast<CreateFn>(dlsym(lib, "cublasCreate_v2"));
    auto get_version = reinterpret_cast<GetVersionFn>(dlsym(lib, "cublasGetVersion_v2"));
    set_stream = reinterpret_cast<SetStreamFn>(dlsym(lib, "cublasSetStream_v2"));
    sgeam = reinterpret_cast<SgeamFn>(dlsym(lib, "cublasSgeam"));
    dgeam = reinterpret_cast<DgeamFn>(dlsym(lib, "cublasDgeam"));
    if (!create || !set_stream || !sgeam || !dgeam || create(&handle) != 0) return false;
    if (get_version) get_version(handle, &version);
    return true;
  }
};

struct BenchProblem {
  std::string label;
  Problem p;
};

std::vector<BenchProblem> Problems() {
  std::vector<BenchProblem> v;
  for (const Problem& p : bench::BenchmarkProblems()) v.push_back({p.ToString(), p});
  return v;
}

struct Timing {
  bool ok = false;
  std::string error;
  double median_s = 0, min_s = 0;
  int samples = 0;
};

struct Options {
  int warmup = 3;
  int min_samples = 15;
  double min_seconds = 0.02;
  int max_samples = 200;
};

// Times `launch(i)` for i over the N pairs: one sample = one pass (a captured graph where
// possible), divided by N.
Timing TimePasses(const std::function<Status(int)>& launch, int n, cudaStream_t s, const Options& o,
                  bool allow_graph = true) {
  Timing t;
  // First a direct pass: errors surface here rather than inside capture.
  for (int i = 0; i < n; ++i) {
    Status st = launch(i);
    if (!st.ok()) {
      t.error = st.ToString();
      return t;
    }
  }
  if (cudaStreamSynchronize(s) != cudaSuccess) {
    t.error = cudaGetErrorString(cudaGetLastError());
    return t;
  }
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  bool use_graph =
      allow_graph && cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
  if (use_graph) {
    bool captured = true;
    for (int i = 0; i < n && captured; ++i) captured = launch(i).ok();
    const bool ended = cudaStreamEndCapture(s, &graph) == cudaSuccess;
    use_graph = captured && ended && graph != nullptr &&
                cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
    if (!use_graph) cudaGetLastError();
  }
  auto pass = [&]() {
    if (use_graph) {
      cudaGraphLaunch(exec, s);
    } else {
      for (int i = 0; i < n; ++i) (void)launch(i);
    }
  };
  cudaEvent_t a, b;
  BENCH_CUDA(cudaEventCreate(&a));
  BENCH_CUDA(cudaEventCreate(&b));
  for (int w = 0; w < o.warmup; ++w) pass();
  std::vector<double> samples;
  double total = 0;
  while ((static_cast<int>(samples.size()) < o.min_samples || total < o.min_seconds) &&
         static_cast<int>(samples.size()) < o.max_samples) {
    BENCH_CUDA(cudaEventRecord(a, s));
    pass();
    BENCH_CUDA(cudaEventRecord(b, s));
    BENCH_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, a, b));
    samples.push_back(ms * 1e-3 / n);
    total += ms * 1e-3;
  }
  const cudaError_t err = cudaGetLastError();
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  if (err != cudaSuccess) {
    t.error = cudaGetErrorString(err);
    return t;
  }
  std::sort(samples.begin(), samples.end());
  t.ok = true;
  t.samples = static_cast<int>(samples.size());
  t.min_s = samples.front();
  const size_t mid = samples.size() / 2;
  t.median_s = samples.size() % 2 ? samples[mid] : 0.5 * (samples[mid - 1] + samples[mid]);
  return t;
}

struct Row {
  std::string problem, dtype, method, config;
  Problem p;
  Timing t;
  int buffers = 0;
  double copy_s = 0;
  double gbps() const { return t.ok ? EffectiveGBps(p.bytes(), t.median_s) : 0; }
  double pct() const { return t.ok && copy_s > 0 ? 100.0 * copy_s / t.median_s : 0; }
};

void WriteCsv(const std::string& path, const std::vector<Row>& rows) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    return;
  }
  std::fprintf(f,
               "problem,dtype,rows,cols,batch,bytes,method,config,median_us,min_us,gbps,"
               "pct_of_copy,samples,buffers,error\n");
  for (const Row& r : rows) {
    std::string err = r.t.error;
    std::replace(err.begin(), err.end(), ',', ';');
    std::replace(err.begin(), err.end(), '\n', ' ');
    std::fprintf(f, "\"%s\",%s,%lld,%lld,%lld,%lld,%s,%s,%.3f,%.3f,%.1f,%.1f,%d,%d,%s\n",
                 r.problem.c_str(), r.dtype.c_str(), static_cast<long long>(r.p.rows),
                 static_cast<long long>(r.p.cols), static_cast<long long>(r.p.batch),
                 static_cast<long long>(r.p.bytes()), r.method.c_str(), r.config.c_str(),
                 r.t.median_s * 1e6, r.t.min_s * 1e6, r.gbps(), r.pct(), r.t.samples, r.buffers,
                 err.c_str());
  }
  std::fclose(f);
}

int Main(int argc, char** argv) {
  std::string csv, all_csv, filter;
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--csv") {
      csv = next();
    } else if (a == "--all-csv") {
      all_csv = next();
    } else if (a == "--filter") {
      filter = next();
    } else if (a == "--samples") {
      opt.min_samples = std::max(3, std::atoi(next().c_str()));
    } else {
      std::fprintf(stderr,
                   "usage: transpose_bench [--csv PATH] [--all-csv PATH] [--filter SUBSTR] "
                   "[--samples N]\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }

  int dev = 0;
  BENCH_CUDA(cudaGetDevice(&dev));
  cudaDeviceProp prop;
  BENCH_CUDA(cudaGetDeviceProperties(&prop, dev));
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  int mem_clock_khz = 0, bus_width = 0, sm_clock_khz = 0;
  cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, dev);
  cudaDeviceGetAttribute(&bus_width, cudaDevAttrGlobalMemoryBusWidth, dev);
  cudaDeviceGetAttribute(&sm_clock_khz, cudaDevAttrClockRate, dev);
  const int64_t l2 = prop.l2CacheSize;
  std::printf(
      "device: %s, sm_%d%d, %d SMs, L2 %.1f MiB, %.1f GiB, memory clock %d MHz x %d bit, "
      "CUDA driver %d, runtime %d\n",
      prop.name, prop.major, prop.minor, prop.multiProcessorCount, l2 / 1048576.0,
      prop.totalGlobalMem / 1073741824.0, mem_clock_khz / 1000, bus_width, driver, runtime);

  Cublas cublas;
  const bool have_cublas = cublas.Load();
  if (have_cublas) {
    std::printf("cuBLAS: %s, version %d\n", cublas.where.c_str(), cublas.version);
  } else {
    std::printf("WARNING: cuBLAS could not be loaded (%s); the cublas_geam column is skipped\n",
                dlerror() ? "dlopen failed" : "missing symbols");
  }

  cudaStream_t s;
  BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  if (have_cublas) cublas.set_stream(cublas.handle, s);

  std::vector<Row> summary, all;
  for (const BenchProblem& bp : Problems()) {
    if (!filter.empty() && bp.label.find(filter) == std::string::npos) continue;
    const Problem& p = bp.p;
    const int64_t in_bytes = p.in_alloc_bytes(), out_bytes = p.out_alloc_bytes();
    const int64_t pair = in_bytes + out_bytes;
    const int n =
        static_cast<int>(std::min<int64_t>(64, std::max<int64_t>(2, (4 * l2 + pair - 1) / pair)));
    std::vector<void*> in(n), out(n);
    for (int i = 0; i < n; ++i) {
      BENCH_CUDA(cudaMalloc(&in[i], in_bytes));
      BENCH_CUDA(cudaMalloc(&out[i], out_bytes));
      if (!kernels::check::Fill(in[i], in_bytes, 1000 + i, s).ok()) return 2;
      if (!kernels::check::Fill(out[i], out_bytes, 2000 + i, s).ok()) return 2;
    }
    void* expected = nullptr;
    BENCH_CUDA(cudaMalloc(&expected, out_bytes));
    if (!kernels::check::Fill(expected, out_bytes, 2000, s).ok()) return 2;
    Status st = kernels::LaunchReference(p, in[0], expected, s);
    if (!st.ok()) {
      std::fprintf(stderr, "reference: %s\n", st.ToString().c_str());
      return 2;
    }
    BENCH_CUDA(cudaStreamSynchronize(s));

    auto row = [&](const std::string& method, const std::string& config, const Timing& t) {
      Row r;
      r.problem = bp.label;
      r.dtype = std::string(DTypeName(p.dtype));
      r.method = method;
      r.config = config;
      r.p = p;
      r.t = t;
      r.buffers = n;
      return r;
    };

    // Ceiling: cudaMemcpyAsync D2D, timed both as graph memcpy nodes and as plain stream calls
    // (a graph's memcpy node may run on a copy engine, which is slower for large copies); the
    // faster of the two is the ceiling, the other is kept in the CSV as memcpy_alt.
    auto memcpy_pair = [&](int i) {
      const cudaError_t e = cudaMemcpyAsync(out[i], in[i], static_cast<size_t>(p.bytes()),
                                            cudaMemcpyDeviceToDevice, s);
      return e == cudaSuccess ? Status::OK() : Status::Internal(cudaGetErrorString(e));
    };
    const Timing copy_graph = TimePasses(memcpy_pair, n, s, opt, true);
    const Timing copy_stream = TimePasses(memcpy_pair, n, s, opt, false);
    const bool graph_faster =
        copy_graph.ok && (!copy_stream.ok || copy_graph.median_s < copy_stream.median_s);
    const Timing copy = graph_faster ? copy_graph : copy_stream;
    std::vector<Row> rows;
    rows.push_back(row("memcpy", graph_faster ? "D2D graph" : "D2D stream", copy));
    rows.push_back(row("memcpy_alt", graph_faster ? "D2D stream" : "D2D graph",
                       graph_faster ? copy_stream : copy_graph));

    // cuBLAS geam.
    const bool geam_type = p.dtype == DType::kF32 || p.dtype == DType::kF64;
    if (have_cublas && geam_type && p.batch == 1) {
      const float f1 = 1, f0 = 0;
      const double d1 = 1, d0 = 0;
      const int m = static_cast<int>(p.rows), nn = static_cast<int>(p.cols);
      const int lda = static_cast<int>(p.in_ld()), ldc = static_cast<int>(p.out_ld());
      Timing t = TimePasses(
          [&](int i) {
            int rc;
            if (p.dtype == DType::kF32) {
              rc = cublas.sgeam(cublas.handle, 1, 0, m, nn, &f1, static_cast<const float*>(in[i]),
                                lda, &f0, static_cast<const float*>(out[i]), ldc,
                                static_cast<float*>(out[i]), ldc);
            } else {
              rc = cublas.dgeam(cublas.handle, 1, 0, m, nn, &d1, static_cast<const double*>(in[i]),
                                lda, &d0, static_cast<const double*>(out[i]), ldc,
                                static_cast<double*>(out[i]), ldc);
            }
            return rc == 0 ? Status::OK()
                           : Status::Internal("cublas geam status " + std::to_string(rc));
          },
          n, s, opt);
      rows.push_back(row("cublas_geam", p.dtype == DType::kF32 ? "cublasSgeam" : "cublasDgeam", t));
    }

    // Family: check every valid configuration, then time it.
    auto run_config = [&](const TransposeConfig& c) {
      Timing t;
      Status cs = kernels::check::Poison(p, out[0], expected, s);
      if (cs.ok()) cs = kernels::Launch(c, p, in[0], out[0], s);
      if (cs.ok()) cs = kernels::check::CompareBytes(p, out[0], expected, out_bytes, s);
      if (!cs.ok()) {
        t.error = "check failed: " + cs.ToString();
        std::printf("  %s %s: %s\n", bp.label.c_str(), c.Name().c_str(), t.error.c_str());
        return t;
      }
      return TimePasses([&](int i) { return kernels::Launch(c, p, in[i], out[i], s); }, n, s, opt);
    };
    Row best;
    best.t.median_s = 0;
    std::vector<std::pair<std::string, TransposeConfig>> textbook = {
        {"naive", kernels::NaiveConfig()},
        {"tile", kernels::TextbookTileConfig()},
        {"tile_padded", kernels::TextbookPaddedTileConfig()}};
    std::vector<Row> textbook_rows(textbook.size());
    for (const TransposeConfig& c : kernels::EnumerateConfigs(p)) {
      Row r = row("family", c.Name(), run_config(c));
      for (size_t k = 0; k < textbook.size(); ++k)
        if (textbook[k].second == c) textbook_rows[k] = row(textbook[k].first, c.Name(), r.t);
      if (r.t.ok && (!best.t.ok || r.t.median_s < best.t.median_s)) best = r;
      all.push_back(r);
    }
    for (size_t k = 0; k < textbook.size(); ++k)
      if (!textbook_rows[k].method.empty()) rows.push_back(textbook_rows[k]);
    best.method = "family_best";
    rows.push_back(best);
    for (Row& r : rows) r.copy_s = copy.ok ? copy.median_s : 0;
    for (Row& r : all)
      if (r.problem == bp.label) r.copy_s = copy.ok ? copy.median_s : 0;

    // Print this problem's block.
    std::printf("\n%-28s %-12s %-30s %10s %9s %7s\n", bp.label.c_str(), "method", "config",
                "median_us", "GB/s", "%copy");
    for (const Row& r : rows) {
      if (r.t.ok) {
        std::printf("%-28s %-12s %-30s %10.2f %9.1f %6.1f%%\n", "", r.method.c_str(),
                    r.config.c_str(), r.t.median_s * 1e6, r.gbps(), r.pct());
      } else {
        std::printf("%-28s %-12s %-30s  failed: %s\n", "", r.method.c_str(), r.config.c_str(),
                    r.t.error.c_str());
      }
    }
    std::fflush(stdout);
    summary.insert(summary.end(), rows.begin(), rows.end());

    for (int i = 0; i < n; ++i) {
      cudaFree(in[i]);
      cudaFree(out[i]);
    }
    cudaFree(expected);
  }

  // Summary table: one line per problem.
  std::printf("\n%-24s %9s %14s %14s %14s %14s %14s  %s\n", "problem", "copy GB/s", "geam", "naive",
              "tile", "tile_padded", "family_best", "best config");
  for (size_t i = 0; i < summary.size();) {
    const std::string prob = summary[i].problem;
    std::string cells[5];
    std::string best_cfg;
    double copy_gbps = 0;
    for (; i < summary.size() && summary[i].problem == prob; ++i) {
      const Row& r = summary[i];
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.0f (%.0f%%)", r.gbps(), r.pct());
      const char* const kCols[] = {"cublas_geam", "naive", "tile", "tile_padded", "family_best"};
      if (r.method == "memcpy") copy_gbps = r.gbps();
      for (int k = 0; k < 5; ++k)
        if (r.method == kCols[k]) cells[k] = r.t.ok ? buf : "failed";
      if (r.method == "family_best") best_cfg = r.config;
    }
    for (auto& c : cells)
      if (c.empty()) c = "-";
    std::printf("%-24s %9.0f %14s %14s %14s %14s %14s  %s\n", prob.c_str(), copy_gbps,
                cells[0].c_str(), cells[1].c_str(), cells[2].c_str(), cells[3].c_str(),
                cells[4].c_str(), best_cfg.c_str());
  }
  if (!csv.empty()) WriteCsv(csv, summary);
  if (!all_csv.empty()) WriteCsv(all_csv, all);
  bool any_failed = false;
  for (const Row& r : all) any_failed |= !r.t.ok;
  if (any_failed) std::printf("\nSOME CONFIGURATIONS FAILED their check or launch (see above)\n");
  return any_failed ? 1 : 0;
}

}  // namespace
}  // namespace transposed

int main(int argc, char** argv) { return transposed::Main(argc, argv); }

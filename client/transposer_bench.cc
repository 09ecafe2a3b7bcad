// transposer_bench: the C++ user path (transposed::Transposer) on a GPU against the bandwidth
// the daemon stored for each problem. Part of the user-path benchmark (python/bench/bench_user_path.py
// writes the problem list and merges this program's JSON into its table; deploy/gpu.sh run).
//
//   transposer_bench --problems FILE --json OUT [--server ADDR] [--device I] [--host-calls N]
//
// FILE: one problem a line, "rows cols dtype batch ld_in ld_out label". Per problem: the daemon's
// answer (TUNE_IF_MISSING, through the Transposer), a bit-exact check against the reference
// kernel (problems up to 256 MiB), then on the same two buffers, as a job would call it:
//   per_call_gbps  median over N calls launched back to back, an event before each call (the time
//                  from one call's event to the next: that call's share of the stream);
//   b2b_gbps       the N calls' total time / N;
//   isolated_gbps  median over calls each made on an idle stream (synchronized before; the
//                  host's launch latency is inside the events);
//   host_us        wall time of issuing 200 calls (no synchronization) / 200;
// and once, host_us of N (default 2000) back-to-back calls of 256x256 f32.
// Exit status 1 when a check fails or a problem cannot run.
#include <cuda_runtime_api.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "client/client.h"
#include "client/transposer.h"
#include "core/problem.h"
#include "transposed/kernels/launch.h"

namespace transposed {
namespace {

using Clock = std::chrono::steady_clock;

Status Cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::OK();
  return Status::Internal(std::string(what) + ": " + cudaGetErrorString(e));
}

struct Buffers {
  void* in = nullptr;
  void* out = nullptr;
  ~Buffers() {
    if (in) cudaFree(in);
    if (out) cudaFree(out);
  }
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Fills `bytes` at `dst` with seeded random bytes through a host staging buffer.
Status FillRandom(void* dst, int64_t bytes, uint64_t seed) {
  std::vector<uint64_t> host((bytes + 7) / 8);
  std::mt19937_64 g(seed);
  for (auto& w : host) w = g();
  return Cuda(cudaMemcpy(dst, host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy(fill)");
}

Status CheckExact(Transposer& t, const Problem& p, const Buffers& b, cudaStream_t s) {
  const int64_t in_b = p.in_alloc_bytes(), out_b = p.out_alloc_bytes();
  TR_RETURN_IF_ERROR(FillRandom(b.in, in_b, 42));
  void* ref = nullptr;
  TR_RETURN_IF_ERROR(Cuda(cudaMalloc(&ref, out_b), "cudaMalloc(reference)"));
  std::vector<unsigned char> got(out_b), want(out_b);
  Status st = Cuda(cudaMemset(ref, 0x5a, out_b), "cudaMemset");
  if (st.ok()) st = Cuda(cudaMemset(b.out, 0x5a, out_b), "cudaMemset");
  if (st.ok()) st = kernels::LaunchReference(p, b.in, ref, s);
  if (st.ok()) st = t.Transpose(p, b.in, b.out, s);
  if (st.ok()) st = Cuda(cudaStreamSynchronize(s), "check");
  if (st.ok()) st = Cuda(cudaMemcpy(got.data(), b.out, out_b, cudaMemcpyDeviceToHost), "copy");
  if (st.ok()) st = Cuda(cudaMemcpy(want.data(), ref, out_b, cudaMemcpyDeviceToHost), "copy");
  cudaFree(ref);
  TR_RETURN_IF_ERROR(st);
  if (got != want) return Status::Internal(p.ToString() + ": output differs from the reference");
  return Status::OK();
}

StatusOr<nlohmann::json> Measure(Transposer& t, const Problem& p, const std::string& label,
                                 cudaStream_t s, std::vector<cudaEvent_t>& ev) {
  TR_ASSIGN_OR_RETURN(auto plan, t.Prepare(p));
  Buffers b;
  TR_RETURN_IF_ERROR(Cuda(cudaMalloc(&b.in, p.in_alloc_bytes()), "cudaMalloc(in)"));
  TR_RETURN_IF_ERROR(Cuda(cudaMalloc(&b.out, p.out_alloc_bytes()), "cudaMalloc(out)"));
  nlohmann::json r;
  r["problem"] = p.ToString();
  r["label"] = label;
  r["variant"] = plan->answer.variant().name();
  r["source"] = v1::Source_Name(plan->answer.source());
  r["stored_gbps"] = plan->answer.gbps();
  if (p.in_alloc_bytes() <= (int64_t{256} << 20)) {
    TR_RETURN_IF_ERROR(CheckExact(t, p, b, s));
    r["bit_exact"] = true;
  } else {
    TR_RETURN_IF_ERROR(Cuda(cudaMemset(b.in, 0x37, p.in_alloc_bytes()), "cudaMemset"));
  }
  const auto call = [&] { return t.Transpose(p, b.in, b.out, s); };
  for (int i = 0; i < 3; ++i) TR_RETURN_IF_ERROR(call());
  TR_RETURN_IF_ERROR(Cuda(cudaStreamSynchronize(s), "warm-up"));
  // Calls: enough for ~0.2 s of kernels, 20..200.
  TR_RETURN_IF_ERROR(Cuda(cudaEventRecord(ev[0], s), "event"));
  TR_RETURN_IF_ERROR(call());
  TR_RETURN_IF_ERROR(Cuda(cudaEventRecord(ev[1], s), "event"));
  TR_RETURN_IF_ERROR(Cuda(cudaEventSynchronize(ev[1]), "sync"));
  float one_ms = 0;
  cudaEventElapsedTime(&one_ms, ev[0], ev[1]);
  const int n = std::clamp(static_cast<int>(200.0 / std::max(1e-3f, one_ms)), 20,
                           static_cast<int>(ev.size()) - 1);
  TR_RETURN_IF_ERROR(Cuda(cudaEventRecord(ev[0], s), "event"));
  for (int i = 0; i < n; ++i) {
    TR_RETURN_IF_ERROR(call());
    TR_RETURN_IF_ERROR(Cuda(cudaEventRecord(ev[i + 1], s), "event"));
  }
  TR_RETURN_IF_ERROR(Cuda(cudaEventSynchronize(ev[n]), "sync"));
  std::vector<double> per;
  for (int i = 0; i < n; ++i) {
    float ms = 0;
    cudaEventElapsedTime(&ms, ev[i], ev[i + 1]);
    per.push_back(ms * 1e-3);
  }
  float all_ms = 0;
  cudaEventElapsedTime(&all_ms, ev[0], ev[n]);
  std::vector<double> isolated;
  for (int i = 0; i < std::min(n, 50); ++i) {
    TR_RETURN_IF_ERROR(Cuda(cudaStreamSynchronize(s), "sync"));
    TR_RETURN_IF_ERROR(Cuda(cudaEventRecord(ev[0], s), "event"));
    TR_RETURN_IF_ERROR(call());
    TR_RETURN_IF_ERROR(Cuda(cudaEventRecord(ev[1], s), "event"));
    TR_RETURN_IF_ERROR(Cuda(cudaEventSynchronize(ev[1]), "sync"));
    float ms = 0;
    cudaEventElapsedTime(&ms, ev[0], ev[1]);
    isolated.push_back(ms * 1e-3);
  }
  const int h = 200;
  TR_RETURN_IF_ERROR(Cuda(cudaStreamSynchronize(s), "sync"));
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < h; ++i) TR_RETURN_IF_ERROR(call());
  const double host_s = std::chrono::duration<double>(Clock::now() - t0).count() / h;
  TR_RETURN_IF_ERROR(Cuda(cudaStreamSynchronize(s), "sync"));
  r["calls"] = n;
  r["per_call_gbps"] = EffectiveGBps(p.bytes(), Median(per));
  r["b2b_gbps"] = EffectiveGBps(p.bytes(), all_ms * 1e-3 / n);
  r["isolated_gbps"] = EffectiveGBps(p.bytes(), Median(isolated));
  r["host_us"] = host_s * 1e6;
  return r;
}

StatusOr<double> HostCost(Transposer& t, int calls, cudaStream_t s) {
  Problem p;
  p.rows = p.cols = 256;
  p.dtype = DType::kF32;
  Buffers b;
  TR_RETURN_IF_ERROR(Cuda(cudaMalloc(&b.in, p.in_alloc_bytes()), "cudaMalloc(in)"));
  TR_RETURN_IF_ERROR(Cuda(cudaMalloc(&b.out, p.out_alloc_bytes()), "cudaMalloc(out)"));
  for (int i = 0; i < 10; ++i) TR_RETURN_IF_ERROR(t.Transpose(p, b.in, b.out, s));
  TR_RETURN_IF_ERROR(Cuda(cudaStreamSynchronize(s), "sync"));
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < calls; ++i) TR_RETURN_IF_ERROR(t.Transpose(p, b.in, b.out, s));
  TR_RETURN_IF_ERROR(Cuda(cudaStreamSynchronize(s), "sync"));
  return std::chrono::duration<double>(Clock::now() - t0).count() / calls * 1e6;
}

int Run(const std::string& server, const std::string& problems, const std::string& json_path,
        int device, int host_calls) {
  std::ifstream in(problems);
  if (!in) {
    std::cerr << "transposer_bench: cannot read " << problems << "\n";
    return 2;
  }
  std::vector<std::pair<Problem, std::string>> list;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    Problem p;
    std::string dtype, label;
    ls >> p.rows >> p.cols >> dtype >> p.batch >> p.ld_in >> p.ld_out >> label;
    auto t = ParseDType(dtype);
    if (!ls || !t) {
      std::cerr << "transposer_bench: bad line '" << line << "'\n";
      return 2;
    }
    p.dtype = *t;
    list.emplace_back(p, label);
  }
  ClientOptions o;
  o.deadline_seconds = 900;
  auto client = Client::Connect(server, o);
  if (!client.ok()) {
    std::cerr << "transposer_bench: " << client.status().ToString() << "\n";
    return 1;
  }
  if (cudaSetDevice(device) != cudaSuccess) {
    std::cerr << "transposer_bench: no CUDA device " << device << "\n";
    return 1;
  }
  Transposer::Options to;
  to.policy = v1::TUNE_IF_MISSING;
  auto t = Transposer::ForDevice(client->get(), device, to);
  if (!t.ok()) {
    std::cerr << "transposer_bench: " << t.status().ToString() << "\n";
    return 1;
  }
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  std::vector<cudaEvent_t> ev(257);
  for (auto& e : ev) cudaEventCreate(&e);
  nlohmann::json out;
  out["results"] = nlohmann::json::array();
  int status = 0;
  for (const auto& [p, label] : list) {
    auto r = Measure(**t, p, label, s, ev);
    if (!r.ok()) {
      std::cerr << "transposer_bench: " << p.ToString() << ": " << r.status().ToString() << "\n";
      out["results"].push_back({{"problem", p.ToString()}, {"label", label},
                                {"error", r.status().ToString()}});
      status = 1;
      continue;
    }
    const double stored = (*r)["stored_gbps"];
    std::cout << p.ToString() << " " << (*r)["variant"].get<std::string>() << ": stored "
              << stored << " GB/s, per call " << (*r)["per_call_gbps"].get<double>() << ", b2b "
              << (*r)["b2b_gbps"].get<double>() << ", isolated "
              << (*r)["isolated_gbps"].get<double>() << ", host "
              << (*r)["host_us"].get<double>() << " us\n";
    out["results"].push_back(*r);
  }
  auto host = HostCost(**t, host_calls, s);
  if (host.ok()) {
    out["host_us_256_f32"] = *host;
    out["host_calls"] = host_calls;
    std::cout << "host cost, " << host_calls << " calls of 256x256 f32 back to back: " << *host
              << " us a call\n";
  } else {
    std::cerr << "transposer_bench: host cost: " << host.status().ToString() << "\n";
    status = 1;
  }
  for (auto& e : ev) cudaEventDestroy(e);
  cudaStreamDestroy(s);
  std::ofstream(json_path) << out.dump(1) << "\n";
  return status;
}

}  // namespace
}  // namespace transposed

int main(int argc, char** argv) {
  const char* env = std::getenv("TRANSPOSED_SERVER");
  std::string server = (env != nullptr && *env != '\0') ? env : "127.0.0.1:50051";
  std::string problems, json_path;
  int device = 0, host_calls = 2000;
  CLI::App app{"transposer_bench: the C++ user path against the daemon's stored bandwidth"};
  app.add_option("--server", server, "Daemon address")->capture_default_str();
  app.add_option("--problems", problems, "Problem list")->required();
  app.add_option("--json", json_path, "Result file")->required();
  app.add_option("--device", device, "CUDA device index")->capture_default_str();
  app.add_option("--host-calls", host_calls, "Calls of the host-cost loop")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return transposed::Run(server, problems, json_path, device, host_calls);
}

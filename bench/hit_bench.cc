// hit_bench: what a cache hit costs a client, against the daemon's cheapest call, the standard
// health check, measured with C++ gRPC clients (docs/lookups.md "The benchmark").
//
// It starts a daemon (--daemon PATH: the `transposed` binary, CPU backend, a fresh database in a
// temporary directory, through testing::DaemonProcess) or uses a running one (--address), tunes
// one problem so that it is stored, then for each client count runs, for --seconds each:
//   health  grpc.health.v1.Health/Check (testing/grpc_health.h)
//   hit     GetConfig of the stored problem (CACHE_ONLY: a miss would be an error)
// with that many client threads, each with its own channel (its own connection, as separate
// processes would have) calling back to back. Each (clients, call) pair runs --repeat times,
// the calls interleaved, and the run of median throughput is reported: calls per second, p50 and
// p99 latency, the hit's p50 over the health check's, and the CPU time per call of the daemon
// (its utime + stime from /proc, when hit_bench started it) and of the clients (this process).
//
// --daemon-cpus / --client-cpus (Linux CPU lists, "0-1", "2-15") pin the daemon it starts and
// the client threads (sched_setaffinity: the daemon inherits the mask it is spawned with), so
// that clients and daemon do not share cores; --pin N is "--daemon-cpus <the first N CPUs this
// process may use> --client-cpus <the others>". Without pinning, on a small machine the clients'
// own work (a hit's answer is ~2 KB to parse, a health answer 2 bytes) is part of every figure.
//
//   hit_bench --daemon build/bin/transposed [--clients 1,8,64] [--seconds 3] [--repeat 3]
//             [--pin 2 | --daemon-cpus LIST --client-cpus LIST]
//             [--problem 256x256] [--dtype f32] [--daemon-arg ARG ...]
//   hit_bench --address 127.0.0.1:50051 ...
// Exit 1 when a call fails, 2 on a bad argument (or a CPU list this process may not use).
#include <grpcpp/grpcpp.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "testing/daemon_process.h"
#include "testing/grpc_health.h"
#include "transposed/v1/transposed.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace v1 = transposed::v1;

struct Options {
  std::string address;
  std::string daemon;
  std::vector<std::string> daemon_args;
  std::vector<int> clients = {1, 8, 64};
  double seconds = 3;
  int repeat = 3;
  int64_t rows = 256;
  int64_t cols = 256;
  std::string dtype = "f32";
  std::vector<int> daemon_cpus;  // empty: not pinned
  std::vector<int> client_cpus;
  int pin = 0;                   // --pin N
};

struct Run {
  double calls_per_s = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  double daemon_us = -1;  // CPU time per call; < 0 when unknown
  double client_us = 0;
};

// "0-1,4" -> {0, 1, 4}; empty on a malformed list.
std::vector<int> ParseCpuList(const std::string& v) {
  std::vector<int> out;
  std::stringstream in(v);
  std::string part;
  while (std::getline(in, part, ',')) {
    int lo = 0, hi = 0;
    char tail = 0;
    if (std::sscanf(part.c_str(), "%d-%d%c", &lo, &hi, &tail) == 2 && lo <= hi && lo >= 0) {
      for (int c = lo; c <= hi; ++c) out.push_back(c);
    } else if (std::sscanf(part.c_str(), "%d%c", &lo, &tail) == 1 && lo >= 0) {
      out.push_back(lo);
    } else {
      return {};
    }
  }
  return out;
}

std::string CpuListText(const std::vector<int>& cpus) {
  std::string out;
  for (int c : cpus) out += (out.empty() ? "" : ",") + std::to_string(c);
  return out;
}

// Pins the calling thread (and the threads and processes it starts from now on) to `cpus`.
bool PinTo(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c >= CPU_SETSIZE) return false;
    CPU_SET(c, &set);
  }
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

// The CPUs this process may run on.
std::vector<int> AllowedCpus() {
  std::vector<int> out;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

// CPU seconds (user + system) used so far by process `pid`, all its threads; < 0 if unreadable.
double ProcessCpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');  // the command name may hold spaces
  if (paren == std::string::npos) return -1;
  std::istringstream fields(stat.substr(paren + 2));
  std::string f;
  unsigned long long utime = 0, stime = 0;
  // Fields 3.. (state first); utime and stime are fields 14 and 15.
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::stoull(f);
    if (i == 15) stime = std::stoull(f);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

std::shared_ptr<grpc::Channel> NewChannel(const std::string& address, int client) {
  grpc::ChannelArguments args;
  // A connection of its own, as a separate client process would have.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("transposed.bench.client", client);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

v1::GetConfigRequest HitRequest(const Options& o, v1::CachePolicy policy) {
  v1::GetConfigRequest req;
  req.mutable_problem()->set_rows(o.rows);
  req.mutable_problem()->set_cols(o.cols);
  req.mutable_problem()->set_dtype(o.dtype);
  req.set_policy(policy);
  return req;
}

// `clients` threads calling `kind` ("hit" or "health") back to back for o.seconds; `daemon` the
// daemon's process id (-1: unknown, a daemon at --address).
Run Measure(const Options& o, const std::string& address, int clients, const std::string& kind,
            pid_t daemon) {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < clients; ++i) {
    channels.push_back(NewChannel(address, i));
    channels.back()->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10));
  }
  const v1::GetConfigRequest hit = HitRequest(o, v1::CACHE_ONLY);
  std::vector<std::vector<double>> latencies(clients);
  std::atomic<bool> failed{false};
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  Clock::time_point end;
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      auto stub = v1::Transposer::NewStub(channels[i]);
      std::vector<double>& lat = latencies[i];
      lat.reserve(1 << 16);
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      while (Clock::now() < end && !failed.load()) {
        const auto start = Clock::now();
        grpc::Status s;
        if (kind == "hit") {
          grpc::ClientContext ctx;
          ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
          v1::Answer a;
          s = stub->GetConfig(&ctx, hit, &a);
          if (s.ok() && a.source() != v1::SOURCE_CACHE)
            s = grpc::Status(grpc::StatusCode::INTERNAL, "not a cache hit");
        } else {
          std::string served;
          s = transposed::testing::HealthCheck(channels[i], "", &served);
        }
        if (!s.ok()) {
          std::fprintf(stderr, "hit_bench: %s: %s\n", kind.c_str(), s.error_message().c_str());
          failed.store(true);
          break;
        }
        lat.push_back(std::chrono::duration<double>(Clock::now() - start).count());
      }
    });
  }
  while (ready.load() < clients) std::this_thread::yield();
  const double daemon_cpu0 = daemon > 0 ? ProcessCpuSeconds(daemon) : -1;
  const double client_cpu0 = SelfCpuSeconds();
  const auto start = Clock::now();
  end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  go.store(true);
  for (auto& t : threads) t.join();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  const double daemon_cpu = daemon > 0 ? ProcessCpuSeconds(daemon) - daemon_cpu0 : -1;
  const double client_cpu = SelfCpuSeconds() - client_cpu0;
  if (failed.load()) std::exit(1);
  std::vector<double> all;
  for (const auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  Run r;
  if (all.empty()) return r;
  r.calls_per_s = static_cast<double>(all.size()) / wall;
  r.p50_ms = all[all.size() / 2] * 1e3;
  r.p99_ms = all[std::min(all.size() - 1, all.size() * 99 / 100)] * 1e3;
  if (daemon_cpu0 >= 0 && daemon_cpu >= 0) r.daemon_us = daemon_cpu / all.size() * 1e6;
  r.client_us = client_cpu / all.size() * 1e6;
  return r;
}

Run Median(std::vector<Run> runs) {
  std::sort(runs.begin(), runs.end(),
            [](const Run& a, const Run& b) { return a.calls_per_s < b.calls_per_s; });
  return runs[runs.size() / 2];
}

int Usage() {
  std::fprintf(stderr,
               "usage: hit_bench (--daemon PATH [--daemon-arg ARG]... | --address HOST:PORT)\n"
               "                 [--clients 1,8,64] [--seconds 3] [--repeat 3] "
               "[--problem ROWSxCOLS] [--dtype f32]\n"
               "                 [--pin N | --daemon-cpus LIST --client-cpus LIST]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return Usage();
    const std::string v = argv[++i];
    if (a == "--address") {
      o.address = v;
    } else if (a == "--daemon") {
      o.daemon = v;
    } else if (a == "--daemon-arg") {
      o.daemon_args.push_back(v);
    } else if (a == "--clients") {
      o.clients.clear();
      for (size_t p = 0; p <= v.size();) {
        const size_t comma = std::min(v.find(',', p), v.size());
        o.clients.push_back(std::atoi(v.substr(p, comma - p).c_str()));
        p = comma + 1;
      }
    } else if (a == "--seconds") {
      o.seconds = std::atof(v.c_str());
    } else if (a == "--repeat") {
      o.repeat = std::max(1, std::atoi(v.c_str()));
    } else if (a == "--problem") {
      if (std::sscanf(v.c_str(), "%ldx%ld", &o.rows, &o.cols) != 2) return Usage();
    } else if (a == "--dtype") {
      o.dtype = v;
    } else if (a == "--daemon-cpus" || a == "--client-cpus") {
      (a == "--daemon-cpus" ? o.daemon_cpus : o.client_cpus) = ParseCpuList(v);
      if ((a == "--daemon-cpus" ? o.daemon_cpus : o.client_cpus).empty()) return Usage();
    } else if (a == "--pin") {
      o.pin = std::atoi(v.c_str());
      if (o.pin < 1) return Usage();
    } else {
      return Usage();
    }
  }
  if (o.address.empty() == o.daemon.empty()) return Usage();
  for (int c : o.clients)
    if (c < 1) return Usage();
  if (o.pin > 0) {
    if (!o.daemon_cpus.empty() || !o.client_cpus.empty()) return Usage();
    const std::vector<int> allowed = AllowedCpus();
    if (static_cast<int>(allowed.size()) <= o.pin) {
      std::fprintf(stderr, "hit_bench: --pin %d needs more than %d CPUs; this process may use %zu\n",
                   o.pin, o.pin, allowed.size());
      return 2;
    }
    o.daemon_cpus.assign(allowed.begin(), allowed.begin() + o.pin);
    o.client_cpus.assign(allowed.begin() + o.pin, allowed.end());
  }
  if (o.daemon_cpus.empty() != o.client_cpus.empty() || (!o.daemon_cpus.empty() && o.daemon.empty()))
    return Usage();  // both lists or neither, and only for a daemon hit_bench starts

  std::unique_ptr<transposed::testing::DaemonProcess> daemon;
  std::string address = o.address;
  if (!o.daemon.empty()) {
    transposed::testing::DaemonOptions d;
    d.binary = o.daemon;
    d.backend = "cpu";
    d.tune_budget_seconds = 2;
    d.extra_args = o.daemon_args;
    daemon = std::make_unique<transposed::testing::DaemonProcess>(d);
    // The daemon inherits the affinity of the thread that spawns it; the client threads (and
    // gRPC's own threads of this process, all started later) that of this thread afterwards.
    if (!o.daemon_cpus.empty() && !PinTo(o.daemon_cpus)) {
      std::fprintf(stderr, "hit_bench: cannot pin to CPUs %s\n", CpuListText(o.daemon_cpus).c_str());
      return 2;
    }
    const transposed::Status s = daemon->Start();
    if (!o.client_cpus.empty() && !PinTo(o.client_cpus)) {
      std::fprintf(stderr, "hit_bench: cannot pin to CPUs %s\n", CpuListText(o.client_cpus).c_str());
      return 2;
    }
    if (!s.ok()) {
      std::fprintf(stderr, "hit_bench: starting the daemon: %s\n", s.ToString().c_str());
      return 1;
    }
    address = daemon->address();
    // For a profiler: perf record -p PID.
    std::printf("daemon pid %d at %s\n", static_cast<int>(daemon->pid()), address.c_str());
    std::fflush(stdout);
  }
  {
    auto stub = v1::Transposer::NewStub(NewChannel(address, -1));
    grpc::ClientContext ctx;
    v1::Answer a;
    const grpc::Status s = stub->GetConfig(&ctx, HitRequest(o, v1::TUNE_IF_MISSING), &a);
    if (!s.ok()) {
      std::fprintf(stderr, "hit_bench: tuning the problem: %s\n", s.error_message().c_str());
      return 1;
    }
    std::printf("problem %ldx%ld %s: %s (%s)\n", o.rows, o.cols, o.dtype.c_str(),
                a.variant().name().c_str(), a.source() == v1::SOURCE_TUNED ? "tuned" : "cached");
  }
  std::printf("%u hardware threads; %.1f s per run, median of %d runs (interleaved)\n",
              std::thread::hardware_concurrency(), o.seconds, o.repeat);
  if (!o.daemon_cpus.empty())
    std::printf("daemon pinned to CPUs %s, clients to CPUs %s\n",
                CpuListText(o.daemon_cpus).c_str(), CpuListText(o.client_cpus).c_str());
  else
    std::printf("not pinned: clients and daemon share the CPUs\n");
  std::printf("\n| clients | call | calls/s | p50 ms | p99 ms | hit p50 / health p50 "
              "| daemon CPU us/call | client CPU us/call |\n");
  std::printf("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  const pid_t daemon_pid = daemon ? daemon->pid() : -1;
  auto cpu = [](double us) { return us < 0 ? std::string("-") : std::to_string(static_cast<int>(us + 0.5)); };
  for (int clients : o.clients) {
    std::vector<Run> health, hit;
    for (int r = 0; r < o.repeat; ++r) {
      health.push_back(Measure(o, address, clients, "health", daemon_pid));
      hit.push_back(Measure(o, address, clients, "hit", daemon_pid));
    }
    const Run h = Median(health), c = Median(hit);
    std::printf("| %d | health | %.0f | %.3f | %.3f | | %s | %s |\n", clients, h.calls_per_s,
                h.p50_ms, h.p99_ms, cpu(h.daemon_us).c_str(), cpu(h.client_us).c_str());
    std::printf("| %d | hit | %.0f | %.3f | %.3f | %.2f | %s | %s |\n", clients, c.calls_per_s,
                c.p50_ms, c.p99_ms, h.p50_ms > 0 ? c.p50_ms / h.p50_ms : 0,
                cpu(c.daemon_us).c_str(), cpu(c.client_us).c_str());
    std::fflush(stdout);
  }
  if (daemon) {
    const transposed::Status s = daemon->Stop();
    if (s.ok()) daemon->RemoveDir();
  }
  return 0;
}

// Fuzzes the real daemon (shared testing::DaemonProcess, CPU backend): random and mutated
// requests of every RPC, as typed messages and as raw (mutated) bytes through a generic stub,
// from a fixed seed for a bounded time (TRANSPOSED_FUZZ_SECONDS, default 4). Every answer must be
// OK or a client-error code with a short, printable message; the daemon must keep serving and
// exit 0 on SIGTERM. Requests that would tune a large problem are not sent (a tune is real work,
// not a fuzz target).
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <future>
#include <random>
#include <string>

#include "testing/daemon_process.h"
#include "transposed/v1/transposed.grpc.pb.h"

namespace transposed {
namespace {

using namespace std::chrono_literals;

class Fuzzer {
 public:
  explicit Fuzzer(uint64_t seed) : rng_(seed) {}

  int64_t Int() {
    switch (rng_() % 8) {
      case 0: return 0;
      case 1: return -static_cast<int64_t>(rng_() % 1000);
      case 2: return static_cast<int64_t>(rng_());  // anything, huge included
      case 3: return std::numeric_limits<int64_t>::max();
      case 4: return std::numeric_limits<int64_t>::min();
      default: return 1 + static_cast<int64_t>(rng_() % 96);
    }
  }
  std::string Str() {
    static const std::string kWords[] = {"f32", "F16", "bf16", "c128", "i8", "float", "", "x",
                                         "tile64x64.rows8.vec16.pad1", "0.1.0"};
    switch (rng_() % 4) {
      case 0: return kWords[rng_() % 10];
      case 1: return std::string(rng_() % 20000, static_cast<char>('a' + rng_() % 26));
      default: {
        // Any ASCII, control bytes included (proto3 strings must be UTF-8: the raw-bytes path
        // below sends invalid UTF-8).
        std::string s(rng_() % 40, '\0');
        for (char& c : s) c = static_cast<char>(rng_() % 128);
        return s;
      }
    }
  }
  double Double() {
    switch (rng_() % 6) {
      case 0: return std::nan("");
      case 1: return HUGE_VAL;
      case 2: return -1;
      case 3: return 1e12;
      default: return 0.001 * static_cast<double>(rng_() % 2000);
    }
  }
  void Problem(v1::Problem* p) {
    p->set_rows(Int());
    p->set_cols(Int());
    if (rng_() % 2) p->set_batch(Int());
    p->set_dtype(Str());
    if (rng_() % 3 == 0) p->set_ld_in(Int());
    if (rng_() % 3 == 0) p->set_ld_out(Int());
    if (rng_() % 3 == 0) p->mutable_device()->set_index(static_cast<int32_t>(Int()));
    if (rng_() % 5 == 0) p->mutable_device()->set_uuid(Str());
  }
  void Filter(v1::EntryFilter* f) {
    if (rng_() % 2) f->set_dtype(Str());
    if (rng_() % 3 == 0) f->set_rows(Int());
    if (rng_() % 3 == 0) f->set_cols(Int());
    if (rng_() % 4 == 0) f->set_variant(Str());
    if (rng_() % 4 == 0) f->set_device_fingerprint(Str());
    if (rng_() % 4 == 0) f->set_library_version(Str());
    if (rng_() % 4 == 0) f->set_tuned_before_unix_ms(Int());
    if (rng_() % 5 == 0) f->mutable_device()->set_index(static_cast<int32_t>(Int()));
  }
  // Flips, inserts and deletes a few bytes.
  std::string Mutate(std::string bytes) {
    const int edits = 1 + static_cast<int>(rng_() % 8);
    for (int i = 0; i < edits; ++i) {
      const size_t pos = bytes.empty() ? 0 : rng_() % bytes.size();
      switch (rng_() % 3) {
        case 0: if (!bytes.empty()) bytes[pos] = static_cast<char>(rng_() % 256); break;
        case 1: bytes.insert(pos, 1, static_cast<char>(rng_() % 256)); break;
        default: if (!bytes.empty()) bytes.erase(pos, 1);
      }
    }
    return bytes;
  }
  uint64_t Next() { return rng_(); }

 private:
  std::mt19937_64 rng_;
};

// Whether a request would make the daemon tune something bigger than a fuzz run should.
bool TunesLarge(const v1::Problem& p) {
  const double elems = static_cast<double>(p.rows()) * static_cast<double>(p.cols()) *
                       static_cast<double>(p.has_batch() ? p.batch() : 1);
  return p.rows() > 0 && p.cols() > 0 && (!p.has_batch() || p.batch() > 0) &&
         (elems > 65536 || p.rows() > 4096 || p.cols() > 4096 || p.ld_in() > 4096 ||
          p.ld_out() > 4096 || (p.has_batch() && p.batch() > 16));
}

void CheckStatus(const grpc::Status& s, const std::string& what, int* internal) {
  if (s.ok()) return;
  const auto code = s.error_code();
  const bool expected =
      code == grpc::StatusCode::INVALID_ARGUMENT || code == grpc::StatusCode::NOT_FOUND ||
      code == grpc::StatusCode::RESOURCE_EXHAUSTED ||
      code == grpc::StatusCode::DEADLINE_EXCEEDED || code == grpc::StatusCode::UNAVAILABLE ||
      code == grpc::StatusCode::UNIMPLEMENTED;
  if (!expected) ++*internal;
  EXPECT_TRUE(expected) << what << ": " << code << " " << s.error_message();
  EXPECT_LE(s.error_message().size(), 1100u) << what;
  for (char c : s.error_message())
    ASSERT_TRUE(c >= 0x20 && c < 0x7f) << what << ": unprintable byte in " << s.error_message();
}

TEST(DaemonFuzzTest, RandomAndMutatedRequestsNeverBreakTheDaemon) {
  testing::DaemonOptions o;
  o.binary = TRANSPOSED_BINARY;
  o.tune_budget_seconds = 0.2;
  testing::DaemonProcess daemon(o);
  Status started = daemon.Start();
  ASSERT_TRUE(started.ok()) << started.ToString();
  auto channel = grpc::CreateChannel(daemon.address(), grpc::InsecureChannelCredentials());
  auto stub = v1::Transposer::NewStub(channel);
  grpc::GenericStub generic(channel);

  const char* env = std::getenv("TRANSPOSED_FUZZ_SECONDS");
  const double seconds = env != nullptr ? std::atof(env) : 4.0;
  Fuzzer f(20261123);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int calls = 0, internal = 0, skipped = 0;
  auto deadline = [] { return std::chrono::system_clock::now() + 20s; };
  while (std::chrono::steady_clock::now() < end && internal < 5) {
    ++calls;
    const uint64_t kind = f.Next() % 6;
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline());
    if (kind == 0) {
      v1::GetConfigRequest req;
      f.Problem(req.mutable_problem());
      req.set_policy(static_cast<v1::CachePolicy>(f.Next() % 4));
      if (req.policy() != v1::CACHE_ONLY && TunesLarge(req.problem())) req.set_policy(v1::CACHE_ONLY);
      v1::Answer a;
      CheckStatus(stub->GetConfig(&ctx, req, &a), "GetConfig " + req.ShortDebugString().substr(0, 200),
                  &internal);
    } else if (kind == 1) {
      v1::TuneRequest req;
      f.Problem(req.mutable_problem());
      req.set_budget_seconds(f.Double());
      if (TunesLarge(req.problem()) || req.budget_seconds() > 0.5) {
        ++skipped;
        continue;
      }
      auto reader = stub->Tune(&ctx, req);
      v1::TuneProgress msg;
      while (reader->Read(&msg)) {
      }
      CheckStatus(reader->Finish(), "Tune", &internal);
    } else if (kind == 2) {
      v1::ListEntriesRequest req;
      f.Filter(req.mutable_filter());
      req.set_include_candidates(f.Next() % 2);
      req.set_page_size(static_cast<int32_t>(f.Int()));
      if (f.Next() % 3 == 0) req.set_page_token(f.Str());
      v1::ListEntriesResponse r;
      CheckStatus(stub->ListEntries(&ctx, req, &r), "ListEntries", &internal);
    } else if (kind == 3) {
      v1::DeleteEntriesRequest req;
      f.Filter(req.mutable_filter());
      // Never an empty filter with all: the fuzz run keeps its cache.
      req.set_all(false);
      v1::DeleteEntriesResponse r;
      CheckStatus(stub->DeleteEntries(&ctx, req, &r), "DeleteEntries", &internal);
    } else {
      // Raw bytes: a valid request, serialized and mutated, to every method.
      static const char* kMethods[] = {"GetConfig", "ListEntries", "DeleteEntries", "ListDevices"};
      const std::string method = kMethods[f.Next() % 4];
      std::string bytes;
      bool parses = true;
      if (method == "GetConfig") {
        v1::GetConfigRequest req;
        f.Problem(req.mutable_problem());
        req.set_policy(v1::CACHE_ONLY);
        bytes = f.Mutate(req.SerializeAsString());
        v1::GetConfigRequest parsed;
        parses = parsed.ParseFromString(bytes);
        if (parses && parsed.policy() != v1::CACHE_ONLY &&
            TunesLarge(parsed.problem())) {
          ++skipped;
          continue;
        }
      } else if (method == "ListEntries") {
        v1::ListEntriesRequest req;
        f.Filter(req.mutable_filter());
        bytes = f.Mutate(req.SerializeAsString());
        parses = v1::ListEntriesRequest().ParseFromString(bytes);
      } else if (method == "DeleteEntries") {
        v1::DeleteEntriesRequest req;
        f.Filter(req.mutable_filter());
        req.mutable_filter()->set_rows(1 + f.Next() % 1000000);  // never empty
        bytes = f.Mutate(req.SerializeAsString());
        v1::DeleteEntriesRequest parsed;
        parses = parsed.ParseFromString(bytes);
        if (parses && (parsed.all() || parsed.filter().ByteSizeLong() == 0)) {
          ++skipped;
          continue;
        }
      } else {
        bytes = f.Mutate("");
        parses = v1::ListDevicesRequest().ParseFromString(bytes);
      }
      grpc::Slice slice(bytes);
      grpc::ByteBuffer request(&slice, 1);
      grpc::ByteBuffer response;
      std::promise<grpc::Status> done;
      generic.UnaryCall(&ctx, "/transposed.v1.Transposer/" + method, grpc::StubOptions(), &request,
                        &response, [&done](grpc::Status s) { done.set_value(std::move(s)); });
      grpc::Status s = done.get_future().get();
      // A body that is not a valid message (bad wire format, invalid UTF-8 in a string) is
      // refused by gRPC itself, before the service, with INTERNAL.
      if (!parses && s.error_code() == grpc::StatusCode::INTERNAL) continue;
      CheckStatus(s, "raw " + method, &internal);
    }
  }
  std::cerr << "fuzz: " << calls << " calls, " << skipped << " skipped\n";
  EXPECT_GT(calls, 50);
  // Still serving, and a clean exit.
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline());
  v1::ListDevicesResponse devices;
  EXPECT_TRUE(stub->ListDevices(&ctx, v1::ListDevicesRequest(), &devices).ok());
  Status stopped = daemon.Stop();
  EXPECT_TRUE(stopped.ok()) << stopped.ToString();
  if (!::testing::Test::HasFailure()) daemon.RemoveDir();
}

}  // namespace
}  // namespace transposed

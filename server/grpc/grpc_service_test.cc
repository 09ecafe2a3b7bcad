// The gRPC shell end to end in one process: a real server on an ephemeral port, a FakeBackend
// behind the service, and the generated stub as the client.
#include "server/grpc/grpc_service.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

#include "store/store.h"
#include "tuner/fake_backend.h"

namespace transposed {
namespace {

using namespace std::chrono_literals;

// Counts what the interceptor reports: (service, method, code) -> calls.
class CountingRecorder : public RpcRecorder {
 public:
  Series* SeriesOf(const std::string& service, const std::string& method,
                   grpc::StatusCode code) override {
    std::lock_guard<std::mutex> l(mu_);
    auto& kept = series_[{service, method, code}];
    if (!kept) kept = std::make_unique<Counted>(this, std::make_tuple(service, method, code));
    ++resolved_;
    return kept.get();
  }
  int Calls(const std::string& method, grpc::StatusCode code) {
    std::lock_guard<std::mutex> l(mu_);
    return calls_[{"transposed.v1.Transposer", method, code}];
  }
  int negative() {
    std::lock_guard<std::mutex> l(mu_);
    return negative_;
  }
  // SeriesOf calls so far.
  int resolved() {
    std::lock_guard<std::mutex> l(mu_);
    return resolved_;
  }

 private:
  using Key = std::tuple<std::string, std::string, grpc::StatusCode>;
  struct Counted : Series {
    Counted(CountingRecorder* r, Key k) : recorder(r), key(std::move(k)) {}
    void Done(double seconds) override {
      std::lock_guard<std::mutex> l(recorder->mu_);
      ++recorder->calls_[key];
      if (seconds < 0) ++recorder->negative_;
    }
    CountingRecorder* const recorder;
    const Key key;
  };
  std::mutex mu_;
  std::map<Key, int> calls_;
  std::map<Key, std::unique_ptr<Counted>> series_;
  int negative_ = 0;
  int resolved_ = 0;
};

class GrpcServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = Store::Open(":memory:");
    ASSERT_TRUE(store.ok());
    store_ = std::move(store).value();
    std::vector<std::unique_ptr<Backend>> backends;
    std::vector<FakeCandidate> candidates = {
        {"slow", {4e-3}}, {"fast", {1e-3}}, {"broken", {1e-4}, Status::Internal("bad output")}};
    for (auto& c : candidates) c.check_sleep_s = 0.05;  // a tune takes > 0.15 s
    backends.push_back(std::make_unique<FakeBackend>(candidates));
    fake_ = static_cast<FakeBackend*>(backends.back().get());
    ServiceOptions options;
    options.tune.quick = {0, 1, 0, 1};
    options.tune.final = {0, 1, 0, 1};
    auto service = TransposeService::Create(std::move(backends), store_.get(), options);
    ASSERT_TRUE(service.ok());
    service_ = std::move(service).value();
    grpc_service_ = std::make_unique<GrpcTransposer>(service_.get(), &notes_);
    grpc::ServerBuilder builder;
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(std::make_unique<RpcInterceptorFactory>(&notes_, &recorder_));
    builder.experimental().SetInterceptorCreators(std::move(creators));
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(grpc_service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    address_ = "127.0.0.1:" + std::to_string(port);
    stub_ = v1::Transposer::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                        grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    service_->Shutdown();
    server_->Shutdown();
    server_.reset();
    grpc_service_.reset();
    service_.reset();
    store_.reset();
  }

  grpc::Status Get(const v1::GetConfigRequest& req, v1::Answer* answer) {
    grpc::ClientContext ctx;
    return stub_->GetConfig(&ctx, req, answer);
  }

  static v1::GetConfigRequest Request(int64_t rows, int64_t cols, const std::string& dtype) {
    v1::GetConfigRequest req;
    req.mutable_problem()->set_rows(rows);
    req.mutable_problem()->set_cols(cols);
    req.mutable_problem()->set_dtype(dtype);
    return req;
  }

  RpcNotes notes_;
  CountingRecorder recorder_;
  FakeBackend* fake_ = nullptr;  // owned by service_
  std::unique_ptr<Store> store_;
  std::unique_ptr<TransposeService> service_;
  std::unique_ptr<GrpcTransposer> grpc_service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Transposer::Stub> stub_;
  std::string address_;
};

TEST_F(GrpcServiceTest, GetConfigTunesThenAnswersFromCache) {
  v1::Answer tuned;
  grpc::Status s = Get(Request(128, 256, "f32"), &tuned);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(tuned.source(), v1::SOURCE_TUNED);
  EXPECT_EQ(tuned.variant().name(), "fast");
  EXPECT_EQ(tuned.variant().backend(), "fake");
  EXPECT_EQ(tuned.candidates_tried(), 3);
  EXPECT_EQ(tuned.candidates_valid(), 2);
  EXPECT_GT(tuned.gbps(), 0);
  EXPECT_GT(tuned.ceiling_gbps(), 0);
  EXPECT_DOUBLE_EQ(tuned.ratio(), tuned.gbps() / tuned.ceiling_gbps());
  EXPECT_EQ(tuned.problem().batch(), 1);
  EXPECT_EQ(tuned.device().uuid(), "fake-0");
  EXPECT_EQ(tuned.device().fingerprint(), service_->ListDevices()[0].Fingerprint());

  v1::Answer cached;
  ASSERT_TRUE(Get(Request(128, 256, "float32"), &cached).ok());
  EXPECT_EQ(cached.source(), v1::SOURCE_CACHE);
  EXPECT_EQ(cached.variant().name(), "fast");
  EXPECT_EQ(cached.tuned_at_unix_ms(), tuned.tuned_at_unix_ms());
}

// A hit is answered with bytes kept for its stored entry (server/grpc/hit_answers.h): the same answer
// each time, and never an entry the store no longer holds (deleted, then tuned again).
TEST_F(GrpcServiceTest, AHitIsTheStoredEntryOfTheMoment) {
  v1::Answer tuned, first, second;
  ASSERT_TRUE(Get(Request(64, 512, "f32"), &tuned).ok());
  ASSERT_TRUE(Get(Request(64, 512, "f32"), &first).ok());
  ASSERT_TRUE(Get(Request(64, 512, "f32"), &second).ok());
  EXPECT_EQ(first.source(), v1::SOURCE_CACHE);
  EXPECT_EQ(first.tuned_at_unix_ms(), tuned.tuned_at_unix_ms());
  EXPECT_EQ(first.device().fingerprint(), tuned.device().fingerprint());
  EXPECT_EQ(first.measured_on().fingerprint(), tuned.device().fingerprint());
  EXPECT_EQ(first.device().attributes_size(), tuned.device().attributes_size());
  EXPECT_EQ(first.DebugString(), second.DebugString());
  {
    grpc::ClientContext ctx;
    v1::DeleteEntriesRequest req;
    req.set_all(true);
    v1::DeleteEntriesResponse r;
    ASSERT_TRUE(stub_->DeleteEntries(&ctx, req, &r).ok());
    ASSERT_EQ(r.deleted(), 1);
  }
  v1::GetConfigRequest cache_only = Request(64, 512, "f32");
  cache_only.set_policy(v1::CACHE_ONLY);
  v1::Answer a;
  EXPECT_EQ(Get(cache_only, &a).error_code(), grpc::StatusCode::NOT_FOUND);
  v1::Answer retuned, hit;
  ASSERT_TRUE(Get(Request(64, 512, "f32"), &retuned).ok());
  EXPECT_EQ(retuned.source(), v1::SOURCE_TUNED);
  ASSERT_NE(retuned.tuned_at_unix_ms(), tuned.tuned_at_unix_ms());  // a tune takes > 0.15 s
  ASSERT_TRUE(Get(cache_only, &hit).ok());
  EXPECT_EQ(hit.source(), v1::SOURCE_CACHE);
  EXPECT_EQ(hit.tuned_at_unix_ms(), retuned.tuned_at_unix_ms());
}

TEST_F(GrpcServiceTest, ErrorsKeepTheirCodeAndMessage) {
  v1::Answer a;
  grpc::Status s = Get(Request(4, 4, "f24"), &a);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().rfind("problem.dtype: unknown element type 'f24'", 0), 0u);

  s = Get(Request(0, 4, "f32"), &a);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().rfind("problem.rows:", 0), 0u) << s.error_message();

  s = Get(Request(1 << 20, 1 << 20, "f32"), &a);  // 4 TiB in and out, 1 GiB device
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);

  auto req = Request(4, 4, "f32");
  req.mutable_problem()->mutable_device()->set_index(3);
  s = Get(req, &a);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message().rfind("problem.device: no device with index 3", 0), 0u);

  req = Request(4, 4, "f32");
  req.set_policy(v1::CACHE_ONLY);
  s = Get(req, &a);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(service_->counters().tunes_started, 0);
}

TEST_F(GrpcServiceTest, TuneStreamsCandidatesThenTheAnswer) {
  v1::TuneRequest req;
  req.mutable_problem()->set_rows(64);
  req.mutable_problem()->set_cols(64);
  req.mutable_problem()->set_dtype("f16");
  req.set_budget_seconds(5);
  grpc::ClientContext ctx;
  auto reader = stub_->Tune(&ctx, req);
  v1::TuneProgress msg;
  std::vector<v1::TuneProgress> all;
  while (reader->Read(&msg)) all.push_back(msg);
  grpc::Status s = reader->Finish();
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_GE(all.size(), 4u);  // 3 candidates at least once, then the answer
  std::set<std::string> names;
  for (size_t i = 0; i + 1 < all.size(); ++i) {
    ASSERT_TRUE(all[i].has_candidate()) << i;
    names.insert(all[i].candidate().variant().name());
    EXPECT_EQ(all[i].total(), 3);
    EXPECT_GE(all[i].index(), 1);
    if (all[i].candidate().variant().name() == "broken") {
      EXPECT_FALSE(all[i].candidate().measurement().valid());
      EXPECT_EQ(all[i].candidate().phase(), "check");
    }
  }
  EXPECT_EQ(names, (std::set<std::string>{"slow", "fast", "broken"}));
  ASSERT_TRUE(all.back().has_answer());
  EXPECT_EQ(all.back().answer().source(), v1::SOURCE_TUNED);
  EXPECT_EQ(all.back().answer().variant().name(), "fast");

  // The forced tune was stored.
  v1::Answer cached;
  auto get = Request(64, 64, "f16");
  get.set_policy(v1::CACHE_ONLY);
  ASSERT_TRUE(Get(get, &cached).ok());
  EXPECT_EQ(cached.tuned_at_unix_ms(), all.back().answer().tuned_at_unix_ms());
}

TEST_F(GrpcServiceTest, DevicesEntriesAndDelete) {
  {
    grpc::ClientContext ctx;
    v1::ListDevicesResponse r;
    ASSERT_TRUE(stub_->ListDevices(&ctx, v1::ListDevicesRequest(), &r).ok());
    ASSERT_EQ(r.devices_size(), 1);
    EXPECT_EQ(r.devices(0).index(), 0);
    EXPECT_EQ(r.devices(0).backend(), "fake");
    EXPECT_EQ(r.devices(0).fingerprint().size(), 16u);
  }
  v1::Answer a;
  ASSERT_TRUE(Get(Request(32, 32, "f32"), &a).ok());
  ASSERT_TRUE(Get(Request(32, 32, "i8"), &a).ok());
  {
    grpc::ClientContext ctx;
    v1::ListEntriesRequest req;
    req.set_include_candidates(true);
    req.mutable_filter()->set_dtype("i8");
    v1::ListEntriesResponse r;
    ASSERT_TRUE(stub_->ListEntries(&ctx, req, &r).ok());
    ASSERT_EQ(r.entries_size(), 1);
    EXPECT_EQ(r.entries(0).answer().problem().dtype(), "i8");
    EXPECT_EQ(r.entries(0).answer().source(), v1::SOURCE_CACHE);
    EXPECT_EQ(r.entries(0).candidates_size(), 3);
  }
  {
    grpc::ClientContext ctx;
    v1::DeleteEntriesResponse r;
    grpc::Status s = stub_->DeleteEntries(&ctx, v1::DeleteEntriesRequest(), &r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(s.error_message(), "filter: empty filter deletes everything; set all=true");
  }
  {
    grpc::ClientContext ctx;
    v1::DeleteEntriesRequest req;
    req.mutable_filter()->mutable_device()->set_index(0);
    req.mutable_filter()->set_dtype("f32");
    v1::DeleteEntriesResponse r;
    ASSERT_TRUE(stub_->DeleteEntries(&ctx, req, &r).ok());
    EXPECT_EQ(r.deleted(), 1);
  }
  {
    grpc::ClientContext ctx;
    v1::DeleteEntriesRequest req;
    req.set_all(true);
    v1::DeleteEntriesResponse r;
    ASSERT_TRUE(stub_->DeleteEntries(&ctx, req, &r).ok());
    EXPECT_EQ(r.deleted(), 1);
  }
}

// A body that does not parse: INVALID_ARGUMENT naming the message type, for unary and streaming
// methods alike (gRPC 1.51 alone answers UNIMPLEMENTED with no message).
TEST_F(GrpcServiceTest, AMalformedBodyIsInvalidArgumentWithAReason) {
  grpc::GenericStub generic(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  for (const std::string method : {"GetConfig", "ListEntries", "ImportEntries", "Tune"}) {
    SCOPED_TRACE(method);
    const std::string garbage("\xff\xff\xff\xff\x0f", 5);  // a truncated varint field
    grpc::Slice slice(garbage);
    grpc::ByteBuffer request(&slice, 1), reply;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    std::promise<grpc::Status> done;
    generic.UnaryCall(&ctx, "/transposed.v1.Transposer/" + method, grpc::StubOptions(), &request,
                      &reply, [&done](grpc::Status st) { done.set_value(std::move(st)); });
    const grpc::Status s = done.get_future().get();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_EQ(s.error_message().rfind("request: not a valid transposed.v1.", 0), 0u)
        << s.error_message();
  }
}

// ListEntries' error names the field the client set (`limit` is page_size's older name).
TEST_F(GrpcServiceTest, ANegativeLimitIsNamed) {
  for (const bool old_name : {true, false}) {
    grpc::ClientContext ctx;
    v1::ListEntriesRequest req;
    if (old_name) req.set_limit(-1);
    else req.set_page_size(-1);
    v1::ListEntriesResponse r;
    const grpc::Status s = stub_->ListEntries(&ctx, req, &r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(s.error_message().rfind(old_name ? "limit: must be >= 0" : "page_size: must be >= 0",
                                      0),
              0u)
        << s.error_message();
  }
}

TEST_F(GrpcServiceTest, TheInterceptorCountsEveryCallByMethodAndCode) {
  v1::Answer a;
  ASSERT_TRUE(Get(Request(16, 16, "f32"), &a).ok());
  ASSERT_TRUE(Get(Request(16, 16, "f32"), &a).ok());
  EXPECT_EQ(Get(Request(0, 16, "f32"), &a).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  grpc::ClientContext ctx;
  v1::ListDevicesResponse r;
  ASSERT_TRUE(stub_->ListDevices(&ctx, v1::ListDevicesRequest(), &r).ok());
  // The server reports a call just before its status goes out, so the client can see the status
  // a moment before the count.
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (recorder_.Calls("ListDevices", grpc::StatusCode::OK) < 1 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  EXPECT_EQ(recorder_.Calls("GetConfig", grpc::StatusCode::OK), 2);
  EXPECT_EQ(recorder_.Calls("GetConfig", grpc::StatusCode::INVALID_ARGUMENT), 1);
  EXPECT_EQ(recorder_.Calls("ListDevices", grpc::StatusCode::OK), 1);
  EXPECT_EQ(recorder_.Calls("Tune", grpc::StatusCode::OK), 0);
  EXPECT_EQ(recorder_.negative(), 0);
}

// The interceptor resolves a (method, code)'s series once, not per call (prometheus-cpp's label
// lookup takes a lock and a map of label sets).
TEST_F(GrpcServiceTest, TheInterceptorResolvesEachMethodAndCodeOnce) {
  v1::Answer a;
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(Get(Request(16, 32, "f32"), &a).ok());
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(Get(Request(0, 16, "f32"), &a).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (recorder_.Calls("GetConfig", grpc::StatusCode::INVALID_ARGUMENT) < 5 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  EXPECT_EQ(recorder_.Calls("GetConfig", grpc::StatusCode::OK), 20);
  EXPECT_EQ(recorder_.resolved(), 2);  // (GetConfig, OK), (GetConfig, INVALID_ARGUMENT)
}

// A client whose deadline passes detaches; the tune still ends and is stored.
TEST_F(GrpcServiceTest, AnExpiredDeadlineLeavesTheTuneToFinishAndBeStored) {
  v1::Answer a;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 50ms);
    EXPECT_EQ(stub_->GetConfig(&ctx, Request(24, 24, "f32"), &a).error_code(),
              grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  auto req = Request(24, 24, "f32");
  req.set_policy(v1::CACHE_ONLY);
  grpc::Status s;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  do {
    std::this_thread::sleep_for(20ms);
    s = Get(req, &a);
  } while (!s.ok() && std::chrono::steady_clock::now() < deadline);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(a.source(), v1::SOURCE_CACHE);
  EXPECT_EQ(service_->counters().tunes_started, 1);
  EXPECT_EQ(service_->counters().tunes_failed, 0);

  // The same for a Tune stream that the client cancels after the first candidate.
  v1::TuneRequest tune;
  *tune.mutable_problem() = Request(40, 24, "f32").problem();
  {
    grpc::ClientContext ctx;
    auto reader = stub_->Tune(&ctx, tune);
    v1::TuneProgress msg;
    ASSERT_TRUE(reader->Read(&msg));
    EXPECT_TRUE(msg.has_candidate());
    ctx.TryCancel();
    while (reader->Read(&msg)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  auto cached = Request(40, 24, "f32");
  cached.set_policy(v1::CACHE_ONLY);
  const auto stored = std::chrono::steady_clock::now() + 10s;
  do {
    std::this_thread::sleep_for(20ms);
    s = Get(cached, &a);
  } while (!s.ok() && std::chrono::steady_clock::now() < stored);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(service_->counters().tunes_completed, 2);
}

// The call caps: a client with --max-calls-per-client calls waiting for tunes is refused the next
// one with RESOURCE_EXHAUSTED naming the cap (short calls, a CACHE_ONLY GetConfig among them,
// still pass); when its calls finish, it may call again. A second server on the same service,
// with caps (2 per client, 3 in total).
TEST_F(GrpcServiceTest, CallsWaitingForTunesAreCappedPerClientAndInTotal) {
  CallLimiter limiter(2, 3);
  GrpcTransposer capped(service_.get(), nullptr, AdminGate(), &limiter);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&capped);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub = v1::Transposer::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                          grpc::InsecureChannelCredentials()));

  // Two misses whose tunes cannot finish while the checks are held.
  fake_->HoldChecks(true);
  struct Pending {
    grpc::ClientContext ctx;
    v1::Answer answer;
    grpc::Status status;
    std::thread thread;
  };
  std::vector<std::unique_ptr<Pending>> pending;
  for (int64_t rows : {64, 96}) {
    auto p = std::make_unique<Pending>();
    Pending* raw = p.get();
    raw->thread = std::thread([raw, &stub, rows] {
      raw->status = stub->GetConfig(&raw->ctx, Request(rows, 32, "f32"), &raw->answer);
    });
    pending.push_back(std::move(p));
  }
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (limiter.open_total() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  ASSERT_EQ(limiter.open_total(), 2);
  EXPECT_EQ(limiter.open("ipv4:127.0.0.1:1"), 2);

  {
    grpc::ClientContext ctx;
    v1::Answer a;
    grpc::Status s = stub->GetConfig(&ctx, Request(128, 32, "f32"), &a);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
    EXPECT_NE(s.error_message().find("--max-calls-per-client"), std::string::npos)
        << s.error_message();
    grpc::ClientContext tctx;
    v1::TuneRequest tr;
    *tr.mutable_problem() = Request(128, 32, "f32").problem();
    auto reader = stub->Tune(&tctx, tr);
    v1::TuneProgress msg;
    while (reader->Read(&msg)) {
    }
    s = reader->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  }
  {
    grpc::ClientContext ctx;
    v1::ListDevicesResponse r;
    EXPECT_TRUE(stub->ListDevices(&ctx, v1::ListDevicesRequest(), &r).ok());
  }
  {
    // A GetConfig that does not wait for a tune is not counted, so not refused.
    grpc::ClientContext ctx;
    v1::GetConfigRequest req = Request(128, 32, "f32");
    req.set_policy(v1::CACHE_ONLY);
    v1::Answer a;
    grpc::Status s = stub->GetConfig(&ctx, req, &a);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  }
  // The total cap counts every client: with 3 open, anyone is refused.
  {
    StatusOr<CallLimiter::Slot> other = limiter.Acquire("ipv4:10.1.2.3:4000");
    ASSERT_TRUE(other.ok());
    grpc::ClientContext ctx;
    v1::Answer a;
    grpc::Status s = stub->GetConfig(&ctx, Request(128, 32, "f32"), &a);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_NE(s.error_message().find("--max-calls)"), std::string::npos) << s.error_message();
  }

  fake_->HoldChecks(false);
  for (auto& p : pending) {
    p->thread.join();
    EXPECT_TRUE(p->status.ok()) << p->status.error_message();
  }
  while (limiter.open_total() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  EXPECT_EQ(limiter.open_total(), 0);
  grpc::ClientContext ctx;
  v1::Answer a;
  grpc::Status s = stub->GetConfig(&ctx, Request(64, 32, "f32"), &a);
  EXPECT_TRUE(s.ok()) << s.error_message();
  server->Shutdown();
}

TEST(CallLimiterTest, ClientsArePeersWithoutTheirPort) {
  EXPECT_EQ(CallLimiter::ClientOf("ipv4:10.0.0.7:5000"), "ipv4:10.0.0.7");
  EXPECT_EQ(CallLimiter::ClientOf("ipv6:[::1]:5000"), "ipv6:[::1]");
  EXPECT_EQ(CallLimiter::ClientOf("ipv6:[fe80::1%eth0]:1"), "ipv6:[fe80::1%eth0]");
  EXPECT_EQ(CallLimiter::ClientOf("unix:/run/t.sock"), "unix:/run/t.sock");
  CallLimiter l(1, 0);
  auto a = l.Acquire("ipv4:10.0.0.7:5000");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(l.Acquire("ipv4:10.0.0.7:5001").status().code(), StatusCode::kResourceExhausted);
  auto b = l.Acquire("ipv4:10.0.0.8:5000");  // another host has its own allowance
  ASSERT_TRUE(b.ok());
  a->Release();
  EXPECT_TRUE(l.Acquire("ipv4:10.0.0.7:5002").ok());  // released again at once (a temporary)
  EXPECT_EQ(l.open_total(), 1);
}

}  // namespace
}  // namespace transposed

// TuneMany end to end: the real `transposed` (CPU backend, shared testing::DaemonProcess,
// ephemeral port, temporary database) driven through the C++ Client. Cached problems are
// skipped, the others tuned and streamed in order; a bad problem names its index and field; the
// count is capped; a client that cancels mid-stream leaves the tune in flight to be stored and
// the rest dropped; the call is logged and counted in the metrics.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "testing/daemon_process.h"
#include "testing/test_files.h"

namespace transposed {
namespace {

v1::Problem P(int64_t rows, int64_t cols, const std::string& dtype = "f32") {
  v1::Problem p;
  p.set_rows(rows);
  p.set_cols(cols);
  p.set_dtype(dtype);
  return p;
}

v1::TuneManyRequest Request(const std::vector<v1::Problem>& problems) {
  v1::TuneManyRequest r;
  for (const auto& p : problems) *r.add_problems() = p;
  return r;
}

class TuneManyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::DaemonOptions o;
    o.binary = TRANSPOSED_BINARY;
    o.tune_budget_seconds = 2;
    o.extra_args = {"--cpu-threads", "1", "--metrics-listen", "127.0.0.1:0"};
    daemon_ = std::make_unique<testing::DaemonProcess>(o);
    const Status s = daemon_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
    ClientOptions options;
    options.deadline_seconds = 300;
    auto c = Client::Connect(daemon_->address(), options);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(c).value();
  }

  void TearDown() override {
    client_.reset();
    if (daemon_->pid() > 0) Stop();
    if (!HasFailure()) daemon_->RemoveDir();
  }

  void Stop() {
    const Status s = daemon_->Stop();
    EXPECT_TRUE(s.ok()) << s.ToString() << "\nlog:\n" << testing::ReadFile(daemon_->log());
  }

  // Runs TuneMany, collecting every message.
  Status Run(const v1::TuneManyRequest& request, std::vector<v1::TuneManyProgress>* out) {
    return client_->TuneMany(request, [out](const v1::TuneManyProgress& m) {
      out->push_back(m);
      return Status::OK();
    });
  }

  bool Cached(const v1::Problem& p) {
    return client_->GetConfig(p, v1::CACHE_ONLY).ok();
  }

  std::unique_ptr<testing::DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
};

// Per problem, in the request's order: its candidates, then exactly one answer or error.
// Returns the answers by problem index.
std::map<int, v1::Answer> CheckOrder(const std::vector<v1::TuneManyProgress>& messages, int count,
                                     std::map<int, int>* candidates) {
  std::map<int, v1::Answer> answers;
  int current = 0;
  bool closed = false;  // the current problem's answer or error was seen
  for (const auto& m : messages) {
    SCOPED_TRACE(m.ShortDebugString());
    EXPECT_EQ(m.problem_count(), count);
    EXPECT_GE(m.problem_index(), current) << "problems out of order";
    if (m.problem_index() != current) {
      EXPECT_TRUE(closed) << "problem " << current << " ended without an answer";
      current = m.problem_index();
      closed = false;
    }
    EXPECT_FALSE(closed) << "a message after the problem's answer";
    if (m.has_error()) {
      closed = true;
    } else if (m.progress().has_answer()) {
      closed = true;
      answers[current] = m.progress().answer();
    } else {
      EXPECT_TRUE(m.progress().has_candidate());
      EXPECT_GE(m.progress().index(), 1);
      EXPECT_LE(m.progress().index(), m.progress().total());
      ++(*candidates)[current];
    }
  }
  EXPECT_TRUE(closed);
  EXPECT_EQ(current, count - 1);
  return answers;
}

TEST_F(TuneManyTest, SkipsCachedProblemsAndStreamsTheOthersInOrder) {
  const v1::Problem cached = P(40, 56), a = P(48, 72), b = P(24, 88, "f64");
  auto first = client_->GetConfig(cached);
  ASSERT_TRUE(first.ok()) << first.status().ToString();

  std::vector<v1::TuneManyProgress> messages;
  const Status s = Run(Request({a, cached, b}), &messages);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::map<int, int> candidates;
  auto answers = CheckOrder(messages, 3, &candidates);
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_EQ(answers[1].source(), v1::SOURCE_CACHE);
  EXPECT_EQ(answers[1].variant().name(), first->variant().name());
  EXPECT_EQ(candidates[1], 0) << "a cached problem is skipped, not tuned";
  for (int i : {0, 2}) {
    EXPECT_EQ(answers[i].source(), v1::SOURCE_TUNED) << i;
    EXPECT_GE(candidates[i], answers[i].candidates_tried()) << i;
    EXPECT_GT(answers[i].gbps(), 0) << i;
  }
  EXPECT_EQ(answers[0].problem().rows(), 48);
  EXPECT_EQ(answers[2].problem().dtype(), "f64");
  EXPECT_TRUE(Cached(a));
  EXPECT_TRUE(Cached(b));

  // Again: everything is cached now, nothing is tuned.
  messages.clear();
  ASSERT_TRUE(Run(Request({a, cached, b}), &messages).ok());
  candidates.clear();
  answers = CheckOrder(messages, 3, &candidates);
  ASSERT_EQ(messages.size(), 3u);
  for (const auto& [i, answer] : answers) EXPECT_EQ(answer.source(), v1::SOURCE_CACHE) << i;

  // force re-tunes a cached problem (admin: a loopback caller without a token configured).
  v1::TuneManyRequest forced = Request({cached});
  forced.set_force(true);
  messages.clear();
  ASSERT_TRUE(Run(forced, &messages).ok());
  candidates.clear();
  answers = CheckOrder(messages, 1, &candidates);
  EXPECT_EQ(answers[0].source(), v1::SOURCE_TUNED);
  EXPECT_GE(candidates[0], 1);

  // Logged (one line per call, with the counts) and counted in the metrics.
  std::smatch m;
  const std::string startup = testing::ReadFile(daemon_->log());
  ASSERT_TRUE(std::regex_search(startup, m, std::regex(R"(metrics on \S+ \(port (\d+)\))")))
      << startup;
  std::string error;
  const std::string text = testing::HttpGet(std::stoi(m[1]), "/metrics", &error);
  ASSERT_FALSE(text.empty()) << error;
  const auto samples = testing::ParseMetrics(text);
  const auto it = samples.find(
      R"(transposed_rpc_requests_total{code="OK",method="TuneMany",service="transposed.v1.Transposer"})");
  ASSERT_NE(it, samples.end()) << text;
  EXPECT_EQ(it->second, 3);
  Stop();
  const std::string log = testing::ReadFile(daemon_->log());
  EXPECT_NE(log.find("rpc=TuneMany problems=3 force=false cached=1 tuned=2 failed=0 dropped=0"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("rpc=TuneMany problems=3 force=false cached=3 tuned=0 failed=0 dropped=0"),
            std::string::npos)
      << log;
}

TEST_F(TuneManyTest, ABadProblemNamesItsIndexAndFieldAndNothingStarts) {
  const v1::Problem good = P(32, 48);
  struct Case {
    v1::Problem bad;
    StatusCode code;
    std::string prefix;
  };
  v1::Problem zero_rows = P(0, 8), bad_dtype = P(8, 8, "f24"), no_device = P(8, 8),
              bad_ld = P(8, 8);
  no_device.mutable_device()->set_index(7);
  bad_ld.set_ld_in(4);
  const std::vector<Case> cases = {
      {zero_rows, StatusCode::kInvalidArgument, "problems[1].rows: "},
      {bad_dtype, StatusCode::kInvalidArgument, "problems[1].dtype: "},
      {no_device, StatusCode::kNotFound, "problems[1].device: no device with index 7"},
      {bad_ld, StatusCode::kInvalidArgument, "problems[1].ld_in: "},
  };
  for (const Case& c : cases) {
    std::vector<v1::TuneManyProgress> messages;
    const Status s = Run(Request({good, c.bad}), &messages);
    EXPECT_EQ(s.code(), c.code) << s.ToString();
    EXPECT_EQ(s.message().rfind(c.prefix, 0), 0u) << s.ToString();
    EXPECT_TRUE(messages.empty());
  }
  // A bad budget names its field.
  v1::TuneManyRequest budget = Request({good});
  budget.set_budget_seconds(-1);
  std::vector<v1::TuneManyProgress> messages;
  Status s = Run(budget, &messages);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("budget_seconds: ", 0), 0u) << s.ToString();
  // The valid problem before the bad one was not tuned.
  EXPECT_FALSE(Cached(good));
}

TEST_F(TuneManyTest, TheNumberOfProblemsIsCapped) {
  std::vector<v1::TuneManyProgress> messages;
  Status none = Run(v1::TuneManyRequest(), &messages);
  EXPECT_EQ(none.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(none.message(), "problems: between 1 and 256 per call, got 0") << none.ToString();
  std::vector<v1::Problem> many(kMaxTuneManyProblems + 1, P(16, 16));
  Status over = Run(Request(many), &messages);
  EXPECT_EQ(over.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(over.message(), "problems: between 1 and 256 per call, got 257") << over.ToString();
  EXPECT_TRUE(messages.empty());
  EXPECT_FALSE(Cached(P(16, 16)));
}

// A client that goes away after the first candidate: the tune in flight runs to the end and is
// stored; the problems not started yet are dropped.
TEST_F(TuneManyTest, CancelMidStreamStoresTheTuneInFlightAndDropsTheRest) {
  std::vector<v1::Problem> problems;
  for (int i = 0; i < 6; ++i) problems.push_back(P(200 + 8 * i, 264, "f64"));
  int seen = 0;
  const Status s = client_->TuneMany(Request(problems), [&](const v1::TuneManyProgress& m) {
    ++seen;
    EXPECT_EQ(m.problem_index(), 0);
    return Status::Cancelled("enough");
  });
  EXPECT_EQ(s.code(), StatusCode::kCancelled) << s.ToString();
  EXPECT_EQ(seen, 1);

  // The tune of problem 0 lands in the cache (waiting on the condition, generously).
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  while (!Cached(problems[0]) && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(Cached(problems[0]));
  // A tune queued behind anything the call could still have queued (one device, one queue in
  // order): once it is answered, the call's last tune, if any, is done.
  auto barrier = client_->GetConfig(P(8, 8));
  ASSERT_TRUE(barrier.ok()) << barrier.status().ToString();
  EXPECT_FALSE(Cached(problems.back())) << "a problem after the cancellation was tuned";
  int tuned = 0;
  for (const auto& p : problems) tuned += Cached(p) ? 1 : 0;
  EXPECT_LE(tuned, 2);
}

}  // namespace
}  // namespace transposed

// Value-exact answers end to end: real `transposed` daemons (shared testing::DaemonProcess,
// ephemeral ports, temporary databases) with --backend cuda running the test-only
// transposed-fake-worker, whose FakeEngine offers one more candidate for a value-exact f32/f64
// problem (as the CUDA engine offers cublas.geam) and makes it the fastest. A bit-exact and a
// value-exact request for the same shape are tuned and cached apart, with different candidate
// lists; the value-exact winner is never given to a bit-exact request (cache, ANSWER_NOW,
// TuneMany, export/import into another daemon, a peer's answer); value-exact of an integer dtype
// is the bit-exact problem; a bad exactness names the field.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "client/client.h"
#include "testing/daemon_process.h"
#include "testing/test_files.h"

namespace transposed {
namespace {

constexpr char kValueOnly[] = "fake.value_exact";  // tuner/worker/fake_engine.h

v1::Problem P(int64_t rows, int64_t cols, const std::string& dtype, bool value_exact) {
  v1::Problem p;
  p.set_rows(rows);
  p.set_cols(cols);
  p.set_dtype(dtype);
  if (value_exact) p.set_exactness(v1::EXACTNESS_VALUE);
  return p;
}

class ExactnessTest : public ::testing::Test {
 protected:
  void TearDown() override {
    clients_.clear();
    for (auto& d : daemons_) {
      if (d->pid() > 0) {
        const Status s = d->Stop();
        EXPECT_TRUE(s.ok()) << s.ToString() << "\nlog:\n" << testing::ReadFile(d->log());
      }
      if (!HasFailure()) d->RemoveDir();
    }
  }

  // Starts a daemon on the fake worker; its client.
  Client* Start(std::vector<std::string> extra = {}) {
    testing::DaemonOptions o;
    o.binary = TRANSPOSED_BINARY;
    o.backend = "cuda";
    o.tune_budget_seconds = 5;
    o.extra_args = {"--worker", TRANSPOSED_FAKE_WORKER};
    for (auto& a : extra) o.extra_args.push_back(std::move(a));
    daemons_.push_back(std::make_unique<testing::DaemonProcess>(o));
    const Status s = daemons_.back()->Start();
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) return nullptr;
    ClientOptions options;
    options.deadline_seconds = 300;
    auto c = Client::Connect(daemons_.back()->address(), options);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    if (!c.ok()) return nullptr;
    clients_.push_back(std::move(c).value());
    return clients_.back().get();
  }

  std::vector<std::unique_ptr<testing::DaemonProcess>> daemons_;
  std::vector<std::unique_ptr<Client>> clients_;
};

TEST_F(ExactnessTest, ValueExactIsTunedCachedAndSharedApart) {
  Client* a = Start();
  ASSERT_NE(a, nullptr);
  const v1::Problem bit = P(512, 384, "f32", false);
  const v1::Problem value = P(512, 384, "f32", true);

  auto b1 = a->GetConfig(bit);
  ASSERT_TRUE(b1.ok()) << b1.status().ToString();
  EXPECT_EQ(b1->source(), v1::SOURCE_TUNED);
  EXPECT_EQ(b1->problem().exactness(), v1::EXACTNESS_BIT);
  EXPECT_NE(b1->variant().name(), kValueOnly);

  // Not served from the bit-exact entry: its own tune, over one candidate more.
  auto v1a = a->GetConfig(value);
  ASSERT_TRUE(v1a.ok()) << v1a.status().ToString();
  EXPECT_EQ(v1a->source(), v1::SOURCE_TUNED);
  EXPECT_EQ(v1a->problem().exactness(), v1::EXACTNESS_VALUE);
  EXPECT_EQ(v1a->variant().name(), kValueOnly);
  EXPECT_EQ(v1a->candidates_total(), b1->candidates_total() + 1);

  // Both cached, each its own.
  auto b2 = a->GetConfig(bit, v1::CACHE_ONLY);
  auto v2 = a->GetConfig(value, v1::CACHE_ONLY);
  ASSERT_TRUE(b2.ok() && v2.ok());
  EXPECT_EQ(b2->source(), v1::SOURCE_CACHE);
  EXPECT_EQ(b2->variant().name(), b1->variant().name());
  EXPECT_EQ(v2->source(), v1::SOURCE_CACHE);
  EXPECT_EQ(v2->variant().name(), kValueOnly);

  // TuneMany skips both, each answered from its own entry.
  v1::TuneManyRequest many;
  *many.add_problems() = bit;
  *many.add_problems() = value;
  std::vector<std::string> answered(2);
  ASSERT_TRUE(a->TuneMany(many, [&](const v1::TuneManyProgress& m) {
                  if (m.has_progress() && m.progress().has_answer()) {
                    EXPECT_EQ(m.progress().answer().source(), v1::SOURCE_CACHE);
                    answered[m.problem_index()] = m.progress().answer().variant().name();
                  }
                  return Status::OK();
                }).ok());
  EXPECT_EQ(answered[0], b1->variant().name());
  EXPECT_EQ(answered[1], kValueOnly);

  // ANSWER_NOW for a new bit-exact shape never borrows the value-exact winner.
  auto near = a->GetConfig(P(520, 384, "f32", false), v1::ANSWER_NOW);
  ASSERT_TRUE(near.ok()) << near.status().ToString();
  EXPECT_NE(near->variant().name(), kValueOnly);

  // An integer dtype has no value-exact member: the same problem, answered from the cache.
  ASSERT_TRUE(a->GetConfig(P(512, 384, "i32", false)).ok());
  auto i32 = a->GetConfig(P(512, 384, "i32", true), v1::CACHE_ONLY);
  ASSERT_TRUE(i32.ok()) << i32.status().ToString();
  EXPECT_EQ(i32->problem().exactness(), v1::EXACTNESS_BIT);

  // A bad value names the field.
  v1::Problem bad = bit;
  bad.set_exactness(static_cast<v1::Exactness>(9));
  auto refused = a->GetConfig(bad);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("problem.exactness"), std::string::npos)
      << refused.status().message();

  // Listed apart.
  v1::ListEntriesRequest list;
  list.mutable_filter()->set_rows(512);
  list.mutable_filter()->set_cols(384);
  list.mutable_filter()->set_dtype("f32");
  auto entries = a->ListEntries(list);
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 2u);
  int value_entries = 0;
  for (const auto& e : *entries) {
    const bool is_value = e.answer().problem().exactness() == v1::EXACTNESS_VALUE;
    value_entries += is_value;
    EXPECT_EQ(e.answer().variant().name() == kValueOnly, is_value);
  }
  EXPECT_EQ(value_entries, 1);

  // Export, then import into a second daemon: both entries keep their exactness.
  v1::ImportEntriesRequest import;
  ASSERT_TRUE(a->ExportEntries(v1::ExportEntriesRequest(), [&](const v1::ExportedEntry& e) {
                   *import.add_entries() = e;
                   return Status::OK();
                 }).ok());
  Client* b = Start();
  ASSERT_NE(b, nullptr);
  auto imported = b->ImportEntries(import);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  EXPECT_EQ(imported->imported(), import.entries_size());
  auto bb = b->GetConfig(bit, v1::CACHE_ONLY);
  auto bv = b->GetConfig(value, v1::CACHE_ONLY);
  ASSERT_TRUE(bb.ok() && bv.ok());
  EXPECT_EQ(bb->variant().name(), b1->variant().name());
  EXPECT_EQ(bv->variant().name(), kValueOnly);
  EXPECT_EQ(bv->problem().exactness(), v1::EXACTNESS_VALUE);

  // A third daemon asks the first as its peer: each request gets the peer's entry of its own
  // exactness.
  Client* c = Start({"--peer", daemons_[0]->address()});
  ASSERT_NE(c, nullptr);
  auto cb = c->GetConfig(bit);
  auto cv = c->GetConfig(value);
  ASSERT_TRUE(cb.ok() && cv.ok());
  EXPECT_EQ(cb->source(), v1::SOURCE_PEER);
  EXPECT_EQ(cb->variant().name(), b1->variant().name());
  EXPECT_EQ(cv->source(), v1::SOURCE_PEER);
  EXPECT_EQ(cv->variant().name(), kValueOnly);
  EXPECT_EQ(cv->problem().exactness(), v1::EXACTNESS_VALUE);
}

}  // namespace
}  // namespace transposed

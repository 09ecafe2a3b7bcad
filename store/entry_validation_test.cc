// Entry validation (store/entry_validation.h) and what the store does with rows that fail it:
// refused at every write, skipped on every read (the other rows still served), and the way back
// from read-only (Store::TryWritable).
#include "store/entry_validation.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>

#include "core/device_class.h"
#include "store/store.h"
#include "testing/problems.h"
#include "testing/test_files.h"

namespace transposed {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Measurement Valid(double median_s) {
  Measurement m;
  m.valid = true;
  m.median_s = median_s;
  m.min_s = median_s * 0.9;
  m.max_s = median_s * 1.2;
  m.samples = 9;
  m.warmup = 2;
  m.method.timer = "steady_clock";
  m.method.op = "transpose";
  m.method.alternatives_median_s = {{"memcpy", median_s * 0.8}};
  m.method.remeasured_after_rel_spread = 0.3;
  m.method.remeasured_after_slowdown = 1.5;
  return m;
}

TuneResult Good(const std::string& uuid = "cpu-1", int64_t rows = 64,
                int64_t tuned_at_unix_ms = 1000) {
  TuneResult r;
  r.device.backend = "cpu";
  r.device.uuid = uuid;
  r.device.name = "Test CPU";
  r.device.memory_bytes = 1 << 30;
  r.device.attributes = {{"cores", "8"}};
  r.device.library_version = "0.1.0+ktest";
  r.problem = MakeTestProblem(rows, 96, DType::kF32);
  r.best.name = "tile32";
  r.best.params = {{"tile", 32}};
  r.best_measurement = Valid(1e-5);
  r.ceiling = Valid(0.8e-5);
  for (int i = 0; i < 3; ++i) {
    CandidateResult c;
    c.candidate.name = "tile" + std::to_string(8 << i);
    c.measurement = Valid(1e-5 * (1 + i));
    r.candidates.push_back(c);
  }
  r.tried = 3;
  r.valid = 3;
  r.tune_seconds = 0.5;
  r.tuned_at_unix_ms = tuned_at_unix_ms;
  return r;
}

// The field the error names for one bad value.
std::string ErrorOf(const TuneResult& r) {
  Status s = ValidateEntry(r);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  return s.message();
}

TEST(EntryValidation, AcceptsAGoodEntry) { EXPECT_TRUE(ValidateEntry(Good()).ok()); }

TEST(EntryValidation, RefusesNonFiniteMeasureMethodFieldsNamingThem) {
  for (double bad : {kNaN, kInf, -kInf, -1.0}) {
    SCOPED_TRACE(bad);
    TuneResult r = Good();
    r.ceiling.method.alternatives_median_s["memcpy"] = bad;
    EXPECT_EQ(ErrorOf(r).rfind("answer.ceiling.method.alternatives_median_s['memcpy']: ", 0), 0u)
        << ErrorOf(r);
    r = Good();
    r.best_measurement.method.remeasured_after_rel_spread = bad;
    EXPECT_EQ(ErrorOf(r).rfind("answer.measurement.method.remeasured_after_rel_spread: ", 0), 0u);
    r = Good();
    r.candidates[1].measurement.method.remeasured_after_slowdown = bad;
    EXPECT_EQ(ErrorOf(r).rfind("candidates[1].measurement.method.remeasured_after_slowdown: ", 0),
              0u);
    r = Good();
    r.candidates[2].measurement.median_s = bad;
    EXPECT_EQ(ErrorOf(r).rfind("candidates[2].measurement.median_s: ", 0), 0u);
    r = Good();
    r.tune_seconds = bad;
    EXPECT_EQ(ErrorOf(r).rfind("answer.tune_seconds: ", 0), 0u);
  }
}

TEST(EntryValidation, RefusesNegativeCountsLongStringsAndTooManyCandidates) {
  TuneResult r = Good();
  r.best_measurement.method.buffers = -3;
  EXPECT_EQ(ErrorOf(r).rfind("answer.measurement.method.buffers: must be in 0..", 0), 0u);
  r = Good();
  r.best_measurement.method.placements = 9;  // more than kMaxPlacements (core/placements.h)
  EXPECT_EQ(ErrorOf(r).rfind("answer.measurement.method.placements: must be in 0..8", 0), 0u)
      << ErrorOf(r);
  r = Good();
  r.ceiling.method.op = std::string(65, 'x');
  EXPECT_EQ(ErrorOf(r).rfind("answer.ceiling.method.op: too long", 0), 0u);
  r = Good();
  r.device.name = std::string(300, 'n');
  EXPECT_EQ(ErrorOf(r).rfind("measured_on.name: too long", 0), 0u);
  r = Good();
  r.candidates.resize(kMaxCandidatesPerEntry + 1, r.candidates[0]);
  EXPECT_EQ(ErrorOf(r), "candidates: at most 4096 per entry, got 4097");
  // Within the count, but too many bytes (long error texts): the entry would not fit a page.
  r = Good();
  CandidateResult failed;
  failed.candidate.name = "tileX";
  failed.measurement.error = std::string(4000, 'e');
  r.candidates.resize(400, failed);
  EXPECT_EQ(ErrorOf(r).rfind("candidates: the entry holds about ", 0), 0u) << ErrorOf(r);
  r.candidates.resize(200);
  EXPECT_TRUE(ValidateEntry(r).ok());
}

class StoreBadRowsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(temp_.ok()) << "mkdtemp failed";
    dir_ = temp_.path().string();
    path_ = dir_ + "/cache.db";
  }
  // Runs SQL on a second connection, as an admin's sqlite3 shell (or an older version) would.
  void Raw(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK)
        << sql << ": " << (err ? err : "");
    sqlite3_free(err);
    sqlite3_close(db);
  }
  testing::TempDir temp_{"entry_validation_test"};
  std::string dir_;
  std::string path_;
};

// The poison of issue 22: rows as an older version stored an imported NaN (JSON null), or a row
// edited by hand. Each is skipped and counted; list, lookups and merges of the others go on.
TEST_F(StoreBadRowsTest, BadRowsAreSkippedAndTheOthersServed) {
  auto opened = Store::Open(path_);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Store& store = **opened;
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(store.SaveTune(Good("cpu-1", 64 + i, 1000 + i)).ok());
  // 64: NaN stored as null in a MeasureMethod; 65: a zero winner time; 66: a null in a candidate.
  Raw(R"(UPDATE entries SET ceiling_method = '{"alternatives_median_s":{"memcpy":null}}')"
      " WHERE rows = 64;"
      "UPDATE entries SET median_s = 0 WHERE rows = 65;"
      R"(UPDATE candidates SET method = '{"alternatives_median_s":{"x":null}}')"
      " WHERE entry_id = (SELECT id FROM entries WHERE rows = 66);");
  const std::string fp = Good().device.Fingerprint();

  auto listed = store.List(StoreFilter{}, /*include_candidates=*/false);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->size(), 2u);  // 67 and 66 (its candidates are not read)
  EXPECT_EQ((*listed)[0].problem.rows, 67);
  EXPECT_EQ((*listed)[1].problem.rows, 66);
  auto with_candidates = store.List(StoreFilter{}, /*include_candidates=*/true);
  ASSERT_TRUE(with_candidates.ok()) << with_candidates.status().ToString();
  ASSERT_EQ(with_candidates->size(), 1u);
  EXPECT_EQ((*with_candidates)[0].problem.rows, 67);
  EXPECT_GE(store.bad_rows_skipped(), 5);

  // A page of one still finds one good entry (the skipped rows do not count towards the limit).
  std::vector<EntryCursor> cursors;
  auto page = store.List(StoreFilter{}, true, 1, nullptr, &cursors);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ((*page)[0].problem.rows, 67);

  auto bad = store.Lookup(fp, MakeTestProblem(64, 96, DType::kF32));
  ASSERT_TRUE(bad.ok()) << bad.status().ToString();
  EXPECT_FALSE(bad->has_value());  // a miss: the next tune replaces it
  auto good = store.Lookup(fp, MakeTestProblem(67, 96, DType::kF32), true);
  ASSERT_TRUE(good.ok() && good->has_value());
  EXPECT_EQ((*good)->candidates.size(), 3u);
  auto by_class = store.LookupByClass(ClassOf(Good().device).key,
                                      MakeTestProblem(65, 96, DType::kF32));
  ASSERT_TRUE(by_class.ok()) << by_class.status().ToString();
  EXPECT_FALSE(by_class->has_value());

  // A tune (or a merge) of a bad row's problem replaces it.
  ASSERT_TRUE(store.SaveTune(Good("cpu-1", 64, 2000)).ok());
  bad = store.Lookup(fp, MakeTestProblem(64, 96, DType::kF32));
  ASSERT_TRUE(bad.ok() && bad->has_value());
  auto merged = store.Merge(Good("cpu-2", 65, 3000));
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_TRUE(*merged);
}

TEST_F(StoreBadRowsTest, WritesRefuseAnInvalidEntry) {
  auto opened = Store::Open(path_);
  ASSERT_TRUE(opened.ok());
  TuneResult r = Good();
  r.ceiling.method.alternatives_median_s["memcpy"] = kNaN;
  Status saved = (*opened)->SaveTune(r);
  EXPECT_EQ(saved.code(), StatusCode::kInvalidArgument) << saved.ToString();
  EXPECT_NE(saved.message().find("answer.ceiling.method.alternatives_median_s['memcpy']"),
            std::string::npos)
      << saved.message();
  auto merged = (*opened)->Merge(r);
  EXPECT_EQ(merged.status().code(), StatusCode::kInvalidArgument);
  auto listed = (*opened)->List(StoreFilter{});
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
}

// A database locked by another process at start opens read-only; once the lock is gone,
// TryWritable makes it writable again and tunes are stored.
TEST_F(StoreBadRowsTest, LockedAtStartThenWritableAgain) {
  {
    auto first = Store::Open(path_);
    ASSERT_TRUE(first.ok());
    ASSERT_TRUE((*first)->SaveTune(Good()).ok());
  }
  sqlite3* locker = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &locker), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(locker,
                         "PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE; "
                         "UPDATE devices SET name = name; COMMIT;",
                         nullptr, nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(locker);
  auto opened = Store::Open(path_);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Store& store = **opened;
  EXPECT_FALSE(store.read_only().empty());
  auto hit = store.Lookup(Good().device.Fingerprint(), Good().problem);
  ASSERT_TRUE(hit.ok()) << hit.status().ToString();
  EXPECT_TRUE(hit->has_value());
  EXPECT_FALSE(store.TryWritable().ok());
  EXPECT_FALSE(store.read_only().empty());
  sqlite3_close(locker);
  Status back = store.TryWritable();
  ASSERT_TRUE(back.ok()) << back.ToString();
  EXPECT_TRUE(store.read_only().empty());
  ASSERT_TRUE(store.SaveTune(Good("cpu-1", 80, 5000)).ok());
  hit = store.Lookup(Good().device.Fingerprint(), MakeTestProblem(80, 96, DType::kF32));
  ASSERT_TRUE(hit.ok() && hit->has_value());
}

}  // namespace
}  // namespace transposed

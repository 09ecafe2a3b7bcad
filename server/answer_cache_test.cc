// AnswerCache: hits and misses served from memory, and nothing stale after any write: this
// store's saves, merges and deletes (through the version, or announced with Invalidate), and
// another process's commits to the same file (a second Store on it, as a second daemon or a
// sqlite3 shell would be) within the recheck interval.
#include "server/answer_cache.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "core/device_class.h"
#include "testing/problems.h"
#include "testing/test_files.h"

namespace transposed {
namespace {

DeviceInfo Device() {
  DeviceInfo d;
  d.backend = "cuda";
  d.uuid = "GPU-cache-0";
  d.name = "NVIDIA H100 80GB HBM3";
  d.memory_bytes = 85'031'714'816ull;
  d.attributes = {{"compute_capability", "9.0"}, {"sm_count", "132"}};
  d.library_version = "0.1.0+kcache";
  return d;
}

TuneResult Result(const Problem& p, const std::string& variant, double median_s) {
  TuneResult r;
  r.problem = p;
  r.device = Device();
  r.best.name = variant;
  r.best.params = {{"tile_rows", 32}};
  r.best_measurement.valid = true;
  r.best_measurement.median_s = median_s;
  r.best_measurement.min_s = median_s;
  r.best_measurement.max_s = median_s;
  r.best_measurement.samples = 5;
  r.ceiling = r.best_measurement;
  r.tuned_at_unix_ms = 1700000000000;
  return r;
}

class AnswerCacheTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(temp_.ok()) << "mkdtemp failed"; }
  std::unique_ptr<Store> Open(const std::string& path) {
    auto s = Store::Open(path);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  testing::TempDir temp_{"transposed_answer_cache_test"};
  const std::string dir_ = temp_.path().string();
};

// Run against a file (separate read connection) and ":memory:" (one connection), with the
// version re-read on every lookup: the store's version alone shows every write.
void ExpectFollowsOwnWrites(Store* store) {
  AnswerCache cache(store, AnswerCache::kDefaultMaxEntries, /*recheck=*/std::chrono::seconds(0));
  const std::string cls = ClassOf(Device()).key;
  const Problem p = MakeTestProblem(256, 512, DType::kF32);
  ASSERT_TRUE(store->UpsertDevice(Device()).ok());

  auto miss = cache.LookupByClass(cls, p);
  ASSERT_TRUE(miss.ok());
  EXPECT_FALSE(miss->has_value());
  EXPECT_EQ(cache.size(), 1u);  // the miss is cached
  ASSERT_TRUE(cache.LookupByClass(cls, p).ok());

  ASSERT_TRUE(store->SaveTune(Result(p, "tile32x32.rows8.pad1", 2e-4)).ok());
  auto hit = cache.LookupByClass(cls, p);
  ASSERT_TRUE(hit.ok());
  ASSERT_TRUE(hit->has_value());
  EXPECT_EQ((*hit)->best.name, "tile32x32.rows8.pad1");
  auto again = cache.LookupByClass(cls, p);
  ASSERT_TRUE(again.ok() && again->has_value());
  EXPECT_EQ((*again)->best.name, "tile32x32.rows8.pad1");

  // A faster result merged (an import) replaces it.
  TuneResult faster = Result(p, "tile64x64.rows8.vec16.swz", 1e-4);
  faster.origin = Origin::kImported;
  auto merged = store->Merge(faster);
  ASSERT_TRUE(merged.ok() && *merged);
  auto after_merge = cache.LookupByClass(cls, p);
  ASSERT_TRUE(after_merge.ok() && after_merge->has_value());
  EXPECT_EQ((*after_merge)->best.name, "tile64x64.rows8.vec16.swz");

  // Deleted: a miss again.
  StoreFilter all;
  auto deleted = store->Delete(all);
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(*deleted, 1);
  auto gone = cache.LookupByClass(cls, p);
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->has_value());
}

TEST_F(AnswerCacheTest, FollowsTheStoresOwnWritesOnAFile) {
  auto store = Open(dir_ + "/cache.db");
  ASSERT_NE(store, nullptr);
  ExpectFollowsOwnWrites(store.get());
}

TEST_F(AnswerCacheTest, FollowsTheStoresOwnWritesInMemory) {
  auto store = Open(":memory:");
  ASSERT_NE(store, nullptr);
  ExpectFollowsOwnWrites(store.get());
}

// With the version trusted for an hour, a write is seen once the writer invalidates (the
// service does after each of its writes), and not before: the cache does serve from memory.
TEST_F(AnswerCacheTest, InvalidateMakesTheNextLookupReadTheStore) {
  auto store = Open(dir_ + "/own.db");
  ASSERT_NE(store, nullptr);
  AnswerCache cache(store.get(), AnswerCache::kDefaultMaxEntries, std::chrono::hours(1));
  const std::string cls = ClassOf(Device()).key;
  const Problem p = MakeTestProblem(512, 64, DType::kF32);
  ASSERT_TRUE(store->UpsertDevice(Device()).ok());
  auto miss = cache.LookupByClass(cls, p);
  ASSERT_TRUE(miss.ok());
  EXPECT_FALSE(miss->has_value());
  ASSERT_TRUE(store->SaveTune(Result(p, "tile32x32.rows8.pad1", 2e-4)).ok());
  auto cached = cache.LookupByClass(cls, p);
  ASSERT_TRUE(cached.ok());
  EXPECT_FALSE(cached->has_value());  // from memory: the write was not announced
  cache.Invalidate();
  auto hit = cache.LookupByClass(cls, p);
  ASSERT_TRUE(hit.ok() && hit->has_value());
  EXPECT_EQ((*hit)->best.name, "tile32x32.rows8.pad1");
}

// Another writer of the file is seen within the recheck interval (10 ms by default).
TEST_F(AnswerCacheTest, SeesAnotherProcessCommits) {
  const std::string path = dir_ + "/shared.db";
  auto mine = Open(path);
  auto other = Open(path);  // another daemon, or `sqlite3` by hand: its own connections
  ASSERT_NE(mine, nullptr);
  ASSERT_NE(other, nullptr);
  AnswerCache cache(mine.get());
  const std::string cls = ClassOf(Device()).key;
  const Problem p = MakeTestProblem(128, 96, DType::kF16);
  ASSERT_TRUE(other->UpsertDevice(Device()).ok());
  auto miss = cache.LookupByClass(cls, p);
  ASSERT_TRUE(miss.ok());
  EXPECT_FALSE(miss->has_value());
  ASSERT_TRUE(other->SaveTune(Result(p, "skinny.l512.rows8", 3e-4)).ok());
  std::this_thread::sleep_for(2 * AnswerCache::kDefaultRecheck);
  auto hit = cache.LookupByClass(cls, p);
  ASSERT_TRUE(hit.ok() && hit->has_value());
  EXPECT_EQ((*hit)->best.name, "skinny.l512.rows8");
  // A raw SQL delete by another connection.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "DELETE FROM entries", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  std::this_thread::sleep_for(2 * AnswerCache::kDefaultRecheck);
  auto gone = cache.LookupByClass(cls, p);
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->has_value());
}

TEST_F(AnswerCacheTest, HoldsAtMostItsLimit) {
  auto store = Open(":memory:");
  ASSERT_NE(store, nullptr);
  AnswerCache cache(store.get(), /*max_entries=*/3);
  const std::string cls = ClassOf(Device()).key;
  for (int i = 1; i <= 10; ++i) {
    ASSERT_TRUE(cache.LookupByClass(cls, MakeTestProblem(i, 64, DType::kF32)).ok());
    EXPECT_LE(cache.size(), 3u);
  }
}

}  // namespace
}  // namespace transposed

#include "store/store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "core/device_class.h"
#include "core/version.h"
#include "testing/problems.h"
#include "testing/test_files.h"

namespace transposed {
namespace {

// A second, plain connection to a store's file: what an admin's sqlite3 shell sees.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK) << path;
  }
  ~RawDb() { sqlite3_close(db_); }
  int64_t Int(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr), SQLITE_OK)
        << sql << ": " << sqlite3_errmsg(db_);
    EXPECT_EQ(sqlite3_step(st), SQLITE_ROW) << sql;
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
  }
  double Real(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sql;
    EXPECT_EQ(sqlite3_step(st), SQLITE_ROW) << sql;
    double v = sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    return v;
  }
  std::string Text(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sql;
    EXPECT_EQ(sqlite3_step(st), SQLITE_ROW) << sql;
    const unsigned char* t = sqlite3_column_text(st, 0);
    std::string v = t ? reinterpret_cast<const char*>(t) : "";
    sqlite3_finalize(st);
    return v;
  }
  void Exec(const std::string& sql) {
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK)
        << sql << ": " << (err ? err : "");
    sqlite3_free(err);
  }

 private:
  sqlite3* db_ = nullptr;
};

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(temp_.ok()) << "mkdtemp failed";
    dir_ = temp_.path().string();
    path_ = dir_ + "/cache.db";
  }

  std::unique_ptr<Store> OpenStore() {
    auto s = Store::Open(path_);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }

  // A database as an older build left it: one entry of p ("v.old" on "GPU-old") saved by this
  // build, then `downgrade` (SQL) run on it to undo the later schema versions.
  void SaveOneEntryThenDowngrade(const Problem& p, const std::string& downgrade);

  testing::TempDir temp_{"store_test"};
  std::string dir_;
  std::string path_;
};

DeviceInfo MakeDevice(const std::string& uuid, const std::string& library_version = "0.1.0+ktest") {
  DeviceInfo d;
  d.backend = "cuda";
  d.index = 0;
  d.uuid = uuid;
  d.name = "NVIDIA H100 80GB HBM3";
  d.memory_bytes = 85'031'714'816ull;
  d.attributes = {{"compute_capability", "9.0"}, {"sm_count", "132"}, {"driver", "550.54"}};
  d.library_version = library_version;
  return d;
}

Measurement MakeMeasurement(double median_s, int samples, const std::string& timer,
                            int buffers = 0) {
  Measurement m;
  m.valid = true;
  m.median_s = median_s;
  m.min_s = median_s * 0.97;
  m.max_s = median_s * 1.11;
  m.samples = samples;
  m.warmup = 3;
  m.method.timer = timer;
  m.method.op = "transpose";
  m.method.buffers = buffers;
  m.method.working_set_bytes = int64_t{1} << 33;
  m.method.alternatives_median_s = {{"memcpy_d2d", median_s * 0.9}};
  m.method.final_rounds = 3;
  m.method.placements = 3;
  m.method.remeasured_after_rel_spread = 0.1 + 0.2;
  m.method.remeasured_after_slowdown = 3.25;
  return m;
}

TuneResult MakeResult(const DeviceInfo& device, const Problem& problem, const std::string& variant,
                      int64_t tuned_at_unix_ms, int num_candidates = 4) {
  TuneResult r;
  r.problem = problem;
  r.device = device;
  r.best.name = variant;
  r.best.params = {{"tile_rows", 32}, {"tile_cols", 64}, {"vec", 4}, {"big", 1LL << 40}};
  r.best_measurement = MakeMeasurement(1.25e-4, 17, "cuda_event", 4);
  r.ceiling = MakeMeasurement(1.0e-4, 21, "cuda_event", 5);
  for (int i = 0; i < num_candidates; ++i) {
    CandidateResult c;
    c.candidate.name = variant + ".c" + std::to_string(i);
    c.candidate.params = {{"tile_rows", 8 << (i % 3)}, {"pad", i % 2}};
    if (i % 3 == 2) {
      c.measurement.valid = false;
      c.measurement.error = "check failed: first mismatch at index " + std::to_string(i * 7);
      c.phase = Phase::kCheck;
    } else {
      c.measurement = MakeMeasurement(1.25e-4 * (1 + i), 5 + i, "cuda_event");
      c.phase = i == 0 ? Phase::kFinal : Phase::kQuick;
    }
    r.candidates.push_back(c);
  }
  r.tried = num_candidates;
  r.valid = num_candidates - num_candidates / 3;
  r.tune_seconds = 3.75;
  r.tuned_at_unix_ms = tuned_at_unix_ms;
  return r;
}

// One dense f32 matrix unless a dtype is given (testing/problems.h builds it).
Problem MakeProblem(int64_t rows, int64_t cols, DType dtype = DType::kF32) {
  return MakeTestProblem(rows, cols, dtype);
}

// `downgrade` is prefixed with the undoing of step 4 -> 5 (the entries' library_version).
void StoreTest::SaveOneEntryThenDowngrade(const Problem& p, const std::string& downgrade) {
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->SaveTune(MakeResult(MakeDevice("GPU-old"), p, "v.old", 1000)).ok());
  }
  RawDb raw(path_);
  raw.Exec("DROP INDEX entries_library_version; ALTER TABLE entries DROP COLUMN library_version; " +
           downgrade);
}

void ExpectSameMeasurement(const Measurement& a, const Measurement& b, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(a.valid, b.valid);
  EXPECT_EQ(a.error, b.error);
  EXPECT_DOUBLE_EQ(a.median_s, b.median_s);
  EXPECT_DOUBLE_EQ(a.min_s, b.min_s);
  EXPECT_DOUBLE_EQ(a.max_s, b.max_s);
  EXPECT_EQ(a.samples, b.samples);
  EXPECT_EQ(a.warmup, b.warmup);
  EXPECT_EQ(a.method, b.method);
}

// Every stored field; DeviceInfo::index is not part of a device's identity and is not stored.
void ExpectSameResult(const TuneResult& got, const TuneResult& want, bool with_candidates) {
  EXPECT_EQ(got.problem.rows, want.problem.rows);
  EXPECT_EQ(got.problem.cols, want.problem.cols);
  EXPECT_EQ(got.problem.batch, want.problem.batch);
  EXPECT_EQ(got.problem.dtype, want.problem.dtype);
  EXPECT_EQ(got.problem.ld_in, want.problem.ld_in);
  EXPECT_EQ(got.problem.ld_out, want.problem.ld_out);
  EXPECT_EQ(got.device.backend, want.device.backend);
  EXPECT_EQ(got.device.uuid, want.device.uuid);
  EXPECT_EQ(got.device.name, want.device.name);
  EXPECT_EQ(got.device.memory_bytes, want.device.memory_bytes);
  EXPECT_EQ(got.device.attributes, want.device.attributes);
  EXPECT_EQ(got.device.library_version, want.device.library_version);
  EXPECT_EQ(got.device.Fingerprint(), want.device.Fingerprint());
  EXPECT_EQ(got.best.name, want.best.name);
  EXPECT_EQ(got.best.params, want.best.params);
  ExpectSameMeasurement(got.best_measurement, want.best_measurement, "best");
  ExpectSameMeasurement(got.ceiling, want.ceiling, "ceiling");
  EXPECT_EQ(got.tried, want.tried);
  EXPECT_EQ(got.valid, want.valid);
  EXPECT_DOUBLE_EQ(got.tune_seconds, want.tune_seconds);
  EXPECT_EQ(got.tuned_at_unix_ms, want.tuned_at_unix_ms);
  if (!with_candidates) {
    EXPECT_TRUE(got.candidates.empty());
    return;
  }
  ASSERT_EQ(got.candidates.size(), want.candidates.size());
  for (size_t i = 0; i < want.candidates.size(); ++i) {
    SCOPED_TRACE("candidate " + std::to_string(i));
    EXPECT_EQ(got.candidates[i].candidate.name, want.candidates[i].candidate.name);
    EXPECT_EQ(got.candidates[i].candidate.params, want.candidates[i].candidate.params);
    EXPECT_EQ(got.candidates[i].phase, want.candidates[i].phase);
    ExpectSameMeasurement(got.candidates[i].measurement, want.candidates[i].measurement,
                          "measurement");
  }
}

std::vector<std::string> Variants(const std::vector<TuneResult>& rs) {
  std::vector<std::string> v;
  for (const auto& r : rs) v.push_back(r.best.name);
  return v;
}

TEST_F(StoreTest, OpenCreatesSchemaWithUserVersionAndWal) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  RawDb raw(path_);
  EXPECT_EQ(raw.Int("PRAGMA user_version"), Store::kSchemaVersion);
  EXPECT_EQ(Store::kSchemaVersion, 5);
  EXPECT_EQ(raw.Text("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(raw.Int("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN "
                    "('devices', 'entries', 'candidates')"),
            3);
  EXPECT_GE(raw.Int("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN "
                    "('entries_shape', 'entries_variant', 'entries_tuned_at', "
                    "'candidates_entry', 'devices_library_version')"),
            5);
  // Reopening an up-to-date file changes nothing.
  store.reset();
  store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(raw.Int("PRAGMA user_version"), Store::kSchemaVersion);
}

TEST_F(StoreTest, OpenInMemory) {
  auto s = Store::Open(":memory:");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Problem p = MakeProblem(64, 32);
  ASSERT_TRUE((*s)->SaveTune(MakeResult(MakeDevice("GPU-a"), p, "v", 1000)).ok());
  auto got = (*s)->Lookup(MakeDevice("GPU-a").Fingerprint(), p);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->has_value());
}

TEST_F(StoreTest, OpenInMissingDirectoryFailsCleanly) {
  const std::string bad = dir_ + "/no/such/dir/cache.db";
  auto s = Store::Open(bad);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find(bad), std::string::npos) << s.status().message();
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/no"));
}

TEST_F(StoreTest, OpenOfEmptyPathOrDirectoryFailsCleanly) {
  auto empty = Store::Open("");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  auto dir = Store::Open(dir_);
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(dir.status().message().find(dir_), std::string::npos) << dir.status().message();
}

TEST_F(StoreTest, OpenOfNonDatabaseFileFailsCleanly) {
  {
    std::ofstream f(path_);
    f << std::string(4096, 'x');
  }
  auto s = Store::Open(path_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find(path_), std::string::npos) << s.status().message();
}

TEST_F(StoreTest, RefusesNewerSchema) {
  {
    RawDb raw(path_);
    raw.Exec("CREATE TABLE future (x); PRAGMA user_version = 99;");
  }
  auto s = Store::Open(path_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  const std::string msg = s.status().message();
  EXPECT_NE(msg.find("schema version 99"), std::string::npos) << msg;
  EXPECT_NE(msg.find("schema version " + std::to_string(Store::kSchemaVersion)), std::string::npos)
      << msg;
  EXPECT_NE(msg.find(path_), std::string::npos) << msg;
  RawDb raw(path_);
  EXPECT_EQ(raw.Int("PRAGMA user_version"), 99);
  EXPECT_EQ(raw.Int("SELECT count(*) FROM sqlite_master WHERE name = 'entries'"), 0);
}

// Device classes (core/device_class.h): an entry measured on one H100 is served to every H100 of
// the class, never to an H200.
DeviceInfo MakeH200(const std::string& uuid) {
  DeviceInfo d = MakeDevice(uuid);
  d.name = "NVIDIA H200";
  d.memory_bytes = 150'754'820'096ull;
  return d;
}

TEST_F(StoreTest, ClassLookupServesEveryInstanceOfTheClassButNeverAnotherModel) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  const Problem p = MakeProblem(4096, 4096);
  ASSERT_TRUE(store->SaveTune(MakeResult(MakeDevice("GPU-h100-a"), p, "v.a", 1000)).ok());
  auto other_h100 = store->LookupByClass(ClassOf(MakeDevice("GPU-h100-b")).key, p);
  ASSERT_TRUE(other_h100.ok()) << other_h100.status().ToString();
  ASSERT_TRUE(other_h100->has_value());
  EXPECT_EQ((*other_h100)->device.uuid, "GPU-h100-a");  // where it was measured
  EXPECT_EQ((*other_h100)->best.name, "v.a");
  EXPECT_EQ((*other_h100)->origin, Origin::kTuned);
  auto h200 = store->LookupByClass(ClassOf(MakeH200("GPU-h200")).key, p);
  ASSERT_TRUE(h200.ok());
  EXPECT_FALSE(h200->has_value()) << "an H100 entry was served for an H200";
  // Another kernel library version is the same class (schema version 5): the entry is found, and
  // says which version measured it (the service decides whether it may serve it).
  auto other_library = store->LookupByClass(ClassOf(MakeDevice("GPU-h100-b", "0.2.0")).key, p);
  ASSERT_TRUE(other_library.ok());
  ASSERT_TRUE(other_library->has_value());
  EXPECT_EQ((*other_library)->device.library_version, "0.1.0+ktest");
  StoreFilter by_class;
  by_class.device_class = ClassOf(MakeDevice("GPU-h100-b")).key;
  auto listed = store->List(by_class);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 1u);
  by_class.device_class = ClassOf(MakeH200("x")).key;
  EXPECT_TRUE(store->List(by_class)->empty());
}

TEST_F(StoreTest, MergeKeepsTheFasterWinnerOfTheClass) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  const Problem p = MakeProblem(2048, 1024);
  TuneResult local = MakeResult(MakeDevice("GPU-local"), p, "v.local", 1000);
  ASSERT_TRUE(store->SaveTune(local).ok());
  // Slower (or as fast), measured on another card of the class: kept out.
  TuneResult slower = MakeResult(MakeDevice("GPU-remote"), p, "v.slow", 2000);
  slower.best_measurement.median_s *= 1.5;
  slower.origin = Origin::kImported;
  auto merged = store->Merge(slower);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_FALSE(*merged);
  EXPECT_FALSE(*store->Merge(local));  // the same result again
  // Faster: stored under its own instance and served from now on.
  TuneResult faster = MakeResult(MakeDevice("GPU-remote"), p, "v.fast", 3000);
  faster.best_measurement.median_s *= 0.5;
  faster.best_measurement.min_s *= 0.5;
  faster.origin = Origin::kImported;
  merged = store->Merge(faster);
  ASSERT_TRUE(merged.ok());
  EXPECT_TRUE(*merged);
  auto best = store->LookupByClass(ClassOf(MakeDevice("GPU-local")).key, p, true);
  ASSERT_TRUE(best.ok() && best->has_value());
  EXPECT_EQ((*best)->best.name, "v.fast");
  EXPECT_EQ((*best)->device.uuid, "GPU-remote");
  EXPECT_EQ((*best)->origin, Origin::kImported);
  EXPECT_EQ((*best)->candidates.size(), faster.candidates.size());
  // The local entry is still there (under its own instance), just not the winner.
  auto own = store->Lookup(MakeDevice("GPU-local").Fingerprint(), p);
  ASSERT_TRUE(own.ok() && own->has_value());
  EXPECT_EQ((*own)->best.name, "v.local");
  // An H200 result never competes with (or replaces) the H100 one.
  TuneResult h200 = MakeResult(MakeH200("GPU-h200"), p, "v.h200", 4000);
  h200.best_measurement.median_s *= 0.1;
  h200.best_measurement.min_s *= 0.1;
  EXPECT_TRUE(*store->Merge(h200));
  best = store->LookupByClass(ClassOf(MakeDevice("GPU-local")).key, p);
  EXPECT_EQ((*best)->best.name, "v.fast");
}

TEST_F(StoreTest, MigratesAVersion1DatabaseToDeviceClasses) {
  const Problem p = MakeProblem(512, 256);
  SaveOneEntryThenDowngrade(
      p,
      "DROP INDEX devices_device_class; ALTER TABLE devices DROP COLUMN device_class; "
      "ALTER TABLE entries DROP COLUMN origin; ALTER TABLE entries DROP COLUMN exactness; "
      "ALTER TABLE entries DROP COLUMN contention; PRAGMA user_version = 1;");
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  {
    RawDb raw(path_);
    EXPECT_EQ(raw.Int("PRAGMA user_version"), Store::kSchemaVersion);
    EXPECT_EQ(raw.Text("SELECT device_class FROM devices"), ClassOf(MakeDevice("GPU-old")).key);
    EXPECT_EQ(raw.Text("SELECT origin FROM entries"), "tuned");
  }
  // The copied database's entries are served to another card of the class.
  auto hit = store->LookupByClass(ClassOf(MakeDevice("GPU-new")).key, p);
  ASSERT_TRUE(hit.ok() && hit->has_value());
  EXPECT_EQ((*hit)->best.name, "v.old");
}

// Version 5: the kernel library version leaves the class key for each entry, so an upgrade keeps
// the class; every entry of an older file takes its device row's version.
TEST_F(StoreTest, MigratesAVersion4DatabaseToEntryLibraryVersions) {
  const Problem p = MakeProblem(512, 256);
  SaveOneEntryThenDowngrade(p,
                            "UPDATE devices SET device_class = 'v1-class-key'; "
                            "PRAGMA user_version = 4;");
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  {
    RawDb raw(path_);
    EXPECT_EQ(raw.Int("PRAGMA user_version"), Store::kSchemaVersion);
    EXPECT_EQ(raw.Text("SELECT library_version FROM entries"), "0.1.0+ktest");
    EXPECT_EQ(raw.Text("SELECT device_class FROM devices"), ClassOf(MakeDevice("GPU-old")).key);
  }
  // A device of the class on another library version (an upgraded node) finds the entry, which
  // says which version measured it.
  const DeviceInfo upgraded = MakeDevice("GPU-new", "0.2.0+knew");
  EXPECT_EQ(ClassOf(upgraded).key, ClassOf(MakeDevice("GPU-old")).key);
  auto hit = store->LookupByClass(ClassOf(upgraded).key, p);
  ASSERT_TRUE(hit.ok() && hit->has_value());
  EXPECT_EQ((*hit)->best.name, "v.old");
  EXPECT_EQ((*hit)->device.library_version, "0.1.0+ktest");
  StoreFilter f;
  f.library_version = "0.1.0+ktest";
  auto listed = store->List(f);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 1u);
}

// The entry keeps the version it was measured with, apart from its device row's (which is the
// version the device was recorded with); a class lookup serves this build's version first, and
// an entry of another version never keeps a merged result of this one out.
TEST_F(StoreTest, ClassLookupPrefersThisBuildsLibraryVersion) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  const Problem p = MakeProblem(512, 256);
  TuneResult old = MakeResult(MakeDevice("GPU-a", "0.0.9+kold"), p, "v.old", 1000);
  old.best_measurement.median_s *= 0.5;  // faster than anything below
  old.best_measurement.min_s *= 0.5;
  ASSERT_TRUE(store->SaveTune(old).ok());
  const std::string cls = ClassOf(MakeDevice("GPU-b", kLibraryVersion)).key;
  auto hit = store->LookupByClass(cls, p);
  ASSERT_TRUE(hit.ok() && hit->has_value());
  EXPECT_EQ((*hit)->device.library_version, "0.0.9+kold") << "the class has nothing newer";
  TuneResult current = MakeResult(MakeDevice("GPU-b", kLibraryVersion), p, "v.new", 2000);
  current.origin = Origin::kShared;
  auto merged = store->Merge(current);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_TRUE(*merged) << "a faster entry of another version does not keep it out";
  hit = store->LookupByClass(cls, p);
  ASSERT_TRUE(hit.ok() && hit->has_value());
  EXPECT_EQ((*hit)->best.name, "v.new");
  EXPECT_EQ((*hit)->device.library_version, kLibraryVersion);
  // The same version: the faster stored one keeps a slower merge out, as before.
  TuneResult slower = MakeResult(MakeDevice("GPU-c", kLibraryVersion), p, "v.slow", 3000);
  slower.best_measurement.median_s *= 4;
  slower.best_measurement.min_s *= 4;
  slower.best_measurement.max_s *= 4;
  merged = store->Merge(slower);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_FALSE(*merged);
  // The entry column is what counts, not the device row: an entry rewritten to an older version
  // (what an entry of an older build on the same device row looks like) reads back with it.
  {
    RawDb raw(path_);
    raw.Exec("UPDATE entries SET library_version = '0.0.8+kolder' WHERE variant = 'v.new'");
  }
  auto back = store->Lookup(MakeDevice("GPU-b", kLibraryVersion).Fingerprint(), p);
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_EQ((*back)->device.library_version, "0.0.8+kolder");
}

TEST_F(StoreTest, MigratesAVersion3DatabaseToContention) {
  const Problem p = MakeProblem(512, 256);
  SaveOneEntryThenDowngrade(p,
                            "ALTER TABLE entries DROP COLUMN contention; PRAGMA user_version = 3;");
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  {
    RawDb raw(path_);
    EXPECT_EQ(raw.Int("PRAGMA user_version"), Store::kSchemaVersion);
    EXPECT_EQ(raw.Text("SELECT contention FROM entries"), "");  // taken as measured idle
  }
  // A result measured under contention keeps its mark through the store.
  TuneResult busy = MakeResult(MakeDevice("GPU-old"), MakeProblem(256, 512), "v.busy", 2000);
  busy.contention = "device busy: utilization 97%, 1 other process";
  ASSERT_TRUE(store->SaveTune(busy).ok());
  auto back = store->Lookup(busy.device.Fingerprint(), busy.problem);
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_EQ((*back)->contention, busy.contention);
  auto old = store->Lookup(busy.device.Fingerprint(), p);
  ASSERT_TRUE(old.ok() && old->has_value());
  EXPECT_EQ((*old)->contention, "");
}

// The daemon's restart reads back the results it stored as measured under contention (to
// measure them again) and those measured idle (their ceilings are its idle reference).
TEST_F(StoreTest, FiltersByContention) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  const DeviceInfo dev = MakeDevice("GPU-a");
  TuneResult busy = MakeResult(dev, MakeProblem(256, 512), "v.busy", 2000);
  busy.contention = "device busy: utilization 97%, 1 other process";
  ASSERT_TRUE(store->SaveTune(busy).ok());
  ASSERT_TRUE(store->SaveTune(MakeResult(dev, MakeProblem(512, 256), "v.idle", 1000)).ok());
  StoreFilter f;
  f.contended = true;
  EXPECT_FALSE(f.empty());
  auto got = store->List(f);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].best.name, "v.busy");
  // With the other fields, and with a page cursor after it.
  f.device_fingerprint = dev.Fingerprint();
  f.contended = false;
  std::vector<EntryCursor> cursors;
  got = store->List(f, false, 0, nullptr, &cursors);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].best.name, "v.idle");
  got = store->List(f, false, 0, &cursors[0]);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got->empty());
}

TEST_F(StoreTest, MigratesAVersion2DatabaseToExactness) {
  const Problem p = MakeProblem(512, 256);
  SaveOneEntryThenDowngrade(
      p,
      "ALTER TABLE entries DROP COLUMN exactness; ALTER TABLE entries DROP COLUMN "
      "contention; PRAGMA user_version = 2;");
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  {
    RawDb raw(path_);
    EXPECT_EQ(raw.Int("PRAGMA user_version"), Store::kSchemaVersion);
    EXPECT_EQ(raw.Text("SELECT exactness FROM entries"), "bit");
  }
  // The old entry answers the bit-exact problem, and only it.
  auto hit = store->Lookup(MakeDevice("GPU-old").Fingerprint(), p);
  ASSERT_TRUE(hit.ok() && hit->has_value());
  EXPECT_EQ((*hit)->best.name, "v.old");
  EXPECT_EQ((*hit)->problem.exactness, Exactness::kBit);
  Problem value = p;
  value.exactness = Exactness::kValue;
  hit = store->LookupByClass(ClassOf(MakeDevice("GPU-old")).key, value);
  ASSERT_TRUE(hit.ok());
  EXPECT_FALSE(hit->has_value());
}

TEST_F(StoreTest, BitExactAndValueExactProblemsAreSeparateEntries) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  const DeviceInfo dev = MakeDevice("GPU-1");
  Problem bit = MakeProblem(4097, 3001);
  bit.dtype = DType::kF32;
  Problem value = bit;
  value.exactness = Exactness::kValue;
  ASSERT_TRUE(store->SaveTune(MakeResult(dev, bit, "v.bit", 1000)).ok());
  ASSERT_TRUE(store->SaveTune(MakeResult(dev, value, "cublas.geam", 2000)).ok());
  auto b = store->Lookup(dev.Fingerprint(), bit);
  auto v = store->Lookup(dev.Fingerprint(), value);
  ASSERT_TRUE(b.ok() && b->has_value() && v.ok() && v->has_value());
  EXPECT_EQ((*b)->best.name, "v.bit");
  EXPECT_EQ((*b)->problem.exactness, Exactness::kBit);
  EXPECT_EQ((*v)->best.name, "cublas.geam");
  EXPECT_EQ((*v)->problem.exactness, Exactness::kValue);
  auto by_class = store->LookupByClass(ClassOf(dev).key, bit);
  ASSERT_TRUE(by_class.ok() && by_class->has_value());
  EXPECT_EQ((*by_class)->best.name, "v.bit");
  auto all = store->List(StoreFilter());
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 2u);
  // Where the dtype does not tell them apart, value-exact is the same entry (stored as "bit").
  Problem i32 = bit;
  i32.dtype = DType::kI32;
  i32.exactness = Exactness::kValue;
  ASSERT_TRUE(store->SaveTune(MakeResult(dev, i32, "v.i32", 3000)).ok());
  Problem i32_bit = i32;
  i32_bit.exactness = Exactness::kBit;
  auto i = store->Lookup(dev.Fingerprint(), i32_bit);
  ASSERT_TRUE(i.ok() && i->has_value());
  EXPECT_EQ((*i)->problem.exactness, Exactness::kBit);
  RawDb raw(path_);
  EXPECT_EQ(raw.Int("SELECT count(*) FROM entries WHERE exactness = 'value'"), 1);
}

TEST_F(StoreTest, SaveThenLookupRoundTripsEveryField) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  DeviceInfo dev = MakeDevice("GPU-1111");
  dev.index = 3;
  Problem p;
  p.rows = 384;
  p.cols = 512;
  p.batch = 3;
  p.dtype = DType::kBF16;
  p.ld_in = 520;
  p.ld_out = 400;
  TuneResult r = MakeResult(dev, p, "tile32x64.rows8.vec4", 1'700'000'000'123, 6);
  r.ceiling.valid = false;
  r.ceiling.error = "copy timed out";
  ASSERT_TRUE(store->SaveTune(r).ok());

  auto got = store->Lookup(dev.Fingerprint(), p, /*include_candidates=*/true);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got->has_value());
  ExpectSameResult(**got, r, true);
  EXPECT_EQ((*got)->device.index, 0);  // not part of the identity, not stored

  auto without = store->Lookup(dev.Fingerprint(), p);
  ASSERT_TRUE(without.ok());
  ASSERT_TRUE(without->has_value());
  ExpectSameResult(**without, r, false);

  // The derived columns an admin queries.
  RawDb raw(path_);
  EXPECT_EQ(raw.Text("SELECT problem_key FROM entries"), p.Key());
  EXPECT_EQ(raw.Text("SELECT dtype FROM entries"), "bf16");
  EXPECT_DOUBLE_EQ(raw.Real("SELECT gbps FROM entries"), r.gbps());
  EXPECT_EQ(raw.Int("SELECT ceiling_gbps IS NULL AND ratio IS NULL FROM entries"), 1);
  EXPECT_EQ(raw.Text("SELECT json_extract(params, '$.tile_cols') FROM entries"), "64");
  EXPECT_EQ(raw.Text("SELECT json_extract(attributes, '$.sm_count') FROM devices"), "132");
  EXPECT_EQ(raw.Int("SELECT count(*) FROM candidates WHERE valid = 0 AND error != ''"), 2);
  EXPECT_EQ(raw.Int("SELECT count(*) FROM candidates WHERE gbps IS NULL"), 2);
}

TEST_F(StoreTest, RatioAndEquivalentProblems) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  DeviceInfo dev = MakeDevice("GPU-r");
  Problem p = MakeProblem(1024, 2048, DType::kF16);
  TuneResult r = MakeResult(dev, p, "v", 5);
  ASSERT_TRUE(store->SaveTune(r).ok());
  RawDb raw(path_);
  EXPECT_DOUBLE_EQ(raw.Real("SELECT ceiling_gbps FROM entries"), r.ceiling_gbps());
  EXPECT_DOUBLE_EQ(raw.Real("SELECT ratio FROM entries"), r.gbps() / r.ceiling_gbps());

  // Dense leading dimensions spelled out share the cache key.
  Problem explicit_ld = p;
  explicit_ld.ld_in = p.cols;
  explicit_ld.ld_out = p.rows;
  auto hit = store->Lookup(dev.Fingerprint(), explicit_ld);
  ASSERT_TRUE(hit.ok());
  EXPECT_TRUE(hit->has_value());

  Problem other = p;
  other.batch = 2;
  auto miss = store->Lookup(dev.Fingerprint(), other);
  ASSERT_TRUE(miss.ok());
  EXPECT_FALSE(miss->has_value());
  auto other_device = store->Lookup(MakeDevice("GPU-zzz").Fingerprint(), p);
  ASSERT_TRUE(other_device.ok());
  EXPECT_FALSE(other_device->has_value());
}

TEST_F(StoreTest, RefusesTuneWithoutValidWinner) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  TuneResult r = MakeResult(MakeDevice("GPU-x"), MakeProblem(8, 8), "v", 1);
  r.best_measurement.valid = false;
  Status s = store->SaveTune(r);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  auto all = store->List({});
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->empty());
}

TEST_F(StoreTest, SavingAgainReplacesEntryAndCandidates) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  DeviceInfo dev = MakeDevice("GPU-2222");
  Problem p = MakeProblem(4096, 4096);
  ASSERT_TRUE(store->SaveTune(MakeResult(dev, p, "old", 1000, 6)).ok());
  TuneResult second = MakeResult(dev, p, "new", 2000, 2);
  second.best_measurement.median_s = 9e-5;
  ASSERT_TRUE(store->SaveTune(second).ok());

  RawDb raw(path_);
  EXPECT_EQ(raw.Int("SELECT count(*) FROM entries"), 1);
  EXPECT_EQ(raw.Int("SELECT count(*) FROM candidates"), 2);
  EXPECT_EQ(raw.Int("SELECT count(*) FROM devices"), 1);
  auto got = store->Lookup(dev.Fingerprint(), p, true);
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE(got->has_value());
  ExpectSameResult(**got, second, true);
}

TEST_F(StoreTest, TwoDevicesKeepSeparateRows) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  DeviceInfo a = MakeDevice("GPU-aaaa");
  DeviceInfo b = MakeDevice("GPU-bbbb");
  ASSERT_NE(a.Fingerprint(), b.Fingerprint());
  Problem p = MakeProblem(256, 128, DType::kF64);
  ASSERT_TRUE(store->SaveTune(MakeResult(a, p, "on_a", 10)).ok());
  ASSERT_TRUE(store->SaveTune(MakeResult(b, p, "on_b", 20)).ok());
  auto ga = store->Lookup(a.Fingerprint(), p);
  auto gb = store->Lookup(b.Fingerprint(), p);
  ASSERT_TRUE(ga.ok() && ga->has_value());
  ASSERT_TRUE(gb.ok() && gb->has_value());
  EXPECT_EQ((*ga)->best.name, "on_a");
  EXPECT_EQ((*gb)->best.name, "on_b");
  EXPECT_EQ((*ga)->device.uuid, "GPU-aaaa");
  EXPECT_EQ((*gb)->device.uuid, "GPU-bbbb");
  auto devices = store->Devices();
  ASSERT_TRUE(devices.ok());
  EXPECT_EQ(devices->size(), 2u);
}

TEST_F(StoreTest, PersistsAcrossReopen) {
  DeviceInfo dev = MakeDevice("GPU-3333");
  DeviceInfo idle = MakeDevice("GPU-idle", "0.0.9");
  Problem p = MakeProblem(100, 300, DType::kI8);
  TuneResult r = MakeResult(dev, p, "persist", 42, 5);
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->SaveTune(r).ok());
    ASSERT_TRUE(store->UpsertDevice(idle).ok());
    ASSERT_TRUE(store->UpsertDevice(idle).ok());  // idempotent
  }
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  auto got = store->Lookup(dev.Fingerprint(), p, true);
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE(got->has_value());
  ExpectSameResult(**got, r, true);
  auto devices = store->Devices();
  ASSERT_TRUE(devices.ok());
  ASSERT_EQ(devices->size(), 2u);
  std::vector<std::string> fps;
  for (const auto& d : *devices) fps.push_back(d.Fingerprint());
  EXPECT_NE(std::find(fps.begin(), fps.end(), dev.Fingerprint()), fps.end());
  EXPECT_NE(std::find(fps.begin(), fps.end(), idle.Fingerprint()), fps.end());
}

// The method is one JSON column that an admin can read; rows written by older versions (free-form
// JSON, the measurement's keys nested under "round") are read as well as they map.
TEST_F(StoreTest, MethodIsAJsonColumnAndOlderRowsStillRead) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  DeviceInfo dev = MakeDevice("GPU-5555");
  Problem p = MakeProblem(256, 128);
  TuneResult r = MakeResult(dev, p, "json", 7, 1);
  ASSERT_TRUE(store->SaveTune(r).ok());
  RawDb raw(path_);
  EXPECT_EQ(raw.Text("SELECT json_extract(method, '$.buffers') FROM entries"), "4");
  EXPECT_EQ(raw.Text("SELECT json_extract(method, '$.timer') FROM entries"), "cuda_event");
  EXPECT_EQ(raw.Int("SELECT json_type(method, '$.threads') IS NULL FROM entries"), 1);  // zero
  raw.Exec(R"(UPDATE entries SET method = '{"final_rounds":3,"round":{"timer":"cuda_event",)"
           R"("kind":"kernel","buffers":13,"l2_bytes":52428800}}')");
  auto got = store->Lookup(dev.Fingerprint(), p, false);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got->has_value());
  const MeasureMethod& m = (**got).best_measurement.method;
  EXPECT_EQ(m.timer, "cuda_event");
  EXPECT_EQ(m.buffers, 13);
  EXPECT_EQ(m.final_rounds, 3);
  EXPECT_EQ(m.cache_bytes, 0);  // an old key that maps to nothing
  // A row that does not read back is skipped (a miss) and counted, never an error.
  raw.Exec(R"(UPDATE entries SET method = '{"buffers":"many"}')");
  got = store->Lookup(dev.Fingerprint(), p, false);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_FALSE(got->has_value());
  EXPECT_EQ(store->bad_rows_skipped(), 1);
}

TEST_F(StoreTest, FailedSaveLeavesPreviousStateIntact) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  DeviceInfo dev = MakeDevice("GPU-4444");
  Problem p = MakeProblem(512, 512);
  TuneResult before = MakeResult(dev, p, "before", 100, 4);
  ASSERT_TRUE(store->SaveTune(before).ok());

  // Make the third candidate insert of the next tune fail, after the device upsert, the old
  // entry's delete and the new entry's insert have run inside the transaction.
  RawDb raw(path_);
  raw.Exec(
      "CREATE TRIGGER inject_failure BEFORE INSERT ON candidates WHEN NEW.variant = 'explode' "
      "BEGIN SELECT RAISE(ABORT, 'injected failure'); END;");
  TuneResult after = MakeResult(dev, p, "after", 200, 5);
  after.candidates[2].candidate.name = "explode";
  Status s = store->SaveTune(after);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("injected failure"), std::string::npos) << s.message();

  auto got = store->Lookup(dev.Fingerprint(), p, true);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got->has_value());
  ExpectSameResult(**got, before, true);
  EXPECT_EQ(raw.Int("SELECT count(*) FROM entries"), 1);
  EXPECT_EQ(raw.Int("SELECT count(*) FROM candidates"), 4);

  // A new device's row goes with the failed transaction too.
  DeviceInfo fresh = MakeDevice("GPU-fresh");
  TuneResult fresh_result = MakeResult(fresh, p, "x", 300, 3);
  fresh_result.candidates[1].candidate.name = "explode";
  EXPECT_FALSE(store->SaveTune(fresh_result).ok());
  auto devices = store->Devices();
  ASSERT_TRUE(devices.ok());
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0].uuid, "GPU-4444");

  // The connection is usable again afterwards.
  raw.Exec("DROP TRIGGER inject_failure");
  ASSERT_TRUE(store->SaveTune(after).ok());
  got = store->Lookup(dev.Fingerprint(), p, true);
  ASSERT_TRUE(got.ok() && got->has_value());
  ExpectSameResult(**got, after, true);
}

// Six entries over two devices and two library versions.
class StoreListTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    store_ = OpenStore();
    ASSERT_NE(store_, nullptr);
    auto save = [&](const DeviceInfo& d, Problem p, const char* variant, int64_t t) {
      ASSERT_TRUE(store_->SaveTune(MakeResult(d, p, variant, t, 3)).ok());
    };
    save(d1_, MakeProblem(1024, 1024, DType::kF32), "a", 1000);
    save(d1_, MakeProblem(1024, 2048, DType::kF32), "b", 6000);
    save(d1_, MakeProblem(1024, 1024, DType::kF16), "a", 3000);
    save(d2_, MakeProblem(1024, 1024, DType::kF32), "b", 2000);
    save(d2_, MakeProblem(2048, 1024, DType::kF16), "c", 5000);
    save(d2_, MakeProblem(64, 64, DType::kI8), "a", 4000);
  }

  std::vector<std::string> ListVariants(const StoreFilter& f, int limit = 0) {
    auto r = store_->List(f, false, limit);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? Variants(*r) : std::vector<std::string>{};
  }

  DeviceInfo d1_ = MakeDevice("GPU-d1", "1.0");
  DeviceInfo d2_ = MakeDevice("GPU-d2", "2.0");
  std::unique_ptr<Store> store_;
};

TEST_F(StoreListTest, ListsNewestFirstWithLimit) {
  using V = std::vector<std::string>;
  StoreFilter all;
  EXPECT_TRUE(all.empty());
  EXPECT_EQ(ListVariants(all), (V{"b", "c", "a", "a", "b", "a"}));
  EXPECT_EQ(ListVariants(all, 2), (V{"b", "c"}));
  auto r = store_->List(all, false, 1);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].tuned_at_unix_ms, 6000);
  EXPECT_TRUE((*r)[0].candidates.empty());
  auto with = store_->List(all, true, 2);
  ASSERT_TRUE(with.ok());
  ASSERT_EQ(with->size(), 2u);
  EXPECT_EQ((*with)[0].candidates.size(), 3u);
  EXPECT_EQ((*with)[1].candidates.size(), 3u);
  EXPECT_EQ((*with)[1].candidates[0].candidate.name, "c.c0");
}

TEST_F(StoreListTest, FiltersCombine) {
  using V = std::vector<std::string>;
  StoreFilter f;
  f.device_fingerprint = d1_.Fingerprint();
  EXPECT_FALSE(f.empty());
  EXPECT_EQ(ListVariants(f), (V{"b", "a", "a"}));

  StoreFilter dtype;
  dtype.dtype = DType::kF16;
  EXPECT_EQ(ListVariants(dtype), (V{"c", "a"}));
  dtype.device_fingerprint = d2_.Fingerprint();
  EXPECT_EQ(ListVariants(dtype), (V{"c"}));

  StoreFilter shape;
  shape.rows = 1024;
  EXPECT_EQ(ListVariants(shape), (V{"b", "a", "b", "a"}));
  shape.cols = 1024;
  EXPECT_EQ(ListVariants(shape), (V{"a", "b", "a"}));
  StoreFilter cols_only;
  cols_only.cols = 1024;
  EXPECT_EQ(ListVariants(cols_only), (V{"c", "a", "b", "a"}));

  StoreFilter variant;
  variant.variant = "a";
  EXPECT_EQ(ListVariants(variant), (V{"a", "a", "a"}));
  auto va = store_->List(variant);
  ASSERT_TRUE(va.ok());
  EXPECT_EQ(va->at(0).tuned_at_unix_ms, 4000);
  EXPECT_EQ(va->at(2).tuned_at_unix_ms, 1000);

  StoreFilter lib;
  lib.library_version = "2.0";
  auto l = store_->List(lib);
  ASSERT_TRUE(l.ok());
  ASSERT_EQ(l->size(), 3u);
  for (const auto& r : *l) EXPECT_EQ(r.device.uuid, "GPU-d2");

  StoreFilter before;
  before.tuned_before_unix_ms = 3000;  // strictly before
  EXPECT_EQ(ListVariants(before), (V{"b", "a"}));
  before.variant = "b";
  EXPECT_EQ(ListVariants(before), (V{"b"}));

  StoreFilter none;
  none.variant = "nope";
  EXPECT_TRUE(ListVariants(none).empty());
  StoreFilter other_lib;
  other_lib.library_version = "1.0";
  other_lib.device_fingerprint = d2_.Fingerprint();
  EXPECT_TRUE(ListVariants(other_lib).empty());
}

TEST_F(StoreListTest, DeleteReturnsCountsAndCascades) {
  RawDb raw(path_);
  ASSERT_EQ(raw.Int("SELECT count(*) FROM candidates"), 18);

  StoreFilter none;
  none.variant = "nope";
  auto n = store_->Delete(none);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0);

  StoreFilter old;
  old.library_version = "1.0";
  old.dtype = DType::kF32;
  n = store_->Delete(old);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 2);
  EXPECT_EQ(raw.Int("SELECT count(*) FROM entries"), 4);
  EXPECT_EQ(raw.Int("SELECT count(*) FROM candidates"), 12);
  EXPECT_EQ(raw.Int("SELECT count(*) FROM candidates WHERE entry_id NOT IN "
                    "(SELECT id FROM entries)"),
            0);

  StoreFilter before;
  before.tuned_before_unix_ms = 4500;
  n = store_->Delete(before);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 3);  // 2000, 3000, 4000
  EXPECT_EQ(ListVariants({}), (std::vector<std::string>{"c"}));
  EXPECT_EQ(raw.Int("SELECT count(*) FROM candidates"), 3);

  n = store_->Delete({});
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(raw.Int("SELECT count(*) FROM candidates"), 0);
  // Device identities stay.
  auto devices = store_->Devices();
  ASSERT_TRUE(devices.ok());
  EXPECT_EQ(devices->size(), 2u);
}

TEST_F(StoreTest, ConcurrentSaveAndLookupFromEightThreads) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  // A second Store on the same file: cross-connection locking goes through WAL + busy timeout.
  auto second = OpenStore();
  ASSERT_NE(second, nullptr);
  constexpr int kThreads = 8;
  constexpr int kIterations = 15;
  const Problem shared = MakeProblem(777, 333);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Store* s = (t % 2 == 0) ? store.get() : second.get();
      DeviceInfo dev = MakeDevice("GPU-t" + std::to_string(t % 4));
      for (int i = 0; i < kIterations; ++i) {
        Problem own = MakeProblem(64 * (t + 1), 32 * (i % 3 + 1));
        TuneResult r = MakeResult(dev, own, "t" + std::to_string(t), 1000 * t + i, 3);
        if (!s->SaveTune(r).ok()) ++failures;
        if (!s->SaveTune(MakeResult(dev, shared, "shared", i, 2)).ok()) ++failures;
        auto got = s->Lookup(dev.Fingerprint(), own, true);
        if (!got.ok() || !got->has_value() || (*got)->candidates.size() != 3) ++failures;
        auto sh = s->Lookup(dev.Fingerprint(), shared, true);
        if (!sh.ok() || !sh->has_value() || (*sh)->candidates.size() != 2) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);

  auto all = store->List({});
  ASSERT_TRUE(all.ok());
  // 8 threads x 3 shapes each, plus the shared problem on each of 4 devices.
  EXPECT_EQ(all->size(), static_cast<size_t>(kThreads * 3 + 4));
  RawDb raw(path_);
  EXPECT_EQ(raw.Int("SELECT count(*) FROM candidates"), kThreads * 3 * 3 + 4 * 2);
  EXPECT_EQ(raw.Int("SELECT count(*) FROM devices"), 4);
}

}  // namespace
}  // namespace transposed

namespace transposed {
namespace {

// A backup made with `sqlite3 cache.db .dump` and restored with `sqlite3 new.db < dump.sql`
// carries the schema and the rows but not PRAGMA user_version: the store adopts it.
TEST_F(StoreTest, AcceptsADatabaseRestoredFromSqliteDump) {
  const DeviceInfo dev = MakeDevice("GPU-dump");
  {
    auto store = OpenStore();
    ASSERT_TRUE(store->SaveTune(MakeResult(dev, MakeProblem(512, 256), "tile32x32", 1000)).ok());
  }
  const std::string restored = dir_ + "/restored.db";
  const std::string cmd = "sqlite3 '" + path_ + "' .dump | sqlite3 '" + restored + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  {
    RawDb raw(restored);
    ASSERT_EQ(raw.Int("PRAGMA user_version"), 0);
  }
  auto s = Store::Open(restored);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE((*s)->read_only().empty());
  auto hit = (*s)->Lookup(dev.Fingerprint(), MakeProblem(512, 256));
  ASSERT_TRUE(hit.ok());
  ASSERT_TRUE(hit->has_value());
  EXPECT_EQ((*hit)->best.name, "tile32x32");
  s->reset();
  RawDb raw(restored);
  EXPECT_EQ(raw.Int("PRAGMA user_version"), Store::kSchemaVersion);
}

TEST_F(StoreTest, TablesOfAnotherSchemaWithoutVersionAreRefusedBriefly) {
  {
    RawDb raw(path_);
    raw.Exec("CREATE TABLE entries (id INTEGER PRIMARY KEY, something TEXT);");
  }
  auto s = Store::Open(path_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("no schema version"), std::string::npos)
      << s.status().message();
  EXPECT_LT(s.status().message().size(), 600u) << s.status().message();
}

// Runs `body` as an unprivileged user when the test runs as root (root writes any file), so that
// file modes bind; returns what the body returned (its exit status).
int AsUnprivileged(const std::function<int()>& body) {
  if (geteuid() != 0) return body();
  const pid_t pid = fork();
  if (pid == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(100);
    _exit(body());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 101;
}

// A database that cannot be written (read-only file in a read-only directory) opens read-only:
// lookups work, writes answer FAILED_PRECONDITION naming the cause.
TEST_F(StoreTest, ReadOnlyFileAndDirectoryOpenReadOnly) {
  const DeviceInfo dev = MakeDevice("GPU-ro");
  {
    auto store = OpenStore();
    ASSERT_TRUE(store->SaveTune(MakeResult(dev, MakeProblem(64, 64), "tile64x64", 1000)).ok());
  }
  ASSERT_EQ(chmod(path_.c_str(), 0444), 0);
  ASSERT_EQ(chmod(dir_.c_str(), 0555), 0);
  const std::string path = path_;
  const int rc = AsUnprivileged([&]() -> int {
    auto s = Store::Open(path);
    if (!s.ok()) {
      fprintf(stderr, "open: %s\n", s.status().ToString().c_str());
      return 1;
    }
    if ((*s)->read_only().empty()) return 2;
    auto hit = (*s)->Lookup(dev.Fingerprint(), MakeProblem(64, 64));
    if (!hit.ok() || !hit->has_value() || (*hit)->best.name != "tile64x64") return 3;
    Status w = (*s)->SaveTune(MakeResult(dev, MakeProblem(8, 8), "x", 2000));
    if (w.code() != StatusCode::kFailedPrecondition) return 4;
    if (w.message().find("read-only") == std::string::npos) return 5;
    if ((*s)->Delete(StoreFilter{}).status().code() != StatusCode::kFailedPrecondition) return 6;
    return 0;
  });
  chmod(dir_.c_str(), 0755);
  chmod(path_.c_str(), 0644);
  EXPECT_EQ(rc, 0);
}

// An outside process holding the write lock: writes answer UNAVAILABLE (not INTERNAL) after the
// busy wait, and lookups never wait behind them.
TEST_F(StoreTest, ForeignWriteLockMakesWritesUnavailableAndLookupsStayFast) {
  const DeviceInfo dev = MakeDevice("GPU-lock");
  auto store = OpenStore();
  ASSERT_TRUE(store->SaveTune(MakeResult(dev, MakeProblem(64, 64), "tile64x64", 1000)).ok());
  RawDb outside(path_);
  outside.Exec(
      "BEGIN IMMEDIATE; INSERT INTO devices (fingerprint, backend, uuid, name, "
      "memory_bytes, library_version, first_seen_unix_ms, last_seen_unix_ms) VALUES "
      "('x', 'cpu', 'u', 'n', 1, 'v', 0, 0);");
  auto writer = std::async(std::launch::async, [&] {
    return store->SaveTune(MakeResult(dev, MakeProblem(32, 32), "w", 2000));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the save is in its busy wait
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) {
    auto hit = store->Lookup(dev.Fingerprint(), MakeProblem(64, 64));
    ASSERT_TRUE(hit.ok()) << hit.status().ToString();
    ASSERT_TRUE(hit->has_value());
  }
  const double lookups_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(lookups_s, 1.0) << "lookups waited behind a write stuck on a foreign lock";
  Status saved = writer.get();
  EXPECT_EQ(saved.code(), StatusCode::kUnavailable) << saved.ToString();
  EXPECT_NE(saved.message().find("locked"), std::string::npos) << saved.message();
  outside.Exec("ROLLBACK;");
  EXPECT_TRUE(store->SaveTune(MakeResult(dev, MakeProblem(32, 32), "w", 2000)).ok());
}

}  // namespace
}  // namespace transposed

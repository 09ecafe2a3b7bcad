// Issue 22's storage probes against the real daemon (CPU backend): a poisoned import or --seed
// line is refused and counted while listings keep working; a read-only database file, a full
// disk at start (a small tmpfs, filled) and a database locked by another process at start are
// served read-only, and once the file can be written again the daemon stores tunes (health
// service `transposed.store` and the metric `transposed_store_read_only` follow).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "proto/exported_entry_json.h"
#include "testing/daemon_process.h"
#include "testing/grpc_health.h"
#include "testing/requests.h"
#include "testing/test_files.h"
#include "transposed/v1/transposed.grpc.pb.h"

namespace transposed {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::GetConfigRequestFor;
using testing::HealthCheck;
using testing::ReadFile;

class StorageFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(temp_.ok()) << "mkdtemp failed";
    chmod(dir_.c_str(), 0755);
  }
  void TearDown() override {
    if (mounted_) umount2(mount_.c_str(), MNT_DETACH);  // before temp_ removes the directory
  }

  static testing::DaemonOptions Options(const std::string& db = "") {
    testing::DaemonOptions o;
    o.binary = TRANSPOSED_BINARY;
    o.tune_budget_seconds = 1;
    o.extra_args = {"--cpu-threads", "1", "--metrics-listen", "127.0.0.1:0"};
    o.db = db;
    return o;
  }

  // A database file holding one tuned entry (64x96 f32), made by a daemon and copied to `path`.
  void TunedDatabase(const fs::path& path) {
    testing::DaemonProcess writer(Options());
    ASSERT_TRUE(writer.Start().ok());
    v1::Answer a;
    ASSERT_TRUE(Get(writer, GetConfigRequestFor(64, 96), &a).ok());
    ASSERT_TRUE(writer.Stop().ok());  // checkpoints the WAL: the file alone is the database
    fs::copy_file(writer.db(), path);
    writer.RemoveDir();
  }

  static grpc::Status Get(const testing::DaemonProcess& d, const v1::GetConfigRequest& req,
                          v1::Answer* a) {
    auto stub = v1::Transposer::NewStub(
        grpc::CreateChannel(d.address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 60s);
    return stub->GetConfig(&ctx, req, a);
  }

  // A metric of the daemon's /metrics ("name" or "name{label=\"v\"}"); NaN when absent.
  static double Metric(const testing::DaemonProcess& d, const std::string& key) {
    std::smatch m;
    const std::string log = ReadFile(d.log());
    static const std::regex port_re(R"(metrics on \S+ \(port (\d+)\))");
    if (!std::regex_search(log, m, port_re)) return std::nan("");
    std::string error;
    const auto samples = testing::ParseMetrics(testing::HttpGet(std::stoi(m[1]), "/metrics", &error));
    auto it = samples.find(key);
    return it == samples.end() ? std::nan("") : it->second;
  }

  // Read-only now: lookups of the stored entry served, a miss tuned but not stored, the health
  // service and the metric say so.
  static void ExpectReadOnly(const testing::DaemonProcess& d) {
    v1::Answer a;
    grpc::Status s = Get(d, GetConfigRequestFor(64, 96), &a);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(a.source(), v1::SOURCE_CACHE);
    s = Get(d, GetConfigRequestFor(64, 80), &a);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(a.source(), v1::SOURCE_TUNED);
    EXPECT_EQ(Get(d, GetConfigRequestFor(64, 80, true), &a).error_code(), grpc::StatusCode::NOT_FOUND);
    std::string health;
    ASSERT_TRUE(HealthCheck(d.address(), "transposed.store", &health).ok());
    EXPECT_EQ(health, testing::kNotServing);
    EXPECT_EQ(Metric(d, "transposed_store_read_only"), 1);
  }

  // After the cause is gone: writable again within the backoff (at most 16 s between tries), and
  // a tune is stored.
  static void ExpectWritableAgain(const testing::DaemonProcess& d) {
    const auto until = std::chrono::steady_clock::now() + 60s;
    while (Metric(d, "transposed_store_read_only") != 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(200ms);
    ASSERT_EQ(Metric(d, "transposed_store_read_only"), 0) << ReadFile(d.log());
    std::string health;
    ASSERT_TRUE(HealthCheck(d.address(), "transposed.store", &health).ok());
    EXPECT_EQ(health, testing::kServing);
    v1::Answer a;
    ASSERT_TRUE(Get(d, GetConfigRequestFor(48, 80), &a).ok());
    EXPECT_EQ(a.source(), v1::SOURCE_TUNED);
    grpc::Status s = Get(d, GetConfigRequestFor(48, 80, true), &a);
    ASSERT_TRUE(s.ok()) << s.error_message() << "\n" << ReadFile(d.log());
    EXPECT_EQ(a.source(), v1::SOURCE_CACHE);
    EXPECT_NE(ReadFile(d.log()).find("the database is writable again"), std::string::npos);
  }

  testing::TempDir temp_{"transposed_storage_faults"};
  const fs::path dir_ = temp_.path();
  fs::path mount_;
  bool mounted_ = false;
};

// A NaN or an infinity in a row's MeasureMethod: refused with the field named and counted, never
// stored; listing and exporting the rest keep working. The same for a --seed line.
TEST_F(StorageFaults, PoisonedImportIsRefusedAndListingsKeepWorking) {
  testing::DaemonProcess d(Options());
  ASSERT_TRUE(d.Start().ok());
  v1::Answer a;
  ASSERT_TRUE(Get(d, GetConfigRequestFor(64, 96), &a).ok());
  auto stub =
      v1::Transposer::NewStub(grpc::CreateChannel(d.address(), grpc::InsecureChannelCredentials()));
  v1::ExportedEntry good;
  {
    grpc::ClientContext ctx;
    auto reader = stub->ExportEntries(&ctx, v1::ExportEntriesRequest());
    ASSERT_TRUE(reader->Read(&good));
    v1::ExportedEntry more;
    while (reader->Read(&more)) {
    }
    ASSERT_TRUE(reader->Finish().ok());
  }
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  v1::ImportEntriesRequest req;
  v1::ExportedEntry* nan_row = req.add_entries();
  *nan_row = good;  // each row of a problem not stored yet, so that the store would take it
  nan_row->mutable_answer()->mutable_problem()->set_rows(66);
  (*nan_row->mutable_answer()->mutable_ceiling()->mutable_method()
        ->mutable_alternatives_median_s())["memcpy"] = kNaN;
  v1::ExportedEntry* inf_row = req.add_entries();
  *inf_row = good;
  inf_row->mutable_answer()->mutable_problem()->set_rows(67);
  inf_row->mutable_candidates(0)->mutable_measurement()->mutable_method()
      ->set_remeasured_after_slowdown(std::numeric_limits<double>::infinity());
  v1::ExportedEntry* other = req.add_entries();  // a good row of another problem
  *other = good;
  other->mutable_answer()->mutable_problem()->set_rows(65);
  {
    grpc::ClientContext ctx;
    v1::ImportEntriesResponse resp;
    grpc::Status s = stub->ImportEntries(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.invalid(), 2);
    EXPECT_EQ(resp.imported(), 1);
    ASSERT_EQ(resp.errors_size(), 2);
    EXPECT_EQ(resp.errors(0).rfind(
                  "entries[0].answer.ceiling.method.alternatives_median_s['memcpy']: must be a "
                  "finite number",
                  0),
              0u)
        << resp.errors(0);
    EXPECT_EQ(resp.errors(1).rfind(
                  "entries[1].candidates[0].measurement.method.remeasured_after_slowdown: ", 0),
              0u)
        << resp.errors(1);
  }
  {
    grpc::ClientContext ctx;
    v1::ListEntriesRequest list;
    list.set_include_candidates(true);
    v1::ListEntriesResponse resp;
    grpc::Status s = stub->ListEntries(&ctx, list, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.entries_size(), 2);
  }
  EXPECT_EQ(Metric(d, "transposed_entries_refused_total{door=\"import\"}"), 2);
  EXPECT_EQ(Metric(d, "transposed_store_bad_rows_skipped_total"), 0);
  ASSERT_TRUE(d.Stop().ok());

  // --seed: the poisoned line is skipped and counted, the good one merged.
  const fs::path seed = dir_ / "seed.jsonl";
  {
    std::ofstream out(seed);
    out << *ExportedEntryToLine(*nan_row) << "\n" << *ExportedEntryToLine(*other) << "\n";
  }
  testing::DaemonOptions o = Options();
  o.extra_args.insert(o.extra_args.end(), {"--seed", seed.string()});
  testing::DaemonProcess seeded(o);
  ASSERT_TRUE(seeded.Start().ok());
  EXPECT_EQ(Metric(seeded, "transposed_entries_refused_total{door=\"seed\"}"), 1);
  const std::string log = ReadFile(seeded.log());
  EXPECT_NE(log.find("alternatives_median_s['memcpy']: must be a finite number"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("imported=1"), std::string::npos) << log;
  ASSERT_TRUE(seeded.Stop().ok());
  seeded.RemoveDir();
  d.RemoveDir();
}

// chmod 444 on the database file (its directory writable): served read-only, then stored again
// once the file is writable. As root the daemon runs as nobody (root writes any file).
TEST_F(StorageFaults, ReadOnlyFileIsServedThenWrittenAgain) {
  const fs::path db = dir_ / "cache.db";
  ASSERT_NO_FATAL_FAILURE(TunedDatabase(db));
  const bool root = geteuid() == 0;
  if (root) {
    ASSERT_EQ(chown(dir_.c_str(), 65534, 65534), 0);
    ASSERT_EQ(chown(db.c_str(), 65534, 65534), 0);
  }
  ASSERT_EQ(chmod(db.c_str(), 0444), 0);
  testing::DaemonOptions o = Options(db.string());
  if (root) o.run_as_uid = 65534;
  testing::DaemonProcess d(o);
  const Status started = d.Start();
  ASSERT_TRUE(started.ok()) << started.ToString();
  ASSERT_NO_FATAL_FAILURE(ExpectReadOnly(d));
  EXPECT_NE(ReadFile(d.log()).find("this process may not write the file"), std::string::npos);
  ASSERT_EQ(chmod(db.c_str(), 0644), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectWritableAgain(d));
  EXPECT_TRUE(d.Stop().ok());
  d.RemoveDir();
}

// The database on a full disk at start (a 2 MiB tmpfs, filled to the last byte): served
// read-only; once space is freed, tunes are stored. Mounting needs CAP_SYS_ADMIN: skipped without.
TEST_F(StorageFaults, FullDiskAtStartIsServedThenWrittenAgain) {
  mount_ = dir_ / "small";
  fs::create_directory(mount_);
  if (mount("tmpfs", mount_.c_str(), "tmpfs", 0, "size=2m") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs here (" << std::strerror(errno)
                 << "): needs root with CAP_SYS_ADMIN";
  mounted_ = true;
  const fs::path db = mount_ / "cache.db";
  ASSERT_NO_FATAL_FAILURE(TunedDatabase(db));
  const fs::path filler = mount_ / "filler";
  {
    FILE* f = std::fopen(filler.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::vector<char> block(4096, 'x');
    while (std::fwrite(block.data(), 1, block.size(), f) == block.size() && std::fflush(f) == 0) {
    }
    std::fclose(f);
  }
  testing::DaemonProcess d(Options(db.string()));
  const Status started = d.Start();
  ASSERT_TRUE(started.ok()) << started.ToString();
  ASSERT_NO_FATAL_FAILURE(ExpectReadOnly(d));
  fs::remove(filler);
  ASSERT_NO_FATAL_FAILURE(ExpectWritableAgain(d));
  EXPECT_TRUE(d.Stop().ok());
  d.RemoveDir();
}

// Another process holds the database in exclusive locking mode when the daemon starts: served
// read-only (after the 5 s busy wait), and stored again once the lock is gone.
TEST_F(StorageFaults, LockAtStartIsServedThenWrittenAgain) {
  const fs::path db = dir_ / "cache.db";
  ASSERT_NO_FATAL_FAILURE(TunedDatabase(db));
  sqlite3* locker = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &locker), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(locker,
                         "PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE; "
                         "UPDATE devices SET name = name; COMMIT;",
                         nullptr, nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(locker);
  testing::DaemonProcess d(Options(db.string()));
  const Status started = d.Start();
  ASSERT_TRUE(started.ok()) << started.ToString();
  ASSERT_NO_FATAL_FAILURE(ExpectReadOnly(d));
  sqlite3_close(locker);
  ASSERT_NO_FATAL_FAILURE(ExpectWritableAgain(d));
  EXPECT_TRUE(d.Stop().ok());
  d.RemoveDir();
}

}  // namespace
}  // namespace transposed

// The RocksDB ledger's files as other processes and the disk see them: a read-only open beside a
// writer sees one whole ledger; the ledger's folders and files are its user's alone; the
// free-space floor fits the disk.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "consumers/billing/store.h"
#include "ledger/rocksdb_log.h"
#include "ledger/snapshot_store.h"
#include "ledger/verify.h"
#include "tests/unit/event_gen.h"
#include "tests/unit/temp_dir.h"

namespace admission::ledger {
namespace {

using admission::testing::BuildEvent;
using admission::testing::EventSpec;
using admission::testing::TempDir;

std::string Input(uint64_t n) {
  return BuildEvent(EventSpec{0, "team-a", "w" + std::to_string(n), "u" + std::to_string(n), 0,
                              "", "ops"},
                    static_cast<int64_t>(n));
}

// admitctl writing the embedded ledger is one process per command: each opens the ledger (RocksDB
// turns the last process's log into a table file and starts a new manifest and log, deleting the
// old ones), appends and closes. Readers (admitctl verify, log) open it read-only meanwhile. A
// read-only open used to mix the old manifest with the new logs (events missing below the head:
// "fails its hash chain at sequence N: event is missing") or name table files already deleted
// ("No such file"), both reported as Corruption.
TEST(RocksDbLedgerFiles, AReadOnlyOpenBesideAReopeningWriterSeesAWholeLedger) {
  TempDir dir;
  const std::string path = dir.Sub("ledger");
  RocksDbLogOptions write;
  write.sync = false;
  write.min_free_bytes = 0;
  uint64_t n = 0;
  {
    auto log = RocksDbLog::Open(path, write);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    ASSERT_TRUE((*log)->Append(std::vector<std::string>{Input(++n)}).ok());
  }
  constexpr int kWriterOpens = 30;
  constexpr auto kReadersFor = std::chrono::seconds(20);  // bound, should the writer stall
  std::atomic<bool> writing{true};
  std::vector<std::string> failures;
  std::mutex failures_mu;
  std::atomic<int> reads{0};
  std::thread writer([&] {
    for (int round = 0; round < kWriterOpens; ++round) {
      auto log = RocksDbLog::Open(path, write);
      if (!log.ok()) {
        std::lock_guard<std::mutex> lock(failures_mu);
        failures.push_back("writer: " + log.status().ToString());
        break;
      }
      std::vector<std::string> batch = {Input(n + 1), Input(n + 2), Input(n + 3)};
      n += 3;
      auto ack = (*log)->Append(batch);
      if (!ack.ok()) {
        std::lock_guard<std::mutex> lock(failures_mu);
        failures.push_back("writer: " + ack.status().ToString());
        break;
      }
    }
    writing = false;
  });
  auto read = [&] {
    const auto until = std::chrono::steady_clock::now() + kReadersFor;
    RocksDbLogOptions options;
    options.read_only = true;
    while (writing && std::chrono::steady_clock::now() < until) {
      auto log = RocksDbLog::Open(path, options);
      Status failed = log.status();
      if (log.ok()) {
        auto report = VerifyChain(**log, 1, schema::kGenesisHash, true);
        if (!report.ok()) {
          failed = report.status();
        } else if (report->fault) {
          failed = Status(Code::kCorruption, "sequence " + std::to_string(report->fault->sequence) +
                                                 ": " + report->fault->reason);
        }
      }
      ++reads;
      if (!failed.ok()) {
        std::lock_guard<std::mutex> lock(failures_mu);
        failures.push_back(failed.ToString());
      }
    }
  };
  std::thread reader1(read), reader2(read);
  writer.join();
  reader1.join();
  reader2.join();
  std::printf("%d read-only opens and verifies beside %d writable opens\n", reads.load(),
              kWriterOpens);
  EXPECT_GT(reads.load(), 10) << "too few reads to tell";
  EXPECT_TRUE(failures.empty()) << failures.size() << " failed, first: " << failures.front();
}

// The modes, whatever the umask allowed (022: folders 0755, files 0644): the ledger, its
// indexes (column families of the same database) and its snapshots hold every tenant's
// workloads and every principal's idempotency keys.
TEST(RocksDbLedgerFiles, ANewLedgerIsPrivateToItsUser) {
  const mode_t umask_before = ::umask(022);
  TempDir dir;
  const std::string path = dir.Sub("ledger");
  RocksDbLogOptions write;
  write.min_free_bytes = 0;
  for (uint64_t round = 0; round < 2; ++round) {  // the second open turns the log into a table
    auto log = RocksDbLog::Open(path, write);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    std::vector<std::string> batch = {Input(2 * round + 1), Input(2 * round + 2)};
    ASSERT_TRUE((*log)->Append(batch).ok());
  }
  FileSnapshotStore snapshots(path);
  ASSERT_TRUE(snapshots.Write(4, "a snapshot's bytes").ok());
  // The billing consumer's state, folded from the ledger, in a database of its own.
  const std::string billing = dir.Sub("billing");
  ASSERT_TRUE(consumers::billing::BillingStore::Open(billing).ok());
  ::umask(umask_before);

  std::vector<std::string> seen;
  auto check = [&](const std::filesystem::path& p, mode_t want) {
    struct stat st;
    ASSERT_EQ(::stat(p.c_str(), &st), 0) << p;
    EXPECT_EQ(st.st_mode & 0777, want) << p << " is " << std::oct << (st.st_mode & 0777);
    seen.push_back(p.filename().string());
  };
  for (const std::string& top : {path, billing}) {
    check(top, 0700);
    for (const auto& entry : std::filesystem::recursive_directory_iterator(top)) {
      check(entry.path(), entry.is_directory() ? 0700 : 0600);
    }
  }
  auto has = [&](const std::string& prefix, const std::string& suffix) {
    return std::any_of(seen.begin(), seen.end(), [&](const std::string& name) {
      return name.rfind(prefix, 0) == 0 && name.size() >= suffix.size() &&
             name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    });
  };
  // What the check covered: the database's files of each kind, and the snapshots.
  EXPECT_TRUE(has("CURRENT", "") && has("MANIFEST-", "") && has("OPTIONS-", "") &&
              has("", ".log") && has("", ".sst") && has("snapshots", "") && has("", ".snap"))
      << ::testing::PrintToString(seen);
}

// The default free-space floor is the smaller of 64 MiB and an eighth of the ledger's disk: a
// small disk (tests/cli/disk_full_test.sh's 96 MiB) still takes writes after RocksDB has
// preallocated its write-ahead log there. A floor that is set is kept as it is.
TEST(RocksDbLedgerFiles, TheDefaultFloorIsAnEighthOfASmallDisk) {
  EXPECT_EQ(DefaultMinFreeBytes(uint64_t{96} << 20), uint64_t{12} << 20);
  EXPECT_EQ(DefaultMinFreeBytes(uint64_t{512} << 20), uint64_t{64} << 20);
  EXPECT_EQ(DefaultMinFreeBytes(uint64_t{1} << 40), uint64_t{64} << 20);
  TempDir dir;
  struct statvfs st;
  ASSERT_EQ(::statvfs(dir.path().c_str(), &st), 0);
  const uint64_t disk = static_cast<uint64_t>(st.f_blocks) * st.f_frsize;
  {
    auto log = RocksDbLog::Open(dir.Sub("default"));
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    EXPECT_EQ((*log)->Disk()->min_free_bytes, DefaultMinFreeBytes(disk));
  }
  RocksDbLogOptions set;
  set.min_free_bytes = 12345;
  auto log = RocksDbLog::Open(dir.Sub("set"), set);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ((*log)->Disk()->min_free_bytes, 12345u);
}

}  // namespace
}  // namespace admission::ledger

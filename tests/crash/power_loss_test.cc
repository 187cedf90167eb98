// Power-loss test of the RocksDB ledger: no acknowledged event is lost when the machine loses
// power, and what survives is a verified prefix of what was appended.
//
// SIGKILL (crash_test.cc) leaves the page cache intact, so it cannot catch a missing fsync.
// Here the ledger runs on PowerCutFileSystem (power_cut_fs.h), which keeps track of what was
// synced. Each round opens the ledger on a fresh one, arms a cut at a random change (an append
// to a file, a sync, a creation, a rename, a deletion, a directory fsync), and runs
// kStreams appender threads (the crash test's deterministic streams) until the power goes.
// Some rounds arm the cut before the open, so it lands in RocksDB's recovery. Then the ledger
// is closed with the power off, the unsynced bytes and undurable new files are dropped, and
// the ledger is opened as a restarted machine would (the real file system) and checked:
//   - RocksDbLog::Open accepts it and VerifyChain over the whole chain (with the idempotency
//     index) finds no fault;
//   - every stored event is the next event of one stream, byte for byte, the part checked
//     before is unchanged (ledger_checks.h);
//   - every append acknowledged before the cut is stored at its acknowledged sequence.
// POWER_LOSS_CUTS sets the number of rounds (CI: kCutsDefault); POWER_LOSS_SEED repeats a run's
// cut points (the interleaving of the threads is up to the OS).
//
// Built twice: power_loss_test, and power_loss_test_unsynced with the ledger's sync turned off
// (POWER_LOSS_LEDGER_SYNC=false), which must fail by losing an acknowledged event: ctest runs it
// and passes only when it reports that loss (the test can fail).

#include <rocksdb/env.h>
#include <rocksdb/file_system.h>

#include <atomic>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ledger/rocksdb_log.h"
#include "ledger/verify.h"
#include "tests/crash/crash_stream.h"
#include "tests/crash/ledger_checks.h"
#include "tests/crash/power_cut_fs.h"
#include "tests/crash/scratch_dir.h"

#ifndef POWER_LOSS_LEDGER_SYNC
#define POWER_LOSS_LEDGER_SYNC true
#endif

namespace admission::crash {
namespace {

constexpr bool kLedgerSync = POWER_LOSS_LEDGER_SYNC;
constexpr int kStreams = 4;
// CI relies on at least 200 cuts; each round takes ~0.1-0.3 s on 2 cores.
constexpr int kCutsDefault = 200;
constexpr int kCutsMax = 1'000'000;
// A cut lands at change 1..kCutAfterChangesMax of its round (an append to the ledger is a few).
constexpr uint64_t kCutAfterChangesMax = 300;
// One round in kArmBeforeOpenOneIn arms its cut before the open (recovery, flush, MANIFEST),
// at change 1..kCutInOpenChangesMax: an open of a ledger makes some 20-40 changes.
constexpr int kArmBeforeOpenOneIn = 4;
constexpr uint64_t kCutInOpenChangesMax = 40;
// A stream stops after this many appends in one round if the armed cut has not come (the cut
// then comes from the test): a round's time is bounded whatever the cut point.
constexpr int kAppendsPerStreamMax = 400;
// Each round verifies the whole ledger, so one that outgrows this is replaced by a fresh one.
constexpr Sequence kEpochEventsMax = 20000;

uint64_t EnvNumber(const char* name, uint64_t fallback, uint64_t max) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  uint64_t value = 0;
  const char* end = text + std::strlen(text);
  auto [rest, error] = std::from_chars(text, end, value);
  if (error != std::errc() || rest != end || value > max) {
    ADD_FAILURE() << name << "='" << text << "' is not a number up to " << max;
    return fallback;
  }
  return value;
}

uint64_t TestSeed() {
  std::random_device device;
  const uint64_t fresh = (static_cast<uint64_t>(device()) << 32) ^ device();
  return EnvNumber("POWER_LOSS_SEED", fresh, UINT64_MAX);
}

// The first index of `thread`'s stream that the ledger does not hold (it holds a prefix).
uint64_t ResumeIndex(const LedgerContents& contents, int thread) {
  return contents.sequences[static_cast<size_t>(thread)].size();
}

// One round's appenders: each thread appends its stream until an append fails (the power is
// off) or it made kAppendsPerStreamMax appends. Acks are lines "t first last seq_first" as the
// crash appender writes them, for CheckAcks.
struct Appenders {
  ledger::RocksDbLog* log = nullptr;
  uint64_t seed = 0;
  std::atomic<int64_t> next_recorded_at_ns{0};
  std::mutex mutex;
  std::string acks;              // guarded by mutex
  std::vector<std::string> errors;  // guarded by mutex: failures that are not the power cut
  PowerCutFileSystem* fs = nullptr;

  void Run(int thread, uint64_t next_index) {
    std::vector<std::string> batch;
    for (int appends = 0; appends < kAppendsPerStreamMax; ++appends) {
      const size_t count = BatchSize(seed, thread, next_index);
      Result<ledger::AppendAck> ack = Status(Code::kIoError, "not attempted");
      do {
        const int64_t at = next_recorded_at_ns.fetch_add(1);
        batch.clear();
        for (size_t k = 0; k < count; ++k) {
          batch.push_back(EncodeStreamEvent(thread, next_index + k, at));
        }
        ack = log->Append(batch);
      } while (!ack.ok() && ack.status().code() == Code::kTimeWentBackwards);
      if (!ack.ok()) {
        if (!fs->cut()) {
          std::lock_guard lock(mutex);
          errors.push_back("t" + std::to_string(thread) + ": " + ack.status().ToString() +
                           " with the power on");
        }
        return;
      }
      if (ack->written != count || ack->sequences.size() != count) {
        std::lock_guard lock(mutex);
        errors.push_back("t" + std::to_string(thread) + ": wrote " +
                         std::to_string(ack->written) + " of " + std::to_string(count));
        return;
      }
      std::lock_guard lock(mutex);
      acks += std::to_string(thread) + " " + std::to_string(next_index) + " " +
              std::to_string(next_index + count - 1) + " " + std::to_string(ack->first()) + "\n";
      next_index += count;
    }
  }
};

// One round's run: opens the ledger (through a file system armed to cut the power after
// `cut_after` changes, from before or after the open), appends from every stream until the cut,
// and drops what was not synced. *opened says whether the open came through.
void AppendUntilCut(const std::string& ledger_dir, const LedgerContents& contents,
                    uint64_t appenders_seed, bool arm_before_open, uint64_t cut_after,
                    Appenders* appenders, bool* opened, PowerCutStats* dropped) {
  auto fs = std::make_shared<PowerCutFileSystem>(rocksdb::FileSystem::Default());
  std::unique_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(fs);
  ledger::RocksDbLogOptions options;
  options.env = env.get();
  options.sync = kLedgerSync;
  options.min_free_bytes = 0;  // the scratch disk's free space is not what this tests
  if (arm_before_open) fs->ArmCutAfter(cut_after);
  Result<std::unique_ptr<ledger::RocksDbLog>> log = ledger::RocksDbLog::Open(ledger_dir, options);
  *opened = log.ok();
  if (*opened) {
    if (!arm_before_open) fs->ArmCutAfter(cut_after);
    appenders->log = log->get();
    appenders->seed = appenders_seed;
    appenders->fs = fs.get();
    appenders->next_recorded_at_ns =
        std::max((*log)->GetHead().recorded_at_ns + 1, kFirstRecordedAtNs);
    std::vector<std::thread> threads;
    for (int t = 0; t < kStreams; ++t) {
      threads.emplace_back([appenders, t, start = ResumeIndex(contents, t)] {
        appenders->Run(t, start);
      });
    }
    for (std::thread& thread : threads) thread.join();
  } else {
    ASSERT_TRUE(fs->cut()) << "Open failed with the power on: " << log.status().ToString();
  }
  fs->Cut();
  log = Status(Code::kIoError, "closed");  // closes RocksDB with the power off
  *dropped = fs->DropUnsynced();
  for (const std::string& error : appenders->errors) ADD_FAILURE() << error;
  ASSERT_FALSE(::testing::Test::HasFailure());
}

// The machine is back: the ledger opens, its whole chain verifies, it extends `contents`, and
// every ack names an event in it (*ack_count).
void CheckAfterCut(const std::string& ledger_dir, const std::string& acks,
                   LedgerContents* contents, size_t* ack_count) {
  // The real file system, as the next admitd would open it.
  Result<std::unique_ptr<ledger::RocksDbLog>> reopened = ledger::RocksDbLog::Open(ledger_dir);
  ASSERT_TRUE(reopened.ok()) << "Open refused the ledger after a power cut: "
                             << reopened.status().ToString();
  ledger::VerifyReport report;
  ASSERT_TRUE(WholeChainVerifies(**reopened, &report));
  ASSERT_TRUE(CheckAndExtend(**reopened, contents));
  ASSERT_TRUE(CheckAcks(acks, *contents, ack_count));
  reopened->reset();
}

TEST(PowerLoss, EveryAcknowledgedEventSurvivesAPowerCut) {
  const uint64_t seed = TestSeed();
  const int cuts = static_cast<int>(EnvNumber("POWER_LOSS_CUTS", kCutsDefault, kCutsMax));
  std::printf("power-loss test seed %llu (repeat with POWER_LOSS_SEED=%llu), %d cuts, ledger "
              "sync %s\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed), cuts,
              kLedgerSync ? "on" : "OFF (this build must fail)");
  ScratchDir scratch_dir("power_loss");
  ASSERT_FALSE(HasFailure());
  const std::filesystem::path& scratch = scratch_dir.path();

  int epoch = -1;
  std::string ledger_dir;
  LedgerContents contents(kStreams);
  uint64_t acks_in_all = 0;
  uint64_t events_in_all = 0;
  int cuts_in_recovery = 0;
  int rounds_with_acks = 0;
  PowerCutStats dropped_in_all;
  for (int round = 0; round < cuts; ++round) {
    if (epoch < 0 || contents.head >= kEpochEventsMax) {
      if (epoch >= 0) std::filesystem::remove_all(ledger_dir);
      ++epoch;
      ledger_dir = scratch / ("ledger-" + std::to_string(epoch));
      contents = LedgerContents(kStreams);
    }
    // The first round of a ledger creates it with the power on: a cut inside the creation of
    // an empty ledger loses nothing anyone was told about, and leaves no ledger to check.
    const bool arm_before_open = contents.head > 0 && round % kArmBeforeOpenOneIn == 0;
    const uint64_t cut_after =
        1 + Mix(seed, static_cast<uint64_t>(round)) %
                (arm_before_open ? kCutInOpenChangesMax : kCutAfterChangesMax);
    SCOPED_TRACE("round " + std::to_string(round) + " (seed " + std::to_string(seed) +
                 ", ledger " + ledger_dir + ", cut at change " + std::to_string(cut_after) +
                 (arm_before_open ? " from before the open)" : " after the open)"));

    Appenders appenders;
    bool opened = false;
    PowerCutStats dropped;
    ASSERT_NO_FATAL_FAILURE(AppendUntilCut(
        ledger_dir, contents, Mix(seed, static_cast<uint64_t>(round) + (1ull << 32)),
        arm_before_open, cut_after, &appenders, &opened, &dropped));
    if (!opened) ++cuts_in_recovery;
    const Sequence previous_head = contents.head;
    size_t ack_count = 0;
    ASSERT_NO_FATAL_FAILURE(CheckAfterCut(ledger_dir, appenders.acks, &contents, &ack_count));

    acks_in_all += ack_count;
    events_in_all += contents.head - previous_head;
    if (ack_count > 0) ++rounds_with_acks;
    dropped_in_all.files_cut_back += dropped.files_cut_back;
    dropped_in_all.files_dropped += dropped.files_dropped;
    dropped_in_all.bytes_dropped += dropped.bytes_dropped;
    std::printf("round %3d: cut at change %3llu%s; ledger %d: %6llu events (+%4llu), %4zu acks; "
                "dropped %llu bytes, %llu files cut back, %llu files gone\n",
                round, static_cast<unsigned long long>(cut_after),
                opened ? "" : " (in the open)", epoch,
                static_cast<unsigned long long>(contents.head),
                static_cast<unsigned long long>(contents.head - previous_head), ack_count,
                static_cast<unsigned long long>(dropped.bytes_dropped),
                static_cast<unsigned long long>(dropped.files_cut_back),
                static_cast<unsigned long long>(dropped.files_dropped));
  }

  // Not vacuous: most rounds acknowledged appends before their cut, cuts threw bytes away,
  // and some cuts landed inside an open.
  std::printf("%d cuts: %d rounds acknowledged appends, %llu acks, %llu events; %d cuts inside "
              "an open; dropped %llu bytes (%llu files cut back, %llu new files gone)\n",
              cuts, rounds_with_acks, static_cast<unsigned long long>(acks_in_all),
              static_cast<unsigned long long>(events_in_all), cuts_in_recovery,
              static_cast<unsigned long long>(dropped_in_all.bytes_dropped),
              static_cast<unsigned long long>(dropped_in_all.files_cut_back),
              static_cast<unsigned long long>(dropped_in_all.files_dropped));
  if (cuts >= kCutsDefault) {
    EXPECT_GE(rounds_with_acks, cuts / 2);
    EXPECT_GT(dropped_in_all.bytes_dropped, 0u);
    EXPECT_GT(cuts_in_recovery, 0);
  }
}

}  // namespace
}  // namespace admission::crash

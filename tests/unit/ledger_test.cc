// The ledger's contract, for every EventLog implementation: dense sequences, atomic batches,
// idempotency, time that never goes back, and a hash chain that finds any edit.

#include <memory>
#include <regex>
#include <thread>

#include <capnp/message.h>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include "ledger/memory_log.h"
#include "ledger/rocksdb_log.h"
#include "ledger/verify.h"
#include "tests/unit/event_gen.h"
#include "tests/unit/event_log_contract.h"
#include "tests/unit/raw_ledger_db.h"
#include "tests/unit/temp_dir.h"

namespace admission::ledger {
namespace {

using admission::testing::BuildEvent;
using admission::testing::EventSpec;
using admission::testing::GenEventSpec;
using admission::testing::OpenRawLedgerDb;
using admission::testing::RawLedgerDb;
using admission::testing::TempDir;

class MemoryFactory final : public LogFactory {
 public:
  std::unique_ptr<EventLog> Make() override { return std::make_unique<MemoryLog>(); }
};

class RocksDbFactory final : public LogFactory {
 public:
  std::unique_ptr<EventLog> Make() override {
    auto log = RocksDbLog::Open(dir_.Sub("ledger" + std::to_string(count_++)));
    ADM_CHECK(log.ok(), "%s", log.status().ToString().c_str());
    return std::move(*log);
  }

 private:
  TempDir dir_;
  int count_ = 0;
};

}  // namespace

std::unique_ptr<LogFactory> MakeLogFactory(const std::string& kind) {
  if (kind == "memory") return std::make_unique<MemoryFactory>();
  ADM_CHECK(kind == "rocksdb", "no log kind %s", kind.c_str());
  return std::make_unique<RocksDbFactory>();
}

namespace {

INSTANTIATE_TEST_SUITE_P(Logs, EventLogTest, ::testing::Values("memory", "rocksdb"));

// Concurrent appenders share WriteBatches (group commit), and a request refused inside a group
// fails alone: everyone else's events are written.
TEST(RocksDbLedger, ConcurrentAppendersShareWritesAndARefusalFailsAlone) {
  TempDir dir;
  auto opened = RocksDbLog::Open(dir.Sub("l"));
  ASSERT_TRUE(opened.ok());
  RocksDbLog& log = **opened;
  ASSERT_TRUE(log.Append(std::vector<std::string>{Workload("s", "shared", 1, "uid-1")}).ok());
  constexpr int kThreads = 16;
  constexpr int kAppendsPerThread = 20;
  std::vector<std::thread> threads;
  std::vector<Code> conflict_codes(kThreads, Code::kOk);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kAppendsPerThread; ++i) {
        const std::string key = "t" + std::to_string(t) + "-" + std::to_string(i);
        auto ack = log.Append(std::vector<std::string>{Workload(key, key, 1)});
        ADM_CHECK(ack.ok() && ack->written == 1, "%s", ack.status().ToString().c_str());
        if (i == kAppendsPerThread / 2) {
          // The same key as the first event with another payload: refused, alone.
          conflict_codes[t] =
              log.Append(std::vector<std::string>{Workload("s", "shared", 1, "uid-2")})
                  .status()
                  .code();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (Code code : conflict_codes) EXPECT_EQ(code, Code::kConflict);
  const RocksDbLogStats stats = log.GetStats();
  EXPECT_EQ(stats.events_written, 1u + kThreads * kAppendsPerThread);
  EXPECT_LT(stats.writes, stats.events_written) << "no two appends shared a write";
  EXPECT_EQ(log.GetHead().sequence, 1u + kThreads * kAppendsPerThread);
  auto report = VerifyChain(log, 1, schema::kGenesisHash, true);
  ASSERT_TRUE(report.ok());
  EXPECT_FALSE(report->fault.has_value()) << report->fault->reason;
}

// Appends random events; keys may repeat (then duplicates or conflicts occur, both fine).
std::vector<std::vector<std::string>> AppendRandomLedger(EventLog& log) {
  const auto specs = *rc::gen::nonEmpty(rc::gen::container<std::vector<EventSpec>>(GenEventSpec()));
  std::vector<std::vector<std::string>> batches;
  int64_t at = 1000;
  size_t i = 0;
  while (i < specs.size()) {
    size_t n = std::min<size_t>(specs.size() - i, *rc::gen::inRange<size_t>(1, 4));
    std::vector<std::string> batch;
    at += *rc::gen::inRange<int64_t>(0, 3);
    for (size_t j = 0; j < n; ++j) batch.push_back(BuildEvent(specs[i + j], at));
    (void)log.Append(batch);
    batches.push_back(std::move(batch));
    i += n;
  }
  return batches;
}

RC_GTEST_PROP(Ledger, ReadBackEqualsWhatWasAcceptedInOrder, ()) {
  MemoryLog log;
  auto batches = AppendRandomLedger(log);
  auto report = VerifyChain(log, 1, schema::kGenesisHash, true);
  RC_ASSERT(report.ok());
  RC_ASSERT(!report->fault.has_value());
  // Every stored event carries its position and the payload of an appended event.
  auto stored = log.Read(1, kReadEventsMax);
  RC_ASSERT(stored->size() == log.GetHead().sequence);
  for (const StoredEvent& e : *stored) {
    auto decoded = schema::DecodeEvent(e.bytes);
    RC_ASSERT(decoded.ok());
    RC_ASSERT(decoded->root().getSequence() == e.sequence);
  }
}

RC_GTEST_PROP(Ledger, ReappendingEveryBatchWritesNothingNew, ()) {
  MemoryLog log;
  auto batches = AppendRandomLedger(log);
  const Head head = log.GetHead();
  // Replaying only fully keyed, accepted batches must be a no-op.
  for (const auto& batch : batches) {
    bool keyed = true;
    for (const auto& e : batch) keyed = keyed && schema::DecodeEvent(e)->root().getIdempotencyKey().size() > 0;
    if (!keyed) continue;
    auto ack = log.Append(batch);
    if (ack.ok()) RC_ASSERT(ack->all_duplicates());
  }
  RC_ASSERT(log.GetHead().sequence == head.sequence);
  RC_ASSERT(log.GetHead().hash == head.hash);
}

RC_GTEST_PROP(Ledger, VerifyNamesAnyEditedByte, ()) {
  MemoryLog log;
  AppendRandomLedger(log);
  const Sequence head = log.GetHead().sequence;
  RC_PRE(head > 0);
  const Sequence victim = *rc::gen::inRange<Sequence>(1, head + 1);
  std::string bytes = log.Read(victim, 1)->front().bytes;
  const size_t offset = *rc::gen::inRange<size_t>(0, bytes.size());
  const uint8_t flip = *rc::gen::inRange<int>(1, 256);
  bytes[offset] = static_cast<char>(static_cast<uint8_t>(bytes[offset]) ^ flip);
  log.OverwriteForTest(victim, bytes);
  auto report = VerifyChain(log, 1, schema::kGenesisHash, true);
  RC_ASSERT(report.ok());
  RC_ASSERT(report->fault.has_value());
  RC_ASSERT(report->fault->sequence == victim);
}

// The same property on the durable ledger: editing RocksDB's stored value directly. A tail
// edit is refused by Open (the message names the sequence); anything else is found by verify.
RC_GTEST_PROP(RocksDbLedger, EditedByteIsNamedByOpenOrVerify, ()) {
  TempDir dir;
  const std::string path = dir.Sub("ledger");
  Sequence head = 0;
  {
    auto log = RocksDbLog::Open(path);
    RC_ASSERT(log.ok());
    AppendRandomLedger(**log);
    head = (*log)->GetHead().sequence;
  }
  RC_PRE(head > 0);
  const Sequence victim = *rc::gen::inRange<Sequence>(1, head + 1);
  {
    RawLedgerDb raw = OpenRawLedgerDb(path);
    rocksdb::DB* db = raw.db.get();
    std::string bytes;
    RC_ASSERT(db->Get(rocksdb::ReadOptions(), RocksDbLog::EventKey(victim), &bytes).ok());
    const size_t offset = *rc::gen::inRange<size_t>(0, bytes.size());
    bytes[offset] = static_cast<char>(bytes[offset] ^ *rc::gen::inRange<int>(1, 256));
    RC_ASSERT(db->Put(rocksdb::WriteOptions(), RocksDbLog::EventKey(victim), bytes).ok());
  }
  auto log = RocksDbLog::Open(path);
  if (!log.ok()) {
    RC_ASSERT(log.status().code() == Code::kCorruption);
    std::smatch m;
    const std::string message = log.status().message();
    RC_ASSERT(std::regex_search(message, m, std::regex("at sequence ([0-9]+)")));
    RC_ASSERT(std::stoull(m[1]) == victim);
    return;
  }
  auto report = VerifyChain(**log, 1, schema::kGenesisHash, true);
  RC_ASSERT(report.ok());
  RC_ASSERT(report->fault.has_value());
  RC_ASSERT(report->fault->sequence == victim);
}

TEST(RocksDbLedger, ReopenKeepsEventsHeadAndIndex) {
  TempDir dir;
  Head head;
  {
    auto log = RocksDbLog::Open(dir.Sub("l"));
    ASSERT_TRUE(log.ok());
    ASSERT_TRUE((*log)->Append(std::vector<std::string>{Workload("a", "ka", 5), Workload("b", "", 6)}).ok());
    head = (*log)->GetHead();
  }
  auto log = RocksDbLog::Open(dir.Sub("l"));
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ((*log)->GetHead().sequence, head.sequence);
  EXPECT_EQ((*log)->GetHead().hash, head.hash);
  EXPECT_EQ((*log)->GetHead().recorded_at_ns, 6);
  auto again = (*log)->Append(std::vector<std::string>{Workload("a", "ka", 9)});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->first(), 1u);
  EXPECT_EQ((*log)->Append(std::vector<std::string>{Workload("c", "", 1)}).status().code(),
            Code::kTimeWentBackwards);
}

// A ledger of the layout before the index had its own column family (`i` + key in the default
// family) opens: its index moves to the index family, retries still find their events, and
// the chain verifies with the index.
TEST(RocksDbLedger, IndexOfTheOldLayoutMovesToItsFamilyOnOpen) {
  TempDir dir;
  constexpr int kKeyed = 5000;  // more than one move batch
  {
    auto log = RocksDbLog::Open(dir.Sub("l"));
    ASSERT_TRUE(log.ok());
    std::vector<std::string> batch;
    for (int i = 0; i < kKeyed; ++i) {
      batch.push_back(Workload("w" + std::to_string(i), "k" + std::to_string(i), 5));
      if (batch.size() == 500) {
        ASSERT_TRUE((*log)->Append(batch).ok());
        batch.clear();
      }
    }
  }
  {
    // Back to the old layout: every index entry into the default family as `i` + key.
    RawLedgerDb raw = OpenRawLedgerDb(dir.Sub("l"));
    rocksdb::WriteBatch batch;
    std::unique_ptr<rocksdb::Iterator> it(
        raw.db->NewIterator(rocksdb::ReadOptions(), raw.index.get()));
    int moved = 0;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      batch.Put("i" + it->key().ToString(), it->value());
      batch.Delete(raw.index.get(), it->key());
      ++moved;
    }
    ASSERT_TRUE(it->status().ok());
    it.reset();
    ASSERT_EQ(moved, kKeyed);
    ASSERT_TRUE(raw.db->Write(rocksdb::WriteOptions(), &batch).ok());
    ASSERT_TRUE(raw.db->DropColumnFamily(raw.index.get()).ok());
  }
  {
    auto log = RocksDbLog::Open(dir.Sub("l"));
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    auto found = (*log)->FindKey("k4999");
    ASSERT_TRUE(found.ok());
    EXPECT_EQ(*found, std::optional<Sequence>(5000));
    auto retry = (*log)->Append(std::vector<std::string>{Workload("w7", "k7", 5)});
    ASSERT_TRUE(retry.ok());
    EXPECT_EQ(retry->first(), 8u);
    EXPECT_EQ((*log)->GetHead().sequence, static_cast<Sequence>(kKeyed));
    auto report = VerifyChain(**log, 1, schema::kGenesisHash, true);
    ASSERT_TRUE(report.ok());
    EXPECT_FALSE(report->fault.has_value()) << report->fault->reason;
  }
  RawLedgerDb raw = OpenRawLedgerDb(dir.Sub("l"));
  std::unique_ptr<rocksdb::Iterator> it(raw.db->NewIterator(rocksdb::ReadOptions()));
  it->Seek("i");
  EXPECT_FALSE(it->Valid() && it->key().starts_with("i")) << "old index entries left behind";
}

TEST(RocksDbLedger, SecondOpenOfTheSameLedgerIsBusy) {
  TempDir dir;
  auto first = RocksDbLog::Open(dir.Sub("l"));
  ASSERT_TRUE(first.ok());
  auto second = RocksDbLog::Open(dir.Sub("l"));
  EXPECT_EQ(second.status().code(), Code::kBusy) << second.status().ToString();
}

TEST(RocksDbLedger, OpenOfAMissingLedgerWithoutCreateIsNotFound) {
  TempDir dir;
  RocksDbLogOptions options;
  options.create_if_missing = false;
  EXPECT_EQ(RocksDbLog::Open(dir.Sub("none"), options).status().code(), Code::kNotFound);
}

TEST(RocksDbLedger, EventStoredBeyondTheHeadIsRefused) {
  TempDir dir;
  {
    auto log = RocksDbLog::Open(dir.Sub("l"));
    ASSERT_TRUE((*log)->Append(std::vector<std::string>{Workload("a", "", 5)}).ok());
  }
  {
    RawLedgerDb raw = OpenRawLedgerDb(dir.Sub("l"));
    ASSERT_TRUE(
        raw.db->Put(rocksdb::WriteOptions(), RocksDbLog::EventKey(2), "smuggled").ok());
  }
  auto log = RocksDbLog::Open(dir.Sub("l"));
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.status().message().find("sequence 2"), std::string::npos)
      << log.status().message();
}

}  // namespace
}  // namespace admission::ledger

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

std::string Workload(const std::string& name, const std::string& key, int64_t at,
                     const std::string& uid = "u") {
  return BuildEvent(EventSpec{0, "team-a", name, uid, 0, key, "ops"}, at);
}

// Builds either log kind behind the same interface.
class LogFactory {
 public:
  virtual ~LogFactory() = default;
  virtual std::unique_ptr<EventLog> Make() = 0;
};

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

class EventLogTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "memory") {
      factory_ = std::make_unique<MemoryFactory>();
    } else {
      factory_ = std::make_unique<RocksDbFactory>();
    }
    log_ = factory_->Make();
  }
  std::unique_ptr<LogFactory> factory_;
  std::unique_ptr<EventLog> log_;
};

TEST_P(EventLogTest, AppendsDenseSequencesAndReadsThemBack) {
  std::vector<std::string> batch = {Workload("a", "", 10), Workload("b", "", 10),
                                    Workload("c", "", 11)};
  auto ack = log_->Append(batch);
  ASSERT_TRUE(ack.ok()) << ack.status().ToString();
  EXPECT_EQ(ack->sequences, (std::vector<Sequence>{1, 2, 3}));
  EXPECT_EQ(ack->written, 3u);
  auto second = log_->Append(std::vector<std::string>{Workload("d", "", 12)});
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->first(), 4u);

  auto read = log_->Read(2, 10);
  ASSERT_TRUE(read.ok());
  ASSERT_EQ(read->size(), 3u);
  schema::Hash chain = schema::kGenesisHash;
  auto all = log_->Read(1, 10);
  for (const StoredEvent& stored : *all) {
    auto decoded = schema::DecodeEvent(stored.bytes);
    ASSERT_TRUE(decoded.ok());
    EXPECT_EQ(decoded->root().getSequence(), stored.sequence);
    EXPECT_EQ(schema::HashFromData(decoded->root().getPrevHash()), chain);
    chain = schema::ChainHash(chain, stored.bytes);
  }
  EXPECT_EQ(log_->GetHead().sequence, 4u);
  EXPECT_EQ(log_->GetHead().hash, chain);
  EXPECT_EQ(log_->GetHead().recorded_at_ns, 12);
  auto name = schema::DecodeEvent((*read)[0].bytes)
                  ->root().getBody().getWorkloadDeleted().getWorkload().getName();
  EXPECT_EQ(std::string(name.cStr()), "b");
}

TEST_P(EventLogTest, ReappendWithSameKeyAndPayloadReturnsOriginalSequence) {
  ASSERT_TRUE(log_->Append(std::vector<std::string>{Workload("a", "submit-a", 10)}).ok());
  ASSERT_TRUE(log_->Append(std::vector<std::string>{Workload("b", "", 11)}).ok());
  const Head before = log_->GetHead();
  // A retry, later in time: same key, same payload.
  auto again = log_->Append(std::vector<std::string>{Workload("a", "submit-a", 20)});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->first(), 1u);
  EXPECT_TRUE(again->all_duplicates());
  EXPECT_EQ(log_->GetHead().sequence, before.sequence);
  EXPECT_EQ(log_->GetHead().hash, before.hash);
  EXPECT_EQ(log_->FindKey("submit-a")->value(), 1u);
}

TEST_P(EventLogTest, SameKeyWithDifferentPayloadIsRefusedNamingTheField) {
  ASSERT_TRUE(log_->Append(std::vector<std::string>{Workload("a", "k", 10, "uid-1")}).ok());
  auto conflict = log_->Append(
      std::vector<std::string>{Workload("z", "", 11), Workload("a", "k", 11, "uid-2")});
  ASSERT_FALSE(conflict.ok());
  EXPECT_EQ(conflict.status().code(), Code::kConflict);
  EXPECT_NE(conflict.status().message().find("body.workloadDeleted.workload.uid"),
            std::string::npos)
      << conflict.status().message();
  EXPECT_NE(conflict.status().message().find("sequence 1"), std::string::npos);
  // The batch is atomic: its first (valid) event was not written either.
  EXPECT_EQ(log_->GetHead().sequence, 1u);
}

TEST_P(EventLogTest, DuplicateKeyInsideOneBatchIsOneEvent) {
  auto ack = log_->Append(std::vector<std::string>{Workload("a", "k", 10), Workload("a", "k", 10),
                                                   Workload("b", "", 10)});
  ASSERT_TRUE(ack.ok()) << ack.status().ToString();
  EXPECT_EQ(ack->sequences, (std::vector<Sequence>{1, 1, 2}));
  EXPECT_EQ(ack->duplicate, (std::vector<bool>{false, true, false}));
  EXPECT_EQ(log_->GetHead().sequence, 2u);
}

TEST_P(EventLogTest, TimeGoingBackwardsIsRefused) {
  ASSERT_TRUE(log_->Append(std::vector<std::string>{Workload("a", "", 100)}).ok());
  auto back = log_->Append(std::vector<std::string>{Workload("b", "", 99)});
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().code(), Code::kTimeWentBackwards);
  auto inside = log_->Append(std::vector<std::string>{Workload("c", "", 100), Workload("d", "", 50)});
  EXPECT_EQ(inside.status().code(), Code::kTimeWentBackwards);
  EXPECT_EQ(log_->GetHead().sequence, 1u);
  EXPECT_TRUE(log_->Append(std::vector<std::string>{Workload("e", "", 100)}).ok());
}

TEST_P(EventLogTest, MalformedAndOversizedAppendsAreRefused) {
  EXPECT_EQ(log_->Append(std::vector<std::string>{"garbage!"}).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(log_->Append(std::vector<std::string>{}).status().code(), Code::kInvalidArgument);
  std::vector<std::string> too_many(kAppendBatchEventsMax + 1, Workload("a", "", 1));
  EXPECT_EQ(log_->Append(too_many).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(log_->GetHead().sequence, 0u);
}

TEST_P(EventLogTest, ConcurrentAppendersGetDenseSequencesAndAValidChain) {
  constexpr int kThreads = 8;
  constexpr int kAppendsPerThread = 50;
  std::vector<std::thread> threads;
  std::vector<std::vector<Sequence>> seen(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kAppendsPerThread; ++i) {
        std::string key = "t" + std::to_string(t) + "-" + std::to_string(i);
        auto ack = log_->Append(std::vector<std::string>{Workload(key, key, 1), Workload(key, "", 1)});
        ADM_CHECK(ack.ok(), "%s", ack.status().ToString().c_str());
        seen[t].push_back(ack->sequences[0]);
        ADM_CHECK(ack->sequences[1] == ack->sequences[0] + 1, "batch not contiguous");
      }
    });
  }
  for (auto& th : threads) th.join();
  std::vector<Sequence> all;
  for (auto& s : seen) all.insert(all.end(), s.begin(), s.end());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), static_cast<size_t>(kThreads * kAppendsPerThread));
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i], 2 * i + 1);
  auto report = VerifyChain(*log_, 1, schema::kGenesisHash, true);
  ASSERT_TRUE(report.ok());
  EXPECT_FALSE(report->fault.has_value()) << report->fault->reason;
  EXPECT_EQ(report->events_checked, 2u * kThreads * kAppendsPerThread);
}

// Intake checks every event before sequencing starts, but an append still answers with the
// first refusal in batch order, as if each event were checked in one pass.
TEST_P(EventLogTest, FirstRefusalInBatchOrderIsTheAnswer) {
  ASSERT_TRUE(log_->Append(std::vector<std::string>{Workload("a", "k", 10, "uid-1")}).ok());
  EXPECT_EQ(log_->Append(std::vector<std::string>{Workload("a", "k", 11, "uid-2"), "garbage!"})
                .status()
                .code(),
            Code::kConflict);
  EXPECT_EQ(log_->Append(std::vector<std::string>{Workload("b", "", 9), "garbage!"}).status().code(),
            Code::kTimeWentBackwards);
  auto malformed = log_->Append(std::vector<std::string>{Workload("c", "", 12), "garbage!"});
  EXPECT_EQ(malformed.status().code(), Code::kInvalidArgument);
  EXPECT_NE(malformed.status().message().find("event 1 of 2"), std::string::npos)
      << malformed.status().message();
  EXPECT_EQ(log_->GetHead().sequence, 1u);
}

// Events that are not in canonical form are accepted and stored canonical, as before.
TEST_P(EventLogTest, NonCanonicalEventIsStoredCanonical) {
  capnp::MallocMessageBuilder message;
  schema::Event::Builder event = message.initRoot<schema::Event>();
  event.initBody().initWorkloadDeleted().initWorkload().setName("late-actor");
  event.setActor("ops");  // allocated after the body: not in pre-order
  event.setRecordedAtNs(5);
  auto segments = message.getSegmentsForOutput();
  ASSERT_EQ(segments.size(), 1u);
  const std::string raw(segments[0].asChars().begin(), segments[0].asChars().size());
  ASSERT_FALSE(schema::DecodeEvent(raw)->canonical());
  auto ack = log_->Append(std::vector<std::string>{raw});
  ASSERT_TRUE(ack.ok()) << ack.status().ToString();
  auto stored = log_->Read(1, 1);
  ASSERT_TRUE(stored.ok());
  auto decoded = schema::DecodeEvent(stored->front().bytes);
  ASSERT_TRUE(decoded.ok());
  EXPECT_TRUE(decoded->canonical());
  EXPECT_EQ(std::string(decoded->root().getActor().cStr()), "ops");
  EXPECT_EQ(schema::CanonicalBytes(decoded->root()), stored->front().bytes);
}

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

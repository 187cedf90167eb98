#pragma once
// The ledger's contract, for every EventLog implementation: dense sequences, atomic batches,
// idempotency, time that never goes back, and a hash chain that finds any edit. Each test
// binary that includes this instantiates EventLogTest with the log kinds it builds and defines
// MakeLogFactory for them (ledger_test: memory, rocksdb; kafka_log_test: kafka).

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <capnp/message.h>
#include <gtest/gtest.h>

#include "ledger/event_log.h"
#include "ledger/verify.h"
#include "tests/unit/event_gen.h"

namespace admission::ledger {

inline std::string Workload(const std::string& name, const std::string& key, int64_t at,
                            const std::string& uid = "u") {
  return admission::testing::BuildEvent(
      admission::testing::EventSpec{0, "team-a", name, uid, 0, key, "ops"}, at);
}

// Builds one kind of log behind the same interface; each Make is a fresh, empty log.
class LogFactory {
 public:
  virtual ~LogFactory() = default;
  virtual std::unique_ptr<EventLog> Make() = 0;
};

// Defined by the test binary for the kinds it instantiates EventLogTest with.
std::unique_ptr<LogFactory> MakeLogFactory(const std::string& kind);

class EventLogTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    factory_ = MakeLogFactory(GetParam());
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
  // The decoded event owns the bytes the reader views: it must outlive `name`.
  auto first = schema::DecodeEvent((*read)[0].bytes);
  ASSERT_TRUE(first.ok());
  auto name = first->root().getBody().getWorkloadDeleted().getWorkload().getName();
  EXPECT_EQ(std::string(name.cStr()), "b");
}

TEST_P(EventLogTest, ScanShowsWhatReadGivesAndStopsWhenTheVisitorSaysSo) {
  std::vector<std::string> batch;
  for (int i = 0; i < 6; ++i) batch.push_back(Workload("w" + std::to_string(i), "", 10));
  ASSERT_TRUE(log_->Append(batch).ok());
  auto read = log_->Read(2, 10);
  ASSERT_TRUE(read.ok());
  std::vector<StoredEvent> seen;
  auto all = log_->Scan(2, 10, [&](Sequence sequence, std::string_view bytes) {
    seen.push_back(StoredEvent{sequence, std::string(bytes)});
    return true;
  });
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(*all, 5u);  // fewer than asked only at the head
  ASSERT_EQ(seen.size(), read->size());
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].sequence, (*read)[i].sequence);
    EXPECT_EQ(seen[i].bytes, (*read)[i].bytes);
  }
  // A visitor that says stop at event 3 is shown nothing after it.
  std::vector<Sequence> until;
  auto stopped = log_->Scan(2, 10, [&](Sequence sequence, std::string_view) {
    until.push_back(sequence);
    return sequence < 3;
  });
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(*stopped, 2u);
  EXPECT_EQ(until, (std::vector<Sequence>{2, 3}));
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

}  // namespace admission::ledger

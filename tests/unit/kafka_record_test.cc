// The Kafka ledger's record format and the check every reader runs (docs/kafka.md), without a
// broker: records are built from events a MemoryLog sequenced, as the writer builds them.

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "ledger/kafka_log.h"
#include "ledger/kafka_record.h"
#include "ledger/memory_log.h"
#include "tests/unit/event_gen.h"

namespace admission::ledger {
namespace {

std::string Workload(const std::string& name, const std::string& key, int64_t at) {
  return admission::testing::BuildEvent(
      admission::testing::EventSpec{0, "team-a", name, "u", 0, key, "ops"}, at);
}

struct Record {
  int64_t offset = 0;
  std::string value;
  KafkaRecordHeaders headers;
  KafkaRecordView View() const {
    return KafkaRecordView{offset, value, headers.format, headers.sequence, headers.hash};
  }
};

// Events 1..n sequenced by a MemoryLog, as records at offsets 0, 2, 4, ... (one event per
// transaction: each commit marker takes the next offset).
std::vector<Record> Records(int n) {
  MemoryLog log;
  for (int i = 0; i < n; ++i) {
    ADM_CHECK(log.Append(std::vector<std::string>{Workload("w" + std::to_string(i),
                                                           "k" + std::to_string(i), 10 + i)})
                  .ok(),
              "append");
  }
  std::vector<Record> records;
  schema::Hash chain = schema::kGenesisHash;
  Result<std::vector<StoredEvent>> events = log.Read(1, n);
  ADM_CHECK(events.ok(), "read");
  for (const StoredEvent& e : *events) {
    chain = schema::ChainHash(chain, e.bytes);
    records.push_back(Record{2 * static_cast<int64_t>(records.size()), e.bytes,
                             MakeKafkaRecordHeaders(e.sequence, chain)});
  }
  return records;
}

// Runs every record through the check in order, as a reader does, from an empty ledger.
Result<Head> ReadAll(const std::vector<Record>& records) {
  Head head;
  int64_t head_offset = -1;
  for (const Record& r : records) {
    auto checked = CheckKafkaRecord(r.View(), head, head_offset);
    if (!checked.ok()) return checked.status();
    if (checked->kind == CheckedRecord::Kind::kNext) {
      head = Head{checked->sequence, checked->hash, checked->recorded_at_ns};
      head_offset = r.offset;
    }
  }
  return head;
}

TEST(KafkaRecord, HeadersCarryTheDecimalSequenceAndTheChainValueInHex) {
  schema::Hash hash{};
  hash[0] = 0xab;
  hash[31] = 0x01;
  KafkaRecordHeaders headers = MakeKafkaRecordHeaders(42, hash);
  EXPECT_EQ(headers.format, "1");
  EXPECT_EQ(headers.sequence, "42");
  EXPECT_EQ(headers.hash.size(), 64u);
  EXPECT_EQ(headers.hash.substr(0, 2), "ab");
  EXPECT_EQ(headers.hash.substr(62), "01");
}

TEST(KafkaRecord, AReaderAcceptsTheWritersRecordsAndEndsAtItsHead) {
  std::vector<Record> records = Records(5);
  auto head = ReadAll(records);
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ(head->sequence, 5u);
  auto checked = CheckKafkaRecord(records[2].View(), Head{}, -1);
  EXPECT_FALSE(checked.ok());  // sequence 3 cannot follow an empty ledger
}

TEST(KafkaRecord, ARepeatedSequenceIsARepeatForTheCallerToCompare) {
  std::vector<Record> records = Records(3);
  records.push_back(records[1]);  // a re-send of sequence 2
  records.back().offset = 99;
  Head head;
  int64_t head_offset = -1;
  std::vector<CheckedRecord::Kind> kinds;
  for (const Record& r : records) {
    auto checked = CheckKafkaRecord(r.View(), head, head_offset);
    ASSERT_TRUE(checked.ok()) << checked.status().ToString();
    kinds.push_back(checked->kind);
    if (checked->kind == CheckedRecord::Kind::kNext) {
      head = Head{checked->sequence, checked->hash, checked->recorded_at_ns};
      head_offset = r.offset;
    }
  }
  EXPECT_EQ(kinds.back(), CheckedRecord::Kind::kRepeat);
  EXPECT_EQ(head.sequence, 3u);
}

TEST(KafkaRecord, AGapIsNamedWithItsOffsetAndTheMissingSequences) {
  std::vector<Record> records = Records(4);
  records.erase(records.begin() + 1);  // sequence 2 is gone
  auto head = ReadAll(records);
  ASSERT_FALSE(head.ok());
  EXPECT_EQ(head.status().code(), Code::kCorruption);
  EXPECT_NE(head.status().message().find("offset 4"), std::string::npos) << head.status().message();
  EXPECT_NE(head.status().message().find("sequences 2 to 2 are missing"), std::string::npos)
      << head.status().message();
}

TEST(KafkaRecord, ASecondChainAtTheNextSequenceIsAForkNamingBothOffsets) {
  std::vector<Record> ours = Records(3);
  // Another writer's sequence 3, on top of the same 1-2 but with another event.
  MemoryLog other;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(other.Append(std::vector<std::string>{Workload("w" + std::to_string(i),
                                                               "k" + std::to_string(i), 10 + i)})
                    .ok());
  }
  ASSERT_TRUE(other.Append(std::vector<std::string>{Workload("intruder", "", 50)}).ok());
  auto theirs = other.Read(3, 1);
  ASSERT_TRUE(theirs.ok());
  // The same sequence with other bytes: a repeat, which the reader's comparison turns into a
  // fork error naming both offsets.
  const Record intruder{40, theirs->front().bytes, MakeKafkaRecordHeaders(3, other.GetHead().hash)};
  std::vector<Record> stream = ours;
  stream.push_back(intruder);
  Head head;
  int64_t head_offset = -1;
  for (size_t i = 0; i < stream.size(); ++i) {
    auto checked = CheckKafkaRecord(stream[i].View(), head, head_offset);
    ASSERT_TRUE(checked.ok()) << checked.status().ToString();
    if (i + 1 == stream.size()) {
      EXPECT_EQ(checked->kind, CheckedRecord::Kind::kRepeat);
      EXPECT_NE(stream[i].value, ours[2].value);
    } else {
      head = Head{checked->sequence, checked->hash, checked->recorded_at_ns};
      head_offset = stream[i].offset;
    }
  }
  Status fork = KafkaForkError(3, ours[2].offset, intruder.offset);
  EXPECT_NE(fork.message().find("offsets 4 and 40"), std::string::npos) << fork.message();

  // Sequence 3 linking to another chain value than 2's (a writer that started from another
  // copy): refused as a fork at once, naming the head's offset.
  std::vector<Record> forked = Records(2);
  MemoryLog elsewhere;
  ASSERT_TRUE(elsewhere.Append(std::vector<std::string>{Workload("x", "", 1)}).ok());
  ASSERT_TRUE(elsewhere.Append(std::vector<std::string>{Workload("y", "", 2)}).ok());
  ASSERT_TRUE(elsewhere.Append(std::vector<std::string>{Workload("z", "", 30)}).ok());
  auto z = elsewhere.Read(3, 1);
  forked.push_back(Record{7, z->front().bytes, MakeKafkaRecordHeaders(3, elsewhere.GetHead().hash)});
  auto head2 = ReadAll(forked);
  ASSERT_FALSE(head2.ok());
  EXPECT_NE(head2.status().message().find("fork"), std::string::npos) << head2.status().message();
  EXPECT_NE(head2.status().message().find("offset 7"), std::string::npos);
  EXPECT_NE(head2.status().message().find("(offset 2)"), std::string::npos)
      << head2.status().message();
}

TEST(KafkaRecord, MalformedRecordsAreRefusedNamingWhat) {
  std::vector<Record> records = Records(1);
  auto refused = [&](Record r) {
    auto checked = CheckKafkaRecord(r.View(), Head{}, -1);
    EXPECT_FALSE(checked.ok());
    return checked.ok() ? std::string() : checked.status().message();
  };
  Record r = records[0];
  r.headers.format = "2";
  EXPECT_NE(refused(r).find("adm-format is '2'"), std::string::npos);
  r = records[0];
  r.headers.sequence = "01";
  EXPECT_NE(refused(r).find("not a positive decimal"), std::string::npos);
  r = records[0];
  r.headers.sequence = "2";
  EXPECT_NE(refused(r).find("records sequence 1"), std::string::npos);
  r = records[0];
  r.headers.hash[0] = r.headers.hash[0] == '0' ? '1' : '0';
  EXPECT_NE(refused(r).find("is not the chain value"), std::string::npos);
  r = records[0];
  r.value[r.value.size() - 1] ^= 1;  // an edited value: its hash header no longer matches
  EXPECT_FALSE(refused(r).empty());
  r = records[0];
  r.value = "garbage!";
  EXPECT_NE(refused(r).find("not a ledger event"), std::string::npos);
  KafkaRecordView missing = records[0].View();
  missing.hash.reset();
  auto checked = CheckKafkaRecord(missing, Head{}, -1);
  ASSERT_FALSE(checked.ok());
  EXPECT_NE(checked.status().message().find("no adm-hash header"), std::string::npos);
}

// Any single byte edited in any record's value is found by the reader (the value no longer
// matches its hash header, or does not decode), wherever it is.
RC_GTEST_PROP(KafkaRecord, AnyEditedValueByteIsRefused, ()) {
  const int n = *rc::gen::inRange(1, 6);
  std::vector<Record> records = Records(n);
  const size_t which = *rc::gen::inRange<size_t>(0, records.size());
  const size_t at = *rc::gen::inRange<size_t>(0, records[which].value.size());
  const int flip = *rc::gen::inRange(1, 256);
  records[which].value[at] = static_cast<char>(records[which].value[at] ^ flip);
  RC_ASSERT_FALSE(ReadAll(records).ok());
}

TEST(KafkaAddress, ParsesHostPortAndTopicAndRefusesWhatIsNotOne) {
  auto address = ParseKafkaLedger("kafka://127.0.0.1:9092,h2:9093/ledger.prod-1");
  ASSERT_TRUE(address.ok()) << address.status().ToString();
  EXPECT_EQ(address->bootstrap, "127.0.0.1:9092,h2:9093");
  EXPECT_EQ(address->topic, "ledger.prod-1");
  EXPECT_EQ(address->ToString(), "kafka://127.0.0.1:9092,h2:9093/ledger.prod-1");
  for (const char* bad : {"kafka://127.0.0.1:9092", "kafka:///t", "kafka://host/t",
                          "kafka://host:/t", "kafka://h:1/", "kafka://h:1/a/b", "rocksdb://x"}) {
    auto parsed = ParseKafkaLedger(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(parsed.status().message().find(bad), std::string::npos) << parsed.status().message();
  }
}

TEST(KafkaTopic, SettingsThatWouldLoseEventsAreRefusedNamingTheSetting) {
  KafkaAddress address{"h:1", "t"};
  KafkaTopicSettings good{1, "delete", "-1", "-1"};
  EXPECT_TRUE(CheckKafkaTopicSettings(address, good).ok());
  KafkaTopicSettings s = good;
  s.cleanup_policy = "compact";
  EXPECT_NE(CheckKafkaTopicSettings(address, s).message().find("cleanup.policy=compact"),
            std::string::npos);
  s = good;
  s.retention_ms = "604800000";
  EXPECT_NE(CheckKafkaTopicSettings(address, s).message().find("retention.ms=604800000"),
            std::string::npos);
  s = good;
  s.retention_bytes = "1073741824";
  EXPECT_NE(CheckKafkaTopicSettings(address, s).message().find("retention.bytes"),
            std::string::npos);
  s = good;
  s.partitions = 3;
  EXPECT_NE(CheckKafkaTopicSettings(address, s).message().find("3 partitions"), std::string::npos);
}

}  // namespace

}  // namespace admission::ledger

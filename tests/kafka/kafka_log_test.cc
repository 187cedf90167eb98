// KafkaLog on a real Apache Kafka broker (tests/kafka/run_with_broker.sh starts one and passes
// its address in KAFKA_BOOTSTRAP): the EventLog contract every log passes, and what only the
// Kafka ledger has: readers on other machines, a state folder rebuilt from the topic, fencing
// of an earlier writer, fork detection, topic settings. See docs/kafka.md.

#include <librdkafka/rdkafka.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include "ledger/kafka_log.h"
#include "ledger/kafka_record.h"
#include "ledger/memory_log.h"
#include "tests/unit/event_log_contract.h"
#include "tests/unit/temp_dir.h"

namespace admission::ledger {
namespace {

using admission::testing::TempDir;

std::string Bootstrap() {
  const char* bootstrap = std::getenv("KAFKA_BOOTSTRAP");
  ADM_CHECK(bootstrap != nullptr && *bootstrap != '\0',
            "KAFKA_BOOTSTRAP is not set: run this test through tests/kafka/run_with_broker.sh "
            "(ctest -L kafka does), or start a broker with ops/kafka/kafka.sh start DIR and "
            "export KAFKA_BOOTSTRAP=<the address it prints>");
  return bootstrap;
}

// Topic names must not collide with an earlier run against the same broker.
std::string UniqueTopic(const std::string& prefix) {
  static std::mt19937_64 random(std::random_device{}());
  return prefix + "-" + std::to_string(getpid()) + "-" + std::to_string(random() % 1000000007);
}

KafkaLogOptions Options(const std::string& topic, const std::string& state_dir, bool writer) {
  KafkaLogOptions options;
  options.address = KafkaAddress{Bootstrap(), topic};
  options.state_dir = state_dir;
  options.writer = writer;
  options.create_topic = writer;
  options.operation_timeout_ms = 20'000;
  return options;
}

std::unique_ptr<KafkaLog> OpenOrDie(const KafkaLogOptions& options) {
  auto log = KafkaLog::Open(options);
  ADM_CHECK(log.ok(), "%s", log.status().ToString().c_str());
  return std::move(*log);
}

class KafkaFactory final : public LogFactory {
 public:
  std::unique_ptr<EventLog> Make() override {
    return OpenOrDie(Options(UniqueTopic("contract"), dir_.Sub("state" + std::to_string(count_++)),
                             true));
  }

 private:
  TempDir dir_;
  int count_ = 0;
};

std::vector<StoredEvent> ReadAll(EventLog& log) {
  auto events = log.Read(1, kReadEventsMax);
  ADM_CHECK(events.ok(), "%s", events.status().ToString().c_str());
  return *events;
}

// A reader's CatchUp until it holds `sequence`: a transaction becomes visible to read_committed
// readers once the coordinator has written its markers, a moment after the writer's commit
// returned.
void CatchUpTo(KafkaLog& reader, Sequence sequence) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (reader.GetHead().sequence < sequence && std::chrono::steady_clock::now() < deadline) {
    auto head = reader.CatchUp();
    ADM_CHECK(head.ok(), "%s", head.status().ToString().c_str());
    if (head->sequence < sequence) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void AppendOrDie(EventLog& log, const std::vector<std::string>& batch) {
  auto ack = log.Append(batch);
  ADM_CHECK(ack.ok(), "%s", ack.status().ToString().c_str());
}

}  // namespace

std::unique_ptr<LogFactory> MakeLogFactory(const std::string& kind) {
  ADM_CHECK(kind == "kafka", "no log kind %s here", kind.c_str());
  return std::make_unique<KafkaFactory>();
}

namespace {

INSTANTIATE_TEST_SUITE_P(Kafka, EventLogTest, ::testing::Values("kafka"));

// The same appends give the same stored bytes and head through Kafka as in memory (and so as
// through RocksDB, which the contract tests hold to MemoryLog).
TEST(KafkaLog, StoresTheSameBytesAsTheOtherLogs) {
  TempDir dir;
  auto kafka = OpenOrDie(Options(UniqueTopic("same"), dir.Sub("s"), true));
  MemoryLog memory;
  for (int i = 0; i < 20; ++i) {
    std::vector<std::string> batch = {Workload("w" + std::to_string(i), "k" + std::to_string(i), i),
                                      Workload("w" + std::to_string(i), "", i)};
    AppendOrDie(*kafka, batch);
    AppendOrDie(memory, batch);
  }
  std::vector<StoredEvent> a = ReadAll(*kafka);
  std::vector<StoredEvent> b = ReadAll(memory);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].bytes, b[i].bytes) << "sequence " << i + 1;
  EXPECT_EQ(kafka->GetHead().hash, memory.GetHead().hash);
}

// A reader with its own state folder sees exactly what the writer committed, and more after a
// CatchUp; it refuses appends.
TEST(KafkaLog, AReaderElsewhereSeesWhatTheWriterCommitted) {
  TempDir dir;
  const std::string topic = UniqueTopic("reader");
  auto writer = OpenOrDie(Options(topic, dir.Sub("w"), true));
  AppendOrDie(*writer, {Workload("a", "ka", 1), Workload("b", "", 2)});
  auto reader = OpenOrDie(Options(topic, dir.Sub("r"), false));
  EXPECT_EQ(reader->GetHead().sequence, 2u);
  EXPECT_EQ(reader->GetHead().hash, writer->GetHead().hash);
  AppendOrDie(*writer, {Workload("c", "kc", 3)});
  EXPECT_EQ(reader->GetHead().sequence, 2u);
  CatchUpTo(*reader, 3);
  EXPECT_EQ(reader->GetHead().sequence, 3u);
  EXPECT_EQ(reader->GetHead().hash, writer->GetHead().hash);
  EXPECT_EQ(reader->FindKey("kc")->value_or(0), 3u);
  std::vector<StoredEvent> a = ReadAll(*writer);
  std::vector<StoredEvent> b = ReadAll(*reader);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].bytes, b[i].bytes);
  auto refused = reader->Append(std::vector<std::string>{Workload("d", "", 4)});
  EXPECT_EQ(refused.status().code(), Code::kUnavailable);
  // Offsets are locators: each one-event transaction's commit marker takes an offset too.
  ASSERT_TRUE(reader->OffsetOf(1).ok());
  EXPECT_EQ(*reader->OffsetOf(1), 0);
  ASSERT_TRUE(reader->OffsetOf(2).ok());
  EXPECT_EQ(*reader->OffsetOf(2), 1);
  ASSERT_TRUE(reader->OffsetOf(3).ok());
  EXPECT_EQ(*reader->OffsetOf(3), 3);
}

// Deleting the state folder loses nothing: the next open rebuilds it from the topic, and the
// writer carries on from the same head (idempotency keys included).
TEST(KafkaLog, ADeletedStateFolderIsRebuiltFromTheTopic) {
  TempDir dir;
  const std::string topic = UniqueTopic("rebuild");
  Head before;
  std::vector<StoredEvent> events;
  {
    auto writer = OpenOrDie(Options(topic, dir.Sub("s"), true));
    for (int i = 0; i < 10; ++i) AppendOrDie(*writer, {Workload("w", "k" + std::to_string(i), i)});
    before = writer->GetHead();
    events = ReadAll(*writer);
  }
  std::filesystem::remove_all(dir.Sub("s"));
  auto writer = OpenOrDie(Options(topic, dir.Sub("s"), true));
  EXPECT_EQ(writer->GetHead().sequence, before.sequence);
  EXPECT_EQ(writer->GetHead().hash, before.hash);
  std::vector<StoredEvent> again = ReadAll(*writer);
  ASSERT_EQ(again.size(), events.size());
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(again[i].bytes, events[i].bytes);
  auto retry = writer->Append(std::vector<std::string>{Workload("w", "k3", 100)});
  ASSERT_TRUE(retry.ok()) << retry.status().ToString();
  EXPECT_TRUE(retry->all_duplicates());
  EXPECT_EQ(retry->first(), 4u);
  AppendOrDie(*writer, {Workload("w", "k10", 100)});
  EXPECT_EQ(writer->GetHead().sequence, before.sequence + 1);
}

// A second writer of the same ledger takes the transactional id: the first is fenced on its
// next append and writes nothing more; readers see one chain.
TEST(KafkaLog, ANewWriterFencesTheOldOne) {
  TempDir dir;
  const std::string topic = UniqueTopic("fence");
  auto old_writer = OpenOrDie(Options(topic, dir.Sub("old"), true));
  AppendOrDie(*old_writer, {Workload("a", "", 1)});
  auto new_writer = OpenOrDie(Options(topic, dir.Sub("new"), true));
  EXPECT_EQ(new_writer->GetHead().sequence, 1u);
  auto fenced = old_writer->Append(std::vector<std::string>{Workload("b", "", 2)});
  ASSERT_FALSE(fenced.ok());
  EXPECT_EQ(fenced.status().code(), Code::kUnavailable);
  EXPECT_NE(fenced.status().message().find("fenced"), std::string::npos)
      << fenced.status().message();
  ASSERT_TRUE(old_writer->Halted().has_value());
  EXPECT_EQ(old_writer->Append(std::vector<std::string>{Workload("c", "", 3)}).status().code(),
            Code::kUnavailable);
  AppendOrDie(*new_writer, {Workload("d", "", 4)});
  auto reader = OpenOrDie(Options(topic, dir.Sub("r"), false));
  EXPECT_EQ(reader->GetHead().sequence, 2u);
  EXPECT_EQ(reader->GetHead().hash, new_writer->GetHead().hash);
  std::vector<StoredEvent> events = ReadAll(*reader);
  ASSERT_EQ(events.size(), 2u);
  auto second = schema::DecodeEvent(events[1].bytes);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(std::string(second->root().getBody().getWorkloadDeleted().getWorkload().getName().cStr()),
            "d");
}

// A second writer with another transactional id is not fenced by Kafka: its events fork the
// chain, and a reader halts on the fork naming both offsets.
TEST(KafkaLog, ASecondWriterWithAnotherIdIsAForkReadersHaltOn) {
  TempDir dir;
  const std::string topic = UniqueTopic("fork");
  auto writer = OpenOrDie(Options(topic, dir.Sub("a"), true));
  AppendOrDie(*writer, {Workload("a", "", 1)});
  KafkaLogOptions rogue_options = Options(topic, dir.Sub("b"), true);
  rogue_options.transactional_id = "someone-else";
  auto rogue = OpenOrDie(rogue_options);
  ASSERT_EQ(rogue->GetHead().sequence, 1u);
  AppendOrDie(*writer, {Workload("ours", "", 2)});
  AppendOrDie(*rogue, {Workload("theirs", "", 2)});
  auto reader = KafkaLog::Open(Options(topic, dir.Sub("r"), false));
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), Code::kCorruption);
  EXPECT_NE(reader.status().message().find("fork in the ledger topic at sequence 2"),
            std::string::npos)
      << reader.status().message();
  EXPECT_NE(reader.status().message().find("offsets 2 and 4"), std::string::npos)
      << reader.status().message();
}

// A record that repeats a sequence with the same bytes (a re-send that landed twice) is skipped
// by readers: the chain and the head are as if it were not there.
TEST(KafkaLog, ARepeatedRecordWithTheSameBytesIsSkipped) {
  TempDir dir;
  const std::string topic = UniqueTopic("repeat");
  auto writer = OpenOrDie(Options(topic, dir.Sub("w"), true));
  AppendOrDie(*writer, {Workload("a", "", 1)});
  AppendOrDie(*writer, {Workload("b", "", 2)});
  // Sequence 2 again, byte for byte with its headers, from another (plain) producer.
  std::vector<StoredEvent> events = ReadAll(*writer);
  const KafkaRecordHeaders headers = MakeKafkaRecordHeaders(2, writer->GetHead().hash);
  char error_text[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  ASSERT_EQ(rd_kafka_conf_set(conf, "bootstrap.servers", Bootstrap().c_str(), error_text,
                              sizeof(error_text)),
            RD_KAFKA_CONF_OK);
  rd_kafka_t* producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error_text, sizeof(error_text));
  ASSERT_NE(producer, nullptr) << error_text;
  ASSERT_EQ(rd_kafka_producev(
                producer, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_PARTITION(0),
                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                RD_KAFKA_V_VALUE(events[1].bytes.data(), events[1].bytes.size()),
                RD_KAFKA_V_HEADER(kKafkaFormatHeader, headers.format.data(),
                                  static_cast<ssize_t>(headers.format.size())),
                RD_KAFKA_V_HEADER(kKafkaSequenceHeader, headers.sequence.data(),
                                  static_cast<ssize_t>(headers.sequence.size())),
                RD_KAFKA_V_HEADER(kKafkaHashHeader, headers.hash.data(),
                                  static_cast<ssize_t>(headers.hash.size())),
                RD_KAFKA_V_END),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  ASSERT_EQ(rd_kafka_flush(producer, 20'000), RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_destroy(producer);
  auto reader = OpenOrDie(Options(topic, dir.Sub("r"), false));
  EXPECT_EQ(reader->GetHead().sequence, 2u);
  EXPECT_EQ(reader->GetHead().hash, writer->GetHead().hash);
  EXPECT_EQ(reader->GetStats().repeats_skipped, 1u);
  // The writer, reopened on a fresh state, reads past it and carries on at sequence 3.
  writer.reset();
  auto again = OpenOrDie(Options(topic, dir.Sub("w2"), true));
  auto ack = again->Append(std::vector<std::string>{Workload("c", "", 3)});
  ASSERT_TRUE(ack.ok()) << ack.status().ToString();
  EXPECT_EQ(ack->first(), 3u);
  CatchUpTo(*reader, 3);
  EXPECT_EQ(reader->GetHead().sequence, 3u);
}

// The writer refuses a topic that would not keep the audit record, naming the setting; a
// reader still reads it.
TEST(KafkaLog, TheWriterRefusesATopicThatWouldExpireOrCompactEvents) {
  TempDir dir;
  const KafkaAddress address{Bootstrap(), UniqueTopic("settings")};
  // Created as the broker's defaults make it: retention.ms of 7 days.
  {
    char error_text[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    ASSERT_EQ(rd_kafka_conf_set(conf, "bootstrap.servers", address.bootstrap.c_str(), error_text,
                                sizeof(error_text)),
              RD_KAFKA_CONF_OK);
    rd_kafka_t* admin = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error_text, sizeof(error_text));
    ASSERT_NE(admin, nullptr) << error_text;
    rd_kafka_NewTopic_t* topic =
        rd_kafka_NewTopic_new(address.topic.c_str(), 1, -1, error_text, sizeof(error_text));
    rd_kafka_queue_t* queue = rd_kafka_queue_new(admin);
    rd_kafka_CreateTopics(admin, &topic, 1, nullptr, queue);
    rd_kafka_event_t* event = rd_kafka_queue_poll(queue, 20'000);
    ASSERT_NE(event, nullptr);
    EXPECT_EQ(rd_kafka_event_error(event), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_event_destroy(event);
    rd_kafka_queue_destroy(queue);
    rd_kafka_NewTopic_destroy(topic);
    rd_kafka_destroy(admin);
  }
  auto settings = DescribeKafkaTopic(address, 20'000);
  ASSERT_TRUE(settings.ok()) << settings.status().ToString();
  ASSERT_TRUE(settings->has_value());
  EXPECT_EQ((*settings)->cleanup_policy, "delete");
  EXPECT_NE((*settings)->retention_ms, "-1");
  KafkaLogOptions options = Options(address.topic, dir.Sub("w"), true);
  auto refused = KafkaLog::Open(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("retention.ms=" + (*settings)->retention_ms),
            std::string::npos)
      << refused.status().message();
  EXPECT_TRUE(KafkaLog::Open(Options(address.topic, dir.Sub("r"), false)).ok());

  // A topic the ledger creates has the settings it needs.
  const KafkaAddress created{Bootstrap(), UniqueTopic("created")};
  ASSERT_TRUE(CreateKafkaTopic(created, -1, 20'000).ok());
  auto good = DescribeKafkaTopic(created, 20'000);
  ASSERT_TRUE(good.ok() && good->has_value());
  EXPECT_TRUE(CheckKafkaTopicSettings(created, **good).ok());
  // A missing topic is named, with the way to create it.
  KafkaLogOptions missing = Options(UniqueTopic("missing"), dir.Sub("m"), true);
  missing.create_topic = false;
  auto not_found = KafkaLog::Open(missing);
  EXPECT_EQ(not_found.status().code(), Code::kNotFound);
  EXPECT_NE(not_found.status().message().find("--create-topic"), std::string::npos);
}

// A commit whose outcome is unknown (it timed out): the writer makes a new producer, whose epoch
// fences the old one, reads the tail, and sends again only what the topic lacks. Both ways:
// the transaction landed (nothing is sent again) or it did not (the same events are sent again).
TEST(KafkaLog, AnUnknownCommitOutcomeIsSettledFromTheTail) {
  TempDir dir;
  for (const std::string point : {"committed", "produced"}) {
    SCOPED_TRACE(point);
    const std::string topic = UniqueTopic("ambiguous-" + point);
    KafkaLogOptions options = Options(topic, dir.Sub(point), true);
    options.drill = [point](std::string_view at, uint64_t transaction) {
      return at == point && transaction == 2;
    };
    auto writer = OpenOrDie(options);
    AppendOrDie(*writer, {Workload("a", "ka", 1)});
    auto ack = writer->Append(std::vector<std::string>{Workload("b", "kb", 2), Workload("c", "", 2)});
    ASSERT_TRUE(ack.ok()) << ack.status().ToString();
    EXPECT_EQ(ack->sequences, (std::vector<Sequence>{2, 3}));
    EXPECT_EQ(writer->GetStats().producers_recreated, 1u);
    AppendOrDie(*writer, {Workload("d", "", 3)});
    // The topic holds each event once: a fresh reader (which refuses a repeated sequence with
    // other bytes and skips one with the same bytes) sees no repeat at all.
    auto reader = OpenOrDie(Options(topic, dir.Sub(point + "-reader"), false));
    EXPECT_EQ(reader->GetHead().sequence, 4u);
    EXPECT_EQ(reader->GetHead().hash, writer->GetHead().hash);
    EXPECT_EQ(reader->GetStats().repeats_skipped, 0u);
    EXPECT_EQ(reader->FindKey("kb")->value_or(0), 2u);
  }
}

// An abortable error: the writer aborts the transaction and sends the same events again; the
// topic holds them once.
TEST(KafkaLog, AnAbortableErrorAbortsAndSendsTheSameEventsAgain) {
  TempDir dir;
  const std::string topic = UniqueTopic("abortable");
  KafkaLogOptions options = Options(topic, dir.Sub("w"), true);
  options.drill = [](std::string_view at, uint64_t transaction) {
    return at == "abortable" && (transaction == 2 || transaction == 3);
  };
  auto writer = OpenOrDie(options);
  AppendOrDie(*writer, {Workload("a", "", 1)});
  auto ack = writer->Append(std::vector<std::string>{Workload("b", "kb", 2), Workload("c", "", 2)});
  ASSERT_TRUE(ack.ok()) << ack.status().ToString();
  EXPECT_EQ(ack->sequences, (std::vector<Sequence>{2, 3}));
  EXPECT_EQ(writer->GetStats().aborted, 2u);
  EXPECT_EQ(writer->GetStats().producers_recreated, 0u);
  auto reader = OpenOrDie(Options(topic, dir.Sub("r"), false));
  EXPECT_EQ(reader->GetHead().sequence, 3u);
  EXPECT_EQ(reader->GetHead().hash, writer->GetHead().hash);
  EXPECT_EQ(reader->GetStats().repeats_skipped, 0u);
}

// A state folder belongs to one topic.
TEST(KafkaLog, AStateFolderOfAnotherTopicIsRefused) {
  TempDir dir;
  OpenOrDie(Options(UniqueTopic("one"), dir.Sub("s"), true));
  auto other = KafkaLog::Open(Options(UniqueTopic("two"), dir.Sub("s"), true));
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), Code::kInvalidArgument);
  EXPECT_NE(other.status().message().find("holds a copy of topic"), std::string::npos);
}

}  // namespace
}  // namespace admission::ledger

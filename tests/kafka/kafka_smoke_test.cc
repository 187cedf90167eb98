// Smoke test against a real Kafka broker (started by tests/kafka/run_with_broker.sh, address in
// KAFKA_BOOTSTRAP): what an idempotent producer writes to one partition comes back to a
// consumer exactly once, in order, byte for byte.

#include <librdkafka/rdkafka.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

namespace {

constexpr int kMessageCount = 1000;
// Every message goes to one partition: Kafka orders messages only within a partition.
constexpr int32_t kPartition = 0;
// The broker runs on this machine; these bound a hung broker, not a slow network.
constexpr int kProduceQueueFullWaitMs = 100;
constexpr int kFlushTimeoutMs = 30'000;
constexpr int kMessageTimeoutMs = 30'000;
constexpr auto kConsumeTimeout = std::chrono::seconds(60);
constexpr int kConsumerPollTimeoutMs = 500;

struct KafkaHandleDeleter {
  void operator()(rd_kafka_t* handle) const { rd_kafka_destroy(handle); }
};
using KafkaHandle = std::unique_ptr<rd_kafka_t, KafkaHandleDeleter>;

struct KafkaMessageDeleter {
  void operator()(rd_kafka_message_t* message) const { rd_kafka_message_destroy(message); }
};
using KafkaMessage = std::unique_ptr<rd_kafka_message_t, KafkaMessageDeleter>;

struct TopicPartitionListDeleter {
  void operator()(rd_kafka_topic_partition_list_t* list) const {
    rd_kafka_topic_partition_list_destroy(list);
  }
};
using TopicPartitionList =
    std::unique_ptr<rd_kafka_topic_partition_list_t, TopicPartitionListDeleter>;

struct KafkaConfDeleter {
  void operator()(rd_kafka_conf_t* conf) const { rd_kafka_conf_destroy(conf); }
};
using KafkaConf = std::unique_ptr<rd_kafka_conf_t, KafkaConfDeleter>;

// What the delivery-report callback learned about one message.
struct DeliveryReport {
  bool reported = false;
  rd_kafka_resp_err_t error = RD_KAFKA_RESP_ERR_NO_ERROR;
  int32_t partition = -1;
  int64_t offset = -1;
};

std::string Payload(int index) { return "payload-" + std::to_string(index); }
std::string Key(int index) { return "key-" + std::to_string(index); }

// Topic and group names must not collide with an earlier run against the same broker.
std::string UniqueName(std::string_view prefix) {
  std::random_device random_device;
  const auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  return std::string(prefix) + "-" + std::to_string(getpid()) + "-" + std::to_string(now_ns) +
         "-" + std::to_string(random_device());
}

// Fails the calling test (via ADD_FAILURE) when a property is rejected.
void SetConf(rd_kafka_conf_t* conf, const char* name, const std::string& value) {
  char error_text[512];
  if (rd_kafka_conf_set(conf, name, value.c_str(), error_text, sizeof(error_text)) !=
      RD_KAFKA_CONF_OK) {
    ADD_FAILURE() << "librdkafka rejected " << name << "=" << value << ": " << error_text;
  }
}

// Runs on the producer's poll thread (inside rd_kafka_poll/rd_kafka_flush); `_private` carries
// the message index that rd_kafka_producev was given.
void OnDelivery(rd_kafka_t*, const rd_kafka_message_t* message, void* opaque) {
  auto& reports = *static_cast<std::vector<DeliveryReport>*>(opaque);
  const auto index = reinterpret_cast<std::intptr_t>(message->_private);
  if (index < 0 || index >= static_cast<std::intptr_t>(reports.size())) {
    ADD_FAILURE() << "delivery report for unknown message index " << index;
    return;
  }
  DeliveryReport& report = reports[static_cast<size_t>(index)];
  if (report.reported) {
    ADD_FAILURE() << "message " << index << " was reported twice";
  }
  report.reported = true;
  report.error = message->err;
  report.partition = message->partition;
  report.offset = message->offset;
}

const char* BootstrapOrNull() {
  const char* bootstrap = std::getenv("KAFKA_BOOTSTRAP");
  return (bootstrap != nullptr && *bootstrap != '\0') ? bootstrap : nullptr;
}

// Produces kMessageCount messages to `topic` with an idempotent producer; *reports gets each
// message's delivery report. Fails the calling test (ASSERT) when the producer does.
void ProduceAll(const char* bootstrap, const std::string& topic,
                std::vector<DeliveryReport>* reports) {
  char error_text[512];
  KafkaConf conf(rd_kafka_conf_new());
  SetConf(conf.get(), "bootstrap.servers", bootstrap);
  SetConf(conf.get(), "enable.idempotence", "true");
  SetConf(conf.get(), "acks", "all");
  SetConf(conf.get(), "message.timeout.ms", std::to_string(kMessageTimeoutMs));
  ASSERT_FALSE(testing::Test::HasFailure());
  rd_kafka_conf_set_dr_msg_cb(conf.get(), OnDelivery);
  rd_kafka_conf_set_opaque(conf.get(), reports);
  // rd_kafka_new takes ownership of conf only when it succeeds.
  KafkaHandle producer(
      rd_kafka_new(RD_KAFKA_PRODUCER, conf.get(), error_text, sizeof(error_text)));
  ASSERT_NE(producer, nullptr) << "creating the producer failed: " << error_text;
  conf.release();

  for (int index = 0; index < kMessageCount; ++index) {
    const std::string payload = Payload(index);
    const std::string key = Key(index);
    rd_kafka_resp_err_t error;
    // A full local queue is back-pressure, not failure: serve delivery reports and retry.
    while ((error = rd_kafka_producev(
                producer.get(), RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_PARTITION(kPartition),
                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                RD_KAFKA_V_VALUE(const_cast<char*>(payload.data()), payload.size()),
                RD_KAFKA_V_KEY(key.data(), key.size()),
                RD_KAFKA_V_OPAQUE(reinterpret_cast<void*>(static_cast<std::intptr_t>(index))),
                RD_KAFKA_V_END)) == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
      rd_kafka_poll(producer.get(), kProduceQueueFullWaitMs);
    }
    ASSERT_EQ(error, RD_KAFKA_RESP_ERR_NO_ERROR)
        << "enqueueing message " << index << " failed: " << rd_kafka_err2str(error);
    rd_kafka_poll(producer.get(), 0);
  }

  const rd_kafka_resp_err_t flush_error = rd_kafka_flush(producer.get(), kFlushTimeoutMs);
  ASSERT_EQ(flush_error, RD_KAFKA_RESP_ERR_NO_ERROR)
      << "flush did not finish in " << kFlushTimeoutMs << " ms: " << rd_kafka_err2str(flush_error)
      << " (" << rd_kafka_outq_len(producer.get()) << " messages still queued)";
  // A fatal error (e.g. the idempotence guarantee was lost) fails the producer as a whole.
  const rd_kafka_resp_err_t fatal_error =
      rd_kafka_fatal_error(producer.get(), error_text, sizeof(error_text));
  ASSERT_EQ(fatal_error, RD_KAFKA_RESP_ERR_NO_ERROR) << "producer fatal error: " << error_text;
}

// Every message was acknowledged by the broker, in the order it was produced.
void ExpectDeliveredInOrder(const std::vector<DeliveryReport>& reports) {
  for (int index = 0; index < kMessageCount; ++index) {
    const DeliveryReport& report = reports[static_cast<size_t>(index)];
    ASSERT_TRUE(report.reported) << "no delivery report for message " << index;
    ASSERT_EQ(report.error, RD_KAFKA_RESP_ERR_NO_ERROR)
        << "message " << index << " failed: " << rd_kafka_err2str(report.error);
    ASSERT_EQ(report.partition, kPartition) << "message " << index;
    if (index > 0) {
      ASSERT_EQ(report.offset, reports[static_cast<size_t>(index) - 1].offset + 1)
          << "message " << index << " was not written right after message " << index - 1;
    }
  }
}

// Consumes `topic` from its start: exactly the kMessageCount messages, in order, from
// `first_offset` on, byte for byte, and then the partition's end.
void ConsumeAll(const char* bootstrap, const std::string& topic, int64_t first_offset) {
  char error_text[512];
  KafkaConf conf(rd_kafka_conf_new());
  SetConf(conf.get(), "bootstrap.servers", bootstrap);
  SetConf(conf.get(), "group.id", UniqueName("kafka-smoke-group"));
  SetConf(conf.get(), "auto.offset.reset", "earliest");
  SetConf(conf.get(), "enable.auto.commit", "false");
  // An end-of-partition event tells us no further (duplicate) message is waiting.
  SetConf(conf.get(), "enable.partition.eof", "true");
  ASSERT_FALSE(testing::Test::HasFailure());
  KafkaHandle consumer(
      rd_kafka_new(RD_KAFKA_CONSUMER, conf.get(), error_text, sizeof(error_text)));
  ASSERT_NE(consumer, nullptr) << "creating the consumer failed: " << error_text;
  conf.release();
  rd_kafka_poll_set_consumer(consumer.get());

  TopicPartitionList subscription(rd_kafka_topic_partition_list_new(1));
  rd_kafka_topic_partition_list_add(subscription.get(), topic.c_str(), RD_KAFKA_PARTITION_UA);
  const rd_kafka_resp_err_t subscribe_error =
      rd_kafka_subscribe(consumer.get(), subscription.get());
  ASSERT_EQ(subscribe_error, RD_KAFKA_RESP_ERR_NO_ERROR)
      << "subscribing failed: " << rd_kafka_err2str(subscribe_error);

  int received = 0;
  bool at_end_of_partition = false;
  const auto deadline = std::chrono::steady_clock::now() + kConsumeTimeout;
  // Read until every message has come and the partition's end is reached right after it.
  while (!(received >= kMessageCount && at_end_of_partition)) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << "received " << received << " of " << kMessageCount << " messages in "
        << kConsumeTimeout.count() << " s";
    KafkaMessage message(rd_kafka_consumer_poll(consumer.get(), kConsumerPollTimeoutMs));
    if (message == nullptr) {
      continue;
    }
    if (message->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      at_end_of_partition = true;
      continue;
    }
    ASSERT_EQ(message->err, RD_KAFKA_RESP_ERR_NO_ERROR)
        << "consumer error: " << rd_kafka_message_errstr(message.get());
    at_end_of_partition = false;
    ASSERT_LT(received, kMessageCount) << "more messages than were produced";
    ASSERT_EQ(std::string_view(rd_kafka_topic_name(message->rkt)), topic);
    ASSERT_EQ(message->partition, kPartition);
    ASSERT_EQ(message->offset, first_offset + received)
        << "message " << received << " is out of order or duplicated";
    const std::string_view payload(static_cast<const char*>(message->payload), message->len);
    ASSERT_EQ(payload, Payload(received));
    ASSERT_NE(message->key, nullptr) << "message " << received << " has no key";
    const std::string_view key(static_cast<const char*>(message->key), message->key_len);
    ASSERT_EQ(key, Key(received));
    ++received;
  }
  EXPECT_EQ(received, kMessageCount);

  // Leave the group cleanly so the broker does not wait for this member to time out.
  const rd_kafka_resp_err_t close_error = rd_kafka_consumer_close(consumer.get());
  EXPECT_EQ(close_error, RD_KAFKA_RESP_ERR_NO_ERROR)
      << "closing the consumer failed: " << rd_kafka_err2str(close_error);
}

TEST(KafkaBroker, IdempotentProducerRoundTripsInOrder) {
  const char* bootstrap = BootstrapOrNull();
  ASSERT_NE(bootstrap, nullptr)
      << "KAFKA_BOOTSTRAP is not set: run this test through tests/kafka/run_with_broker.sh "
         "(ctest -L kafka does), or start a broker with ops/kafka/kafka.sh start DIR and "
         "export KAFKA_BOOTSTRAP=<the address it prints>";
  const std::string topic = UniqueName("kafka-smoke");

  std::vector<DeliveryReport> reports(kMessageCount);
  ASSERT_NO_FATAL_FAILURE(ProduceAll(bootstrap, topic, &reports));
  ASSERT_NO_FATAL_FAILURE(ExpectDeliveredInOrder(reports));
  ASSERT_NO_FATAL_FAILURE(ConsumeAll(bootstrap, topic, reports.front().offset));
}

}  // namespace

#include "consumers/billing/relay.h"

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <random>
#include <thread>

#include "ledger/kafka_client.h"

namespace admission::consumers::billing {

namespace {

constexpr int64_t kTailWindowFirst = 256;  // records read back from the end, first try
constexpr int kTailSettleTries = 10;       // 100 ms each: the last transaction's markers
constexpr int kAbortableRetriesMax = 3;

using ledger::KafkaTxnStatus;

struct Consumer {
  rd_kafka_t* rk = nullptr;
  ~Consumer() {
    if (rk != nullptr) {
      rd_kafka_consumer_close(rk);
      rd_kafka_destroy(rk);
    }
  }
};

void OnDelivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
  if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) *static_cast<bool*>(opaque) = true;
}

// The header `name` of a message, or empty.
std::string_view Header(const rd_kafka_message_t* m, const char* name) {
  return ledger::KafkaHeader(m, name).value_or(std::string_view());
}

}  // namespace

struct OutboxRelay::Handle {
  rd_kafka_t* rk = nullptr;
  ~Handle() {
    if (rk != nullptr) rd_kafka_destroy(rk);
  }
};

OutboxRelay::~OutboxRelay() = default;

Result<std::unique_ptr<OutboxRelay>> OutboxRelay::Open(const ledger::KafkaAddress& output,
                                                       const std::string& transactional_id,
                                                       int operation_timeout_ms) {
  ADM_RETURN_IF_ERROR(ledger::CreateKafkaTopic(output, -1, operation_timeout_ms));
  std::unique_ptr<OutboxRelay> relay(new OutboxRelay());
  relay->output_ = output;
  relay->transactional_id_ = transactional_id;
  relay->timeout_ms_ = operation_timeout_ms;
  auto conf = ledger::NewTransactionalProducerConf(output.bootstrap, transactional_id);
  if (!conf.ok()) return conf.status();
  rd_kafka_conf_set_dr_msg_cb(*conf, OnDelivery);
  rd_kafka_conf_set_opaque(*conf, &relay->delivery_failed_);
  char err[512];
  relay->producer_ = std::make_unique<Handle>();
  relay->producer_->rk = rd_kafka_new(RD_KAFKA_PRODUCER, *conf, err, sizeof err);
  if (relay->producer_->rk == nullptr) {
    return Status(Code::kInvalidArgument, std::string("billing relay: ") + err);
  }
  // Fences an earlier instance and aborts the transaction it left open.
  ADM_RETURN_IF_ERROR(KafkaTxnStatus(
      rd_kafka_init_transactions(relay->producer_->rk, operation_timeout_ms), "billing relay: init_transactions"));
  return relay;
}

Result<std::optional<OutboxPosition>> OutboxRelay::PublishedPosition() {
  std::random_device random;
  auto conf = ledger::NewKafkaConf({{"bootstrap.servers", output_.bootstrap},
                    {"group.id", "admission-billing-tail." + std::to_string(random())},
                    {"isolation.level", "read_committed"},
                    {"enable.auto.commit", "false"},
                    {"enable.partition.eof", "true"},
                    {"fetch.wait.max.ms", "50"},
                    {"log_level", "3"}});
  if (!conf.ok()) return conf.status();
  char err[512];
  Consumer c;
  c.rk = rd_kafka_new(RD_KAFKA_CONSUMER, *conf, err, sizeof err);
  if (c.rk == nullptr) return Status(Code::kInvalidArgument, std::string("billing relay: ") + err);

  int partitions = 0;
  {
    rd_kafka_topic_t* topic = rd_kafka_topic_new(c.rk, output_.topic.c_str(), nullptr);
    const rd_kafka_metadata_t* metadata = nullptr;
    rd_kafka_resp_err_t e = rd_kafka_metadata(c.rk, 0, topic, &metadata, timeout_ms_);
    rd_kafka_topic_destroy(topic);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return Status(Code::kUnavailable, "billing relay: metadata of " + output_.topic + ": " +
                                            rd_kafka_err2str(e));
    }
    if (metadata->topic_cnt == 1) partitions = metadata->topics[0].partition_cnt;
    rd_kafka_metadata_destroy(metadata);
  }
  std::optional<OutboxPosition> found;
  for (int32_t partition = 0; partition < partitions; ++partition) {
    int64_t low = 0, high = 0;
    rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(c.rk, output_.topic.c_str(), partition,
                                                             &low, &high, timeout_ms_);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return Status(Code::kUnavailable, "billing relay: watermarks of " + output_.topic + ": " +
                                            rd_kafka_err2str(e));
    }
    std::optional<OutboxPosition> here;
    for (int64_t window = kTailWindowFirst; !here && high > low; window *= 8) {
      const int64_t start = std::max(low, high - window);
      for (int settle = 0; settle < kTailSettleTries; ++settle) {
        rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(list, output_.topic.c_str(), partition)->offset = start;
        e = rd_kafka_assign(c.rk, list);
        rd_kafka_topic_partition_list_destroy(list);
        if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
          return Status(Code::kUnavailable, std::string("billing relay: assign: ") +
                                                rd_kafka_err2str(e));
        }
        int64_t end = -1;
        const auto deadline =
            std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
        while (end < 0) {
          if (std::chrono::steady_clock::now() > deadline) {
            return Status(Code::kUnavailable, "billing relay: reading the tail of " +
                                                  output_.topic + ": nothing received");
          }
          rd_kafka_message_t* m = rd_kafka_consumer_poll(c.rk, 200);
          if (m == nullptr) continue;
          std::unique_ptr<rd_kafka_message_t, void (*)(rd_kafka_message_t*)> owned(
              m, rd_kafka_message_destroy);
          if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            end = m->offset;
            continue;
          }
          if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
            return Status(Code::kUnavailable, "billing relay: reading the tail of " +
                                                  output_.topic + ": " +
                                                  rd_kafka_message_errstr(m));
          }
          if (Header(m, kRelayHeader) != transactional_id_) continue;
          auto position = OutboxPosition::Parse(Header(m, kPositionHeader));
          if (!position) {
            return Status(Code::kCorruption, "billing relay: record at offset " +
                                                 std::to_string(m->offset) + " of " +
                                                 output_.topic + " has no valid " +
                                                 kPositionHeader + " header");
          }
          if (!here || *position > *here) here = position;
        }
        // A read that ends short of the high watermark may be waiting for the last
        // transaction's markers: read again, a little later.
        if (end >= high) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (start == low) break;
    }
    if (here && (!found || *here > *found)) found = here;
  }
  return found;
}

Status OutboxRelay::Publish(const std::vector<OutboxEntry>& entries,
                            const std::function<void()>& before_commit) {
  rd_kafka_t* rk = producer_->rk;
  for (int attempt = 0;; ++attempt) {
    bool abortable = false;
    delivery_failed_ = false;
    Status s = KafkaTxnStatus(rd_kafka_begin_transaction(rk), "billing relay: begin_transaction");
    if (!s.ok()) return s;
    for (const OutboxEntry& entry : entries) {
      const std::string position = entry.position.ToString();
      for (;;) {
        rd_kafka_resp_err_t pe = rd_kafka_producev(
            rk, RD_KAFKA_V_TOPIC(output_.topic.c_str()), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_KEY(entry.id.data(), entry.id.size()),
            RD_KAFKA_V_VALUE(const_cast<char*>(entry.json.data()), entry.json.size()),
            RD_KAFKA_V_HEADER(kRelayHeader, transactional_id_.data(),
                              static_cast<ssize_t>(transactional_id_.size())),
            RD_KAFKA_V_HEADER(kPositionHeader, position.data(),
                              static_cast<ssize_t>(position.size())),
            RD_KAFKA_V_END);
        if (pe == RD_KAFKA_RESP_ERR_NO_ERROR) break;
        if (pe != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
          return Status(Code::kUnavailable, std::string("billing relay: produce: ") +
                                                rd_kafka_err2str(pe));
        }
        rd_kafka_poll(rk, 10);
      }
    }
    rd_kafka_flush(rk, timeout_ms_);
    if (before_commit) before_commit();
    s = KafkaTxnStatus(rd_kafka_commit_transaction(rk, timeout_ms_), "billing relay: commit_transaction", &abortable);
    if (s.ok() && delivery_failed_) {
      s = Status(Code::kUnavailable, "billing relay: a usage record was not delivered");
    }
    if (s.ok()) return s;
    if (!abortable || attempt + 1 >= kAbortableRetriesMax) return s;
    ADM_RETURN_IF_ERROR(
        KafkaTxnStatus(rd_kafka_abort_transaction(rk, timeout_ms_), "billing relay: abort_transaction"));
  }
}

}  // namespace admission::consumers::billing

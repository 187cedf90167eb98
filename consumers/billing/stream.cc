#include "consumers/billing/stream.h"

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <memory>

#include <nlohmann/json.hpp>

#include "consumers/billing/report.h"
#include "ledger/kafka_client.h"
#include "ledger/kafka_record.h"
#include "schema/event_codec.h"
#include "schema/time_format.h"

namespace admission::consumers::billing {

namespace {

constexpr int kPollMs = 200;
constexpr size_t kEventsPerTransactionMax = 4096;

std::string Rfc3339Ms(int64_t ms) { return FormatRfc3339(ms * 1'000'000); }

using ledger::KafkaTxnStatus;

struct Handles {
  rd_kafka_t* consumer = nullptr;
  rd_kafka_t* producer = nullptr;
  ~Handles() {
    if (consumer != nullptr) {
      rd_kafka_consumer_close(consumer);
      rd_kafka_destroy(consumer);
    }
    if (producer != nullptr) rd_kafka_destroy(producer);
  }
};

void OnDelivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
  if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) *static_cast<bool*>(opaque) = true;
}

}  // namespace

std::vector<UsageRecord> RecordsOf(const Interval& in, int64_t bucket_ms,
                                   uint64_t closing_sequence) {
  std::vector<UsageRecord> out;
  int64_t start = in.start_ms;
  while (start < in.end_ms) {
    const int64_t bucket = bucket_ms > 0 ? start - start % bucket_ms : 0;
    const int64_t end = bucket_ms > 0 ? std::min(in.end_ms, bucket + bucket_ms) : in.end_ms;
    const char* kind = in.kind == UsageKind::kUsed ? "used" : "idle";
    UsageRecord r;
    r.id = in.uid + "/" + std::to_string(in.generation) + "/" + in.pod_set + "/" + in.to.flavor +
           "/" + in.to.resource + "/" + kind + "/" + std::to_string(bucket);
    nlohmann::ordered_json j;
    j["id"] = r.id;
    j["sequence"] = closing_sequence;
    for (const auto& [name, value] : AttributionFields(in.to)) j[name] = *value;
    j["kind"] = kind;
    j["bucket"] = Rfc3339Ms(bucket);
    j["start"] = Rfc3339Ms(start);
    j["end"] = Rfc3339Ms(end);
    r.milli_ms = static_cast<__int128>(in.milli) * (end - start);
    j["resourceSeconds"] = ResourceSeconds(r.milli_ms);
    r.json = j.dump();
    r.bucket_ms = bucket;
    r.kind = in.kind;
    r.to = in.to;
    out.push_back(std::move(r));
    start = end;
  }
  return out;
}

Result<StreamStats> RunBillingStream(const StreamOptions& options) {
  const std::string group =
      options.group.empty() ? "admission-billing." + options.ledger.topic : options.group;
  const ledger::KafkaAddress output{options.ledger.bootstrap, options.output_topic};
  ADM_RETURN_IF_ERROR(ledger::CreateKafkaTopic(output, -1, options.operation_timeout_ms));
  Handles h;
  char err[512];
  {
    auto conf = ledger::NewKafkaConf({{"bootstrap.servers", options.ledger.bootstrap},
                                      {"group.id", group},
                                      {"isolation.level", "read_committed"},
                                      {"enable.auto.commit", "false"},
                                      {"enable.auto.offset.store", "false"},
                                      {"enable.partition.eof", "true"},
                                      {"auto.offset.reset", "earliest"},
                                      {"fetch.wait.max.ms", "50"},
                                      {"log_level", "3"}});
    if (!conf.ok()) return conf.status();
    h.consumer = rd_kafka_new(RD_KAFKA_CONSUMER, *conf, err, sizeof err);
    if (h.consumer == nullptr) return Status(Code::kInvalidArgument, err);
  }
  bool delivery_failed = false;
  {
    auto made = ledger::NewTransactionalProducerConf(options.ledger.bootstrap,
                                                     group + "." + options.output_topic);
    if (!made.ok()) return made.status();
    rd_kafka_conf_t* conf = *made;
    rd_kafka_conf_set_dr_msg_cb(conf, OnDelivery);
    rd_kafka_conf_set_opaque(conf, &delivery_failed);
    h.producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (h.producer == nullptr) return Status(Code::kInvalidArgument, err);
  }
  // Fences an earlier instance of this consumer and aborts what it had not committed.
  ADM_RETURN_IF_ERROR(KafkaTxnStatus(rd_kafka_init_transactions(h.producer, options.operation_timeout_ms),
                               "init_transactions"));

  // Where the last committed transaction left the input.
  rd_kafka_topic_partition_list_t* parts = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(parts, options.ledger.topic.c_str(), 0);
  rd_kafka_resp_err_t e = rd_kafka_committed(h.consumer, parts, options.operation_timeout_ms);
  int64_t committed = parts->elems[0].offset;
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
    rd_kafka_topic_partition_list_destroy(parts);
    return Status(Code::kUnavailable, std::string("reading the committed position of group ") +
                                          group + ": " + rd_kafka_err2str(e));
  }
  if (committed < 0) committed = 0;
  parts->elems[0].offset = 0;  // the fold is rebuilt from the first record
  e = rd_kafka_assign(h.consumer, parts);
  rd_kafka_topic_partition_list_destroy(parts);
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Status(Code::kUnavailable, std::string("assign: ") + rd_kafka_err2str(e));
  }

  UsageFold fold;
  ledger::Head head;
  StreamStats stats;
  size_t published_upto = 0;  // closed intervals already published (or before `committed`)
  int64_t next_offset = 0;
  std::vector<std::pair<UsageRecord, uint64_t>> pending;
  size_t pending_events = 0;
  auto flush = [&]() -> Status {
    if (pending_events == 0 && pending.empty()) return Status::Ok();
    ADM_RETURN_IF_ERROR(KafkaTxnStatus(rd_kafka_begin_transaction(h.producer), "begin_transaction"));
    for (const auto& [r, seq] : pending) {
      for (;;) {
        rd_kafka_resp_err_t pe = rd_kafka_producev(
            h.producer, RD_KAFKA_V_TOPIC(options.output_topic.c_str()),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_KEY(r.id.data(), r.id.size()),
            RD_KAFKA_V_VALUE(const_cast<char*>(r.json.data()), r.json.size()), RD_KAFKA_V_END);
        if (pe == RD_KAFKA_RESP_ERR_NO_ERROR) break;
        if (pe != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
          return Status(Code::kUnavailable, std::string("produce: ") + rd_kafka_err2str(pe));
        }
        rd_kafka_poll(h.producer, 10);
      }
    }
    rd_kafka_topic_partition_list_t* position = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(position, options.ledger.topic.c_str(), 0)->offset =
        next_offset;
    rd_kafka_consumer_group_metadata_t* meta = rd_kafka_consumer_group_metadata(h.consumer);
    Status sent = KafkaTxnStatus(rd_kafka_send_offsets_to_transaction(h.producer, position, meta,
                                                                options.operation_timeout_ms),
                           "send_offsets_to_transaction");
    rd_kafka_consumer_group_metadata_destroy(meta);
    rd_kafka_topic_partition_list_destroy(position);
    ADM_RETURN_IF_ERROR(sent);
    ++stats.transactions;
    if (options.drill) options.drill(stats.transactions);
    ADM_RETURN_IF_ERROR(KafkaTxnStatus(
        rd_kafka_commit_transaction(h.producer, options.operation_timeout_ms), "commit"));
    if (delivery_failed) return Status(Code::kUnavailable, "a usage record was not delivered");
    stats.records_published += pending.size();
    pending.clear();
    pending_events = 0;
    return Status::Ok();
  };

  auto idle_since = std::chrono::steady_clock::now();
  bool at_end = false;
  for (;;) {
    if (options.stop && options.stop()) break;
    rd_kafka_message_t* m = rd_kafka_consumer_poll(h.consumer, kPollMs);
    if (m == nullptr) {
      ADM_RETURN_IF_ERROR(flush());
      if (at_end && options.until_end) break;
      if (std::chrono::steady_clock::now() - idle_since >
          std::chrono::milliseconds(options.operation_timeout_ms) && options.until_end) {
        return Status(Code::kUnavailable, "reading the ledger topic: nothing received");
      }
      continue;
    }
    std::unique_ptr<rd_kafka_message_t, void (*)(rd_kafka_message_t*)> msg(
        m, rd_kafka_message_destroy);
    idle_since = std::chrono::steady_clock::now();
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      if (m->offset > next_offset) next_offset = m->offset;
      at_end = next_offset >= committed;
      ADM_RETURN_IF_ERROR(flush());
      if (at_end && options.until_end) break;
      continue;
    }
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return Status(Code::kUnavailable, std::string("reading the ledger topic: ") +
                                            rd_kafka_message_errstr(m));
    }
    at_end = false;
    const ledger::KafkaRecordView view = ledger::ViewKafkaMessage(m);
    auto checked = ledger::CheckKafkaRecord(view, head, -1);
    if (!checked.ok()) return checked.status();
    next_offset = m->offset + 1;
    if (checked->kind == ledger::CheckedRecord::Kind::kRepeat) continue;
    head = ledger::Head{checked->sequence, checked->hash, checked->recorded_at_ns};
    auto decoded = schema::DecodeEvent(view.value);
    if (!decoded.ok()) return decoded.status();
    fold.Apply(checked->sequence, decoded->root());
    if (m->offset < committed) {
      // Published before: only the fold is rebuilt.
      ++stats.events_rebuilt;
      published_upto = fold.closed().size();
      continue;
    }
    ++stats.events_folded;
    ++pending_events;
    for (; published_upto < fold.closed().size(); ++published_upto) {
      for (UsageRecord& r :
           RecordsOf(fold.closed()[published_upto], options.bucket_ms, checked->sequence)) {
        pending.emplace_back(std::move(r), checked->sequence);
      }
    }
    if (pending_events >= std::min(kEventsPerTransactionMax, options.events_per_transaction)) {
      ADM_RETURN_IF_ERROR(flush());
    }
  }
  ADM_RETURN_IF_ERROR(flush());
  return stats;
}

}  // namespace admission::consumers::billing

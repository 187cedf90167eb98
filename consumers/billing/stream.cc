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

namespace {

// One run of the billing stream: a consumer of the ledger topic and a transactional producer of
// usage records, each transaction also committing the input position it reached.
class BillingStream {
 public:
  explicit BillingStream(const StreamOptions& options)
      : options_(options),
        group_(options.group.empty() ? "admission-billing." + options.ledger.topic
                                     : options.group) {}
  BillingStream(const BillingStream&) = delete;
  BillingStream& operator=(const BillingStream&) = delete;

  Result<StreamStats> Run() {
    const ledger::KafkaAddress output{options_.ledger.bootstrap, options_.output_topic};
    ADM_RETURN_IF_ERROR(ledger::CreateKafkaTopic(output, -1, options_.operation_timeout_ms));
    ADM_RETURN_IF_ERROR(OpenClients());
    ADM_RETURN_IF_ERROR(AssignFromFirstRecord());
    auto idle_since = std::chrono::steady_clock::now();
    bool at_end = false;
    for (;;) {
      if (options_.stop && options_.stop()) break;
      rd_kafka_message_t* m = rd_kafka_consumer_poll(h_.consumer, kPollMs);
      if (m == nullptr) {
        ADM_RETURN_IF_ERROR(Flush());
        if (at_end && options_.until_end) break;
        if (std::chrono::steady_clock::now() - idle_since >
            std::chrono::milliseconds(options_.operation_timeout_ms) && options_.until_end) {
          return Status(Code::kUnavailable, "reading the ledger topic: nothing received");
        }
        continue;
      }
      std::unique_ptr<rd_kafka_message_t, void (*)(rd_kafka_message_t*)> msg(
          m, rd_kafka_message_destroy);
      idle_since = std::chrono::steady_clock::now();
      if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        if (m->offset > next_offset_) next_offset_ = m->offset;
        at_end = next_offset_ >= committed_;
        ADM_RETURN_IF_ERROR(Flush());
        if (at_end && options_.until_end) break;
        continue;
      }
      if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        return Status(Code::kUnavailable, std::string("reading the ledger topic: ") +
                                              rd_kafka_message_errstr(m));
      }
      at_end = false;
      ADM_RETURN_IF_ERROR(Fold(m));
    }
    ADM_RETURN_IF_ERROR(Flush());
    return stats_;
  }

 private:
  // The consumer of the ledger topic and the transactional producer of usage records.
  Status OpenClients() {
    char err[512];
    {
      auto conf = ledger::NewKafkaConf({{"bootstrap.servers", options_.ledger.bootstrap},
                                        {"group.id", group_},
                                        {"isolation.level", "read_committed"},
                                        {"enable.auto.commit", "false"},
                                        {"enable.auto.offset.store", "false"},
                                        {"enable.partition.eof", "true"},
                                        {"auto.offset.reset", "earliest"},
                                        {"fetch.wait.max.ms", "50"},
                                        {"log_level", "3"}});
      if (!conf.ok()) return conf.status();
      h_.consumer = rd_kafka_new(RD_KAFKA_CONSUMER, *conf, err, sizeof err);
      if (h_.consumer == nullptr) return Status(Code::kInvalidArgument, err);
    }
    auto made = ledger::NewTransactionalProducerConf(options_.ledger.bootstrap,
                                                     group_ + "." + options_.output_topic);
    if (!made.ok()) return made.status();
    rd_kafka_conf_t* conf = *made;
    rd_kafka_conf_set_dr_msg_cb(conf, OnDelivery);
    rd_kafka_conf_set_opaque(conf, &delivery_failed_);
    h_.producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (h_.producer == nullptr) return Status(Code::kInvalidArgument, err);
    // Fences an earlier instance of this consumer and aborts what it had not committed.
    return KafkaTxnStatus(
        rd_kafka_init_transactions(h_.producer, options_.operation_timeout_ms),
        "init_transactions");
  }

  // Reads where the last committed transaction left the input (committed_), and assigns the
  // partition from its first record: the fold is rebuilt from there.
  Status AssignFromFirstRecord() {
    rd_kafka_topic_partition_list_t* parts = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(parts, options_.ledger.topic.c_str(), 0);
    rd_kafka_resp_err_t e = rd_kafka_committed(h_.consumer, parts, options_.operation_timeout_ms);
    committed_ = parts->elems[0].offset;
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      rd_kafka_topic_partition_list_destroy(parts);
      return Status(Code::kUnavailable, std::string("reading the committed position of group ") +
                                            group_ + ": " + rd_kafka_err2str(e));
    }
    if (committed_ < 0) committed_ = 0;
    parts->elems[0].offset = 0;  // the fold is rebuilt from the first record
    e = rd_kafka_assign(h_.consumer, parts);
    rd_kafka_topic_partition_list_destroy(parts);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return Status(Code::kUnavailable, std::string("assign: ") + rd_kafka_err2str(e));
    }
    return Status::Ok();
  }

  // Folds one ledger record; past the committed position, its closed intervals' records wait
  // in pending_ for the next transaction.
  Status Fold(rd_kafka_message_t* m) {
    const ledger::KafkaRecordView view = ledger::ViewKafkaMessage(m);
    auto checked = ledger::CheckKafkaRecord(view, head_, -1);
    if (!checked.ok()) return checked.status();
    next_offset_ = m->offset + 1;
    if (checked->kind == ledger::CheckedRecord::Kind::kRepeat) return Status::Ok();
    head_ = ledger::Head{checked->sequence, checked->hash, checked->recorded_at_ns};
    auto decoded = schema::DecodeEvent(view.value);
    if (!decoded.ok()) return decoded.status();
    fold_.Apply(checked->sequence, decoded->root());
    if (m->offset < committed_) {
      // Published before: only the fold is rebuilt.
      ++stats_.events_rebuilt;
      published_upto_ = fold_.closed().size();
      return Status::Ok();
    }
    ++stats_.events_folded;
    ++pending_events_;
    for (; published_upto_ < fold_.closed().size(); ++published_upto_) {
      for (UsageRecord& r :
           RecordsOf(fold_.closed()[published_upto_], options_.bucket_ms, checked->sequence)) {
        pending_.emplace_back(std::move(r), checked->sequence);
      }
    }
    if (pending_events_ >= std::min(kEventsPerTransactionMax, options_.events_per_transaction)) {
      return Flush();
    }
    return Status::Ok();
  }

  // Publishes pending_ in one transaction that also commits the input position next_offset_.
  Status Flush() {
    if (pending_events_ == 0 && pending_.empty()) return Status::Ok();
    ADM_RETURN_IF_ERROR(
        KafkaTxnStatus(rd_kafka_begin_transaction(h_.producer), "begin_transaction"));
    for (const auto& [r, seq] : pending_) ADM_RETURN_IF_ERROR(Produce(r));
    rd_kafka_topic_partition_list_t* position = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(position, options_.ledger.topic.c_str(), 0)->offset =
        next_offset_;
    rd_kafka_consumer_group_metadata_t* meta = rd_kafka_consumer_group_metadata(h_.consumer);
    Status sent = KafkaTxnStatus(rd_kafka_send_offsets_to_transaction(
                                     h_.producer, position, meta, options_.operation_timeout_ms),
                                 "send_offsets_to_transaction");
    rd_kafka_consumer_group_metadata_destroy(meta);
    rd_kafka_topic_partition_list_destroy(position);
    ADM_RETURN_IF_ERROR(sent);
    ++stats_.transactions;
    if (options_.drill) options_.drill(stats_.transactions);
    ADM_RETURN_IF_ERROR(KafkaTxnStatus(
        rd_kafka_commit_transaction(h_.producer, options_.operation_timeout_ms), "commit"));
    if (delivery_failed_) return Status(Code::kUnavailable, "a usage record was not delivered");
    stats_.records_published += pending_.size();
    pending_.clear();
    pending_events_ = 0;
    return Status::Ok();
  }

  // Produces one record, waiting while the producer's queue is full.
  Status Produce(const UsageRecord& r) {
    for (;;) {
      rd_kafka_resp_err_t pe = rd_kafka_producev(
          h_.producer, RD_KAFKA_V_TOPIC(options_.output_topic.c_str()),
          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
          RD_KAFKA_V_KEY(r.id.data(), r.id.size()),
          RD_KAFKA_V_VALUE(const_cast<char*>(r.json.data()), r.json.size()), RD_KAFKA_V_END);
      if (pe == RD_KAFKA_RESP_ERR_NO_ERROR) return Status::Ok();
      if (pe != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        return Status(Code::kUnavailable, std::string("produce: ") + rd_kafka_err2str(pe));
      }
      rd_kafka_poll(h_.producer, 10);
    }
  }

  const StreamOptions& options_;
  const std::string group_;
  Handles h_;
  bool delivery_failed_ = false;  // set by OnDelivery, on the producer's poll
  int64_t committed_ = 0;         // the input position of the last committed transaction
  UsageFold fold_;
  ledger::Head head_;
  StreamStats stats_;
  size_t published_upto_ = 0;  // closed intervals already published (or before committed_)
  int64_t next_offset_ = 0;
  std::vector<std::pair<UsageRecord, uint64_t>> pending_;
  size_t pending_events_ = 0;
};

}  // namespace

Result<StreamStats> RunBillingStream(const StreamOptions& options) {
  BillingStream stream(options);
  return stream.Run();
}

}  // namespace admission::consumers::billing

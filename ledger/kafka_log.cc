#include "ledger/kafka_log.h"

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include "ledger/kafka_client.h"
#include "ledger/kafka_record.h"
#include "ledger/private_files.h"

namespace admission::ledger {

namespace {

using Clock = std::chrono::steady_clock;

// Local state keys (RocksDbLog extras, prefix 'k').
constexpr const char* kStateTopicKey = "kt";       // the topic this state copies
constexpr const char* kStateNextOffsetKey = "kn";  // the offset to read next
std::string OffsetKey(Sequence sequence) {
  std::string key = "ko";
  for (int shift = 56; shift >= 0; shift -= 8) key.push_back(static_cast<char>(sequence >> shift));
  return key;
}
std::string EncodeOffset(int64_t offset) {
  std::string out;
  const uint64_t v = static_cast<uint64_t>(offset);
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>(v >> shift));
  return out;
}
std::optional<int64_t> DecodeOffset(const std::string& bytes) {
  if (bytes.size() != 8) return std::nullopt;
  uint64_t v = 0;
  for (char c : bytes) v = (v << 8) | static_cast<uint8_t>(c);
  return static_cast<int64_t>(v);
}

// How long one poll of the consumer or producer waits before the caller checks its deadline.
constexpr int kPollSliceMs = 100;
constexpr int kQueueFullWaitMs = 10;
constexpr int kProducerRetryBackoffMs = 5;
// How long a read of the tail waits at an end short of the high watermark (docs/kafka.md).
constexpr int kTailSettleMs = 1000;

struct ConfDeleter {
  void operator()(rd_kafka_conf_t* conf) const { rd_kafka_conf_destroy(conf); }
};
using Conf = std::unique_ptr<rd_kafka_conf_t, ConfDeleter>;
struct HandleDeleter {
  void operator()(rd_kafka_t* handle) const { rd_kafka_destroy(handle); }
};
using Handle = std::unique_ptr<rd_kafka_t, HandleDeleter>;
struct ErrorDeleter {
  void operator()(rd_kafka_error_t* error) const { rd_kafka_error_destroy(error); }
};
using Error = std::unique_ptr<rd_kafka_error_t, ErrorDeleter>;
struct MessageDeleter {
  void operator()(rd_kafka_message_t* message) const { rd_kafka_message_destroy(message); }
};
using Message = std::unique_ptr<rd_kafka_message_t, MessageDeleter>;
struct QueueDeleter {
  void operator()(rd_kafka_queue_t* queue) const { rd_kafka_queue_destroy(queue); }
};
using Queue = std::unique_ptr<rd_kafka_queue_t, QueueDeleter>;
struct EventDeleter {
  void operator()(rd_kafka_event_t* event) const { rd_kafka_event_destroy(event); }
};
using Event = std::unique_ptr<rd_kafka_event_t, EventDeleter>;
struct OptionsDeleter {
  void operator()(rd_kafka_AdminOptions_t* options) const { rd_kafka_AdminOptions_destroy(options); }
};
using AdminOptions = std::unique_ptr<rd_kafka_AdminOptions_t, OptionsDeleter>;
struct PartitionsDeleter {
  void operator()(rd_kafka_topic_partition_list_t* list) const {
    rd_kafka_topic_partition_list_destroy(list);
  }
};
using Partitions = std::unique_ptr<rd_kafka_topic_partition_list_t, PartitionsDeleter>;


Result<Conf> BaseConf(const std::string& bootstrap,
                      const std::vector<std::pair<std::string, std::string>>& settings,
                      const std::vector<std::pair<std::string, std::string>>& extra) {
  Conf conf(rd_kafka_conf_new());
  ADM_RETURN_IF_ERROR(SetKafkaConf(conf.get(), "bootstrap.servers", bootstrap));
  // librdkafka logs to stderr by default; its errors reach the caller as results instead.
  ADM_RETURN_IF_ERROR(SetKafkaConf(conf.get(), "log_level", "3"));
  for (const auto& [name, value] : settings) ADM_RETURN_IF_ERROR(SetKafkaConf(conf.get(), name, value));
  for (const auto& [name, value] : extra) ADM_RETURN_IF_ERROR(SetKafkaConf(conf.get(), name, value));
  return conf;
}

Result<Handle> NewHandle(rd_kafka_type_t type, Conf conf) {
  char error_text[512];
  rd_kafka_t* handle = rd_kafka_new(type, conf.get(), error_text, sizeof(error_text));
  if (handle == nullptr) {
    return Status(Code::kInvalidArgument, std::string("creating a Kafka client: ") + error_text);
  }
  conf.release();  // rd_kafka_new owns it now
  return Handle(handle);
}

std::string ErrorText(const rd_kafka_error_t* error) {
  return std::string(rd_kafka_error_name(error)) + ": " + rd_kafka_error_string(error);
}

Code CodeOf(rd_kafka_resp_err_t err) {
  switch (err) {
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
    case RD_KAFKA_RESP_ERR__RESOLVE:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
    case RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NOT_COORDINATOR:
      return Code::kUnavailable;
    default:
      return Code::kIoError;
  }
}

bool ValidTopicName(std::string_view topic) {
  if (topic.empty() || topic.size() > 249 || topic == "." || topic == "..") return false;
  for (char c : topic) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// A client for metadata and admin requests only.
Result<Handle> AdminHandle(const KafkaAddress& address) {
  auto conf = BaseConf(address.bootstrap, {}, {});
  if (!conf.ok()) return conf.status();
  return NewHandle(RD_KAFKA_PRODUCER, std::move(*conf));
}

// Waits for the one result event of an admin request on `queue`.
Result<Event> AdminResult(rd_kafka_queue_t* queue, int timeout_ms, const std::string& what) {
  Event event(rd_kafka_queue_poll(queue, timeout_ms + 1000));
  if (!event) {
    return Status(Code::kUnavailable, what + ": no answer from the broker in " +
                                          std::to_string(timeout_ms) + " ms");
  }
  if (rd_kafka_event_error(event.get()) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Status(CodeOf(rd_kafka_event_error(event.get())),
                  what + ": " + rd_kafka_event_error_string(event.get()));
  }
  return event;
}

}  // namespace

bool IsKafkaLedger(std::string_view location) { return location.starts_with(kKafkaScheme); }

Result<KafkaAddress> ParseKafkaLedger(std::string_view location) {
  auto invalid = [&](const std::string& why) {
    return Status(Code::kInvalidArgument, "ledger '" + std::string(location) +
                                              "': " + why +
                                              " (expected kafka://HOST:PORT/TOPIC)");
  };
  if (!IsKafkaLedger(location)) return invalid("not a kafka:// address");
  std::string_view rest = location.substr(kKafkaScheme.size());
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos) return invalid("no topic");
  KafkaAddress address{std::string(rest.substr(0, slash)), std::string(rest.substr(slash + 1))};
  if (address.bootstrap.empty()) return invalid("no HOST:PORT");
  size_t start = 0;
  while (start <= address.bootstrap.size()) {
    size_t end = address.bootstrap.find(',', start);
    if (end == std::string::npos) end = address.bootstrap.size();
    std::string_view server(address.bootstrap.data() + start, end - start);
    const size_t colon = server.rfind(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == server.size()) {
      return invalid("broker '" + std::string(server) + "' is not HOST:PORT");
    }
    for (char c : server.substr(colon + 1)) {
      if (c < '0' || c > '9') return invalid("broker '" + std::string(server) + "' has no port");
    }
    start = end + 1;
  }
  if (address.topic.empty()) return invalid("no topic");
  if (!ValidTopicName(address.topic)) {
    return invalid("topic '" + address.topic +
                   "' is not a Kafka topic name (1-249 of a-z A-Z 0-9 . _ -)");
  }
  return address;
}

Result<std::optional<KafkaTopicSettings>> DescribeKafkaTopic(const KafkaAddress& address,
                                                              int timeout_ms) {
  auto handle = AdminHandle(address);
  if (!handle.ok()) return handle.status();
  rd_kafka_t* rk = handle->get();
  // All topics' metadata: asking for one topic by name may create it on a broker with
  // auto.create.topics.enable.
  const rd_kafka_metadata_t* metadata = nullptr;
  rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 1, nullptr, &metadata, timeout_ms);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Status(CodeOf(err), "reading the metadata of " + address.bootstrap + ": " +
                                   rd_kafka_err2str(err));
  }
  std::optional<KafkaTopicSettings> settings;
  for (int i = 0; i < metadata->topic_cnt; ++i) {
    if (address.topic == metadata->topics[i].topic &&
        metadata->topics[i].err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      settings.emplace();
      settings->partitions = metadata->topics[i].partition_cnt;
    }
  }
  rd_kafka_metadata_destroy(metadata);
  if (!settings) return settings;

  Queue queue(rd_kafka_queue_new(rk));
  AdminOptions options(rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS));
  char error_text[512];
  rd_kafka_AdminOptions_set_request_timeout(options.get(), timeout_ms, error_text,
                                            sizeof(error_text));
  rd_kafka_ConfigResource_t* resource =
      rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, address.topic.c_str());
  rd_kafka_DescribeConfigs(rk, &resource, 1, options.get(), queue.get());
  rd_kafka_ConfigResource_destroy(resource);
  const std::string what = "describing topic " + address.topic;
  auto event = AdminResult(queue.get(), timeout_ms, what);
  if (!event.ok()) return event.status();
  const rd_kafka_DescribeConfigs_result_t* result =
      rd_kafka_event_DescribeConfigs_result(event->get());
  size_t count = 0;
  const rd_kafka_ConfigResource_t** resources =
      rd_kafka_DescribeConfigs_result_resources(result, &count);
  if (count != 1) return Status(Code::kIoError, what + ": " + std::to_string(count) + " results");
  if (rd_kafka_ConfigResource_error(resources[0]) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Status(CodeOf(rd_kafka_ConfigResource_error(resources[0])),
                  what + ": " + rd_kafka_ConfigResource_error_string(resources[0]));
  }
  size_t entry_count = 0;
  const rd_kafka_ConfigEntry_t** entries =
      rd_kafka_ConfigResource_configs(resources[0], &entry_count);
  for (size_t i = 0; i < entry_count; ++i) {
    const std::string name = rd_kafka_ConfigEntry_name(entries[i]);
    const char* value = rd_kafka_ConfigEntry_value(entries[i]);
    std::string text = value != nullptr ? value : "";
    if (name == "cleanup.policy") settings->cleanup_policy = text;
    if (name == "retention.ms") settings->retention_ms = text;
    if (name == "retention.bytes") settings->retention_bytes = text;
  }
  return settings;
}

Status CreateKafkaTopic(const KafkaAddress& address, int replication_factor, int timeout_ms) {
  auto handle = AdminHandle(address);
  if (!handle.ok()) return handle.status();
  rd_kafka_t* rk = handle->get();
  char error_text[512];
  rd_kafka_NewTopic_t* topic = rd_kafka_NewTopic_new(address.topic.c_str(), 1, replication_factor,
                                                     error_text, sizeof(error_text));
  if (topic == nullptr) {
    return Status(Code::kInvalidArgument,
                  "creating topic " + address.topic + ": " + std::string(error_text));
  }
  rd_kafka_NewTopic_set_config(topic, "cleanup.policy", "delete");
  rd_kafka_NewTopic_set_config(topic, "retention.ms", "-1");
  rd_kafka_NewTopic_set_config(topic, "retention.bytes", "-1");
  Queue queue(rd_kafka_queue_new(rk));
  AdminOptions options(rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS));
  rd_kafka_AdminOptions_set_request_timeout(options.get(), timeout_ms, error_text,
                                            sizeof(error_text));
  rd_kafka_AdminOptions_set_operation_timeout(options.get(), timeout_ms, error_text,
                                              sizeof(error_text));
  rd_kafka_CreateTopics(rk, &topic, 1, options.get(), queue.get());
  rd_kafka_NewTopic_destroy(topic);
  const std::string what = "creating topic " + address.topic;
  auto event = AdminResult(queue.get(), timeout_ms, what);
  if (!event.ok()) return event.status();
  const rd_kafka_CreateTopics_result_t* result = rd_kafka_event_CreateTopics_result(event->get());
  size_t count = 0;
  const rd_kafka_topic_result_t** topics = rd_kafka_CreateTopics_result_topics(result, &count);
  if (count != 1) return Status(Code::kIoError, what + ": " + std::to_string(count) + " results");
  const rd_kafka_resp_err_t err = rd_kafka_topic_result_error(topics[0]);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR && err != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
    return Status(CodeOf(err), what + ": " + rd_kafka_topic_result_error_string(topics[0]));
  }
  // The controller has the topic; the broker's metadata may show it a moment later (seen under
  // load): wait until it does, so that the caller's next look finds it.
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    auto described = DescribeKafkaTopic(address, timeout_ms);
    if (described.ok() && described->has_value()) return Status::Ok();
    if (Clock::now() >= deadline) {
      return Status(Code::kUnavailable, what + ": created, but the broker's metadata did not "
                                               "show it within " + std::to_string(timeout_ms) +
                                               " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(kPollSliceMs));
  }
}

Status CheckKafkaTopicSettings(const KafkaAddress& address, const KafkaTopicSettings& settings) {
  const std::string topic = "topic " + address.topic + " on " + address.bootstrap;
  if (settings.cleanup_policy != "delete") {
    return Status(Code::kInvalidArgument,
                  topic + " has cleanup.policy=" + settings.cleanup_policy +
                      ": a ledger topic needs cleanup.policy=delete (compaction would drop "
                      "events of the audit record)");
  }
  if (settings.retention_ms != "-1") {
    return Status(Code::kInvalidArgument,
                  topic + " has retention.ms=" + settings.retention_ms +
                      ": a ledger topic needs retention.ms=-1 (expiry would delete the audit "
                      "record)");
  }
  if (!settings.retention_bytes.empty() && settings.retention_bytes != "-1") {
    return Status(Code::kInvalidArgument,
                  topic + " has retention.bytes=" + settings.retention_bytes +
                      ": a ledger topic needs retention.bytes=-1 (a size limit would delete "
                      "the oldest events)");
  }
  if (settings.partitions != 1) {
    return Status(Code::kInvalidArgument,
                  topic + " has " + std::to_string(settings.partitions) +
                      " partitions: a ledger is one partition (one sequencer)");
  }
  return Status::Ok();
}

namespace {

void DeliveryCallback(rd_kafka_t*, const rd_kafka_message_t* message, void* opaque) {
  static_cast<KafkaLog*>(opaque)->OnDelivery(reinterpret_cast<intptr_t>(message->_private),
                                             message->err, message->offset);
}

}  // namespace

KafkaLog::KafkaLog(KafkaLogOptions options, std::unique_ptr<RocksDbLog> mirror)
    : options_(std::move(options)), mirror_(std::move(mirror)) {}

KafkaLog::~KafkaLog() {
  DestroyProducer();
  if (consumer_ != nullptr) {
    rd_kafka_consumer_close(consumer_);
    rd_kafka_destroy(consumer_);
  }
}

Result<std::unique_ptr<KafkaLog>> KafkaLog::Open(const KafkaLogOptions& options) {
  if (options.state_dir.empty()) {
    return Status(Code::kInvalidArgument, "a Kafka ledger needs a state folder (--state)");
  }
  if (!ValidTopicName(options.address.topic)) {
    return Status(Code::kInvalidArgument, "'" + options.address.topic + "' is not a topic name");
  }
  // The local copy of the ledger and its snapshots: private, as an embedded ledger.
  if (Status made = CreatePrivateDirectory(options.state_dir); !made.ok()) {
    return Status(Code::kIoError, "creating the state folder: " + made.message());
  }
  RocksDbLogOptions mirror_options;
  // What a crash loses of the copy is read again from the topic: the offset to read next is
  // written in the same WriteBatch as the events it follows.
  mirror_options.sync = false;
  auto mirror = RocksDbLog::Open(options.state_dir + "/mirror", mirror_options);
  if (!mirror.ok()) return mirror.status();
  auto topic = (*mirror)->GetExtra(kStateTopicKey);
  if (!topic.ok()) return topic.status();
  if (topic->has_value() && **topic != options.address.topic) {
    return Status(Code::kInvalidArgument, "state folder " + options.state_dir +
                                              " holds a copy of topic " + **topic + ", not " +
                                              options.address.topic);
  }
  std::unique_ptr<KafkaLog> log(new KafkaLog(options, std::move(*mirror)));
  if (!topic->has_value()) {
    const std::pair<std::string, std::string> extra[] = {{kStateTopicKey, options.address.topic}};
    ADM_RETURN_IF_ERROR(log->mirror_->Ingest({}, Head{}, extra));
  }
  ADM_RETURN_IF_ERROR(log->Start());
  return log;
}

Status KafkaLog::Start() {
  auto settings = DescribeKafkaTopic(options_.address, options_.operation_timeout_ms);
  if (!settings.ok()) return settings.status();
  if (!settings->has_value() && options_.create_topic) {
    ADM_RETURN_IF_ERROR(CreateKafkaTopic(options_.address, options_.replication_factor,
                                         options_.operation_timeout_ms));
    settings = DescribeKafkaTopic(options_.address, options_.operation_timeout_ms);
    if (!settings.ok()) return settings.status();
  }
  if (!settings->has_value()) {
    return Status(Code::kNotFound, "no topic " + options_.address.topic + " on " +
                                       options_.address.bootstrap +
                                       (options_.writer ? " (--create-topic creates it)" : ""));
  }
  // A reader checks them too, only to refuse becoming the writer of a topic that would lose
  // events.
  topic_settings_ = CheckKafkaTopicSettings(options_.address, **settings);
  if (options_.writer) ADM_RETURN_IF_ERROR(topic_settings_);

  std::random_device random;
  auto conf = BaseConf(options_.address.bootstrap,
                       {{"group.id", "admission-ledger-reader." + std::to_string(random())},
                        {"isolation.level", "read_committed"},
                        {"enable.partition.eof", "true"},
                        {"enable.auto.commit", "false"},
                        {"enable.auto.offset.store", "false"},
                        {"auto.offset.reset", "earliest"},
                        // A read of the tail ends at the end of the partition: the broker's
                        // answer that nothing more is there should not wait long.
                        {"fetch.wait.max.ms", "50"},
                        {"allow.auto.create.topics", "false"}},
                       options_.client_config);
  if (!conf.ok()) return conf.status();
  auto consumer = NewHandle(RD_KAFKA_CONSUMER, std::move(*conf));
  if (!consumer.ok()) return consumer.status();
  consumer_ = consumer->release();

  std::lock_guard<std::mutex> lock(mu_);
  if (options_.writer) {
    ADM_RETURN_IF_ERROR(CreateProducer());
    writer_ = true;
  }
  auto head = CatchUpLocked();
  return head.ok() ? Status::Ok() : head.status();
}

Status KafkaLog::BecomeWriter() {
  std::lock_guard<std::mutex> lock(mu_);
  if (halted_) return *halted_;
  if (writer_) return Status::Ok();
  ADM_RETURN_IF_ERROR(topic_settings_);
  ADM_RETURN_IF_ERROR(CreateProducer());
  // Everything the earlier writer committed is in the topic now (its open transaction was
  // completed or aborted by init_transactions): read it before writing anything.
  auto head = CatchUpLocked();
  if (!head.ok()) {
    DestroyProducer();
    return head.status();
  }
  writer_ = true;
  return Status::Ok();
}

void KafkaLog::Demote() {
  std::lock_guard<std::mutex> lock(mu_);
  writer_ = false;
  DestroyProducer();
}

void KafkaLog::Halt(Status why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!halted_) (void)HaltLocked(std::move(why));
}

bool KafkaLog::writer() {
  std::lock_guard<std::mutex> lock(mu_);
  return writer_ && !halted_;
}

Status KafkaLog::CreateProducer() {
  const std::string id = options_.transactional_id.empty()
                             ? "admission-ledger." + options_.address.topic
                             : options_.transactional_id;
  const std::string txn_timeout = std::to_string(options_.transaction_timeout_ms);
  auto conf = BaseConf(options_.address.bootstrap,
                       {{"transactional.id", id},
                        {"enable.idempotence", "true"},
                        {"acks", "all"},
                        {"transaction.timeout.ms", txn_timeout},
                        // A record not delivered within the transaction's lifetime fails it.
                        {"message.timeout.ms", txn_timeout},
                        // commit_transaction flushes: no reason to hold records back.
                        {"linger.ms", "5"},
                        // Back-to-back transactions: the coordinator answers the next one's
                        // AddPartitionsToTxn with CONCURRENT_TRANSACTIONS until the last one's
                        // markers are written (a few ms); librdkafka 2.0.2 retries after
                        // retry.backoff.ms, 100 ms by default (docs/kafka.md, measured).
                        {"retry.backoff.ms", std::to_string(kProducerRetryBackoffMs)}},
                       options_.client_config);
  if (!conf.ok()) return conf.status();
  rd_kafka_conf_set_dr_msg_cb(conf->get(), DeliveryCallback);
  rd_kafka_conf_set_opaque(conf->get(), this);
  auto producer = NewHandle(RD_KAFKA_PRODUCER, std::move(*conf));
  if (!producer.ok()) return producer.status();
  producer_ = producer->release();
  // Fences every earlier producer with this id; completes or aborts its open transaction.
  const Clock::time_point deadline =
      Clock::now() + std::chrono::milliseconds(options_.operation_timeout_ms);
  for (;;) {
    Error error(rd_kafka_init_transactions(producer_, options_.operation_timeout_ms));
    if (!error) return Status::Ok();
    const bool retriable = rd_kafka_error_is_retriable(error.get());
    if (!retriable || Clock::now() >= deadline) {
      Status s(retriable ? Code::kUnavailable : Code::kIoError,
               "taking the ledger's transactional id " + id + ": " + ErrorText(error.get()));
      DestroyProducer();
      return s;
    }
  }
}

void KafkaLog::DestroyProducer() {
  if (producer_ == nullptr) return;
  // Whatever is still queued belongs to a transaction this producer will never commit.
  rd_kafka_purge(producer_, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
  rd_kafka_poll(producer_, 0);
  rd_kafka_destroy(producer_);
  producer_ = nullptr;
}

void KafkaLog::OnDelivery(int64_t index, int error, int64_t offset) {
  // Runs inside rd_kafka_poll or commit_transaction, on the thread that holds mu_.
  if (index < 0 || static_cast<size_t>(index) >= delivered_.size()) return;
  if (delivered_[index] == -1 && delivery_errors_[index] == 0) ++deliveries_;
  delivered_[index] = error == 0 ? offset : -1;
  delivery_errors_[index] = error;
}

KafkaLog::TxnOutcome KafkaLog::Transact(const std::vector<StoredEvent>& events,
                                        std::vector<int64_t>* offsets, Status* why) {
  delivered_.assign(events.size(), -1);
  delivery_errors_.assign(events.size(), 0);
  deliveries_ = 0;
  auto classify = [&](rd_kafka_error_t* raw, const std::string& what) {
    Error error(raw);
    *why = Status(Code::kUnavailable, what + ": " + ErrorText(error.get()));
    if (rd_kafka_error_is_fatal(error.get())) return TxnOutcome::kFatal;
    if (rd_kafka_error_txn_requires_abort(error.get())) return TxnOutcome::kAbortable;
    if (rd_kafka_error_is_retriable(error.get())) return TxnOutcome::kAmbiguous;
    return TxnOutcome::kFatal;  // neither flag: treat as fatal (librdkafka's advice)
  };
  if (rd_kafka_error_t* error = rd_kafka_begin_transaction(producer_)) {
    return classify(error, "beginning a transaction");
  }
  ++transactions_begun_;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::milliseconds(options_.operation_timeout_ms);
  // Each record's headers: its sequence and the chain value after it (stored bytes, prevHash).
  std::vector<KafkaRecordHeaders> headers;
  headers.reserve(events.size());
  for (const StoredEvent& e : events) {
    Result<schema::DecodedEvent> decoded = schema::DecodeEvent(e.bytes);
    ADM_CHECK(decoded.ok(), "sequenced event %lu does not decode",
              static_cast<unsigned long>(e.sequence));
    headers.push_back(MakeKafkaRecordHeaders(
        e.sequence,
        schema::ChainHash(schema::HashFromData(decoded->root().getPrevHash()), e.bytes)));
  }
  for (size_t i = 0; i < events.size(); ++i) {
    const KafkaRecordHeaders& h = headers[i];
    for (;;) {
      const rd_kafka_resp_err_t err = rd_kafka_producev(
          producer_, RD_KAFKA_V_TOPIC(options_.address.topic.c_str()),
          RD_KAFKA_V_PARTITION(kKafkaLedgerPartition), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
          RD_KAFKA_V_VALUE(const_cast<char*>(events[i].bytes.data()), events[i].bytes.size()),
          RD_KAFKA_V_HEADER(kKafkaFormatHeader, h.format.data(),
                            static_cast<ssize_t>(h.format.size())),
          RD_KAFKA_V_HEADER(kKafkaSequenceHeader, h.sequence.data(),
                            static_cast<ssize_t>(h.sequence.size())),
          RD_KAFKA_V_HEADER(kKafkaHashHeader, h.hash.data(), static_cast<ssize_t>(h.hash.size())),
          RD_KAFKA_V_OPAQUE(reinterpret_cast<void*>(static_cast<intptr_t>(i))), RD_KAFKA_V_END);
      if (err == RD_KAFKA_RESP_ERR_NO_ERROR) break;
      if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL && Clock::now() < deadline) {
        rd_kafka_poll(producer_, kQueueFullWaitMs);
        continue;
      }
      if (err == RD_KAFKA_RESP_ERR__FATAL || err == RD_KAFKA_RESP_ERR__FENCED) {
        char reason[512];
        rd_kafka_fatal_error(producer_, reason, sizeof(reason));
        *why = Status(Code::kUnavailable, std::string("producing: ") + reason);
        return TxnOutcome::kFatal;
      }
      *why = Status(Code::kUnavailable, std::string("producing: ") + rd_kafka_err2str(err));
      return TxnOutcome::kAbortable;
    }
  }
  if (options_.drill) {
    // The records on the broker before the drill acts: "between produce and commit".
    rd_kafka_flush(producer_, options_.operation_timeout_ms);
    if (options_.drill("abortable", transactions_begun_)) {
      *why = Status(Code::kUnavailable, "drill: an abortable error after producing");
      return TxnOutcome::kAbortable;
    }
    if (options_.drill("produced", transactions_begun_)) {
      Error aborted(rd_kafka_abort_transaction(producer_, options_.operation_timeout_ms));
      *why = Status(Code::kUnavailable, "drill: the outcome made unknown before the commit");
      return TxnOutcome::kAmbiguous;
    }
    (void)options_.drill("committing", transactions_begun_);
  }
  if (rd_kafka_error_t* error =
          rd_kafka_commit_transaction(producer_, options_.operation_timeout_ms)) {
    return classify(error, "committing the transaction");
  }
  if (options_.drill && options_.drill("committed", transactions_begun_)) {
    *why = Status(Code::kUnavailable, "drill: the outcome of a commit made unknown");
    return TxnOutcome::kAmbiguous;
  }
  // The commit flushed every record, so every delivery report is in; serve any still queued.
  while (deliveries_ < events.size() && Clock::now() < deadline) {
    rd_kafka_poll(producer_, kPollSliceMs);
  }
  for (size_t i = 0; i < events.size(); ++i) {
    if (delivered_[i] < 0) {
      // Committed, yet without an offset for this record: the local state cannot place it.
      // Re-read the tail (it holds the records) instead of guessing.
      *why = Status(Code::kUnavailable, "committed transaction without a delivery report for "
                                        "sequence " + std::to_string(events[i].sequence));
      return TxnOutcome::kAmbiguous;
    }
  }
  *offsets = delivered_;
  return TxnOutcome::kCommitted;
}

Result<AppendAck> KafkaLog::Append(std::span<const std::string> batch) {
  if (batch.empty() || batch.size() > kAppendBatchEventsMax) {
    return Status(Code::kInvalidArgument, "an append holds 1 to " +
                                              std::to_string(kAppendBatchEventsMax) +
                                              " events, not " + std::to_string(batch.size()));
  }
  CheckedBatch checked = CheckBatch(batch);
  if (checked.events.empty()) return checked.failure;
  std::lock_guard<std::mutex> lock(mu_);
  if (halted_) return *halted_;
  if (!writer_) {
    return Status(Code::kUnavailable, "this Kafka ledger is open for reading only");
  }
  const Head before = mirror_->GetHead();
  GroupKeys group_keys;
  KeyLookup lookup = [this](std::string_view key) { return mirror_->LookupKey(key); };
  AppendAck ack;
  PreparedAppend prepared;
  ADM_RETURN_IF_ERROR(SequenceBatch(batch, checked, before, group_keys, lookup, &ack, &prepared));
  if (prepared.events.empty()) return ack;
  std::vector<std::string> keys(prepared.events.size());
  for (const auto& [key, sequence] : prepared.index_entries) {
    keys[sequence - prepared.events.front().sequence] = key;
  }

  int aborts = 0;
  int recreations = 0;
  for (;;) {
    if (producer_ == nullptr) ADM_RETURN_IF_ERROR(CreateProducer());
    std::vector<int64_t> offsets;
    Status why;
    switch (Transact(prepared.events, &offsets, &why)) {
      case TxnOutcome::kCommitted: {
        ++stats_.transactions;
        ADM_RETURN_IF_ERROR(Ingest(prepared.events, keys, offsets, prepared.head,
                                   offsets.back() + 1));
        return ack;
      }
      case TxnOutcome::kAbortable: {
        ++stats_.aborted;
        Error error(rd_kafka_abort_transaction(producer_, options_.operation_timeout_ms));
        if (error && rd_kafka_error_is_fatal(error.get())) {
          return HaltLocked(Status(Code::kUnavailable,
                                   "the Kafka writer stops: aborting a transaction failed: " +
                                       ErrorText(error.get())));
        }
        if (!error && ++aborts <= kAbortRetriesMax) continue;
        [[fallthrough]];  // the abort's outcome is unknown too: start again as after a timeout
      }
      case TxnOutcome::kAmbiguous: {
        if (++recreations > kRecreateRetriesMax) {
          return Status(Code::kUnavailable,
                        "the append's outcome is unknown after " +
                            std::to_string(kRecreateRetriesMax) + " new producers: " +
                            why.message() + "; it may be retried with the same key");
        }
        ++stats_.producers_recreated;
        DestroyProducer();
        // The new producer's epoch fences the old one's requests still in flight; only then
        // does the tail show for certain whether the transaction landed.
        ADM_RETURN_IF_ERROR(CreateProducer());
        auto head = CatchUpLocked();
        if (!head.ok()) return head.status();
        if (head->sequence == before.sequence) continue;  // nothing landed: send it again
        if (head->sequence == prepared.head.sequence && head->hash == prepared.head.hash) {
          return ack;  // it landed (the tail read holds exactly these events)
        }
        return HaltLocked(Status(
            Code::kCorruption,
            "the Kafka ledger moved under its writer: the head was " +
                std::to_string(before.sequence) + " before an append of sequences " +
                std::to_string(prepared.events.front().sequence) + "-" +
                std::to_string(prepared.head.sequence) + ", the topic now ends at " +
                std::to_string(head->sequence) + " with other events (a second writer)"));
      }
      case TxnOutcome::kFatal:
        return HaltLocked(Status(Code::kUnavailable,
                                 "the Kafka writer stops (fenced by a newer writer of this "
                                 "ledger, or a fatal producer error): " +
                                     why.message()));
    }
  }
}

Status KafkaLog::HaltLocked(Status why) {
  halted_ = why;
  writer_ = false;
  DestroyProducer();
  return why;
}

Status KafkaLog::Ingest(const std::vector<StoredEvent>& events,
                        const std::vector<std::string>& keys, const std::vector<int64_t>& offsets,
                        const Head& head_after, int64_t next_offset) {
  std::vector<RocksDbLog::Ingested> ingested;
  ingested.reserve(events.size());
  std::vector<std::pair<std::string, std::string>> extra;
  extra.reserve(events.size() + 1);
  for (size_t i = 0; i < events.size(); ++i) {
    ingested.push_back({events[i].sequence, events[i].bytes, keys[i]});
    extra.emplace_back(OffsetKey(events[i].sequence), EncodeOffset(offsets[i]));
  }
  extra.emplace_back(kStateNextOffsetKey, EncodeOffset(next_offset));
  return mirror_->Ingest(ingested, head_after, extra);
}

Result<Head> KafkaLog::CatchUp() {
  std::lock_guard<std::mutex> lock(mu_);
  return CatchUpLocked();
}

Result<Head> KafkaLog::CatchUpLocked() {
  if (halted_ && halted_->code() == Code::kCorruption) return *halted_;
  auto stored_next = StoredNextOffsetLocked();
  if (!stored_next.ok()) return stored_next.status();
  const int64_t next = *stored_next;
  int64_t low = 0;
  int64_t high = 0;
  rd_kafka_resp_err_t err =
      rd_kafka_query_watermark_offsets(consumer_, options_.address.topic.c_str(),
                                       kKafkaLedgerPartition, &low, &high,
                                       options_.operation_timeout_ms);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Status(CodeOf(err), "reading the end of topic " + options_.address.topic + ": " +
                                   rd_kafka_err2str(err));
  }
  if (next >= high) return mirror_->GetHead();
  if (next < low) {
    return Status(Code::kCorruption,
                  "topic " + options_.address.topic + " starts at offset " +
                      std::to_string(low) + " but the ledger continues at offset " +
                      std::to_string(next) + ": records were deleted");
  }

  Partitions partitions(rd_kafka_topic_partition_list_new(1));
  rd_kafka_topic_partition_list_add(partitions.get(), options_.address.topic.c_str(),
                                    kKafkaLedgerPartition)
      ->offset = next;
  err = rd_kafka_assign(consumer_, partitions.get());
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Status(CodeOf(err), std::string("reading the ledger topic: ") + rd_kafka_err2str(err));
  }
  struct Unassign {
    rd_kafka_t* consumer;
    ~Unassign() { rd_kafka_assign(consumer, nullptr); }
  } unassign{consumer_};
  ADM_RETURN_IF_ERROR(ReadTopicLocked(next, high));
  return mirror_->GetHead();
}

Result<int64_t> KafkaLog::StoredNextOffsetLocked() {
  auto stored_next = mirror_->GetExtra(kStateNextOffsetKey);
  if (!stored_next.ok()) return stored_next.status();
  if (!stored_next->has_value()) return int64_t{0};
  auto decoded = DecodeOffset(**stored_next);
  if (!decoded) return Status(Code::kCorruption, "state: the next offset record is malformed");
  return *decoded;
}

struct KafkaLog::CatchUpBatch {
  Head head;                  // after the last event read
  int64_t next = 0;           // the next offset to read
  int64_t ingested_next = 0;  // the next offset the state holds
  std::vector<StoredEvent> pending;
  std::vector<std::string> keys;
  std::vector<int64_t> offsets;
};

Status KafkaLog::FlushCatchUpLocked(CatchUpBatch& batch) {
  if (batch.pending.empty() && batch.next == batch.ingested_next) return Status::Ok();
  ADM_RETURN_IF_ERROR(Ingest(batch.pending, batch.keys, batch.offsets, batch.head, batch.next));
  batch.ingested_next = batch.next;
  batch.pending.clear();
  batch.keys.clear();
  batch.offsets.clear();
  return Status::Ok();
}

Status KafkaLog::SkipRepeatLocked(CatchUpBatch& batch, Sequence sequence,
                                  std::string_view value, int64_t offset) {
  // The same sequence again: a re-send of the same event is harmless, anything else a fork.
  std::string held;
  int64_t held_offset = -1;
  const Sequence flushed_head = batch.head.sequence - batch.pending.size();
  if (sequence > flushed_head) {
    const size_t i = sequence - flushed_head - 1;
    held = batch.pending[i].bytes;
    held_offset = batch.offsets[i];
  } else {
    auto read = mirror_->Read(sequence, 1);
    if (!read.ok()) return read.status();
    if (read->empty()) return Status(Code::kCorruption, "state: an event is missing");
    held = std::move(read->front().bytes);
    auto at = OffsetOfLocked(sequence);
    held_offset = at.ok() ? *at : -1;
  }
  if (held != value) {
    ADM_RETURN_IF_ERROR(FlushCatchUpLocked(batch));
    return HaltLocked(KafkaForkError(sequence, held_offset, offset));
  }
  ++stats_.repeats_skipped;
  batch.next = offset + 1;
  return Status::Ok();
}

Status KafkaLog::ReadTopicLocked(int64_t next, int64_t high) {
  CatchUpBatch batch;
  batch.head = mirror_->GetHead();
  batch.next = batch.ingested_next = next;
  auto head_offset = OffsetOfLocked(batch.head.sequence);
  int64_t last_offset = head_offset.ok() ? *head_offset : -1;
  Clock::time_point idle_deadline =
      Clock::now() + std::chrono::milliseconds(options_.operation_timeout_ms);
  std::optional<Clock::time_point> settle_until;  // set at an end short of the high watermark
  for (;;) {
    Message message(rd_kafka_consumer_poll(consumer_, kPollSliceMs));
    if (!message) {
      if (settle_until && Clock::now() >= *settle_until) break;
      if (Clock::now() >= idle_deadline) {
        ADM_RETURN_IF_ERROR(FlushCatchUpLocked(batch));
        return Status(Code::kUnavailable,
                      "reading topic " + options_.address.topic + ": nothing received for " +
                          std::to_string(options_.operation_timeout_ms) + " ms at offset " +
                          std::to_string(batch.next) + " (the end is at " +
                          std::to_string(high) + ")");
      }
      continue;
    }
    idle_deadline = Clock::now() + std::chrono::milliseconds(options_.operation_timeout_ms);
    if (message->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      // read_committed stops at the last stable offset: the end of what has committed. Short
      // of the high watermark a transaction is open, or committed with its markers not written
      // yet (a moment after the writer's commit returned): wait up to kTailSettleMs for it to
      // settle, so that a read right after a commit sees it; a transaction left open (a stopped
      // writer) delays the read by that much only.
      if (message->offset > batch.next) batch.next = message->offset;
      if (message->offset >= high) break;
      if (!settle_until) settle_until = Clock::now() + std::chrono::milliseconds(kTailSettleMs);
      if (Clock::now() >= *settle_until) break;
      continue;
    }
    if (message->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      ADM_RETURN_IF_ERROR(FlushCatchUpLocked(batch));
      return Status(CodeOf(message->err), "reading topic " + options_.address.topic + ": " +
                                              rd_kafka_message_errstr(message.get()));
    }
    ++stats_.records_read;
    const KafkaRecordView view = ViewKafkaMessage(message.get());
    Result<CheckedRecord> checked = CheckKafkaRecord(view, batch.head, last_offset);
    if (!checked.ok()) {
      ADM_RETURN_IF_ERROR(FlushCatchUpLocked(batch));
      return HaltLocked(checked.status());
    }
    if (checked->kind == CheckedRecord::Kind::kRepeat) {
      ADM_RETURN_IF_ERROR(SkipRepeatLocked(batch, checked->sequence, view.value, view.offset));
      continue;
    }
    batch.pending.push_back(StoredEvent{checked->sequence, std::string(view.value)});
    batch.keys.push_back(checked->key);
    batch.offsets.push_back(view.offset);
    batch.head = Head{checked->sequence, checked->hash, checked->recorded_at_ns};
    last_offset = view.offset;
    batch.next = view.offset + 1;
    if (batch.pending.size() >= kIngestBatchEventsMax) {
      ADM_RETURN_IF_ERROR(FlushCatchUpLocked(batch));
    }
  }
  return FlushCatchUpLocked(batch);
}

Result<int64_t> KafkaLog::OffsetOf(Sequence sequence) {
  std::lock_guard<std::mutex> lock(mu_);
  return OffsetOfLocked(sequence);
}

Result<int64_t> KafkaLog::OffsetOfLocked(Sequence sequence) {
  auto value = mirror_->GetExtra(OffsetKey(sequence));
  if (!value.ok()) return value.status();
  if (!value->has_value()) {
    return Status(Code::kNotFound, "no offset recorded for sequence " + std::to_string(sequence));
  }
  auto offset = DecodeOffset(**value);
  if (!offset) return Status(Code::kCorruption, "state: the offset of a sequence is malformed");
  return *offset;
}

Result<std::vector<StoredEvent>> KafkaLog::Read(Sequence from, size_t max_count) {
  return mirror_->Read(from, max_count);
}

Result<size_t> KafkaLog::Scan(Sequence from, size_t max_count, const ScanVisitor& visit) {
  return mirror_->Scan(from, max_count, visit);
}

Head KafkaLog::GetHead() { return mirror_->GetHead(); }

Result<std::optional<Sequence>> KafkaLog::FindKey(std::string_view key) {
  return mirror_->FindKey(key);
}

Result<std::optional<std::vector<Sequence>>> KafkaLog::History(std::string_view history_key,
                                                                  Sequence at_most) {
  return mirror_->History(history_key, at_most);
}

std::optional<Status> KafkaLog::Halted() {
  std::lock_guard<std::mutex> lock(mu_);
  return halted_;
}

KafkaLogStats KafkaLog::GetStats() {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace admission::ledger

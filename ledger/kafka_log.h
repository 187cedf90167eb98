#pragma once
// The ledger on an Apache Kafka topic: one partition, one fenced transactional writer, readers
// that verify every record, and a local RocksDB copy of the topic. See docs/kafka.md.

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ledger/event_log.h"
#include "ledger/rocksdb_log.h"

struct rd_kafka_s;

namespace admission::ledger {

// Where a Kafka ledger lives: kafka://HOST:PORT[,HOST:PORT...]/TOPIC.
struct KafkaAddress {
  std::string bootstrap;  // HOST:PORT[,HOST:PORT...]
  std::string topic;
  std::string ToString() const { return "kafka://" + bootstrap + "/" + topic; }
};
inline constexpr std::string_view kKafkaScheme = "kafka://";
bool IsKafkaLedger(std::string_view location);
// Errors (kInvalidArgument): no host:port, no topic, or a topic name Kafka refuses (legal:
// 1-249 of [a-zA-Z0-9._-], not "." or "..").
Result<KafkaAddress> ParseKafkaLedger(std::string_view location);

// The one partition of a ledger topic.
inline constexpr int32_t kKafkaLedgerPartition = 0;
// Bounded retries of the write path (docs/kafka.md, "One writer, fenced").
inline constexpr int kAbortRetriesMax = 3;      // abortable errors of one append
inline constexpr int kRecreateRetriesMax = 3;   // ambiguous commits of one append
// Events ingested into the local state in one WriteBatch while reading the topic.
inline constexpr size_t kIngestBatchEventsMax = 4096;

// The settings of a ledger topic that decide whether it keeps the audit record.
struct KafkaTopicSettings {
  int partitions = 0;
  std::string cleanup_policy;
  std::string retention_ms;
  std::string retention_bytes;
};
// The topic's settings, or nullopt when the topic does not exist.
Result<std::optional<KafkaTopicSettings>> DescribeKafkaTopic(const KafkaAddress& address,
                                                              int timeout_ms);
// Creates the topic with one partition, cleanup.policy=delete, retention.ms=-1 and
// retention.bytes=-1. `replication_factor` -1: the broker's default.
Status CreateKafkaTopic(const KafkaAddress& address, int replication_factor, int timeout_ms);
// Refuses (kInvalidArgument, naming the setting and its value) a topic that would not keep
// every event for ever or that has more than one partition.
Status CheckKafkaTopicSettings(const KafkaAddress& address, const KafkaTopicSettings& settings);

struct KafkaLogOptions {
  KafkaAddress address;
  // The local state: the copy of the topic (and, beside it, the daemon's snapshots). Required.
  std::string state_dir;
  // The writer takes the transactional id (fencing every earlier writer with it); a reader
  // only reads, and refuses appends.
  bool writer = false;
  // Create the topic if it does not exist (else a missing topic is kNotFound).
  bool create_topic = false;
  int replication_factor = -1;
  // Empty: "admission-ledger." + topic, the same for every writer of this ledger.
  std::string transactional_id;
  int transaction_timeout_ms = 60'000;
  // Bounds every wait on the broker: metadata, init_transactions, commit, and a read of the
  // topic that receives nothing.
  int operation_timeout_ms = 30'000;
  // More librdkafka properties for both clients (tests, tuning), applied last.
  std::vector<std::pair<std::string, std::string>> client_config;
  // Fault drills only (docs/kafka.md, "Drills"): called at named points of each transaction
  // with the number of transactions begun so far (this one included): "produced" (every record
  // of the transaction is on the broker, the commit not sent yet), "committing" (the commit is
  // about to be sent; it runs while the call returns) and "committed". Returning true at
  // "produced" aborts the transaction and at "committed" forgets that it committed; either way
  // the writer then takes the outcome for unknown, as after a commit that timed out. Returning
  // true at "abortable" (asked just before "produced") answers as an abortable error would.
  std::function<bool(std::string_view point, uint64_t transaction)> drill;
};

struct KafkaLogStats {
  uint64_t transactions = 0;         // committed
  uint64_t aborted = 0;              // aborted after an abortable error, then sent again
  uint64_t producers_recreated = 0;  // after an ambiguous commit
  uint64_t records_read = 0;         // records the reader checked
  uint64_t repeats_skipped = 0;      // records repeating a sequence with the same bytes
};

class KafkaLog final : public EventLog {
 public:
  // Opens the local state, checks the topic (a writer refuses bad settings), takes the
  // transactional id (writer), and reads the topic beyond the local state, verifying it.
  // Errors: kInvalidArgument (options, topic settings), kNotFound (no topic), kCorruption (a
  // fork or a malformed record, offsets named), kUnavailable (broker unreachable within the
  // timeout), kBusy (the state folder is open elsewhere), kIoError.
  static Result<std::unique_ptr<KafkaLog>> Open(const KafkaLogOptions& options);
  ~KafkaLog() override;

  // One transaction. Errors as EventLog's, and kUnavailable when this log does not write (a
  // reader) or can no longer write (fenced by a newer writer, a fatal producer error, or a
  // halted reader); the message says which.
  Result<AppendAck> Append(std::span<const std::string> batch) override;
  Result<std::vector<StoredEvent>> Read(Sequence from, size_t max_count) override;
  Result<size_t> Scan(Sequence from, size_t max_count, const ScanVisitor& visit) override;
  Head GetHead() override;
  Result<std::optional<Sequence>> FindKey(std::string_view key) override;
  std::optional<DiskState> Disk() override { return mirror_->Disk(); }
  void CountRefusedForSpace() override { mirror_->CountRefusedForSpace(); }
  // The local copy's history index (written as it ingests).
  Result<std::optional<std::vector<Sequence>>> History(std::string_view history_key,
                                                        Sequence at_most) override;

  // Reads what the topic holds beyond the local state into it, verifying every record. Returns
  // the head afterwards. Once it found a fork it halts: this and every later call fail.
  Result<Head> CatchUp();
  // The Kafka offset of the record that holds `sequence`.
  Result<int64_t> OffsetOf(Sequence sequence);
  // A reader becomes the writer (a standby given the ledger's partition): takes the
  // transactional id, which fences every earlier writer, then reads the tail that writer left.
  // Errors: the topic's settings (kInvalidArgument), a halted log, and Open's.
  Status BecomeWriter();
  // The writer stops writing and reads again (it lost the ledger's partition: another member
  // may be the writer now); it may become the writer again with BecomeWriter, under a new
  // producer epoch.
  void Demote();
  // The log stops writing for good.
  void Halt(Status why);
  bool writer();
  // Set once the writer can no longer write (fenced, fatal, lost the partition): why.
  std::optional<Status> Halted();
  KafkaLogStats GetStats();
  const KafkaLogOptions& options() const { return options_; }

  // Callbacks from librdkafka (delivery reports). Not for callers.
  void OnDelivery(int64_t index, int error, int64_t offset);

 private:
  enum class TxnOutcome { kCommitted, kAbortable, kFatal, kAmbiguous };
  KafkaLog(KafkaLogOptions options, std::unique_ptr<RocksDbLog> mirror);
  Status Start();
  Status CreateProducer();
  void DestroyProducer();
  // Sends `events` in one transaction; fills offsets on kCommitted, *why otherwise.
  TxnOutcome Transact(const std::vector<StoredEvent>& events, std::vector<int64_t>* offsets,
                      Status* why);
  Result<Head> CatchUpLocked();
  // CatchUpLocked's steps. REQUIRES: mu_ held.
  struct CatchUpBatch;  // what has been read and not yet ingested into the local copy
  // The offset after the last record the local copy holds (0 for an empty copy).
  Result<int64_t> StoredNextOffsetLocked();
  // Reads the assigned partition from `next` up to the end of what has committed (`high`, or
  // short of it once the tail has had kTailSettleMs to settle), ingesting as it goes.
  Status ReadTopicLocked(int64_t next, int64_t high);
  Status FlushCatchUpLocked(CatchUpBatch& batch);
  // A record at `offset` whose `sequence` was read before: skipped when it holds the same
  // event, else the ledger has forked and this log halts.
  Status SkipRepeatLocked(CatchUpBatch& batch, Sequence sequence, std::string_view value,
                          int64_t offset);
  Status Ingest(const std::vector<StoredEvent>& events, const std::vector<std::string>& keys,
                const std::vector<int64_t>& offsets, const Head& head_after,
                int64_t next_offset);
  Result<int64_t> OffsetOfLocked(Sequence sequence);
  Status HaltLocked(Status why);

  const KafkaLogOptions options_;
  std::unique_ptr<RocksDbLog> mirror_;
  rd_kafka_s* producer_ = nullptr;  // writer only
  rd_kafka_s* consumer_ = nullptr;

  std::mutex mu_;  // one append or catch-up at a time; delivery reports arrive under it
  std::optional<Status> halted_;      // GUARDED_BY(mu_)
  std::vector<int64_t> delivered_;    // GUARDED_BY(mu_); offset per record of the transaction
  std::vector<int> delivery_errors_;  // GUARDED_BY(mu_)
  size_t deliveries_ = 0;             // GUARDED_BY(mu_)
  KafkaLogStats stats_;               // GUARDED_BY(mu_)
  bool writer_ = false;               // GUARDED_BY(mu_)
  uint64_t transactions_begun_ = 0;   // GUARDED_BY(mu_)
  Status topic_settings_;             // why this topic may not be written, if so
};

}  // namespace admission::ledger

#pragma once
// The billing consumer on admitd's watch stream (docs/billing.md, "From admitd's watch"):
// folds the ledger's events as the daemon pushes them, checking the chain, and keeps the fold,
// the aggregates, the cursor (sequence, chain value) and an outbox of usage records in its own
// RocksDB state, one WriteBatch per push; a relay publishes the outbox to a Kafka output topic
// in transactions of its own transactional id. On start it fences an earlier instance, reads
// the output topic's tail for what is published already, and resumes the watch after the
// cursor; a deleted state is rebuilt from the ledger without publishing anything twice.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ledger/event_log.h"
#include "consumers/billing/store.h"
#include "consumers/billing/usage.h"
#include "ledger/kafka_log.h"

namespace admission::consumers::billing {

// Streams the ledger's events from sequence `from` on to `on_events` until the stream ends
// (returns Ok: the consumer watches again after its cursor), `on_events` returns false,
// `idle` returns true, or it fails (kUnavailable: the consumer watches again a little later;
// any other code ends it). The source calls `idle` every so often (200 ms) on the thread that
// calls `on_events`: the consumer writes what it has folded and says whether to stop.
using EventSource = std::function<Status(
    uint64_t from, const std::function<bool(const std::vector<ledger::StoredEvent>&)>& on_events,
    const std::function<bool()>& idle)>;

// The consumer's ingest: folds events after the store's cursor, checking the chain, and writes
// the cursor, the fold's changes, the aggregates and the outbox records of what it folded in
// one synced WriteBatch per Flush. Add flushes by itself once kIngestEventsPerBatch events are
// pending, so that catching up on a long ledger costs one fsync per that many events; the
// caller flushes when the stream goes quiet. Events not flushed are lost with the process,
// and so is the cursor that covers them: they are watched again. Not thread-safe.
class BillingIngest {
 public:
  static constexpr size_t kIngestEventsPerBatch = 8192;
  // `fold` holds the store's state (LoadFold). Records at or before `published` are
  // aggregated but not put in the outbox (they are in the output topic already).
  BillingIngest(BillingStore& store, UsageFold& fold, int64_t bucket_ms,
                std::optional<OutboxPosition> published, std::string state_dir);
  ~BillingIngest();
  // Errors: kCorruption (a gap, an undecodable event, a chain that does not continue the
  // cursor's), the store's.
  Status Add(const std::vector<ledger::StoredEvent>& events);
  // Writes what is pending; returns true in *wrote when there was something.
  Status Flush(bool* wrote = nullptr);
  uint64_t cursor() const;   // folded, flushed or not
  uint64_t events_folded() const { return events_folded_; }
  uint64_t batches() const { return batches_; }

 private:
  struct Pending;
  BillingStore& store_;
  UsageFold& fold_;
  int64_t bucket_ms_;
  std::string state_dir_;
  std::unique_ptr<Pending> pending_;
  uint64_t events_folded_ = 0;
  uint64_t batches_ = 0;
};

struct WatchConsumerOptions {
  std::string state_dir;
  ledger::KafkaAddress output;   // the output topic (created if missing)
  std::string transactional_id;  // the relay's
  int64_t bucket_ms = 3'600'000;
  size_t records_per_transaction = 4096;
  int operation_timeout_ms = 30'000;
  // Stop once the cursor has reached this sequence and the outbox is empty (tests, batch
  // runs); otherwise follow until `stop` returns true.
  std::optional<uint64_t> until;
  std::function<bool()> stop;
  // Messages for the operator (a watch that ended, a retry).
  std::function<void(const std::string&)> log;
  // Fault drills only: called at "ingested" (after state batch n is written), "produced"
  // (transaction n's records flushed, not committed) and "committed" (before its records leave
  // the outbox).
  std::function<void(const char* point, uint64_t n)> drill;
};

struct WatchConsumerStats {
  uint64_t resumed_after = 0;        // the cursor at start
  uint64_t events_folded = 0;
  uint64_t records_published = 0;
  uint64_t transactions = 0;
  uint64_t outbox_published_before = 0;  // entries found in the output topic on start
  uint64_t cursor = 0;               // at the end
};

Result<WatchConsumerStats> RunWatchConsumer(const WatchConsumerOptions& options,
                                            const EventSource& source);

}  // namespace admission::consumers::billing

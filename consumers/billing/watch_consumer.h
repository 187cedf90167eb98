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
#include <optional>
#include <string>
#include <vector>

#include "ledger/event_log.h"
#include "ledger/kafka_log.h"

namespace admission::consumers::billing {

// Streams the ledger's events from sequence `from` on to `on_events` until the stream ends
// (returns Ok: the consumer watches again after its cursor), `on_events` returns false,
// `cancelled` (to be asked every so often while no events come) returns true, or it fails
// (kUnavailable: the consumer watches again a little later; any other code ends it).
using EventSource = std::function<Status(
    uint64_t from, const std::function<bool(const std::vector<ledger::StoredEvent>&)>& on_events,
    const std::function<bool()>& cancelled)>;

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

#pragma once
// The streaming billing consumer on the Kafka ledger (docs/billing.md, "Streaming"): reads the
// ledger topic read_committed (checking the chain as every reader does), folds it with
// UsageFold, and for every interval that closes publishes one usage record per bucket to an
// output topic, in a Kafka transaction that also commits the input position
// (send_offsets_to_transaction): each record is published exactly once, or the position does
// not move. On start the fold is rebuilt by reading the ledger up to the committed position
// without publishing (what was published then is in the output topic already).

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "consumers/billing/usage.h"
#include "ledger/kafka_log.h"

namespace admission::consumers::billing {

struct StreamOptions {
  ledger::KafkaAddress ledger;  // the ledger topic
  std::string output_topic;     // on the same cluster; created if missing
  std::string group;            // empty: "admission-billing." + ledger topic
  int64_t bucket_ms = 3'600'000;
  size_t events_per_transaction = 4096;  // ledger events folded per output transaction, at most
  int operation_timeout_ms = 30'000;
  // Stop once the ledger's end is reached and everything before it is published (tests, batch
  // runs); otherwise follow the ledger until `stop` returns true.
  bool until_end = false;
  std::function<bool()> stop;
  // Fault drills only: called after each transaction's records are produced, before its commit,
  // with the number of transactions so far.
  std::function<void(uint64_t transaction)> drill;
};

struct StreamStats {
  uint64_t events_folded = 0;     // after the rebuild
  uint64_t events_rebuilt = 0;    // folded again on start, nothing published
  uint64_t records_published = 0;
  uint64_t transactions = 0;
};

// The usage record of one interval piece: key = its id, value = JSON.
struct UsageRecord {
  std::string id;  // uid/generation/podSet/flavor/resource/kind/bucket-start-ms
  std::string json;
  // What the watch consumer aggregates: the piece's bucket, kind, attribution and amount.
  int64_t bucket_ms = 0;
  UsageKind kind = UsageKind::kUsed;
  Attribution to;
  __int128 milli_ms = 0;
};
// The records an interval gives: one per bucket it touches, amounts exact.
std::vector<UsageRecord> RecordsOf(const Interval& interval, int64_t bucket_ms,
                                   uint64_t closing_sequence);

Result<StreamStats> RunBillingStream(const StreamOptions& options);

}  // namespace admission::consumers::billing

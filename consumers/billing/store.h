#pragma once
// The watch consumer's own state (docs/billing.md, "From admitd's watch"): one RocksDB
// database holding the input cursor (the last ledger event folded: sequence and chain value),
// the usage fold's open state, the aggregates (resource-milliseconds per bucket, kind and
// attribution of every record the consumer produced) and the outbox (records not yet known
// to be in the output topic). One WriteBatch per batch of ledger events changes all of them
// together, synced, so after a crash the state is that of a batch boundary, never half of one.
//
// Records are numbered by their position: (the ledger sequence of the event that closed the
// interval, the record's index among that event's records). The fold is pure, so the numbering
// is the same on every run and on a state rebuilt from the ledger: the relay can tell from the
// output topic which positions it has published.

#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "consumers/billing/stream.h"
#include "consumers/billing/usage.h"
#include "schema/event_codec.h"

namespace rocksdb {
class DB;
}

namespace admission::consumers::billing {

struct OutboxPosition {
  uint64_t sequence = 0;
  uint32_t index = 0;
  auto operator<=>(const OutboxPosition&) const = default;
  std::string ToString() const;  // "SEQUENCE.INDEX"
  static std::optional<OutboxPosition> Parse(std::string_view text);
};

struct OutboxEntry {
  OutboxPosition position;
  std::string id;    // the record's key
  std::string json;  // its value
};

struct Cursor {
  uint64_t sequence = 0;  // the last ledger event folded; 0: none
  schema::Hash hash = schema::kGenesisHash;  // the chain value after it
};

struct AggregateKey {
  int64_t bucket_ms = 0;
  UsageKind kind = UsageKind::kUsed;
  Attribution to;
  auto operator<=>(const AggregateKey&) const = default;
};

class BillingStore {
 public:
  // Opens (creating if missing) the state in `dir`. Errors: kIoError, kCorruption (an entry
  // that does not parse, named).
  static Result<std::unique_ptr<BillingStore>> Open(const std::string& dir);
  ~BillingStore();

  const Cursor& cursor() const { return cursor_; }
  const std::map<AggregateKey, __int128>& aggregates() const { return aggregates_; }
  // Puts the stored open state back into a fresh fold.
  Status LoadFold(UsageFold* fold) const;

  // One batch, atomically and durably: the cursor after it, the fold's changed entries, the
  // records the batch closed (all of them aggregated; those after `published` also put in the
  // outbox: the ones before are in the output topic already).
  Status Commit(const Cursor& cursor,
                const std::vector<std::pair<std::string, std::optional<std::string>>>& fold,
                const std::vector<std::pair<OutboxPosition, UsageRecord>>& records,
                const std::optional<OutboxPosition>& published);

  // The first `max_count` outbox entries, in position order.
  Result<std::vector<OutboxEntry>> ReadOutbox(size_t max_count) const;
  // Forgets the outbox entries up to and including `last` (they are in the output topic).
  Status RemoveOutboxThrough(const OutboxPosition& last);
  Result<uint64_t> OutboxSize() const;

 private:
  BillingStore() = default;
  std::unique_ptr<rocksdb::DB> db_;
  Cursor cursor_;
  std::map<AggregateKey, __int128> aggregates_;
};

}  // namespace admission::consumers::billing

#pragma once
// The step every log shares: validate an append against the head and the idempotency index,
// assign sequences, fill prevHash and hash. Logs differ only in where they keep the results,
// so both produce the same bytes for the same appends.
//
// The step is split in two so that a log serving many appenders keeps its serial part short:
// CheckBatch (decode, validate, lay out the stored bytes) depends on nothing but the batch
// and runs on the appender's own thread before it queues; SequenceBatch (idempotency, time,
// sequence, prevHash, SHA-256) depends on the head and runs in order, one request at a time.

#include <functional>
#include <unordered_map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ledger/event_log.h"

namespace admission::ledger {

// Looks up a key in the log's durable index: the recorded sequence and its stored bytes.
struct RecordedKey {
  Sequence sequence = 0;
  std::string bytes;
};
using KeyLookup = std::function<Result<std::optional<RecordedKey>>(std::string_view key)>;

// What one request adds to the log, once it is accepted.
struct PreparedAppend {
  std::vector<StoredEvent> events;                            // new events, in order
  std::vector<std::pair<std::string, Sequence>> index_entries;  // key -> sequence
  Head head;                                                  // the head after this request
};

// A key written by an earlier request of the same group commit (not yet in the durable index):
// its sequence and a view of its stored bytes, which stay in that request's PreparedAppend.
struct GroupKey {
  Sequence sequence = 0;
  std::string_view bytes;
};

// Hashes a key given as a string or a view (GroupKeys looks keys up without a copy).
struct KeyHash {
  using is_transparent = void;
  size_t operator()(std::string_view key) const { return std::hash<std::string_view>()(key); }
};

// Keys written by earlier requests of the same group commit. Hashed: keys arrive in no order
// and are only looked up, never listed.
// Lifetime: the views are valid while the PreparedAppends they were recorded from are alive and
// unchanged; a GroupKeys lives for one group commit.
using GroupKeys = std::unordered_map<std::string, GroupKey, KeyHash, std::equal_to<>>;

// One event of an append after its check: laid out for storage, with what sequencing needs.
struct CheckedEvent {
  schema::StoredEventTemplate stored;
  std::string key;  // idempotency key; empty: none
  int64_t recorded_at_ns = 0;
  // Not ok when the event cannot be stored (MakeStoredEventTemplate failed): refused only if it
  // turns out to be new, since a duplicate of a recorded event is never stored again.
  Status unstorable;
};

// An append after its check (CheckBatch), which stops at the first event that fails it; whether
// that failure is the append's answer is decided in order by SequenceBatch (an earlier event
// may fail first, e.g. with kConflict), exactly as if every event were checked in one pass.
struct CheckedBatch {
  std::vector<CheckedEvent> events;  // events [0, events.size()) of the batch passed the check
  Status failure;                   // why event events.size() failed, if it is < batch.size()
};

// Decodes and validates each event of `batch` and lays it out for storage. Depends only on the
// batch: any thread, no lock. REQUIRES: 1 <= batch.size() <= kAppendBatchEventsMax.
CheckedBatch CheckBatch(std::span<const std::string> batch);

// Sequences one request on top of `head`: duplicates and conflicts against `group_keys` and
// `lookup`, time, then sequence, prevHash and the chain hash of each new event. On success fills
// `ack` and `out` (the stored bytes move out of `checked`) and adds the request's keys to
// `group_keys`, viewing `out->events`; on failure changes neither `group_keys` nor `out`.
// REQUIRES: `checked` is CheckBatch(batch), not yet sequenced.
Status SequenceBatch(std::span<const std::string> batch, CheckedBatch& checked,
                     const Head& head, GroupKeys& group_keys, const KeyLookup& lookup,
                     AppendAck* ack, PreparedAppend* out);

// Both steps at once, for logs without a queue (MemoryLog) and for measuring the whole step.
Status PrepareAppend(std::span<const std::string> batch, const Head& head,
                     GroupKeys& group_keys, const KeyLookup& lookup, AppendAck* ack,
                     PreparedAppend* out);

}  // namespace admission::ledger

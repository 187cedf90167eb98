#pragma once
// The step every log shares: validate an append against the head and the idempotency index,
// assign sequences, fill prevHash, canonicalize and hash. Logs differ only in where they keep
// the results, so both produce the same bytes for the same appends.

#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
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

// Keys written by earlier requests of the same group commit (not yet in the durable index).
using GroupKeys = std::map<std::string, RecordedKey, std::less<>>;

// Validates and sequences one request on top of `head`. On success fills `ack` and `out` and
// adds its keys to `group_keys`; on failure changes nothing.
Status PrepareAppend(std::span<const std::string> batch, const Head& head,
                     GroupKeys& group_keys, const KeyLookup& lookup, AppendAck* ack,
                     PreparedAppend* out);

}  // namespace admission::ledger

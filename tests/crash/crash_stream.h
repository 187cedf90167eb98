#pragma once
// The deterministic event streams of the SIGKILL crash test. Thread t of crash_appender appends
// events t:0, t:1, t:2, ... and the payload of event t:i (actor, idempotency key, body) depends
// only on (t, i), so the test can rebuild every stored event byte for byte from its key and the
// envelope fields the ledger assigns (sequence, prevHash) or the appender stamps (recordedAtNs).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "schema/event_codec.h"

namespace admission::crash {

// Events in one Append of the crash appender: 1 to kBatchEventsMax, chosen by BatchSize.
inline constexpr size_t kBatchEventsMax = 8;
inline constexpr int kThreadsMax = 64;
// The first recordedAtNs of an empty ledger (2023-11-14T22:13:20Z), so stamps look like times.
inline constexpr int64_t kFirstRecordedAtNs = 1'700'000'000'000'000'000;

// Stream position: event `index` of thread `thread`.
struct StreamEvent {
  int thread = 0;
  uint64_t index = 0;
};

// A well-mixed 64-bit hash of (a, b) (SplitMix64 finalizer), for every derived choice.
uint64_t Mix(uint64_t a, uint64_t b);

// "t<thread>-<index>": the idempotency key of event thread:index.
std::string IdempotencyKey(int thread, uint64_t index);
// The inverse of IdempotencyKey; nullopt for anything that IdempotencyKey does not produce.
std::optional<StreamEvent> ParseIdempotencyKey(std::string_view key);

// How many events the Append starting at event thread:first_index carries (1..kBatchEventsMax).
size_t BatchSize(uint64_t seed, int thread, uint64_t first_index);

// Fills `root` with event thread:index stamped at `recorded_at_ns`; sequence and prevHash stay
// unset (the ledger assigns them).
void BuildEvent(int thread, uint64_t index, int64_t recorded_at_ns,
                schema::Event::Builder root);

// The canonical bytes of BuildEvent's event, as handed to EventLog::Append.
std::string EncodeStreamEvent(int thread, uint64_t index, int64_t recorded_at_ns);

// The canonical bytes the ledger must have stored for event thread:index at `sequence` with
// the given recordedAtNs and prevHash.
std::string ExpectedStoredBytes(int thread, uint64_t index, int64_t recorded_at_ns,
                                uint64_t sequence, const schema::Hash& prev_hash);

}  // namespace admission::crash

#pragma once
// The append-only log of events: the only way to the ledger. See docs/ledger.md.

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "schema/event_codec.h"
#include "schema/result.h"

namespace admission::ledger {

using Sequence = uint64_t;

// Limits (TigerBeetle style: everything bounded, named).
inline constexpr size_t kAppendBatchEventsMax = 4096;   // events in one Append call
inline constexpr size_t kGroupEventsMax = 16384;        // events in one group commit
inline constexpr size_t kReadEventsMax = 65536;         // events returned by one Read call
inline constexpr size_t kIdempotencyKeyBytesMax = 512;

struct Head {
  Sequence sequence = 0;                  // 0: empty ledger
  schema::Hash hash = schema::kGenesisHash;
  int64_t recorded_at_ns = 0;
};

// One stored event: its sequence and its canonical bytes exactly as stored.
struct StoredEvent {
  Sequence sequence = 0;
  std::string bytes;
};

// The outcome of one Append. Events whose idempotency key was recorded before with the same
// payload are not written again: they carry the original sequence and duplicate == true.
struct AppendAck {
  std::vector<Sequence> sequences;
  std::vector<bool> duplicate;
  size_t written = 0;  // events actually appended
  Sequence first() const { return sequences.empty() ? 0 : sequences.front(); }
  bool all_duplicates() const { return written == 0; }
};

// The disk under a log's local storage (admitd's readiness and metrics).
struct DiskState {
  uint64_t free_bytes = 0;       // free to unprivileged writers, now
  uint64_t min_free_bytes = 0;   // the free-space floor below which appends are refused
  bool refusing = false;         // appends are refused for lack of space until it returns
  uint64_t appends_refused = 0;  // appends refused for lack of space since the log was opened
  std::string why;               // when refusing: the error an append gets (names the space)
};

// Interface: no fields. Implementations: MemoryLog, RocksDbLog, KafkaLog.
// Thread safety: every method may be called from any thread concurrently.
class EventLog {
 public:
  virtual ~EventLog() = default;

  // Appends the batch atomically: either every new event is written (with dense sequences,
  // in batch order) or none is. Each element is a serialized schema::Event whose envelope
  // (recordedAtNs, actor, idempotencyKey, causationSequence, engineVersion) is filled in;
  // the log assigns sequence and prevHash. Returns when the events are durable.
  // REQUIRES: 1 <= batch.size() <= kAppendBatchEventsMax.
  // Errors: kInvalidArgument (malformed event), kConflict (key reused with another payload,
  // message names the first differing field), kTimeWentBackwards, kIoError.
  virtual Result<AppendAck> Append(std::span<const std::string> batch) = 0;

  // Up to max_count events from sequence `from` on, in order. Fewer only at the head: a caller
  // may count on max_count events whenever that many are at or below the head (replay reads
  // chunks ahead on that promise). An implementation that fetches in pages (RemoteLog) asks
  // again until it has them.
  // REQUIRES: max_count <= kReadEventsMax.
  virtual Result<std::vector<StoredEvent>> Read(Sequence from, size_t max_count) = 0;

  // Shows up to max_count events from sequence `from` on to `visit`, in order (fewer only at the
  // head, as Read), each as its sequence and a view of its stored bytes that is valid only during
  // that call: a bulk reader's way through the ledger without a copy per event. `visit` returns
  // whether to go on: false stops the scan after that event (a reader that bounds its bytes, or
  // one that met an error). Returns how many were shown. The default goes through Read.
  // REQUIRES: max_count <= kReadEventsMax.
  using ScanVisitor = std::function<bool(Sequence sequence, std::string_view bytes)>;
  virtual Result<size_t> Scan(Sequence from, size_t max_count, const ScanVisitor& visit) {
    auto events = Read(from, max_count);
    if (!events.ok()) return events.status();
    size_t shown = 0;
    for (const StoredEvent& e : *events) {
      ++shown;
      if (!visit(e.sequence, e.bytes)) break;
    }
    return shown;
  }

  virtual Head GetHead() = 0;

  // The sequence of the event recorded with this idempotency key, if any.
  virtual Result<std::optional<Sequence>> FindKey(std::string_view key) = 0;

  // The history index (docs/ledger.md, "The history index"): the sequences, ascending and at
  // most `at_most` (0: any), of the events with this history key (schema::HistoryKeysOf: "n"
  // NS/NAME or "u" UID). nullopt when this log keeps no complete history index; a reader then
  // scans the ledger instead. The default keeps none.
  // The disk under the log's local storage; nullopt when it has none (MemoryLog).
  virtual std::optional<DiskState> Disk() { return std::nullopt; }
  // A caller refused an append itself because Disk() said so: counted in appends_refused.
  virtual void CountRefusedForSpace() {}

  virtual Result<std::optional<std::vector<Sequence>>> History(std::string_view history_key,
                                                                Sequence at_most) {
    (void)history_key;
    (void)at_most;
    return std::optional<std::vector<Sequence>>();
  }
};

}  // namespace admission::ledger

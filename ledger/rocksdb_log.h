#pragma once
// The embedded durable ledger on RocksDB. See docs/ledger.md for layout and group commit.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ledger/event_log.h"
#include "ledger/sequencer.h"

namespace rocksdb {
class ColumnFamilyHandle;
class DB;
class Env;
class Snapshot;
class Status;
class WriteBatch;
}

namespace admission::ledger {

struct RocksDbLogOptions {
  bool create_if_missing = true;
  // Every append is durable (fsync'd WAL) before it is acknowledged. Only benchmarks and
  // throwaway tests may turn this off.
  bool sync = true;
  // Opens without writing anything (RocksDB's read-only mode): reads work on a full disk, and
  // Append and Ingest fail. A ledger another process holds open to write may still be read: the
  // reader sees the ledger as it was at one moment of the open (kReadOnlyOpenAttemptsMax).
  bool read_only = false;
  // The free-space floor: an append is refused (kNoSpace, nothing written) while the ledger's
  // filesystem has less than this free, so the disk never fills up under the ledger. Unset:
  // DefaultMinFreeBytes of the filesystem's size.
  std::optional<uint64_t> min_free_bytes;
  // Tests only: the RocksDB environment (a file system that fails on demand); null: the default.
  rocksdb::Env* env = nullptr;
  // Called while a ledger without a history index gets one on its first writable open
  // (events indexed so far, of the head).
  std::function<void(uint64_t done, uint64_t total)> history_progress;
  // Benchmarks only (ledger_bench --phases nohistory): false writes no history entries, so the
  // index stays where it was; the next writable open indexes the rest.
  bool index_history = true;
};



// The default free-space floor: kDefaultMinFreeBytesMax, but at most an eighth
// (1 / kDefaultMinFreeDiskDivisor) of the filesystem. RocksDB preallocates its write-ahead log
// (1.1 write buffers, ~70 MiB) at the first write after an open, so on a disk of 96 MiB about
// 22 MiB stay free: a 64 MiB floor refused every write after the first (docs/operations.md).
inline constexpr uint64_t kDefaultMinFreeBytesMax = uint64_t{64} << 20;
inline constexpr uint64_t kDefaultMinFreeDiskDivisor = 8;
inline constexpr uint64_t DefaultMinFreeBytes(uint64_t filesystem_bytes) {
  return std::min(kDefaultMinFreeBytesMax, filesystem_bytes / kDefaultMinFreeDiskDivisor);
}

// How many of the newest links Open checks before it accepts a ledger.
inline constexpr Sequence kOpenTailCheckEvents = 64;

// A read-only open beside a writer (docs/ledger.md, "Readers beside a writer") is taken again
// when the writer changed the ledger's manifest while it ran, at most this many times, this long
// apart; after the last it fails with kBusy.
inline constexpr int kReadOnlyOpenAttemptsMax = 50;
inline constexpr int64_t kReadOnlyOpenRetryMs = 10;

// Group commit gathering (see docs/ledger.md, "Group commit"): before it takes its group, a
// leader waits for the appenders of the previous group to queue again, so that N appenders
// share one fsync instead of splitting into two alternating groups. It stops waiting when they
// all queued, when none arrived for kGatherIdleMaxUs, or after kGatherWaitMaxUs in all. A lone
// appender never waits: the previous group was its own request.
inline constexpr int64_t kGatherIdleMaxUs = 100;
inline constexpr int64_t kGatherWaitMaxUs = 1000;

// The history index is written behind the appends (docs/ledger.md, "The history index"), by
// a thread of the log's own: an append's events are durable when it returns, their history
// entries follow, and a reader looks at the events not yet indexed itself. A leader waits while
// more than kHistoryPendingEventsMax events wait for their entries; the writer writes at most
// kHistoryWriteEventsMax events' entries per WriteBatch.
inline constexpr size_t kHistoryPendingEventsMax = 16384;
inline constexpr size_t kHistoryWriteEventsMax = 4096;
// History reads the events past the index itself, at most this many; further behind (a history
// write failed, and the next writable open indexes them) it reports no index, as for a ledger
// without one, and the reader folds the ledger instead.
inline constexpr Sequence kHistoryTailEventsMax = 262144;
// The history writer writes without the WAL (synced appends), and flushes the history family
// after this many events (and when the log closes): a reader in another process, which sees
// only flushed entries, decodes at most the memtable's and one flushing memtable's events, plus
// those queued, within kHistoryTailEventsMax; a crash loses no more than that to rebuild. Near
// the events a 16 MiB memtable holds: a flush every 64Ki events doubled the flushes and the
// compactions of the family (ledger_bench's unsynced phase: 7.7 us CPU an event, not 3.8).
inline constexpr size_t kHistoryUnflushedEventsMax = 120000;
static_assert(2 * kHistoryUnflushedEventsMax + kHistoryPendingEventsMax +
                  kHistoryWriteEventsMax < kHistoryTailEventsMax);
// RocksDB's max_total_wal_size: logs the history family's memtable holds back are freed by its
// flush once they reach this.
inline constexpr uint64_t kLedgerWalBytesMax = uint64_t{256} << 20;
// The memory of every family's memtables together (RocksDB's db_write_buffer_size).
inline constexpr uint64_t kLedgerMemtableBytesMax = uint64_t{32} << 20;

struct RocksDbLogStats {
  uint64_t writes = 0;          // WriteBatches written (each one fsync when sync is on)
  uint64_t events_written = 0;
  // Where a leader's time goes (wall seconds, summed over groups): in RocksDB's Write of the
  // group (and its fsync), and waiting for room in the history writer's queue.
  double write_seconds = 0;
  double history_wait_seconds = 0;
};

class RocksDbLog final : public EventLog {
 public:
  // Opens (or creates) the ledger in `dir`. Refuses a ledger whose tail fails the hash chain,
  // naming the sequence (kCorruption), and one another process holds open (kBusy); read-only,
  // kBusy when another process changed the ledger's files during each of
  // kReadOnlyOpenAttemptsMax opens.
  static Result<std::unique_ptr<RocksDbLog>> Open(const std::string& dir,
                                                  const RocksDbLogOptions& options = {});
  ~RocksDbLog() override;

  Result<AppendAck> Append(std::span<const std::string> batch) override;
  Result<std::vector<StoredEvent>> Read(Sequence from, size_t max_count) override;
  Result<size_t> Scan(Sequence from, size_t max_count, const ScanVisitor& visit) override;
  Head GetHead() override;
  Result<std::optional<Sequence>> FindKey(std::string_view key) override;

  Result<std::optional<std::vector<Sequence>>> History(std::string_view history_key,
                                                        Sequence at_most) override;

  RocksDbLogStats GetStats();
  // Free space now (one statvfs) and whether appends would be refused for lack of it; clears a
  // no-space error of RocksDB's (DB::Resume) once space is back, so readiness returns without
  // waiting for an append.
  std::optional<DiskState> Disk() override;
  void CountRefusedForSpace() override { appends_refused_.fetch_add(1, std::memory_order_relaxed); }

  // --- A RocksDbLog as the local copy of a log kept elsewhere (KafkaLog's state) ---

  // One event that another writer sequenced and chained, and the caller checked.
  struct Ingested {
    Sequence sequence = 0;
    std::string_view bytes;  // the stored bytes
    std::string_view key;    // its idempotency key; empty: none
  };
  // Writes `events` (sequences head+1, head+2, ... in order) with their index entries, the new
  // head and the `extra` entries in one WriteBatch. Extra keys go to the default family and must
  // start with kExtraPrefix, so they never meet an event or the head. An empty `events` writes
  // only the extras. REQUIRES: nothing appends to this log; `head_after` is the head after the
  // last event (the caller verified the chain).
  Status Ingest(std::span<const Ingested> events, const Head& head_after,
                std::span<const std::pair<std::string, std::string>> extra);
  // An entry written by Ingest's `extra`, if any.
  Result<std::optional<std::string>> GetExtra(std::string_view key);
  // The sequence and stored bytes of the event recorded with this key, if any.
  Result<std::optional<RecordedKey>> LookupKey(std::string_view key);
  static constexpr char kExtraPrefix = 'k';

  // Key layout, public for tests that edit storage on purpose. Events and the head are in
  // the default column family, the idempotency index in kIndexFamily.
  static std::string EventKey(Sequence sequence);
  static std::string IndexKey(std::string_view idempotency_key);
  static constexpr const char* kHeadKey = "h";
  static constexpr const char* kIndexFamily = "index";
  // The history index: HistoryKey(key, sequence) -> "" for every history key of every event.
  static constexpr const char* kHistoryFamily = "history";
  static std::string HistoryKey(std::string_view history_key, Sequence sequence);
  // In the default family: absent while the history index is being built for an older ledger
  // (an open that stopped half-way starts again), kHistoryComplete once it covers every event.
  static constexpr const char* kHistoryStateKey = "H";
  static constexpr const char* kHistoryComplete = "complete";
  // In the history family: the last sequence it holds the entries of (8 bytes, big-endian),
  // written with them; the entries of the events after it are still to be written. Ledgers
  // written before it moved have it in the default family, read when the history family has
  // none (and kept there, for older versions, at each completion of the index). Absent in both
  // beside kHistoryComplete (a ledger of the version that wrote the entries with the events):
  // every event's.
  static constexpr const char* kHistoryThroughKey = "I";
  // The index family's memtable hashes the first kIndexHashBytes bytes of a key (keys that
  // share them share a bucket, kept sorted) into kIndexHashBuckets buckets.
  static constexpr size_t kIndexHashBytes = 128;
  static constexpr size_t kIndexHashBuckets = 1 << 18;
  // The history family's memtable (a vector, sorted when flushed or read): a read of a recent
  // workload's history sorts at most this much.
  static constexpr size_t kHistoryMemtableBytes = 16 << 20;

 private:
  struct Request;
  struct Waiter;
  RocksDbLog(std::unique_ptr<rocksdb::DB> db,
             std::unique_ptr<rocksdb::ColumnFamilyHandle> events_family,
             std::unique_ptr<rocksdb::ColumnFamilyHandle> index_family,
             std::unique_ptr<rocksdb::ColumnFamilyHandle> history_family,
             const std::string& dir, const RocksDbLogOptions& options);
  // Writes the history entries of events [from, head] (an older ledger's first writable open,
  // or the events a crash left without them), then marks the index complete.
  Status BuildHistory(Sequence from);
  // Open's part for the history index: whether it is complete, the entries a crash (or an older
  // version) left unwritten written, and the history writer started (writable only).
  Status OpenHistory();
  // The history writer's thread: writes the entries of the events queued by QueueHistory, in
  // order, until the log closes. After a failed write it drops what is queued (the events are
  // durable: the next writable open indexes them).
  void WriteHistoryBehind();
  // Writes the history entries of `events` (consecutive sequences) and kHistoryThroughKey,
  // without the WAL when appends are synced.
  Status WriteHistoryEntries(std::span<const StoredEvent> events);
  // Flushes the history family's memtable; `wait`: until it is on the disk.
  Status FlushHistory(bool wait);
  // Hands a written group's events to the history writer, waiting while it is
  // kHistoryPendingEventsMax events behind. REQUIRES: the caller leads.
  void QueueHistory(std::vector<PreparedAppend>& prepared);
  // The sequences of the events with this history key among (from, to], read from the events.
  Status HistoryOfEvents(const rocksdb::Snapshot* snapshot, std::string_view history_key,
                         Sequence from, Sequence to, std::vector<Sequence>* out);
  // Before a write: refuses it (kNoSpace) below the floor or while RocksDB holds a no-space
  // error, which it clears (DB::Resume) once space is back.
  Status CheckRoom();
  uint64_t FreeBytes();
  // DB::Resume after a no-space error; true when RocksDB takes writes again. Tried only with
  // kResumeFreeBytesMin free (RocksDB's own recovery wants a write buffer's worth, and a resume
  // that fails for lack of space can leave the error for good).
  bool TryResume();
  static constexpr uint64_t kResumeFreeBytesMin = 64ull << 20;  // one statvfs of the ledger's folder (max when it fails)
  std::string NoSpaceMessage(uint64_t free) const;
  // After a failed write: a no-space error from RocksDB becomes kNoSpace, naming the free space.
  Status WriteFailed(const rocksdb::Status& failure, const std::string& what);
  static Status MoveIndexToItsFamily(rocksdb::DB& db, rocksdb::ColumnFamilyHandle& index,
                                     const std::string& dir);
  Status LoadHead();
  // Runs one group commit led by the request at the front of the queue, then hands the lead to
  // the next queued request (or gives it up) and wakes the group.
  // REQUIRES: lock holds mu_; leading_; queue_.front() is the caller's request.
  // Returns with mu_ released.
  void LeadGroup(std::unique_lock<std::mutex>& lock);
  // Waits, within the gathering limits, until the requests of gather_target_ have queued.
  // REQUIRES: lock holds mu_ and the caller leads.
  void Gather(std::unique_lock<std::mutex>& lock);
  // Sequences the group's requests on top of `head` and writes them in one WriteBatch; fills
  // each request's result. Returns the new head and the events written. No lock held: only
  // the leader runs this, and only the leader writes the head or the index.
  Head CommitGroup(const std::vector<Request*>& group, Head head, uint64_t* events_written);
  // CommitGroup's idempotency index entries for the group's keys, read before sequencing.
  struct PrefetchedIndex;
  // Reads the index entries of every key of `group` in one MultiGet into *index, and returns
  // the lookup the sequencing asks: from *index, else from the index. REQUIRES: the caller
  // leads (only the leader writes the index, so nothing changes it in between); *index
  // outlives the lookup.
  KeyLookup PrefetchIndex(const std::vector<Request*>& group, PrefetchedIndex* index);
  // Writes the group's batch with the new head, unless the disk is below its floor.
  Status WriteGroup(const Head& head, rocksdb::WriteBatch* batch);
  // A wait object for a queued appender. REQUIRES: mu_ held.
  Waiter* AcquireWaiter();
  // Gives a waiter back once its appender has seen it change. Any thread, no lock.
  void ReleaseWaiter(Waiter* waiter);

  const std::unique_ptr<rocksdb::DB> db_;
  std::unique_ptr<rocksdb::ColumnFamilyHandle> events_family_;
  std::unique_ptr<rocksdb::ColumnFamilyHandle> index_family_;
  std::unique_ptr<rocksdb::ColumnFamilyHandle> history_family_;  // null: read-only, none yet
  bool history_complete_ = false;
  const std::string dir_;
  const RocksDbLogOptions options_;
  // options_.min_free_bytes, or the default for the ledger's filesystem (set by Open).
  uint64_t min_free_bytes_ = 0;
  // Disk state: written by the writer (the leader or Ingest's caller), read by anyone.
  std::atomic<bool> refusing_{false};
  std::atomic<bool> rocks_no_space_{false};  // RocksDB's background error is a no-space one
  std::atomic<uint64_t> free_bytes_{0};
  std::atomic<uint64_t> appends_refused_{0};
  std::atomic<bool> resume_warned_{false};

  std::mutex mu_;
  std::deque<Request*> queue_;   // GUARDED_BY(mu_); requests not yet taken into a group
  size_t queued_events_ = 0;     // GUARDED_BY(mu_); events of the requests in queue_
  bool leading_ = false;         // GUARDED_BY(mu_); a leader is running or being woken
  // Gathering: the requests the next leader waits for (those of the last group and those
  // queued behind it), whether a leader is waiting, and when the last request queued.
  size_t gather_target_ = 0;                            // GUARDED_BY(mu_)
  bool gathering_ = false;                              // GUARDED_BY(mu_)
  std::chrono::steady_clock::time_point last_arrival_;  // GUARDED_BY(mu_)
  std::condition_variable gather_cv_;
  Head head_;                    // GUARDED_BY(mu_); written only by the leader
  RocksDbLogStats stats_;        // GUARDED_BY(mu_)
  // The leader's timings (RocksDbLogStats), added outside mu_.
  std::atomic<double> write_seconds_{0};
  std::atomic<double> history_wait_seconds_{0};
  // Wait objects, owned by the log so that a leader may still notify one after its appender
  // has read its result and returned. One per appender ever waiting at the same time.
  std::vector<std::unique_ptr<Waiter>> waiters_;  // GUARDED_BY(mu_)
  Waiter* free_waiters_ = nullptr;                // GUARDED_BY(mu_); list through Waiter::next
  std::atomic<Waiter*> returned_waiters_{nullptr};  // pushed without a lock, taken whole

  // The history writer (writable logs only): events whose history entries are to be written.
  std::mutex history_mu_;
  std::condition_variable history_work_cv_;  // events queued, or the log closes
  std::condition_variable history_room_cv_;  // the writer took events from the queue
  std::deque<StoredEvent> history_pending_;  // GUARDED_BY(history_mu_)
  bool history_stop_ = false;                // GUARDED_BY(history_mu_)
  bool history_failed_ = false;  // GUARDED_BY(history_mu_); later events wait for a reopen
  std::thread history_writer_;
};

}  // namespace admission::ledger

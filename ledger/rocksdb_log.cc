#include "ledger/rocksdb_log.h"
#include "ledger/rocksdb_options.h"

#ifdef __linux__
#include <linux/futex.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <pthread.h>
#endif

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <limits>
#include <thread>
#include <unordered_map>

#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/memtablerep.h>
#include <rocksdb/options.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/snapshot.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>
#include <spdlog/spdlog.h>

#include <cstdarg>
#include <cstdio>

#include "ledger/private_files.h"
#include "ledger/sequencer.h"
#include "ledger/verify.h"
#include "schema/workload_refs.h"

namespace admission::ledger {

namespace {

constexpr size_t kHeadRecordBytes = 8 + 32 + 8;

void PutBigEndian64(std::string* out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

uint64_t GetBigEndian64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

std::string EncodeHead(const Head& head) {
  std::string out;
  PutBigEndian64(&out, head.sequence);
  out.append(reinterpret_cast<const char*>(head.hash.data()), head.hash.size());
  PutBigEndian64(&out, static_cast<uint64_t>(head.recorded_at_ns));
  return out;
}

Status DecodeHead(std::string_view value, Head* head) {
  if (value.size() != kHeadRecordBytes) {
    return Status(Code::kCorruption,
                  "head record has " + std::to_string(value.size()) + " bytes, not " +
                      std::to_string(kHeadRecordBytes));
  }
  head->sequence = GetBigEndian64(value.data());
  std::memcpy(head->hash.data(), value.data() + 8, head->hash.size());
  head->recorded_at_ns = static_cast<int64_t>(GetBigEndian64(value.data() + 40));
  return Status::Ok();
}

Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::Ok();
  if (s.IsIOError() && s.ToString().find("lock") != std::string::npos) {
    return Status(Code::kBusy, what + ": the ledger is open in another process (" +
                                   s.ToString() + ")");
  }
  if (s.IsCorruption()) return Status(Code::kCorruption, what + ": " + s.ToString());
  return Status(Code::kIoError, what + ": " + s.ToString());
}

// Index entries go into the batch after all events, in key order (the index family's memtable
// inserts them in batch order).
void PutIndexEntries(rocksdb::ColumnFamilyHandle& index_family,
                     std::vector<std::pair<std::string, Sequence>>* entries,
                     rocksdb::WriteBatch* batch) {
  std::sort(entries->begin(), entries->end());
  std::string sequence_bytes;
  for (const auto& [index_key, sequence] : *entries) {
    sequence_bytes.clear();
    PutBigEndian64(&sequence_bytes, sequence);
    batch->Put(&index_family, index_key, sequence_bytes);
  }
}

// RocksDB's own log goes to ours (spdlog) instead of a LOG file beside the ledger: a file RocksDB
// appends to on its own is one more writer a full disk breaks, and its writer aborts the process
// on a failed append (an assertion in WritableFileWriter) instead of returning an error.
class RocksDbToSpdlog final : public rocksdb::Logger {
 public:
  RocksDbToSpdlog() : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL) {}
  void Logv(const char* format, va_list ap) override {
    Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap);
  }
  void Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) override {
    if (level < GetInfoLogLevel()) return;
    char line[1024];
    std::vsnprintf(line, sizeof line, format, ap);
    // What matters to a user reaches them as a Status of ours (a full disk, a corrupt file);
    // RocksDB's own lines (it logs a missing folder as an error while creating a ledger) are
    // for debugging, except a fatal one.
    if (level >= rocksdb::InfoLogLevel::FATAL_LEVEL) {
      spdlog::error("rocksdb: {}", line);
    } else {
      spdlog::debug("rocksdb: {}", line);
    }
  }
};

// Which manifest the ledger's CURRENT names and how long it is: every change of the set of
// files that hold the ledger (a log turned into a table file, a compaction, a writer's open
// starting a new manifest) shows here before any file it makes obsolete is deleted.
struct ManifestState {
  std::string current;          // CURRENT's text; empty: unreadable
  int64_t manifest_bytes = -1;  // -1: no such manifest
  bool operator==(const ManifestState&) const = default;
};

ManifestState ManifestNow(const std::string& dir) {
  ManifestState state;
  std::ifstream in(dir + "/CURRENT", std::ios::binary);
  std::getline(in, state.current);
  struct stat st;
  if (!state.current.empty() && ::stat((dir + "/" + state.current).c_str(), &st) == 0) {
    state.manifest_bytes = static_cast<int64_t>(st.st_size);
  }
  return state;
}

}  // namespace

rocksdb::DBOptions LedgerDbOptions(bool create_if_missing) {
  rocksdb::DBOptions db_options;
  static const std::shared_ptr<rocksdb::Logger> logger = std::make_shared<RocksDbToSpdlog>();
  db_options.info_log = logger;
  db_options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  db_options.create_if_missing = create_if_missing;
  db_options.create_missing_column_families = true;
  db_options.paranoid_checks = true;
  db_options.max_open_files = 256;
  db_options.keep_log_file_num = 4;
  // The hash memtable of the index family needs it; only the group's leader writes anyway.
  db_options.allow_concurrent_memtable_write = false;
  // The history writer's unsynced writes beside the leader's synced ones: pipelined, a write's
  // WAL step goes on while the one before it still inserts into the memtables, so a leader
  // does not wait for a history write to finish before it starts its own.
  db_options.enable_pipelined_write = true;
  // The history family's memtable is written without the WAL, yet holds back the deletion of
  // every log since it last flushed; past this much log, RocksDB flushes the families that do.
  db_options.max_total_wal_size = kLedgerWalBytesMax;
  // All families' memtables together: past this, the largest is flushed. Each family's own
  // bound (64 MiB, 16 for history) let two memtables per family reach ~290 MiB together.
  db_options.db_write_buffer_size = kLedgerMemtableBytesMax;
  return db_options;
}

rocksdb::ColumnFamilyOptions LedgerEventsFamilyOptions() { return rocksdb::ColumnFamilyOptions(); }

rocksdb::ColumnFamilyOptions LedgerIndexFamilyOptions() {
  // Point lookups only, of keys that are almost always absent and arrive in no order (request
  // ids are random). A hashed memtable inserts them without a skip-list search of a large
  // memtable; bloom filters in the memtable and in every table file answer the misses without
  // reading blocks.
  rocksdb::ColumnFamilyOptions index_options;
  index_options.prefix_extractor.reset(
      rocksdb::NewCappedPrefixTransform(RocksDbLog::kIndexHashBytes));
  index_options.memtable_factory.reset(
      rocksdb::NewHashLinkListRepFactory(RocksDbLog::kIndexHashBuckets));
  index_options.memtable_prefix_bloom_size_ratio = 0.1;
  index_options.memtable_whole_key_filtering = true;
  rocksdb::BlockBasedTableOptions index_table;
  index_table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  index_table.whole_key_filtering = true;
  index_options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(index_table));
  return index_options;
}

namespace {

// The history index's prefix: a key without its last 8 bytes (HistoryKey's sequence), i.e. the
// history key and its '\0'. Every read of the family (RocksDbLog::History) seeks one prefix.
class HistoryPrefix final : public rocksdb::SliceTransform {
 public:
  const char* Name() const override { return "admission.HistoryPrefix"; }
  rocksdb::Slice Transform(const rocksdb::Slice& key) const override {
    return rocksdb::Slice(key.data(), key.size() - 8);
  }
  bool InDomain(const rocksdb::Slice& key) const override { return key.size() > 8; }
};

}  // namespace

rocksdb::ColumnFamilyOptions LedgerHistoryFamilyOptions() {
  // Two or three entries per event, under keys (a workload's name or uid) that arrive in no
  // order: inserted into a skip list, each was a search of a large memtable of random keys, the
  // most of the ledger's CPU per event (docs/ledger.md, "Where the time goes"). A vector
  // memtable appends them and sorts once, when it is flushed. Its reads (a workload's history
  // for explain) sort a copy, so the memtable is kept small, and the prefix bloom filter
  // answers a workload with no entries in it without sorting at all.
  rocksdb::ColumnFamilyOptions history_options;
  history_options.prefix_extractor = std::make_shared<HistoryPrefix>();
  history_options.memtable_factory = std::make_shared<rocksdb::VectorRepFactory>();
  history_options.memtable_prefix_bloom_size_ratio = 0.1;
  history_options.write_buffer_size = RocksDbLog::kHistoryMemtableBytes;
  rocksdb::BlockBasedTableOptions history_table;
  history_table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  history_table.whole_key_filtering = false;
  history_options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(history_table));
  return history_options;
}

namespace {

// The ledger's column families as it opens them.
std::vector<rocksdb::ColumnFamilyDescriptor> LedgerFamilies(bool with_history) {
  std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, LedgerEventsFamilyOptions()},
      {RocksDbLog::kIndexFamily, LedgerIndexFamilyOptions()},
  };
  if (with_history) families.push_back({RocksDbLog::kHistoryFamily, LedgerHistoryFamilyOptions()});
  return families;
}

// RocksDB's read-only mode reads the manifest (the table files and which logs are still live),
// then the logs, then opens the table files, with no lock: a writer's open, flush or compaction
// in between (a new manifest, then the old logs and tables deleted) left it with the events of
// the new logs but not those of the deleted ones (a gap below the head: a false "event is
// missing"), or naming a table file gone by then (a false Corruption). Every such change shows
// in CURRENT or the manifest's length before its obsolete files are deleted, so an open during
// which neither changed saw one version of the ledger whole; any other is closed and taken again.
// Every table file is opened during the open (max_open_files = -1): one that a later compaction
// deletes stays readable, so the version stays whole while the reader reads.
// Sets *opened to RocksDB's answer (the caller reports its errors) and *with_history to whether
// the ledger has the history family; fails itself with kInvalidArgument (a ledger from before
// the index family) or kBusy (the files changed during every attempt).
Status OpenReadOnlyDb(rocksdb::DBOptions db_options, const std::string& dir, bool* with_history,
                      std::vector<rocksdb::ColumnFamilyHandle*>* handles, rocksdb::DB** raw,
                      rocksdb::Status* opened) {
  db_options.max_open_files = -1;
  for (int attempt = 1;; ++attempt) {
    const ManifestState before = ManifestNow(dir);
    std::vector<std::string> existing;
    rocksdb::Status s = rocksdb::DB::ListColumnFamilies(db_options, dir, &existing);
    const bool indexed = std::find(existing.begin(), existing.end(),
                                   RocksDbLog::kIndexFamily) != existing.end();
    *with_history = std::find(existing.begin(), existing.end(), RocksDbLog::kHistoryFamily) !=
                    existing.end();
    if (s.ok() && indexed) {
      s = rocksdb::DB::OpenForReadOnly(db_options, dir, LedgerFamilies(*with_history), handles,
                                       raw);
    }
    if (ManifestNow(dir) == before) {
      *opened = s;
      if (s.ok() && !indexed) {
        return Status(Code::kInvalidArgument,
                      "the ledger at " + dir + " predates its index family: open it once to "
                      "write (any admitctl command that records) before reading it read-only");
      }
      return Status::Ok();
    }
    if (s.ok() && *raw != nullptr) {
      for (rocksdb::ColumnFamilyHandle* h : *handles) (*raw)->DestroyColumnFamilyHandle(h);
      delete *raw;
    }
    handles->clear();
    *raw = nullptr;
    if (attempt == kReadOnlyOpenAttemptsMax) {
      return Status(Code::kBusy, "opening the ledger at " + dir + " to read: another process " +
                                     "changed its files during each of " +
                                     std::to_string(kReadOnlyOpenAttemptsMax) +
                                     " read-only opens; try again");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(kReadOnlyOpenRetryMs));
  }
}

}  // namespace

// Where a queued appender waits. The leader sets `state` (release) once it has written
// everything the appender reads, then notifies; the appender reads `state` (acquire).
struct RocksDbLog::Waiter {
  static constexpr uint32_t kWaiting = 0;
  static constexpr uint32_t kDone = 1;  // the request's result is set
  static constexpr uint32_t kLead = 2;  // the request is at the front: lead the next group
  std::atomic<uint32_t> state{kWaiting};
  Waiter* next = nullptr;  // in free_waiters_ or returned_waiters_

  uint32_t Wait() {
    for (;;) {
      const uint32_t s = state.load(std::memory_order_acquire);
      if (s != kWaiting) return s;
      SleepWhile(kWaiting);
    }
  }
  // After the store the request may be gone; the waiter is not (the log owns it), so notifying
  // it is safe even when its appender has already returned. A late notify reaching the next
  // owner of this waiter is a spurious wake: Wait checks the state again.
  void Wake(uint32_t s) {
    state.store(s, std::memory_order_release);
    WakeOne();
  }

 private:
#ifdef __linux__
  // The futex under std::atomic::wait, without the sched_yield rounds libstdc++ spins first:
  // with many more appenders than cores, each yield is one more context switch.
  void SleepWhile(uint32_t value) {
    static_assert(sizeof(state) == sizeof(uint32_t));
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state), FUTEX_WAIT_PRIVATE, value, nullptr,
            nullptr, 0);
  }
  void WakeOne() {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state), FUTEX_WAKE_PRIVATE, 1, nullptr,
            nullptr, 0);
  }
#else
  void SleepWhile(uint32_t value) { state.wait(value, std::memory_order_acquire); }
  void WakeOne() { state.notify_one(); }
#endif
};

// One Append, from its check until its result is set. Lives on the appender's stack; the leader
// touches it only while the appender waits (before Waiter::Wake).
struct RocksDbLog::Request {
  std::span<const std::string> batch;
  CheckedBatch checked;  // prepared by the appender before it queued
  Result<AppendAck> result = Status(Code::kIoError, "not written");
  bool done = false;
  Waiter* waiter = nullptr;  // set under mu_ when the request queues behind a leader
};

std::string RocksDbLog::EventKey(Sequence sequence) {
  std::string key = "e";
  PutBigEndian64(&key, sequence);
  return key;
}

std::string RocksDbLog::IndexKey(std::string_view idempotency_key) {
  return std::string(idempotency_key);
}

RocksDbLog::RocksDbLog(std::unique_ptr<rocksdb::DB> db,
                       std::unique_ptr<rocksdb::ColumnFamilyHandle> events_family,
                       std::unique_ptr<rocksdb::ColumnFamilyHandle> index_family,
                       std::unique_ptr<rocksdb::ColumnFamilyHandle> history_family,
                       const std::string& dir, const RocksDbLogOptions& options)
    : db_(std::move(db)),
      events_family_(std::move(events_family)),
      index_family_(std::move(index_family)),
      history_family_(std::move(history_family)),
      dir_(dir),
      options_(options) {}

RocksDbLog::~RocksDbLog() {
  {
    std::lock_guard<std::mutex> lock(history_mu_);
    history_stop_ = true;
  }
  history_work_cv_.notify_one();
  if (history_writer_.joinable()) {
    history_writer_.join();
    // Entries written without the WAL (synced appends) reach the disk before the ledger closes;
    // with the WAL they are safe already, and a flush per close would only add table files.
    const Status flushed = options_.sync ? FlushHistory(true) : Status::Ok();
    if (!flushed.ok()) {
      spdlog::warn("the history index of {} was not flushed on close (the next open writes "
                   "what it lacks): {}", dir_, flushed.ToString());
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ADM_CHECK(queue_.empty() && !leading_, "ledger closed with %zu appends in flight%s",
              queue_.size(), leading_ ? " and a group commit running" : "");
  }
  // Handles go before the database.
  history_family_.reset();
  index_family_.reset();
  events_family_.reset();
}

// Ledgers written before the index had its own column family kept it in the default family
// under `i` + key. Moved on the first open by this version: copied into the index family and
// deleted from the default one in synced batches, each atomic. Every open looks (one seek), so
// an interrupted move is finished by the next open.
Status RocksDbLog::MoveIndexToItsFamily(rocksdb::DB& db, rocksdb::ColumnFamilyHandle& index,
                                        const std::string& dir) {
  constexpr size_t kMoveBatchEntries = 4096;
  rocksdb::WriteOptions synced;
  synced.sync = true;
  for (;;) {
    rocksdb::WriteBatch batch;
    size_t entries = 0;
    std::unique_ptr<rocksdb::Iterator> it(db.NewIterator(rocksdb::ReadOptions()));
    for (it->Seek("i"); it->Valid() && entries < kMoveBatchEntries; it->Next()) {
      rocksdb::Slice key = it->key();
      if (key.empty() || key[0] != 'i') break;
      rocksdb::Slice idempotency_key(key.data() + 1, key.size() - 1);
      batch.Put(&index, idempotency_key, it->value());
      batch.Delete(key);
      ++entries;
    }
    ADM_RETURN_IF_ERROR(FromRocks(it->status(), "reading the old index of " + dir));
    it.reset();
    if (entries == 0) return Status::Ok();
    ADM_RETURN_IF_ERROR(
        FromRocks(db.Write(synced, &batch), "moving the index of " + dir + " to its family"));
  }
}

namespace {

// The free-space floor (--min-free-bytes, by default from the filesystem's size), and a first
// check of it: a ledger opened to write on a disk already below it is refused.
Result<uint64_t> FreeSpaceFloor(const std::string& dir, const RocksDbLogOptions& options) {
  uint64_t min_free_bytes = options.min_free_bytes.value_or(kDefaultMinFreeBytesMax);
  std::error_code ec;
  const std::filesystem::path probe =
      std::filesystem::exists(dir, ec) ? std::filesystem::path(dir)
                                       : std::filesystem::absolute(dir, ec).parent_path();
  struct statvfs st;
  if (statvfs(probe.c_str(), &st) == 0) {
    if (!options.min_free_bytes) {
      min_free_bytes = DefaultMinFreeBytes(static_cast<uint64_t>(st.f_blocks) * st.f_frsize);
    }
    const uint64_t free = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
    if (!options.read_only && free < min_free_bytes) {
      return Status(Code::kNoSpace,
                    "opening the ledger at " + dir + " to write: its disk has " +
                        std::to_string(free) + " bytes free, below the free-space floor of " +
                        std::to_string(min_free_bytes) +
                        " bytes (--min-free-bytes); nothing was written; read-only commands "
                        "(log, verify, get, explain, replay) still work");
    }
  }
  return min_free_bytes;
}

// Why RocksDB did not open the ledger, as our codes: not found, no space, or its own error.
Status OpenFailure(const rocksdb::Status& s, const std::string& dir, bool create) {
  if (s.IsInvalidArgument() && !create) {
    return Status(Code::kNotFound, "no ledger at " + dir + " (" + s.ToString() + ")");
  }
  if (s.IsNoSpace() || s.ToString().find("No space") != std::string::npos) {
    struct statvfs st;
    const std::string free = statvfs(dir.c_str(), &st) == 0
                                 ? std::to_string(static_cast<uint64_t>(st.f_bavail) * st.f_frsize)
                                 : std::string("no");
    return Status(Code::kNoSpace, "opening the ledger at " + dir + " to write: its disk has " +
                                      free + " bytes free (" + s.ToString() +
                                      "); nothing was written; read-only commands still work");
  }
  return FromRocks(s, "opening the ledger at " + dir);
}

// Verifies the last kOpenTailCheckEvents events' chain (or that an empty ledger holds none).
Status CheckTail(RocksDbLog& log, const std::string& dir) {
  Head head = log.GetHead();
  if (head.sequence > 0) {
    Sequence from = head.sequence > kOpenTailCheckEvents
                        ? head.sequence - kOpenTailCheckEvents + 1
                        : 1;
    schema::Hash from_hash = schema::kGenesisHash;
    if (from > 1) {
      // Trust the first checked event's own link; the full verify checks it.
      Result<std::vector<StoredEvent>> first = log.Read(from, 1);
      if (!first.ok()) return first.status();
      if (first->empty() || first->front().sequence != from) {
        return Status(Code::kCorruption, "ledger at " + dir + ": event " +
                                             std::to_string(from) + " is missing");
      }
      Result<schema::DecodedEvent> decoded = schema::DecodeEvent(first->front().bytes);
      if (!decoded.ok()) {
        return Status(Code::kCorruption, "ledger at " + dir + ": event " +
                                             std::to_string(from) + ": " +
                                             decoded.status().message());
      }
      from_hash = schema::HashFromData(decoded->root().getPrevHash());
    }
    Result<VerifyReport> report = VerifyChain(log, from, from_hash, false);
    if (!report.ok()) return report.status();
    if (report->fault) {
      return Status(Code::kCorruption,
                    "ledger at " + dir + " fails its hash chain at sequence " +
                        std::to_string(report->fault->sequence) + ": " +
                        report->fault->reason + "; refusing to open it");
    }
  } else {
    Result<std::vector<StoredEvent>> any = log.Read(1, 1);
    if (!any.ok()) return any.status();
    if (!any->empty()) {
      return Status(Code::kCorruption,
                    "ledger at " + dir + " has events but no head record (first: sequence " +
                        std::to_string(any->front().sequence) + ")");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<RocksDbLog>> RocksDbLog::Open(const std::string& dir,
                                                     const RocksDbLogOptions& options) {
  // RocksDB creates the directory even when it then refuses to create a database; a read of
  // a missing ledger must leave nothing behind.
  const bool read_only = options.read_only;
  const bool create = options.create_if_missing && !read_only;
  if (!create && !std::filesystem::exists(dir + "/CURRENT")) {
    return Status(Code::kNotFound, "no ledger at " + dir);
  }
  auto min_free_bytes = FreeSpaceFloor(dir, options);
  if (!min_free_bytes.ok()) return min_free_bytes.status();
  rocksdb::DBOptions db_options = LedgerDbOptions(create);
  // Private to the user (docs/operations.md, "Files and modes"): a new ledger's folder is made
  // here, before RocksDB would make it 0755, and RocksDB's files are made 0600, not 0644. A test's
  // own environment (a file system that fails on demand) keeps the umask's modes.
  db_options.env = options.env != nullptr ? options.env : PrivateFilesEnv();
  if (create) ADM_RETURN_IF_ERROR(CreatePrivateDirectory(dir));
  bool with_history = true;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s;
  if (read_only) {
    ADM_RETURN_IF_ERROR(OpenReadOnlyDb(db_options, dir, &with_history, &handles, &raw, &s));
  } else {
    s = rocksdb::DB::Open(db_options, dir, LedgerFamilies(true), &handles, &raw);
  }
  if (!s.ok()) return OpenFailure(s, dir, create);
  std::unique_ptr<rocksdb::DB> db(raw);
  ADM_CHECK(handles.size() == (with_history ? 3u : 2u), "%zu column family handles",
            handles.size());
  std::unique_ptr<rocksdb::ColumnFamilyHandle> events_family(handles[0]);
  std::unique_ptr<rocksdb::ColumnFamilyHandle> index_family(handles[1]);
  std::unique_ptr<rocksdb::ColumnFamilyHandle> history_family(with_history ? handles[2] : nullptr);
  if (!read_only) ADM_RETURN_IF_ERROR(MoveIndexToItsFamily(*db, *index_family, dir));
  std::unique_ptr<RocksDbLog> log(new RocksDbLog(std::move(db), std::move(events_family),
                                                 std::move(index_family), std::move(history_family),
                                                 dir, options));
  log->min_free_bytes_ = *min_free_bytes;
  ADM_RETURN_IF_ERROR(log->LoadHead());
  // Check the tail before anyone appends to it.
  ADM_RETURN_IF_ERROR(CheckTail(*log, dir));
  // After the tail check: the history index is completed once the tail is trusted.
  ADM_RETURN_IF_ERROR(log->OpenHistory());
  return log;
}

namespace {

// kHistoryThroughKey's value: 8 bytes, big-endian. Read from the history family (null: none),
// else from `default`, where ledgers written before it moved keep it.
Result<std::optional<Sequence>> ReadHistoryThrough(rocksdb::DB& db,
                                                   const rocksdb::ReadOptions& read,
                                                   rocksdb::ColumnFamilyHandle* history) {
  std::string value;
  rocksdb::Status s = rocksdb::Status::NotFound();
  if (history != nullptr) s = db.Get(read, history, RocksDbLog::kHistoryThroughKey, &value);
  if (s.IsNotFound()) s = db.Get(read, RocksDbLog::kHistoryThroughKey, &value);
  if (s.IsNotFound()) return std::optional<Sequence>();
  ADM_RETURN_IF_ERROR(FromRocks(s, "reading how far the history index goes"));
  if (value.size() != 8) {
    return Status(Code::kCorruption, "the history index's last sequence has " +
                                         std::to_string(value.size()) + " bytes, not 8");
  }
  return std::optional<Sequence>(GetBigEndian64(value.data()));
}

}  // namespace

Status RocksDbLog::OpenHistory() {
  std::string state;
  rocksdb::Status hs = db_->Get(rocksdb::ReadOptions(), kHistoryStateKey, &state);
  if (!hs.ok() && !hs.IsNotFound()) return FromRocks(hs, "reading the history index's state");
  history_complete_ = history_family_ != nullptr && hs.ok() && state == kHistoryComplete;
  if (options_.read_only) return Status::Ok();
  Result<std::optional<Sequence>> through =
      ReadHistoryThrough(*db_, rocksdb::ReadOptions(), history_family_.get());
  if (!through.ok()) return through.status();
  const Sequence head = GetHead().sequence;
  // Not complete: from the first event (an interrupted build starts again). Complete without a
  // last sequence: written with the events, by an older version.
  const Sequence from =
      !history_complete_ ? 1 : through->has_value() ? **through + 1 : head + 1;
  if (!history_complete_ || from <= head) ADM_RETURN_IF_ERROR(BuildHistory(from));
  history_writer_ = std::thread([this] {
#ifdef __linux__
    // Named for profiles and top's thread view (at most 15 characters).
    ::pthread_setname_np(::pthread_self(), "ledger:history");
#endif
    WriteHistoryBehind();
  });
  return Status::Ok();
}

std::string RocksDbLog::HistoryKey(std::string_view history_key, Sequence sequence) {
  std::string key;
  key.reserve(history_key.size() + 9);
  key.append(history_key);
  key.push_back('\0');
  PutBigEndian64(&key, sequence);
  return key;
}

namespace {

// Puts the history entries of event `sequence` (HistoryKey(k, sequence) for each of `keys`) into
// `batch`, each key laid out in `scratch`, which is reused: no allocation once it has grown.
void PutHistoryEntries(rocksdb::WriteBatch* batch, rocksdb::ColumnFamilyHandle* family,
                       Sequence sequence, const schema::HistoryKeyTexts& keys,
                       std::string* scratch) {
  for (size_t i = 0; i < keys.size(); ++i) {
    scratch->assign(keys[i]);
    scratch->push_back('\0');
    PutBigEndian64(scratch, sequence);
    batch->Put(family, *scratch, rocksdb::Slice());
  }
}

}  // namespace

Status RocksDbLog::BuildHistory(Sequence from) {
  const Sequence head = GetHead().sequence;
  // Bounded batches, each with how far it went (an interrupted completion goes on from there;
  // an interrupted build of an older ledger's index starts again).
  constexpr size_t kEventsPerBatch = 8192;
  schema::HistoryKeyTexts keys;
  std::string scratch;
  std::string through;
  Sequence next = std::max<Sequence>(from, 1);
  while (next <= head) {
    rocksdb::WriteBatch batch;
    Status failed;
    auto shown = Scan(next, kEventsPerBatch, [&](Sequence sequence, std::string_view bytes) {
      auto decoded = schema::DecodeEvent(bytes);
      if (!decoded.ok()) {
        failed = Status(Code::kCorruption, "indexing the history of " + dir_ + ": event " +
                                               std::to_string(sequence) + ": " +
                                               decoded.status().message());
        return false;
      }
      schema::HistoryKeysInto(decoded->root(), &keys);
      PutHistoryEntries(&batch, history_family_.get(), sequence, keys, &scratch);
      next = sequence + 1;
      return true;
    });
    if (!shown.ok()) return shown.status();
    ADM_RETURN_IF_ERROR(failed);
    if (*shown == 0) break;
    through.clear();
    PutBigEndian64(&through, next - 1);
    batch.Put(history_family_.get(), kHistoryThroughKey, through);
    ADM_RETURN_IF_ERROR(FromRocks(db_->Write(rocksdb::WriteOptions(), &batch),
                                  "writing the history index of " + dir_));
    if (options_.history_progress) options_.history_progress(next - 1, head);
  }
  rocksdb::WriteOptions synced;
  synced.sync = options_.sync;
  rocksdb::WriteBatch complete;
  through.clear();
  PutBigEndian64(&through, head);
  complete.Put(history_family_.get(), kHistoryThroughKey, through);
  // For older versions, which read `I` in `default` only: they index the events after it again.
  complete.Put(kHistoryThroughKey, through);
  complete.Put(kHistoryStateKey, kHistoryComplete);
  ADM_RETURN_IF_ERROR(FromRocks(db_->Write(synced, &complete),
                                "marking the history index of " + dir_ + " complete"));
  history_complete_ = true;
  return Status::Ok();
}

Status RocksDbLog::FlushHistory(bool wait) {
  rocksdb::FlushOptions flush;
  flush.wait = wait;
  return FromRocks(db_->Flush(flush, history_family_.get()), "flushing the history index of " + dir_);
}

void RocksDbLog::QueueHistory(std::vector<PreparedAppend>& prepared) {
  const auto started = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(history_mu_);
  history_room_cv_.wait(lock, [this] {
    return history_pending_.size() < kHistoryPendingEventsMax || history_failed_;
  });
  history_wait_seconds_.fetch_add(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
      std::memory_order_relaxed);
  // After a failed history write the index stays where it is; the next open goes on from there.
  if (history_failed_) return;
  for (PreparedAppend& p : prepared) {
    for (StoredEvent& e : p.events) history_pending_.push_back(std::move(e));
  }
  lock.unlock();
  history_work_cv_.notify_one();
}

void RocksDbLog::WriteHistoryBehind() {
  std::vector<StoredEvent> events;
  size_t unflushed = 0;  // events indexed since this thread's last flush
  std::unique_lock<std::mutex> lock(history_mu_);
  for (;;) {
    history_work_cv_.wait(lock, [this] { return history_stop_ || !history_pending_.empty(); });
    if (history_pending_.empty()) return;  // closing, and every queued event is indexed
    events.clear();
    while (!history_pending_.empty() && events.size() < kHistoryWriteEventsMax) {
      events.push_back(std::move(history_pending_.front()));
      history_pending_.pop_front();
    }
    lock.unlock();
    history_room_cv_.notify_all();
    Status written = WriteHistoryEntries(events);
    unflushed += events.size();
    // Only entries written without the WAL are invisible to a reader in another process.
    if (written.ok() && options_.sync && unflushed >= kHistoryUnflushedEventsMax) {
      written = FlushHistory(false);
      unflushed = 0;
    }
    lock.lock();
    if (!written.ok()) {
      spdlog::warn("the history index of {} stops at the event before {} until the ledger is "
                   "opened again: {}", dir_, events.front().sequence, written.ToString());
      history_failed_ = true;
      history_pending_.clear();
      history_room_cv_.notify_all();
    }
  }
}

Status RocksDbLog::WriteHistoryEntries(std::span<const StoredEvent> events) {
  ADM_CHECK(!events.empty(), "a history write of no events");
  // About two entries of about 60 bytes per event.
  rocksdb::WriteBatch batch(64 + events.size() * 128);
  schema::HistoryKeyTexts keys;
  std::string scratch;
  Sequence expected = events.front().sequence;
  for (const StoredEvent& e : events) {
    ADM_CHECK(e.sequence == expected, "history of event %lu after %lu",
              static_cast<unsigned long>(e.sequence), static_cast<unsigned long>(expected - 1));
    ++expected;
    // The bytes this log sequenced itself: canonical, checked before they were stored.
    schema::HistoryKeysOfCanonical(e.bytes, &keys);
    PutHistoryEntries(&batch, history_family_.get(), e.sequence, keys, &scratch);
  }
  std::string through;
  PutBigEndian64(&through, events.back().sequence);
  // In the entries' family: its memtables reach the disk whole and in write order, so `I` is
  // never durable before the entries it covers.
  batch.Put(history_family_.get(), kHistoryThroughKey, through);
  // Without the WAL: the events are durable, and the entries a crash loses with the memtable are
  // written again by Open, from `I`. Not so when the events' own writes are unsynced: a flushed
  // history could then cover events a crash lost.
  rocksdb::WriteOptions write_options;
  write_options.disableWAL = options_.sync;
  return FromRocks(db_->Write(write_options, &batch), "writing the history index of " + dir_);
}

Result<std::optional<std::vector<Sequence>>> RocksDbLog::History(std::string_view history_key,
                                                                    Sequence at_most) {
  using Found = std::optional<std::vector<Sequence>>;
  if (!history_complete_) return Found();
  // One view of the head, the index and the events: the index's entries up to the last event
  // it holds, then the events after that one, read here (the history writer's lag, or what a
  // crash left for the next writable open). A read-only database does not change.
  std::unique_ptr<const rocksdb::Snapshot, std::function<void(const rocksdb::Snapshot*)>> view(
      options_.read_only ? nullptr : db_->GetSnapshot(),
      [this](const rocksdb::Snapshot* s) { if (s != nullptr) db_->ReleaseSnapshot(s); });
  rocksdb::ReadOptions read;
  read.snapshot = view.get();
  std::string head_value;
  Head head;
  rocksdb::Status s = db_->Get(read, kHeadKey, &head_value);
  if (!s.IsNotFound()) {
    ADM_RETURN_IF_ERROR(FromRocks(s, "reading the head"));
    ADM_RETURN_IF_ERROR(DecodeHead(head_value, &head));
  }
  Result<std::optional<Sequence>> through = ReadHistoryThrough(*db_, read, history_family_.get());
  if (!through.ok()) return through.status();
  const Sequence indexed = std::min(through->value_or(head.sequence), head.sequence);
  const Sequence last = at_most == 0 ? head.sequence : std::min(at_most, head.sequence);
  if (last > indexed && last - indexed > kHistoryTailEventsMax) return Found();

  std::string prefix(history_key);
  prefix.push_back('\0');
  std::vector<Sequence> out;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, history_family_.get()));
  // The first key of the prefix, so that the family's prefix extractor (which drops a key's
  // last 8 bytes) finds the prefix in its bloom filters.
  for (it->Seek(HistoryKey(history_key, 0)); it->Valid(); it->Next()) {
    rocksdb::Slice key = it->key();
    if (key.size() != prefix.size() + 8 || !key.starts_with(prefix)) break;
    const Sequence sequence = GetBigEndian64(key.data() + prefix.size());
    if (sequence > std::min(indexed, last)) break;
    out.push_back(sequence);
  }
  ADM_RETURN_IF_ERROR(FromRocks(it->status(), "reading the history index"));
  if (last > indexed) {
    ADM_RETURN_IF_ERROR(HistoryOfEvents(view.get(), history_key, indexed, last, &out));
  }
  return Found(std::move(out));
}

Status RocksDbLog::HistoryOfEvents(const rocksdb::Snapshot* snapshot,
                                   std::string_view history_key, Sequence from, Sequence to,
                                   std::vector<Sequence>* out) {
  rocksdb::ReadOptions read;
  read.snapshot = snapshot;
  read.verify_checksums = true;
  std::vector<std::string> keys;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, events_family_.get()));
  Sequence expected = from + 1;
  for (it->Seek(EventKey(expected)); it->Valid() && expected <= to; it->Next(), ++expected) {
    rocksdb::Slice key = it->key();
    if (key.size() != 9 || key[0] != 'e' || GetBigEndian64(key.data() + 1) != expected) break;
    // Read from disk: decoded with its checks, not trusted as the writer's own bytes are.
    Result<schema::DecodedEvent> decoded =
        schema::DecodeEvent(std::string_view(it->value().data(), it->value().size()));
    if (!decoded.ok()) {
      return Status(Code::kCorruption, "event " + std::to_string(expected) + ": " +
                                           decoded.status().message());
    }
    schema::HistoryKeysOf(decoded->root(), &keys);
    if (std::find(keys.begin(), keys.end(), history_key) != keys.end()) {
      out->push_back(expected);
    }
  }
  ADM_RETURN_IF_ERROR(FromRocks(it->status(), "reading the ledger"));
  if (expected <= to) {
    return Status(Code::kCorruption, "event " + std::to_string(expected) + " is missing");
  }
  return Status::Ok();
}

std::string RocksDbLog::NoSpaceMessage(uint64_t free) const {
  std::string why = "the ledger's disk at " + dir_ + " has " + std::to_string(free) + " bytes free";
  if (free < min_free_bytes_) {
    why += ", below the free-space floor of " + std::to_string(min_free_bytes_) +
           " bytes (--min-free-bytes)";
  } else {
    why += " and the storage engine has not recovered from running out of it yet";
  }
  return why + ": nothing of this append was written; appends resume by themselves once "
               "space returns";
}

uint64_t RocksDbLog::FreeBytes() {
  // Through RocksDB's environment (statvfs underneath; a test's file system may say otherwise).
  uint64_t free = std::numeric_limits<uint64_t>::max();
  rocksdb::Env* env = options_.env != nullptr ? options_.env : rocksdb::Env::Default();
  if (!env->GetFreeSpace(dir_, &free).ok()) {
    struct statvfs st;
    if (statvfs(dir_.c_str(), &st) == 0) free = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  }
  free_bytes_.store(free, std::memory_order_relaxed);
  return free;
}

bool RocksDbLog::TryResume() {
  // RocksDB recovers from a full disk by itself (its SstFileManager, once a write buffer's worth
  // is free again) and answers Busy meanwhile; Resume then finds nothing to do.
  rocksdb::Status resumed = db_->Resume();
  if (!resumed.ok()) {
    if (!resume_warned_.exchange(true)) {
      spdlog::warn("the ledger at {} cannot take writes yet: {}", dir_, resumed.ToString());
    }
    return false;
  }
  resume_warned_.store(false);
  rocks_no_space_.store(false, std::memory_order_relaxed);
  spdlog::info("the ledger at {} takes writes again", dir_);
  return true;
}

Status RocksDbLog::CheckRoom() {
  const uint64_t free = FreeBytes();
  bool refuse = free < min_free_bytes_;
  if (!refuse && rocks_no_space_.load(std::memory_order_relaxed)) {
    refuse = free < kResumeFreeBytesMin || !TryResume();
  }
  refusing_.store(refuse, std::memory_order_relaxed);
  if (!refuse) return Status::Ok();
  appends_refused_.fetch_add(1, std::memory_order_relaxed);
  return Status(Code::kNoSpace, NoSpaceMessage(free));
}

Status RocksDbLog::WriteFailed(const rocksdb::Status& failure, const std::string& what) {
  if (failure.IsNoSpace() || failure.ToString().find("No space") != std::string::npos) {
    rocks_no_space_.store(true, std::memory_order_relaxed);
    refusing_.store(true, std::memory_order_relaxed);
    appends_refused_.fetch_add(1, std::memory_order_relaxed);
    return Status(Code::kNoSpace, what + ": " + NoSpaceMessage(FreeBytes()) + " (" +
                                      failure.ToString() + ")");
  }
  return FromRocks(failure, what);
}

std::optional<DiskState> RocksDbLog::Disk() {
  DiskState d;
  d.free_bytes = FreeBytes();
  d.min_free_bytes = min_free_bytes_;
  bool refusing = d.free_bytes < min_free_bytes_;
  if (!refusing && rocks_no_space_.load(std::memory_order_relaxed)) {
    refusing = d.free_bytes < kResumeFreeBytesMin || !TryResume();
  }
  if (!options_.read_only) refusing_.store(refusing, std::memory_order_relaxed);
  d.refusing = refusing && !options_.read_only;
  if (d.refusing) d.why = NoSpaceMessage(d.free_bytes);
  d.appends_refused = appends_refused_.load(std::memory_order_relaxed);
  return d;
}

Status RocksDbLog::LoadHead() {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), kHeadKey, &value);
  if (s.IsNotFound()) return Status::Ok();
  ADM_RETURN_IF_ERROR(FromRocks(s, "reading the head"));
  std::lock_guard<std::mutex> lock(mu_);
  return DecodeHead(value, &head_);
}

Result<AppendAck> RocksDbLog::Append(std::span<const std::string> batch) {
  if (batch.empty() || batch.size() > kAppendBatchEventsMax) {
    return Status(Code::kInvalidArgument, "an append holds 1 to " +
                                              std::to_string(kAppendBatchEventsMax) +
                                              " events, not " + std::to_string(batch.size()));
  }
  if (options_.read_only) {
    return Status(Code::kInvalidArgument, "the ledger at " + dir_ + " is open read-only");
  }
  Request request;
  request.batch = batch;
  // Decoding, validating and laying out the events depends on nothing but the batch: done
  // here, on the appender's thread and in parallel with other appenders, so the leader's
  // serial work is sequencing, prevHash and SHA-256 only.
  request.checked = CheckBatch(batch);
  if (request.checked.events.empty()) return request.checked.failure;  // event 0: no head needed

  std::unique_lock<std::mutex> lock(mu_);
  queue_.push_back(&request);
  queued_events_ += batch.size();
  if (gathering_) {
    last_arrival_ = std::chrono::steady_clock::now();
    if (queue_.size() >= gather_target_ || queued_events_ >= kGroupEventsMax) {
      gather_cv_.notify_one();
    }
  }
  if (!leading_) {
    ADM_CHECK(queue_.size() == 1, "%zu requests queued without a leader", queue_.size());
    leading_ = true;
    LeadGroup(lock);
  } else {
    Waiter* waiter = AcquireWaiter();
    request.waiter = waiter;
    lock.unlock();
    const uint32_t state = waiter->Wait();
    ReleaseWaiter(waiter);
    if (state == Waiter::kLead) {
      lock.lock();
      LeadGroup(lock);
    } else {
      ADM_CHECK(state == Waiter::kDone, "waiter state %u", state);
    }
  }
  ADM_CHECK(request.done, "request not completed by its group");
  return std::move(request.result);
}

RocksDbLog::Waiter* RocksDbLog::AcquireWaiter() {
  if (free_waiters_ == nullptr) {
    free_waiters_ = returned_waiters_.exchange(nullptr, std::memory_order_acquire);
  }
  Waiter* waiter = free_waiters_;
  if (waiter == nullptr) {
    waiters_.push_back(std::make_unique<Waiter>());
    waiter = waiters_.back().get();
  } else {
    free_waiters_ = waiter->next;
  }
  waiter->next = nullptr;
  waiter->state.store(Waiter::kWaiting, std::memory_order_relaxed);
  return waiter;
}

void RocksDbLog::ReleaseWaiter(Waiter* waiter) {
  // Pushes only; AcquireWaiter takes the whole list at once, so there is no ABA.
  Waiter* head = returned_waiters_.load(std::memory_order_relaxed);
  do {
    waiter->next = head;
  } while (!returned_waiters_.compare_exchange_weak(head, waiter, std::memory_order_release,
                                                    std::memory_order_relaxed));
}

void RocksDbLog::LeadGroup(std::unique_lock<std::mutex>& lock) {
  ADM_CHECK(lock.owns_lock() && leading_ && !queue_.empty(), "LeadGroup without the lead");
  Request* const own = queue_.front();
  Gather(lock);
  // Take the group: the leader and whoever queued behind it, up to the group limit. Requests
  // queuing from now on form the next group.
  std::vector<Request*> group;
  size_t events = 0;
  while (!queue_.empty()) {
    Request* r = queue_.front();
    if (!group.empty() && events + r->batch.size() > kGroupEventsMax) break;
    group.push_back(r);
    events += r->batch.size();
    queue_.pop_front();
  }
  queued_events_ -= events;
  const Head before = head_;
  lock.unlock();

  uint64_t events_written = 0;
  const Head after = CommitGroup(group, before, &events_written);

  // Complete the group under the lock, then wake outside it.
  lock.lock();
  ADM_CHECK(head_.sequence == before.sequence, "head moved under the leader: %lu -> %lu",
            static_cast<unsigned long>(before.sequence),
            static_cast<unsigned long>(head_.sequence));
  if (events_written > 0) {
    ADM_CHECK(after.sequence == before.sequence + events_written, "head %lu after %lu + %lu",
              static_cast<unsigned long>(after.sequence),
              static_cast<unsigned long>(before.sequence),
              static_cast<unsigned long>(events_written));
    head_ = after;
    ++stats_.writes;
    stats_.events_written += events_written;
  }
  // Everyone known to be appending: the next leader waits for them.
  gather_target_ = group.size() + queue_.size();
  Waiter* next_leader = nullptr;
  if (queue_.empty()) {
    leading_ = false;
  } else {
    next_leader = queue_.front()->waiter;
    ADM_CHECK(next_leader != nullptr, "queued request without a waiter");
  }
  lock.unlock();

  // Every request of the group has its result; wake each on its own waiter, the next leader
  // last so that the group's appenders can queue again before it takes its group.
  for (Request* r : group) {
    r->done = true;
    if (r == own) continue;
    Waiter* waiter = r->waiter;  // r may be gone once woken
    waiter->Wake(Waiter::kDone);
  }
  ADM_CHECK(own->done, "the leader's own request was not in its group");
  if (next_leader != nullptr) next_leader->Wake(Waiter::kLead);
}

void RocksDbLog::Gather(std::unique_lock<std::mutex>& lock) {
  using Clock = std::chrono::steady_clock;
  if (queue_.size() >= gather_target_ || queued_events_ >= kGroupEventsMax) return;
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + std::chrono::microseconds(kGatherWaitMaxUs);
  gathering_ = true;
  last_arrival_ = start;
  while (queue_.size() < gather_target_ && queued_events_ < kGroupEventsMax) {
    const Clock::time_point until =
        std::min(deadline, last_arrival_ + std::chrono::microseconds(kGatherIdleMaxUs));
    if (Clock::now() >= until) break;
    gather_cv_.wait_until(lock, until);
  }
  gathering_ = false;
}

struct RocksDbLog::PrefetchedIndex {
  std::vector<rocksdb::Slice> slices;  // views of the group's own keys (IndexKey is the key)
  std::vector<rocksdb::PinnableSlice> values;
  std::vector<rocksdb::Status> statuses;
  std::unordered_map<std::string_view, size_t> positions;  // key -> position in the MultiGet
};

KeyLookup RocksDbLog::PrefetchIndex(const std::vector<Request*>& group, PrefetchedIndex* index) {
  // The durable index answers for every key of the group in one MultiGet, before sequencing:
  // only the leader writes the index, so nothing changes it in between.
  std::vector<std::string_view> keys;
  for (const Request* r : group) {
    for (const CheckedEvent& e : r->checked.events) {
      if (!e.key.empty()) keys.push_back(e.key);
    }
  }
  index->values = std::vector<rocksdb::PinnableSlice>(keys.size());
  index->statuses.resize(keys.size());
  if (!keys.empty()) {
    index->slices.reserve(keys.size());
    index->positions.reserve(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      index->slices.emplace_back(keys[i].data(), keys[i].size());
      index->positions.emplace(keys[i], i);
    }
    db_->MultiGet(rocksdb::ReadOptions(), index_family_.get(), keys.size(),
                  index->slices.data(), index->values.data(), index->statuses.data());
  }
  return [this, index](std::string_view key) -> Result<std::optional<RecordedKey>> {
    std::string value;
    rocksdb::Status s;
    if (auto it = index->positions.find(key); it != index->positions.end()) {
      s = index->statuses[it->second];
      if (s.IsNotFound()) return std::optional<RecordedKey>();  // a new key: the common case
      if (s.ok()) value = index->values[it->second].ToString();
    } else {
      s = db_->Get(rocksdb::ReadOptions(), index_family_.get(), IndexKey(key), &value);
    }
    if (s.IsNotFound()) return std::optional<RecordedKey>();
    ADM_RETURN_IF_ERROR(FromRocks(s, "reading the idempotency index"));
    if (value.size() != 8) {
      return Status(Code::kCorruption, "idempotency index entry for '" + std::string(key) +
                                           "' has " + std::to_string(value.size()) + " bytes");
    }
    RecordedKey recorded{GetBigEndian64(value.data()), {}};
    s = db_->Get(rocksdb::ReadOptions(), EventKey(recorded.sequence), &recorded.bytes);
    ADM_RETURN_IF_ERROR(
        FromRocks(s, "reading event " + std::to_string(recorded.sequence) + " for its key"));
    return std::optional<RecordedKey>(std::move(recorded));
  };
}

Status RocksDbLog::WriteGroup(const Head& head, rocksdb::WriteBatch* batch) {
  batch->Put(kHeadKey, EncodeHead(head));
  rocksdb::WriteOptions write_options;
  write_options.sync = options_.sync;
  Status write_status = CheckRoom();
  if (write_status.ok()) {
    const auto started = std::chrono::steady_clock::now();
    rocksdb::Status s = db_->Write(write_options, batch);
    write_seconds_.fetch_add(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
        std::memory_order_relaxed);
    if (!s.ok()) write_status = WriteFailed(s, "appending to the ledger");
  }
  return write_status;
}

Head RocksDbLog::CommitGroup(const std::vector<Request*>& group, Head head,
                             uint64_t* events_written) {
  PrefetchedIndex index;
  const KeyLookup lookup = PrefetchIndex(group, &index);

  size_t reserve_bytes = 64;
  for (const Request* r : group) {
    for (const CheckedEvent& e : r->checked.events) {
      reserve_bytes += e.stored.bytes.size() + 2 * e.key.size() + 48;
    }
  }
  rocksdb::WriteBatch write_batch(reserve_bytes);
  GroupKeys group_keys;
  // Kept until the write: group_keys views their stored bytes.
  std::vector<PreparedAppend> prepared(group.size());
  std::vector<bool> wrote(group.size(), false);
  uint64_t written = 0;
  // Index entries go into the batch after all events, in key order (the index family's
  // memtable inserts them in batch order).
  std::vector<std::pair<std::string, Sequence>> index_puts;
  for (size_t i = 0; i < group.size(); ++i) {
    Request* r = group[i];
    AppendAck ack;
    Status s = SequenceBatch(r->batch, r->checked, head, group_keys, lookup, &ack, &prepared[i]);
    if (!s.ok()) {
      r->result = std::move(s);
      continue;
    }
    for (const StoredEvent& e : prepared[i].events) {
      write_batch.Put(EventKey(e.sequence), e.bytes);
    }
    for (const auto& [key, sequence] : prepared[i].index_entries) {
      index_puts.emplace_back(IndexKey(key), sequence);
    }
    written += prepared[i].events.size();
    wrote[i] = !prepared[i].events.empty();
    head = prepared[i].head;
    r->result = std::move(ack);
  }

  PutIndexEntries(*index_family_, &index_puts, &write_batch);

  const Status write_status = written > 0 ? WriteGroup(head, &write_batch) : Status::Ok();
  if (!write_status.ok()) {
    // Nothing of the group is durable: every request that wrote fails; the head stays.
    for (size_t i = 0; i < group.size(); ++i) {
      if (wrote[i]) group[i]->result = write_status;
    }
    *events_written = 0;
    return Head{};  // unused: nothing written
  }
  *events_written = written;
  // The history entries follow, written by the history writer.
  if (written > 0 && options_.index_history) QueueHistory(prepared);
  return head;
}

Result<std::vector<StoredEvent>> RocksDbLog::Read(Sequence from, size_t max_count) {
  std::vector<StoredEvent> out;
  auto shown = Scan(from, max_count, [&](Sequence sequence, std::string_view bytes) {
    out.push_back(StoredEvent{sequence, std::string(bytes)});
    return true;
  });
  if (!shown.ok()) return shown.status();
  return out;
}

Result<size_t> RocksDbLog::Scan(Sequence from, size_t max_count, const ScanVisitor& visit) {
  ADM_CHECK(max_count <= kReadEventsMax, "read of %zu events", max_count);
  size_t shown = 0;
  rocksdb::ReadOptions read_options;
  read_options.verify_checksums = true;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read_options));
  for (it->Seek(EventKey(std::max<Sequence>(from, 1))); it->Valid() && shown < max_count;
       it->Next()) {
    rocksdb::Slice key = it->key();
    if (key.size() != 9 || key[0] != 'e') break;
    rocksdb::Slice value = it->value();
    ++shown;
    if (!visit(GetBigEndian64(key.data() + 1), std::string_view(value.data(), value.size()))) {
      break;
    }
  }
  ADM_RETURN_IF_ERROR(FromRocks(it->status(), "reading the ledger"));
  return shown;
}

Head RocksDbLog::GetHead() {
  std::lock_guard<std::mutex> lock(mu_);
  return head_;
}

Result<std::optional<Sequence>> RocksDbLog::FindKey(std::string_view key) {
  std::string value;
  rocksdb::Status s =
      db_->Get(rocksdb::ReadOptions(), index_family_.get(), IndexKey(key), &value);
  if (s.IsNotFound()) return std::optional<Sequence>();
  ADM_RETURN_IF_ERROR(FromRocks(s, "reading the idempotency index"));
  if (value.size() != 8) {
    return Status(Code::kCorruption, "idempotency index entry for '" + std::string(key) +
                                         "' has " + std::to_string(value.size()) + " bytes");
  }
  return std::optional<Sequence>(GetBigEndian64(value.data()));
}

RocksDbLogStats RocksDbLog::GetStats() {
  std::lock_guard<std::mutex> lock(mu_);
  RocksDbLogStats stats = stats_;
  stats.write_seconds = write_seconds_.load(std::memory_order_relaxed);
  stats.history_wait_seconds = history_wait_seconds_.load(std::memory_order_relaxed);
  return stats;
}

}  // namespace admission::ledger

namespace admission::ledger {

Status RocksDbLog::Ingest(std::span<const Ingested> events, const Head& head_after,
                          std::span<const std::pair<std::string, std::string>> extra) {
  if (options_.read_only) {
    return Status(Code::kInvalidArgument, "the ledger at " + dir_ + " is open read-only");
  }
  std::lock_guard<std::mutex> lock(mu_);
  ADM_CHECK(queue_.empty() && !leading_, "Ingest while %zu appends are queued%s", queue_.size(),
            leading_ ? " and a group commit runs" : "");
  Sequence expected = head_.sequence + 1;
  size_t reserve_bytes = 64;
  for (const Ingested& e : events) reserve_bytes += e.bytes.size() + 2 * e.key.size() + 32;
  for (const auto& [key, value] : extra) reserve_bytes += key.size() + value.size() + 8;
  rocksdb::WriteBatch write_batch(reserve_bytes);
  std::vector<std::pair<std::string, Sequence>> index_puts;
  schema::HistoryKeyTexts history_keys;
  std::string scratch;
  for (const Ingested& e : events) {
    ADM_CHECK(e.sequence == expected, "ingest of sequence %lu on head %lu",
              static_cast<unsigned long>(e.sequence), static_cast<unsigned long>(expected - 1));
    write_batch.Put(EventKey(e.sequence), rocksdb::Slice(e.bytes.data(), e.bytes.size()));
    if (!e.key.empty()) index_puts.emplace_back(IndexKey(e.key), e.sequence);
    schema::HistoryKeysOfCanonical(e.bytes, &history_keys);
    PutHistoryEntries(&write_batch, history_family_.get(), e.sequence, history_keys, &scratch);
    ++expected;
  }
  PutIndexEntries(*index_family_, &index_puts, &write_batch);
  for (const auto& [key, value] : extra) {
    ADM_CHECK(!key.empty() && key[0] == kExtraPrefix, "extra key without the '%c' prefix",
              kExtraPrefix);
    write_batch.Put(key, value);
  }
  if (!events.empty()) {
    ADM_CHECK(head_after.sequence == expected - 1, "head %lu after ingesting up to %lu",
              static_cast<unsigned long>(head_after.sequence),
              static_cast<unsigned long>(expected - 1));
    write_batch.Put(kHeadKey, EncodeHead(head_after));
    std::string through;
    PutBigEndian64(&through, head_after.sequence);
    write_batch.Put(history_family_.get(), kHistoryThroughKey, through);
  }
  rocksdb::WriteOptions write_options;
  write_options.sync = options_.sync;
  ADM_RETURN_IF_ERROR(CheckRoom());
  rocksdb::Status written = db_->Write(write_options, &write_batch);
  if (!written.ok()) return WriteFailed(written, "ingesting events");
  if (!events.empty()) {
    head_ = head_after;
    ++stats_.writes;
    stats_.events_written += events.size();
  }
  return Status::Ok();
}

Result<std::optional<std::string>> RocksDbLog::GetExtra(std::string_view key) {
  ADM_CHECK(!key.empty() && key[0] == kExtraPrefix, "extra key without the '%c' prefix",
            kExtraPrefix);
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), rocksdb::Slice(key.data(), key.size()),
                               &value);
  if (s.IsNotFound()) return std::optional<std::string>();
  ADM_RETURN_IF_ERROR(FromRocks(s, "reading " + std::string(key)));
  return std::optional<std::string>(std::move(value));
}

Result<std::optional<RecordedKey>> RocksDbLog::LookupKey(std::string_view key) {
  Result<std::optional<Sequence>> found = FindKey(key);
  if (!found.ok()) return found.status();
  if (!found->has_value()) return std::optional<RecordedKey>();
  RecordedKey recorded{**found, {}};
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), EventKey(recorded.sequence),
                               &recorded.bytes);
  ADM_RETURN_IF_ERROR(
      FromRocks(s, "reading event " + std::to_string(recorded.sequence) + " for its key"));
  return std::optional<RecordedKey>(std::move(recorded));
}

}  // namespace admission::ledger

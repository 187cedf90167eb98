#include "ledger/rocksdb_log.h"

#include <cstring>
#include <filesystem>

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include "ledger/sequencer.h"
#include "ledger/verify.h"

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

Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::Ok();
  if (s.IsIOError() && s.ToString().find("lock") != std::string::npos) {
    return Status(Code::kBusy, what + ": the ledger is open in another process (" +
                                   s.ToString() + ")");
  }
  if (s.IsCorruption()) return Status(Code::kCorruption, what + ": " + s.ToString());
  return Status(Code::kIoError, what + ": " + s.ToString());
}

}  // namespace

struct RocksDbLog::Request {
  std::span<const std::string> batch;
  Result<AppendAck> result = Status(Code::kIoError, "not written");
  bool done = false;
  std::condition_variable cv;
};

std::string RocksDbLog::EventKey(Sequence sequence) {
  std::string key = "e";
  PutBigEndian64(&key, sequence);
  return key;
}

std::string RocksDbLog::IndexKey(std::string_view idempotency_key) {
  return "i" + std::string(idempotency_key);
}

RocksDbLog::RocksDbLog(std::unique_ptr<rocksdb::DB> db, const RocksDbLogOptions& options)
    : db_(std::move(db)), options_(options) {}

RocksDbLog::~RocksDbLog() {
  std::lock_guard<std::mutex> lock(mu_);
  ADM_CHECK(queue_.empty(), "ledger closed with %zu appends in flight", queue_.size());
}

Result<std::unique_ptr<RocksDbLog>> RocksDbLog::Open(const std::string& dir,
                                                     const RocksDbLogOptions& options) {
  // RocksDB creates the directory even when it then refuses to create a database; a read of
  // a missing ledger must leave nothing behind.
  if (!options.create_if_missing && !std::filesystem::exists(dir + "/CURRENT")) {
    return Status(Code::kNotFound, "no ledger at " + dir);
  }
  rocksdb::Options db_options;
  db_options.create_if_missing = options.create_if_missing;
  db_options.paranoid_checks = true;
  db_options.max_open_files = 256;
  db_options.keep_log_file_num = 4;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(db_options, dir, &raw);
  if (!s.ok()) {
    if (s.IsInvalidArgument() && !options.create_if_missing) {
      return Status(Code::kNotFound, "no ledger at " + dir + " (" + s.ToString() + ")");
    }
    return FromRocks(s, "opening the ledger at " + dir);
  }
  std::unique_ptr<RocksDbLog> log(
      new RocksDbLog(std::unique_ptr<rocksdb::DB>(raw), options));
  ADM_RETURN_IF_ERROR(log->LoadHead());

  // Check the tail before anyone appends to it.
  Head head = log->GetHead();
  if (head.sequence > 0) {
    Sequence from = head.sequence > kOpenTailCheckEvents
                        ? head.sequence - kOpenTailCheckEvents + 1
                        : 1;
    schema::Hash from_hash = schema::kGenesisHash;
    if (from > 1) {
      // Trust the first checked event's own link; the full verify checks it.
      Result<std::vector<StoredEvent>> first = log->Read(from, 1);
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
    Result<VerifyReport> report = VerifyChain(*log, from, from_hash, false);
    if (!report.ok()) return report.status();
    if (report->fault) {
      return Status(Code::kCorruption,
                    "ledger at " + dir + " fails its hash chain at sequence " +
                        std::to_string(report->fault->sequence) + ": " +
                        report->fault->reason + "; refusing to open it");
    }
  } else {
    Result<std::vector<StoredEvent>> any = log->Read(1, 1);
    if (!any.ok()) return any.status();
    if (!any->empty()) {
      return Status(Code::kCorruption,
                    "ledger at " + dir + " has events but no head record (first: sequence " +
                        std::to_string(any->front().sequence) + ")");
    }
  }
  return log;
}

Status RocksDbLog::LoadHead() {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), kHeadKey, &value);
  if (s.IsNotFound()) return Status::Ok();
  ADM_RETURN_IF_ERROR(FromRocks(s, "reading the head"));
  if (value.size() != kHeadRecordBytes) {
    return Status(Code::kCorruption,
                  "head record has " + std::to_string(value.size()) + " bytes, not " +
                      std::to_string(kHeadRecordBytes));
  }
  std::lock_guard<std::mutex> lock(mu_);
  head_.sequence = GetBigEndian64(value.data());
  std::memcpy(head_.hash.data(), value.data() + 8, head_.hash.size());
  head_.recorded_at_ns = static_cast<int64_t>(GetBigEndian64(value.data() + 40));
  return Status::Ok();
}

Result<AppendAck> RocksDbLog::Append(std::span<const std::string> batch) {
  if (batch.empty() || batch.size() > kAppendBatchEventsMax) {
    return Status(Code::kInvalidArgument, "an append holds 1 to " +
                                              std::to_string(kAppendBatchEventsMax) +
                                              " events, not " + std::to_string(batch.size()));
  }
  Request request;
  request.batch = batch;
  std::unique_lock<std::mutex> lock(mu_);
  queue_.push_back(&request);
  while (!request.done && queue_.front() != &request) request.cv.wait(lock);
  if (!request.done) LeadGroup(lock);
  ADM_CHECK(request.done, "request not completed by its group");
  return std::move(request.result);
}

void RocksDbLog::LeadGroup(std::unique_lock<std::mutex>& lock) {
  // Take the group: the leader and whoever queued behind it, up to the group limit.
  std::vector<Request*> group;
  size_t events = 0;
  for (Request* r : queue_) {
    if (!group.empty() && events + r->batch.size() > kGroupEventsMax) break;
    group.push_back(r);
    events += r->batch.size();
  }
  Head head = head_;
  lock.unlock();

  // Only the leader touches head and the index, so reading RocksDB unlocked is consistent.
  KeyLookup lookup = [this](std::string_view key) -> Result<std::optional<RecordedKey>> {
    std::string value;
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), IndexKey(key), &value);
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

  rocksdb::WriteBatch write_batch;
  GroupKeys group_keys;
  std::vector<Result<AppendAck>> results;
  std::vector<bool> wrote;
  uint64_t events_written = 0;
  for (Request* r : group) {
    AppendAck ack;
    PreparedAppend prepared;
    Status s = PrepareAppend(r->batch, head, group_keys, lookup, &ack, &prepared);
    if (!s.ok()) {
      results.emplace_back(std::move(s));
      wrote.push_back(false);
      continue;
    }
    for (const StoredEvent& e : prepared.events) {
      write_batch.Put(EventKey(e.sequence), e.bytes);
    }
    std::string sequence_bytes;
    for (const auto& [key, sequence] : prepared.index_entries) {
      sequence_bytes.clear();
      PutBigEndian64(&sequence_bytes, sequence);
      write_batch.Put(IndexKey(key), sequence_bytes);
    }
    events_written += prepared.events.size();
    head = prepared.head;
    results.emplace_back(std::move(ack));
    wrote.push_back(!prepared.events.empty());
  }

  Status write_status;
  if (events_written > 0) {
    write_batch.Put(kHeadKey, EncodeHead(head));
    rocksdb::WriteOptions write_options;
    write_options.sync = options_.sync;
    write_status = FromRocks(db_->Write(write_options, &write_batch), "appending to the ledger");
  }

  lock.lock();
  if (events_written > 0 && write_status.ok()) {
    ADM_CHECK(head.sequence == head_.sequence + events_written, "head %lu after %lu + %lu",
              static_cast<unsigned long>(head.sequence),
              static_cast<unsigned long>(head_.sequence),
              static_cast<unsigned long>(events_written));
    head_ = head;
    ++stats_.writes;
    stats_.events_written += events_written;
  }
  for (size_t i = 0; i < group.size(); ++i) {
    Request* r = group[i];
    ADM_CHECK(queue_.front() == r, "group order lost");
    queue_.pop_front();
    r->result = (wrote[i] && !write_status.ok()) ? Result<AppendAck>(write_status)
                                                  : std::move(results[i]);
    r->done = true;
    r->cv.notify_one();
  }
  if (!queue_.empty()) queue_.front()->cv.notify_one();
}

Result<std::vector<StoredEvent>> RocksDbLog::Read(Sequence from, size_t max_count) {
  ADM_CHECK(max_count <= kReadEventsMax, "read of %zu events", max_count);
  std::vector<StoredEvent> out;
  rocksdb::ReadOptions read_options;
  read_options.verify_checksums = true;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read_options));
  for (it->Seek(EventKey(std::max<Sequence>(from, 1))); it->Valid() && out.size() < max_count;
       it->Next()) {
    rocksdb::Slice key = it->key();
    if (key.size() != 9 || key[0] != 'e') break;
    rocksdb::Slice value = it->value();
    out.push_back(StoredEvent{GetBigEndian64(key.data() + 1), value.ToString()});
  }
  ADM_RETURN_IF_ERROR(FromRocks(it->status(), "reading the ledger"));
  return out;
}

Head RocksDbLog::GetHead() {
  std::lock_guard<std::mutex> lock(mu_);
  return head_;
}

Result<std::optional<Sequence>> RocksDbLog::FindKey(std::string_view key) {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), IndexKey(key), &value);
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
  return stats_;
}

}  // namespace admission::ledger

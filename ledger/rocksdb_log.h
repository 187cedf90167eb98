#pragma once
// The embedded durable ledger on RocksDB. See docs/ledger.md for layout and group commit.

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include "ledger/event_log.h"

namespace rocksdb {
class DB;
}

namespace admission::ledger {

struct RocksDbLogOptions {
  bool create_if_missing = true;
  // Every append is durable (fsync'd WAL) before it is acknowledged. Only benchmarks and
  // throwaway tests may turn this off.
  bool sync = true;
};

// How many of the newest links Open checks before it accepts a ledger.
inline constexpr Sequence kOpenTailCheckEvents = 64;

struct RocksDbLogStats {
  uint64_t writes = 0;          // WriteBatches written (each one fsync when sync is on)
  uint64_t events_written = 0;
};

class RocksDbLog final : public EventLog {
 public:
  // Opens (or creates) the ledger in `dir`. Refuses a ledger whose tail fails the hash chain,
  // naming the sequence (kCorruption), and one another process holds open (kBusy).
  static Result<std::unique_ptr<RocksDbLog>> Open(const std::string& dir,
                                                  const RocksDbLogOptions& options = {});
  ~RocksDbLog() override;

  Result<AppendAck> Append(std::span<const std::string> batch) override;
  Result<std::vector<StoredEvent>> Read(Sequence from, size_t max_count) override;
  Head GetHead() override;
  Result<std::optional<Sequence>> FindKey(std::string_view key) override;

  RocksDbLogStats GetStats();

  // Key layout, public for tests that edit storage on purpose.
  static std::string EventKey(Sequence sequence);
  static std::string IndexKey(std::string_view idempotency_key);
  static constexpr const char* kHeadKey = "h";

 private:
  struct Request;
  RocksDbLog(std::unique_ptr<rocksdb::DB> db, const RocksDbLogOptions& options);
  Status LoadHead();
  // Runs one group commit led by the request at the front of the queue.
  // REQUIRES: lock holds mu_; queue_.front() is the caller's request.
  void LeadGroup(std::unique_lock<std::mutex>& lock);

  const std::unique_ptr<rocksdb::DB> db_;
  const RocksDbLogOptions options_;

  std::mutex mu_;
  std::deque<Request*> queue_;   // GUARDED_BY(mu_); front is the leader
  Head head_;                    // GUARDED_BY(mu_); written only by the leader
  RocksDbLogStats stats_;        // GUARDED_BY(mu_)
};

}  // namespace admission::ledger

#pragma once
// An in-memory EventLog for tests: same sequencing and hashing as RocksDbLog, no durability.

#include <map>
#include <mutex>
#include <vector>

#include "ledger/event_log.h"

namespace admission::ledger {

class MemoryLog final : public EventLog {
 public:
  Result<AppendAck> Append(std::span<const std::string> batch) override;
  Result<std::vector<StoredEvent>> Read(Sequence from, size_t max_count) override;
  Head GetHead() override;
  Result<std::optional<Sequence>> FindKey(std::string_view key) override;

  // Test hook: replaces the stored bytes of one event, as an attacker editing storage would.
  // REQUIRES: 1 <= sequence <= head.
  void OverwriteForTest(Sequence sequence, std::string bytes);

 private:
  std::mutex mu_;
  std::vector<std::string> events_;                      // GUARDED_BY(mu_); [i] is seq i+1
  std::map<std::string, Sequence, std::less<>> index_;   // GUARDED_BY(mu_)
  Head head_;                                            // GUARDED_BY(mu_)
};

}  // namespace admission::ledger

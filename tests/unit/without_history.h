#pragma once
// A log that hides the history index of the one it wraps (EventLog::History says none): explain
// then folds from the genesis, as it did before the index. For the property that compares the
// two and the benchmark that times them.

#include "ledger/event_log.h"

namespace admission::testing {

class WithoutHistory final : public ledger::EventLog {
 public:
  explicit WithoutHistory(ledger::EventLog& log) : log_(log) {}
  Result<ledger::AppendAck> Append(std::span<const std::string> batch) override {
    return log_.Append(batch);
  }
  Result<std::vector<ledger::StoredEvent>> Read(ledger::Sequence from, size_t max_count) override {
    return log_.Read(from, max_count);
  }
  Result<size_t> Scan(ledger::Sequence from, size_t max_count, const ScanVisitor& visit) override {
    return log_.Scan(from, max_count, visit);
  }
  ledger::Head GetHead() override { return log_.GetHead(); }
  Result<std::optional<ledger::Sequence>> FindKey(std::string_view key) override {
    return log_.FindKey(key);
  }

 private:
  ledger::EventLog& log_;
};

}  // namespace admission::testing

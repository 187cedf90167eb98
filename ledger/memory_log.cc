#include "ledger/memory_log.h"

#include "ledger/sequencer.h"

namespace admission::ledger {

Result<AppendAck> MemoryLog::Append(std::span<const std::string> batch) {
  std::lock_guard<std::mutex> lock(mu_);
  KeyLookup lookup = [this](std::string_view key) -> Result<std::optional<RecordedKey>> {
    auto it = index_.find(key);
    if (it == index_.end()) return std::optional<RecordedKey>();
    return std::optional<RecordedKey>(RecordedKey{it->second, events_[it->second - 1]});
  };
  GroupKeys group_keys;
  AppendAck ack;
  PreparedAppend prepared;
  ADM_RETURN_IF_ERROR(PrepareAppend(batch, head_, group_keys, lookup, &ack, &prepared));
  for (StoredEvent& e : prepared.events) {
    ADM_CHECK(e.sequence == events_.size() + 1, "sequence %lu after %zu events",
              static_cast<unsigned long>(e.sequence), events_.size());
    events_.push_back(std::move(e.bytes));
  }
  for (auto& [key, sequence] : prepared.index_entries) index_.emplace(key, sequence);
  head_ = prepared.head;
  return ack;
}

Result<std::vector<StoredEvent>> MemoryLog::Read(Sequence from, size_t max_count) {
  ADM_CHECK(max_count <= kReadEventsMax, "read of %zu events", max_count);
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<StoredEvent> out;
  for (Sequence s = std::max<Sequence>(from, 1); s <= events_.size() && out.size() < max_count;
       ++s) {
    out.push_back(StoredEvent{s, events_[s - 1]});
  }
  return out;
}

Head MemoryLog::GetHead() {
  std::lock_guard<std::mutex> lock(mu_);
  return head_;
}

Result<std::optional<Sequence>> MemoryLog::FindKey(std::string_view key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return std::optional<Sequence>();
  return std::optional<Sequence>(it->second);
}

void MemoryLog::OverwriteForTest(Sequence sequence, std::string bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  ADM_CHECK(sequence >= 1 && sequence <= events_.size(), "sequence %lu",
            static_cast<unsigned long>(sequence));
  events_[sequence - 1] = std::move(bytes);
}

}  // namespace admission::ledger

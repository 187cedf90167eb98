#pragma once
// The watch consumer's relay (docs/billing.md, "From admitd's watch"): publishes outbox
// entries to the output topic in Kafka transactions of its own transactional id, each record
// with headers naming the relay and its outbox position. On open, init_transactions fences an
// earlier instance and aborts what it left uncommitted; PublishedPosition then reads the
// output topic's tail (read_committed) for the last position this relay committed, so that a
// restarted consumer drops from its outbox what is published already.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "consumers/billing/store.h"
#include "ledger/kafka_log.h"

namespace admission::consumers::billing {

inline constexpr char kRelayHeader[] = "adm-billing-relay";
inline constexpr char kPositionHeader[] = "adm-billing-position";

class OutboxRelay {
 public:
  // Creates the output topic if missing and initialises the transactional producer.
  static Result<std::unique_ptr<OutboxRelay>> Open(const ledger::KafkaAddress& output,
                                                   const std::string& transactional_id,
                                                   int operation_timeout_ms);
  ~OutboxRelay();

  // The last outbox position this relay (its transactional id) committed to the output
  // topic, or none.
  Result<std::optional<OutboxPosition>> PublishedPosition();

  // Publishes `entries` in one transaction. `before_commit` (fault drills) runs after the
  // records are produced and flushed, before the commit.
  Status Publish(const std::vector<OutboxEntry>& entries,
                 const std::function<void()>& before_commit = nullptr);

 private:
  OutboxRelay() = default;
  ledger::KafkaAddress output_;
  std::string transactional_id_;
  int timeout_ms_ = 30'000;
  struct Handle;
  std::unique_ptr<Handle> producer_;
  bool delivery_failed_ = false;
};

}  // namespace admission::consumers::billing

#pragma once
// Who writes a Kafka ledger: the member of the consumer group "admission-ledger.TOPIC" that
// Kafka assigns the ledger's partition. No election of our own: Kafka's group coordinator
// decides, and a member that stops heartbeating (crashed, stopped, cut off) loses the partition
// after the session timeout. See docs/kafka.md, "Failover".

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ledger/kafka_log.h"

namespace admission::ledger {

struct KafkaLeadershipOptions {
  KafkaAddress address;
  // How other members and clients reach this one (admitd's first bound address): carried as
  // the member's client.id, so a standby can name the active writer.
  std::string advertised;
  // A member that sends no heartbeat for this long loses the partition (the broker's
  // group.min.session.timeout.ms, 6 s by default, is the floor).
  int session_timeout_ms = 10'000;
  int operation_timeout_ms = 30'000;
  std::vector<std::pair<std::string, std::string>> client_config;
};

// The group's name for a ledger topic.
std::string KafkaLeadershipGroup(const std::string& topic);

class KafkaLeadership {
 public:
  // Joins the group; a thread of its own keeps the membership (heartbeats, rebalances).
  static Result<std::unique_ptr<KafkaLeadership>> Join(const KafkaLeadershipOptions& options);
  // Leaves the group (the partition goes to another member at once).
  ~KafkaLeadership();

  // This member holds the ledger's partition now.
  bool leader() const { return leader_.load(std::memory_order_acquire); }
  // Times this member was given the partition, and times it lost it.
  uint64_t assignments() const { return assignments_.load(std::memory_order_acquire); }
  uint64_t revocations() const { return revocations_.load(std::memory_order_acquire); }
  // The advertised address of the member holding the partition, asked of the group
  // coordinator; nullopt while nobody holds it (a rebalance).
  Result<std::optional<std::string>> Holder();
  // This member's advertised address (what Holder() names when this member holds it).
  const std::string& advertised() const { return options_.advertised; }

  // Called by librdkafka's rebalance callback on the membership thread. Not for callers.
  void OnRebalance(int error, void* partitions);

 private:
  explicit KafkaLeadership(KafkaLeadershipOptions options) : options_(std::move(options)) {}
  void Run();

  const KafkaLeadershipOptions options_;
  struct rd_kafka_s* consumer_ = nullptr;
  std::atomic<bool> leader_{false};
  std::atomic<uint64_t> assignments_{0};
  std::atomic<uint64_t> revocations_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace admission::ledger

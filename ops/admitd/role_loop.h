#pragma once
// admitd's role loop on a Kafka ledger (a standby follows the writer, becomes the writer when
// Kafka gives it the ledger's partition, stops for good when fenced or forked), and what it
// shares with the daemon's start: the ready file, a standby's answer to a write, the fault
// drills of docs/kafka.md.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <kj/async-io.h>

#include "ledger/kafka_leadership.h"
#include "ledger/kafka_log.h"
#include "ops/rpc/server.h"
#include "ops/service/service.h"

namespace admission::ops::admitd {

// The Kafka ledger's role loop runs this often (a standby's lag behind the writer, and how soon
// a writer notices it lost the partition).
constexpr int64_t kRolePollMs = 100;
// The role loop repeats an unchanged error at most this often.
constexpr int64_t kErrorRepeatMs = 5000;
// A standby asks the group who the writer is at most this often.
constexpr int64_t kHolderRefreshMs = 1000;

// ADMITD_KAFKA_DRILL=POINT:N:ACTION[:MS], for fault drills only (docs/kafka.md, "Drills"): at
// POINT (produced, committing) of the Nth transaction, ACTION: kill (SIGKILL, after MS ms on
// another thread if given: during the commit), stop (SIGSTOP: a zombie once resumed), stall
// (sleep MS ms: past transaction.timeout.ms). An empty function when the variable is unset.
Result<std::function<bool(std::string_view, uint64_t)>> DrillFromEnvironment();

// What a standby answers a write: the active writer's address, as the group names it (asked at
// most every kHolderRefreshMs).
class StandbyAnswer {
 public:
  Status Refusal(ledger::KafkaLog& kafka, ledger::KafkaLeadership* leadership);

 private:
  std::chrono::steady_clock::time_point asked_{};
  std::string holder_;
};

// --ready-file: the bound addresses, one per line, written once (atomically: a temporary file
// renamed) when the daemon answers calls as it will from now on.
class ReadyFile {
 public:
  explicit ReadyFile(std::string path) : path_(std::move(path)) {}
  // The lines Mark writes. REQUIRES: !marked().
  void set_lines(std::string lines) { lines_ = std::move(lines); }
  bool marked() const { return marked_; }
  void Mark();

 private:
  std::string path_;
  std::string lines_;
  bool marked_ = false;
};

// Logs an error of the role loop when it changes, else at most every kErrorRepeatMs (the loop
// runs every kRolePollMs while a broker is away).
class ErrorThrottle {
 public:
  void Error(const std::string& what, const Status& s);

 private:
  std::string last_;
  std::chrono::steady_clock::time_point logged_{};
};

// The Kafka ledger's role loop, every kRolePollMs on the event loop: a standby reads the topic
// and folds what the writer appended (watchers see it), and becomes the writer once Kafka gives
// it the ledger's partition; a writer that lost the partition is a standby again; a writer that
// was fenced (a newer writer took its transactional id) stops for good, with the reason in
// *halted. Marks `ready` once this daemon writes or is the standby of a known writer. Resolves
// when it has stopped (never for a RocksDB ledger: kafka == nullptr).
kj::Promise<void> FollowOrLead(kj::AsyncIoContext& io, ledger::KafkaLog* kafka,
                               ledger::KafkaLeadership* leadership, Service& service,
                               rpc::Daemon& daemon, std::optional<Status>* halted,
                               ErrorThrottle& throttle, ReadyFile& ready);

}  // namespace admission::ops::admitd

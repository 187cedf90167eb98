#pragma once
// The admission service in one process: the ledger, the decider folded over it, and intake.
// Every write is one atomic append of the stamped inputs followed by the decisions the decider
// made from them (see docs/decider.md).
//
// Thread safety: not thread-safe; one Service per ledger, used by one thread (admitctl). A
// failed append leaves the engine ahead of the ledger: the Service then refuses every further
// write until it is reopened (the ledger itself is unchanged).

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ledger/event_log.h"
#include "ops/clock.h"
#include "ops/intake.h"
#include "projections/engine.h"

namespace admission::ops {

struct RecordOutcome {
  std::vector<uint64_t> sequences;   // per input: its sequence (the original one if a no-op)
  std::vector<bool> unchanged;       // per input: already recorded (same key or definition)
  std::vector<std::string> notes;    // why inputs were no-ops, for people
  std::vector<std::string> decisions;  // stored bytes of the decisions appended
  uint64_t first_decision_sequence = 0;
};

class Service {
 public:
  // Folds every event of `log` into a fresh decider. REQUIRES: log and clock outlive it.
  // `progress` (may be null) is called every so often with (events folded, head).
  static Result<std::unique_ptr<Service>> Open(
      ledger::EventLog& log, Clock& clock,
      const std::function<void(uint64_t, uint64_t)>& progress = nullptr);

  // Records inputs (serialized Events with only the body and, optionally, the idempotency key
  // set) as one batch. An input whose idempotency key was recorded with the same payload, or
  // a definition identical to the current one, is a no-op; the same key with another payload
  // is refused (kConflict) and nothing is written.
  Result<RecordOutcome> Record(const std::vector<std::string>& inputs,
                               const IntakeOptions& options);

  const projections::Engine& engine() const { return engine_; }
  ledger::EventLog& log() { return log_; }

 private:
  Service(ledger::EventLog& log, Clock& clock) : log_(log), clock_(clock) {}
  Status Fold(const std::function<void(uint64_t, uint64_t)>& progress);
  // "kind/namespace/name" for definition bodies; empty for other inputs.
  static std::string DefinitionKey(schema::Event::Reader event);
  static std::string BodyBytes(schema::Event::Reader event);

  ledger::EventLog& log_;
  Clock& clock_;
  projections::Engine engine_;
  std::map<std::string, std::string> definitions_;  // current body bytes by DefinitionKey
  bool broken_ = false;
};

}  // namespace admission::ops

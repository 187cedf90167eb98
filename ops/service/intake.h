#pragma once
// Intake: stamps the envelope of input events (logical time, actor) and appends them as one
// atomic batch. Time is the wall clock at intake unless the caller fixed it (`--at`).

#include <optional>
#include <string>
#include <vector>

#include "ledger/event_log.h"
#include "ops/service/clock.h"

namespace admission::ops {

struct IntakeOptions {
  std::optional<int64_t> at_ns;  // logical time fixed by the caller
  std::string actor;             // identity of the caller; kept if the event names one
  // The actor replaces whatever the input names (admitd: the connection's principal).
  bool force_actor = false;
  // The caller's request id: every input without an idempotency key gets
  // RequestInputKey(actor, request_id, its index), so a retry finds the first outcome.
  // force_actor and request_id are read by ops::Service (Stage); Intake::Submit, which appends
  // raw events for `dev append`, does not use them.
  std::string request_id;
};

class Intake {
 public:
  // REQUIRES: log and clock outlive the Intake.
  Intake(ledger::EventLog& log, Clock& clock, IntakeOptions options)
      : log_(log), clock_(clock), options_(std::move(options)) {}

  // The time the next batch will be recorded at: `--at`, or the wall clock but never before
  // the ledger's head. Refuses an `--at` earlier than the head (time never goes backwards).
  Result<int64_t> StampTime();

  // Stamps every event (serialized schema::Event) and appends them atomically.
  Result<ledger::AppendAck> Submit(const std::vector<std::string>& events);

 private:
  ledger::EventLog& log_;
  Clock& clock_;
  const IntakeOptions options_;
};

}  // namespace admission::ops

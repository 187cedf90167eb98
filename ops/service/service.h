#pragma once
// The admission service in one process: the ledger, the decider folded over it, and intake.
// Every write is one atomic append of the stamped inputs followed by the decisions the decider
// made from them (see docs/decider.md).
//
// Thread safety: not thread-safe; one Service per ledger, used by one thread (admitctl). A call
// refused after the decider applied it (too large for one append) and an append refused for
// lack of space leave the decider as the ledger has it (it is folded again). Any other failed
// append may leave the engine ahead of the ledger: the Service then refuses every further
// write (broken()) until it is reloaded (the ledger itself is unchanged).

#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "ledger/event_log.h"
#include "ledger/snapshot_store.h"
#include "ops/service/clock.h"
#include "projections/definitions.h"
#include "projections/engine.h"
#include "replay/snapshots.h"
#include "schema/event_codec.h"

namespace admission::ops {

// How one call's inputs are stamped and keyed (ops/service/intake.cc).
struct IntakeOptions {
  std::optional<int64_t> at_ns;  // logical time fixed by the caller (`--at`)
  std::string actor;             // identity of the caller; kept if the event names one
  // The actor replaces whatever the input names (admitd: the connection's principal).
  bool force_actor = false;
  // The caller's request id: every input without an idempotency key gets
  // RequestInputKey(actor, request_id, its index), so a retry finds the first outcome.
  std::string request_id;
};

// The time a call is recorded at: options.at_ns, or the clock but never before `head_time_ns`
// (the ledger's last event, sequence `head_sequence`). Refuses an at_ns earlier than the head
// (kTimeWentBackwards: time never goes backwards in a ledger).
Result<int64_t> StampTime(const IntakeOptions& options, int64_t head_time_ns,
                          uint64_t head_sequence, Clock& clock);

struct RecordOutcome {
  std::vector<uint64_t> sequences;   // per input: its sequence (the original one if a no-op)
  std::vector<bool> unchanged;       // per input: already recorded (same key or definition)
  std::vector<bool> configured;      // per input: a definition that replaced another (kubectl's
                                     // "configured"; "created" when new)
  std::vector<std::string> notes;    // why inputs were no-ops, for people
  std::vector<std::string> decisions;  // stored bytes of the decisions appended
  uint64_t first_decision_sequence = 0;
  // Every input was recorded before under its idempotency key (a retry): nothing was written,
  // and `decisions` are the ones the original request caused.
  bool retried = false;
};

// One call's inputs, each decoded once (DecodeInputs, or the RPC server's RecordCallOf) and
// carried so to the append, and how to stamp them, for Service::RecordGroup.
struct RecordCall {
  std::vector<schema::DecodedEvent> inputs;
  IntakeOptions options;
};

// Decodes serialized inputs, each once. Errors: kInvalidArgument "input I: why" for the first
// that does not decode.
Result<std::vector<schema::DecodedEvent>> DecodeInputs(const std::vector<std::string>& inputs);

// The idempotency key an input without one gets from its call's request id: the principal,
// the id and the input's place, so that a retry of the same call finds each input again and
// one principal never sees another's outcome. REQUIRES: !request_id.empty().
std::string RequestInputKey(std::string_view actor, std::string_view request_id, size_t index);
// The key an input's own idempotency key is stored under: "by/ACTOR/KEY" (the actor's '%' and
// '/' escaped as %25 and %2F, so that it is one segment), in the namespace of
// keys of the actor that recorded it (admitd: the connection's principal). One principal can
// neither take another's key (and so block its submission) nor learn by probing what another
// recorded. REQUIRES: !actor.empty().
std::string PrincipalKey(std::string_view actor, std::string_view key);

// Snapshots every this many events by default (docs/replay.md, "Snapshots").
inline constexpr uint64_t kSnapshotEveryEventsDefault = 100'000;
// Calls in one RecordGroup.
inline constexpr size_t kGroupCallsMax = 1024;

struct ServiceOptions {
  // Where snapshots are kept; null: none are loaded or taken. REQUIRES: outlives the Service.
  ledger::SnapshotStore* snapshots = nullptr;
  // A snapshot is taken after an append that crosses a multiple of this many events (then
  // the oldest beyond ledger::kSnapshotsKept are removed). 0: never.
  uint64_t snapshot_every_events = kSnapshotEveryEventsDefault;
  // Asked before any call of a write is staged; a refusal answers every call of it and
  // changes nothing (a standby of a Kafka ledger: "the active writer is at ..."). Null: open.
  std::function<Status()> write_gate;
  // Events in one append (a call's inputs and the decisions they cause must fit one). Only
  // tests set another (smaller) bound, to reach it with few inputs.
  // REQUIRES: 2 <= append_events_max <= ledger::kAppendBatchEventsMax.
  size_t append_events_max = ledger::kAppendBatchEventsMax;
};

class Service {
 public:
  // Brings a decider to the ledger's head: from the newest usable snapshot in
  // options.snapshots (an unusable one is skipped with a warning naming it and why), else from
  // a fresh decider, folding the events after it. REQUIRES: log and clock outlive it.
  // `progress` (may be null) is called every so often with (events folded, head).
  static Result<std::unique_ptr<Service>> Open(
      ledger::EventLog& log, Clock& clock,
      const std::function<void(uint64_t, uint64_t)>& progress = nullptr,
      const ServiceOptions& options = {});

  // Records inputs (serialized Events with only the body and, optionally, the idempotency key
  // set) as one batch: DecodeInputs, then RecordGroup of the one call. An input whose
  // idempotency key was recorded with the same payload, or a definition identical to the
  // current one, is a no-op; the same key with another payload is refused (kConflict) and
  // nothing is written.
  Result<RecordOutcome> Record(const std::vector<std::string>& inputs,
                               const IntakeOptions& options);

  // Group commit: records each call as its own batch (exactly as Record would, one after the
  // other), but writes them all with as few appends as the batch limit allows, each one durable
  // before any call is answered. One call's refusal does not affect the others. Returns one
  // result per call, in order. REQUIRES: calls.size() <= kGroupCallsMax.
  std::vector<Result<RecordOutcome>> RecordGroup(const std::vector<RecordCall>& calls);

  // Takes a snapshot of the state at the head now. Errors: kInvalidArgument (no snapshot
  // store, or an empty ledger), and TakeSnapshot's.
  Result<replay::TakenSnapshot> Snapshot();

  // Folds what another writer appended to the log since this service last folded or wrote (a
  // standby following the Kafka ledger's writer). Returns how many events it folded.
  Result<uint64_t> Follow();
  // The last sequence the decider has folded or written.
  uint64_t position() const { return position_; }
  // An append failed: the decider may be ahead of the ledger, and writes are refused.
  bool broken() const { return broken_; }
  // Brings a fresh decider to the ledger's head as Open does (after a failed append whose
  // outcome the log has since settled: the Kafka ledger after its broker came back).
  Status Reload();

  const projections::Engine& engine() const { return *engine_; }
  ledger::EventLog& log() { return log_; }
  // The snapshot Open started from (none: it folded from the genesis), the events it folded
  // after it, and the snapshots it passed over, each with the reason.
  std::optional<uint64_t> loaded_snapshot() const { return loaded_snapshot_; }
  uint64_t events_folded_at_open() const { return events_folded_at_open_; }
  const std::vector<std::string>& skipped_snapshots() const { return skipped_snapshots_; }

 private:
  Service(ledger::EventLog& log, Clock& clock, const ServiceOptions& options)
      : log_(log), clock_(clock), options_(options) {}
  // One call of a group, decided and laid out but not yet appended; what its inputs so far
  // add to the call; the group's state; a run of calls appended together (intake.cc,
  // group_commit.cc).
  struct Staged;
  struct CallState;
  struct GroupState;
  struct Run;
  // The intake of one call: validates it against the head and the group so far, lets the
  // decider fold it and lays out its events. A refusal changes nothing (the decider has not
  // seen the call). Sets *engine_touched once the decider has applied an input (a throw after
  // that leaves the engine ahead of the ledger).
  Result<Staged> Stage(const RecordCall& call, GroupState& group, bool* engine_touched);
  // Stage's step for input i: keyed, unchanged, refused or laid out into `staged`.
  Status StageInput(const RecordCall& call, size_t i, int64_t at, const GroupState& group,
                    Staged& staged, CallState& state);
  // Whether input i's definition is the current one (a no-op); else remembers it as staged.
  bool UnchangedDefinition(schema::Event::Reader event, const GroupState& group, Staged& staged,
                           bool* existed,
                           std::string* def_key);
  // Stage's last step: the decider folds the laid-out inputs and decides; the events are
  // encoded once for the append.
  Status Decide(Staged& staged, GroupState& group, int64_t at, bool* engine_touched);
  // A call whose every input was recorded before: the original request's decisions.
  Status AnswerRetry(Staged& staged, const CallState& state);
  // Stage, with a throw turned into this call's refusal.
  Result<Staged> StageCaught(const RecordCall& call, GroupState& group, bool* engine_touched);
  // Why no call of a group may be written now (disk full, broken, the write gate); ok: none.
  Status WriteRefusal();
  // Appends the run's events as one append and settles its calls.
  void AppendRun(Run& run);
  // After a run's append: its calls' decisions as stored, the definitions, snapshots.
  void SettleRun(Run& run);
  // After a refused call the decider had applied: appends the run so far, folds the ledger
  // again.
  void RecoverFromRefusedCall(Run& run, GroupState& group, const Status& why);
  // Stage's check of an input's idempotency key (intake.cc).
  Result<std::optional<uint64_t>> RecordedUnder(const std::string& key,
                                                schema::Event::Reader event, size_t i,
                                                const GroupState& group,
                                                const std::vector<std::string>& fresh_keys);
  // The decisions of the batch holding `sequence` (an input), read from the ledger.
  Result<std::vector<std::string>> DecisionsOfBatch(uint64_t sequence, uint64_t* first);
  // Open's work: a decider from the newest usable snapshot, folded to the head.
  Status Load(const std::function<void(uint64_t, uint64_t)>& progress);
  // Folds the events after `after` (the state engine_ stands at).
  Status Fold(uint64_t after, const std::function<void(uint64_t, uint64_t)>& progress);
  // After an append that ended at `head`, having started after `head_before`.
  void MaybeSnapshot(uint64_t head_before, uint64_t head);

  ledger::EventLog& log_;
  Clock& clock_;
  const ServiceOptions options_;
  std::unique_ptr<projections::Engine> engine_;
  projections::DefinitionBodies definitions_;  // current body bytes by DefinitionKey

 public:
  const projections::DefinitionBodies& definitions() const { return definitions_; }
  bool broken_ = false;
  // The append that broke the service failed for lack of disk space, so nothing of it was
  // written: the next call folds the ledger again (Load) instead of refusing for ever.
  bool broken_by_no_space_ = false;
  uint64_t position_ = 0;  // the last sequence folded or written
  std::optional<uint64_t> loaded_snapshot_;
  uint64_t events_folded_at_open_ = 0;
  std::vector<std::string> skipped_snapshots_;
};

}  // namespace admission::ops

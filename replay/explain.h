#pragma once
// Explaining one workload from the ledger: every input that touched it and every decision about
// it, and, from the decider folded to the same point, what holds it where it is now.
// Rendered as text, JSON or a self-contained HTML page (`admitctl explain`).

#include <cstdint>
#include <string>
#include <vector>

#include "ledger/event_log.h"
#include "ledger/snapshot_store.h"
#include "replay/replayer.h"
#include "schema/result.h"

namespace admission::replay {

// One event of the workload's history.
struct HistoryEntry {
  Sequence sequence = 0;
  int64_t recorded_at_ns = 0;
  std::string actor;
  std::string type;  // body name: workloadSubmitted, quotaReserved, ...
  bool decision = false;
  std::string uid;      // of the workload incarnation it is about
  std::string summary;  // one line for people
  std::string reason;
  std::string message;
  std::string cluster_queue;  // quotaReserved, workloadImported
  std::string flavors;        // "main x4: cpu=on-demand, nvidia.com/gpu=h100"
  bool borrowing = false;
  uint64_t generation = 0;
  uint64_t quota_version = 0;            // sequence of the ClusterQueue definition used
  std::vector<uint64_t> check_versions;  // admitted: sequences of the check reports used
  std::string check;                     // checkStateReported: the check and its state
  std::string check_state;
  // checkStateReported forwarded by a bridge from a cluster: the field manager that wrote the
  // state there (the weaker proof of ownership; empty: reported by the check's owner itself).
  std::string via_field_manager;
  std::string resource;  // pendingReasonChanged: the first short resource and flavor
  std::string flavor;
  int64_t shortfall_milli = 0;
  uint64_t causation = 0;  // decisions: the input that caused them
  uint32_t engine_version = 0;
  std::string idempotency_key;
  std::string other;  // preempted: the other workload (NS/NAME)
  std::string role;   // preempted: "victim" or "preemptor"
};

// One required admission check of the current reservation, as the decider holds it.
struct CheckNow {
  std::string name;
  std::string state;  // Pending, Ready, Retry, Rejected
  std::string message;
  int64_t since_ns = 0;
  uint64_t report_sequence = 0;  // 0: no report yet
  std::string reported_by;        // the report's actor
  std::string via_field_manager;  // the report's, when a bridge forwarded it (HistoryEntry)
};

// The workload in the decider's state after the explained sequence.
struct WorkloadNow {
  std::string uid;
  std::string phase;  // projections::PhaseName
  std::string queue_name;
  std::string cluster_queue;
  int32_t priority = 0;
  uint32_t requeue_count = 0;
  std::string pending_reason;
  std::string pending_message;
  // The first short resource, flavor and shortfall of the latest pendingReasonChanged of this
  // incarnation, when it gave the current pending reason.
  bool shortfall_known = false;
  std::string short_resource;
  std::string short_flavor;
  int64_t shortfall_milli = 0;
  size_t queue_position = 0;  // 1-based place in its ClusterQueue's pending queue; 0: not queued
  size_t queue_length = 0;
  std::vector<CheckNow> checks;
  int64_t reserved_at_ns = 0;
  int64_t admitted_at_ns = 0;
  int64_t requeue_at_ns = 0;
  int64_t drain_deadline_ns = 0;
  int64_t pending_since_ns = 0;
  std::string fencing_token;
  std::string flavors;  // of the current admission, as in HistoryEntry
  // One sentence: what blocks it now (or that nothing does, or how it ended).
  std::string blocked_by;
  // A pending workload: when it is expected to be admitted (replay/estimate.h), in one line;
  // empty otherwise.
  std::string estimate;
};

struct Explanation {
  std::string ns, name;
  Sequence requested = 0;  // --at as asked (0: the head)
  Sequence at = 0;         // the state explained is after this sequence (end of its append)
  int64_t at_time_ns = 0;  // recordedAt of event `at`
  uint32_t engine_version = 0;
  std::vector<HistoryEntry> history;
  WorkloadNow now;
};

// Explains NS/NAME after the end of the append holding `at` (0: the head). Its history comes
// from the log's history index when it keeps one (only the workload's events are read; else the
// whole ledger is scanned), and the decider's state there from the newest usable snapshot in
// `snapshots` at or before that point (null: from the genesis), folded on to it.
// Errors: kNotFound (no such workload up to that point), and those of FoldToSequence.
Result<Explanation> Explain(ledger::EventLog& log, const std::string& ns, const std::string& name,
                            Sequence at, const ReplayProgress& progress = nullptr,
                            ledger::SnapshotStore* snapshots = nullptr);

std::string ExplainText(const Explanation& explanation);
std::string ExplainJson(const Explanation& explanation);  // one JSON object, indented
// A self-contained HTML page (inline CSS, no scripts, no external assets).
std::string ExplainHtml(const Explanation& explanation);

// For the demo and other callers in one call: explains NS/NAME at the head of `log` and writes
// the HTML page to `path`.
Status WriteExplainPage(ledger::EventLog& log, const std::string& ns, const std::string& name,
                        const std::string& path);

// Logical time as RFC 3339 UTC ("2026-11-29T09:00:00Z", fractional seconds when not whole).
std::string FormatTimeNs(int64_t ns);

}  // namespace admission::replay

#pragma once
// The deterministic simulator (docs/faults.md, "Deterministic simulation").
//
// One seed drives the real Service (ops/service/service.h) in logical time through a GPU platform's
// life: tenants submitting bursts of training and inference jobs with priorities; check
// controllers with latency, duplicated, reordered (stale) and foreign reports and outages (so
// checks stay Pending past their TTL); a pod runtime with slow starts, crashes, lost reports and
// stale tokens; node failures and recoveries; quota reclaims; maintenance windows; revocations;
// crashes and restarts of the service. After every append it checks the invariants
// (invariants.h, and the ledger's new events against the state they were decided from):
//   - no Admitted without every required check Ready for the current generation (the engine's
//     state, and the check reports an Admitted decision names);
//   - no pods released without a valid fencing token, and no token issued twice;
//   - quota held never above nominal, borrowing and lending limits, draining included;
//   - every workload admitted, terminal with a reason, or pending with a reason; none waits past
//     its queue's max wait without an alert;
//   - a refused input writes nothing; a restarted service has the same state;
//   - at the end, replay of the ledger reproduces every decision.
// Everything random comes from the seed (SplitMix64), time is logical, and the ledger is in
// memory, so one seed always gives the same ledger: its head hash is the run's trace hash.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ledger/event_log.h"

namespace admission::sim {

// A drill (admitctl drill NAME): the simulated platform with only tenants, check controllers and
// the pod runtime in the background, and the one named fault at fixed steps; it passes when every
// invariant held and the fault had its effect (shown as evidence), so a drill cannot pass
// without the fault happening.
enum class Drill {
  kNone,                // the simulation: every fault at random
  kControllerOutage,    // both check controllers down 25 minutes: checks Pending past their TTL
  kDuplicateCallbacks,  // every check and pods report delivered again, late (stale) and foreign
  kQuotaReclaim,        // team-b's H100 quota cut to one GPU under admitted work, restored
  kNodeFailure,         // every H100 node and an A100 node fail under admitted work, recover
};
inline constexpr Drill kDrillLast = Drill::kNodeFailure;
// The drill's command-line name ("controller-outage", ...); nullopt for an unknown one.
std::optional<Drill> DrillNamed(const std::string& name);
const char* DrillName(Drill drill);
inline constexpr const char* kDrillNames[] = {"controller-outage", "duplicate-callbacks",
                                              "quota-reclaim", "node-failure"};

struct SimOptions {
  uint64_t seed = 1;
  int steps = 400;
  Drill drill = Drill::kNone;
  // The ledger to write (a fresh, empty one); null: one in memory.
  ledger::EventLog* log = nullptr;
  // Test seam: at this step, append a pods-released report with a forged token straight to the
  // ledger, behind the service's back, so the checker must report it (the test can fail).
  std::optional<int> forge_release_at_step;
};

struct SimReport {
  bool passed = false;
  // When not passed: which invariant, about what, at which step and sequences, and why.
  std::string failure;
  std::string trace_hash;  // hex SHA-256 chain value of the ledger's head
  uint64_t events = 0;     // events in the ledger
  // What happened, for the figures and to show the run was not vacuous: admitted, evicted,
  // preempted, revoked, refused, restarts, starvation alerts, ...
  std::map<std::string, uint64_t> counts;
  // A drill's evidence that its fault took effect and the platform recovered: lines naming the
  // workload, the decision and its sequence.
  std::vector<std::string> evidence;
};

SimReport Simulate(const SimOptions& options);

// The one command that repeats a run (admitctl simulate, or admitctl drill).
std::string ReplayCommand(const SimOptions& options);

}  // namespace admission::sim

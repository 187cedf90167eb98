#pragma once
// Forward simulation from the record (docs/whatif.md): the real decider run forward in logical
// time on a ledger's recorded world (arrivals and deletions, definitions, node events, check
// delays from reservation, pod release delays, each workload's run time), under a change of
// definitions or configuration. The one engine for `admitctl whatif` and `admitctl estimate`.
//
// Deterministic: the same ledger range, change and options give the same outcome.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ledger/event_log.h"
#include "projections/engine.h"
#include "projections/usage.h"
#include "schema/result.h"

namespace admission::replay {

// What happened to one workload, on one side (recorded or simulated).
struct WorkloadOutcome {
  // cluster_queue: its last reservation's; never reserved: its LocalQueue's at the end.
  std::string key, uid, cluster_queue, local_queue, priority_class;
  int64_t submitted_ns = 0;
  std::optional<int64_t> admitted_ns;  // the first admission
  std::string admission;               // its flavors, "podSet: resource=flavor, ..."
  int preemptions = 0;                 // preempted (evicted for another workload)
  bool rejected = false;               // rejected or deactivated
  std::optional<int64_t> finished_ns;
};

// One side of a run: the workloads and what they held.
struct RunOutcome {
  std::map<std::string, WorkloadOutcome> workloads;  // by namespace/name
  std::vector<projections::Interval> usage;          // closed, and open ones up to `end_ns`
  std::vector<projections::QuotaSpan> quota;         // nominal quota in force, up to `end_ns`
  int64_t end_ns = 0;
  uint64_t decisions = 0;
};

// Where a simulated workload's run time came from.
enum class RuntimeSource {
  kRecorded,     // released (or admitted) to finished in the record
  kStillRunning, // running at the record's end: its run so far (a lower bound)
  kExpected,     // never ran: its expected runtime (admission-ledger.io/expected-runtime)
  kClassMedian,  // never ran: the median of its LocalQueue and priority class
  kAllMedian,    // never ran, no class to go by: the median of every recorded run
  kDefault,      // never ran and nothing recorded ran: 1h
};
const char* RuntimeSourceName(RuntimeSource source);

struct ForwardOptions {
  int64_t from_ns = 0;  // simulate from the state at this time (0: the ledger's start)
  int64_t to_ns = 0;    // recorded arrivals up to this time (0: the ledger's last event)
  // Input events (encoded; definitions, deletions of definitions, engine configuration) applied
  // at the start; a recorded redefinition of the same object is dropped in the simulation.
  std::vector<std::string> changes;
  // How long past `to_ns` the simulation may run for the workloads still queued to finish.
  int64_t drain_ns = 30LL * 24 * 3600 * 1'000'000'000;
  uint64_t batches_max = 10'000'000;  // a bound on the loop, whatever the input
};

struct ForwardResult {
  int64_t from_ns = 0, to_ns = 0;
  RunOutcome recorded, simulated;
  std::map<std::string, RuntimeSource> runtime_source;  // by key, the workloads simulated
  std::map<RuntimeSource, size_t> runtime_sources;      // how many of each
  uint64_t simulated_batches = 0;
};

// The q-th percentile of `values` by nearest rank (the median: q = 50); nullopt when empty. The
// one percentile of what-if, its report and the estimates.
std::optional<int64_t> NearestRank(std::vector<int64_t> values, int q);

// Runs the simulation over `log`. Errors: the log's; kInvalidArgument for a change that is not
// a definition or configuration, or a range outside the ledger.
Result<ForwardResult> Forward(ledger::EventLog& log, const ForwardOptions& options);

// The folds of both sides: workloads' outcomes from inputs and decisions, and the usage fold.
class OutcomeFold {
 public:
  void Apply(schema::Event::Reader event);
  RunOutcome Finish(int64_t end_ns) const;
  const std::map<std::string, WorkloadOutcome>& workloads() const { return workloads_; }

 private:
  std::map<std::string, WorkloadOutcome> workloads_;
  std::map<std::string, std::string> uid_key_;         // uid -> key
  std::map<std::string, std::string> last_admission_;  // key -> its last reservation's flavors
  std::map<std::string, std::string> lq_cluster_queue_;  // namespace/name -> its ClusterQueue
  projections::UsageFold usage_;
  uint64_t decisions_ = 0;
};

}  // namespace admission::replay

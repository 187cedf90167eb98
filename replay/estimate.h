#pragma once
// When will a pending workload be admitted (docs/whatif.md, "Estimates"): the forward
// simulation (replay/forward.h) from the state at an instant, with no arrivals after it and run
// times from what was known then (the workload's expected runtime, else its class's recorded
// runs): three runs, with the 10th, 50th and 90th percentile of those run times, give a median
// and a range. The backtest asks it at the moment each sampled workload was submitted and
// compares with when it was admitted in fact.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ledger/event_log.h"
#include "schema/result.h"

namespace admission::replay {

struct EstimateOptions {
  int64_t at_ns = 0;  // the state after the ledger's events up to this time (0: the head)
  int64_t horizon_ns = 30LL * 24 * 3600 * 1'000'000'000;  // simulate at most this far ahead
  uint64_t batches_max = 2'000'000;
};

// explain's bound on the estimate it shows (each of the three simulations): a pending workload
// that no simulated future admits (a preemption that goes back and forth on its timers for the
// whole horizon, say) made explain simulate 2,000,000 batches three times, minutes. Past it,
// explain says so and `admitctl estimate` simulates up to EstimateOptions::batches_max.
inline constexpr uint64_t kExplainEstimateBatchesMax = 50'000;

struct AdmissionEstimate {
  std::string key;
  std::string state;   // "pending", or the phase it is in ("Admitted", "Finished", ...)
  int64_t at_ns = 0;   // the instant estimated from
  // median_ns: the simulated admission with the others' median (p50) run times; low_ns and
  // high_ns: the earliest and the latest of it and the runs with short (p10) and long (p90) ones.
  // nullopt: not within the horizon (high_ns: one of the three is not; low_ns: none is).
  std::optional<int64_t> low_ns, median_ns, high_ns;
};

// "admission expected at 2026-12-01T10:00:00Z (in 2h), between 1h and 3h from now", or why none.
std::string EstimateLine(const AdmissionEstimate& estimate);

// Errors: kNotFound (no such workload at that instant), the log's.
Result<AdmissionEstimate> EstimateAdmission(ledger::EventLog& log, const std::string& key,
                                            const EstimateOptions& options);

struct BacktestOptions {
  int64_t from_ns = 0, to_ns = 0;  // submissions in [from, to] (0: the ledger's ends)
  size_t samples_max = 100;        // evenly spaced among the workloads that waited
  int64_t horizon_ns = 30LL * 24 * 3600 * 1'000'000'000;
};

struct BacktestGroup {
  std::string cluster_queue;  // "(all)" for every sample
  uint64_t samples = 0;       // estimates compared with a recorded admission
  uint64_t within_range = 0;  // the admission fell in [low, high]
  uint64_t no_estimate = 0;   // the simulation did not admit it within the horizon
  int64_t median_abs_error_ms = 0;
};

struct BacktestReport {
  std::vector<BacktestGroup> groups;  // by ClusterQueue, then "(all)"
  uint64_t candidates = 0;            // workloads that waited, submitted in range
  uint64_t never_admitted = 0;        // waited and never admitted in the record: not compared
  // Samples are submitted after this: in a record of 1,000 runs or more, the 100th finished.
  int64_t warm_up_ns = 0;
};

Result<BacktestReport> Backtest(ledger::EventLog& log, const BacktestOptions& options);

}  // namespace admission::replay

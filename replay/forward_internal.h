#pragma once
// The forward simulation's parts, shared by what-if (forward.cc) and estimates (estimate.cc).

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "replay/forward.h"

namespace admission::replay::internal {

using ledger::Sequence;

// What the record says of one workload (by uid).
struct RecordedWorkload {
  std::string key, lq_key, priority_class, cluster_queue;  // cluster_queue: its last reservation's
  int64_t expected_runtime_ns = 0;
  int64_t submitted_ns = 0;
  Sequence submitted_seq = 0;
  std::map<uint64_t, int64_t> reserved_ns, admitted_ns, released_ns;  // by generation
  std::map<uint64_t, int64_t> evicted_ns;  // by generation: when its eviction started
  std::vector<int64_t> pods_gone_delays;   // eviction to its pods reported gone, in order
  std::optional<int64_t> finished_ns;
  struct Report {
    uint64_t generation = 0;
    std::string check, actor, message;
    int64_t delay_ns = 0;  // from that generation's reservation
    schema::CheckState state = schema::CheckState::READY;
    int64_t requeue_after_ns = 0;
    int64_t at_ns = 0;
  };
  std::vector<Report> reports;
  // Its run time in the record (released, else admitted, to finished, in its last admission).
  std::optional<int64_t> RecordedRuntime() const;
  // When that run started; nullopt when it was never admitted.
  std::optional<int64_t> LastStart() const;
};

struct RecordedWorld {
  std::map<std::string, RecordedWorkload> by_uid;
  std::map<std::string, std::string> uid_of_key;  // the latest submission of a key
  std::vector<std::pair<int64_t, std::string>> passthrough;  // (time, bytes), in ledger order
  std::vector<std::pair<int64_t, std::string>> submissions;  // every workloadSubmitted, in order
  int64_t last_ns = 0;
  Sequence start_after = 0;  // the end of the last append before ForwardOptions::from_ns
};

// One pass over `log`: the recorded world, the recorded side's fold before `from_ns` and up to
// `to_ns` (either fold may be null). Recorded definitions whose key is in `changed_keys` are not
// passed through.
Status Gather(ledger::EventLog& log, const ForwardOptions& options,
              const std::set<std::string>& changed_keys, RecordedWorld* world,
              OutcomeFold* recorded_before, OutcomeFold* recorded);

// How run times are chosen. kRecord (what-if): the record's, else modelled. kForecast
// (estimates): only what was known at `as_of_ns`: the workload's expected runtime, else the
// `quantile` (percent) of its class's runs finished by then, else of every run, else 1h.
struct RuntimeModel {
  bool forecast = false;
  int quantile = 50;
  int64_t as_of_ns = 0;
  // Forecast: the submissions of the last `repeat_arrivals_ns` before as_of_ns (less when the
  // record is shorter) arrive again, renamed, window after window, standing in for the arrivals
  // to come; 0: nothing arrives.
  int64_t repeat_arrivals_ns = 0;
};

// An input due at a time; a finish applies only while the workload still runs on `token`.
struct Scheduled {
  std::string bytes;
  std::string key, token;  // guard: set for a finish
};

class Simulation {
 public:
  Simulation(const RecordedWorld& world, std::unique_ptr<projections::Engine> engine,
             Sequence after, RuntimeModel model, ForwardResult* result);

  void Schedule(int64_t at, std::string bytes, std::string key = "", std::string token = "") {
    queue_.emplace(std::make_pair(at, order_++), Scheduled{std::move(bytes), key, token});
  }
  // The world's answers still due for the workloads the start state holds: checks of a
  // reservation, pods of an admission, and its finish.
  void SeedFromState(int64_t t0);
  // Forecast: the recent arrivals repeated (RuntimeModel::repeat_arrivals_ns), one window at a
  // time as the simulation reaches it.
  void SeedArrivals();
  // Runs until nothing is due before `until_ns`; `fold` sees every input and decision. With
  // `stop_when_admitted`, stops once that workload (namespace/name) is admitted.
  Status Run(uint64_t batches_max, int64_t until_ns, OutcomeFold* fold,
             const std::string& stop_when_admitted = "");
  const projections::Engine& engine() const { return *engine_; }

 private:
  int64_t RuntimeOf(const std::string& uid);
  void OnDecision(schema::Event::Reader d, int64_t at);
  void ScheduleChecks(const projections::WorkloadState& wl, int64_t at);
  std::string Stamp(const std::string& bytes, int64_t at, bool ends_batch);

  const RecordedWorld& world_;
  std::unique_ptr<projections::Engine> engine_;
  Sequence seq_;
  RuntimeModel model_;
  ForwardResult* result_;
  std::map<std::pair<int64_t, uint64_t>, Scheduled> queue_;
  uint64_t order_ = 0;
  std::map<std::string, int64_t> class_runtime_, check_delay_;
  std::map<std::string, size_t> evictions_;  // by uid: evictions simulated so far
  int64_t window_ns_ = 0;        // the repeated arrivals' window (0: none)
  int64_t arrivals_until_ns_ = 0;  // arrivals are scheduled up to here
  int repetitions_ = 0;
  std::map<std::string, std::string> original_uid_;  // a repeated arrival's uid -> the recorded one
  int64_t all_runtime_ = -1;
};

}  // namespace admission::replay::internal

// Estimates and their backtest (replay/estimate.h): the forward simulation from one instant,
// three times (short, median and long run times of the others), no arrivals after it.

#include "replay/estimate.h"

#include <algorithm>
#include <limits>
#include <map>

#include "projections/engine.h"
#include "projections/snapshot.h"
#include "replay/forward_internal.h"
#include "replay/explain.h"
#include "replay/replayer.h"
#include "replay/whatif_report.h"

namespace admission::replay {

namespace {

using internal::RecordedWorld;
using internal::RuntimeModel;
using internal::Simulation;

constexpr int64_t kRepeatArrivalsNs = 3600LL * 1'000'000'000;
constexpr size_t kWarmUpRuns = 100;

// The three simulated admissions of `key` from `engine` (copied for each run).
Result<AdmissionEstimate> Simulate3(const RecordedWorld& world, const projections::Engine& engine,
                                    Sequence after, const std::string& key, int64_t at_ns,
                                    const EstimateOptions& options) {
  AdmissionEstimate est;
  est.key = key;
  est.at_ns = at_ns;
  auto found = engine.workloads().find(key);
  if (found == engine.workloads().end()) {
    return Status(Code::kNotFound, "no workload " + key + " at that instant");
  }
  if (found->second.phase != projections::Phase::kPending) {
    est.state = projections::PhaseName(found->second.phase);
    return est;
  }
  est.state = "pending";
  auto bytes = projections::EncodeSnapshot(engine, after, schema::kGenesisHash, {});
  if (!bytes.ok()) return bytes.status();
  // Low: short run times, nothing arrives. Median and high: median and long run times, and the
  // last hour's arrivals again (higher priorities among them go first).
  std::optional<int64_t>* out[3] = {&est.low_ns, &est.median_ns, &est.high_ns};
  const int quantiles[3] = {10, 50, 90};
  const int64_t repeat[3] = {0, kRepeatArrivalsNs, kRepeatArrivalsNs};
  for (int i = 0; i < 3; ++i) {
    auto copy = projections::LoadSnapshot(*bytes);
    if (!copy.ok()) return copy.status();
    Simulation sim(world, std::move(copy->engine), after,
                   RuntimeModel{true, quantiles[i], at_ns, repeat[i]}, nullptr);
    sim.SeedFromState(at_ns);
    sim.SeedArrivals();
    Status ran = sim.Run(options.batches_max, at_ns + options.horizon_ns, nullptr, key);
    if (!ran.ok()) return ran;
    auto w = sim.engine().workloads().find(key);
    if (w != sim.engine().workloads().end() && w->second.admitted_at_ns > 0) {
      *out[i] = w->second.admitted_at_ns;
    }
  }
  // The range is the earliest and the latest of the three (shorter run times of the others
  // mostly, not always, admit it sooner); one not within the horizon makes the latest open.
  std::optional<int64_t> earliest, latest = est.low_ns;
  for (const std::optional<int64_t>* v : out) {
    if (*v && (!earliest || **v < *earliest)) earliest = *v;
    if (latest && (!*v || **v > *latest)) latest = *v;
  }
  est.low_ns = earliest;
  est.high_ns = latest;
  return est;
}

}  // namespace

std::string EstimateLine(const AdmissionEstimate& e) {
  auto in = [&](const std::optional<int64_t>& ns) {
    return ns ? Duration((*ns - e.at_ns) / 1'000'000) : std::string("beyond the horizon");
  };
  if (e.state != "pending") return "";
  if (!e.median_ns) {
    return "no admission expected within the horizon (a forward simulation with the others' "
           "recorded run times and the last hour's arrivals again)";
  }
  return "admission expected at " + FormatTimeNs(*e.median_ns) + " (in " + in(e.median_ns) +
         "), between " + in(e.low_ns) + " and " + in(e.high_ns) + " from then (admitctl estimate)";
}

Result<AdmissionEstimate> EstimateAdmission(ledger::EventLog& log, const std::string& key,
                                            const EstimateOptions& options) {
  RecordedWorld world;
  ForwardOptions gather;
  gather.from_ns = options.at_ns == 0 ? std::numeric_limits<int64_t>::max() : options.at_ns + 1;
  gather.to_ns = 1;  // no recorded input passes through: nothing arrives after the instant
  Status gathered = internal::Gather(log, gather, {}, &world, nullptr, nullptr);
  if (!gathered.ok()) return gathered;
  if (world.start_after == 0) {
    return Status(Code::kNotFound, "no workload " + key + " then: the ledger is empty");
  }
  auto state = FoldToSequence(log, world.start_after);
  if (!state.ok()) return state.status();
  const int64_t at = options.at_ns == 0 ? state->engine->now_ns() : options.at_ns;
  return Simulate3(world, *state->engine, state->at, key, at, options);
}

Result<BacktestReport> Backtest(ledger::EventLog& log, const BacktestOptions& options) {
  RecordedWorld world;
  ForwardOptions gather;
  gather.to_ns = 1;
  Status gathered = internal::Gather(log, gather, {}, &world, nullptr, nullptr);
  if (!gathered.ok()) return gathered;
  // The workloads that waited (not admitted at their submission), in submission order.
  std::vector<const internal::RecordedWorkload*> waited;
  BacktestReport report;
  const int64_t to = options.to_ns == 0 ? world.last_ns : options.to_ns;
  // Estimates need recorded runs to go by: none is asked before some runs finished.
  std::vector<int64_t> finishes;
  for (const auto& [uid, w] : world.by_uid) {
    if (w.RecordedRuntime()) finishes.push_back(*w.finished_ns);
  }
  std::sort(finishes.begin(), finishes.end());
  // In a long record, after the kWarmUpRuns-th run finished; a short one is sampled whole.
  report.warm_up_ns = finishes.size() >= 10 * kWarmUpRuns ? finishes[kWarmUpRuns - 1] : 0;
  const int64_t from = std::max(options.from_ns, report.warm_up_ns);
  for (const auto& [uid, w] : world.by_uid) {
    if (w.submitted_seq == 0 || w.submitted_ns < from || w.submitted_ns > to) continue;
    const bool admitted_at_once = !w.admitted_ns.empty() && w.admitted_ns.begin()->second == w.submitted_ns;
    if (admitted_at_once) continue;
    ++report.candidates;
    if (w.admitted_ns.empty()) {
      ++report.never_admitted;
      continue;
    }
    waited.push_back(&w);
  }
  std::sort(waited.begin(), waited.end(), [](auto* a, auto* b) { return a->submitted_seq < b->submitted_seq; });
  std::vector<const internal::RecordedWorkload*> samples;
  const size_t n = waited.size(), k = std::min(options.samples_max, waited.size());
  for (size_t i = 0; i < k; ++i) samples.push_back(waited[i * n / k]);
  // One replay along the ledger, stopping at each sample's submission append.
  ReplayStart start = Genesis();
  std::map<std::string, std::vector<int64_t>> errors;
  std::map<std::string, BacktestGroup> groups;
  EstimateOptions est_options;
  est_options.horizon_ns = options.horizon_ns;
  for (const internal::RecordedWorkload* w : samples) {
    auto end = EndOfAppend(log, w->submitted_seq);
    if (!end.ok()) return end.status();
    if (*end > start.after) {
      Replayer replayer(log, std::move(start));
      ReplayOptions ro;
      ro.verify = false;
      ro.to = *end;
      auto ran = replayer.Run(ro);
      if (!ran.ok()) return ran.status();
      start = ReplayStart{replayer.TakeEngine(), *end};
    }
    auto est = Simulate3(world, *start.engine, start.after, w->key, w->submitted_ns, est_options);
    if (!est.ok()) return est.status();
    for (const std::string& cq : {w->cluster_queue, std::string("(all)")}) {
      BacktestGroup& g = groups[cq];
      g.cluster_queue = cq;
      if (!est->median_ns) {
        ++g.no_estimate;
        continue;
      }
      const int64_t actual = w->admitted_ns.begin()->second;
      ++g.samples;
      errors[cq].push_back(std::abs(*est->median_ns - actual) / 1'000'000);
      // low_ns is set with median_ns; high_ns unset: the range is open beyond the horizon.
      g.within_range += *est->low_ns <= actual && (!est->high_ns || actual <= *est->high_ns);
    }
  }
  for (auto& [cq, g] : groups) {
    g.median_abs_error_ms = NearestRank(errors[cq], 50).value_or(0);
    if (cq != "(all)") report.groups.push_back(g);
  }
  if (groups.count("(all)")) report.groups.push_back(groups["(all)"]);
  return report;
}

}  // namespace admission::replay

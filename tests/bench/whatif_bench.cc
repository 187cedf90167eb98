// whatif_bench: the forward simulation (replay/forward.h) on a ledger of Kueue's scheduler
// performance profile (baseline-generator.yaml: 5 cohorts x 6 ClusterQueues, 15,000 workloads a
// round; the built-in copy when the file is not there), driven through ops::Service in logical
// time as replay_bench makes its ledger. See docs/benchmarks.md ("whatif_bench").
//
// Prints, as `name: value` lines:
//   - calibration: a what-if with no change, and how many workloads kept their recorded outcome
//     exactly (admitted at the same instant with the same flavors, preemptions and rejection);
//   - the forward simulation's wall time, simulated decisions, the cost per simulated decision,
//     and its ratio to a replay (fold only) of the same ledger in the same run;
//   - the backtest of the estimates: median absolute error and the share within the range.
// Exit status non-zero only when something misbehaves (an error); goals are printed.

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "ledger/memory_log.h"
#include "ops/service/service.h"
#include "profile_generator.h"
#include "replay/estimate.h"
#include "replay/forward.h"
#include "replay/replayer.h"
#include "replay/whatif_report.h"

#ifndef WHATIF_BENCH_PROFILE_DIR
#define WHATIF_BENCH_PROFILE_DIR "../shared/kueue-perf"
#endif

namespace admission::bench {
namespace {

class ZeroClock final : public ops::Clock {
 public:
  int64_t NowNs() override { return 0; }
};

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "whatif_bench: %s\n", what.c_str());
  std::exit(1);
}

struct Args {
  uint64_t workloads = 50'000;  // at least this many workloads (whole rounds of the profile)
  size_t samples = 40;          // backtest estimates
  std::string profile = std::string(WHATIF_BENCH_PROFILE_DIR) + "/baseline-generator.yaml";
};

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      a.workloads = 3'000;
      a.samples = 5;
    } else if (arg == "--workloads" && i + 1 < argc) {
      a.workloads = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--samples" && i + 1 < argc) {
      a.samples = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--profile" && i + 1 < argc) {
      a.profile = argv[++i];
    } else {
      Die("usage: whatif_bench [--quick] [--workloads N] [--samples N] [--profile FILE]");
    }
  }
  return a;
}

// The profile scaled down for --quick: fewer workloads per round, the same shape.
std::vector<CohortClass> Profile(const Args& a) {
  auto loaded = std::filesystem::exists(a.profile) ? LoadProfile(a.profile) : std::nullopt;
  std::printf("# profile: %s\n", loaded ? a.profile.c_str() : "built-in copy of Kueue's baseline");
  std::vector<CohortClass> p = loaded ? *loaded : BuiltInBaseline();
  if (a.workloads < 15'000) {
    for (CohortClass& c : p) {
      for (QueuesSet& qs : c.queues_sets) {
        for (WorkloadsSet& set : qs.sets) set.count = std::max(1, set.count / 10);
      }
    }
  }
  return p;
}

}  // namespace
}  // namespace admission::bench

int main(int argc, char** argv) {
  using namespace admission;
  using namespace admission::bench;
  const Args args = Parse(argc, argv);
  ledger::MemoryLog log;
  {
    ZeroClock clock;
    auto service = ops::Service::Open(log, clock);
    if (!service.ok()) Die(service.status().ToString());
    Generator gen(**service, Profile(args), [](const std::string& w) { Die(w); });
    Status s = gen.Define();
    uint64_t rounds = 0;
    const double t0 = Now();
    uint64_t per_round = 0;
    for (const CohortClass& c : Profile(args)) {
      for (const QueuesSet& qs : c.queues_sets) {
        for (const WorkloadsSet& set : qs.sets) {
          per_round += uint64_t(c.count) * uint64_t(qs.count) * uint64_t(set.count);
        }
      }
    }
    while (s.ok() && rounds * per_round < args.workloads) s = gen.Round(rounds++);
    if (!s.ok()) Die("generate: " + s.ToString());
    std::printf("generated: %" PRIu64 " events, %" PRIu64 " rounds, %.2f s\n",
                log.GetHead().sequence, rounds, Now() - t0);
  }
  // Replay (fold only) of the same ledger: the yardstick.
  double t = Now();
  auto folded = replay::FoldToSequence(log, 0);
  if (!folded.ok()) Die("replay: " + folded.status().ToString());
  const double replay_s = Now() - t;
  std::printf("replay_fold_seconds: %.3f\n", replay_s);
  // Calibration: no change.
  t = Now();
  auto result = replay::Forward(log, {});
  if (!result.ok()) Die("forward: " + result.status().ToString());
  const double forward_s = Now() - t;
  const replay::WhatIfSummary sum = replay::Summarize(*result);
  const uint64_t decisions = result->simulated.decisions;
  std::printf("workloads: %" PRIu64 "\n", sum.workloads);
  std::printf("calibration_exact: %" PRIu64 "\n", sum.exact_matches);
  std::printf("calibration_exact_share: %.4f\n",
              sum.workloads ? double(sum.exact_matches) / double(sum.workloads) : 0.0);
  size_t modelled = 0;
  for (const auto& [source, n] : sum.runtime_sources) {
    if (source != replay::RuntimeSource::kRecorded && source != replay::RuntimeSource::kStillRunning) modelled += n;
  }
  std::printf("modelled_runtimes: %zu\n", modelled);
  // The profile's world is fully known (every run recorded, no checks, no pod reports): a
  // no-change simulation that does not reproduce it misbehaves.
  if (sum.exact_matches != sum.workloads) Die("calibration: not every workload kept its outcome");
  std::printf("forward_seconds: %.3f\n", forward_s);
  std::printf("simulated_decisions: %" PRIu64 "\n", decisions);
  std::printf("forward_us_per_decision: %.2f\n", decisions ? forward_s * 1e6 / double(decisions) : 0.0);
  std::printf("forward_to_replay_ratio: %.3f\n", replay_s > 0 ? forward_s / replay_s : 0.0);
  // The backtest of the estimates.
  t = Now();
  replay::BacktestOptions bo;
  bo.samples_max = args.samples;
  auto bt = replay::Backtest(log, bo);
  if (!bt.ok()) Die("backtest: " + bt.status().ToString());
  std::printf("backtest_seconds: %.3f\n", Now() - t);
  std::printf("backtest_candidates: %" PRIu64 "\n", bt->candidates);
  for (const replay::BacktestGroup& g : bt->groups) {
    if (g.cluster_queue != "(all)") continue;
    std::printf("backtest_samples: %" PRIu64 "\n", g.samples);
    std::printf("backtest_no_estimate: %" PRIu64 "\n", g.no_estimate);
    std::printf("backtest_median_abs_error_s: %.1f\n", double(g.median_abs_error_ms) / 1000.0);
    std::printf("backtest_within_range_share: %.3f\n",
                g.samples ? double(g.within_range) / double(g.samples) : 0.0);
  }
  return 0;
}

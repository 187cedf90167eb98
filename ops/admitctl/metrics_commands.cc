// admitctl metrics [--at N]: the ledger's metrics projection (consumers/metrics) as admitd
// serves it on /metrics (without the daemon's process metrics), at the head or as it was after
// any sequence: counters and histograms folded from the genesis, gauges from the decider there.

#include <iostream>

#include <CLI/CLI.hpp>

#include "consumers/metrics/ledger_metrics.h"
#include "ops/admitctl/common.h"
#include "replay/replayer.h"

namespace admission::ops {

namespace {

int RunMetrics(const GlobalOptions& global, uint64_t at, bool local_queues) {
  auto log = OpenLedgerToRead(global);
  if (!log.ok()) return Fail(log.status());
  consumers::metrics::MetricsFold fold;
  Progress progress("metrics");
  auto state = replay::FoldToSequence(
      **log, at,
      [&](uint64_t done, uint64_t total) {
        if (total > 100000) progress.Update(done, total);
      },
      [&](uint64_t sequence, schema::Event::Reader event) { fold.Apply(sequence, event); });
  if (!state.ok()) return Fail(state.status());
  if (at != 0 && state->at != at) {
    std::cerr << "as of sequence " << state->at << ", the end of the append holding sequence "
              << at << "\n";
  }
  std::cout << fold.Render(*state->engine, {.local_queues = local_queues});
  return 0;
}

}  // namespace

void AddMetricsCommands(CLI::App& app, GlobalOptions& global, int* exit_code) {
  auto at = std::make_shared<uint64_t>(0);
  auto* cmd = app.add_subcommand(
      "metrics",
      "the ledger's metrics in the Prometheus text format, as admitd serves them on /metrics "
      "(Kueue's names; counters count the whole ledger), at the head or --at a sequence");
  auto local_queues = std::make_shared<bool>(false);
  cmd->add_option("--at", *at, "as they were after this sequence (the end of its append)");
  cmd->add_flag("--local-queue-metrics", *local_queues,
                "also Kueue's kueue_local_queue_* metrics (as admitd --local-queue-metrics)");
  cmd->callback([&global, at, local_queues, exit_code]() {
    *exit_code = RunMetrics(global, *at, *local_queues);
  });
}

}  // namespace admission::ops

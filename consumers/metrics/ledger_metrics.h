#pragma once
// The platform's metrics as a projection of the ledger (docs/metrics.md): counters and
// histograms folded from the events (MetricsFold, pure like the decider: ledger time only, so
// a restarted daemon and `admitctl metrics --at N` give the same values), and gauges read
// from the decider's state at the same point. Kueue's names, labels and buckets
// (pkg/metrics/metrics.go) where Kueue has the metric, `admission_*` for ours. No workload
// name or uid is ever a label.

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "consumers/billing/usage.h"
#include "projections/engine.h"
#include "schema/events.capnp.h"

namespace admission::consumers::metrics {

// Label values in the order of the metric's label names.
using LabelValues = std::vector<std::string>;

// A histogram of durations in integer milliseconds; bucket bounds in milliseconds.
struct Histogram {
  std::vector<uint64_t> counts;  // per bucket (not cumulative), one more for +Inf
  int64_t sum_ms = 0;
  uint64_t count = 0;
  void Observe(const std::vector<int64_t>& bounds_ms, int64_t value_ms);
};

class Writer;  // ledger_metrics.cc

struct RenderOptions {
  // Kueue's kueue_local_queue_* twins (its LocalQueueMetrics feature gate): off by default, as
  // LocalQueues are many.
  bool local_queues = false;
};

class MetricsFold {
 public:
  MetricsFold();
  // Folds one stored event.
  void Apply(uint64_t sequence, schema::Event::Reader event);
  uint64_t last_sequence() const { return last_sequence_; }
  int64_t last_time_ms() const { return last_time_ms_; }
  // Check reports so far in `state` (Pending, Ready, Retry, Rejected), by check.
  std::map<std::string, uint64_t> CheckReports(const std::string& state) const {
    std::map<std::string, uint64_t> out;
    for (const auto& [labels, n] : check_reports_) {
      if (labels[1] == state) out[labels[0]] += n;
    }
    return out;
  }

  // Prometheus text format (0.0.4) of the folded counters and histograms and of the gauges of
  // `engine`, which must be the decider after the same events. Families in a fixed order, series
  // in label order (in a fixed order): the same ledger point gives the same bytes.
  std::string Render(const projections::Engine& engine, const RenderOptions& options = {}) const;

 private:
  struct Track {  // a workload not yet finished or deleted
    std::string cluster_queue, priority_class;
    std::string queue_name, ns;  // its LocalQueue
    int64_t queued_ms = 0;    // submitted, or requeued
    int64_t reserved_ms = -1;
    int64_t admitted_ms = -1;
    uint64_t generation = 0;
    bool ready_seen = false;  // pods ready observed for this generation
  };
  // Apply's steps, one per kind of event that moves a workload's waits; ApplyCounted counts
  // the rest (evictions, preemptions, rejections, deactivations, revocations, alerts).
  Track* Find(schema::WorkloadRef::Reader ref);
  void ApplyQueued(schema::Workload::Reader wl, int64_t at_ms);
  void ApplyQuotaReserved(schema::QuotaReserved::Reader qr, int64_t at_ms);
  void ApplyAdmitted(schema::WorkloadRef::Reader ref, int64_t at_ms);
  void ApplyCheckReported(schema::CheckStateReported::Reader r, int64_t at_ms);
  void ApplyPodsReported(schema::PodsReported::Reader p, int64_t at_ms);
  void ApplyRequeued(schema::Requeued::Reader r, int64_t at_ms);
  void ApplyCounted(schema::Event::Body::Reader body);
  // Render's families: ours (admission_*), then Kueue's (kueue_*), each in name order.
  void RenderOurs(const projections::Engine& engine, Writer& w) const;
  void RenderKueue(const projections::Engine& engine, const RenderOptions& options,
                   Writer& w) const;
  void RenderLocalQueues(const projections::Engine& engine, Writer& w) const;
  using Series = std::map<LabelValues, uint64_t>;
  using HistogramSeries = std::map<LabelValues, Histogram>;
  void Observe(HistogramSeries& h, const std::vector<int64_t>& bounds, LabelValues labels,
               int64_t value_ms);

  std::unordered_map<std::string, Track> tracks_;               // by uid
  std::map<std::string, std::string> local_queues_;            // ns/name -> ClusterQueue
  // Counters.
  Series quota_reserved_, admitted_, evicted_, preempted_, rejected_, deactivated_,
      revocations_, starvation_alerts_, check_reports_, flavor_assignments_, requeued_;
  // Histograms.
  HistogramSeries quota_reserved_wait_, admission_wait_, admission_checks_wait_, ready_wait_,
      admitted_until_ready_, check_wait_;
  // The LocalQueue twins (labels name, namespace; evictions also reason).
  Series lq_quota_reserved_, lq_admitted_, lq_evicted_;
  HistogramSeries lq_quota_reserved_wait_, lq_admission_wait_, lq_admission_checks_wait_,
      lq_ready_wait_, lq_admitted_until_ready_;
  billing::UsageFold usage_;  // idle GPU-seconds
  uint64_t last_sequence_ = 0;
  int64_t last_time_ms_ = 0;
};

// Kueue's buckets: 1 s, then 2.5 x 2^k s; 14 bounds (to 10240 s), 16 for admission wait.
std::vector<int64_t> KueueBucketsMs(int count);

}  // namespace admission::consumers::metrics

#include "consumers/metrics/ledger_metrics.h"

#include <algorithm>

#include "consumers/billing/report.h"
#include "projections/engine_version.h"
#include "projections/topology_fragmentation.h"

namespace admission::consumers::metrics {

namespace {

constexpr char kGpu[] = "nvidia.com/gpu";

int64_t Ms(int64_t ns) { return ns / 1'000'000; }

const std::vector<int64_t>& Buckets14() {
  static const std::vector<int64_t> b = KueueBucketsMs(14);
  return b;
}
const std::vector<int64_t>& Buckets16() {
  static const std::vector<int64_t> b = KueueBucketsMs(16);
  return b;
}

// A quantity in thousandths as an exact decimal: 1500 -> "1.5".
std::string Thousandths(__int128 v) { return billing::ExactDecimal(v, 3); }

std::string Escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string LabelText(const std::vector<std::string>& names, const LabelValues& values,
                      const std::string& extra = "") {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out += (out.empty() ? "" : ",") + names[i] + "=\"" + Escape(values[i]) + "\"";
  }
  if (!extra.empty()) out += (out.empty() ? "" : ",") + extra;
  return out.empty() ? "" : "{" + out + "}";
}

// The kind of a revocation's target (its reason is free text: not a label).
const char* RevocationTarget(schema::RevocationRequested::Reader r) {
  const char* target = "workload";
  switch (r.getTarget().which()) {
    case schema::RevocationRequested::Target::WORKLOAD:
      target = "workload";
      break;
    case schema::RevocationRequested::Target::CHECK:
      target = "check";
      break;
    case schema::RevocationRequested::Target::FLAVOR:
      target = "flavor";
      break;
  }
  return target;
}

}  // namespace

// Prometheus text, family by family.
class Writer {
 public:
  void Family(const std::string& name, const char* type, const std::string& help) {
    text_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void Sample(const std::string& name, const std::vector<std::string>& labels,
              const LabelValues& values, const std::string& value) {
    text_ += name + LabelText(labels, values) + " " + value + "\n";
  }
  void Counter(const std::string& name, const std::string& help,
               const std::vector<std::string>& labels, const std::map<LabelValues, uint64_t>& s) {
    Family(name, "counter", help);
    for (const auto& [values, v] : s) Sample(name, labels, values, std::to_string(v));
  }
  void Histograms(const std::string& name, const std::string& help,
                  const std::vector<std::string>& labels, const std::vector<int64_t>& bounds,
                  const std::map<LabelValues, Histogram>& s) {
    Family(name, "histogram", help);
    for (const auto& [values, h] : s) {
      uint64_t cumulative = 0;
      for (size_t i = 0; i <= bounds.size(); ++i) {
        cumulative += i < h.counts.size() ? h.counts[i] : 0;
        const std::string le =
            i < bounds.size() ? "le=\"" + Thousandths(bounds[i]) + "\"" : "le=\"+Inf\"";
        text_ += name + "_bucket" + LabelText(labels, values, le) + " " +
                 std::to_string(cumulative) + "\n";
      }
      text_ += name + "_sum" + LabelText(labels, values) + " " + Thousandths(h.sum_ms) + "\n";
      text_ += name + "_count" + LabelText(labels, values) + " " + std::to_string(h.count) + "\n";
    }
  }
  void Gauges(const std::string& name, const std::string& help,
              const std::vector<std::string>& labels, const std::map<LabelValues, std::string>& s) {
    Family(name, "gauge", help);
    for (const auto& [values, v] : s) Sample(name, labels, values, v);
  }
  std::string& text() { return text_; }

 private:
  std::string text_;
};

namespace {

// admission_check_oldest_pending_seconds and admission_checks_pending: reservations waiting
// for each check, and the age of the oldest at ledger time `now_ms`.
void RenderPendingChecks(const projections::Engine& engine, int64_t now_ms, Writer& w) {
  std::map<LabelValues, std::string> pending, oldest;
  std::map<std::string, int64_t> oldest_ns;
  std::map<std::string, uint64_t> count;
  for (const auto& [name, spec] : engine.admission_checks()) count[name];
  for (const auto& [key, wl] : engine.workloads()) {
    if (wl.phase != projections::Phase::kReserved) continue;
    for (const auto& [check, status] : wl.checks) {
      if (status.state != projections::CheckState::kPending) continue;
      ++count[check];
      auto it = oldest_ns.find(check);
      if (it == oldest_ns.end() || status.last_transition_ns < it->second) {
        oldest_ns[check] = status.last_transition_ns;
      }
    }
  }
  for (const auto& [check, n] : count) {
    pending[{check}] = std::to_string(n);
    auto it = oldest_ns.find(check);
    oldest[{check}] = it == oldest_ns.end()
                          ? "0"
                          : Thousandths(std::max<int64_t>(0, now_ms - Ms(it->second)));
  }
  w.Gauges("admission_check_oldest_pending_seconds",
           "Age of the oldest reservation still waiting for this check (0: none waits)",
           {"admission_check"}, oldest);
  w.Gauges("admission_checks_pending", "Reservations waiting for this check now",
           {"admission_check"}, pending);
}

// admission_budget_{limit,used,committed,remaining}: each budget policy in its current period,
// per resource, in resource-hours (docs/budgets.md), as the decider counts them now.
void RenderBudgets(const projections::Engine& engine, Writer& w) {
  std::map<LabelValues, std::string> limit, used, committed, remaining;
  for (const auto& [name, policy] : engine.budget_policies()) {
    for (const projections::BudgetStanding& s : engine.BudgetStandings(policy)) {
      const LabelValues k{name, s.resource, s.window.label};
      const __int128 left = std::max<__int128>(0, s.limit - s.used - s.committed);
      limit[k] = projections::UnitHours(s.limit);
      used[k] = projections::UnitHours(s.used);
      committed[k] = projections::UnitHours(s.committed);
      remaining[k] = projections::UnitHours(left);
    }
  }
  const std::vector<std::string> labels{"policy", "resource", "period"};
  w.Gauges("admission_budget_committed",
           "Resource-hours workloads holding quota in the policy's scope are still expected to use",
           labels, committed);
  w.Gauges("admission_budget_limit", "The budget policy's limit per period, in resource-hours",
           labels, limit);
  w.Gauges("admission_budget_remaining",
           "Resource-hours left of the period's limit after used and committed (at least 0)",
           labels, remaining);
  w.Gauges("admission_budget_used",
           "Resource-hours held in the policy's scope in the current period (decayed when the "
           "policy has a half-life)",
           labels, used);
}

// admission_tas_{domains_fitting_largest_pending,largest_free_domain}: per TAS flavor and
// topology level, the fragmentation of its free capacity (projections/topology_fragmentation.h).
void RenderTopologyFragmentation(const projections::Engine& engine, Writer& w) {
  std::map<LabelValues, std::string> largest, fitting;
  for (const projections::TasFragmentation& f : projections::TopologyFragmentation(engine)) {
    for (const projections::TasLevelFragmentation& l : f.levels) {
      largest[{f.flavor, l.level, f.resource}] = std::to_string(l.largest_free);
      if (l.fitting_largest_pending) {
        fitting[{f.flavor, l.level}] = std::to_string(*l.fitting_largest_pending);
      }
    }
  }
  w.Gauges("admission_tas_domains_fitting_largest_pending",
           "Domains of the level that could hold the largest pending TAS request of the flavor "
           "now (none pending: no series)",
           {"flavor", "level"}, fitting);
  w.Gauges("admission_tas_largest_free_domain",
           "The largest free capacity of one domain of the level, in the resource's units (the "
           "nodes' extended resource, else pods)",
           {"flavor", "level", "resource"}, largest);
}

// admission_idle_gpu_seconds_total: billing's idle GPU time, closed and still open.
void RenderIdleGpuSeconds(const billing::UsageFold& usage, Writer& w) {
  std::map<LabelValues, std::string> seconds;
  std::map<LabelValues, __int128> milli_ms;
  auto add = [&](const billing::Interval& in) {
    if (in.kind == billing::UsageKind::kIdle && in.to.resource == kGpu) {
      milli_ms[{in.to.cluster_queue, in.to.flavor}] +=
          static_cast<__int128>(in.milli) * (in.end_ms - in.start_ms);
    }
  };
  for (const auto& in : usage.closed()) add(in);
  for (const auto& in : usage.OpenUntil(usage.last_time_ms())) add(in);
  for (const auto& [k, v] : milli_ms) seconds[k] = Thousandths(v / 1000);
  w.Family("admission_idle_gpu_seconds_total", "counter",
           "GPU-seconds reserved or admitted while no pods ran (billing's idle time), per "
           "ClusterQueue and flavor");
  for (const auto& [k, v] : seconds) {
    w.Sample("admission_idle_gpu_seconds_total", {"cluster_queue", "flavor"}, k, v);
  }
}

// admission_idle_gpus: GPUs held by workloads whose pods are not released yet.
void RenderIdleGpus(const projections::Engine& engine, Writer& w) {
  std::map<LabelValues, int64_t> idle;
  for (const auto& [name, cq] : engine.cluster_queues()) {
    for (const projections::Holder& h : cq.holders) {
      if (h.wl->pods_released) continue;
      for (const auto& [fr, milli] : h.wl->admission.usage) {
        const std::string& resource = engine.resource_names().Name(projections::FrResource(fr));
        if (resource != kGpu) continue;
        idle[{name, engine.flavor_names().Name(projections::FrFlavor(fr))}] += milli;
      }
    }
  }
  std::map<LabelValues, std::string> text;
  for (const auto& [k, v] : idle) text[k] = Thousandths(v);
  w.Gauges("admission_idle_gpus",
           "GPUs reserved or admitted whose pods the runtime has not released yet",
           {"cluster_queue", "flavor"}, text);
}

// kueue_admitted_active_workloads, per ClusterQueue.
void RenderAdmittedActive(const projections::Engine& engine, Writer& w) {
  std::map<LabelValues, std::string> active;
  for (const auto& [name, cq] : engine.cluster_queues()) {
    if (!cq.spec) continue;
    uint64_t n = 0;
    for (const projections::Holder& h : cq.holders) {
      n += h.wl->phase == projections::Phase::kAdmitted;
    }
    active[{name}] = std::to_string(n);
  }
  w.Gauges("kueue_admitted_active_workloads",
           "The number of admitted workloads that are active (unsuspended and not finished)",
           {"cluster_queue"}, active);
}

// What the workloads admitted in `cq` use of flavor-resource `fr`.
int64_t AdmittedUsage(const projections::ClusterQueueState& cq, projections::Fr fr) {
  int64_t admitted = 0;
  for (const projections::Holder& h : cq.holders) {
    if (h.wl->phase != projections::Phase::kAdmitted) continue;
    auto u = h.wl->admission.usage.find(fr);
    if (u != h.wl->admission.usage.end()) admitted += u->second;
  }
  return admitted;
}

// kueue_cluster_queue_{borrowing_limit,lending_limit,nominal_quota,resource_reservation,
// resource_usage}: per cohort, ClusterQueue, flavor and resource.
void RenderClusterQueueQuotas(const projections::Engine& engine, Writer& w) {
  const std::vector<std::string> cqfr{"cohort", "cluster_queue", "flavor", "resource"};
  std::map<LabelValues, std::string> nominal, borrowing, lending, reservation, usage;
  for (const auto& [name, cq] : engine.cluster_queues()) {
    if (!cq.spec) continue;
    const std::string& cohort = cq.spec->cohort;
    for (const auto& group : cq.spec->resource_groups) {
      for (const auto& fq : group.flavors) {
        const std::string& flavor = engine.flavor_names().Name(fq.flavor);
        for (const auto& [resource, quota] : fq.resources) {
          const LabelValues k{cohort, name, flavor, engine.resource_names().Name(resource)};
          nominal[k] = Thousandths(quota.nominal);
          if (quota.borrowing_limit) borrowing[k] = Thousandths(*quota.borrowing_limit);
          if (quota.lending_limit) lending[k] = Thousandths(*quota.lending_limit);
          const projections::Fr fr = projections::MakeFr(fq.flavor, resource);
          auto used = cq.usage.find(fr);
          reservation[k] = Thousandths(used == cq.usage.end() ? 0 : used->second);
          usage[k] = Thousandths(AdmittedUsage(cq, fr));
        }
      }
    }
  }
  w.Gauges("kueue_cluster_queue_borrowing_limit",
           "Reports the cluster_queue's resource borrowing limit within the cohort", cqfr,
           borrowing);
  w.Gauges("kueue_cluster_queue_lending_limit",
           "Reports the cluster_queue's resource lending limit within the cohort", cqfr, lending);
  w.Gauges("kueue_cluster_queue_nominal_quota",
           "Reports the cluster_queue's resource nominal quota", cqfr, nominal);
  w.Gauges("kueue_cluster_queue_resource_reservation",
           "Reports the cluster_queue's total resource reservation", cqfr, reservation);
  w.Gauges("kueue_cluster_queue_resource_usage",
           "Reports the cluster_queue's total resource usage (admitted workloads)", cqfr, usage);
}

// kueue_cluster_queue_resource_pending and kueue_cluster_queue_status.
void RenderClusterQueuePending(const projections::Engine& engine, Writer& w) {
  // Requests of the workloads waiting in each ClusterQueue (count x per-pod request), what
  // it would take to admit them all; no flavor is chosen yet.
  std::map<LabelValues, int64_t> pending;
  std::map<LabelValues, std::string> status;
  for (const auto& [name, cq] : engine.cluster_queues()) {
    if (!cq.spec) continue;
    const bool active = cq.inactive_reason.empty();
    status[{name, "active"}] = active ? "1" : "0";
    status[{name, "pending"}] = active ? "0" : "1";
    status[{name, "terminating"}] = "0";
    for (const auto& [key, cls] : cq.classes) {
      for (const projections::QueueKey& member : cls.members) {
        for (const auto& ps : member.wl->pod_sets) {
          for (const auto& [resource, milli] : ps.requests) {
            pending[{cq.spec->cohort, name, engine.resource_names().Name(resource)}] +=
                milli * ps.count;
          }
        }
      }
    }
  }
  std::map<LabelValues, std::string> text;
  for (const auto& [k, v] : pending) text[k] = Thousandths(v);
  w.Gauges("kueue_cluster_queue_resource_pending",
           "Resources requested by the workloads pending in the cluster_queue",
           {"cohort", "cluster_queue", "resource"}, text);
  w.Gauges("kueue_cluster_queue_status",
           "Reports 'cluster_queue' with its 'status' (pending, active or terminating); 1 for "
           "one of them",
           {"cluster_queue", "status"}, status);
}

// kueue_pending_workloads, per ClusterQueue and status.
void RenderPendingWorkloads(const projections::Engine& engine, Writer& w) {
  std::map<LabelValues, std::string> pending;
  for (const auto& [name, cq] : engine.cluster_queues()) {
    if (!cq.spec) continue;
    uint64_t active = 0, inadmissible = 0;
    for (const auto& [key, cls] : cq.classes) {
      (cls.inadmissible ? inadmissible : active) += cls.members.size();
    }
    pending[{name, "active"}] = std::to_string(active);
    pending[{name, "inadmissible"}] = std::to_string(inadmissible);
  }
  w.Gauges("kueue_pending_workloads",
           "The number of pending workloads, per cluster_queue and status (active: in the "
           "queue; inadmissible: found not to fit until something changes)",
           {"cluster_queue", "status"}, pending);
}

}  // namespace

void MetricsFold::RenderLocalQueues(const projections::Engine& engine, Writer& w) const {
  using projections::Phase;
  const std::vector<std::string> lq{"name", "namespace"};
  w.Histograms("kueue_local_queue_admission_checks_wait_time_seconds",
               "The time from when a workload got the quota reservation until admission, per "
               "'local_queue'",
               lq, Buckets14(), lq_admission_checks_wait_);
  w.Histograms("kueue_local_queue_admission_wait_time_seconds",
               "The time between a workload was created or requeued until admission, per "
               "'local_queue'",
               lq, Buckets14(), lq_admission_wait_);
  std::map<LabelValues, std::string> pending, reserving, admitted, reservation, usage;
  for (const auto& [key, spec] : engine.local_queues()) {
    pending[{spec.name, spec.ns, "active"}] = "0";
    pending[{spec.name, spec.ns, "inadmissible"}] = "0";
    reserving[{spec.name, spec.ns}] = "0";
    admitted[{spec.name, spec.ns}] = "0";
  }
  std::map<LabelValues, uint64_t> p, r, a;
  std::map<LabelValues, int64_t> res, use;
  for (const auto& [name, cq] : engine.cluster_queues()) {
    for (const auto& [k, cls] : cq.classes) {
      for (const projections::QueueKey& m : cls.members) {
        ++p[{m.wl->queue_name, m.wl->ns, cls.inadmissible ? "inadmissible" : "active"}];
      }
    }
    for (const projections::Holder& h : cq.holders) {
      ++r[{h.wl->queue_name, h.wl->ns}];
      const bool is_admitted = h.wl->phase == Phase::kAdmitted;
      if (is_admitted) ++a[{h.wl->queue_name, h.wl->ns}];
      for (const auto& [fr, milli] : h.wl->admission.usage) {
        const LabelValues k{h.wl->queue_name, h.wl->ns,
                            engine.flavor_names().Name(projections::FrFlavor(fr)),
                            engine.resource_names().Name(projections::FrResource(fr))};
        res[k] += milli;
        if (is_admitted) use[k] += milli;
      }
    }
  }
  for (const auto& [k, v] : p) pending[k] = std::to_string(v);
  for (const auto& [k, v] : r) reserving[k] = std::to_string(v);
  for (const auto& [k, v] : a) admitted[k] = std::to_string(v);
  for (const auto& [k, v] : res) {
    reservation[k] = Thousandths(v);
    usage[k] = Thousandths(use.count(k) ? use.at(k) : 0);
  }
  w.Gauges("kueue_local_queue_admitted_active_workloads",
           "The number of admitted Workloads that are active, per 'localQueue'", lq, admitted);
  w.Histograms("kueue_local_queue_admitted_until_ready_wait_time_seconds",
               "The time between a workload was admitted until ready, per 'local_queue'", lq,
               Buckets14(), lq_admitted_until_ready_);
  w.Counter("kueue_local_queue_admitted_workloads_total",
            "The total number of admitted workloads per 'local_queue'", lq, lq_admitted_);
  w.Counter("kueue_local_queue_evicted_workloads_total",
            "The number of evicted workloads per 'local_queue'", {"name", "namespace", "reason"},
            lq_evicted_);
  w.Gauges("kueue_local_queue_pending_workloads",
           "The number of pending workloads, per 'local_queue' and 'status'",
           {"name", "namespace", "status"}, pending);
  w.Counter("kueue_local_queue_quota_reserved_workloads_total",
            "The total number of quota reserved workloads per 'local_queue'", lq,
            lq_quota_reserved_);
  w.Histograms("kueue_local_queue_quota_reserved_wait_time_seconds",
               "The time between a workload was created or requeued until it got quota "
               "reservation, per 'local_queue'",
               lq, Buckets14(), lq_quota_reserved_wait_);
  w.Histograms("kueue_local_queue_ready_wait_time_seconds",
               "The time between a workload was created or requeued until ready, per "
               "'local_queue'",
               lq, Buckets14(), lq_ready_wait_);
  w.Gauges("kueue_local_queue_reserving_active_workloads",
           "The number of Workloads that are reserving quota, per 'localQueue'", lq, reserving);
  w.Gauges("kueue_local_queue_resource_reservation",
           "Reports the localQueue's total resource reservation within all the flavors",
           {"name", "namespace", "flavor", "resource"}, reservation);
  w.Gauges("kueue_local_queue_resource_usage",
           "Reports the localQueue's total resource usage within all the flavors",
           {"name", "namespace", "flavor", "resource"}, usage);
}

std::vector<int64_t> KueueBucketsMs(int count) {
  std::vector<int64_t> out{1000};
  int64_t b = 2500;
  for (int i = 1; i < count; ++i, b *= 2) out.push_back(b);
  return out;
}

void Histogram::Observe(const std::vector<int64_t>& bounds_ms, int64_t value_ms) {
  if (counts.empty()) counts.assign(bounds_ms.size() + 1, 0);
  value_ms = std::max<int64_t>(value_ms, 0);
  const size_t i = static_cast<size_t>(
      std::lower_bound(bounds_ms.begin(), bounds_ms.end(), value_ms) - bounds_ms.begin());
  ++counts[i];
  sum_ms += value_ms;
  ++count;
}

MetricsFold::MetricsFold() = default;

void MetricsFold::Observe(HistogramSeries& h, const std::vector<int64_t>& bounds,
                          LabelValues labels, int64_t value_ms) {
  h[std::move(labels)].Observe(bounds, value_ms);
}

void MetricsFold::Apply(uint64_t sequence, schema::Event::Reader event) {
  usage_.Apply(sequence, event);
  last_sequence_ = sequence;
  const int64_t at = Ms(event.getRecordedAtNs());
  last_time_ms_ = std::max(last_time_ms_, at);
  auto body = event.getBody();
  switch (body.which()) {
    case schema::Event::Body::LOCAL_QUEUE_DEFINED: {
      auto lq = body.getLocalQueueDefined();
      local_queues_[std::string(lq.getNamespace().cStr()) + "/" + lq.getName().cStr()] =
          lq.getClusterQueue().cStr();
      break;
    }
    case schema::Event::Body::WORKLOAD_SUBMITTED:
      ApplyQueued(body.getWorkloadSubmitted().getWorkload(), at);
      break;
    case schema::Event::Body::WORKLOAD_IMPORTED:
      ApplyQueued(body.getWorkloadImported().getWorkload(), at);
      break;
    case schema::Event::Body::WORKLOAD_FINISHED:
      tracks_.erase(body.getWorkloadFinished().getWorkload().getUid().cStr());
      break;
    case schema::Event::Body::WORKLOAD_DELETED:
      tracks_.erase(body.getWorkloadDeleted().getWorkload().getUid().cStr());
      break;
    case schema::Event::Body::QUOTA_RESERVED:
      ApplyQuotaReserved(body.getQuotaReserved(), at);
      break;
    case schema::Event::Body::ADMITTED:
      ApplyAdmitted(body.getAdmitted().getWorkload(), at);
      break;
    case schema::Event::Body::CHECK_STATE_REPORTED:
      ApplyCheckReported(body.getCheckStateReported(), at);
      break;
    case schema::Event::Body::PODS_REPORTED:
      ApplyPodsReported(body.getPodsReported(), at);
      break;
    case schema::Event::Body::REQUEUED:
      ApplyRequeued(body.getRequeued(), at);
      break;
    default:
      ApplyCounted(body);
      break;
  }
}

MetricsFold::Track* MetricsFold::Find(schema::WorkloadRef::Reader ref) {
  auto it = tracks_.find(ref.getUid().cStr());
  return it == tracks_.end() ? nullptr : &it->second;
}

void MetricsFold::ApplyQueued(schema::Workload::Reader wl, int64_t at) {
  Track& t = tracks_[wl.getUid().cStr()];
  t = Track{};
  auto lq = local_queues_.find(std::string(wl.getNamespace().cStr()) + "/" +
                               wl.getQueueName().cStr());
  if (lq != local_queues_.end()) t.cluster_queue = lq->second;
  t.priority_class = wl.getPriorityClassName().cStr();
  t.queue_name = wl.getQueueName().cStr();
  t.ns = wl.getNamespace().cStr();
  t.queued_ms = at;
}

void MetricsFold::ApplyQuotaReserved(schema::QuotaReserved::Reader qr, int64_t at) {
  Track* t = Find(qr.getWorkload());
  if (t == nullptr) return;
  t->cluster_queue = qr.getAdmission().getClusterQueue().cStr();
  t->reserved_ms = at;
  t->admitted_ms = -1;
  t->generation = qr.getGeneration();
  t->ready_seen = false;
  ++quota_reserved_[{t->cluster_queue, t->priority_class}];
  Observe(quota_reserved_wait_, Buckets14(), {t->cluster_queue, t->priority_class},
          at - t->queued_ms);
  ++lq_quota_reserved_[{t->queue_name, t->ns}];
  Observe(lq_quota_reserved_wait_, Buckets14(), {t->queue_name, t->ns}, at - t->queued_ms);
  for (auto ps : qr.getAdmission().getPodSetAssignments()) {
    for (auto f : ps.getFlavors()) {
      ++flavor_assignments_[{t->cluster_queue, f.getFlavor().cStr(), f.getResource().cStr()}];
    }
  }
}

void MetricsFold::ApplyAdmitted(schema::WorkloadRef::Reader ref, int64_t at) {
  Track* t = Find(ref);
  if (t == nullptr) return;
  t->admitted_ms = at;
  ++admitted_[{t->cluster_queue, t->priority_class}];
  Observe(admission_wait_, Buckets16(), {t->cluster_queue, t->priority_class},
          at - t->queued_ms);
  ++lq_admitted_[{t->queue_name, t->ns}];
  Observe(lq_admission_wait_, Buckets14(), {t->queue_name, t->ns}, at - t->queued_ms);
  if (t->reserved_ms >= 0) {
    Observe(admission_checks_wait_, Buckets14(), {t->cluster_queue, t->priority_class},
            at - t->reserved_ms);
    Observe(lq_admission_checks_wait_, Buckets14(), {t->queue_name, t->ns},
            at - t->reserved_ms);
  }
}

void MetricsFold::ApplyCheckReported(schema::CheckStateReported::Reader r, int64_t at) {
  ++check_reports_[{r.getCheck().cStr(), schema::CheckStateName(r.getState())}];
  Track* t = Find(r.getWorkload());
  if (t == nullptr || r.getState() == schema::CheckState::PENDING || t->reserved_ms < 0 ||
      r.getGeneration() != t->generation) {
    return;
  }
  Observe(check_wait_, Buckets14(),
          {t->cluster_queue, r.getCheck().cStr(), schema::CheckStateName(r.getState())},
          at - t->reserved_ms);
}

void MetricsFold::ApplyPodsReported(schema::PodsReported::Reader p, int64_t at) {
  Track* t = Find(p.getWorkload());
  if (t == nullptr || p.getReport() != schema::PodsReport::READY || t->ready_seen ||
      t->admitted_ms < 0) {
    return;
  }
  t->ready_seen = true;
  Observe(ready_wait_, Buckets14(), {t->cluster_queue, t->priority_class}, at - t->queued_ms);
  Observe(admitted_until_ready_, Buckets14(), {t->cluster_queue, t->priority_class},
          at - t->admitted_ms);
  Observe(lq_ready_wait_, Buckets14(), {t->queue_name, t->ns}, at - t->queued_ms);
  Observe(lq_admitted_until_ready_, Buckets14(), {t->queue_name, t->ns}, at - t->admitted_ms);
}

void MetricsFold::ApplyRequeued(schema::Requeued::Reader r, int64_t at) {
  Track* t = Find(r.getWorkload());
  if (t != nullptr) {
    // The wait starts again when the workload is back in its queue.
    t->queued_ms = std::max(at, Ms(r.getRequeueAtNs()));
    t->reserved_ms = t->admitted_ms = -1;
  }
  ++requeued_[{t != nullptr ? t->cluster_queue : "", r.getReason().cStr()}];
}

void MetricsFold::ApplyCounted(schema::Event::Body::Reader body) {
  switch (body.which()) {
    case schema::Event::Body::EVICTION_STARTED: {
      auto e = body.getEvictionStarted();
      Track* t = Find(e.getWorkload());
      const std::string cq = t != nullptr ? t->cluster_queue : "";
      const std::string pc = t != nullptr ? t->priority_class : "";
      ++evicted_[{cq, e.getReason().cStr(), "", pc}];
      if (t != nullptr) ++lq_evicted_[{t->queue_name, t->ns, e.getReason().cStr()}];
      break;
    }
    case schema::Event::Body::PREEMPTED: {
      auto p = body.getPreempted();
      Track* preemptor = Find(p.getPreemptor());
      ++preempted_[{preemptor != nullptr ? preemptor->cluster_queue : "", p.getReason().cStr()}];
      break;
    }
    case schema::Event::Body::REJECTED: {
      auto r = body.getRejected();
      Track* t = Find(r.getWorkload());
      ++rejected_[{t != nullptr ? t->cluster_queue : "", r.getReason().cStr()}];
      break;
    }
    case schema::Event::Body::DEACTIVATED: {
      auto d = body.getDeactivated();
      Track* t = Find(d.getWorkload());
      ++deactivated_[{t != nullptr ? t->cluster_queue : "", d.getReason().cStr()}];
      break;
    }
    case schema::Event::Body::REVOCATION_REQUESTED:
      ++revocations_[{RevocationTarget(body.getRevocationRequested())}];
      break;
    case schema::Event::Body::STARVATION_ALERT: {
      Track* t = Find(body.getStarvationAlert().getWorkload());
      ++starvation_alerts_[{t != nullptr ? t->cluster_queue : ""}];
      break;
    }
    default:
      break;
  }
}

std::string MetricsFold::Render(const projections::Engine& engine,
                                const RenderOptions& options) const {
  Writer w;
  // Ours, then Kueue's, each in name order.
  RenderOurs(engine, w);
  RenderKueue(engine, options, w);
  return std::move(w.text());
}

void MetricsFold::RenderOurs(const projections::Engine& engine, Writer& w) const {
  RenderBudgets(engine, w);
  w.Family("admission_build_info", "gauge",
           "The decider's engine version that made this ledger's latest decisions");
  w.Sample("admission_build_info", {"engine_version"},
           {std::to_string(projections::kEngineVersion)}, "1");
  w.Histograms("admission_check_wait_time_seconds",
               "Time from the quota reservation to a check's report (Ready, Retry or Rejected), "
               "per check",
               {"cluster_queue", "admission_check", "result"}, Buckets14(), check_wait_);
  w.Counter("admission_check_reports_total", "Check reports recorded, by check and state",
            {"admission_check", "state"}, check_reports_);
  RenderPendingChecks(engine, last_time_ms_, w);
  w.Counter("admission_deactivated_workloads_total", "Workloads deactivated, by reason",
            {"cluster_queue", "reason"}, deactivated_);
  w.Counter("admission_flavor_assignments_total",
            "Flavors chosen at quota reservation, per podSet resource",
            {"cluster_queue", "flavor", "resource"}, flavor_assignments_);
  RenderIdleGpuSeconds(usage_, w);
  RenderIdleGpus(engine, w);
  w.Gauges("admission_ledger_head_sequence", "The last ledger sequence these metrics fold", {},
           {{{}, std::to_string(last_sequence_)}});
  w.Gauges("admission_ledger_time_seconds", "Ledger time of the last event folded (Unix seconds)",
           {}, {{{}, Thousandths(last_time_ms_)}});
  w.Counter("admission_rejected_workloads_total", "Workloads rejected, by reason",
            {"cluster_queue", "reason"}, rejected_);
  w.Counter("admission_requeued_workloads_total", "Requeues, by reason",
            {"cluster_queue", "reason"}, requeued_);
  w.Counter("admission_revocations_total",
            "Revocations requested, by target kind (workload, check or flavor)", {"target"},
            revocations_);
  w.Counter("admission_starvation_alerts_total", "Starvation alerts raised",
            {"cluster_queue"}, starvation_alerts_);
  RenderTopologyFragmentation(engine, w);
}

void MetricsFold::RenderKueue(const projections::Engine& engine, const RenderOptions& options,
                              Writer& w) const {
  const std::vector<std::string> cq_pc{"cluster_queue", "priority_class"};
  w.Histograms("kueue_admission_checks_wait_time_seconds",
               "The time from when a workload got the quota reservation until admission",
               cq_pc, Buckets14(), admission_checks_wait_);
  w.Histograms("kueue_admission_wait_time_seconds",
               "The time between a workload was created or requeued until admission", cq_pc,
               Buckets16(), admission_wait_);
  RenderAdmittedActive(engine, w);
  w.Histograms("kueue_admitted_until_ready_wait_time_seconds",
               "The time between a workload was admitted until ready", cq_pc, Buckets14(),
               admitted_until_ready_);
  w.Counter("kueue_admitted_workloads_total", "The total number of admitted workloads", cq_pc,
            admitted_);
  RenderClusterQueueQuotas(engine, w);
  RenderClusterQueuePending(engine, w);
  w.Counter("kueue_evicted_workloads_total", "The number of evicted workloads per cluster_queue",
            {"cluster_queue", "reason", "underlying_cause", "priority_class"}, evicted_);
  if (options.local_queues) RenderLocalQueues(engine, w);
  RenderPendingWorkloads(engine, w);
  w.Counter("kueue_preempted_workloads_total", "The number of preempted workloads",
            {"preempting_cluster_queue", "reason"}, preempted_);
  w.Counter("kueue_quota_reserved_workloads_total", "The total number of quota reserved workloads",
            cq_pc, quota_reserved_);
  w.Histograms("kueue_quota_reserved_wait_time_seconds",
               "The time between a workload was created or requeued until it got quota "
               "reservation",
               cq_pc, Buckets14(), quota_reserved_wait_);
  w.Histograms("kueue_ready_wait_time_seconds",
               "The time between a workload was created or requeued until ready", cq_pc,
               Buckets14(), ready_wait_);
  std::map<LabelValues, std::string> reserving;
  for (const auto& [name, cq] : engine.cluster_queues()) {
    if (cq.spec) reserving[{name}] = std::to_string(cq.holders.size());
  }
  w.Gauges("kueue_reserving_active_workloads",
           "The number of workloads that are reserving quota", {"cluster_queue"}, reserving);
}

}  // namespace admission::consumers::metrics

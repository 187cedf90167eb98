#include "ops/views/dashboard.h"

#include <algorithm>

#include "ops/views/render.h"
#include "projections/topology_fragmentation.h"
#include "schema/event_codec.h"
#include "schema/quantity.h"
#include "schema/time_format.h"

namespace admission::ops {

namespace {

using projections::Phase;

double Units(int64_t milli) { return static_cast<double>(milli) / 1000.0; }

// The ClusterQueue's resources: nominal quota, reservation and admitted usage per flavor.
Json QueueResources(const projections::Engine& engine, const projections::ClusterQueueState& cq) {
  Json out = Json::array();
  if (!cq.spec) return out;
  for (const auto& group : cq.spec->resource_groups) {
    for (const auto& fq : group.flavors) {
      for (const auto& [resource, quota] : fq.resources) {
        const projections::Fr fr = projections::MakeFr(fq.flavor, resource);
        auto used = cq.usage.find(fr);
        const int64_t reserved = used == cq.usage.end() ? 0 : used->second;
        int64_t admitted = 0;
        for (const projections::Holder& h : cq.holders) {
          if (h.wl->phase != Phase::kAdmitted) continue;
          auto u = h.wl->admission.usage.find(fr);
          if (u != h.wl->admission.usage.end()) admitted += u->second;
        }
        const std::string& name = engine.resource_names().Name(resource);
        const int64_t borrowed = std::max<int64_t>(0, reserved - quota.nominal);
        // Numbers for the bars; "quantities" in Kubernetes form for people ("64Gi").
        out.push_back({{"flavor", engine.flavor_names().Name(fq.flavor)},
                       {"resource", name},
                       {"nominal", Units(quota.nominal)},
                       {"reserved", Units(reserved)},
                       {"admitted", Units(admitted)},
                       {"borrowed", Units(borrowed)},
                       {"quantities",
                        {{"nominal", schema::FormatQuantityMilli(quota.nominal, name)},
                         {"reserved", schema::FormatQuantityMilli(reserved, name)},
                         {"admitted", schema::FormatQuantityMilli(admitted, name)},
                         {"borrowed", schema::FormatQuantityMilli(borrowed, name)}}}});
      }
    }
  }
  return out;
}

std::string RefNs(schema::WorkloadRef::Reader ref) { return ref.getNamespace().cStr(); }

// The namespace an event is about, when it names a workload.
std::string NamespaceOf(schema::Event::Reader e) {
  auto b = e.getBody();
  switch (b.which()) {
    case schema::Event::Body::EVICTION_STARTED:
      return RefNs(b.getEvictionStarted().getWorkload());
    case schema::Event::Body::PREEMPTED:
      return RefNs(b.getPreempted().getWorkload());
    case schema::Event::Body::REJECTED:
      return RefNs(b.getRejected().getWorkload());
    case schema::Event::Body::DEACTIVATED:
      return RefNs(b.getDeactivated().getWorkload());
    default:
      return "";
  }
}

// Each budget policy in its current period, per resource (docs/budgets.md); a tenant sees the
// policies of its namespaces only.
Json DashboardBudgets(const projections::Engine& engine, const NamespaceFilter& allow) {
  Json out = Json::array();
  for (const auto& [name, policy] : engine.budget_policies()) {
    const bool by_namespace = policy.scope == projections::BudgetScope::kNamespace ||
                              policy.scope == projections::BudgetScope::kLocalQueue;
    if (allow && !(by_namespace && allow(policy.scope_ns))) continue;
    for (const projections::BudgetStanding& s : engine.BudgetStandings(policy)) {
      const __int128 left = std::max<__int128>(0, s.limit - s.used - s.committed);
      out.push_back({{"policy", name},
                     {"scope", projections::ScopeText(policy)},
                     {"resource", s.resource},
                     {"period", s.window.label},
                     {"limitHours", projections::UnitHours(s.limit)},
                     {"usedHours", projections::UnitHours(s.used)},
                     {"committedHours", projections::UnitHours(s.committed)},
                     {"remainingHours", projections::UnitHours(left)}});
    }
  }
  return out;
}

// Per TAS flavor and topology level: the largest free domain and the domains that could hold
// the largest pending TAS request (the admission_tas_* gauges). The platform's, as the
// ClusterQueues: no workload is named.
Json DashboardTopology(const projections::Engine& engine) {
  Json out = Json::array();
  for (const projections::TasFragmentation& f : projections::TopologyFragmentation(engine)) {
    Json levels = Json::array();
    for (const projections::TasLevelFragmentation& l : f.levels) {
      levels.push_back({{"level", l.level},
                        {"domains", l.domains},
                        {"largestFree", l.largest_free},
                        {"largestDomain", l.largest_domain},
                        {"fittingLargestPending", l.fitting_largest_pending
                                                      ? Json(*l.fitting_largest_pending)
                                                      : Json(nullptr)}});
    }
    Json pending = nullptr;
    if (f.largest_pending) {
      const projections::TasPendingRequest& p = *f.largest_pending;
      pending = {{"pods", p.count},
                 {"perPod", f.resource == "pods"
                                ? std::string()
                                : schema::FormatQuantityMilli(p.unit_milli_per_pod, f.resource)},
                 {"level", p.level}};
    }
    out.push_back({{"flavor", f.flavor},
                   {"topology", f.topology},
                   {"resource", f.resource},
                   {"largestPending", pending},
                   {"levels", levels}});
  }
  return out;
}

}  // namespace

Json DashboardOverview(const projections::Engine& engine, const LedgerTail& tail,
                       const NamespaceFilter& allow, const CheckRejections& rejected) {
  Json doc;
  doc["head"] = {{"sequence", tail.head_sequence}, {"hash", tail.head_hash_hex}};
  Json queues = Json::array();
  for (const auto& [name, cq] : engine.cluster_queues()) {
    if (!cq.spec) continue;
    uint64_t active = 0, inadmissible = 0, admitted = 0;
    for (const auto& [key, cls] : cq.classes) {
      (cls.inadmissible ? inadmissible : active) += cls.members.size();
    }
    for (const projections::Holder& h : cq.holders) admitted += h.wl->phase == Phase::kAdmitted;
    queues.push_back({{"name", name},
                      {"cohort", cq.spec->cohort},
                      {"stopped", !cq.inactive_reason.empty()},
                      {"pending", {{"active", active}, {"inadmissible", inadmissible}}},
                      {"reserving", cq.holders.size()},
                      {"admitted", admitted},
                      {"resources", QueueResources(engine, cq)}});
  }
  doc["clusterQueues"] = queues;
  std::map<std::string, uint64_t> reasons;
  double idle_gpus = 0;
  for (const auto& [key, wl] : engine.workloads()) {
    if (allow && !allow(wl.ns)) continue;
    if (wl.phase == Phase::kPending) {
      ++reasons[wl.pending_reason.empty() ? "Pending" : wl.pending_reason];
    }
    if (projections::HoldsQuota(wl.phase) && !wl.pods_released) {
      for (const auto& [fr, milli] : wl.admission.usage) {
        if (engine.resource_names().Name(projections::FrResource(fr)) == "nvidia.com/gpu") {
          idle_gpus += Units(milli);
        }
      }
    }
  }
  Json pending = Json::object();
  for (const auto& [r, n] : reasons) pending[r] = n;
  doc["pendingByReason"] = pending;
  doc["idleGpus"] = idle_gpus;
  doc["checks"] = DashboardChecks(engine, allow, rejected);
  doc["budgets"] = DashboardBudgets(engine, allow);
  doc["topology"] = DashboardTopology(engine);
  // The latest evictions, preemptions and rejections.
  Json recent = Json::array();
  std::vector<Json> found;
  for (const auto& [sequence, bytes] : tail.events) {
    auto decoded = schema::DecodeEvent(bytes);
    if (!decoded.ok()) continue;
    const auto which = decoded->root().getBody().which();
    const char* kind = which == schema::Event::Body::EVICTION_STARTED ? "eviction"
                       : which == schema::Event::Body::PREEMPTED      ? "preemption"
                       : which == schema::Event::Body::REJECTED       ? "rejection"
                       : which == schema::Event::Body::DEACTIVATED    ? "deactivation"
                                                                      : nullptr;
    if (kind == nullptr) continue;
    if (allow && !allow(NamespaceOf(decoded->root()))) continue;
    found.push_back({{"sequence", sequence},
                     {"time", FormatRfc3339(decoded->root().getRecordedAtNs())},
                     {"kind", kind},
                     {"text", DescribeDecision(decoded->root())}});
  }
  for (auto it = found.rbegin(); it != found.rend() && recent.size() < 20; ++it) recent.push_back(*it);
  doc["recent"] = recent;
  return doc;
}

Json DashboardWorkloads(const projections::Engine& engine, const NamespaceFilter& allow) {
  // Positions in each ClusterQueue's pending order, and within each LocalQueue of it.
  std::map<std::string, std::pair<size_t, size_t>> positions;
  for (const auto& [name, cq] : engine.cluster_queues()) {
    std::map<std::string, size_t> per_lq;
    size_t i = 0;
    for (const std::string& key : engine.PendingInOrder(name)) {
      auto wl = engine.workloads().find(key);
      if (wl == engine.workloads().end()) continue;
      positions[key] = {i++, per_lq[wl->second.local_queue_key]++};
    }
  }
  Json items = Json::array();
  for (const auto& [key, wl] : engine.workloads()) {
    if (allow && !allow(wl.ns)) continue;
    Json item{{"namespace", wl.ns},
              {"name", wl.name},
              {"localQueue", wl.queue_name},
              {"clusterQueue", wl.cluster_queue},
              {"state", projections::PhaseName(wl.phase)},
              {"reason", StateReason(wl)},
              {"priority", wl.priority},
              {"priorityClass", wl.priority_class}};
    auto pos = positions.find(key);
    if (pos != positions.end()) {
      item["positionInClusterQueue"] = pos->second.first;
      item["positionInLocalQueue"] = pos->second.second;
    }
    Json flavors = Json::array();
    for (const auto& [fr, milli] : wl.admission.usage) {
      const std::string& rn = engine.resource_names().Name(projections::FrResource(fr));
      flavors.push_back(engine.flavor_names().Name(projections::FrFlavor(fr)) + " " + rn + "=" +
                        schema::FormatQuantityMilli(milli, rn));
    }
    if (projections::HoldsQuota(wl.phase)) item["admission"] = flavors;
    items.push_back(std::move(item));
  }
  return Json{{"items", items}};
}

Json DashboardCohorts(const projections::Engine& engine) {
  Json cohorts = CohortsJson(engine);
  Json queues = Json::array();
  for (const auto& [name, cq] : engine.cluster_queues()) {
    if (!cq.spec) continue;
    queues.push_back({{"name", name}, {"cohort", cq.spec->cohort}, {"resources", QueueResources(engine, cq)}});
  }
  return Json{{"cohorts", cohorts}, {"clusterQueues", queues}};
}

Json DashboardChecks(const projections::Engine& engine, const NamespaceFilter& allow,
                     const CheckRejections& rejected) {
  struct Row {
    uint64_t pending = 0;
    int64_t oldest_ns = -1;
  };
  std::map<std::string, Row> rows;
  for (const auto& [name, spec] : engine.admission_checks()) rows[name];
  for (const auto& [key, wl] : engine.workloads()) {
    if (wl.phase != Phase::kReserved || (allow && !allow(wl.ns))) continue;
    for (const auto& [check, status] : wl.checks) {
      if (status.state != projections::CheckState::kPending) continue;
      Row& row = rows[check];
      ++row.pending;
      if (row.oldest_ns < 0 || status.last_transition_ns < row.oldest_ns) {
        row.oldest_ns = status.last_transition_ns;
      }
    }
  }
  Json out = Json::array();
  for (const auto& [name, row] : rows) {
    auto spec = engine.admission_checks().find(name);
    Json r{{"name", name},
           {"controller", spec == engine.admission_checks().end() ? "" : spec->second.controller},
           {"pending", row.pending},
           {"rejected", rejected.count(name) ? rejected.at(name) : 0}};
    if (row.oldest_ns >= 0) r["oldestPendingSince"] = FormatRfc3339(row.oldest_ns);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace admission::ops

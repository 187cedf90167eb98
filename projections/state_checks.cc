#include "projections/state_checks.h"

#include <functional>
#include <map>
#include <set>

namespace admission::projections {


std::string Violation::ToString() const {
  return invariant + (object.empty() ? "" : " (" + object + ")") + ": " + detail;
}

namespace {

std::string FrName(const Engine& engine, Fr fr) {
  return engine.flavor_names().Name(FrFlavor(fr)) + "/" +
         engine.resource_names().Name(FrResource(fr));
}

}  // namespace

namespace {

// Every node of `tree` within its limits for the flavor-resources `only` picks (all when null),
// at the nodes `at` picks (all when null).
std::optional<Violation> CheckTree(const Engine& engine, const QuotaTree& tree,
                                   const std::function<bool(int, Fr)>& only,
                                   const std::string& what) {
  for (size_t id = 0; id < tree.size(); ++id) {
    const int node_id = static_cast<int>(id);
    const auto& node = tree.node(node_id);
    for (const auto& [fr, usage] : node.usage) {
      if (only && !only(node_id, fr)) continue;
      const int64_t nominal = tree.Nominal(node_id, fr);
      const std::string where = "quota-tree node " + std::to_string(id);
      if (tree.Available(node_id, fr) < 0) {
        return Violation{"quota-within-limits", where,
                         what + FrName(engine, fr) + " available " +
                             std::to_string(tree.Available(node_id, fr)) + " < 0 (usage " +
                             std::to_string(usage) + ")"};
      }
      if (node.parent == -1 && usage > nominal) {
        return Violation{"quota-within-limits", where,
                         what + FrName(engine, fr) + " usage " + std::to_string(usage) +
                             " above the root's quota " + std::to_string(nominal)};
      }
      auto q = node.quota.find(fr);
      if (q != node.quota.end() && q->second.borrowing_limit && node.parent != -1 &&
          usage > nominal + *q->second.borrowing_limit) {
        return Violation{"quota-within-limits", where,
                         what + FrName(engine, fr) + " usage " + std::to_string(usage) +
                             " above nominal " + std::to_string(nominal) +
                             " + borrowing limit " + std::to_string(*q->second.borrowing_limit)};
      }
    }
  }
  return std::nullopt;
}

// A ClusterQueue's usage is the sum of the admissions of the workloads holding quota in it:
// first as the decider keeps it (Engine::CheckInvariants: its holders and its quota tree), then
// recomputed here from the workloads alone.
std::optional<Violation> CheckUsageIsSumOfHolders(const Engine& engine) {
  if (const Status held = engine.CheckInvariants(); !held.ok()) {
    return Violation{"quota-usage-is-sum-of-holders", "", held.message()};
  }
  std::map<std::string, FrQuantities> recomputed;
  for (const auto& [key, wl] : engine.workloads()) {
    if (!HoldsQuota(wl.phase)) continue;
    for (const auto& [fr, v] : wl.admission.usage) {
      if (v != 0) recomputed[wl.cluster_queue][fr] += v;
    }
  }
  for (const auto& [name, cq] : engine.cluster_queues()) {
    FrQuantities held;
    for (const auto& [fr, v] : cq.usage) {
      if (v != 0) held[fr] = v;
    }
    if (held != recomputed[name]) {
      std::string detail = "usage is not the sum of its holders' admissions:";
      for (const auto& [fr, v] : held) detail += " " + FrName(engine, fr) + "=" + std::to_string(v);
      detail += " vs";
      for (const auto& [fr, v] : recomputed[name]) {
        detail += " " + FrName(engine, fr) + "=" + std::to_string(v);
      }
      return Violation{"quota-usage-is-sum-of-holders", name, detail};
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<Violation> CheckQuota(const Engine& engine) {
  if (auto v = CheckUsageIsSumOfHolders(engine)) return v;
  return CheckTree(engine, engine.tree(), nullptr, "");
}

std::optional<Violation> CheckQuotaAfterDecreases(const Engine& engine,
                                                   const std::set<std::string>& reserved) {
  if (auto v = CheckUsageIsSumOfHolders(engine)) return v;
  QuotaTree tree = engine.tree();
  // (node, flavor-resource) pairs a reservation of this append depends on: its ClusterQueue's
  // node and every cohort above it.
  std::set<std::pair<int, Fr>> depends_on;
  for (const auto& [key, wl] : engine.workloads()) {
    const int node = tree.FindClusterQueue(wl.cluster_queue);
    if (wl.phase == Phase::kEvicting) {
      if (node >= 0) tree.AddUsage(node, wl.admission.usage, -1);
    } else if (HoldsQuota(wl.phase) && reserved.count(key) > 0) {
      for (int n = node; n >= 0; n = tree.node(n).parent) {
        for (const auto& [fr, v] : wl.admission.usage) depends_on.insert({n, fr});
      }
    }
  }
  // Without the draining workloads: within every limit, always.
  if (auto v = CheckTree(engine, tree, nullptr, "without draining workloads: ")) return v;
  // With them: within the limits of whatever a reservation of this append depends on.
  if (depends_on.empty()) return std::nullopt;
  return CheckTree(engine, engine.tree(),
                   [&](int node, Fr fr) { return depends_on.count({node, fr}) > 0; },
                   "with draining workloads, after a new reservation: ");
}

std::optional<Violation> CheckNodeCapacity(const Engine& engine, const FrQuantities& usage_before,
                                           FrQuantities* usage_after) {
  FrQuantities now;
  for (const auto& [name, cq] : engine.cluster_queues()) {
    for (const auto& [fr, v] : cq.usage) now[fr] += v;
  }
  std::optional<Violation> found;
  for (const auto& [fr, used] : now) {
    const int64_t capacity = engine.node_capacity(fr);
    if (capacity == INT64_MAX || used <= capacity) continue;
    auto before = usage_before.find(fr);
    const int64_t was = before == usage_before.end() ? 0 : before->second;
    if (used > was && !found) {
      found = Violation{"node-capacity",
                        engine.flavor_names().Name(FrFlavor(fr)) + "/" +
                            engine.resource_names().Name(FrResource(fr)),
                        "usage " + std::to_string(used) + " (was " + std::to_string(was) +
                            ") above the healthy nodes' " + std::to_string(capacity)};
    }
  }
  *usage_after = std::move(now);
  return found;
}

std::optional<Violation> CheckFlavors(const Engine& engine) {
  for (const auto& [key, wl] : engine.workloads()) {
    if (wl.phase != Phase::kAdmitted) continue;
    for (size_t i = 0; i < wl.admission.pod_sets.size(); ++i) {
      const auto& psa = wl.admission.pod_sets[i];
      const auto& ps = wl.pod_sets[i];
      for (const auto& [resource, flavor_id] : psa.flavors) {
        const Flavor& flavor =
            engine.flavors().at(engine.flavor_names().Name(flavor_id));
        for (const auto& [k, v] : ps.node_selector) {
          auto label = flavor.node_labels.find(k);
          if (label == flavor.node_labels.end() || label->second != v) {
            return Violation{"flavor-matches-selector", key,
                             "podSet " + ps.name + " selects " + k + "=" + v + ", flavor " +
                                 flavor.name + " does not have it"};
          }
        }
        for (const auto& taint : flavor.node_taints) {
          bool tolerated = false;
          for (const auto& t : ps.tolerations) {
            tolerated = tolerated || (t.key == taint.key && t.op == "Exists");
          }
          if (!tolerated) {
            return Violation{"flavor-taints-tolerated", key,
                             "podSet " + ps.name + " does not tolerate taint " + taint.key +
                                 " of flavor " + flavor.name};
          }
        }
      }
    }
  }
  return std::nullopt;
}

namespace {

std::optional<Violation> CheckWorkload(const WorkloadState& wl) {
  if (wl.phase == Phase::kAdmitted) {
    for (const auto& [name, cs] : wl.checks) {
      if (cs.state != CheckState::kReady) {
        return Violation{"admitted-only-with-every-check-ready", wl.key,
                         "check " + name + " is " + CheckStateName(cs.state) +
                             " in generation " +
                             std::to_string(wl.generation)};
      }
    }
    const std::string token = wl.uid + "/" + std::to_string(wl.generation);
    if (wl.fencing_token != token) {
      return Violation{"token-of-the-current-generation", wl.key,
                       "token '" + wl.fencing_token + "', expected '" + token + "'"};
    }
  } else if (!wl.fencing_token.empty()) {
    return Violation{"token-only-while-admitted", wl.key,
                     std::string(PhaseName(wl.phase)) + " with token '" +
                         wl.fencing_token + "'"};
  }
  switch (wl.phase) {
    case Phase::kPending:
      if (wl.pending_reason.empty() && wl.requeue_at_ns <= 0 && !wl.queued) {
        return Violation{"pending-with-a-reason", wl.key,
                         "pending, not queued, no backoff and no pending reason"};
      }
      break;
    case Phase::kReserved:
      if (wl.checks.empty()) {
        return Violation{"reserved-waits-for-checks", wl.key,
                         "quota reserved without checks to wait for, but not admitted"};
      }
      break;
    case Phase::kEvicting: {
      const Condition* c = wl.conditions.Find(ConditionType::kEvicted);
      if (c == nullptr || c->reason.empty()) {
        return Violation{"evicted-with-a-reason", wl.key, "evicting without an Evicted reason"};
      }
      break;
    }
    case Phase::kDeactivated: {
      const Condition* c =
          wl.conditions.Find(ConditionType::kDeactivated);
      if (c == nullptr || c->reason.empty()) {
        return Violation{"terminal-with-a-reason", wl.key,
                         "deactivated without a Deactivated reason"};
      }
      break;
    }
    default:
      break;
  }
  return std::nullopt;
}

}  // namespace

std::optional<Violation> CheckWorkloads(const Engine& engine) {
  for (const auto& [key, wl] : engine.workloads()) {
    if (auto v = CheckWorkload(wl)) return v;
  }
  return std::nullopt;
}

std::optional<Violation> CheckLifecycle(const Engine& engine) {
  if (auto v = CheckQuota(engine)) return v;
  return CheckWorkloads(engine);
}

std::optional<Violation> CheckStarvationAlerts(const Engine& engine, int64_t now_ns) {
  for (const auto& [key, wl] : engine.workloads()) {
    if (wl.phase != Phase::kPending || wl.starvation_alerted || !wl.queued) continue;
    auto cq = engine.cluster_queues().find(wl.cluster_queue);
    if (cq == engine.cluster_queues().end() || !cq->second.spec) continue;
    const int64_t max_wait_ns = cq->second.spec->max_wait_ns;
    if (max_wait_ns <= 0 || wl.pending_since_ns <= 0) continue;
    if (now_ns >= wl.pending_since_ns + max_wait_ns) {
      return Violation{"no-wait-past-max-wait-without-alert", key,
                       "pending since " + std::to_string(wl.pending_since_ns) + " ns, " +
                           std::to_string((now_ns - wl.pending_since_ns) / 1'000'000'000) +
                           " s at " + std::to_string(now_ns) + " ns, max wait " +
                           std::to_string(max_wait_ns / 1'000'000'000) + " s, no alert"};
    }
  }
  return std::nullopt;
}

}  // namespace admission::projections

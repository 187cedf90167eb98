// Capacity: node reports (per flavor), quota decreases and maintenance windows, and the
// evictions that keep admissions within them (EnforceCapacity). No Kueue counterpart: Kueue
// does not evict when quota is lowered or nodes fail (docs/semantics.md); maintenance windows
// are ours too.

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "projections/engine.h"
#include "projections/engine_internal.h"
#include "schema/result.h"

namespace admission::projections {

void Engine::DefineMaintenance(schema::MaintenanceWindow::Reader window, int64_t now) {
  MaintenanceWindowSpec spec{window.getName().cStr(), window.getFlavor().cStr(),
                             window.getStartNs(), window.getEndNs()};
  windows_[spec.name] = spec;
  // When the window is over, what it blocked may fit again.
  if (spec.end_ns > now) AddTimer(spec.end_ns, TimerKind::kWindow, spec.name, 0);
  DefinitionsChanged();
}

std::optional<std::string> Engine::MaintenanceConflict(const WorkloadState& wl, int flavor,
                                                       int64_t now) const {
  const std::string& name = flavor_ids_.Name(flavor);
  for (const auto& [wname, w] : windows_) {
    if (w.flavor != name || w.end_ns <= now) continue;
    // The expected runtime [now, now + runtime) overlaps the window; an unknown runtime only
    // conflicts while the window is open.
    const int64_t until = wl.expected_runtime_ns > 0 ? now + wl.expected_runtime_ns : now + 1;
    if (until > w.start_ns) {
      return "maintenance window " + wname + " on flavor " + name +
             " overlaps the expected runtime";
    }
  }
  return std::nullopt;
}

int64_t Engine::HealthyNodesCapacity(Fr fr) const {
  const std::string& name = flavor_ids_.Name(FrFlavor(fr));
  bool known = false;
  int64_t capacity = 0;
  for (const auto& [node, n] : nodes_) {
    if (n.flavor != name) continue;
    known = true;
    if (n.failed) continue;
    auto c = n.capacity.find(FrResource(fr));
    if (c != n.capacity.end()) capacity += c->second;
  }
  return known ? capacity : INT64_MAX;
}

int64_t Engine::FlavorCapacityLeft(int flavor, int resource) const {
  const Fr fr = MakeFr(flavor, resource);
  int64_t capacity = HealthyNodesCapacity(fr);
  if (capacity == INT64_MAX) return INT64_MAX;
  for (const auto& [cq_name, cq] : cqs_) {
    auto u = cq.usage.find(fr);
    if (u != cq.usage.end()) capacity -= u->second;
  }
  return capacity;
}

int64_t Engine::NodeCapacity(Fr fr) const {
  return node_inventory_complete_ ? HealthyNodesCapacity(fr) : INT64_MAX;
}

int64_t Engine::NodeRoom(Fr fr) const {
  if (batch_version_ < 19) return INT64_MAX;
  const int64_t capacity = NodeCapacity(fr);
  return capacity == INT64_MAX ? INT64_MAX : capacity - tree_.TotalUsage(fr);
}

bool Engine::FitsNow(int cq_node, const FrQuantities& request) const {
  if (!tree_.Fits(cq_node, request)) return false;
  for (const auto& [fr, amount] : request) {
    if (amount > NodeRoom(fr)) return false;
  }
  return true;
}

namespace {

// Whether a node of `after` holds less than `before` of some resource (or another flavor's).
bool NodeShrank(const std::string& flavor_before, const std::map<int, int64_t>& before,
                const std::string& flavor_after, const std::map<int, int64_t>& after) {
  if (flavor_before != flavor_after) return true;
  for (const auto& [resource, amount] : before) {
    auto a = after.find(resource);
    if ((a == after.end() ? 0 : a->second) < amount) return true;
  }
  return false;
}

}  // namespace

void Engine::NodeChanged(schema::NodeCapacity::Reader n, int kind, int64_t now) {
  auto existing = nodes_.find(n.getNode().cStr());
  const bool known = existing != nodes_.end();
  const NodeState before = known ? existing->second : NodeState{};
  NodeState& node = nodes_[n.getNode().cStr()];
  if (n.getFlavor().size() > 0) node.flavor = n.getFlavor().cStr();
  if (n.getCapacity().size() > 0) {
    node.capacity.clear();
    for (auto c : n.getCapacity()) node.capacity[resources_.Id(c.getName().cStr())] = c.getMilli();
  }
  node.failed = kind == 1;
  if (batch_version_ >= 26) NodeTopologyChanged(n, &node);
  if (batch_version_ < 19) {
    EnforceCapacity(now, true);
    DefinitionsChanged();
    return;
  }
  // Engine v19: a node that appears is never a failure; a known node lost or shrunk is, and
  // its capacity bounds admissions once the inventory is complete.
  if (n.getInventoryComplete()) node_inventory_complete_ = true;
  if (kind == 1) EvictFromLostNode(n, now);
  const bool lost = known && !before.failed &&
                    (node.failed ||
                     NodeShrank(before.flavor, before.capacity, node.flavor, node.capacity));
  if (lost) EnforceCapacity(now, true);
  DefinitionsChanged();
}

void Engine::EvictFromLostNode(schema::NodeCapacity::Reader node, int64_t now) {
  // Their pods ran on the node: they go first, whatever their priority, and their quota waits
  // for the pods to be reported gone, at most kLostNodePodsDeadlineNs.
  std::string host;  // engine v26: the node's hostname, as TAS placements name it
  if (batch_version_ >= 26) {
    const NodeState& n = nodes_.at(node.getNode().cStr());
    auto label = n.labels.find(std::string(kHostnameLabel));
    host = label != n.labels.end() ? label->second : std::string(View(node.getNode()));
    tas_cache_.clear();  // the failed node leaves the snapshots
  }
  for (auto ref : node.getWorkloads()) {
    const WorkloadState* found = FindReferenced(ref);
    if (found == nullptr || !Evictable(found->phase)) continue;
    WorkloadState& wl = workloads_.at(found->key);
    std::string no_replacement;
    if (!host.empty() && ReplaceFailedNode(wl, host, &no_replacement)) continue;
    EvictForReason(wl, "NodeFailure",
                   no_replacement.empty()
                       ? "its pods ran on node " + std::string(node.getNode().cStr()) +
                             ", which failed"
                       : "Workload was evicted as there was no replacement for unhealthy "
                         "node(s): " + host + " (" + no_replacement + ")",
                   0, now + kLostNodePodsDeadlineNs, now);
  }
}

// Evicts what no longer fits after a node failure or a quota decrease: lowest priority first,
// then the most recently reserved, then uid. Quota held by workloads already draining counts
// as leaving.
void Engine::EnforceCapacity(int64_t now, bool nodes_lost) {
  // Nothing holds quota (a platform being set up): nothing can be over a limit.
  if (std::all_of(cqs_.begin(), cqs_.end(), [](const auto& cq) { return cq.second.holders.empty(); })) {
    return;
  }
  RebuildTreeIfNeeded();
  // Each pass evicts one holder (which is then no longer evictable) or returns, so there are
  // at most as many passes as holders, plus the last one that finds nothing to do: the bound
  // is derived, not a guess, and reaching it is a bug of ours (an assertion).
  size_t holders = 0;
  for (const auto& [name, cq] : cqs_) holders += cq.holders.size();
  const size_t passes_max = holders + 1;
  for (size_t pass = 0;; ++pass) {
    ADM_CHECK(pass < passes_max, "capacity enforcement: pass %zu, but only %zu holders", pass,
              holders);
    std::set<Fr> node_short;                            // short of node capacity
    std::set<std::pair<std::string, Fr>> quota_short;   // (ClusterQueue, fr) over its limits
    FindOvercommitted(&node_short, &quota_short);
    // Engine v19: node capacity evicts only when a known node was lost or shrank.
    if (batch_version_ >= 19 && !nodes_lost) node_short.clear();
    if (node_short.empty() && quota_short.empty()) return;
    std::string reason;
    const WorkloadState* victim = CapacityVictim(node_short, quota_short, &reason);
    if (victim == nullptr) return;  // only draining workloads are left over: they will go
    WorkloadState& v = workloads_.at(victim->key);
    const bool node = reason == "NodeFailure";
    EvictForReason(v, reason,
                   node ? "a node of its flavor failed and the rest cannot hold every admission"
                        : "its ClusterQueue's quota was lowered below what is admitted",
                   0, node && batch_version_ >= 19 ? now + kLostNodePodsDeadlineNs : 0, now);
  }
}

void Engine::FindOvercommitted(std::set<Fr>* node_short,
                               std::set<std::pair<std::string, Fr>>* quota_short) {
  // Draining workloads' usage is on its way out: left out of the tree while measuring.
  std::vector<std::pair<std::string, const WorkloadState*>> draining;
  for (const auto& [name, cq] : cqs_) {
    for (const WorkloadState* wl : cq.AdmittedInKeyOrder()) {
      if (wl->phase == Phase::kEvicting) draining.emplace_back(wl->cluster_queue, wl);
    }
  }
  for (auto& [cq, wl] : draining) {
    int node = tree_.FindClusterQueue(cq);
    if (node >= 0) tree_.AddUsage(node, wl->admission.usage, -1);
  }
  for (const auto& [name, node] : nodes_) {
    auto f = flavor_ids_.Find(node.flavor);
    if (!f) continue;
    for (const auto& [r, cap] : node.capacity) {
      if (batch_version_ >= 19) {
        // The tree holds no draining usage now: the room is what is left.
        if (NodeRoom(MakeFr(*f, r)) < 0) node_short->insert(MakeFr(*f, r));
        continue;
      }
      int64_t left = FlavorCapacityLeft(*f, r);
      for (auto& [cq, wl] : draining) {
        auto u = wl->admission.usage.find(MakeFr(*f, r));
        if (u != wl->admission.usage.end()) left += u->second;
      }
      if (left < 0) node_short->insert(MakeFr(*f, r));
    }
  }
  for (const auto& [name, cq] : cqs_) {
    int node = tree_.FindClusterQueue(name);
    if (node < 0) continue;
    for (const auto& [fr, amount] : cq.usage) {
      if (tree_.Available(node, fr) < 0) quota_short->insert({name, fr});
    }
  }
  for (auto& [cq, wl] : draining) {
    int node = tree_.FindClusterQueue(cq);
    if (node >= 0) tree_.AddUsage(node, wl->admission.usage, +1);
  }
}

const WorkloadState* Engine::CapacityVictim(
    const std::set<Fr>& node_short, const std::set<std::pair<std::string, Fr>>& quota_short,
    std::string* reason) const {
  const WorkloadState* victim = nullptr;
  for (const auto& [name, cq] : cqs_) {
    for (const WorkloadState* holder : cq.AdmittedInKeyOrder()) {
      const WorkloadState& wl = *holder;
      if (!Evictable(wl.phase)) continue;
      std::string why;
      for (const auto& [fr, amount] : wl.admission.usage) {
        if (amount == 0) continue;
        if (node_short.count(fr)) why = "NodeFailure";
        else if (why.empty() && quota_short.count({wl.cluster_queue, fr})) why = "QuotaReclaimed";
      }
      if (why.empty()) continue;
      // The lowest priority, then the most recently reserved, then the highest uid, then
      // the first key.
      bool better = victim == nullptr;
      if (!better && wl.priority != victim->priority) better = wl.priority < victim->priority;
      else if (!better && wl.reserved_at_ns != victim->reserved_at_ns) {
        better = wl.reserved_at_ns > victim->reserved_at_ns;
      } else if (!better && wl.uid != victim->uid) {
        better = wl.uid > victim->uid;
      } else if (!better) {
        better = wl.key < victim->key;
      }
      if (better) {
        victim = &wl;
        *reason = why;
      }
    }
  }
  return victim;
}

}  // namespace admission::projections

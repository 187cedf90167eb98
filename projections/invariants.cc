// The quota invariants the decider keeps (Kueue's pkg/cache clusterqueue.go keeps the same
// accounting: a ClusterQueue's usage is what its admitted workloads add up to), checked from
// the outside of the code that keeps them (AddUsage, AddHolder, RemoveHolder). The tests call
// Engine::CheckInvariants after every input, so each assertion is paired with the code that
// writes the state it reads.

#include <map>
#include <string>

#include "projections/engine.h"

namespace admission::projections {

namespace {

// `q` without its zero entries: a usage that went to zero may be erased or kept.
FrQuantities NonZero(const FrQuantities& q) {
  FrQuantities out;
  for (const auto& [fr, v] : q) {
    if (v != 0) out.emplace(fr, v);
  }
  return out;
}

std::string Show(const Interner& flavors, const Interner& resources, const FrQuantities& q) {
  std::string out = "{";
  for (const auto& [fr, v] : q) {
    if (out.size() > 1) out += " ";
    out += flavors.Name(FrFlavor(fr)) + "/" + resources.Name(FrResource(fr)) + "=" +
           std::to_string(v);
  }
  return out + "}";
}

Status Violated(const std::string& what) { return Status(Code::kCorruption, what); }

}  // namespace

Status Engine::CheckInvariants() const {
  // A holder is exactly a workload with reserved quota: every workload that holds quota has
  // its place in its ClusterQueue's holders, and no other workload has one.
  size_t holding = 0;
  for (const auto& [key, wl] : workloads_) {
    if (!HoldsQuota(wl.phase)) {
      if (wl.holder_index >= 0) {
        return Violated("workload " + key + " is a holder in phase " + PhaseName(wl.phase));
      }
      continue;
    }
    ++holding;
    auto cq = cqs_.find(wl.cluster_queue);
    const size_t i = static_cast<size_t>(wl.holder_index);
    if (wl.holder_index < 0 || cq == cqs_.end() || i >= cq->second.holders.size() ||
        cq->second.holders[i].wl != &wl) {
      return Violated("workload " + key + " holds quota (" + PhaseName(wl.phase) +
                      ") but is not a holder of ClusterQueue " + wl.cluster_queue);
    }
  }
  // The StrictFIFO ClusterQueues a cycle looks at are exactly those whose spec says so.
  for (const auto& [name, cq] : cqs_) {
    const bool strict = cq.spec && cq.spec->queueing == QueueingStrategy::kStrictFifo;
    if (strict != (strict_fifo_cqs_.count(name) == 1)) {
      return Violated("ClusterQueue " + name + (strict ? " queues StrictFIFO but is not" : " is") +
                      " among the StrictFIFO ClusterQueues");
    }
  }
  for (const std::string& name : strict_fifo_cqs_) {
    if (cqs_.count(name) == 0) return Violated("StrictFIFO ClusterQueue " + name + " has no state");
  }
  // A ClusterQueue's usage is the sum of its holders' admissions, and the quota tree's node of
  // the ClusterQueue holds the same usage (unless the tree waits for a rebuild from it).
  size_t holders = 0;
  for (const auto& [name, cq] : cqs_) {
    FrQuantities sum;
    for (size_t i = 0; i < cq.holders.size(); ++i) {
      const WorkloadState* wl = cq.holders[i].wl;
      if (wl == nullptr || wl->holder_index != static_cast<int32_t>(i) ||
          wl->cluster_queue != name || !HoldsQuota(wl->phase)) {
        return Violated("ClusterQueue " + name + ": holder " + std::to_string(i) +
                        " is not a workload holding quota there");
      }
      for (const auto& [fr, v] : wl->admission.usage) sum[fr] += v;
    }
    holders += cq.holders.size();
    const FrQuantities usage = NonZero(cq.usage);
    if (NonZero(sum) != usage) {
      return Violated("ClusterQueue " + name + ": usage " + Show(flavor_ids_, resources_, usage) +
                      " is not the sum of its holders' admissions " +
                      Show(flavor_ids_, resources_, NonZero(sum)));
    }
    if (tree_dirty_) continue;
    const int node = tree_.FindClusterQueue(name);
    if (node < 0) continue;
    const FrQuantities in_tree = NonZero(tree_.node(node).usage);
    if (in_tree != usage) {
      return Violated("ClusterQueue " + name + ": usage " + Show(flavor_ids_, resources_, usage) +
                      " but its quota-tree node holds " + Show(flavor_ids_, resources_, in_tree));
    }
  }
  if (holders != holding) {
    return Violated(std::to_string(holders) + " holders, but " + std::to_string(holding) +
                    " workloads hold quota");
  }
  // The tree's total usage of each flavor-resource (what node capacity must hold) is the sum
  // over its ClusterQueues.
  if (!tree_dirty_) {
    FrQuantities total;
    for (size_t id = 0; id < tree_.size(); ++id) {
      const QuotaTree::Node& n = tree_.node(static_cast<int>(id));
      if (!n.is_cluster_queue) continue;
      for (const auto& [fr, v] : n.usage) total[fr] += v;
    }
    for (const auto& [fr, v] : NonZero(total)) {
      if (tree_.TotalUsage(fr) != v) {
        return Violated("the quota tree's total usage of " +
                        Show(flavor_ids_, resources_, FrQuantities{{fr, tree_.TotalUsage(fr)}}) +
                        " is not its ClusterQueues' sum " +
                        Show(flavor_ids_, resources_, FrQuantities{{fr, v}}));
      }
    }
  }
  return CheckLocalQueueCounts();
}

// The LocalQueues' counts kept as phases change are those of a pass over every workload.
Status Engine::CheckLocalQueueCounts() const {
  std::map<std::string, LocalQueueCounts> counted;
  for (const auto& [key, wl] : workloads_) {
    const bool holds = HoldsQuota(wl.phase);
    if (wl.phase != Phase::kPending && !holds) continue;
    LocalQueueCounts& c = counted[wl.local_queue_key];
    c.pending += wl.phase == Phase::kPending ? 1 : 0;
    c.reserving += holds ? 1 : 0;
    c.admitted += wl.phase == Phase::kAdmitted ? 1 : 0;
  }
  // Every queue counted is kept alike, and the kept name no other queue.
  for (const auto& [key, c] : counted) {
    auto kept = lq_counts_.find(key);
    if (kept == lq_counts_.end() || kept->second.pending != c.pending ||
        kept->second.reserving != c.reserving || kept->second.admitted != c.admitted) {
      return Violated("LocalQueue " + key + " counts " + std::to_string(c.pending) + " pending, " +
                      std::to_string(c.reserving) + " reserving; the kept counts differ");
    }
  }
  if (counted.size() != lq_counts_.size()) {
    return Violated("the kept LocalQueue counts name a queue with no pending or holding workload");
  }
  return Status::Ok();
}

}  // namespace admission::projections

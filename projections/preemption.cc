// Preemption (FindVictims): candidates in the ClusterQueue and its cohort, Kueue's candidate
// order, the minimal victim set with fill-back, and dominant resource shares for fair sharing.
// Kueue: pkg/scheduler/preemption/preemption.go (GetTargets, minimalPreemptions,
// candidatesOrdering) and pkg/cache's dominant resource share.

#include <algorithm>
#include <optional>
#include <vector>

#include "projections/engine.h"
#include "projections/engine_internal.h"
#include "schema/result.h"

namespace admission::projections {

bool Engine::WorkloadFits(int cq_node, const FrQuantities& request, bool allow_borrowing) const {
  for (const auto& [fr, amount] : request) {
    if (!allow_borrowing && tree_.Usage(cq_node, fr) + amount > tree_.Nominal(cq_node, fr)) {
      return false;
    }
    if (amount > tree_.Available(cq_node, fr)) return false;
  }
  return true;
}

std::optional<int32_t> Engine::BorrowWithinCohortBelow(const ClusterQueueSpec& spec,
                                                       const WorkloadState& wl) {
  if (spec.preemption.borrow_within_cohort == ReclaimPolicy::kNever) return std::nullopt;
  int32_t threshold = wl.priority;
  if (spec.preemption.max_priority_threshold &&
      *spec.preemption.max_priority_threshold < threshold) {
    threshold = *spec.preemption.max_priority_threshold + 1;
  }
  return threshold;
}

bool Engine::VictimWhileBorrowing(const ClusterQueueSpec& spec, const WorkloadState& preemptor,
                                  const WorkloadState& victim) {
  const std::optional<int32_t> below = BorrowWithinCohortBelow(spec, preemptor);
  return below && victim.priority < *below;
}

// One victim search (FindVictims): the flavor-resources that need preemption, the candidates
// and the order they are handed out in.
struct Engine::VictimSearch {
  struct Candidate {
    WorkloadState* wl;
    const Holder* holder;
    bool same_cq;
    int node;
    int32_t priority;         // copied from *wl for the ordering
    int64_t reserved_at_ns;
    // Engine v15: already being evicted (draining); it stays a candidate, ordered first, and is
    // not evicted again (Kueue's candidatesOrdering puts evicted workloads first).
    bool evicting = false;
    // Engine v14: its LocalQueue's usage, when its ClusterQueue orders by it.
    std::optional<AfsScore> afs = std::nullopt;
  };

  VictimSearch(Engine& e, const WorkloadState& w, const ClusterQueueSpec& s, int node,
               const Assignment& a)
      : engine(e), tree(e.tree_), wl(w), spec(s), cq_node(node), assignment(a) {}

  Engine& engine;
  QuotaTree& tree;
  const WorkloadState& wl;
  const ClusterQueueSpec& spec;
  const int cq_node;
  const Assignment& assignment;
  // Flavor-resources where the request does not fit what is available now: ascending, as
  // `assignment.usage` is, and a handful at most, so a vector searched linearly.
  std::vector<Fr> needing;
  std::vector<Candidate> candidates;  // a heap once ordered (Order)
  std::vector<Candidate> ordered;     // those taken from the heap so far, in order

  bool IsNeeded(Fr fr) const { return std::find(needing.begin(), needing.end(), fr) != needing.end(); }
  bool UsesNeeded(const WorkloadState& w) const {
    for (const auto& [fr, amount] : w.admission.usage) {
      if (amount > 0 && IsNeeded(fr)) return true;
    }
    return false;
  }
  bool BorrowingInNeeded(int node) const {
    for (Fr fr : needing) {
      if (tree.Usage(node, fr) > tree.Nominal(node, fr)) return true;
    }
    return false;
  }
  // Whether a holder may be a candidate: evictable, or (engine v15) already being evicted.
  bool Eligible(const Holder& h) const {
    return h.evictable || (engine.batch_version_ >= 15 && h.wl->phase == Phase::kEvicting);
  }
  Candidate Make(const Holder& h, bool same, int node) const {
    Candidate c{h.wl, &h, same, node, h.priority, h.reserved_at_ns};
    c.evicting = !h.evictable;
    return c;
  }
  bool HolderUsesNeeded(const Holder& h) const {
    if (h.single) return h.amount > 0 && IsNeeded(h.fr);
    return UsesNeeded(*h.wl);
  }
  // Candidates of the preemptor's own ClusterQueue (withinClusterQueue).
  void AddOwnCandidates();
  // Whether the ClusterQueue is under its nominal quota. Engine v9: Kueue's
  // queueUnderNominalInResourcesNeedingPreemption (usage below nominal in every flavor-resource
  // that needs preemption); before v9, usage plus the whole request within nominal.
  bool UnderNominal() const;
  // Candidates of the other ClusterQueues of the cohort tree (reclaimWithinCohort,
  // borrowWithinCohort, fair sharing).
  void AddCohortCandidates(bool under_nominal);
  // Whether all the candidates together cannot cover some shortfall.
  bool CannotCover() const;
  // Kueue's candidatesOrdering, lazily: Nth(i) is the i-th candidate in that order.
  void Order();
  const Candidate* Nth(size_t i);
  std::vector<Candidate> Minimal(bool same_queue_only, bool allow_borrowing,
                                 std::optional<int32_t> borrow_below, bool drop_at_or_above = false);

  // Kueue's candidatesOrdering: other ClusterQueues first, lower priority first, most
  // recently reserved first, then uid (then namespace/name: a total order).
  static bool Before(const Candidate& a, const Candidate& b) {
    if (a.evicting != b.evicting) return a.evicting;
    if (a.same_cq != b.same_cq) return !a.same_cq;
    // Engine v14, admission fair sharing: of one ClusterQueue's LocalQueues, the one using more
    // gives up its workloads first (Kueue's resourceUsagePreemptionEnabled).
    if (a.afs && b.afs && a.wl->cluster_queue == b.wl->cluster_queue &&
        a.wl->local_queue_key != b.wl->local_queue_key) {
      const int c = a.afs->Compare(*b.afs);
      if (c != 0) return c > 0;
    }
    if (a.priority != b.priority) return a.priority < b.priority;
    if (a.reserved_at_ns != b.reserved_at_ns) return a.reserved_at_ns > b.reserved_at_ns;
    if (a.wl->uid != b.wl->uid) return a.wl->uid < b.wl->uid;
    return a.wl->key < b.wl->key;
  }
  static bool After(const Candidate& a, const Candidate& b) { return Before(b, a); }
};

std::vector<WorkloadState*> Engine::FindVictims(const WorkloadState& wl, const ClusterQueueSpec& spec,
                                             int cq_node, const Assignment& assignment) {
  VictimSearch search(*this, wl, spec, cq_node, assignment);
  for (const auto& [fr, amount] : assignment.usage) {
    if (amount > tree_.Available(cq_node, fr)) search.needing.push_back(fr);
  }
  if (search.needing.empty()) return {};
  search.AddOwnCandidates();
  const bool under_nominal = search.UnderNominal();
  search.AddCohortCandidates(under_nominal);
  if (search.candidates.empty()) return {};
  if (search.CannotCover()) return {};
  search.Order();
  const bool all_same_queue =
      std::all_of(search.candidates.begin(), search.candidates.end(),
                  [](const VictimSearch::Candidate& c) { return c.same_cq; });
  std::vector<VictimSearch::Candidate> chosen;
  if (all_same_queue) {
    chosen = search.Minimal(false, true, std::nullopt);
  } else if (const std::optional<int32_t> threshold = BorrowWithinCohortBelow(spec, wl)) {
    // Kueue v0.9: while borrowing, only other queues' workloads of strictly lower priority
    // (and at most maxPriorityThreshold) may be preempted. Since engine v9, as Kueue: a
    // ClusterQueue at or above nominal leaves the others out entirely.
    chosen = search.Minimal(false, true, threshold, batch_version_ >= 9 && !under_nominal);
  } else {
    if (under_nominal) chosen = search.Minimal(false, false, std::nullopt);
    if (chosen.empty()) chosen = search.Minimal(true, true, std::nullopt);
  }
  std::vector<WorkloadState*> victims;
  for (const VictimSearch::Candidate& c : chosen) victims.push_back(c.wl);
  return victims;
}

void Engine::VictimSearch::AddOwnCandidates() {
  const ClusterQueueState* own_state = engine.cq_by_node_[static_cast<size_t>(cq_node)];
  const ClusterQueueState& own =
      own_state != nullptr ? *own_state : engine.cqs_.at(wl.cluster_queue);
  if (spec.preemption.within_cluster_queue == WithinCq::kNever) return;
  for (const Holder& h : own.holders) {
    if (!Eligible(h) || !HolderUsesNeeded(h)) continue;
    bool lower = h.priority < wl.priority;
    if (spec.preemption.within_cluster_queue == WithinCq::kLowerOrNewerEqualPriority) {
      lower = lower || (h.priority == wl.priority && h.wl->queued_at_ns > wl.queued_at_ns);
    }
    if (lower) candidates.push_back(Make(h, true, cq_node));
  }
}

bool Engine::VictimSearch::UnderNominal() const {
  bool under_nominal = true;
  if (engine.batch_version_ >= 9) {
    for (Fr fr : needing) {
      if (tree.Usage(cq_node, fr) >= tree.Nominal(cq_node, fr)) under_nominal = false;
    }
  } else {
    for (const auto& [fr, amount] : assignment.usage) {
      if (tree.Usage(cq_node, fr) + amount > tree.Nominal(cq_node, fr)) under_nominal = false;
    }
  }
  return under_nominal;
}

void Engine::VictimSearch::AddCohortCandidates(bool under_nominal) {
  const bool in_cohort = tree.node(cq_node).parent != -1;
  // Other ClusterQueues' workloads are chosen only when borrowing within the cohort may
  // preempt, under fair sharing, or when the preemptor stays within its nominal quota
  // (reclaim); otherwise the choice is minimal(same_queue) whatever they are.
  const bool cohort_candidates_used = under_nominal || engine.config_.fair_sharing ||
                                      spec.preemption.borrow_within_cohort != ReclaimPolicy::kNever;
  if (!in_cohort || !cohort_candidates_used ||
      (spec.preemption.reclaim_within_cohort == ReclaimPolicy::kNever &&
       spec.preemption.borrow_within_cohort == ReclaimPolicy::kNever)) {
    return;
  }
  for (int other : tree.ClusterQueuesUnder(tree.Root(cq_node))) {
    if (other == cq_node || !BorrowingInNeeded(other)) continue;
    const ClusterQueueState* other_cq = engine.cq_by_node_[static_cast<size_t>(other)];
    if (other_cq == nullptr) continue;
    for (const Holder& h : other_cq->holders) {
      if (!Eligible(h) || !HolderUsesNeeded(h)) continue;
      const WorkloadState& c = *h.wl;
      bool allowed = spec.preemption.reclaim_within_cohort == ReclaimPolicy::kAny ||
                     (spec.preemption.reclaim_within_cohort == ReclaimPolicy::kLowerPriority &&
                      h.priority < wl.priority);
      if (engine.config_.fair_sharing &&
          spec.preemption.reclaim_within_cohort != ReclaimPolicy::kNever && !allowed) {
        // Fair sharing: a queue above the preemptor's share (after its admission) gives back.
        allowed = engine.DominantShare(other, nullptr) >
                  engine.DominantShare(cq_node, &assignment.usage);
      }
      if (spec.preemption.borrow_within_cohort != ReclaimPolicy::kNever &&
          c.priority < wl.priority &&
          (!spec.preemption.max_priority_threshold ||
           c.priority <= *spec.preemption.max_priority_threshold)) {
        allowed = true;
      }
      if (allowed) candidates.push_back(Make(h, false, other));
    }
  }
}

bool Engine::VictimSearch::CannotCover() const {
  // Removing a workload raises what this ClusterQueue may use of a flavor-resource by at most
  // that workload's usage of it (at every level of the quota tree, Available grows by at most
  // the usage removed below it). When all the candidates together cannot cover a shortfall, no
  // victim set exists and the search would find none: it is skipped.
  for (Fr fr : needing) {
    int64_t freeable = 0;
    for (const Candidate& c : candidates) {
      if (c.holder->single) {
        if (c.holder->fr == fr) freeable += c.holder->amount;
        continue;
      }
      auto u = c.wl->admission.usage.find(fr);
      if (u != c.wl->admission.usage.end()) freeable += u->second;
    }
    if (assignment.usage.at(fr) > tree.Available(cq_node, fr) + freeable) return true;
  }
  return false;
}

void Engine::VictimSearch::Order() {
  // Sorted lazily: the minimal set is usually a few of the first, so a heap hands them out one
  // by one instead of sorting them all.
  if (engine.AfsOn()) {
    for (Candidate& c : candidates) {
      const ClusterQueueState* cq = engine.cq_by_node_[static_cast<size_t>(c.node)];
      if (cq != nullptr && cq->spec && engine.AfsOrders(*cq->spec)) {
        c.afs = engine.AfsScoreOf(c.wl->local_queue_key);
      }
    }
  }
  std::make_heap(candidates.begin(), candidates.end(), After);
  ordered.reserve(candidates.size());
}

const Engine::VictimSearch::Candidate* Engine::VictimSearch::Nth(size_t i) {
  while (ordered.size() <= i && !candidates.empty()) {
    std::pop_heap(candidates.begin(), candidates.end(), After);
    ordered.push_back(candidates.back());
    candidates.pop_back();
  }
  return i < ordered.size() ? &ordered[i] : nullptr;
}

// Kueue's minimalPreemptions. With `borrow_below` (borrowWithinCohort), a victim of another
// ClusterQueue at or above that priority may only be taken if the preemptor then fits
// without borrowing: since engine v9 (as Kueue) taking one forbids borrowing for the rest of
// the search and the fill-back, and `drop_at_or_above` leaves such workloads out entirely;
// before v9 only the fit check right after taking it forbade borrowing.
std::vector<Engine::VictimSearch::Candidate> Engine::VictimSearch::Minimal(
    bool same_queue_only, bool allow_borrowing, std::optional<int32_t> borrow_below,
    bool drop_at_or_above) {
  std::vector<Candidate> targets;
  bool fits = false;
  for (size_t i = 0; const Candidate* next = Nth(i); ++i) {
    const Candidate& c = *next;
    if (same_queue_only && !c.same_cq) continue;
    if (!c.same_cq && !BorrowingInNeeded(c.node)) continue;
    const bool at_or_above = !c.same_cq && borrow_below && c.wl->priority >= *borrow_below;
    if (at_or_above && drop_at_or_above) continue;
    if (at_or_above && engine.batch_version_ >= 9) allow_borrowing = false;
    bool borrowing_ok = allow_borrowing;
    if (at_or_above) borrowing_ok = false;
    tree.AddUsage(c.node, c.wl->admission.usage, -1);
    targets.push_back(c);
    if (engine.WorkloadFits(cq_node, assignment.usage, borrowing_ok)) {
      fits = true;
      break;
    }
  }
  if (fits) {
    // Fill back: try returning each target but the last, newest first removed last.
    for (int i = static_cast<int>(targets.size()) - 2; i >= 0; --i) {
      const Candidate& c = targets[static_cast<size_t>(i)];
      tree.AddUsage(c.node, c.wl->admission.usage, +1);
      if (engine.WorkloadFits(cq_node, assignment.usage, allow_borrowing)) {
        targets.erase(targets.begin() + i);
      } else {
        tree.AddUsage(c.node, c.wl->admission.usage, -1);
      }
    }
  }
  for (const Candidate& c : targets) tree.AddUsage(c.node, c.wl->admission.usage, +1);
  if (!fits) return {};
  return targets;
}

int64_t Engine::DominantShare(int cq_node, const FrQuantities* extra) const {
  // Kueue's dominant resource share in integers (v0.13): for each flavor-resource, what the
  // ClusterQueue borrows per mille of what its cohort tree can lend, the largest of them, then
  // divided by the weight (milli). A weight of 0 makes any borrowing infinitely expensive.
  const int root = tree_.Root(cq_node);
  if (root == cq_node) return 0;
  int64_t share = 0;
  auto consider = [&](Fr fr, int64_t usage) {
    const int64_t borrowed = std::max<int64_t>(0, usage - tree_.Nominal(cq_node, fr));
    const int64_t lendable = std::max<int64_t>(1, tree_.Nominal(root, fr));
    share = std::max(share, borrowed * 1000 / lendable);
  };
  const auto& usage = tree_.node(cq_node).usage;
  for (const auto& [fr, u] : usage) {
    int64_t total = u;
    if (extra) {
      auto e = extra->find(fr);
      if (e != extra->end()) total += e->second;
    }
    consider(fr, total);
  }
  if (extra) {
    for (const auto& [fr, e] : *extra) {
      if (usage.count(fr) == 0) consider(fr, e);
    }
  }
  auto spec = cq_specs_.find(tree_.node(cq_node).name);
  const int64_t weight = spec == cq_specs_.end() ? 1000 : spec->second.fair_weight_milli;
  if (weight <= 0) return share > 0 ? INT64_MAX : 0;
  return share * 1000 / weight;
}

}  // namespace admission::projections

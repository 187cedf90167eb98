// Preemption (FindVictims): candidates in the ClusterQueue and its cohort, Kueue's candidate
// order, the minimal victim set with fill-back, and dominant resource shares for fair sharing.
// Kueue: pkg/scheduler/preemption/preemption.go (GetTargets, minimalPreemptions,
// candidatesOrdering, and since engine v16 fairPreemptions with runFirstFsStrategy and
// runSecondFsStrategy), pkg/scheduler/preemption/fairsharing (the ClusterQueue ordering, the
// strategies, the almost least common ancestors) and pkg/cache's dominant resource share.

#include <algorithm>
#include <map>
#include <optional>
#include <set>
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
    if (amount > NodeRoom(fr)) return false;  // engine v19; unbounded before
  }
  return TasTrialFits();  // engine v26: and the topology placement, while one is tried
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
    // Engine v23: why it may be taken (a VictimVariant), and the cohort where its path and
    // the preemptor's meet (Kueue's candidateElem.lca; -1 in the preemptor's ClusterQueue).
    uint8_t variant = kVariantUnset;
    int lca = -1;
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

  // A candidate's usage out of (-1) or back into (+1) the quota tree and, while a placement
  // is tried (engine v26), the TAS snapshots.
  void Take(const Candidate& c, int sign) {
    tree.AddUsage(c.node, c.wl->admission.usage, sign);
    if (engine.tas_trial_ != nullptr) engine.TasHolderChanged(*c.wl, sign);
  }
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
  // Engine v14: each candidate's LocalQueue usage, where its ClusterQueue orders by it.
  void ScoreLocalQueues(std::vector<Candidate>& list) const;
  // Kueue's candidatesOrdering, lazily: Nth(i) is the i-th candidate in that order.
  void Order();
  const Candidate* Nth(size_t i);
  std::vector<Candidate> Minimal(bool same_queue_only, bool allow_borrowing,
                                 std::optional<int32_t> borrow_below, bool drop_at_or_above = false);
  // Kueue's fillBackWorkloads: with the preemptor fitting once `targets` are removed (they
  // are, in the tree), returns each but the last, last removed first, while it still fits.
  void FillBack(std::vector<Candidate>& targets, bool allow_borrowing);

  // ---- Engine v23: Kueue v0.17's classical preemption (pkg/scheduler/preemption/classical) ----
  // Kueue's IsWithinNominalInResources: the node uses at most its subtree quota in every
  // flavor-resource needing preemption.
  bool WithinNominalIn(int node) const {
    for (Fr fr : needing) {
      if (tree.Usage(node, fr) > tree.Nominal(node, fr)) return false;
    }
    return true;
  }
  // Kueue's classifyPreemptionVariant; kVariantUnset: never a candidate.
  uint8_t Classify(const Holder& h, bool same_cq, bool advantage) const;
  // Kueue's QuantitiesFitInQuota: whether `*remaining` fits the node's subtree quota; then
  // `*remaining` is what exceeds the quota the node keeps for itself (lending limits).
  bool FitInQuota(int node, FrQuantities* remaining) const;
  // Kueue's collectCandidatesInSubtree: the workloads of the ClusterQueues under `cohort` that
  // exceed their quota, skipping subtrees within it and the subtree `skip`.
  void CollectInSubtree(int cohort, int lca, int skip, bool advantage, std::vector<Candidate>* out);
  // Kueue's candidateIsValid: a candidate of another ClusterQueue is taken only while it and
  // its cohorts below the common one exceed their quota, and not while borrowing when it may
  // only be reclaimed without.
  bool ValidInAttempt(const Candidate& c, bool borrowing) const;
  // Kueue's NewCandidateIterator and classicalPreemptions: the candidates of the hierarchy,
  // of priority and of the ClusterQueue, each evicted ones first, then one or two attempts.
  std::vector<Candidate> Classical();
  std::vector<Candidate> ClassicalAttempt(const std::vector<Candidate>& all, bool borrowing);

  // ---- Engine v16: Kueue's fairPreemptions (fair sharing) ----
  using Share = Engine::Share;
  static int CompareShares(const Share& a, const Share& b) { return Engine::CompareShares(a, b); }
  Share NodeShare(int node, bool* borrowing = nullptr) const {
    return engine.NodeShare(node, borrowing);
  }
  // The child of `lca` on the path from `node` up to it (Kueue's almostLCA).
  int AlmostLca(int node, int lca) const;
  // The lowest cohort above `target` that also holds the preemptor (Kueue's getLCA).
  int Lca(int target) const;
  // Kueue's TargetClusterQueueOrdering: the next ClusterQueue to take a candidate from,
  // walking down from the root to the child with the highest share (-1: none left). The caller
  // must then pop a candidate of it or drop it.
  int NextTarget();
  int NextTargetUnder(int cohort);
  bool HasQueued(int node) const {
    auto it = queued.find(node);
    return it != queued.end() && it->second.next < it->second.list.size();
  }
  Candidate Pop(int node) { auto& q = queued.at(node); return q.list[q.next++]; }
  // Groups `list` (in candidate order) by ClusterQueue and clears what was pruned or dropped.
  void Queue(const std::vector<Candidate>& list);
  bool FitsWithoutRequest();
  // The first strategy (rule S2-a, LessThanOrEqualToFinalShare, unless configured otherwise)
  // over the ClusterQueues in share order; candidates that fail it are appended to `retry`.
  // True when the preemptor fits.
  bool FirstStrategy(FsStrategy strategy, std::vector<Candidate>& targets,
                     std::vector<Candidate>& retry);
  // Rule S2-b (LessThanInitialShare) over `retry`, at most one victim per ClusterQueue.
  bool SecondStrategy(const std::vector<Candidate>& retry, std::vector<Candidate>& targets);
  std::vector<Candidate> FairSharing();

  struct Queued {
    std::vector<Candidate> list;
    size_t next = 0;
  };
  std::map<int, Queued> queued;  // by ClusterQueue node: its candidates left, in order
  std::set<int> pruned;          // nodes the ordering no longer visits
  std::set<int> preemptor_path;  // the cohorts above the preemptor
  bool within_nominal = false;   // reclaim_within_nominal of the search

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

void Engine::FindVictims(const WorkloadState& wl, const ClusterQueueSpec& spec, int cq_node,
                         Nomination& n) {
  n.victims.clear();
  n.victim_variants.clear();
  n.reclaim_within_nominal = false;
  const Assignment& assignment = n.assignment;
  VictimSearch search(*this, wl, spec, cq_node, assignment);
  for (const auto& [fr, amount] : assignment.usage) {
    // Engine v19: short of node capacity needs preemption as short of quota does.
    if (amount > std::min(tree_.Available(cq_node, fr), NodeRoom(fr))) {
      search.needing.push_back(fr);
    }
  }
  // Engine v26: a placement that needs preemption; the trial ends with this search.
  TasRequests tas;
  StartTasTrial(wl, spec, n, &tas, &search.needing);
  struct EndTrial {
    Engine* e;
    ~EndTrial() { e->tas_trial_ = nullptr; }
  } end_trial{this};
  if (search.needing.empty()) return;
  if (batch_version_ >= 23 && !FairPreemption()) {
    for (const VictimSearch::Candidate& c : search.Classical()) {
      n.victims.push_back(c.wl);
      n.victim_variants.push_back(c.variant);
    }
    return;
  }
  search.AddOwnCandidates();
  const bool under_nominal = search.UnderNominal();
  search.AddCohortCandidates(under_nominal);
  if (search.candidates.empty()) return;
  if (search.CannotCover()) return;
  search.Order();
  if (FairPreemption()) {
    for (const VictimSearch::Candidate& c : search.FairSharing()) n.victims.push_back(c.wl);
    n.reclaim_within_nominal = !n.victims.empty() && search.within_nominal;
    return;
  }
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
  for (const VictimSearch::Candidate& c : chosen) n.victims.push_back(c.wl);
}

GranularMode Engine::SimulatePreemption(const WorkloadState& wl, const ClusterQueueSpec& spec,
                                        int cq_node, Fr fr, int64_t val, int* borrow_after) {
  // Kueue's SimulatePreemption: the victim search for this flavor-resource alone, then the
  // borrowing level with the victims gone.
  Nomination trial;
  trial.assignment.usage[fr] = val;
  FindVictims(wl, spec, cq_node, trial);
  const auto level = [&] {
    if (tree_.node(cq_node).parent == -1 || tree_.Usage(cq_node, fr) + val <= tree_.Nominal(cq_node, fr)) {
      return 0;
    }
    return std::max(1, tree_.BorrowingHeight(cq_node, fr, val));
  };
  if (trial.victims.empty()) {
    *borrow_after = level();
    return kGranularNoCandidates;
  }
  bool same_cq = false;
  for (WorkloadState* v : trial.victims) {
    const int node = tree_.FindClusterQueue(v->cluster_queue);
    tree_.AddUsage(node, v->admission.usage, -1);
    same_cq = same_cq || node == cq_node;
  }
  *borrow_after = level();
  for (WorkloadState* v : trial.victims) {
    tree_.AddUsage(tree_.FindClusterQueue(v->cluster_queue), v->admission.usage, +1);
  }
  return same_cq ? kGranularPreempt : kGranularReclaim;
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
  // Engine v16, fair sharing (Kueue's findCandidates): reclaimWithinCohort alone decides which
  // workloads of other borrowing ClusterQueues are candidates; the shares decide later.
  const bool fair = engine.FairPreemption();
  // Other ClusterQueues' workloads are chosen only when borrowing within the cohort may
  // preempt, under fair sharing, or when the preemptor stays within its nominal quota
  // (reclaim); otherwise the choice is minimal(same_queue) whatever they are.
  const bool cohort_candidates_used = under_nominal || engine.config_.fair_sharing ||
                                      spec.preemption.borrow_within_cohort != ReclaimPolicy::kNever;
  if (!in_cohort || !cohort_candidates_used ||
      (spec.preemption.reclaim_within_cohort == ReclaimPolicy::kNever &&
       (fair || spec.preemption.borrow_within_cohort == ReclaimPolicy::kNever))) {
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
      if (fair) {
        if (allowed) candidates.push_back(Make(h, false, other));
        continue;
      }
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
    const int64_t room = std::min(tree.Available(cq_node, fr), engine.NodeRoom(fr));
    if (assignment.usage.at(fr) > room + freeable) return true;
  }
  return false;
}

void Engine::VictimSearch::ScoreLocalQueues(std::vector<Candidate>& list) const {
  if (!engine.AfsOn()) return;
  for (Candidate& c : list) {
    const ClusterQueueState* cq = engine.cq_by_node_[static_cast<size_t>(c.node)];
    if (cq != nullptr && cq->spec && engine.AfsOrders(*cq->spec)) {
      c.afs = engine.AfsScoreOf(c.wl->local_queue_key);
    }
  }
}

void Engine::VictimSearch::Order() {
  // Sorted lazily: the minimal set is usually a few of the first, so a heap hands them out one
  // by one instead of sorting them all.
  ScoreLocalQueues(candidates);
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
    Take(c, -1);
    targets.push_back(c);
    if (engine.WorkloadFits(cq_node, assignment.usage, borrowing_ok)) {
      fits = true;
      break;
    }
  }
  if (fits) FillBack(targets, allow_borrowing);
  for (const Candidate& c : targets) Take(c, +1);
  if (!fits) return {};
  return targets;
}

void Engine::VictimSearch::FillBack(std::vector<Candidate>& targets, bool allow_borrowing) {
  // Try returning each target but the last, newest first removed last.
  for (int i = static_cast<int>(targets.size()) - 2; i >= 0; --i) {
    const Candidate& c = targets[static_cast<size_t>(i)];
    Take(c, +1);
    if (engine.WorkloadFits(cq_node, assignment.usage, allow_borrowing)) {
      targets.erase(targets.begin() + i);
    } else {
      Take(c, -1);
    }
  }
}

// ---- Engine v23: Kueue v0.17's classical preemption ----

uint8_t Engine::VictimSearch::Classify(const Holder& h, bool same_cq, bool advantage) const {
  if (!Eligible(h) || !HolderUsesNeeded(h)) return kVariantUnset;
  const PreemptionPolicy& p = spec.preemption;
  if (same_cq) {
    // Kueue's SatisfiesPreemptionPolicy for withinClusterQueue.
    bool lower = h.priority < wl.priority;
    if (p.within_cluster_queue == WithinCq::kLowerOrNewerEqualPriority) {
      lower = lower || (h.priority == wl.priority && h.wl->queued_at_ns > wl.queued_at_ns);
    }
    return lower && p.within_cluster_queue != WithinCq::kNever ? kWithinClusterQueue
                                                               : kVariantUnset;
  }
  const bool satisfies = p.reclaim_within_cohort == ReclaimPolicy::kAny ||
                         (p.reclaim_within_cohort == ReclaimPolicy::kLowerPriority &&
                          h.priority < wl.priority);
  if (!satisfies) return kVariantUnset;
  if (advantage) return kHierarchicalReclaim;
  if (p.borrow_within_cohort == ReclaimPolicy::kNever) return kReclaimWithoutBorrowing;
  // Kueue's isAboveBorrowingThreshold.
  if (h.priority >= wl.priority ||
      (p.max_priority_threshold && h.priority > *p.max_priority_threshold)) {
    return kReclaimWithoutBorrowing;
  }
  return kReclaimWhileBorrowing;
}

bool Engine::VictimSearch::FitInQuota(int node, FrQuantities* remaining) const {
  bool fits = true;
  for (auto& [fr, v] : *remaining) {
    const int64_t usage = tree.Usage(node, fr);
    if (usage + v > tree.Nominal(node, fr)) fits = false;
    const int64_t local_available = std::max<int64_t>(0, tree.Guaranteed(node, fr) - usage);
    v = std::max<int64_t>(0, v - local_available);
  }
  return fits;
}

void Engine::VictimSearch::CollectInSubtree(int cohort, int lca, int skip, bool advantage,
                                            std::vector<Candidate>* out) {
  for (int child : tree.node(cohort).children) {
    if (child == skip || child == cq_node || WithinNominalIn(child)) continue;
    if (!tree.node(child).is_cluster_queue) {
      CollectInSubtree(child, lca, skip, advantage, out);
      continue;
    }
    const ClusterQueueState* other = engine.cq_by_node_[static_cast<size_t>(child)];
    if (other == nullptr) continue;
    for (const Holder& h : other->holders) {
      const uint8_t variant = Classify(h, false, advantage);
      if (variant == kVariantUnset) continue;
      Candidate c = Make(h, false, child);
      c.variant = variant;
      c.lca = lca;
      out->push_back(c);
    }
  }
}

bool Engine::VictimSearch::ValidInAttempt(const Candidate& c, bool borrowing) const {
  if (c.same_cq) return true;
  if (borrowing && c.variant == kReclaimWithoutBorrowing) return false;
  if (WithinNominalIn(c.node)) return false;
  for (int a = tree.node(c.node).parent; a != -1 && a != c.lca; a = tree.node(a).parent) {
    if (WithinNominalIn(a)) return false;
  }
  return true;
}

std::vector<Engine::VictimSearch::Candidate> Engine::VictimSearch::Classical() {
  std::vector<Candidate> own, hierarchy, priority;
  const ClusterQueueState* own_state = engine.cq_by_node_[static_cast<size_t>(cq_node)];
  const ClusterQueueState& own_cq =
      own_state != nullptr ? *own_state : engine.cqs_.at(wl.cluster_queue);
  for (const Holder& h : own_cq.holders) {
    const uint8_t variant = Classify(h, true, false);
    if (variant == kVariantUnset) continue;
    Candidate c = Make(h, true, cq_node);
    c.variant = variant;
    own.push_back(c);
  }
  const int parent = tree.node(cq_node).parent;
  if (parent != -1 && spec.preemption.reclaim_within_cohort != ReclaimPolicy::kNever) {
    // Kueue's collectCandidatesForHierarchicalReclaim: up from the preemptor, each cohort's
    // subtree but the one just left; once a subtree holds the request, the preemptor has the
    // advantage over every workload using that subtree's quota.
    FrQuantities remaining = assignment.usage;
    bool advantage = FitInQuota(cq_node, &remaining);
    for (int cur = parent, prev = -1; cur != -1; prev = cur, cur = tree.node(cur).parent) {
      CollectInSubtree(cur, cur, prev, advantage, advantage ? &hierarchy : &priority);
      advantage = FitInQuota(cur, &remaining) || advantage;
    }
  }
  for (std::vector<Candidate>* list : {&own, &hierarchy, &priority}) {
    ScoreLocalQueues(*list);
    std::sort(list->begin(), list->end(), Before);
  }
  // Evicted candidates of each list first (the hierarchy's, priority's, the ClusterQueue's),
  // then the others in the same order.
  std::vector<Candidate> all;
  all.reserve(own.size() + hierarchy.size() + priority.size());
  for (const bool evicting : {true, false}) {
    for (const std::vector<Candidate>* list : {&hierarchy, &priority, &own}) {
      for (const Candidate& c : *list) {
        if (c.evicting == evicting) all.push_back(c);
      }
    }
  }
  candidates = all;
  if (all.empty() || CannotCover()) return {};
  const bool forbidden = spec.preemption.borrow_within_cohort == ReclaimPolicy::kNever;
  std::vector<bool> attempts = {true, false};
  if ((hierarchy.empty() && priority.empty()) || (forbidden && !UnderNominal())) {
    attempts = {true};
  } else if (forbidden && hierarchy.empty()) {
    attempts = {false, true};
  }
  for (const bool borrowing : attempts) {
    std::vector<Candidate> targets = ClassicalAttempt(all, borrowing);
    if (!targets.empty()) return targets;
  }
  return {};
}

std::vector<Engine::VictimSearch::Candidate> Engine::VictimSearch::ClassicalAttempt(
    const std::vector<Candidate>& all, bool borrowing) {
  std::vector<Candidate> targets;
  bool fits = false;
  for (const Candidate& c : all) {
    if (!ValidInAttempt(c, borrowing)) continue;
    Take(c, -1);
    targets.push_back(c);
    if (engine.WorkloadFits(cq_node, assignment.usage, borrowing)) {
      fits = true;
      break;
    }
  }
  if (fits) FillBack(targets, borrowing);
  for (const Candidate& c : targets) Take(c, +1);
  if (!fits) return {};
  return targets;
}

// ---- Engine v16: Kueue's fairPreemptions ----

int Engine::CompareShares(const Share& a, const Share& b) {
  // Kueue's CompareDRS on exact ratios: a zero weight that borrows is above every other share
  // (infinite); two such compare by their unweighted ratios; others by ratio / weight,
  // compared by cross-multiplying (at most 2^63 each, so the products fit in 128 bits).
  using I128 = __int128;
  auto cmp = [](I128 x, I128 y) { return x < y ? -1 : (x > y ? 1 : 0); };
  const bool a_inf = a.ZeroWeightBorrows();
  const bool b_inf = b.ZeroWeightBorrows();
  if (a_inf && b_inf) {
    return cmp(static_cast<I128>(a.borrowed) * b.lendable, static_cast<I128>(b.borrowed) * a.lendable);
  }
  if (a_inf) return 1;
  if (b_inf) return -1;
  // Neither borrows with a zero weight: a share is 0 unless it borrows, then its weight is > 0.
  if (a.borrowed == 0 || b.borrowed == 0) return cmp(a.borrowed > 0, b.borrowed > 0);
  const I128 left = static_cast<I128>(a.borrowed) * b.lendable * b.weight_milli;
  const I128 right = static_cast<I128>(b.borrowed) * a.lendable * a.weight_milli;
  return cmp(left, right);
}

Engine::Share Engine::NodeShare(int node, bool* borrowing) const {
  // Kueue's dominantResourceShare: for each flavor-resource the node uses above its subtree
  // quota, that amount per what its root cohort holds (the lendable of DominantShare); the
  // largest ratio, with the node's fair weight.
  Share share;
  const QuotaTree::Node& n = tree_.node(node);
  if (n.is_cluster_queue) {
    auto spec_it = cq_specs_.find(n.name);
    if (spec_it != cq_specs_.end()) share.weight_milli = spec_it->second.fair_weight_milli;
  } else {
    auto spec_it = cohort_specs_.find(n.name);
    if (spec_it != cohort_specs_.end()) share.weight_milli = spec_it->second.fair_weight_milli;
  }
  if (borrowing != nullptr) *borrowing = false;
  if (n.parent == -1) return share;
  const int root = tree_.Root(node);
  for (const auto& [fr, usage] : n.usage) {
    const int64_t borrowed = usage - tree_.Nominal(node, fr);
    if (borrowed <= 0) continue;
    if (borrowing != nullptr) *borrowing = true;
    const int64_t lendable = tree_.Nominal(root, fr);
    if (lendable <= 0) continue;
    if (share.borrowed == 0 || static_cast<__int128>(borrowed) * share.lendable >
                                   static_cast<__int128>(share.borrowed) * lendable) {
      share.borrowed = borrowed;
      share.lendable = lendable;
    }
  }
  return share;
}

int Engine::VictimSearch::Lca(int target) const {
  for (int a = tree.node(target).parent; a != -1; a = tree.node(a).parent) {
    if (preemptor_path.count(a) != 0) return a;
  }
  ADM_CHECK(false, "no common cohort of ClusterQueue nodes %d and %d", target, cq_node);
  return -1;
}

int Engine::VictimSearch::AlmostLca(int node, int lca) const {
  int below = node;
  for (int a = tree.node(node).parent; a != -1; a = tree.node(a).parent) {
    if (a == lca) return below;
    below = a;
  }
  ADM_CHECK(false, "cohort node %d is not above node %d", lca, node);
  return -1;
}

int Engine::VictimSearch::NextTargetUnder(int cohort) {
  // Kueue's nextTarget: of the cohort's ClusterQueues that borrow (or the preemptor's) and
  // still hold candidates, the highest share (ties: the one whose next candidate comes first);
  // of its cohorts that borrow (or lie above the preemptor), the highest share (ties: the
  // first by name, where Kueue's order is that of a map). A cohort wins a tie with a
  // ClusterQueue, and is then walked down. Returns -1 after only pruning.
  int best_cq = -1, best_cohort = -1;
  Share best_cq_share, best_cohort_share;
  for (int child : tree.node(cohort).children) {
    if (pruned.count(child) != 0) continue;
    bool borrowing = false;
    const Share share = NodeShare(child, &borrowing);
    if (tree.node(child).is_cluster_queue) {
      if ((!borrowing && child != cq_node) || !HasQueued(child)) {
        pruned.insert(child);
        continue;
      }
      const int c = best_cq == -1 ? 1 : CompareShares(share, best_cq_share);
      const auto head = [&](int node) { const Queued& q = queued.at(node); return q.list[q.next]; };
      if (c > 0 || (c == 0 && Before(head(child), head(best_cq)))) {
        best_cq = child;
        best_cq_share = share;
      }
    } else if (!borrowing && preemptor_path.count(child) == 0) {
      pruned.insert(child);
    } else if (best_cohort == -1 || CompareShares(share, best_cohort_share) > 0) {
      best_cohort = child;
      best_cohort_share = share;
    }
  }
  if (best_cq == -1 && best_cohort == -1) {
    pruned.insert(cohort);
    return -1;
  }
  if (best_cohort != -1 && (best_cq == -1 || CompareShares(best_cohort_share, best_cq_share) >= 0)) {
    return NextTargetUnder(best_cohort);
  }
  return best_cq;
}

int Engine::VictimSearch::NextTarget() {
  if (tree.node(cq_node).parent == -1) {
    return pruned.count(cq_node) == 0 && HasQueued(cq_node) ? cq_node : -1;
  }
  const int root = tree.Root(cq_node);
  // Each call of NextTargetUnder that finds nothing prunes a node, so it is called at most
  // once per node and once more.
  for (size_t calls = 0; pruned.count(root) == 0; ++calls) {
    ADM_CHECK(calls <= tree.size(), "the fair-sharing order pruned nothing in %zu calls", calls);
    const int target = NextTargetUnder(root);
    if (target != -1) return target;
  }
  return -1;
}

void Engine::VictimSearch::Queue(const std::vector<Candidate>& list) {
  queued.clear();
  pruned.clear();
  for (const Candidate& c : list) queued[c.node].list.push_back(c);
}

bool Engine::VictimSearch::FitsWithoutRequest() {
  // Kueue's workloadFitsForFairSharing: the request is in the tree while shares are compared.
  tree.AddUsage(cq_node, assignment.usage, -1);
  const bool fits = engine.WorkloadFits(cq_node, assignment.usage, true);
  tree.AddUsage(cq_node, assignment.usage, +1);
  return fits;
}

bool Engine::VictimSearch::FirstStrategy(FsStrategy strategy, std::vector<Candidate>& targets,
                                         std::vector<Candidate>& retry) {
  // Each target taken pops a candidate (or all of them go to `retry`), so this loop runs at
  // most once per candidate.
  for (int target = NextTarget(); target != -1; target = NextTarget()) {
    if (target == cq_node || within_nominal) {
      // Within its own ClusterQueue (priority), or within nominal quota (Kueue's
      // FairSharingPreemptWithinNominal, on by default): no share is compared.
      const Candidate c = Pop(target);
      Take(c, -1);
      targets.push_back(c);
      if (FitsWithoutRequest()) return true;
      continue;
    }
    const int lca = Lca(target);
    const Share preemptor_new = NodeShare(AlmostLca(cq_node, lca));
    const int target_top = AlmostLca(target, lca);
    const Share target_old = NodeShare(target_top);
    if (preemptor_new.ZeroWeightBorrows() && !target_old.ZeroWeightBorrows()) {
      // Kueue's fsStrategyUnsatisfiable: no candidate here can pass either rule.
      while (HasQueued(target)) retry.push_back(Pop(target));
      continue;
    }
    while (HasQueued(target)) {
      const Candidate c = Pop(target);
      Take(c, -1);
      const Share target_new = NodeShare(target_top);
      // Rule S2-a: the preemptor's share after admission is at most the target's after it
      // gives the candidate back; S2-b (configured first): below the target's before.
      const bool passes = strategy == kLessThanInitialShare
                              ? CompareShares(preemptor_new, target_old) < 0
                              : CompareShares(preemptor_new, target_new) <= 0;
      if (passes) {
        targets.push_back(c);
        if (FitsWithoutRequest()) return true;
        break;  // the shares changed: choose the ClusterQueue again
      }
      Take(c, +1);
      retry.push_back(c);
    }
  }
  return false;
}

bool Engine::VictimSearch::SecondStrategy(const std::vector<Candidate>& retry,
                                          std::vector<Candidate>& targets) {
  Queue(retry);
  for (int target = NextTarget(); target != -1; target = NextTarget()) {
    const int lca = Lca(target);
    const Share preemptor_new = NodeShare(AlmostLca(cq_node, lca));
    const Share target_old = NodeShare(AlmostLca(target, lca));
    const Candidate c = Pop(target);
    // Rule S2-b: the preemptor's share after admission is below the target's now. It does not
    // depend on the candidate, so only the first is tried, and the ClusterQueue is dropped.
    if (CompareShares(preemptor_new, target_old) < 0) {
      Take(c, -1);
      targets.push_back(c);
      if (FitsWithoutRequest()) return true;
    }
    pruned.insert(target);
  }
  return false;
}

std::vector<Engine::VictimSearch::Candidate> Engine::VictimSearch::FairSharing() {
  // Kueue's fairPreemptions with its default strategies (LessThanOrEqualToFinalShare, then
  // LessThanInitialShare): the shares are those with the request added to the preemptor's
  // ClusterQueue; the victims are then filled back with borrowing allowed.
  std::vector<Candidate> in_order;
  for (size_t i = 0; const Candidate* c = Nth(i); ++i) in_order.push_back(*c);
  Queue(in_order);
  for (int a = tree.node(cq_node).parent; a != -1; a = tree.node(a).parent) preemptor_path.insert(a);
  tree.AddUsage(cq_node, assignment.usage, +1);
  within_nominal = true;
  for (Fr fr : needing) {
    if (tree.Usage(cq_node, fr) > tree.Nominal(cq_node, fr)) within_nominal = false;
  }
  std::vector<Candidate> targets;
  std::vector<Candidate> retry;
  // Kueue's parseStrategies: the configured strategies, or its default two. The first runs over
  // the ClusterQueues in share order; any second is rule S2-b over what the first passed over.
  const std::vector<uint8_t>& configured = engine.config_.fs_strategies;
  const FsStrategy first = configured.empty() ? kLessThanOrEqualToFinalShare
                                              : static_cast<FsStrategy>(configured.front());
  bool fits = FirstStrategy(first, targets, retry);
  if (!fits && (configured.empty() || configured.size() > 1)) fits = SecondStrategy(retry, targets);
  tree.AddUsage(cq_node, assignment.usage, -1);
  if (fits) FillBack(targets, true);
  for (const Candidate& c : targets) Take(c, +1);
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

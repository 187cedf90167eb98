// The admission cycle (RunCycle): heads of the active ClusterQueues, their nominations,
// Kueue's entry order, then admit, preempt or leave pending, one entry at a time against the
// usage admitted before it. Kueue: pkg/scheduler/scheduler.go (Scheduler.schedule, nominate,
// entryOrdering, reserveCapacityForUnreclaimablePreempt).

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "projections/engine.h"
#include "projections/engine_internal.h"
#include "schema/result.h"

namespace admission::projections {

bool Engine::HeadBefore(const QueueKey& a, const QueueKey& b) const {
  if (config_.aging_step_ns <= 0) return a < b;
  const int64_t pa = EffectivePriority(*a.wl, now_ns_);
  const int64_t pb = EffectivePriority(*b.wl, now_ns_);
  if (pa != pb) return pa > pb;
  return a < b;
}

WorkloadState* Engine::Head(ClusterQueueState& cq, EquivalenceClass** cls_out,
                           bool even_inadmissible) const {
  const QueueKey* best = nullptr;
  EquivalenceClass* best_cls = nullptr;
  const bool strict = cq.spec && cq.spec->queueing == QueueingStrategy::kStrictFifo;
  const bool by_usage = cq.spec && AfsOrders(*cq.spec);
  for (auto& [key, cls] : cq.classes) {
    if (cls.members.empty()) continue;
    // StrictFIFO: the overall head, admissible or not, blocks the queue.
    if (!strict && cls.inadmissible) continue;
    const QueueKey& head = *cls.members.begin();
    if (best == nullptr || (by_usage ? AfsHeadBefore(head, *best) : HeadBefore(head, *best))) {
      best = &head;
      best_cls = &cls;
    }
  }
  if (best == nullptr) return nullptr;
  if (strict && best_cls->inadmissible && !even_inadmissible) return nullptr;
  if (cls_out != nullptr) *cls_out = best_cls;
  return best->wl;
}

Nomination Engine::Nominate(const WorkloadState& wl, const ClusterQueueState& cq) {
  const ClusterQueueSpec& spec = *cq.spec;
  const int node = NodeOf(cq, wl.cluster_queue);
  ADM_CHECK(node >= 0, "ClusterQueue %s not in the tree", wl.cluster_queue.c_str());
  std::vector<int32_t> full;
  for (const PodSetSpec& ps : wl.pod_sets) full.push_back(ps.count);
  Nomination n = AssignFlavors(wl, spec, node, full);
  if (n.mode == kFit) return n;
  if (n.mode == kPreempt) {
    FindVictims(wl, spec, node, n);
    if (!n.victims.empty()) return n;
  }
  // Partial admission: the largest counts down to each podSet's minCount that fit.
  if (!n.never_fits) {
    if (std::optional<Nomination> partial = NominatePartially(wl, spec, node)) return *partial;
  }
  if (n.mode == kPreempt) {
    n.mode = kNoFit;  // no victim set frees enough
    n.preempt_without_victims = true;
  }
  return n;
}

void Engine::HoldCapacity(int cq_node, const Nomination& n,
                          std::vector<std::pair<int, FrQuantities>>* held) {
  // Kueue's quotaResourcesToReserve for a Preempt-mode assignment: when borrowing, the request
  // up to the borrowing limit; otherwise what is left of the nominal quota.
  FrQuantities reserve;
  const QuotaTree::Node& node = tree_.node(cq_node);
  for (const auto& [fr, amount] : n.assignment.usage) {
    const int64_t usage = tree_.Usage(cq_node, fr);
    const int64_t nominal = tree_.Nominal(cq_node, fr);
    auto q = node.quota.find(fr);
    const std::optional<int64_t> limit =
        q == node.quota.end() ? std::nullopt : q->second.borrowing_limit;
    int64_t r = 0;
    if (n.borrowing_height > 0) {
      r = limit ? std::min(amount, nominal + *limit - usage) : amount;
    } else {
      r = std::min(amount, nominal - usage);
    }
    if (r > 0) reserve[fr] = r;
  }
  if (reserve.empty()) return;
  tree_.AddUsage(cq_node, reserve, +1);
  held->emplace_back(cq_node, std::move(reserve));
}

// A nominated head of one cycle.
struct Engine::CycleEntry {
  WorkloadState* wl;
  ClusterQueueState* cq;
  EquivalenceClass* cls;  // the head's class (it stays while the head is queued)
  Nomination n;
  int64_t share = 0;  // fair sharing: the ClusterQueue's share after this admission
  // The order fields, read once instead of twice per comparison.
  int64_t priority = 0;
  int64_t queued_at_ns = 0;
  uint64_t submitted_sequence = 0;
  bool hold_only = false;  // engine v11: a sleeping StrictFIFO head that only holds capacity
};

bool Engine::RunCycle(int64_t now) {
  RebuildTreeIfNeeded();
  FlushReactivations();
  std::vector<CycleEntry> entries;
  entries.reserve(active_.size());  // one per active ClusterQueue at most, as a rule
  NominateHeads(now, &entries);
  if (batch_version_ >= 11) NominateSleepingStrictFifoHeads(now, &entries);
  if (entries.empty()) return false;
  const std::vector<CycleEntry*> order = OrderEntries(entries);

  bool changed = false;
  std::set<int> touched_roots;  // cohort trees changed earlier in this cycle
  std::vector<std::pair<int, FrQuantities>> held;  // engine v11: capacity held in this cycle
  const uint64_t held_epoch = tree_epoch_;
  // Engine v24, fair sharing: Kueue's fairSharingIterator, one tournament per entry taken.
  const bool tournament = config_.fair_sharing && batch_version_ >= 24;
  std::vector<CycleEntry*> left = tournament ? order : std::vector<CycleEntry*>{};
  for (size_t i = 0; tournament ? !left.empty() : i < order.size(); ++i) {
    CycleEntry& e = tournament ? *TakeTournamentWinner(&left) : *order[i];
    WorkloadState& wl = *e.wl;
    const int node = NodeOf(*e.cq, wl.cluster_queue);
    const int root = tree_.Root(node);
    if (e.hold_only) {
      HoldCapacity(node, e.n, &held);
      continue;
    }
    // Engine v12: a search is resumed only by LeavePending; any other outcome (admitted,
    // preempting, skipped) starts the next search from the first flavor, as Kueue clears
    // LastAssignment then.
    const uint32_t resumes = wl.flavor_resume ? wl.flavor_resume->resumes : 0;
    wl.flavor_resume.reset();
    bool entry_changed = false;
    if (e.n.mode == kFit) {
      entry_changed = AdmitFitting(e, node, root, &touched_roots, now);
    } else if (e.n.mode == kPreempt) {
      entry_changed = PreemptForEntry(e, node, root, &touched_roots, &held, now);
    } else {
      entry_changed = LeavePending(e, node, resumes, &held, now);
    }
    if (entry_changed) changed = true;
  }
  // The capacity held for entries that found no victims returns at the end of the cycle.
  for (auto it = held.rbegin(); it != held.rend(); ++it) {
    if (held_epoch == tree_epoch_) tree_.AddUsage(it->first, it->second, -1);
  }
  return changed;
}

void Engine::NominateHeads(int64_t now, std::vector<CycleEntry>* entries) {
  std::vector<std::set<std::string>::iterator> idle;  // of active_
  // active_ and cqs_ are both ordered by name: when most queues are active, walk them together
  // instead of looking each one up.
  const bool walk = active_.size() * 8 >= cqs_.size();
  auto walker = cqs_.begin();
  for (auto active = active_.begin(); active != active_.end(); ++active) {
    const std::string& cq_name = *active;
    if (walk) {
      while (walker != cqs_.end() && walker->first < cq_name) ++walker;
    }
    ClusterQueueState& cq = walk && walker != cqs_.end() && walker->first == cq_name
                                ? walker->second
                                : cqs_[cq_name];
    if (!cq.spec || !cq.inactive_reason.empty() || cq.spec->stop_policy != StopPolicy::kNone) {
      HoldHeadsOfInactive(cq, cq_name, now);
      idle.push_back(active);
      continue;
    }
    EquivalenceClass* head_class = nullptr;
    WorkloadState* head = HeadPastStoppedLocalQueues(cq, &head_class, now);
    if (head == nullptr) {
      idle.push_back(active);
      continue;
    }
    WorkloadState& wl = *head;
    entries->push_back(CycleEntry{head, &cq, head_class, Nominate(wl, cq), 0,
                                  EffectivePriority(wl, now), wl.queued_at_ns,
                                  wl.submitted_sequence});
  }
  for (auto name : idle) active_.erase(name);
}

void Engine::HoldHeadsOfInactive(ClusterQueueState& cq, const std::string& cq_name, int64_t now) {
  // Inactive or held: every head waits with that reason until a definition changes.
  for (auto& [k, cls] : cq.classes) {
    cls.inadmissible = true;
    if (!cls.members.empty()) {
      WorkloadState& wl = *cls.members.begin()->wl;
      SetPending(wl, "Inadmissible",
                 !cq.spec ? "ClusterQueue " + cq_name + " doesn't exist"
                 : !cq.inactive_reason.empty() ? cq.inactive_reason
                                               : "ClusterQueue " + cq_name + " is stopped",
                 "", "", 0, now, true);
    }
  }
}

WorkloadState* Engine::HeadPastStoppedLocalQueues(ClusterQueueState& cq,
                                                  EquivalenceClass** head_class, int64_t now) {
  // In Kueue a stopped LocalQueue's workloads are not in the ClusterQueue's queue at all, so
  // they block nothing (engine v4; v3 let such a head end the ClusterQueue's turn in the
  // cycle). Each is marked and told why. Bound: each head skipped marks its class inadmissible,
  // which Head passes over (or stops at, StrictFIFO), so at most every class once.
  WorkloadState* head = Head(cq, head_class);
  for (size_t skipped = 0; head != nullptr && stopped_local_queues_ > 0; ++skipped) {
    ADM_CHECK(skipped < cq.classes.size(), "ClusterQueue %s: %zu heads of stopped LocalQueues "
              "skipped, more than its %zu classes", cq.spec ? cq.spec->name.c_str() : "?",
              skipped, cq.classes.size());
    auto lq = lqs_.find(head->local_queue_key);
    if (lq == lqs_.end() || lq->second.stop_policy == StopPolicy::kNone) break;
    (*head_class)->inadmissible = true;
    SetPending(*head, "Inadmissible", "LocalQueue " + head->queue_name + " is stopped", "", "",
               0, now, true);
    head = Head(cq, head_class);
  }
  return head;
}

void Engine::NominateSleepingStrictFifoHeads(int64_t now, std::vector<CycleEntry>* entries) {
  // Engine v11: Kueue nominates a StrictFIFO head again in every cycle, even one that found
  // no victims; such a head holds the capacity it needs in each cycle (RunCycle). Ours sleeps
  // until capacity changes, so its hold is taken here, as an entry that only holds.
  for (const std::string& cq_name : strict_fifo_cqs_) {
    ClusterQueueState& cq = cqs_.at(cq_name);
    if (!cq.spec || cq.spec->queueing != QueueingStrategy::kStrictFifo || cq.pending == 0 ||
        !cq.inactive_reason.empty() || cq.spec->stop_policy != StopPolicy::kNone ||
        cq.spec->preemption.reclaim_within_cohort == ReclaimPolicy::kAny) {
      continue;
    }
    EquivalenceClass* head_class = nullptr;
    WorkloadState* head = Head(cq, &head_class, /*even_inadmissible=*/true);
    if (head == nullptr || !head_class->inadmissible) continue;  // an entry already
    if (stopped_local_queues_ > 0) {
      auto lq = lqs_.find(head->local_queue_key);
      if (lq != lqs_.end() && lq->second.stop_policy != StopPolicy::kNone) continue;
    }
    Nomination n = Nominate(*head, cq);
    if (!n.preempt_without_victims) continue;
    entries->push_back(CycleEntry{head, &cq, head_class, std::move(n), 0,
                                  EffectivePriority(*head, now), head->queued_at_ns,
                                  head->submitted_sequence, true});
  }
}

Engine::CycleEntry* Engine::TakeTournamentWinner(std::vector<CycleEntry*>* left) {
  // The first entry left (in OrderEntries' order) names the cohort tree to run it in (Kueue
  // picks any ClusterQueue); a ClusterQueue without a cohort has no tournament.
  std::vector<CycleEntry*>& entries = *left;
  const int first_node = NodeOf(*entries.front()->cq, entries.front()->wl->cluster_queue);
  const int root = tree_.Root(first_node);
  size_t pick = 0;
  if (root != first_node) {
    // Kueue's computeDRS: per entry, with its usage added to its ClusterQueue, the share of
    // each node on its path, keyed by that node's parent, and whether that node then borrows
    // in a flavor-resource the entry requests.
    Tournament t;
    for (size_t i = 0; i < entries.size(); ++i) {
      const CycleEntry& e = *entries[i];
      const int node = NodeOf(*e.cq, e.wl->cluster_queue);
      if (tree_.Root(node) != root) continue;
      const FrQuantities& usage = e.n.assignment.usage;
      tree_.AddUsage(node, usage, +1);
      Tournament::Player& player = t.players.emplace_back();
      player.index = i;
      player.node = node;
      for (int child = node, up = tree_.node(node).parent; up != -1;
           child = up, up = tree_.node(up).parent) {
        bool borrowing_on = false;
        for (const auto& [fr, amount] : usage) {
          if (amount > 0 && tree_.Usage(child, fr) > tree_.Nominal(child, fr)) borrowing_on = true;
        }
        player.at[up] = Tournament::Seen{NodeShare(child), borrowing_on};
      }
      tree_.AddUsage(node, usage, -1);
    }
    pick = t.players[static_cast<size_t>(RunTournament(t, root, entries))].index;
  }
  CycleEntry* winner = entries[pick];
  entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(pick));
  return winner;
}

int Engine::RunTournament(const Tournament& t, int cohort,
                          const std::vector<CycleEntry*>& entries) const {
  // Kueue's runTournament and entryComparer.less: at each cohort, of its children's entries
  // (a child cohort's winner, a ClusterQueue's own), the one whose child does not borrow what
  // it requests first (FairSharingPrioritizeNonBorrowing), then the lower share, the higher
  // priority, the earlier queue order time; then OrderEntries' order (Kueue: the first seen).
  const auto less = [&](int a, int b) {
    const Tournament::Player& pa = t.players[static_cast<size_t>(a)];
    const Tournament::Player& pb = t.players[static_cast<size_t>(b)];
    const Tournament::Seen& sa = pa.at.at(cohort);
    const Tournament::Seen& sb = pb.at.at(cohort);
    if (sa.borrowing_on != sb.borrowing_on) return !sa.borrowing_on;
    if (const int c = CompareShares(sa.share, sb.share); c != 0) return c < 0;
    const CycleEntry& ea = *entries[pa.index];
    const CycleEntry& eb = *entries[pb.index];
    if (ea.priority != eb.priority) return ea.priority > eb.priority;
    if (ea.queued_at_ns != eb.queued_at_ns) return ea.queued_at_ns < eb.queued_at_ns;
    return pa.index < pb.index;
  };
  int best = -1;
  const auto consider = [&](int player) {
    if (player != -1 && (best == -1 || less(player, best))) best = player;
  };
  for (int child : tree_.node(cohort).children) {
    if (!tree_.node(child).is_cluster_queue) {
      consider(RunTournament(t, child, entries));
      continue;
    }
    for (size_t p = 0; p < t.players.size(); ++p) {
      if (t.players[p].node == child) consider(static_cast<int>(p));
    }
  }
  return best;
}

std::vector<Engine::CycleEntry*> Engine::OrderEntries(std::vector<CycleEntry>& entries) const {
  // Kueue's entry order: the lower borrowing level first (not borrowing, then, since engine
  // v8, the lower borrowing height in hierarchical cohorts), then priority, then FIFO
  // timestamp; ties by submission order, then uid (Kueue leaves ties to an unstable sort).
  if (config_.fair_sharing) {
    // Fair sharing: the entry whose ClusterQueue would have the lower weighted dominant
    // share after admitting it goes first.
    for (CycleEntry& e : entries) {
      const int node = NodeOf(*e.cq, e.wl->cluster_queue);
      e.share = DominantShare(node, &e.n.assignment.usage);
    }
  }
  // Sorted through pointers (an entry is large); the key makes the order total.
  std::vector<CycleEntry*> order;
  order.reserve(entries.size());
  for (CycleEntry& e : entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [&](const CycleEntry* pa, const CycleEntry* pb) {
    const CycleEntry& a = *pa;
    const CycleEntry& b = *pb;
    if (config_.fair_sharing && a.share != b.share) return a.share < b.share;
    if (a.n.borrowing_height != b.n.borrowing_height) {
      return a.n.borrowing_height < b.n.borrowing_height;
    }
    if (a.priority != b.priority) return a.priority > b.priority;
    if (a.queued_at_ns != b.queued_at_ns) return a.queued_at_ns < b.queued_at_ns;
    if (a.submitted_sequence != b.submitted_sequence) {
      return a.submitted_sequence < b.submitted_sequence;
    }
    if (a.wl->uid != b.wl->uid) return a.wl->uid < b.wl->uid;
    return a.wl->key < b.wl->key;
  });
  return order;
}

bool Engine::AdmitFitting(CycleEntry& e, int node, int root, std::set<int>* touched_roots,
                          int64_t now) {
  WorkloadState& wl = *e.wl;
  if (batch_version_ >= 21 && revoked_in_batch_.count(wl.key) != 0) {
    // Engine v21: revoked at this instant, it waits for the next batch, as a preempted one.
    e.cls->inadmissible = true;
    held_until_next_batch_.emplace_back(wl.cluster_queue, wl.class_key);
    SetPending(wl, "Pending", "Revoked at this instant; it may be admitted again from the next cycle",
               "", "", 0, now, true);
    return true;
  }
  if (batch_version_ >= 15 && preempted_in_batch_.count(wl.key) != 0) {
    // Engine v15: preempted earlier at this instant, it is not admitted again before the next
    // batch either (Kueue requeues it only once its eviction was observed). Otherwise a victim
    // whose quota came back at once retakes the room its preemptor, still waiting for other
    // victims to drain, needs, and is preempted again, without end.
    e.cls->inadmissible = true;
    held_until_next_batch_.emplace_back(wl.cluster_queue, wl.class_key);
    SetPending(wl, "Pending",
               "Preempted at this instant; it may be admitted again from the next cycle", "", "", 0,
               now, true);
    return true;
  }
  // Engine v26: and its placement, unless an earlier entry of the cycle took the room.
  if (FitsNow(node, e.n.assignment.usage) && TopologyStillFits(e.n.assignment)) {
    Reserve(wl, e.n, now);
    touched_roots->insert(root);
    return true;
  }
  // Another workload of the cohort took the room in this cycle: try again next cycle.
  SetPending(wl, "Pending", "Workload no longer fits after processing another workload", "", "",
             0, now, false);
  return false;
}

bool Engine::PreemptForEntry(CycleEntry& e, int node, int root, std::set<int>* touched_roots,
                             std::vector<std::pair<int, FrQuantities>>* held, int64_t now) {
  WorkloadState& wl = *e.wl;
  ClusterQueueState& cq = *e.cq;
  if (batch_version_ >= 21 && revoked_in_batch_.count(wl.key) != 0) {
    e.cls->inadmissible = true;
    held_until_next_batch_.emplace_back(wl.cluster_queue, wl.class_key);
    SetPending(wl, "Pending",
               "Revoked at this instant; it may preempt from the next cycle: " + e.n.message,
               e.n.resource, e.n.flavor, e.n.shortfall, now, true);
    return true;
  }
  if (batch_version_ >= 6 && preempted_in_batch_.count(wl.key) != 0) {
    // Engine v6: preempted earlier at this instant, it preempts nobody before the next
    // batch (Kueue nominates it again only once its eviction was observed).
    e.cls->inadmissible = true;
    held_until_next_batch_.emplace_back(wl.cluster_queue, wl.class_key);
    SetPending(wl, "Pending",
               "Preempted at this instant; it may preempt in turn from the next cycle: " +
                   e.n.message,
               e.n.resource, e.n.flavor, e.n.shortfall, now, true);
    return true;
  }
  if (touched_roots->count(root) != 0) {
    // Earlier entries of this cycle changed this cohort tree, so the victims were chosen
    // on a stale view: choose again against the current state rather than retrying the
    // whole cohort in another cycle.
    if (FitsNow(node, e.n.assignment.usage) && PlaceTopologyNow(wl, *cq.spec, e.n)) {
      Reserve(wl, e.n, now);
      return true;
    }
    FindVictims(wl, *cq.spec, node, e.n);
    if (e.n.victims.empty()) return false;  // retried next cycle
  }
  touched_roots->insert(root);
  // Engine v20: the preemptor keeps its place at the head of its ClusterQueue while its
  // victims drain, nominated in every cycle (Kueue requeues it at once, with
  // RequeueReasonPendingPreemption). Before, it slept until a release, marked first: a victim
  // whose pods never started releases at once, and that release must wake it.
  const bool keeps_place = batch_version_ >= 20;
  if (!keeps_place) e.cls->inadmissible = true;
  const std::string message = "Preempted to accommodate a workload (UID: " + wl.uid + ") due to ";
  size_t issued = 0;
  for (size_t i = 0; i < e.n.victims.size(); ++i) {
    WorkloadState& v = *e.n.victims[i];
    // Engine v15: a victim already being evicted is waited for, not evicted again.
    if (v.phase == Phase::kEvicting) continue;
    ++issued;
    const auto [reason, human] = PreemptionReason(*cq.spec, wl, v, e.n, i);
    if (batch_version_ >= 6) preempted_in_batch_.insert(v.key);
    Evict(v, "Preempted", message + human, reason, &wl, now);
  }
  const size_t draining = e.n.victims.size() - issued;
  const std::string before = wl.pending_message;
  SetPending(wl, "Pending",
             (issued > 0 ? "Preempting " + std::to_string(issued) + " workload(s)" : std::string()) +
                 (issued > 0 && draining > 0 ? " and w" : draining > 0 ? "W" : "") +
                 (draining > 0 ? "aiting for " + std::to_string(draining) +
                                     " workload(s) being evicted"
                               : std::string()) +
                 " to make room: " + e.n.message,
             e.n.resource, e.n.flavor, e.n.shortfall, now, true);
  // Victims whose pods never started released their quota at once: the preemptor takes
  // it now, before the requeued victims (or anyone else) can be nominated for it again.
  // Kueue leaves this to the next cycle, where a requeued victim may win it back and be
  // preempted again without end; see docs/semantics.md.
  if (FitsNow(node, e.n.assignment.usage) && PlaceTopologyNow(wl, *cq.spec, e.n)) {
    e.cls->inadmissible = false;
    Reserve(wl, e.n, now);
    return true;
  }
  if (!keeps_place) return true;
  // Engine v20: what it needs is held for the rest of the cycle, so no entry after it takes
  // the room its victims free (Kueue's cq.AddUsage before IssuePreemptions). Nominated again
  // with nothing new to evict, it changes nothing, and the batch's cycles end.
  tree_.AddUsage(node, e.n.assignment.usage, +1);
  held->emplace_back(node, e.n.assignment.usage);
  return issued > 0 || wl.pending_message != before;
}

std::pair<const char*, const char*> Engine::PreemptionReason(const ClusterQueueSpec& spec,
                                                             const WorkloadState& preemptor,
                                                             const WorkloadState& victim,
                                                             const Nomination& n,
                                                             size_t index) const {
  if (victim.cluster_queue == preemptor.cluster_queue) {
    return {"InClusterQueue", "prioritization in the ClusterQueue"};
  }
  if (index < n.victim_variants.size()) {
    // Engine v23: the variant the victim was taken as (Kueue's PreemptionReason).
    if (n.victim_variants[index] == kReclaimWhileBorrowing) {
      return {"InCohortReclaimWhileBorrowing", "reclamation within the cohort while borrowing"};
    }
    return {"InCohortReclamation", "reclamation within the cohort"};
  }
  if (config_.fair_sharing) {
    // Engine v16 (Kueue's fairPreemptions): a victim taken by a preemptor within its nominal
    // quota is a reclamation; one taken because of the shares is InCohortFairSharing.
    if (n.reclaim_within_nominal) return {"InCohortReclamation", "reclamation within the cohort"};
    return {"InCohortFairSharing", "Fair Sharing within the cohort"};
  }
  if (batch_version_ >= 9 ? VictimWhileBorrowing(spec, preemptor, victim) : n.assignment.borrows) {
    return {"InCohortReclaimWhileBorrowing", "reclamation within the cohort while borrowing"};
  }
  return {"InCohortReclamation", "reclamation within the cohort"};
}

bool Engine::LeavePending(CycleEntry& e, int node, uint32_t resumes,
                          std::vector<std::pair<int, FrQuantities>>* held, int64_t now) {
  WorkloadState& wl = *e.wl;
  if (e.n.never_fits) {
    Dequeue(wl);
    SetPhase(wl, Phase::kRejected);
    // Kept for the views' REASON (ExceedsMaxQuota, NoMatchingFlavor); decides nothing.
    wl.pending_reason = e.n.reason;
    wl.pending_message = e.n.message;
    SetCondition(wl, ConditionType::kQuotaReserved, false, "Rejected", e.n.message, now);
    Ended(wl, now);
    auto r = NewDecision(current_sequence_).initBody().initRejected();
    Ref(r.initWorkload(), wl);
    r.setReason(e.n.reason);
    r.setMessage(e.n.message);
    return true;
  }
  if (batch_version_ >= 11 && e.n.preempt_without_victims &&
      e.cq->spec->preemption.reclaim_within_cohort != ReclaimPolicy::kAny) {
    HoldCapacity(node, e.n, held);
  }
  if (batch_version_ >= 12) {
    if (KeepFlavorSearch(wl, *e.cq, e.n, resumes)) {
      // Flavors are left to try: nominated again in the next cycle (Kueue requeues it at once
      // when PendingFlavors), not put to sleep.
      SetPending(wl, e.n.reason, e.n.message, e.n.resource, e.n.flavor, e.n.shortfall, now, true);
      return true;
    }
  }
  e.cls->inadmissible = true;
  SetPending(wl, e.n.reason, e.n.message, e.n.resource, e.n.flavor, e.n.shortfall, now, true);
  // Engine v28: a member of the class that waited for its own victims to drain would find
  // what its head found (the same requests and priority; the victims' evictions ended), and it
  // is passed over while its class sleeps: it shows the head's reason, not an eviction that
  // is no longer going on.
  if (batch_version_ >= 28) {
    for (const QueueKey& k : e.cls->members) {
      if (k.wl != &wl && WaitsForVictims(*k.wl)) {
        SetPending(*k.wl, e.n.reason, e.n.message, e.n.resource, e.n.flavor, e.n.shortfall, now,
                   true);
      }
    }
  }
  return true;
}

bool Engine::WaitsForVictims(const WorkloadState& wl) {
  // PreemptForEntry's reason while its victims drain: "Preempting N workload(s)" and/or
  // "Waiting for N workload(s) being evicted", then " to make room: ".
  return wl.phase == Phase::kPending && wl.pending_reason == "Pending" &&
         wl.pending_message.find(" to make room: ") != std::string::npos;
}

}  // namespace admission::projections

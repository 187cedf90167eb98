// Engine: the admission cycle (Kueue's scheduler.schedule), flavor assignment
// (flavorassigner), partial admission (podset reducer) and preemption (preemption.go).

#include <algorithm>

#include "projections/engine.h"
#include "projections/engine_internal.h"
#include "schema/quantity.h"
#include "schema/result.h"

namespace admission::projections {

namespace {

using Mode = NominationMode;

struct FlavorChoice {
  int flavor = -1;
  Mode mode = kNoFit;
  // Kueue's borrowingLevel: 0 without borrowing; since engine v8 the borrowing height
  // (QuotaTree::BorrowingHeight), before it 1 for any borrowing.
  int borrow = 0;
};

// Kueue's preference between two candidate flavors when the search continues (isPreferred):
// the lower borrowing level is better.
bool Better(const FlavorChoice& a, const FlavorChoice& b, FungibilityPreference pref) {
  if (b.flavor < 0) return a.flavor >= 0;
  if (pref == FungibilityPreference::kPreemptionOverBorrowing) {
    if (a.borrow != b.borrow) return a.borrow < b.borrow;
    return a.mode > b.mode;
  }
  if (a.mode != b.mode) return a.mode > b.mode;
  return a.borrow < b.borrow;
}

bool ShouldTryNextFlavor(const FlavorChoice& c, const ClusterQueueSpec& spec) {
  if (c.mode == kFit && c.borrow == 0) return false;
  if (c.mode == kFit && c.borrow > 0 && spec.when_can_borrow == FungibilityAction::kBorrow) {
    return false;
  }
  if (c.mode == kPreempt && spec.when_can_preempt == FungibilityAction::kPreempt) return false;
  return true;
}

}  // namespace


// Flavor assignment for the given pod counts (Kueue: FlavorAssigner.assignFlavors).
std::optional<int> Engine::CoveredPods(const ClusterQueueSpec& spec) const {
  const std::optional<int> pods = resources_.Find("pods");
  if (!pods) return std::nullopt;
  for (const ResourceGroup& g : spec.resource_groups) {
    if (std::find(g.covered.begin(), g.covered.end(), *pods) != g.covered.end()) return pods;
  }
  return std::nullopt;
}

Nomination Engine::AssignFlavors(const WorkloadState& wl, const ClusterQueueSpec& spec,
                                         int cq_node, const std::vector<int32_t>& counts) const {
  Nomination n;
  n.mode = kFit;
  n.assignment.pod_sets.reserve(wl.pod_sets.size());
  std::vector<std::string> messages;
  FrQuantities total;  // usage of the podSets assigned so far
  bool never = false;
  // Engine v7: a ClusterQueue that covers `pods` counts one per pod of each podSet against
  // that flavor's quota, and `pods` is part of the assignment (Kueue's flavor assigner sets
  // the podSet's pods request to its count). A request for `pods` a podSet names itself is
  // replaced by that.
  const std::optional<int> pods = batch_version_ >= 7 ? CoveredPods(spec) : std::nullopt;
  std::map<int, int64_t> with_pods;
  // Quantities in messages: since engine v10 in Kubernetes' canonical form, as Kueue's
  // resource formatter writes them (memory 64Gi, not 68719476736); before, plain units.
  auto Qty = [&](int64_t milli, int r) {
    return batch_version_ >= 10 ? schema::FormatQuantityMilli(milli, resources_.Name(r))
                                : FormatMilli(milli);
  };
  // Engine v12: where each group's search starts (a resumed search), and where the next one
  // would (n.resume); a pod set that finds no flavor ends the recording, as Kueue returns there.
  const FlavorResume* resume = batch_version_ >= 12 ? ValidResume(wl, cq_node) : nullptr;
  bool resume_recording = batch_version_ >= 12;
  if (resume_recording) {
    n.resume.assign(wl.pod_sets.size(), std::vector<int32_t>(spec.resource_groups.size(), 0));
  }
  for (size_t i = 0; i < wl.pod_sets.size(); ++i) {
    const PodSetSpec& ps = wl.pod_sets[i];
    const int32_t count = counts[i];
    if (pods) {
      with_pods = ps.requests;
      with_pods[*pods] = kMilliPerUnit;
    }
    const std::map<int, int64_t>& requests = pods ? with_pods : ps.requests;
    PodSetAssignment psa;
    psa.name = ps.name;
    psa.count = count;
    int ps_mode = kFit;
    std::string ps_message;
    // Every requested resource must be covered by one resource group.
    for (const auto& [res, per_pod] : requests) {
      bool covered = false;
      for (const ResourceGroup& g : spec.resource_groups) {
        covered = covered || std::find(g.covered.begin(), g.covered.end(), res) != g.covered.end();
      }
      if (!covered) {
        ps_mode = kNoFit;
        never = true;
        ps_message = "resource " + resources_.Name(res) + " unavailable in ClusterQueue";
        n.resource = resources_.Name(res);
      }
    }
    for (size_t gi = 0; gi < spec.resource_groups.size(); ++gi) {
      const ResourceGroup& g = spec.resource_groups[gi];
      if (ps_mode == kNoFit) break;
      std::vector<int> wanted;
      for (int r : g.covered) {
        if (requests.count(r) != 0) wanted.push_back(r);
      }
      if (wanted.empty()) continue;
      std::vector<std::string_view> allowed_keys;  // views of the flavors' label keys
      std::vector<const Flavor*> defined(g.flavors.size(), nullptr);  // by position in g.flavors
      for (size_t k = 0; k < g.flavors.size(); ++k) {
        auto f = flavors_.find(flavor_ids_.Name(g.flavors[k].flavor));
        if (f == flavors_.end()) continue;
        defined[k] = &f->second;
        for (const auto& [key, v] : f->second.node_labels) allowed_keys.push_back(key);
      }
      std::sort(allowed_keys.begin(), allowed_keys.end());
      FlavorChoice best;
      std::vector<std::string> reasons;
      bool any_flavor_quota_tried = false;
      bool blocked_for_now = false;
      bool no_match = false;        // some flavor was excluded by selectors or taints
      bool exceeds_max = false;     // some flavor could never hold the request
      // A resumed search skips the flavors before its start: it cannot tell that the
      // workload never fits them, so it never concludes "never fits".
      const size_t start =
          resume != nullptr && i < resume->start.size() && gi < resume->start[i].size()
              ? std::min<size_t>(static_cast<size_t>(resume->start[i][gi]), g.flavors.size())
              : 0;
      bool any_could_ever_fit = start > 0;
      size_t attempted = start;  // the last flavor the search looked at
      for (size_t k = start; k < g.flavors.size(); ++k) {
        attempted = k;
        const FlavorQuotas& fq = g.flavors[k];
        const std::string& fname = flavor_ids_.Name(fq.flavor);
        const Flavor* flavor = defined[k];
        if (flavor == nullptr) {
          reasons.push_back(Cat({"flavor ", fname, " not found"}));
          continue;
        }
        if (!SelectorMatchesFlavor(ps, flavor->node_labels, allowed_keys)) {
          reasons.push_back(Cat({"flavor ", fname, " doesn't match node affinity"}));
          no_match = true;
          continue;
        }
        std::vector<Toleration> tolerations;  // built only when the flavor has taints
        if (!flavor->node_taints.empty()) {
          tolerations = ps.tolerations;
          tolerations.insert(tolerations.end(), flavor->tolerations.begin(),
                             flavor->tolerations.end());
        }
        if (const Taint* t = flavor->node_taints.empty()
                                 ? nullptr
                                 : FindUntoleratedTaint(flavor->node_taints, tolerations)) {
          reasons.push_back(Cat({"untolerated taint ", t->key, t->value.empty() ? "" : "=",
                                 t->value, ":", t->effect, " in flavor ", fname}));
          no_match = true;
          continue;
        }
        if (auto conflict = MaintenanceConflict(wl, fq.flavor, now_ns_)) {
          reasons.push_back(*conflict);
          blocked_for_now = true;  // not "never": the window ends
          continue;
        }
        any_flavor_quota_tried = true;
        FlavorChoice choice{fq.flavor, kFit, false};
        bool ever = true;
        for (int r : wanted) {
          const Fr fr = MakeFr(fq.flavor, r);
          auto tf = total.find(fr);
          const int64_t val = requests.at(r) * count + (tf == total.end() ? 0 : tf->second);
          const int64_t max_capacity = tree_.PotentialAvailable(cq_node, fr);
          // Never fits: even the smallest admissible count exceeds the most this flavor could
          // ever provide.
          const int32_t min_count = ps.min_count > 0 ? ps.min_count : ps.count;
          // A product beyond 64 bits is beyond any capacity too (a minCount above count, sent
          // before intake refused it, could reach it).
          int64_t min_request = 0;
          if (__builtin_mul_overflow(requests.at(r), int64_t{min_count}, &min_request) ||
              min_request > max_capacity) {
            ever = false;
          }
          if (val > max_capacity) {
            choice.mode = kNoFit;
            exceeds_max = true;
            reasons.push_back(Cat({"insufficient quota for ", resources_.Name(r), " in flavor ",
                                   fname, ", request > maximum capacity (", Qty(val, r),
                                   " > ", Qty(max_capacity, r), ")"}));
            if (n.resource.empty()) {
              n.resource = resources_.Name(r);
              n.flavor = fname;
              n.shortfall = val - max_capacity;
            }
            break;
          }
          // Node capacity of the flavor (when nodes were reported) bounds it too.
          const int64_t capacity_left = FlavorCapacityLeft(fq.flavor, r);
          if (val > capacity_left) {
            choice.mode = kNoFit;
            reasons.push_back(Cat({"insufficient node capacity for ", resources_.Name(r),
                                   " in flavor ", fname, ", ", Qty(val - capacity_left, r),
                                   " more needed"}));
            break;
          }
          const bool has_parent = tree_.node(cq_node).parent != -1;
          const bool borrow = has_parent && tree_.Usage(cq_node, fr) + val > tree_.Nominal(cq_node, fr);
          // Engine v8: how far up the cohort tree the quota comes from (hierarchical cohorts).
          const int level = !borrow                ? 0
                            : batch_version_ >= 8 ? std::max(1, tree_.BorrowingHeight(cq_node, fr, val))
                                                  : 1;
          const int64_t available = tree_.Available(cq_node, fr);
          if (val <= available) {
            choice.borrow = std::max(choice.borrow, level);
            continue;
          }
          reasons.push_back(Cat({"insufficient unused quota for ", resources_.Name(r),
                                 " in flavor ", fname, ", ", Qty(val - available, r),
                                 " more needed"}));
          if (n.resource.empty()) {
            n.resource = resources_.Name(r);
            n.flavor = fname;
            n.shortfall = val - std::max<int64_t>(0, available);
          }
          const bool can_preempt_while_borrowing =
              spec.preemption.borrow_within_cohort != ReclaimPolicy::kNever;
          if (val <= tree_.Nominal(cq_node, fr) || (borrow && can_preempt_while_borrowing)) {
            choice.mode = std::min(choice.mode, kPreempt);
            choice.borrow = std::max(choice.borrow, level);
          } else {
            choice.mode = kNoFit;
            break;
          }
        }
        any_could_ever_fit = any_could_ever_fit || ever;
        if (choice.mode == kNoFit) continue;
        if (Better(choice, best, spec.preference)) best = choice;
        if (!ShouldTryNextFlavor(choice, spec)) {
          best = choice;
          break;
        }
      }
      if (!any_could_ever_fit && !blocked_for_now) never = true;
      if (best.flavor < 0) {
        if (resume_recording) {
          std::fill(n.resume[i].begin(), n.resume[i].end(), 0);
          resume_recording = false;
        }
        ps_mode = kNoFit;
        // Kueue sorts the reasons of every flavor tried before joining them.
        std::sort(reasons.begin(), reasons.end());
        // Granular reason: the least severe flavor outcome of the group.
        const std::string group_reason = !exceeds_max && no_match && !any_flavor_quota_tried
                                             ? "NoMatchingFlavor"
                                             : never ? "ExceedsMaxQuota" : "WaitingForQuota";
        if (n.reason == "Pending" || group_reason == "NoMatchingFlavor" ||
            (group_reason == "ExceedsMaxQuota" && n.reason == "WaitingForQuota")) {
          n.reason = group_reason;
        }
        std::string joined;
        for (const std::string& r : reasons) {
          if (!joined.empty()) joined.append(", ");
          joined.append(r);
        }
        ps_message = std::move(joined);
        break;
      }
      ps_mode = std::min(ps_mode, static_cast<int>(best.mode));
      if (best.mode != kFit) {
        std::sort(reasons.begin(), reasons.end());
        for (const std::string& r : reasons) {
          if (!ps_message.empty()) ps_message.append(", ");
          ps_message.append(r);
        }
      }
      if (resume_recording) {
        // Kueue's TriedFlavorIdx: the next search starts after the last flavor looked at,
        // from the first once the last one was.
        n.resume[i][gi] = attempted + 1 >= g.flavors.size() ? 0 : static_cast<int32_t>(attempted + 1);
      }
      n.assignment.borrows = n.assignment.borrows || best.borrow > 0;
      n.borrowing_height = std::max(n.borrowing_height, best.borrow);
      for (int r : wanted) {
        psa.flavors[r] = best.flavor;
        const int64_t amount = requests.at(r) * count;
        psa.usage[r] = amount;
        total[MakeFr(best.flavor, r)] += amount;
      }
    }
    if (ps_mode != kFit) {
      messages.push_back(Cat({"couldn't assign flavors to pod set ", ps.name, ": ", ps_message}));
    }
    n.mode = std::min(n.mode, ps_mode);
    n.assignment.pod_sets.push_back(std::move(psa));
  }
  n.assignment.usage = std::move(total);
  n.never_fits = never;
  for (const std::string& m : messages) {
    if (!n.message.empty()) n.message.append("; ");
    n.message.append(m);
  }
  if (n.mode == kNoFit && never && n.reason != "NoMatchingFlavor") n.reason = "ExceedsMaxQuota";
  if (n.mode != kNoFit && n.reason == "Pending") n.reason = "WaitingForQuota";
  return n;
}

const FlavorResume* Engine::ValidResume(const WorkloadState& wl, int cq_node) const {
  if (!wl.flavor_resume) return nullptr;
  const ClusterQueueState* cq =
      cq_node >= 0 && static_cast<size_t>(cq_node) < cq_by_node_.size() ? cq_by_node_[cq_node]
                                                                       : nullptr;
  if (cq == nullptr || wl.flavor_resume->cq_generation != cq->allocatable_generation ||
      wl.flavor_resume->tree_epoch != tree_epoch_) {
    return nullptr;  // quota was released or redefined since: search from the first flavor
  }
  return &*wl.flavor_resume;
}

uint32_t Engine::FlavorResumesMax(const WorkloadState& wl, const ClusterQueueSpec& spec) {
  size_t flavors = 0;
  for (const ResourceGroup& g : spec.resource_groups) flavors += g.flavors.size();
  return static_cast<uint32_t>(std::min<size_t>(wl.pod_sets.size() * flavors + 1, UINT32_MAX));
}

bool Engine::KeepFlavorSearch(WorkloadState& wl, const ClusterQueueState& cq,
                              const Nomination& n, uint32_t resumes) {
  ADM_CHECK(!wl.flavor_resume, "workload %s keeps two flavor searches", wl.key.c_str());
  bool left = false;
  for (const std::vector<int32_t>& groups : n.resume) {
    for (int32_t start : groups) left = left || start > 0;
  }
  if (!left || resumes >= FlavorResumesMax(wl, *cq.spec)) return false;
  wl.flavor_resume = FlavorResume{n.resume, cq.allocatable_generation, tree_epoch_, resumes + 1};
  if (resumes == 0) resuming_.push_back(wl.key);
  return true;
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
    n.victims = FindVictims(wl, spec, node, n.assignment);
    if (!n.victims.empty()) return n;
  }
  // Partial admission (Kueue's PodSetReducer): shrink every podSet with a minCount by the
  // same fraction of its slack, binary-searching the smallest reduction that fits.
  int64_t total_delta = 0;
  for (const PodSetSpec& ps : wl.pod_sets) {
    if (ps.min_count > 0 && ps.min_count < ps.count) total_delta += ps.count - ps.min_count;
  }
  if (total_delta > 0 && !n.never_fits) {
    auto counts_for = [&](int64_t k) {
      std::vector<int32_t> counts;
      for (const PodSetSpec& ps : wl.pod_sets) {
        int64_t delta = (ps.min_count > 0 && ps.min_count < ps.count) ? ps.count - ps.min_count : 0;
        // Kueue's PodSetReducer: floor(delta_i * k / totalDelta); k == totalDelta is minCount.
        int64_t reduce = delta * k / total_delta;
        counts.push_back(static_cast<int32_t>(ps.count - reduce));
      }
      return counts;
    };
    int64_t lo = 1, hi = total_delta;
    std::optional<Nomination> found;
    while (lo <= hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      Nomination candidate = AssignFlavors(wl, spec, node, counts_for(mid));
      bool fits = candidate.mode == kFit;
      if (candidate.mode == kPreempt) {
        candidate.victims = FindVictims(wl, spec, node, candidate.assignment);
        fits = !candidate.victims.empty();
      }
      if (fits) {
        found = std::move(candidate);
        hi = mid - 1;
      } else {
        lo = mid + 1;
      }
    }
    if (found) {
      found->partial = true;
      return *found;
    }
  }
  if (n.mode == kPreempt) {
    n.mode = kNoFit;  // no victim set frees enough
    n.preempt_without_victims = true;
  }
  return n;
}

// ---------------------------------------------------------------------------------------------
// Preemption (Kueue's classic algorithm: candidates, ordering, minimal set with fill-back).

bool Engine::WorkloadFits(int cq_node, const FrQuantities& request, bool allow_borrowing) const {
  for (const auto& [fr, amount] : request) {
    if (!allow_borrowing && tree_.Usage(cq_node, fr) + amount > tree_.Nominal(cq_node, fr)) {
      return false;
    }
    if (amount > tree_.Available(cq_node, fr)) return false;
  }
  return true;
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

std::vector<WorkloadState*> Engine::FindVictims(const WorkloadState& wl, const ClusterQueueSpec& spec,
                                             int cq_node, const Assignment& assignment) {
  // Flavor-resources where the request does not fit what is available now: ascending, as
  // `assignment.usage` is, and a handful at most, so a vector searched linearly.
  std::vector<Fr> needing;
  for (const auto& [fr, amount] : assignment.usage) {
    if (amount > tree_.Available(cq_node, fr)) needing.push_back(fr);
  }
  if (needing.empty()) return {};
  auto is_needed = [&](Fr fr) { return std::find(needing.begin(), needing.end(), fr) != needing.end(); };
  auto uses_needed = [&](const WorkloadState& w) {
    for (const auto& [fr, amount] : w.admission.usage) {
      if (amount > 0 && is_needed(fr)) return true;
    }
    return false;
  };
  auto borrowing_in_needed = [&](int node) {
    for (Fr fr : needing) {
      if (tree_.Usage(node, fr) > tree_.Nominal(node, fr)) return true;
    }
    return false;
  };

  auto holder_uses_needed = [&](const Holder& h) {
    if (h.single) return h.amount > 0 && is_needed(h.fr);
    return uses_needed(*h.wl);
  };
  struct Candidate {
    WorkloadState* wl;
    const Holder* holder;
    bool same_cq;
    int node;
    int32_t priority;         // copied from *wl for the ordering
    int64_t reserved_at_ns;
  };
  std::vector<Candidate> candidates;
  const ClusterQueueState* own_state = cq_by_node_[static_cast<size_t>(cq_node)];
  const ClusterQueueState& own = own_state != nullptr ? *own_state : cqs_.at(wl.cluster_queue);
  if (spec.preemption.within_cluster_queue != WithinCq::kNever) {
    for (const Holder& h : own.holders) {
      if (!h.evictable || !holder_uses_needed(h)) continue;
      bool lower = h.priority < wl.priority;
      if (spec.preemption.within_cluster_queue == WithinCq::kLowerOrNewerEqualPriority) {
        lower = lower || (h.priority == wl.priority && h.wl->queued_at_ns > wl.queued_at_ns);
      }
      if (lower) candidates.push_back(Candidate{h.wl, &h, true, cq_node, h.priority, h.reserved_at_ns});
    }
  }
  const bool in_cohort = tree_.node(cq_node).parent != -1;
  // Other ClusterQueues' workloads are chosen only when borrowing within the cohort may
  // preempt, under fair sharing, or when the preemptor stays within its nominal quota
  // (reclaim); otherwise the choice below is minimal(same_queue) whatever they are.
  // Whether the ClusterQueue is under its nominal quota. Engine v9: Kueue's
  // queueUnderNominalInResourcesNeedingPreemption (usage below nominal in every flavor-resource
  // that needs preemption); before v9, usage plus the whole request within nominal.
  bool under_nominal = true;
  if (batch_version_ >= 9) {
    for (Fr fr : needing) {
      if (tree_.Usage(cq_node, fr) >= tree_.Nominal(cq_node, fr)) under_nominal = false;
    }
  } else {
    for (const auto& [fr, amount] : assignment.usage) {
      if (tree_.Usage(cq_node, fr) + amount > tree_.Nominal(cq_node, fr)) under_nominal = false;
    }
  }
  const bool cohort_candidates_used = under_nominal || config_.fair_sharing ||
                                      spec.preemption.borrow_within_cohort != ReclaimPolicy::kNever;
  if (in_cohort && cohort_candidates_used &&
      (spec.preemption.reclaim_within_cohort != ReclaimPolicy::kNever ||
       spec.preemption.borrow_within_cohort != ReclaimPolicy::kNever)) {
    for (int other : tree_.ClusterQueuesUnder(tree_.Root(cq_node))) {
      if (other == cq_node || !borrowing_in_needed(other)) continue;
      const ClusterQueueState* other_cq = cq_by_node_[static_cast<size_t>(other)];
      if (other_cq == nullptr) continue;
      for (const Holder& h : other_cq->holders) {
        if (!h.evictable || !holder_uses_needed(h)) continue;
        const WorkloadState& c = *h.wl;
        bool allowed = spec.preemption.reclaim_within_cohort == ReclaimPolicy::kAny ||
                       (spec.preemption.reclaim_within_cohort == ReclaimPolicy::kLowerPriority &&
                        h.priority < wl.priority);
        if (config_.fair_sharing && spec.preemption.reclaim_within_cohort != ReclaimPolicy::kNever &&
            !allowed) {
          // Fair sharing: a queue above the preemptor's share (after its admission) gives back.
          allowed = DominantShare(other, nullptr) > DominantShare(cq_node, &assignment.usage);
        }
        if (spec.preemption.borrow_within_cohort != ReclaimPolicy::kNever &&
            c.priority < wl.priority &&
            (!spec.preemption.max_priority_threshold ||
             c.priority <= *spec.preemption.max_priority_threshold)) {
          allowed = true;
        }
        if (allowed) candidates.push_back(Candidate{h.wl, &h, false, other, h.priority, h.reserved_at_ns});
      }
    }
  }
  if (candidates.empty()) return {};
  // Removing a workload raises what this ClusterQueue may use of a flavor-resource by at most
  // that workload's usage of it (at every level of the quota tree, Available grows by at most
  // the usage removed below it). When all the candidates together cannot cover a shortfall, no
  // victim set exists and the search below would find none: skip it.
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
    if (assignment.usage.at(fr) > tree_.Available(cq_node, fr) + freeable) return {};
  }
  // Kueue's candidatesOrdering: other ClusterQueues first, lower priority first, most
  // recently reserved first, then uid (then namespace/name: a total order).
  auto before = [](const Candidate& a, const Candidate& b) {
    if (a.same_cq != b.same_cq) return !a.same_cq;
    if (a.priority != b.priority) return a.priority < b.priority;
    if (a.reserved_at_ns != b.reserved_at_ns) return a.reserved_at_ns > b.reserved_at_ns;
    if (a.wl->uid != b.wl->uid) return a.wl->uid < b.wl->uid;
    return a.wl->key < b.wl->key;
  };
  // The candidates in that order, sorted lazily: the minimal set is usually a few of the
  // first, so a heap hands them out one by one instead of sorting them all.
  auto after = [&](const Candidate& a, const Candidate& b) { return before(b, a); };
  std::make_heap(candidates.begin(), candidates.end(), after);
  std::vector<Candidate> ordered;
  ordered.reserve(candidates.size());
  auto nth = [&](size_t i) -> const Candidate* {
    while (ordered.size() <= i && !candidates.empty()) {
      std::pop_heap(candidates.begin(), candidates.end(), after);
      ordered.push_back(candidates.back());
      candidates.pop_back();
    }
    return i < ordered.size() ? &ordered[i] : nullptr;
  };

  // Kueue's minimalPreemptions. With `borrow_below` (borrowWithinCohort), a victim of another
  // ClusterQueue at or above that priority may only be taken if the preemptor then fits
  // without borrowing: since engine v9 (as Kueue) taking one forbids borrowing for the rest of
  // the search and the fill-back, and `drop_at_or_above` leaves such workloads out entirely;
  // before v9 only the fit check right after taking it forbade borrowing.
  auto minimal = [&](bool same_queue_only, bool allow_borrowing, std::optional<int32_t> borrow_below,
                     bool drop_at_or_above = false) -> std::vector<Candidate> {
    std::vector<Candidate> targets;
    bool fits = false;
    for (size_t i = 0; const Candidate* next = nth(i); ++i) {
      const Candidate& c = *next;
      if (same_queue_only && !c.same_cq) continue;
      if (!c.same_cq && !borrowing_in_needed(c.node)) continue;
      const bool at_or_above = !c.same_cq && borrow_below && c.wl->priority >= *borrow_below;
      if (at_or_above && drop_at_or_above) continue;
      if (at_or_above && batch_version_ >= 9) allow_borrowing = false;
      bool borrowing_ok = allow_borrowing;
      if (at_or_above) borrowing_ok = false;
      tree_.AddUsage(c.node, c.wl->admission.usage, -1);
      targets.push_back(c);
      if (WorkloadFits(cq_node, assignment.usage, borrowing_ok)) {
        fits = true;
        break;
      }
    }
    if (fits) {
      // Fill back: try returning each target but the last, newest first removed last.
      for (int i = static_cast<int>(targets.size()) - 2; i >= 0; --i) {
        const Candidate& c = targets[static_cast<size_t>(i)];
        tree_.AddUsage(c.node, c.wl->admission.usage, +1);
        if (WorkloadFits(cq_node, assignment.usage, allow_borrowing)) {
          targets.erase(targets.begin() + i);
        } else {
          tree_.AddUsage(c.node, c.wl->admission.usage, -1);
        }
      }
    }
    for (const Candidate& c : targets) tree_.AddUsage(c.node, c.wl->admission.usage, +1);
    if (!fits) return {};
    return targets;
  };

  const bool all_same_queue =
      std::all_of(candidates.begin(), candidates.end(), [](const Candidate& c) { return c.same_cq; });
  std::vector<Candidate> chosen;
  if (all_same_queue) {
    chosen = minimal(false, true, std::nullopt);
  } else if (const std::optional<int32_t> threshold = BorrowWithinCohortBelow(spec, wl)) {
    // Kueue v0.9: while borrowing, only other queues' workloads of strictly lower priority
    // (and at most maxPriorityThreshold) may be preempted. Since engine v9, as Kueue: a
    // ClusterQueue at or above nominal leaves the others out entirely.
    chosen = minimal(false, true, threshold, batch_version_ >= 9 && !under_nominal);
  } else {
    if (under_nominal) chosen = minimal(false, false, std::nullopt);
    if (chosen.empty()) chosen = minimal(true, true, std::nullopt);
  }
  std::vector<WorkloadState*> victims;
  for (const Candidate& c : chosen) victims.push_back(c.wl);
  return victims;
}

// ---------------------------------------------------------------------------------------------
// The cycle.

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
  for (auto& [key, cls] : cq.classes) {
    if (cls.members.empty()) continue;
    // StrictFIFO: the overall head, admissible or not, blocks the queue.
    if (!strict && cls.inadmissible) continue;
    const QueueKey& head = *cls.members.begin();
    if (best == nullptr || HeadBefore(head, *best)) {
      best = &head;
      best_cls = &cls;
    }
  }
  if (best == nullptr) return nullptr;
  if (strict && best_cls->inadmissible && !even_inadmissible) return nullptr;
  if (cls_out != nullptr) *cls_out = best_cls;
  return best->wl;
}

bool Engine::RunCycle(int64_t now) {
  RebuildTreeIfNeeded();
  FlushReactivations();
  struct Entry {
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
  std::vector<Entry> entries;
  entries.reserve(active_.size());  // one per active ClusterQueue at most, as a rule
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
      idle.push_back(active);
      continue;
    }
    // The head, past those of stopped LocalQueues: in Kueue a stopped LocalQueue's workloads
    // are not in the ClusterQueue's queue at all, so they block nothing (engine v4; v3 let
    // such a head end the ClusterQueue's turn in the cycle). Each is marked and told why.
    EquivalenceClass* head_class = nullptr;
    WorkloadState* head = Head(cq, &head_class);
    while (head != nullptr && stopped_local_queues_ > 0) {
      auto lq = lqs_.find(head->local_queue_key);
      if (lq == lqs_.end() || lq->second.stop_policy == StopPolicy::kNone) break;
      head_class->inadmissible = true;
      SetPending(*head, "Inadmissible", "LocalQueue " + head->queue_name + " is stopped", "", "",
                 0, now, true);
      head = Head(cq, &head_class);
    }
    if (head == nullptr) {
      idle.push_back(active);
      continue;
    }
    WorkloadState& wl = *head;
    entries.push_back(Entry{head, &cq, head_class, Nominate(wl, cq), 0, EffectivePriority(wl, now), wl.queued_at_ns,
                            wl.submitted_sequence});
  }
  for (auto name : idle) active_.erase(name);
  if (batch_version_ >= 11) {
    // Engine v11: Kueue nominates a StrictFIFO head again in every cycle, even one that found
    // no victims; such a head holds the capacity it needs in each cycle (below). Ours sleeps
    // until capacity changes, so its hold is taken here, as an entry that only holds.
    for (auto& [cq_name, cq] : cqs_) {
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
      entries.push_back(Entry{head, &cq, head_class, std::move(n), 0, EffectivePriority(*head, now),
                              head->queued_at_ns, head->submitted_sequence, true});
    }
  }
  if (entries.empty()) return false;

  // Kueue's entry order: the lower borrowing level first (not borrowing, then, since engine
  // v8, the lower borrowing height in hierarchical cohorts), then priority, then FIFO
  // timestamp; ties by submission order, then uid (Kueue leaves ties to an unstable sort).
  if (config_.fair_sharing) {
    // Fair sharing: the entry whose ClusterQueue would have the lower weighted dominant
    // share after admitting it goes first.
    for (Entry& e : entries) {
      const int node = NodeOf(*e.cq, e.wl->cluster_queue);
      e.share = DominantShare(node, &e.n.assignment.usage);
    }
  }
  // Sorted through pointers (an Entry is large); the key makes the order total.
  std::vector<Entry*> order;
  order.reserve(entries.size());
  for (Entry& e : entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [&](const Entry* pa, const Entry* pb) {
    const Entry& a = *pa;
    const Entry& b = *pb;
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

  bool changed = false;
  std::set<int> touched_roots;  // cohort trees changed earlier in this cycle
  std::vector<std::pair<int, FrQuantities>> held;  // engine v11: capacity held in this cycle
  const uint64_t held_epoch = tree_epoch_;
  for (Entry* entry : order) {
    Entry& e = *entry;
    WorkloadState& wl = *e.wl;
    ClusterQueueState& cq = *e.cq;
    const int node = NodeOf(cq, wl.cluster_queue);
    const int root = tree_.Root(node);
    if (e.hold_only) {
      HoldCapacity(node, e.n, &held);
      continue;
    }
    // Engine v12: a search is resumed only by the NoFit branch below; any other outcome
    // (admitted, preempting, skipped) starts the next search from the first flavor, as Kueue
    // clears LastAssignment then.
    const uint32_t resumes = wl.flavor_resume ? wl.flavor_resume->resumes : 0;
    wl.flavor_resume.reset();
    if (e.n.mode == kFit) {
      if (tree_.Fits(node, e.n.assignment.usage)) {
        Reserve(wl, e.n, now);
        touched_roots.insert(root);
        changed = true;
      } else {
        // Another workload of the cohort took the room in this cycle: try again next cycle.
        SetPending(wl, "Pending",
                   "Workload no longer fits after processing another workload", "", "", 0, now,
                   false);
      }
      continue;
    }
    if (e.n.mode == kPreempt) {
      if (batch_version_ >= 6 && preempted_in_batch_.count(wl.key) != 0) {
        // Engine v6: preempted earlier at this instant, it preempts nobody before the next
        // batch (Kueue nominates it again only once its eviction was observed).
        e.cls->inadmissible = true;
        held_until_next_batch_.emplace_back(wl.cluster_queue, wl.class_key);
        SetPending(wl, "Pending",
                   "Preempted at this instant; it may preempt in turn from the next cycle: " +
                       e.n.message,
                   e.n.resource, e.n.flavor, e.n.shortfall, now, true);
        changed = true;
        continue;
      }
      if (touched_roots.count(root) != 0) {
        // Earlier entries of this cycle changed this cohort tree, so the victims were chosen
        // on a stale view: choose again against the current state rather than retrying the
        // whole cohort in another cycle.
        if (tree_.Fits(node, e.n.assignment.usage)) {
          Reserve(wl, e.n, now);
          changed = true;
          continue;
        }
        e.n.victims = FindVictims(wl, *cq.spec, node, e.n.assignment);
        if (e.n.victims.empty()) continue;  // retried next cycle
      }
      touched_roots.insert(root);
      // The preemptor waits for the victims' quota. Mark it first: a victim whose pods never
      // started releases at once, and that release must wake the preemptor's class.
      e.cls->inadmissible = true;
      const std::string message =
          "Preempted to accommodate a workload (UID: " + wl.uid + ") due to ";
      for (WorkloadState* victim : e.n.victims) {
        WorkloadState& v = *victim;
        std::string reason, human;
        if (v.cluster_queue == wl.cluster_queue) {
          reason = "InClusterQueue";
          human = "prioritization in the ClusterQueue";
        } else if (config_.fair_sharing) {
          reason = "InCohortFairSharing";
          human = "Fair Sharing within the cohort";
        } else if (batch_version_ >= 9 ? VictimWhileBorrowing(*cq.spec, wl, v)
                                       : e.n.assignment.borrows) {
          reason = "InCohortReclaimWhileBorrowing";
          human = "reclamation within the cohort while borrowing";
        } else {
          reason = "InCohortReclamation";
          human = "reclamation within the cohort";
        }
        if (batch_version_ >= 6) preempted_in_batch_.insert(v.key);
        Evict(v, "Preempted", message + human, reason, &wl, now);
      }
      SetPending(wl, "Pending",
                 "Preempting " + std::to_string(e.n.victims.size()) +
                     " workload(s) to make room: " + e.n.message,
                 e.n.resource, e.n.flavor, e.n.shortfall, now, true);
      changed = true;
      // Victims whose pods never started released their quota at once: the preemptor takes
      // it now, before the requeued victims (or anyone else) can be nominated for it again.
      // Kueue leaves this to the next cycle, where a requeued victim may win it back and be
      // preempted again without end; see docs/semantics.md.
      if (tree_.Fits(node, e.n.assignment.usage)) {
        e.cls->inadmissible = false;
        Reserve(wl, e.n, now);
      }
      continue;
    }
    // NoFit.
    if (e.n.never_fits) {
      Dequeue(wl);
      wl.phase = Phase::kRejected;
      SetCondition(wl, ConditionType::kQuotaReserved, false, "Rejected", e.n.message, now);
      Ended(wl, now);
      auto r = NewDecision(current_sequence_).initBody().initRejected();
      Ref(r.initWorkload(), wl);
      r.setReason(e.n.reason);
      r.setMessage(e.n.message);
      changed = true;
      continue;
    }
    if (batch_version_ >= 11 && e.n.preempt_without_victims &&
        cq.spec->preemption.reclaim_within_cohort != ReclaimPolicy::kAny) {
      HoldCapacity(node, e.n, &held);
    }
    if (batch_version_ >= 12) {
      if (KeepFlavorSearch(wl, cq, e.n, resumes)) {
        // Flavors are left to try: nominated again in the next cycle (Kueue requeues it at once
        // when PendingFlavors), not put to sleep.
        SetPending(wl, e.n.reason, e.n.message, e.n.resource, e.n.flavor, e.n.shortfall, now,
                   true);
        changed = true;
        continue;
      }
    }
    e.cls->inadmissible = true;
    SetPending(wl, e.n.reason, e.n.message, e.n.resource, e.n.flavor, e.n.shortfall, now, true);
    changed = true;
  }
  // The capacity held for entries that found no victims returns at the end of the cycle.
  for (auto it = held.rbegin(); it != held.rend(); ++it) {
    if (held_epoch == tree_epoch_) tree_.AddUsage(it->first, it->second, -1);
  }
  return changed;
}

}  // namespace admission::projections

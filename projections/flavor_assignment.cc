// Flavor assignment (AssignFlavors): for each podSet and resource group, the first flavor (in
// the ClusterQueue's order) whose labels, taints and quota fit, by flavorFungibility; and flavor
// stickiness across cycles (engine v12). Kueue: pkg/scheduler/flavorassigner/flavorassigner.go
// (FlavorAssigner.Assign, assignFlavors, findFlavorForPodSetResource).

#include <algorithm>
#include <string>
#include <vector>

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
  // Kueue's preemptionMode: what `mode` is, finer for kPreempt since engine v23 (its oracle).
  GranularMode granular = kGranularNoFit;
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
    return a.granular > b.granular;
  }
  if (a.granular != b.granular) return a.granular > b.granular;
  return a.borrow < b.borrow;
}

bool ShouldTryNextFlavor(const FlavorChoice& c, const ClusterQueueSpec& spec) {
  // Engine v23: preempting would find nobody here (Kueue's noPreemptionCandidates).
  if (c.granular == kGranularNoCandidates) return true;
  if (c.mode == kFit && c.borrow == 0) return false;
  if (c.mode == kFit && c.borrow > 0 && spec.when_can_borrow == FungibilityAction::kBorrow) {
    return false;
  }
  if (c.mode == kPreempt && spec.when_can_preempt == FungibilityAction::kPreempt) return false;
  return true;
}

}  // namespace

std::optional<int> Engine::CoveredPods(const ClusterQueueSpec& spec) const {
  const std::optional<int> pods = resources_.Find("pods");
  if (!pods) return std::nullopt;
  for (const ResourceGroup& g : spec.resource_groups) {
    if (std::find(g.covered.begin(), g.covered.end(), *pods) != g.covered.end()) return pods;
  }
  return std::nullopt;
}

// One flavor assignment in progress (AssignFlavors): the nomination being built, what the pod
// sets assigned so far use, and where a resumed search starts. Kueue: FlavorAssigner's state.
struct Engine::FlavorSearch {
  FlavorSearch(Engine& e, const WorkloadState& w, const ClusterQueueSpec& s, int node)
      : engine(e), wl(w), spec(s), cq_node(node) {}

  // Not const: the preemption oracle (engine v23) removes victims from the quota tree for a
  // moment, and puts them back.
  Engine& engine;
  const WorkloadState& wl;
  const ClusterQueueSpec& spec;
  const int cq_node;
  Nomination n;
  FrQuantities total;  // usage of the podSets assigned so far
  bool never = false;
  // Engine v7: a ClusterQueue that covers `pods` counts one per pod of each podSet against
  // that flavor's quota, and `pods` is part of the assignment (Kueue's flavor assigner sets
  // the podSet's pods request to its count). A request for `pods` a podSet names itself is
  // replaced by that.
  std::optional<int> pods;
  std::map<int, int64_t> with_pods;
  // Engine v12: where each group's search starts (a resumed search), and where the next one
  // would (n.resume); a pod set that finds no flavor ends the recording, as Kueue returns there.
  const FlavorResume* resume = nullptr;
  bool resume_recording = false;

  // What the flavors of one resource group came to, for the pod set's reason and message.
  struct GroupOutcome {
    std::vector<std::string> reasons;
    bool any_flavor_quota_tried = false;
    bool blocked_for_now = false;
    bool no_match = false;        // some flavor was excluded by selectors or taints
    bool exceeds_max = false;     // some flavor could never hold the request
  };

  // Quantities in messages: since engine v10 in Kubernetes' canonical form, as Kueue's
  // resource formatter writes them (memory 64Gi, not 68719476736); before, plain units.
  std::string Qty(int64_t milli, int r) const {
    return engine.batch_version_ >= 10
               ? schema::FormatQuantityMilli(milli, engine.resources_.Name(r))
               : FormatMilli(milli);
  }
  // Pod set `i` with `count` pods: its assignment and mode, appended to the nomination.
  void AssignPodSet(size_t i, int32_t count);
  // Resource group `gi` for pod set `i`: false when the pod set finds no flavor in it (the
  // pod set then cannot fit: `*ps_mode` is kNoFit, `*ps_message` says why).
  bool AssignGroup(size_t i, size_t gi, const std::map<int, int64_t>& requests, int32_t count,
                   PodSetAssignment* psa, int* ps_mode, std::string* ps_message);
  // No flavor of a resource group holds pod set `i`: the pod set cannot fit, with the reason
  // and message of what its flavors came to.
  void NoFlavorInGroup(size_t i, GroupOutcome* out, int* ps_mode, std::string* ps_message);
  // Whether flavor `k` of the group may hold the pod set at all (node labels, taints, a
  // maintenance window); if not, `g` says why.
  bool FlavorMatches(const PodSetSpec& ps, const ResourceGroup& group, const FlavorQuotas& fq,
                     const Flavor* flavor,
                     const std::vector<std::string_view>& allowed_keys, GroupOutcome* g) const;
  // The quota the flavor offers the wanted resources: fit, preempt (and at which borrowing
  // level) or no fit; `*ever` is false when even the smallest admissible count never fits.
  FlavorChoice QuotaChoice(const PodSetSpec& ps, const FlavorQuotas& fq,
                           const std::vector<int>& wanted, const std::map<int, int64_t>& requests,
                           int32_t count, GroupOutcome* g, bool* ever);
  // The flavor holds `val` of `fr` only by preempting: since engine v23 as Kueue's oracle finds
  // (the mode and the borrowing level after the preemption), before at `level`.
  void Preempt(Fr fr, int64_t val, int level, FlavorChoice* choice) {
    int borrow = level;
    GranularMode granular = kGranularPreempt;
    if (engine.batch_version_ >= 23) {
      granular = engine.SimulatePreemption(wl, spec, cq_node, fr, val, &borrow);
    }
    choice->mode = std::min(choice->mode, kPreempt);
    choice->granular = std::min(choice->granular, granular);
    choice->borrow = std::max(choice->borrow, borrow);
  }
  // Node capacity of the flavor (when nodes bound it) for `val` of resource `r`: false when it
  // never fits (the caller stops: no fit); else *short_of_room is whether preemption must free
  // node room (engine v19; before v19 any shortfall is no fit).
  bool NodeCapacityAllows(int flavor, int r, int64_t val, GroupOutcome* g, bool* short_of_room);
};

// Flavor assignment for the given pod counts (Kueue: FlavorAssigner.assignFlavors).
Nomination Engine::AssignFlavors(const WorkloadState& wl, const ClusterQueueSpec& spec,
                                 int cq_node, const std::vector<int32_t>& counts) {
  FlavorSearch search(*this, wl, spec, cq_node);
  Nomination& n = search.n;
  n.mode = kFit;
  n.assignment.pod_sets.reserve(wl.pod_sets.size());
  search.pods = batch_version_ >= 7 ? CoveredPods(spec) : std::nullopt;
  search.resume = batch_version_ >= 12 ? ValidResume(wl, cq_node) : nullptr;
  search.resume_recording = batch_version_ >= 12;
  if (search.resume_recording) {
    n.resume.assign(wl.pod_sets.size(), std::vector<int32_t>(spec.resource_groups.size(), 0));
  }
  for (size_t i = 0; i < wl.pod_sets.size(); ++i) search.AssignPodSet(i, counts[i]);
  n.assignment.usage = std::move(search.total);
  n.never_fits = search.never;
  PlaceTopology(wl, spec, n);  // engine v26
  if (n.mode == kNoFit && search.never && n.reason != "NoMatchingFlavor") {
    n.reason = "ExceedsMaxQuota";
  }
  if (n.mode != kNoFit && n.reason == "Pending") n.reason = "WaitingForQuota";
  return std::move(n);
}

void Engine::FlavorSearch::AssignPodSet(size_t i, int32_t count) {
  const PodSetSpec& ps = wl.pod_sets[i];
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
      ps_message = "resource " + engine.resources_.Name(res) + " unavailable in ClusterQueue";
      n.resource = engine.resources_.Name(res);
    }
  }
  for (size_t gi = 0; gi < spec.resource_groups.size(); ++gi) {
    if (ps_mode == kNoFit) break;
    if (!AssignGroup(i, gi, requests, count, &psa, &ps_mode, &ps_message)) break;
  }
  if (ps_mode != kFit) {
    // The pod sets' messages, joined with "; " in pod set order.
    if (!n.message.empty()) n.message.append("; ");
    n.message.append(Cat({"couldn't assign flavors to pod set ", ps.name, ": ", ps_message}));
  }
  n.mode = std::min(n.mode, ps_mode);
  n.assignment.pod_sets.push_back(std::move(psa));
}

bool Engine::FlavorSearch::AssignGroup(size_t i, size_t gi, const std::map<int, int64_t>& requests,
                                       int32_t count, PodSetAssignment* psa, int* ps_mode,
                                       std::string* ps_message) {
  const PodSetSpec& ps = wl.pod_sets[i];
  const ResourceGroup& g = spec.resource_groups[gi];
  std::vector<int> wanted;
  for (int r : g.covered) {
    if (requests.count(r) != 0) wanted.push_back(r);
  }
  if (wanted.empty()) return true;
  std::vector<std::string_view> allowed_keys;  // views of the flavors' label keys
  std::vector<const Flavor*> defined(g.flavors.size(), nullptr);  // by position in g.flavors
  for (size_t k = 0; k < g.flavors.size(); ++k) {
    auto f = engine.flavors_.find(engine.flavor_ids_.Name(g.flavors[k].flavor));
    if (f == engine.flavors_.end()) continue;
    defined[k] = &f->second;
    for (const auto& [key, v] : f->second.node_labels) allowed_keys.push_back(key);
  }
  std::sort(allowed_keys.begin(), allowed_keys.end());
  FlavorChoice best;
  GroupOutcome out;
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
    if (!FlavorMatches(ps, g, fq, defined[k], allowed_keys, &out)) continue;
    out.any_flavor_quota_tried = true;
    bool ever = true;
    const FlavorChoice choice = QuotaChoice(ps, fq, wanted, requests, count, &out, &ever);
    any_could_ever_fit = any_could_ever_fit || ever;
    if (choice.mode == kNoFit) continue;
    if (Better(choice, best, spec.preference)) best = choice;
    if (!ShouldTryNextFlavor(choice, spec)) {
      best = choice;
      break;
    }
  }
  if (!any_could_ever_fit && !out.blocked_for_now) never = true;
  if (best.flavor < 0) {
    NoFlavorInGroup(i, &out, ps_mode, ps_message);
    return false;
  }
  std::vector<std::string>& reasons = out.reasons;
  *ps_mode = std::min(*ps_mode, static_cast<int>(best.mode));
  if (best.mode != kFit) {
    std::sort(reasons.begin(), reasons.end());
    for (const std::string& r : reasons) {
      if (!ps_message->empty()) ps_message->append(", ");
      ps_message->append(r);
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
    psa->flavors[r] = best.flavor;
    const int64_t amount = requests.at(r) * count;
    psa->usage[r] = amount;
    total[MakeFr(best.flavor, r)] += amount;
  }
  return true;
}

void Engine::FlavorSearch::NoFlavorInGroup(size_t i, GroupOutcome* out, int* ps_mode,
                                           std::string* ps_message) {
  std::vector<std::string>& reasons = out->reasons;
  if (resume_recording) {
    std::fill(n.resume[i].begin(), n.resume[i].end(), 0);
    resume_recording = false;
  }
  *ps_mode = kNoFit;
  // Kueue sorts the reasons of every flavor tried before joining them.
  std::sort(reasons.begin(), reasons.end());
  // Granular reason: the least severe flavor outcome of the group.
  const bool no_matching = !out->exceeds_max && out->no_match && !out->any_flavor_quota_tried;
  const std::string group_reason = no_matching ? "NoMatchingFlavor"
                                   : never     ? "ExceedsMaxQuota"
                                               : "WaitingForQuota";
  if (n.reason == "Pending" || group_reason == "NoMatchingFlavor" ||
      (group_reason == "ExceedsMaxQuota" && n.reason == "WaitingForQuota")) {
    n.reason = group_reason;
  }
  std::string joined;
  for (const std::string& r : reasons) {
    if (!joined.empty()) joined.append(", ");
    joined.append(r);
  }
  *ps_message = std::move(joined);
}

bool Engine::FlavorSearch::FlavorMatches(const PodSetSpec& ps, const ResourceGroup& group,
                                         const FlavorQuotas& fq, const Flavor* flavor,
                                         const std::vector<std::string_view>& allowed_keys,
                                         GroupOutcome* g) const {
  const std::string& fname = engine.flavor_ids_.Name(fq.flavor);
  if (flavor == nullptr) {
    g->reasons.push_back(Cat({"flavor ", fname, " not found"}));
    return false;
  }
  // Engine v26: a pod set asking for TAS only in a TAS flavor with its level, others never.
  if (std::string tas = engine.TasFlavorMismatch(ps, spec, group, fq.flavor); !tas.empty()) {
    g->reasons.push_back(std::move(tas));
    g->no_match = true;
    return false;
  }
  if (!SelectorMatchesFlavor(ps, flavor->node_labels, allowed_keys)) {
    g->reasons.push_back(Cat({"flavor ", fname, " doesn't match node affinity"}));
    g->no_match = true;
    return false;
  }
  std::vector<Toleration> tolerations;  // built only when the flavor has taints
  if (!flavor->node_taints.empty()) {
    tolerations = ps.tolerations;
    tolerations.insert(tolerations.end(), flavor->tolerations.begin(), flavor->tolerations.end());
  }
  if (const Taint* t = flavor->node_taints.empty()
                           ? nullptr
                           : FindUntoleratedTaint(flavor->node_taints, tolerations)) {
    g->reasons.push_back(Cat({"untolerated taint ", t->key, t->value.empty() ? "" : "=", t->value,
                              ":", t->effect, " in flavor ", fname}));
    g->no_match = true;
    return false;
  }
  if (auto conflict = engine.MaintenanceConflict(wl, fq.flavor, engine.now_ns_)) {
    g->reasons.push_back(*conflict);
    g->blocked_for_now = true;  // not "never": the window ends
    return false;
  }
  return true;
}

FlavorChoice Engine::FlavorSearch::QuotaChoice(const PodSetSpec& ps, const FlavorQuotas& fq,
                                               const std::vector<int>& wanted,
                                               const std::map<int, int64_t>& requests,
                                               int32_t count, GroupOutcome* g, bool* ever) {
  const QuotaTree& tree = engine.tree_;
  const Interner& resources = engine.resources_;
  const std::string& fname = engine.flavor_ids_.Name(fq.flavor);
  FlavorChoice choice{fq.flavor, kFit, kGranularFit, 0};
  const bool oracle = engine.batch_version_ >= 23;
  for (int r : wanted) {
    const Fr fr = MakeFr(fq.flavor, r);
    auto tf = total.find(fr);
    const int64_t val = requests.at(r) * count + (tf == total.end() ? 0 : tf->second);
    const int64_t max_capacity = tree.PotentialAvailable(cq_node, fr);
    // Never fits: even the smallest admissible count exceeds the most this flavor could
    // ever provide.
    const int32_t min_count = ps.min_count > 0 ? ps.min_count : ps.count;
    // A product beyond 64 bits is beyond any capacity too (a minCount above count, sent
    // before intake refused it, could reach it).
    int64_t min_request = 0;
    if (__builtin_mul_overflow(requests.at(r), int64_t{min_count}, &min_request) ||
        min_request > max_capacity) {
      *ever = false;
    }
    if (val > max_capacity) {
      choice.mode = kNoFit;
      g->exceeds_max = true;
      if (oracle) {
        // Engine v23: Kueue v0.17's words, with what earlier pod sets take of the flavor.
        const int64_t assumed = tf == total.end() ? 0 : tf->second;
        g->reasons.push_back(Cat({"insufficient quota for ", resources.Name(r), " in flavor ",
                                  fname, ", previously considered podsets requests (",
                                  Qty(assumed, r), ") + current podset request (",
                                  Qty(val - assumed, r), ") > maximum capacity (",
                                  Qty(max_capacity, r), ")"}));
      } else {
        g->reasons.push_back(Cat({"insufficient quota for ", resources.Name(r), " in flavor ",
                                  fname, ", request > maximum capacity (", Qty(val, r), " > ",
                                  Qty(max_capacity, r), ")"}));
      }
      if (n.resource.empty()) {
        n.resource = resources.Name(r);
        n.flavor = fname;
        n.shortfall = val - max_capacity;
      }
      break;
    }
    // Node capacity of the flavor (when nodes were reported) bounds it too.
    bool node_short = false;
    if (!NodeCapacityAllows(fq.flavor, r, val, g, &node_short)) {
      choice.mode = kNoFit;
      break;
    }
    const bool has_parent = tree.node(cq_node).parent != -1;
    const bool borrow = has_parent && tree.Usage(cq_node, fr) + val > tree.Nominal(cq_node, fr);
    // Engine v23: whether a subtree below the root holds it (Kueue's mayReclaimInHierarchy).
    bool below_root = false;
    // Engine v8: how far up the cohort tree the quota comes from (hierarchical cohorts).
    const int height = tree.BorrowingHeight(cq_node, fr, val, &below_root);
    const int level = !borrow ? 0 : engine.batch_version_ >= 8 ? std::max(1, height) : 1;
    const int64_t available = tree.Available(cq_node, fr);
    if (val <= available && !node_short) {
      choice.borrow = std::max(choice.borrow, level);
      continue;
    }
    if (val <= available) {
      // Engine v19: within quota but short of node capacity: preemption may free it.
      Preempt(fr, val, level, &choice);
      continue;
    }
    g->reasons.push_back(Cat({"insufficient unused quota for ", resources.Name(r), " in flavor ",
                              fname, ", ", Qty(val - available, r), " more needed"}));
    if (n.resource.empty()) {
      n.resource = resources.Name(r);
      n.flavor = fname;
      n.shortfall = val - std::max<int64_t>(0, available);
    }
    // Kueue's canPreemptWhileBorrowing: borrowWithinCohort, or (engine v16) fair sharing with
    // reclaimWithinCohort, where the shares decide whether a borrowing preemptor finds victims.
    const bool can_preempt_while_borrowing =
        spec.preemption.borrow_within_cohort != ReclaimPolicy::kNever ||
        (engine.FairPreemption() && spec.preemption.reclaim_within_cohort != ReclaimPolicy::kNever);
    if (val <= tree.Nominal(cq_node, fr) || (borrow && can_preempt_while_borrowing) ||
        (oracle && below_root)) {
      Preempt(fr, val, level, &choice);
    } else {
      choice.mode = kNoFit;
      break;
    }
  }
  if (choice.mode == kNoFit) choice.granular = kGranularNoFit;
  return choice;
}

bool Engine::FlavorSearch::NodeCapacityAllows(int flavor, int r, int64_t val, GroupOutcome* g,
                                              bool* short_of_room) {
  const Interner& resources = engine.resources_;
  const std::string& fname = engine.flavor_ids_.Name(flavor);
  *short_of_room = false;
  if (engine.batch_version_ < 19) {
    const int64_t capacity_left = engine.FlavorCapacityLeft(flavor, r);
    if (val <= capacity_left) return true;
    g->reasons.push_back(Cat({"insufficient node capacity for ", resources.Name(r), " in flavor ",
                              fname, ", ", Qty(val - capacity_left, r), " more needed"}));
    return false;
  }
  // Engine v19: like quota, what preemption can free (the victim search counts it), unless the
  // healthy nodes cannot hold the request at all.
  const Fr fr = MakeFr(flavor, r);
  const int64_t room = engine.NodeRoom(fr);
  if (val <= room) return true;
  const int64_t nodes = engine.NodeCapacity(fr);
  if (val > nodes) {
    g->reasons.push_back(Cat({"insufficient node capacity for ", resources.Name(r), " in flavor ",
                              fname, ", request > the healthy nodes' capacity (", Qty(val, r),
                              " > ", Qty(nodes, r), ")"}));
    return false;
  }
  *short_of_room = true;
  g->reasons.push_back(Cat({"insufficient node capacity for ", resources.Name(r), " in flavor ",
                            fname, ", ", Qty(val - room, r), " more needed"}));
  if (n.resource.empty()) {
    n.resource = resources.Name(r);
    n.flavor = fname;
    n.shortfall = val - std::max<int64_t>(0, room);
  }
  return true;
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

}  // namespace admission::projections

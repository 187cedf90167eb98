// Topology-aware scheduling: Kueue v0.17's TASFlavorSnapshot (tas.h). Each function names the
// Kueue function it follows; where Kueue iterates a Go map, the order here is the domains'
// values, and Kueue's result never depends on it (its sorts are total).

#include "projections/tas.h"

#include <algorithm>
#include <climits>
#include <tuple>

#include "projections/engine_internal.h"
#include "schema/result.h"

namespace admission::projections {

namespace {

constexpr int64_t kOnePod = 1000;  // milli-units of the pods resource per pod

std::string Quoted(std::string_view s) { return Cat({"\"", s, "\""}); }

bool SliceOnly(const TopologyRequest* r) {
  return r != nullptr && r->required.empty() && r->preferred.empty() && !r->slice_level.empty();
}

}  // namespace

// One findTopologyAssignment call's parameters.
struct TasSnapshot::Scratch {
  const PodSetRequest* ps = nullptr;
  Requests requests;                // per pod, with the pod
  std::optional<Requests> leader;   // the leader's, with the pod
  int32_t count = 0, leader_count = 0, slice_size = 1;
  size_t level = 0, slice_level = 0;
  bool required = false, unconstrained = false, simulate_empty = false;
  // Kueue's requiredReplacementDomain: only leaves under these values count (nullptr: all).
  const std::vector<std::string>* within = nullptr;
  // Kueue's useLeastFreeCapacityAlgorithm (TASProfileMixed, on by default in v0.17).
  bool least_free() const { return unconstrained; }
};

TasSnapshot::TasSnapshot(std::string topology, std::vector<std::string> levels,
                         std::vector<Toleration> flavor_tolerations, int pods,
                         const Interner* names)
    : topology_(std::move(topology)),
      levels_(std::move(levels)),
      tolerations_(std::move(flavor_tolerations)),
      pods_(pods),
      names_(names),
      lowest_is_node_(!levels_.empty() && levels_.back() == kHostnameLabel),
      per_level_(levels_.size()) {}

std::string TasSnapshot::LeafId(const std::vector<std::string>& values) const {
  std::string id;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) id.push_back(',');
    id.append(values[i]);
  }
  return id;
}

void TasSnapshot::AddNode(const Labels& labels, const std::vector<Taint>& taints,
                          const Requests& allocatable, const Requests& non_tas_usage) {
  // Kueue's addNode: a leaf per lowest-level domain (per host when that is the hostname).
  std::vector<std::string> values;
  for (const std::string& level : levels_) values.push_back(labels.at(level));
  const std::string id = lowest_is_node_ ? values.back() : LeafId(values);
  auto [it, added] = leaves_.emplace(id, static_cast<int>(domains_.size()));
  if (added) {
    Domain& leaf = domains_.emplace_back();
    leaf.values = std::move(values);
    if (lowest_is_node_) {
      leaf.labels = labels;
      leaf.taints = taints;
    }
  }
  Domain& leaf = domains_[static_cast<size_t>(it->second)];
  for (const auto& [r, v] : allocatable) leaf.free[r] += v;
  for (const auto& [r, v] : non_tas_usage) leaf.free[r] -= v;
}

void TasSnapshot::Initialize() {
  // Kueue's initialize: parents from the leaves' values, by prefix.
  std::map<std::vector<std::string>, int> index;
  const size_t leaves = domains_.size();
  for (size_t i = 0; i < leaves; ++i) index.emplace(domains_[i].values, static_cast<int>(i));
  for (size_t i = 0; i < leaves; ++i) {
    int child = static_cast<int>(i);
    std::vector<std::string> values = domains_[i].values;
    while (values.size() > 1) {
      values.pop_back();
      auto [it, added] = index.emplace(values, static_cast<int>(domains_.size()));
      if (added) domains_.emplace_back().values = values;
      domains_[static_cast<size_t>(child)].parent = it->second;
      domains_[static_cast<size_t>(it->second)].children.push_back(child);
      if (!added) break;
      child = it->second;
    }
  }
  // Levels and children in the order of their values (the map's).
  for (const auto& [values, d] : index) {
    per_level_[values.size() - 1].push_back(d);
    if (values.size() == 1) roots_.push_back(d);
  }
  for (Domain& d : domains_) {
    std::sort(d.children.begin(), d.children.end(), [this](int a, int b) {
      return domains_[static_cast<size_t>(a)].values < domains_[static_cast<size_t>(b)].values;
    });
  }
}

int TasSnapshot::LeafOf(const TopologyDomain& domain) const {
  auto it = leaves_.find(lowest_is_node_ && !domain.values.empty() ? domain.values.back()
                                                                    : LeafId(domain.values));
  return it == leaves_.end() ? -1 : it->second;
}

void TasSnapshot::AddUsage(const TopologyAssignment& assignment, const Requests& per_pod,
                           int sign) {
  // Kueue's TASFlavorCache.updateUsage; a domain whose node is gone is skipped (addTASUsage).
  for (const TopologyDomain& d : assignment.domains) {
    const int leaf = LeafOf(d);
    if (leaf < 0) continue;
    Requests& usage = domains_[static_cast<size_t>(leaf)].tas_usage;
    for (const auto& [r, v] : per_pod) usage[r] += sign * v * d.count;
    usage[pods_] += sign * kOnePod * d.count;
  }
}

const std::string* TasSnapshot::LevelKey(const TopologyRequest* r) const {
  // Kueue's levelKey, with levelKeyWithImpliedFallback for an implied request (nullptr).
  if (r == nullptr) return &levels_.back();
  if (!r->required.empty()) return &r->required;
  if (!r->preferred.empty()) return &r->preferred;
  if (SliceOnly(r)) return &levels_.front();
  if (r->unconstrained) return &levels_.back();
  return nullptr;
}

std::optional<size_t> TasSnapshot::LevelIndex(std::string_view key) const {
  auto it = std::find(levels_.begin(), levels_.end(), key);
  if (it == levels_.end()) return std::nullopt;
  return static_cast<size_t>(it - levels_.begin());
}

bool TasSnapshot::HasLevel(const TopologyRequest* request) const {
  // Kueue's HasLevel: the main level and, when given, the slice level.
  if (levels_.empty()) return false;
  const std::string* key = LevelKey(request);
  if (key == nullptr || !LevelIndex(*key)) return false;
  return request == nullptr || request->slice_level.empty() || LevelIndex(request->slice_level);
}

int32_t TasSnapshot::CountIn(const Requests& per_pod, const Requests& capacity,
                             int* limiting) const {
  // Kueue's CountInWithLimitingResource: ties go to the resource name first in order.
  std::optional<int32_t> result;
  *limiting = -1;
  for (const auto& [r, v] : per_pod) {
    auto c = capacity.find(r);
    int32_t count = INT32_MAX;
    if (v != 0) {
      if (c == capacity.end()) {
        count = 0;
      } else {
        count = static_cast<int32_t>(std::clamp<int64_t>(c->second / v, INT32_MIN, INT32_MAX));
      }
    }
    if (!result || count < *result ||
        (count == *result && names_->Name(r) < names_->Name(*limiting))) {
      result = count;
      *limiting = r;
    }
  }
  return result.value_or(0);
}

TasSnapshot::Requests TasSnapshot::Remaining(const Domain& leaf, bool simulate_empty,
                                             const std::map<int, Requests>& assumed) const {
  Requests left = leaf.free;
  if (!simulate_empty) {
    for (const auto& [r, v] : leaf.tas_usage) left[r] -= v;
  }
  const int self = static_cast<int>(&leaf - domains_.data());
  if (auto a = assumed.find(self); a != assumed.end()) {
    for (const auto& [r, v] : a->second) left[r] -= v;
  }
  return left;
}

bool TasSnapshot::LeafExcluded(const Domain& leaf, const PodSetRequest& ps,
                               Exclusions* ex) const {
  // Kueue's fillInCounts checks 1-3, made only when the lowest level is the node.
  if (!lowest_is_node_) return false;
  std::vector<Toleration> tolerations;
  if (ps.tolerations != nullptr) tolerations = *ps.tolerations;
  tolerations.insert(tolerations.end(), tolerations_.begin(), tolerations_.end());
  if (const Taint* t = FindUntoleratedTaint(leaf.taints, tolerations)) {
    ++ex->taints[t->value.empty() ? Cat({t->key, ":", t->effect})
                                  : Cat({t->key, "=", t->value, ":", t->effect})];
    return true;
  }
  if (ps.node_selector != nullptr) {
    for (const auto& [k, v] : *ps.node_selector) {
      auto it = leaf.labels.find(k);
      if (it == leaf.labels.end() || it->second != v) {
        ++ex->node_selector;
        return true;
      }
    }
  }
  if (ps.affinity != nullptr && !ps.affinity->empty()) {
    for (const Requirement& r : *ps.affinity) {
      if (!RequirementMatches(r, leaf.labels)) {
        ++ex->affinity;
        return true;
      }
    }
  }
  return false;
}

void TasSnapshot::FillInCounts(const Scratch& s, const std::map<int, Requests>& assumed,
                               Exclusions* ex) {
  // Kueue's fillInCounts: phase 1, the pods (and slices) each domain holds, bottom up.
  for (Domain& d : domains_) d.state = d.slice_state = d.state_with_leader =
      d.slice_state_with_leader = d.leader_state = 0;
  for (const auto& [id, index] : leaves_) {
    Domain& leaf = domains_[static_cast<size_t>(index)];
    ++ex->total;
    if (LeafExcluded(leaf, *s.ps, ex)) continue;
    if (s.within != nullptr &&
        !std::equal(s.within->begin(), s.within->end(), leaf.values.begin())) {
      ++ex->domain;  // Kueue's belongsToRequiredDomain
      continue;
    }
    Requests left = Remaining(leaf, s.simulate_empty, assumed);
    int limiting = -1;
    leaf.state = CountIn(s.requests, left, &limiting);
    if (leaf.state == 0 && limiting >= 0) ++ex->resources[names_->Name(limiting)];
    leaf.leader_state = 0;
    if (s.leader) {
      int ignored = -1;
      if (CountIn(*s.leader, left, &ignored) > 0) {
        leaf.leader_state = 1;
        for (const auto& [r, v] : *s.leader) left[r] -= v;
      }
    }
    int ignored = -1;
    leaf.state_with_leader = CountIn(s.requests, left, &ignored);
  }
  for (int root : roots_) FillInCountsHelper(root, s.slice_size, s.slice_level, 0);
}

void TasSnapshot::FillInCountsHelper(int index, int32_t slice_size, size_t slice_level,
                                     size_t level) {
  Domain& d = domains_[static_cast<size_t>(index)];
  if (d.children.empty()) {
    if (level == slice_level) {
      d.slice_state = d.state / slice_size;
      d.slice_state_with_leader = d.state_with_leader / slice_size;
    }
    return;
  }
  int32_t children = 0, slices = 0, leader = 0;
  int32_t min_diff = INT32_MAX, min_slice_diff = INT32_MAX;
  for (int c : d.children) {
    FillInCountsHelper(c, slice_size, slice_level, level + 1);
    const Domain& child = domains_[static_cast<size_t>(c)];
    children += child.state;
    slices += child.slice_state;
    min_diff = std::min(child.state - child.state_with_leader, min_diff);
    min_slice_diff = std::min(child.slice_state - child.slice_state_with_leader, min_slice_diff);
    leader = std::max(child.leader_state, leader);
  }
  d.state = children;
  d.state_with_leader = children - min_diff;
  d.leader_state = leader;
  int32_t slices_with_leader = slices - min_slice_diff;
  if (level == slice_level) {
    slices = d.state / slice_size;
    slices_with_leader = d.state_with_leader / slice_size;
  }
  d.slice_state = slices;
  d.slice_state_with_leader = slices_with_leader;
}

std::vector<int> TasSnapshot::Sorted(std::vector<int> domains, bool unconstrained) const {
  // Kueue's sortedDomains: slices (descending for BestFit, ascending for LeastFreeCapacity),
  // then pods ascending, then values.
  std::sort(domains.begin(), domains.end(), [&](int ia, int ib) {
    const Domain& a = domains_[static_cast<size_t>(ia)];
    const Domain& b = domains_[static_cast<size_t>(ib)];
    if (a.slice_state != b.slice_state) {
      return unconstrained ? a.slice_state < b.slice_state : a.slice_state > b.slice_state;
    }
    if (a.state != b.state) return a.state < b.state;
    return a.values < b.values;
  });
  return domains;
}

std::vector<int> TasSnapshot::SortedWithLeader(std::vector<int> domains,
                                               bool unconstrained) const {
  // Kueue's sortedDomainsWithLeader: leaders first, then as Sorted with the leader's room.
  std::sort(domains.begin(), domains.end(), [&](int ia, int ib) {
    const Domain& a = domains_[static_cast<size_t>(ia)];
    const Domain& b = domains_[static_cast<size_t>(ib)];
    if (a.leader_state != b.leader_state) return a.leader_state > b.leader_state;
    if (a.slice_state_with_leader != b.slice_state_with_leader) {
      return unconstrained ? a.slice_state_with_leader < b.slice_state_with_leader
                           : a.slice_state_with_leader > b.slice_state_with_leader;
    }
    if (a.state_with_leader != b.state_with_leader) {
      return a.state_with_leader < b.state_with_leader;
    }
    return a.values < b.values;
  });
  return domains;
}

int TasSnapshot::BestFit(const std::vector<int>& domains, int32_t needed, bool slices,
                         bool leader) const {
  // Kueue's findBestFitDomainBy: the first domain with the least room that still holds
  // `needed`, else the first.
  const auto room = [&](int i) {
    const Domain& d = domains_[static_cast<size_t>(i)];
    if (slices) return leader ? d.slice_state_with_leader : d.slice_state;
    return leader ? d.state_with_leader : d.state;
  };
  int best = domains.front();
  for (int d : domains) {
    if (room(d) >= needed && room(d) < room(best)) best = d;
  }
  return best;
}

std::string TasSnapshot::Exclusions::Format() const {
  std::vector<std::string> reasons;
  if (node_selector > 0) reasons.push_back("nodeSelector: " + std::to_string(node_selector));
  if (affinity > 0) reasons.push_back("affinity: " + std::to_string(affinity));
  if (domain > 0) reasons.push_back("topologyDomain: " + std::to_string(domain));
  for (const auto& [t, n] : taints) reasons.push_back(Cat({"taint ", Quoted(t), ": "}) + std::to_string(n));
  for (const auto& [r, n] : resources) {
    reasons.push_back(Cat({"resource ", Quoted(r), ": "}) + std::to_string(n));
  }
  std::sort(reasons.begin(), reasons.end());
  std::string out;
  for (const std::string& r : reasons) out.append(out.empty() ? "" : ", ").append(r);
  return out;
}

std::string TasSnapshot::NotFit(int32_t fit, int32_t total, int32_t slice_size,
                                const Exclusions& ex) const {
  // Kueue's notFitMessage.
  const std::string unit = slice_size == 1 ? "pod" : "slice";
  std::string out =
      fit == 0 ? Cat({"topology ", Quoted(topology_), " doesn't allow to fit any of ",
                      std::to_string(total), " ", unit, "(s)"})
               : Cat({"topology ", Quoted(topology_), " allows to fit only ", std::to_string(fit),
                      " out of ", std::to_string(total), " ", unit, "(s)"});
  const bool excluded = ex.node_selector > 0 || ex.affinity > 0 || ex.domain > 0 ||
                        !ex.taints.empty() || !ex.resources.empty();
  if (excluded) {
    out += Cat({". Total nodes: ", std::to_string(ex.total), "; excluded: ", ex.Format()});
  }
  return out;
}

int TasSnapshot::FindLevel(const Scratch& s, size_t level, std::vector<int>* fit,
                           std::string* reason, const Exclusions& ex) {
  // Kueue's findLevelWithFitDomains: phase 2a, the level and its domains that hold the pods.
  const std::vector<int>& at = per_level_[level];
  if (at.empty()) {
    *reason = "no topology domains at level: " + levels_[level];
    return -1;
  }
  const bool lfc = s.least_free();
  const std::vector<int> sorted = SortedWithLeader(at, s.unconstrained);
  const int32_t slices = s.count / s.slice_size;
  const auto D = [this](int i) -> Domain& { return domains_[static_cast<size_t>(i)]; };
  int top = sorted.front();
  if (!lfc && D(top).slice_state_with_leader >= slices && D(top).leader_state >= s.leader_count) {
    top = BestFit(sorted, slices, true, s.leader_count > 0);
  }
  if (lfc) {
    for (int d : sorted) {
      if (D(d).slice_state >= slices) {
        *fit = {d};
        return static_cast<int>(level);
      }
    }
    if (s.required) {
      *reason = NotFit(D(sorted.back()).state, slices, s.slice_size, ex);
      return -1;
    }
  }
  if (D(top).slice_state_with_leader >= slices && D(top).leader_state >= s.leader_count) {
    *fit = {top};
    return static_cast<int>(level);
  }
  if (s.required) {
    *reason = NotFit(D(top).slice_state, slices, s.slice_size, ex);
    return -1;
  }
  if (level > 0 && !s.unconstrained) return FindLevel(s, level - 1, fit, reason, ex);
  return Spread(s, level, sorted, fit, reason, ex);
}

int TasSnapshot::Spread(const Scratch& s, size_t level, const std::vector<int>& sorted,
                        std::vector<int>* fit, std::string* reason, const Exclusions& ex) {
  // The rest of findLevelWithFitDomains: over several domains of the top level tried, leaders
  // first, then the workers by their room.
  const bool lfc = s.least_free();
  const auto D = [this](int i) -> Domain& { return domains_[static_cast<size_t>(i)]; };
  const int32_t slices = s.count / s.slice_size;
  int32_t slices_left = slices, leaders_left = s.leader_count;
  std::vector<int> results;
  size_t idx = 0;
  for (; leaders_left > 0 && idx < sorted.size() && D(sorted[idx]).leader_state > 0; ++idx) {
    int d = sorted[idx];
    if (!lfc && D(d).slice_state_with_leader >= slices_left) {
      d = BestFit(std::vector<int>(sorted.begin() + static_cast<std::ptrdiff_t>(idx), sorted.end()),
                  slices_left, true, leaders_left > 0);
    }
    results.push_back(d);
    leaders_left -= D(d).leader_state;
    slices_left -= D(d).slice_state_with_leader;
  }
  if (leaders_left > 0) {
    *reason = NotFit(s.leader_count - leaders_left, slices, s.slice_size, ex);
    return -1;
  }
  const std::vector<int> rest = Sorted(
      std::vector<int>(sorted.begin() + static_cast<std::ptrdiff_t>(idx), sorted.end()),
      s.unconstrained);
  for (size_t i = 0; slices_left > 0 && i < rest.size(); ++i) {
    int d = rest[i];
    if (!lfc && D(d).slice_state >= slices_left) {
      d = BestFit(std::vector<int>(rest.begin() + static_cast<std::ptrdiff_t>(i), rest.end()),
                  slices_left, true, false);
    }
    results.push_back(d);
    slices_left -= D(d).slice_state;
  }
  if (slices_left > 0) {
    *reason = NotFit(slices - slices_left, slices, s.slice_size, ex);
    return -1;
  }
  *fit = std::move(results);
  return static_cast<int>(level);
}

bool TasSnapshot::ConsumeWithLeaders(int& d, const std::vector<int>& rest, int32_t* remaining,
                                     int32_t* leaders, bool unconstrained, int32_t slice_size,
                                     bool slices) {
  // Kueue's consumeWithLeadersGeneric, field for field.
  const auto with_leader = [&]() -> int32_t& {
    Domain& x = domains_[static_cast<size_t>(d)];
    return slices ? x.slice_state_with_leader : x.state_with_leader;
  };
  const auto primary = [&]() -> int32_t& {
    Domain& x = domains_[static_cast<size_t>(d)];
    return slices ? x.slice_state : x.state;
  };
  const auto leader_state = [&]() -> int32_t& {
    return domains_[static_cast<size_t>(d)].leader_state;
  };
  if (!unconstrained && with_leader() >= *remaining && leader_state() >= *leaders) {
    d = BestFit(rest, *remaining, slices, *leaders > 0);
  }
  if (with_leader() >= *remaining && leader_state() >= *leaders) {
    primary() = *remaining;
    leader_state() = *leaders;
    domains_[static_cast<size_t>(d)].state = *remaining * slice_size;
    return true;
  }
  if (slices) {
    with_leader() = std::min(with_leader(), *remaining);
    leader_state() = std::min(leader_state(), *leaders);
    domains_[static_cast<size_t>(d)].state = with_leader() * slice_size;
    *leaders -= leader_state();
    *remaining -= with_leader();
    return false;
  }
  *remaining -= with_leader();
  *leaders -= leader_state();
  with_leader() = std::min(with_leader(), *remaining);
  leader_state() = std::min(leader_state(), *leaders);
  return false;
}

std::vector<int> TasSnapshot::UpdateCountsToMinimum(std::vector<int> domains, int32_t count,
                                                    int32_t leader_count, int32_t slice_size,
                                                    bool unconstrained, bool slices) {
  // Kueue's updateCountsToMinimumGeneric: phase 2b, as few domains as hold the pods.
  std::vector<int> result;
  int32_t remaining = slices ? count / slice_size : count;
  int32_t leaders = leader_count;
  for (size_t i = 0; i < domains.size(); ++i) {
    int d = domains[i];
    const std::vector<int> rest(domains.begin() + static_cast<std::ptrdiff_t>(i), domains.end());
    if (leaders > 0) {
      const bool done = slices ? ConsumeWithLeaders(d, rest, &remaining, &leaders, unconstrained,
                                                    slice_size, true)
                               : ConsumeWithLeaders(d, rest, &remaining, &leaders, unconstrained,
                                                    1, false);
      result.push_back(d);
      if (done) return result;
      continue;
    }
    Domain* x = &domains_[static_cast<size_t>(d)];
    const int32_t room = slices ? x->slice_state : x->state;
    if (!unconstrained && room >= remaining) {
      d = BestFit(rest, remaining, slices, false);
      x = &domains_[static_cast<size_t>(d)];
    }
    x->leader_state = 0;
    if (slices) {
      if (x->slice_state >= remaining) {
        x->state = remaining * slice_size;
        x->slice_state = remaining;
        result.push_back(d);
        return result;
      }
      x->state = x->slice_state * slice_size;
      remaining -= x->slice_state;
    } else {
      if (x->state >= remaining) {
        x->state = remaining;
        result.push_back(d);
        return result;
      }
      remaining -= x->state;
    }
    result.push_back(d);
  }
  // Kueue logs "code assumptions violated" and returns nil: no domain is assigned.
  return {};
}

TopologyAssignment TasSnapshot::Build(std::vector<std::pair<int, int32_t>> domains) const {
  // Kueue's buildAssignment: domains by their values; only the hostname when it is a level.
  std::sort(domains.begin(), domains.end(), [this](const auto& a, const auto& b) {
    return domains_[static_cast<size_t>(a.first)].values <
           domains_[static_cast<size_t>(b.first)].values;
  });
  const size_t from = lowest_is_node_ ? levels_.size() - 1 : 0;
  TopologyAssignment out;
  out.levels.assign(levels_.begin() + static_cast<std::ptrdiff_t>(from), levels_.end());
  for (const auto& [d, count] : domains) {
    if (count == 0) continue;
    const std::vector<std::string>& v = domains_[static_cast<size_t>(d)].values;
    out.domains.push_back(
        TopologyDomain{std::vector<std::string>(v.begin() + static_cast<std::ptrdiff_t>(from),
                                                v.end()),
                       count});
  }
  return out;
}

namespace {

void AddAssumed(std::map<int, TasSnapshot::Requests>* assumed, int leaf,
                const TasSnapshot::Requests& per_pod, int32_t count) {
  // Kueue's addAssumedUsage: the pods' requests, without the pods themselves.
  TasSnapshot::Requests& a = (*assumed)[leaf];
  for (const auto& [r, v] : per_pod) a[r] += v * count;
}

}  // namespace

std::optional<std::string> TasSnapshot::Prepare(const PodSetRequest& workers,
                                                const PodSetRequest* leader, Scratch* s) const {
  // The parameters of Kueue's findTopologyAssignment, or why there are none.
  const TopologyRequest* r = workers.request;
  s->ps = &workers;
  s->requests = workers.per_pod;
  s->requests[pods_] += kOnePod;
  if (leader != nullptr) {
    s->leader = leader->per_pod;
    (*s->leader)[pods_] += kOnePod;
    s->leader_count = 1;
  }
  s->count = workers.count;
  // getSliceSizeWithSinglePodAsDefault
  if (r != nullptr && !r->slice_level.empty()) {
    if (r->slice_size <= 0) return "slice topology requested, but slice size not provided";
    s->slice_size = r->slice_size;
  }
  s->required = r != nullptr && !r->required.empty();
  s->unconstrained = r == nullptr || r->unconstrained || SliceOnly(r);
  const std::string* key = LevelKey(r);
  if (key == nullptr) return "topology level not specified";
  const std::string& slice_key =
      r != nullptr && !r->slice_level.empty() ? r->slice_level : levels_.back();
  const std::optional<size_t> level = LevelIndex(*key);
  if (!level) return "no requested topology level: " + *key;
  const std::optional<size_t> slice_level = LevelIndex(slice_key);
  if (!slice_level) return "no requested topology level for slices: " + slice_key;
  if (*level > *slice_level) {
    return Cat({"podset slice topology ", slice_key, " is above the podset topology ", *key});
  }
  s->level = *level;
  s->slice_level = *slice_level;
  return std::nullopt;
}

std::map<std::string, TopologyAssignment> TasSnapshot::FindOne(
    const PodSetRequest& workers, const PodSetRequest* leader,
    const std::map<int, Requests>& assumed, bool simulate_empty, std::string* reason,
    const std::vector<std::string>* within) {
  // Kueue's findTopologyAssignment.
  Scratch s;
  s.simulate_empty = simulate_empty;
  s.within = within;
  if (std::optional<std::string> why = Prepare(workers, leader, &s)) {
    *reason = *why;
    return {};
  }
  Exclusions ex;
  FillInCounts(s, assumed, &ex);
  std::vector<int> fit;
  const int fit_level = FindLevel(s, s.level, &fit, reason, ex);
  if (fit_level < 0) return {};
  fit = UpdateCountsToMinimum(fit, s.count, s.leader_count, s.slice_size, s.unconstrained, true);
  size_t level = static_cast<size_t>(fit_level);
  for (; level < std::min(levels_.size() - 1, s.slice_level); ++level) {
    std::vector<int> lower;
    for (int d : fit) {
      const std::vector<int>& c = domains_[static_cast<size_t>(d)].children;
      lower.insert(lower.end(), c.begin(), c.end());
    }
    fit = UpdateCountsToMinimum(Sorted(lower, s.unconstrained), s.count, s.leader_count,
                                s.slice_size, s.unconstrained, true);
  }
  for (; level + 1 < levels_.size(); ++level) {
    std::vector<int> next;
    for (int d : fit) {
      const Domain& parent = domains_[static_cast<size_t>(d)];
      std::vector<int> part = UpdateCountsToMinimum(Sorted(parent.children, s.unconstrained),
                                                    parent.state, parent.leader_state, 1,
                                                    s.unconstrained, false);
      next.insert(next.end(), part.begin(), part.end());
    }
    fit = std::move(next);
  }
  std::map<std::string, TopologyAssignment> out;
  std::vector<std::pair<int, int32_t>> workers_at, leaders_at;
  for (int d : fit) {
    const Domain& x = domains_[static_cast<size_t>(d)];
    if (leader != nullptr && x.leader_state > 0) leaders_at.emplace_back(d, x.leader_state);
    if (leader == nullptr || x.state > 0) workers_at.emplace_back(d, x.state);
  }
  if (leader != nullptr) out[leader->name] = Build(std::move(leaders_at));
  out[workers.name] = Build(std::move(workers_at));
  return out;
}

TasSnapshot::Outcome TasSnapshot::Find(const std::vector<PodSetRequest>& requests,
                                       bool simulate_empty) {
  // Kueue's FindTopologyAssignmentsForFlavor: pod sets of one group name placed together.
  Outcome out;
  std::vector<std::vector<const PodSetRequest*>> groups;
  std::map<std::string, size_t> by_name;
  for (const PodSetRequest& ps : requests) {
    const bool grouped = ps.request != nullptr && !ps.request->group.empty();
    if (!grouped) {
      groups.push_back({&ps});
      continue;
    }
    auto [it, added] = by_name.emplace(ps.request->group, groups.size());
    if (added) groups.emplace_back();
    groups[it->second].push_back(&ps);
  }
  std::map<int, Requests> assumed;
  for (const std::vector<const PodSetRequest*>& g : groups) {
    const PodSetRequest* workers = g[0];
    const PodSetRequest* leader = nullptr;
    if (g.size() > 1) {
      leader = g[1];
      if (leader->count > workers->count) std::swap(leader, workers);
    }
    std::string reason;
    std::map<std::string, TopologyAssignment> found =
        FindOne(*workers, leader, assumed, simulate_empty, &reason);
    if (!reason.empty()) {
      out.failed_pod_set = g[0]->name;
      out.reason = std::move(reason);
      return out;
    }
    for (const PodSetRequest* ps : g) {
      const TopologyAssignment& a = found[ps->name];
      for (const TopologyDomain& d : a.domains) AddAssumed(&assumed, LeafOf(d), ps->per_pod, d.count);
      out.assignments[ps->name] = a;
    }
  }
  return out;
}

std::optional<TopologyAssignment> TasSnapshot::Replace(const PodSetRequest& request,
                                                       const TopologyAssignment& existing,
                                                       const std::string& failed_host,
                                                       std::string* reason) {
  // Kueue's deleteDomain, IsTopologyAssignmentStale, requiredReplacementDomain, then
  // findTopologyAssignment for the pods lost, and mergeTopologyAssignments.
  if (!lowest_is_node_ || existing.levels.size() != 1) {
    *reason = "cannot replace node " + failed_host + ": the topology has no hostname level";
    return std::nullopt;
  }
  TopologyAssignment kept{existing.levels, {}};
  PodSetRequest lost = request;
  lost.count = 0;
  for (const TopologyDomain& d : existing.domains) {
    if (d.values.back() == failed_host) lost.count += d.count;
    else kept.domains.push_back(d);
  }
  for (const TopologyDomain& d : kept.domains) {
    if (LeafOf(d) < 0) {
      *reason = "Cannot replace the node, because the existing topologyAssignment is invalid, "
                "as it contains the stale domain " + d.values.back();
      return std::nullopt;
    }
  }
  if (request.request != nullptr && !request.request->slice_level.empty() &&
      request.request->slice_size > 1) {
    *reason = "cannot replace node " + failed_host + ": slices are not replaced";
    return std::nullopt;
  }
  std::vector<std::string> within;
  const std::string* key = LevelKey(request.request);
  const bool required = request.request != nullptr && !request.request->required.empty();
  if (required && key != nullptr && !kept.domains.empty()) {
    const Domain& first = domains_[static_cast<size_t>(LeafOf(kept.domains.front()))];
    within.assign(first.values.begin(),
                  first.values.begin() + static_cast<std::ptrdiff_t>(*LevelIndex(*key) + 1));
  }
  std::map<int, Requests> assumed;
  std::string why;
  std::map<std::string, TopologyAssignment> found =
      FindOne(lost, nullptr, assumed, false, &why, within.empty() ? nullptr : &within);
  if (!why.empty() || found[lost.name].domains.empty()) {
    *reason = why.empty() ? "cannot find replacement assignment for unhealthy node: " + failed_host
                          : why;
    return std::nullopt;
  }
  std::map<std::vector<std::string>, int32_t> merged;
  for (const TopologyDomain& d : kept.domains) merged[d.values] += d.count;
  for (const TopologyDomain& d : found[lost.name].domains) merged[d.values] += d.count;
  TopologyAssignment out{existing.levels, {}};
  for (const auto& [values, count] : merged) out.domains.push_back(TopologyDomain{values, count});
  return out;
}

bool TasSnapshot::Fits(const TopologyAssignment& assignment, const Requests& per_pod) const {
  // Kueue's Fits (what an earlier entry of the cycle took is in the usage now).
  Requests with_pod = per_pod;
  with_pod[pods_] += kOnePod;
  for (const TopologyDomain& d : assignment.domains) {
    const int leaf = LeafOf(d);
    if (leaf < 0) return false;
    int ignored = -1;
    if (CountIn(with_pod, Remaining(domains_[static_cast<size_t>(leaf)], false, {}), &ignored) <
        d.count) {
      return false;
    }
  }
  return true;
}

std::vector<TasSnapshot::DomainRoom> TasSnapshot::DomainRooms(size_t level,
                                                              const Requests& per_pod) const {
  std::vector<DomainRoom> out;
  if (level >= per_level_.size()) return out;
  Requests with_pod = per_pod;
  with_pod[pods_] += kOnePod;
  std::map<int, int32_t> held;  // domain -> pods
  for (const auto& [id, leaf] : leaves_) {
    int ignored = -1;
    const int32_t n = CountIn(with_pod, Remaining(domains_[static_cast<size_t>(leaf)], false, {}),
                              &ignored);
    for (int d = leaf; d >= 0; d = domains_[static_cast<size_t>(d)].parent) held[d] += n;
  }
  for (int d : per_level_[level]) {
    out.push_back(DomainRoom{domains_[static_cast<size_t>(d)].values.back(), held[d]});
  }
  return out;
}

}  // namespace admission::projections

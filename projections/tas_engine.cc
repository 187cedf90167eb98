// Topology-aware scheduling in the decider (engine v26, docs/tas.md): Topology definitions, the
// flavors' snapshots, flavor matching and the placement step of the flavor assignment. Kueue:
// pkg/scheduler/flavorassigner/tas_flavorassigner.go and the TAS step of assignFlavors.

#include <algorithm>
#include <set>

#include "projections/engine.h"
#include "projections/engine_internal.h"
#include "schema/result.h"

namespace admission::projections {

TopologyAssignment ToTopologyAssignment(schema::TopologyAssignment::Reader in) {
  TopologyAssignment out;
  for (auto l : in.getLevels()) out.levels.emplace_back(View(l));
  for (auto d : in.getDomains()) {
    TopologyDomain domain;
    for (auto v : d.getValues()) domain.values.emplace_back(View(v));
    domain.count = d.getCount();
    out.domains.push_back(std::move(domain));
  }
  return out;
}

void SetTopologyAssignment(const TopologyAssignment& a, schema::TopologyAssignment::Builder b) {
  auto levels = b.initLevels(static_cast<unsigned>(a.levels.size()));
  for (size_t i = 0; i < a.levels.size(); ++i) levels.set(static_cast<unsigned>(i), Txt(a.levels[i]));
  auto domains = b.initDomains(static_cast<unsigned>(a.domains.size()));
  for (size_t i = 0; i < a.domains.size(); ++i) {
    auto d = domains[static_cast<unsigned>(i)];
    const TopologyDomain& domain = a.domains[i];
    auto values = d.initValues(static_cast<unsigned>(domain.values.size()));
    for (size_t j = 0; j < domain.values.size(); ++j) {
      values.set(static_cast<unsigned>(j), Txt(domain.values[j]));
    }
    d.setCount(domain.count);
  }
}

void Engine::DefineTopology(schema::TopologyDef::Reader def) {
  std::vector<std::string> levels;
  for (auto l : def.getLevels()) levels.emplace_back(View(l));
  topologies_[std::string(View(def.getName()))] = std::move(levels);
  DefinitionsChanged();
}

void Engine::NodeTopologyChanged(schema::NodeCapacity::Reader n, NodeState* node) {
  // Engine v26: a report that carries labels, taints or non-TAS usage replaces them.
  if (n.hasLabels()) {
    node->labels.clear();
    for (auto l : n.getLabels()) node->labels[std::string(View(l.getKey()))] = View(l.getValue());
  }
  if (n.hasTaints()) {
    node->taints.clear();
    for (auto t : n.getTaints()) {
      node->taints.push_back(Taint{std::string(View(t.getKey())), std::string(View(t.getValue())),
                                   std::string(View(t.getEffect()))});
    }
  }
  if (n.hasNonTasUsage()) {
    node->non_tas_usage.clear();
    for (auto u : n.getNonTasUsage()) node->non_tas_usage[resources_.Id(View(u.getName()))] += u.getMilli();
  }
}

namespace {

// A holder's per-pod use of one TAS flavor (Kueue's ComputeTASNetUsage): its usage of the
// resources assigned that flavor, over its count; `pods` is counted by the snapshot itself.
TasSnapshot::Requests PerPod(const PodSetAssignment& a, int flavor, int pods) {
  TasSnapshot::Requests out;
  if (a.count <= 0) return out;
  for (const auto& [r, f] : a.flavors) {
    if (f != flavor || r == pods) continue;
    auto u = a.usage.find(r);
    if (u != a.usage.end() && u->second != 0) out[r] = u->second / a.count;
  }
  return out;
}

// The one TAS flavor of a pod set's assignment (Kueue's onlyTASFlavor), or -1 with *error.
int OnlyTasFlavor(const Engine& e, const PodSetAssignment& a, std::string* error) {
  std::set<int> flavors;
  for (const auto& [r, f] : a.flavors) {
    if (e.IsTasFlavor(f)) flavors.insert(f);
  }
  if (flavors.size() == 1) return *flavors.begin();
  if (flavors.empty()) {
    *error = "no TAS flavor assigned";
    return -1;
  }
  std::vector<std::string> names;
  for (int f : flavors) names.push_back(e.flavor_names().Name(f));
  std::sort(names.begin(), names.end());
  *error = "more than one TAS flavor assigned: ";
  for (size_t i = 0; i < names.size(); ++i) error->append(i ? ", " : "").append(names[i]);
  return -1;
}

// A pod set's placement request for `count` pods (Kueue's TASPodSetRequests).
TasSnapshot::PodSetRequest RequestOf(const PodSetSpec& ps, int32_t count) {
  TasSnapshot::PodSetRequest r;
  r.name = ps.name;
  r.count = count;
  r.per_pod = ps.requests;
  r.request = ps.topology ? &*ps.topology : nullptr;
  r.node_selector = &ps.node_selector;
  r.tolerations = &ps.tolerations;
  r.affinity = &ps.affinity;
  return r;
}

}  // namespace

bool Engine::IsTasFlavor(int flavor) const {
  if (batch_version_ < 26) return false;
  auto f = flavors_.find(flavor_ids_.Name(flavor));
  if (f == flavors_.end() || f->second.topology.empty()) return false;
  auto topo = topologies_.find(f->second.topology);
  return topo != topologies_.end() && !topo->second.empty();
}

TasSnapshot* Engine::TasFor(int flavor) const {
  if (!IsTasFlavor(flavor)) return nullptr;
  auto cached = tas_cache_.find(flavor);
  if (cached != tas_cache_.end()) return cached->second.get();
  auto f = flavors_.find(flavor_ids_.Name(flavor));
  if (f == flavors_.end() || f->second.topology.empty()) return nullptr;
  auto topo = topologies_.find(f->second.topology);
  if (topo == topologies_.end() || topo->second.empty()) return nullptr;
  auto snap = std::make_unique<TasSnapshot>(f->second.topology, topo->second,
                                            f->second.tolerations,
                                            const_cast<Interner&>(resources_).Id("pods"),
                                            &resources_);
  for (const auto& entry : nodes_) {
    const NodeState& node = entry.second;
    if (node.failed || node.flavor != f->first) continue;
    const bool labelled = std::all_of(topo->second.begin(), topo->second.end(),
                                      [&node](const std::string& level) {
                                        return node.labels.count(level) != 0;
                                      });
    if (labelled) snap->AddNode(node.labels, node.taints, node.capacity, node.non_tas_usage);
  }
  snap->Initialize();
  const int pods = snap->pods();
  for (const auto& [cq_name, cq] : cqs_) {
    for (const Holder& h : cq.holders) {
      for (const PodSetAssignment& a : h.wl->admission.pod_sets) {
        if (!a.topology) continue;
        std::string ignored;
        if (OnlyTasFlavor(*this, a, &ignored) == flavor) {
          snap->AddUsage(*a.topology, PerPod(a, flavor, pods), +1);
        }
      }
    }
  }
  TasSnapshot* out = snap.get();
  tas_cache_.emplace(flavor, std::move(snap));
  return out;
}

void Engine::TasHolderChanged(const WorkloadState& wl, int sign) const {
  if (batch_version_ < 26) return;
  for (const PodSetAssignment& a : wl.admission.pod_sets) {
    if (!a.topology) continue;
    for (const auto& [flavor, snap] : tas_cache_) {
      bool uses = false;
      for (const auto& [r, f] : a.flavors) uses = uses || f == flavor;
      if (uses) snap->AddUsage(*a.topology, PerPod(a, flavor, snap->pods()), sign);
    }
  }
}

bool Engine::TasOnly(const ClusterQueueSpec& spec) const {
  // Kueue's IsTASOnly: every flavor of every resource group is a TAS flavor.
  bool any = false;
  for (const ResourceGroup& g : spec.resource_groups) {
    for (const FlavorQuotas& fq : g.flavors) {
      if (!IsTasFlavor(fq.flavor)) return false;
      any = true;
    }
  }
  return any;
}

bool Engine::TasRequested(const PodSetSpec& ps, const ClusterQueueSpec& spec) const {
  if (batch_version_ < 26) return false;
  return ps.topology.has_value() || TasOnly(spec);
}

std::string Engine::TasFlavorMismatch(const PodSetSpec& ps, const ClusterQueueSpec& spec,
                                      const ResourceGroup& group, int flavor) const {
  // Kueue's checkPodSetAndFlavorMatchForTAS.
  if (batch_version_ < 26) return "";
  const std::string& name = flavor_ids_.Name(flavor);
  auto f = flavors_.find(name);
  const bool tas_flavor = f != flavors_.end() && !f->second.topology.empty();
  if (TasRequested(ps, spec)) {
    if (!ps.topology) return "";  // implied: every flavor of the ClusterQueue is a TAS flavor
    if (!tas_flavor) {
      // A flavor may still give quota-only resources the pod set does not request.
      const bool overlap = std::any_of(group.covered.begin(), group.covered.end(),
                                       [&ps](int r) { return ps.requests.count(r) != 0; });
      if (!overlap) return "";
      return Cat({"Flavor \"", name, "\" does not support TopologyAwareScheduling"});
    }
    const TasSnapshot* snap = TasFor(flavor);
    if (snap == nullptr) return Cat({"Flavor \"", name, "\" information missing in TAS cache"});
    if (!snap->HasLevel(&*ps.topology)) {
      return Cat({"Flavor \"", name, "\" does not contain the requested level"});
    }
    return "";
  }
  if (tas_flavor) return Cat({"Flavor \"", name, "\" supports only TopologyAwareScheduling"});
  return "";
}

bool Engine::CollectTasRequests(const WorkloadState& wl, const ClusterQueueSpec& spec,
                                const Assignment& a, TasRequests* out, std::string* error) const {
  // Kueue's WorkloadsTopologyRequests.
  for (size_t i = 0; i < wl.pod_sets.size() && i < a.pod_sets.size(); ++i) {
    const PodSetSpec& ps = wl.pod_sets[i];
    if (!TasRequested(ps, spec)) continue;
    const int flavor = OnlyTasFlavor(*this, a.pod_sets[i], error);
    if (flavor < 0) {
      *error = Cat({"couldn't assign flavors to pod set ", ps.name, ": ", *error});
      return false;
    }
    out->by_flavor[flavor].push_back(RequestOf(ps, a.pod_sets[i].count));
    out->index[flavor].push_back(i);
  }
  return true;
}

namespace {

// For a required placement that failed: what it needs in one domain of the level and what the
// largest free one has, in the pod set's extended resource (IsExtendedResource), else in pods.
std::string LargestDomainNote(const TasSnapshot& snap, const TasSnapshot::PodSetRequest& r,
                              const std::string& reason, const Interner& names) {
  // Only after a capacity failure (Kueue's notFitMessage), not a level error.
  if (r.request == nullptr || r.request->required.empty() ||
      reason.rfind("topology \"", 0) != 0) {
    return "";
  }
  const auto& levels = snap.levels();
  auto it = std::find(levels.begin(), levels.end(), r.request->required);
  if (it == levels.end()) return "";
  TasSnapshot::DomainRoom largest;  // the first of the most room
  for (const TasSnapshot::DomainRoom& d :
       snap.DomainRooms(static_cast<size_t>(it - levels.begin()), r.per_pod)) {
    if (largest.value.empty() || d.pods > largest.pods) largest = d;
  }
  std::string unit = "pods";
  int64_t per = kMilliPerUnit;
  for (const auto& [res, milli] : r.per_pod) {
    const std::string& name = names.Name(res);
    if (IsExtendedResource(name) && (unit == "pods" || name < unit)) {
      unit = name;
      per = milli;
    }
  }
  const std::string& level = r.request->required;
  return Cat({"; needs ", FormatMilli(per * r.count), " ", unit, " in one ", level,
              "; the largest free ", level,
              largest.value.empty() ? "" : " (" + largest.value + ")", " has ",
              FormatMilli(per * largest.pods)});
}

}  // namespace

void Engine::PlaceTopology(const WorkloadState& wl, const ClusterQueueSpec& spec, Nomination& n) {
  // Kueue's TAS step of assignFlavors: placed when the quota fits; else (or when that fails)
  // placed as if no TAS holder used anything, to tell Preempt from NoFit.
  if (batch_version_ < 26 || n.mode == kNoFit) return;
  if (std::none_of(wl.pod_sets.begin(), wl.pod_sets.end(),
                   [&](const PodSetSpec& ps) { return TasRequested(ps, spec); })) {
    return;
  }
  TasRequests reqs;
  std::string error;
  if (!CollectTasRequests(wl, spec, n.assignment, &reqs, &error)) {
    n.mode = kNoFit;
    n.message = error;
    return;
  }
  if (n.mode == kFit) {
    for (auto& [flavor, list] : reqs.by_flavor) {
      TasSnapshot& snap = *TasFor(flavor);
      TasSnapshot::Outcome o = snap.Find(list, false);
      if (!o.failed_pod_set.empty()) {
        const auto& failed = *std::find_if(list.begin(), list.end(), [&](const auto& r) {
          return r.name == o.failed_pod_set;
        });
        n.mode = kPreempt;
        n.message = Cat({"couldn't assign flavors to pod set ", o.failed_pod_set, ": ", o.reason,
                         LargestDomainNote(snap, failed, o.reason, resources_)});
        break;
      }
      for (size_t j = 0; j < list.size(); ++j) {
        n.assignment.pod_sets[reqs.index[flavor][j]].topology = o.assignments[list[j].name];
      }
    }
    if (n.mode == kFit) return;
    for (PodSetAssignment& a : n.assignment.pod_sets) a.topology.reset();
  }
  for (auto& [flavor, list] : reqs.by_flavor) {
    if (!TasFor(flavor)->Find(list, true).failed_pod_set.empty()) {
      n.mode = kNoFit;
      return;
    }
  }
  // Preemption may free the room: the TAS pod sets' flavor-resources need it.
  n.tas_failed = true;
}

bool Engine::PlaceTopologyNow(const WorkloadState& wl, const ClusterQueueSpec& spec,
                              Nomination& n) {
  if (batch_version_ < 26) return true;
  TasRequests reqs;
  std::string error;
  if (!CollectTasRequests(wl, spec, n.assignment, &reqs, &error)) return false;
  std::map<size_t, TopologyAssignment> placed;
  for (auto& [flavor, list] : reqs.by_flavor) {
    TasSnapshot::Outcome o = TasFor(flavor)->Find(list, false);
    if (!o.failed_pod_set.empty()) return false;
    for (size_t j = 0; j < list.size(); ++j) {
      placed[reqs.index[flavor][j]] = o.assignments[list[j].name];
    }
  }
  for (auto& [i, a] : placed) n.assignment.pod_sets[i].topology = std::move(a);
  return true;
}

bool Engine::TopologyStillFits(const Assignment& a) const {
  if (batch_version_ < 26) return true;
  for (const PodSetAssignment& psa : a.pod_sets) {
    if (!psa.topology) continue;
    std::string ignored;
    const int flavor = OnlyTasFlavor(*this, psa, &ignored);
    if (flavor < 0) return false;
    TasSnapshot* snap = TasFor(flavor);
    if (!snap->Fits(*psa.topology, PerPod(psa, flavor, snap->pods()))) return false;
  }
  return true;
}

void Engine::StartTasTrial(const WorkloadState& wl, const ClusterQueueSpec& spec,
                           const Nomination& n, TasRequests* storage, std::vector<Fr>* needing) {
  // A victim search for a nomination whose placement needs preemption: the TAS pod sets'
  // flavor-resources need it, and a victim set must let the placement fit too.
  std::string error;
  if (!n.tas_failed || !CollectTasRequests(wl, spec, n.assignment, storage, &error)) return;
  for (const auto& [flavor, index] : storage->index) {
    TasFor(flavor);  // built before candidates are removed from it
    for (size_t i : index) {
      for (const auto& [r, f] : n.assignment.pod_sets[i].flavors) {
        const Fr fr = MakeFr(f, r);
        auto u = n.assignment.usage.find(fr);
        if (u != n.assignment.usage.end() && u->second > 0 &&
            std::find(needing->begin(), needing->end(), fr) == needing->end()) {
          needing->push_back(fr);
        }
      }
    }
  }
  std::sort(needing->begin(), needing->end());
  tas_trial_ = storage;
}

bool Engine::ReplaceFailedNode(WorkloadState& wl, const std::string& host, std::string* reason) {
  std::vector<std::pair<size_t, TopologyAssignment>> changes;
  for (size_t i = 0; i < wl.admission.pod_sets.size() && i < wl.pod_sets.size(); ++i) {
    const PodSetAssignment& a = wl.admission.pod_sets[i];
    if (!a.topology) continue;
    const bool there = std::any_of(a.topology->domains.begin(), a.topology->domains.end(),
                                   [&](const TopologyDomain& d) { return d.values.back() == host; });
    if (!there) continue;
    const int flavor = OnlyTasFlavor(*this, a, reason);
    TasSnapshot* snap = flavor < 0 ? nullptr : TasFor(flavor);
    if (snap == nullptr) return false;
    std::optional<TopologyAssignment> placed =
        snap->Replace(RequestOf(wl.pod_sets[i], a.count), *a.topology, host, reason);
    if (!placed) return false;
    changes.emplace_back(i, std::move(*placed));
  }
  if (changes.empty()) return false;
  TasHolderChanged(wl, -1);
  for (auto& [i, placed] : changes) wl.admission.pod_sets[i].topology = placed;
  TasHolderChanged(wl, +1);
  for (const auto& [i, placed] : changes) {
    auto d = NewDecision(current_sequence_).initBody().initTopologyReplaced();
    Ref(d.initWorkload(), wl);
    d.setGeneration(wl.generation);
    d.setPodSet(Txt(wl.admission.pod_sets[i].name));
    d.setNode(Txt(host));
    SetTopologyAssignment(placed, d.initTopologyAssignment());
  }
  return true;
}

bool Engine::TasTrialFits() const {
  if (tas_trial_ == nullptr) return true;
  for (const auto& [flavor, list] : tas_trial_->by_flavor) {
    if (!TasFor(flavor)->Find(list, false).failed_pod_set.empty()) return false;
  }
  return true;
}

}  // namespace admission::projections

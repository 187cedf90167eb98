#include "projections/topology_fragmentation.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "projections/tas.h"

namespace admission::projections {

namespace {

constexpr int64_t kMilliPerOne = 1000;

// The flavor's unit: the first extended resource (by name) its healthy nodes report.
std::string UnitResource(const Engine& engine, const std::string& flavor) {
  std::string unit;
  for (const auto& [name, node] : engine.nodes()) {
    if (node.failed || node.flavor != flavor) continue;
    for (const auto& [r, milli] : node.capacity) {
      const std::string& resource = engine.resource_names().Name(r);
      const bool extended = IsExtendedResource(resource);
      if (milli > 0 && extended && (unit.empty() || resource < unit)) unit = resource;
    }
  }
  return unit.empty() ? "pods" : unit;
}

// The TAS flavors a pending pod set may be placed on: those of the resource groups covering
// what it requests whose topology has its level.
std::vector<int> CandidateFlavors(const Engine& engine, const ClusterQueueSpec& spec,
                                  const PodSetSpec& ps) {
  std::vector<int> out;
  if (!engine.TasRequested(ps, spec)) return out;
  for (const ResourceGroup& g : spec.resource_groups) {
    const bool covers = ps.requests.empty() ||
                        std::any_of(g.covered.begin(), g.covered.end(),
                                    [&ps](int r) { return ps.requests.count(r) != 0; });
    if (!covers) continue;
    for (const FlavorQuotas& fq : g.flavors) {
      const TasSnapshot* snap = engine.TasFor(fq.flavor);
      if (snap != nullptr && snap->HasLevel(ps.topology ? &*ps.topology : nullptr)) {
        out.push_back(fq.flavor);
      }
    }
  }
  return out;
}

struct Pending {
  TasPendingRequest request;
  const PodSetSpec* pod_set = nullptr;
  std::string key;  // workload key, then pod set name: the tie-break
};

std::string RequestLevel(const PodSetSpec& ps) {
  if (!ps.topology) return "";
  const TopologyRequest& t = *ps.topology;
  return !t.required.empty() ? t.required : !t.preferred.empty() ? t.preferred : t.slice_level;
}

// The largest pending TAS request per flavor id, each flavor's unit given by `units`.
std::map<int, Pending> LargestPending(const Engine& engine, const std::map<int, int>& units) {
  std::map<int, Pending> out;
  for (const auto& [cq_name, cq] : engine.cluster_queues()) {
    if (!cq.spec) continue;
    for (const auto& [class_key, cls] : cq.classes) {
      for (const QueueKey& member : cls.members) {
        for (const PodSetSpec& ps : member.wl->pod_sets) {
          for (int flavor : CandidateFlavors(engine, *cq.spec, ps)) {
            const int unit = units.at(flavor);
            auto per = ps.requests.find(unit);
            Pending p;
            p.request.count = ps.count;
            p.request.unit_milli_per_pod = per == ps.requests.end() ? 0 : per->second;
            p.request.level = RequestLevel(ps);
            p.pod_set = &ps;
            p.key = member.wl->key + "\n" + ps.name;
            const int64_t size = unit < 0 ? ps.count : ps.count * p.request.unit_milli_per_pod;
            auto it = out.find(flavor);
            if (it != out.end()) {
              const Pending& b = it->second;
              const int64_t best = unit < 0 ? b.request.count
                                            : b.request.count * b.request.unit_milli_per_pod;
              // Larger first, then more pods; on a tie the smaller key stays.
              if (std::make_tuple(size, ps.count, b.key) <=
                  std::make_tuple(best, b.request.count, p.key)) {
                continue;
              }
            }
            out[flavor] = std::move(p);
          }
        }
      }
    }
  }
  return out;
}

}  // namespace

std::vector<TasFragmentation> TopologyFragmentation(const Engine& engine) {
  std::vector<TasFragmentation> out;
  std::map<int, int> units;  // flavor id -> unit resource id (-1: pods)
  std::vector<std::pair<int, TasFragmentation>> flavors;
  for (const auto& [name, flavor] : engine.flavors()) {
    const std::optional<int> id = engine.flavor_names().Find(name);
    if (!id || engine.TasFor(*id) == nullptr) continue;
    TasFragmentation f;
    f.flavor = name;
    f.topology = flavor.topology;
    f.resource = UnitResource(engine, name);
    const std::optional<int> unit =
        f.resource == "pods" ? std::nullopt : engine.resource_names().Find(f.resource);
    units[*id] = unit.value_or(-1);
    flavors.emplace_back(*id, std::move(f));
  }
  const std::map<int, Pending> pending = LargestPending(engine, units);
  for (auto& [id, f] : flavors) {
    const TasSnapshot& snap = *engine.TasFor(id);
    TasSnapshot::Requests unit_pod;
    if (units[id] >= 0) unit_pod[units[id]] = kMilliPerOne;
    auto p = pending.find(id);
    if (p != pending.end()) f.largest_pending = p->second.request;
    for (size_t level = 0; level < snap.levels().size(); ++level) {
      TasLevelFragmentation l;
      l.level = snap.levels()[level];
      for (const TasSnapshot::DomainRoom& room : snap.DomainRooms(level, unit_pod)) {
        ++l.domains;
        if (room.pods > l.largest_free || l.largest_domain.empty()) {
          l.largest_free = room.pods;
          l.largest_domain = room.value;
        }
      }
      if (p != pending.end()) {
        const auto rooms = snap.DomainRooms(level, p->second.pod_set->requests);
        l.fitting_largest_pending = static_cast<int32_t>(
            std::count_if(rooms.begin(), rooms.end(), [&](const TasSnapshot::DomainRoom& r) {
              return r.pods >= p->second.request.count;
            }));
      }
      f.levels.push_back(std::move(l));
    }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace admission::projections

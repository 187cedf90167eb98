#pragma once
// Topology fragmentation (docs/metrics.md, admission_tas_*): per TAS flavor and topology
// level, the largest free capacity of one domain, and how many domains could hold the largest
// pending TAS request of the flavor. A read model of the decider's state, computed from the
// flavors' TasSnapshots (Engine::TasFor): the metrics' gauges and the dashboard's overview.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "projections/engine.h"

namespace admission::projections {

struct TasLevelFragmentation {
  std::string level;           // the level's node label
  int32_t domains = 0;         // domains of the level
  int64_t largest_free = 0;    // the largest free capacity of one domain, in the flavor's unit
  std::string largest_domain;  // that domain's value at the level
  // Domains of the level whose free room, in pods of the largest pending request's per-pod
  // requests, is at least its count; nullopt when no TAS request of the flavor is pending.
  std::optional<int32_t> fitting_largest_pending;
};

// The largest pending TAS request of a flavor: the pod set asking for the most of the flavor's
// unit (count x per-pod request; pods when the unit is pods), then the most pods, then the
// first by workload key and pod set.
struct TasPendingRequest {
  int32_t count = 0;
  int64_t unit_milli_per_pod = 0;  // per pod, in the flavor's unit (0 when the unit is pods)
  std::string level;               // its required, preferred or slice level; "" when implied
};

struct TasFragmentation {
  std::string flavor, topology;
  // The unit of largest_free: the extended resource (a name with a '/', e.g. nvidia.com/gpu)
  // the flavor's nodes report, the first by name; else "pods" (free pod slots).
  std::string resource;
  std::optional<TasPendingRequest> largest_pending;
  std::vector<TasLevelFragmentation> levels;  // highest first
};

// Every TAS flavor whose Topology is defined, by flavor name (engine v26; none before).
std::vector<TasFragmentation> TopologyFragmentation(const Engine& engine);

}  // namespace admission::projections

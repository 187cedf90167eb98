#pragma once
// Topology-aware scheduling (engine v26, docs/tas.md): one TAS flavor's domain tree and Kueue
// v0.17's placement algorithm on it. Kueue: pkg/cache/scheduler/tas_flavor_snapshot.go
// (TASFlavorSnapshot, findTopologyAssignment and the functions it calls), with its defaults:
// TASProfileMixed on (LeastFreeCapacity for unconstrained requests, BestFit otherwise),
// balanced placement, multi-layer slices, elastic slices and node replacement off.
//
// Pure and deterministic: every order the result depends on is total (a domain's values break
// ties), so a replay places exactly as the decision did.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "projections/model.h"
#include "schema/events.capnp.h"

namespace admission::projections {

inline constexpr std::string_view kHostnameLabel = "kubernetes.io/hostname";

// The unit fragmentation is told in: an extended resource (a name with a '/', such as
// nvidia.com/gpu); the first by name when there are several, else pods.
inline bool IsExtendedResource(std::string_view name) {
  return name.find('/') != std::string_view::npos;
}

// Kueue's TopologyAssignment from and into its event form (tas_engine.cc).
TopologyAssignment ToTopologyAssignment(schema::TopologyAssignment::Reader in);
void SetTopologyAssignment(const TopologyAssignment& a, schema::TopologyAssignment::Builder b);

class TasSnapshot {
 public:
  using Requests = std::map<int, int64_t>;  // resource id -> milli

  // `pods`: the resource id of "pods" (every pod uses one); `names`: resource names, for
  // messages.
  TasSnapshot(std::string topology, std::vector<std::string> levels,
              std::vector<Toleration> flavor_tolerations, int pods, const Interner* names);

  // A node of the flavor with a label for every level (the caller checks), before Initialize.
  void AddNode(const Labels& labels, const std::vector<Taint>& taints,
               const Requests& allocatable, const Requests& non_tas_usage);
  // Builds the tree above the leaves; call once, after the nodes.
  void Initialize();
  // What a TAS holder's assignment uses (per pod `per_pod` and one pod), added or removed.
  void AddUsage(const TopologyAssignment& assignment, const Requests& per_pod, int sign);

  const std::string& topology() const { return topology_; }
  const std::vector<std::string>& levels() const { return levels_; }
  int pods() const { return pods_; }
  // Kueue's HasLevel: the request's level (required, preferred; the top for a slice-only
  // request, the lowest for unconstrained) is one of the topology's. nullptr: implied TAS.
  bool HasLevel(const TopologyRequest* request) const;

  struct PodSetRequest {
    std::string name;
    int32_t count = 0;
    Requests per_pod;                         // without the pod itself
    const TopologyRequest* request = nullptr; // nullptr: implied (unconstrained, lowest level)
    const Labels* node_selector = nullptr;
    const std::vector<Toleration>* tolerations = nullptr;
    const std::vector<Requirement>* affinity = nullptr;
  };
  struct Outcome {
    std::map<std::string, TopologyAssignment> assignments;  // by pod set name
    std::string failed_pod_set;                             // empty: every pod set placed
    std::string reason;
  };
  // Kueue's FindTopologyAssignmentsForFlavor: the pod sets in order, those of one group name
  // together (the smaller of two is the leader); `simulate_empty`: as if no TAS holder used
  // anything. Stops at the first pod set that does not fit.
  Outcome Find(const std::vector<PodSetRequest>& requests, bool simulate_empty);
  // Kueue's findReplacementAssignment (TASFailedNodeReplacement, on by default in v0.17): the
  // placement with the pods of `failed_host` moved to other nodes, within the domain of the
  // required level that holds the rest; nullopt with *reason when there is none.
  std::optional<TopologyAssignment> Replace(const PodSetRequest& request,
                                            const TopologyAssignment& existing,
                                            const std::string& failed_host, std::string* reason);
  // Kueue's Fits: whether every domain of the assignment still holds its pods now.
  bool Fits(const TopologyAssignment& assignment, const Requests& per_pod) const;
  // Every domain of `level` (in the order of their values) with its value at that level and the
  // number of pods of `per_pod` it holds now (the pending message's note, the fragmentation
  // metrics and the dashboard).
  struct DomainRoom {
    std::string value;
    int32_t pods = 0;
  };
  std::vector<DomainRoom> DomainRooms(size_t level, const Requests& per_pod) const;

 private:
  struct Domain {
    std::vector<std::string> values;
    int parent = -1;
    std::vector<int> children;
    // The algorithm's scratch state (Kueue's domain.state and friends).
    int32_t state = 0, slice_state = 0, state_with_leader = 0, slice_state_with_leader = 0,
            leader_state = 0;
    // Leaves only.
    Requests free;       // allocatable minus non-TAS usage
    Requests tas_usage;
    Labels labels;       // the node's, when the lowest level is the hostname
    std::vector<Taint> taints;
  };
  struct Exclusions {
    int total = 0, node_selector = 0, affinity = 0, domain = 0;
    std::map<std::string, int> taints, resources;
    std::string Format() const;
  };
  struct Scratch;  // one findTopologyAssignment's parameters (tas.cc)

  std::string LeafId(const std::vector<std::string>& values) const;
  int LeafOf(const TopologyDomain& domain) const;
  int32_t CountIn(const Requests& per_pod, const Requests& capacity, int* limiting) const;
  Requests Remaining(const Domain& leaf, bool simulate_empty,
                     const std::map<int, Requests>& assumed) const;
  std::map<std::string, TopologyAssignment> FindOne(const PodSetRequest& workers,
                                                    const PodSetRequest* leader,
                                                    const std::map<int, Requests>& assumed,
                                                    bool simulate_empty, std::string* reason,
                                                    const std::vector<std::string>* within = nullptr);
  bool LeafExcluded(const Domain& leaf, const PodSetRequest& ps, Exclusions* ex) const;
  void FillInCounts(const Scratch& s, const std::map<int, Requests>& assumed, Exclusions* ex);
  void FillInCountsHelper(int d, int32_t slice_size, size_t slice_level, size_t level);
  std::optional<std::string> Prepare(const PodSetRequest& workers, const PodSetRequest* leader,
                                     Scratch* s) const;
  int FindLevel(const Scratch& s, size_t level, std::vector<int>* fit, std::string* reason,
                const Exclusions& ex);
  int Spread(const Scratch& s, size_t level, const std::vector<int>& sorted,
             std::vector<int>* fit, std::string* reason, const Exclusions& ex);
  std::vector<int> UpdateCountsToMinimum(std::vector<int> domains, int32_t count,
                                         int32_t leader_count, int32_t slice_size,
                                         bool unconstrained, bool slices);
  bool ConsumeWithLeaders(int& d, const std::vector<int>& rest, int32_t* remaining,
                          int32_t* remaining_leaders, bool unconstrained, int32_t slice_size,
                          bool slices);
  std::vector<int> Sorted(std::vector<int> domains, bool unconstrained) const;
  std::vector<int> SortedWithLeader(std::vector<int> domains, bool unconstrained) const;
  int BestFit(const std::vector<int>& domains, int32_t needed, bool slices, bool leader) const;
  TopologyAssignment Build(std::vector<std::pair<int, int32_t>> domains) const;
  std::string NotFit(int32_t fit, int32_t total, int32_t slice_size, const Exclusions& ex) const;
  const std::string* LevelKey(const TopologyRequest* request) const;
  std::optional<size_t> LevelIndex(std::string_view key) const;

  std::string topology_;
  std::vector<std::string> levels_;
  std::vector<Toleration> tolerations_;
  int pods_;
  const Interner* names_;
  bool lowest_is_node_;
  std::vector<Domain> domains_;
  std::map<std::string, int> leaves_;          // leaf id -> domain index
  std::vector<std::vector<int>> per_level_;    // domain indices, by their values
  std::vector<int> roots_;
};

}  // namespace admission::projections

#pragma once
// The decider's own view of the objects, converted from events once (events are transient
// readers). Plain values, ordered containers only.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace admission::projections {

// Interned names: ids are dense and assigned in order of first appearance in the ledger, so
// they are the same in every replay.
class Interner {
 public:
  // Looks the name up before inserting: most calls name a known resource or flavor, and a map
  // insertion would build (and drop) a node each time.
  int Id(std::string_view name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    const int id = static_cast<int>(names_.size());
    ids_.emplace(std::string(name), id);
    names_.emplace_back(name);
    return id;
  }
  std::optional<int> Find(std::string_view name) const {
    auto it = ids_.find(name);
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }
  const std::string& Name(int id) const { return names_[static_cast<size_t>(id)]; }
  size_t size() const { return names_.size(); }

 private:
  std::map<std::string, int, std::less<>> ids_;
  std::vector<std::string> names_;
};

// A flavor-resource pair as one ordered key.
using Fr = uint64_t;
inline Fr MakeFr(int flavor, int resource) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(flavor)) << 32) |
         static_cast<uint32_t>(resource);
}
inline int FrFlavor(Fr fr) { return static_cast<int>(fr >> 32); }
inline int FrResource(Fr fr) { return static_cast<int>(fr & 0xffffffffu); }

// Quantities per flavor-resource, in milli-units.
using FrQuantities = std::map<Fr, int64_t>;

struct Toleration {
  std::string key, op, value, effect;
  bool operator==(const Toleration&) const = default;
};
struct Taint {
  std::string key, value, effect;
};
struct Requirement {
  std::string key, op;
  std::vector<std::string> values;
};
using Labels = std::map<std::string, std::string>;

struct LabelSelector {
  bool present = false;     // absent: matches everything (see docs/semantics.md)
  Labels match_labels;
  std::vector<Requirement> match_expressions;
};

struct Flavor {
  std::string name;
  Labels node_labels;
  std::vector<Taint> node_taints;
  std::vector<Toleration> tolerations;
  std::string topology;  // spec.topologyName (engine v26: a TAS flavor)
  uint64_t version = 0;  // sequence of the definition
};

struct ResourceQuota {
  int64_t nominal = 0;
  std::optional<int64_t> borrowing_limit;
  std::optional<int64_t> lending_limit;
};

struct FlavorQuotas {
  int flavor = 0;
  std::map<int, ResourceQuota> resources;  // resource id -> quota
};

struct ResourceGroup {
  std::vector<int> covered;                // resource ids, in the order given
  std::vector<FlavorQuotas> flavors;       // preference order
};

enum class QueueingStrategy { kBestEffortFifo, kStrictFifo };
enum class StopPolicy { kNone, kHold, kHoldAndDrain };
enum class WithinCq { kNever, kLowerPriority, kLowerOrNewerEqualPriority };
enum class ReclaimPolicy { kNever, kLowerPriority, kAny };
enum class FungibilityAction { kBorrow, kTryNextFlavor, kPreempt };
enum class FungibilityPreference { kBorrowingOverPreemption, kPreemptionOverBorrowing };

struct PreemptionPolicy {
  WithinCq within_cluster_queue = WithinCq::kNever;
  ReclaimPolicy reclaim_within_cohort = ReclaimPolicy::kNever;
  ReclaimPolicy borrow_within_cohort = ReclaimPolicy::kNever;
  std::optional<int32_t> max_priority_threshold;
};

struct ClusterQueueSpec {
  std::string name;
  std::string cohort;
  std::vector<ResourceGroup> resource_groups;
  QueueingStrategy queueing = QueueingStrategy::kBestEffortFifo;
  LabelSelector namespace_selector;
  StopPolicy stop_policy = StopPolicy::kNone;
  PreemptionPolicy preemption;
  FungibilityAction when_can_borrow = FungibilityAction::kBorrow;
  FungibilityAction when_can_preempt = FungibilityAction::kTryNextFlavor;
  FungibilityPreference preference = FungibilityPreference::kBorrowingOverPreemption;
  // Required checks: name -> flavors it applies to (empty: every flavor).
  std::map<std::string, std::vector<std::string>> admission_checks;
  int64_t fair_weight_milli = 1000;
  int64_t max_wait_ns = 0;   // 0: no starvation alert
  uint64_t version = 0;  // sequence of the definition: the quota version
  // admissionScope.admissionMode UsageBasedAdmissionFairSharing (engine v14): its heads are
  // ordered by their LocalQueue's usage (admission_fair_sharing.cc).
  bool usage_based_admission = false;
};

struct CohortSpec {
  std::string name;
  std::string parent;
  std::vector<ResourceGroup> resource_groups;
  int64_t fair_weight_milli = 1000;
  uint64_t version = 0;
};

struct LocalQueueSpec {
  std::string ns, name, cluster_queue;
  StopPolicy stop_policy = StopPolicy::kNone;
  int64_t weight_milli = 1000;  // spec.fairSharing.weight (admission fair sharing)
  // status.fairSharing.admissionFairSharingStatus as given: the usage its admission fair
  // sharing entry starts from when the ledger first needs one.
  bool has_consumed_seed = false;
  std::map<int, int64_t> consumed_seed;  // resource id -> milli
};

// Engine v26: Kueue's PodSetTopologyRequest (docs/tas.md). At most one of required, preferred
// and unconstrained is set.
struct TopologyRequest {
  std::string required, preferred;   // a level's node label
  bool unconstrained = false;
  std::string slice_level;           // podset-slice-required-topology
  int32_t slice_size = 0;            // 0: not given
  std::string group;                 // podset-group-name
  bool operator==(const TopologyRequest&) const = default;
};

// Kueue's TopologyAssignment: the levels given and, per domain, its values and pod count.
struct TopologyDomain {
  std::vector<std::string> values;
  int32_t count = 0;
  bool operator==(const TopologyDomain&) const = default;
};
struct TopologyAssignment {
  std::vector<std::string> levels;
  std::vector<TopologyDomain> domains;
  bool operator==(const TopologyAssignment&) const = default;
};

struct PodSetSpec {
  std::string name;
  int32_t count = 1;
  int32_t min_count = 0;  // 0: no partial admission
  std::map<int, int64_t> requests;  // per pod: resource id -> milli
  Labels node_selector;
  std::vector<Toleration> tolerations;
  std::vector<Requirement> affinity;
  std::optional<TopologyRequest> topology;  // engine v26
};

// Engine v17: what an admission check asks to add to one podSet's pod template at admission
// (Kueue's PodSetUpdate; projections/pod_set_updates.h merges them).
struct PodSetUpdate {
  std::string pod_set;
  Labels labels;
  Labels annotations;
  Labels node_selector;
  std::vector<Toleration> tolerations;
  bool operator==(const PodSetUpdate&) const = default;
};

struct PodSetAssignment {
  std::string name;
  int32_t count = 0;
  std::map<int, int> flavors;        // resource id -> flavor id
  std::map<int, int64_t> usage;      // resource id -> total milli for the podSet
  std::optional<TopologyAssignment> topology;  // engine v26: its TAS placement
};

struct Assignment {
  std::vector<PodSetAssignment> pod_sets;
  FrQuantities usage;                // total per flavor-resource
  bool borrows = false;
};

}  // namespace admission::projections

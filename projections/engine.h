#pragma once
// The decider: a pure fold (state, input event) -> (state', decisions). See docs/decider.md.
//
// Pure: no clock, no I/O, no threads, no randomness, no floating point, no iteration over
// unordered containers. Time is the recordedAt of the events applied.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "projections/model.h"
#include "projections/quota_tree.h"
#include <capnp/message.h>

#include "schema/events.capnp.h"

namespace admission::projections {

// Limits.
inline constexpr int kCyclesPerBatchMax = 1'000'000;
inline constexpr int kPodSetsMax = 8;

enum class Phase {
  kPending,      // queued, no quota
  kAdmitted,     // quota reserved (and admitted: no checks until the checks issue)
  kEvicting,     // evicted, quota held until the pods are gone
  kFinished,
  kRejected,     // can never fit, or refused: final
  kDeleted,
};
const char* PhaseName(Phase phase);

struct Condition {
  std::string type;      // QuotaReserved, Admitted, Evicted, Preempted, Requeued, Finished...
  bool status = false;
  std::string reason;
  std::string message;
  int64_t last_transition_ns = 0;
};

struct WorkloadState {
  std::string ns, name, uid, queue_name;
  std::string priority_class;
  int32_t priority = 0;
  int64_t creation_ns = 0;
  int64_t queued_at_ns = 0;        // FIFO timestamp: creation, or the last eviction
  std::vector<PodSetSpec> pod_sets;
  Labels namespace_labels;
  Phase phase = Phase::kPending;
  std::string cluster_queue;       // where it is queued or admitted
  std::string class_key;           // its equivalence class while queued
  bool queued = false;             // present in a ClusterQueue's pending queue
  Assignment admission;
  uint64_t generation = 0;         // reservation generation
  uint64_t quota_version = 0;
  int64_t reserved_at_ns = 0;
  bool pods_released = false;      // the runtime reported pods may exist
  bool imported = false;
  uint32_t requeue_count = 0;
  std::string pending_reason;
  std::string pending_message;
  std::map<std::string, Condition> conditions;  // by type
  uint64_t submitted_sequence = 0;
};

// The order of a pending queue: priority desc, FIFO timestamp asc, then the order of
// submission (the sequence of the submitting input: file order within one batch), then uid.
struct QueueKey {
  int32_t priority = 0;
  int64_t timestamp = 0;
  uint64_t sequence = 0;
  std::string uid;
  std::string key;  // namespace/name
  bool operator<(const QueueKey& o) const {
    if (priority != o.priority) return priority > o.priority;
    if (timestamp != o.timestamp) return timestamp < o.timestamp;
    if (sequence != o.sequence) return sequence < o.sequence;
    if (uid != o.uid) return uid < o.uid;
    return key < o.key;
  }
};

struct EquivalenceClass {
  std::set<QueueKey> members;
  bool inadmissible = false;
};

struct ClusterQueueState {
  std::optional<ClusterQueueSpec> spec;
  std::map<std::string, EquivalenceClass> classes;  // by class key
  std::set<std::string> admitted;                   // workload keys holding quota here
  FrQuantities usage;                               // reserved by admitted/evicting workloads
  size_t pending = 0;
  std::string inactive_reason;                      // empty: active
};

// The outcome of nominating a queue head (flavor assignment, maybe preemption).
enum NominationMode { kNoFit = 0, kPreempt = 1, kFit = 2 };  // larger is better
struct Nomination {
  int mode = kNoFit;
  Assignment assignment;
  std::vector<std::string> victims;  // for kPreempt: workload keys to evict
  bool partial = false;              // counts reduced toward minCount
  bool never_fits = false;           // no flavor could ever hold it
  std::string reason = "Pending";
  std::string message;
  std::string resource, flavor;      // the first shortfall found
  int64_t shortfall = 0;
};

class Engine {
 public:
  Engine();

  // Applies one input event. REQUIRES: the event is an input (not a decision) and its
  // sequence is set. Decisions it forces are kept until EndBatch.
  void ApplyInput(schema::Event::Reader event);

  // Runs admission cycles to a fixpoint and returns every decision since the last EndBatch,
  // as canonical Event bytes stamped with (causation, time) and this engine's version.
  std::vector<std::string> EndBatch(uint64_t batch_last_sequence, int64_t now_ns);

  // Read models.
  const std::map<std::string, WorkloadState>& workloads() const { return workloads_; }
  const std::map<std::string, ClusterQueueState>& cluster_queues() const { return cqs_; }
  const std::map<std::string, LocalQueueSpec>& local_queues() const { return lqs_; }
  const std::map<std::string, CohortSpec>& cohorts() const { return cohort_specs_; }
  const std::map<std::string, Flavor>& flavors() const { return flavors_; }
  const QuotaTree& tree() const { return tree_; }
  const Interner& resource_names() const { return resources_; }
  const Interner& flavor_names() const { return flavor_ids_; }
  uint64_t decisions_made() const { return decisions_made_; }

  // Pending workloads of a ClusterQueue in queue order (for reading; O(pending)).
  std::vector<std::string> PendingInOrder(const std::string& cq) const;

 private:
  struct PendingDecision {
    std::unique_ptr<capnp::MallocMessageBuilder> message;
    uint64_t causation = 0;  // 0: the batch's last input
  };

  // Inputs (engine_inputs.cc).
  std::vector<ResourceGroup> ToGroups(capnp::List<schema::ResourceGroup>::Reader groups);
  void ReadPodSets(capnp::List<schema::PodSet>::Reader list, std::vector<PodSetSpec>* out);
  void InitWorkload(schema::Workload::Reader wl, uint64_t seq, int64_t now, WorkloadState* out);
  void DefinitionsChanged();
  // Evicts every admitted workload `selected` accepts (stopPolicy HoldAndDrain).
  void Drain(const std::function<bool(const WorkloadState&)>& selected, const std::string& reason,
             const std::string& message, int64_t now);
  std::string KeyOf(schema::WorkloadRef::Reader ref) const;
  void Submit(schema::Workload::Reader wl, uint64_t seq, int64_t now);
  void Import(schema::WorkloadImported::Reader imported, uint64_t seq, int64_t now);
  void Finish(const std::string& key, const std::string& message, int64_t now);
  void Remove(const std::string& key, int64_t now);
  void PodsReport(schema::PodsReported::Reader report, int64_t now);

  // Queues (engine.cc).
  static std::string ClassKey(const WorkloadState& wl);
  std::string ResolveClusterQueue(const WorkloadState& wl, std::string* reason,
                                  std::string* message) const;
  void Enqueue(WorkloadState& wl, int64_t now);
  void Dequeue(WorkloadState& wl);
  void RequeueOrphans(int64_t now);
  void ReactivateTree(const std::string& cq_name);
  void RebuildTreeIfNeeded();
  void AddUsage(const std::string& cq_name, const FrQuantities& usage, int sign);

  // Reservations and evictions (engine.cc).
  void Reserve(WorkloadState& wl, const Nomination& n, int64_t now);
  void Evict(WorkloadState& victim, const std::string& reason, const std::string& message,
             const std::string& preempt_reason, const WorkloadState* preemptor, int64_t now);
  void ReleaseQuota(WorkloadState& wl, const std::string& reason, int64_t now);
  void RequeueAfterEviction(WorkloadState& wl, int64_t now);
  void SetPending(WorkloadState& wl, const std::string& reason, const std::string& message,
                  const std::string& resource, const std::string& flavor, int64_t shortfall,
                  int64_t now, bool emit);
  static void SetCondition(WorkloadState& wl, const std::string& type, bool status,
                           const std::string& reason, const std::string& message, int64_t now);
  static std::string FencingToken(const WorkloadState& wl);

  // The cycle (scheduler.cc).
  bool RunCycle(int64_t now);
  std::optional<std::string> Head(const std::string& cq_name) const;
  Nomination Nominate(const WorkloadState& wl);
  Nomination AssignFlavors(const WorkloadState& wl, const ClusterQueueSpec& spec, int cq_node,
                           const std::vector<int32_t>& counts) const;
  std::vector<std::string> FindVictims(const WorkloadState& wl, const ClusterQueueSpec& spec,
                                       int cq_node, const Assignment& assignment);
  bool WorkloadFits(int cq_node, const FrQuantities& request, bool allow_borrowing) const;

  // Decisions.
  schema::Event::Builder NewDecision(uint64_t causation);
  schema::WorkloadRef::Builder Ref(schema::WorkloadRef::Builder b, const WorkloadState& wl) const;

  std::map<std::string, Flavor> flavors_;
  std::map<std::string, ClusterQueueSpec> cq_specs_;
  std::map<std::string, CohortSpec> cohort_specs_;
  std::map<std::string, LocalQueueSpec> lqs_;       // by namespace/name
  std::map<std::string, int32_t> priority_classes_;
  std::map<std::string, ClusterQueueState> cqs_;
  std::map<std::string, WorkloadState> workloads_;  // by namespace/name
  std::map<std::string, std::string> uid_to_key_;
  std::set<std::string> orphans_;                   // pending with no ClusterQueue to go to
  std::set<std::string> active_;                    // ClusterQueues with admissible heads
  QuotaTree tree_;
  bool tree_dirty_ = true;
  Interner resources_;
  Interner flavor_ids_;

  uint64_t current_sequence_ = 0;
  std::vector<PendingDecision> decisions_;
  uint64_t decisions_made_ = 0;
  int64_t now_ns_ = 0;
};

}  // namespace admission::projections

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
#include <string_view>
#include <vector>

#include "projections/conditions.h"
#include "projections/engine_version.h"
#include "projections/model.h"
#include <capnp/message.h>

#include "projections/quota_tree.h"
#include "projections/budget.h"
#include "projections/usage.h"
#include "projections/tas.h"
#include "schema/result.h"

#include "schema/events.capnp.h"

namespace admission::projections {

// Limits.
inline constexpr int kCyclesPerBatchMax = 1'000'000;
// EndBatch repeats (fire due timers, run cycles to a fixpoint) only while the previous round
// started timers already due (a zero TTL, a backoff of zero): each such timer belongs to a
// reservation or eviction made by one of the batch's cycles, so the cycles' bound bounds the
// rounds too. Reaching it is a bug of ours (an assertion), never an input's fault.
inline constexpr int kTimerRoundsPerBatchMax = kCyclesPerBatchMax;
// The timers the decider keeps at once (AddTimer asserts it; nothing is dropped). A stale timer
// stays until it is due (firing checks the generation), so the count follows the inputs within
// the timers' horizon, not only the live workloads. A snapshot lists every timer, and a Cap'n
// Proto list holds at most 2^29 - 1 elements (snapshot.cc's kListElementsMax): a state with
// more could not be saved. Reaching it is an assertion, the values named.
inline constexpr size_t kTimersMax = (size_t{1} << 29) - 1;
// The timers one FireTimers call fires: those due (at most kTimersMax) and those their fires
// start due at once (an eviction's drain deadline, then a backoff or a retention: each link moves
// a workload on, so a chain is a few links long). Reaching it means fires keep starting timers
// due at once, a bug of ours (an assertion), never an input's fault.
inline constexpr size_t kTimerFiresPerRoundMax = 4 * kTimersMax;
// One unit of a resource in the decider's milli-units (one pod, one GPU).
inline constexpr int64_t kMilliPerUnit = 1000;
inline constexpr int kPodSetsMax = 8;
// A workload's total request of one resource (every pod set's per-pod requests times its
// count), in milli-units: 2^62 (4.6e15 units; 4 PiB of memory), so that the decider's sums of
// a workload's requests never overflow (signed overflow was found by tests/fuzz/rpc_fuzz.cc:
// the same resource listed twice with huge values). Validate refuses a workload beyond it.
inline constexpr int64_t kWorkloadRequestMilliMax = int64_t{1} << 62;
inline constexpr int64_t kDefaultRetentionNs = 24LL * 3600 * 1'000'000'000;
inline constexpr int64_t kRetainForever = -1;
// Engine v19: how long the quota of a workload evicted from a failed node waits for its pods to
// be reported gone before it is released anyway (a DrainDeadlinePassed alert): Kubernetes'
// default toleration of a NotReady or unreachable node (300 s), then as long again for the
// pods to be deleted.
inline constexpr int64_t kLostNodePodsDeadlineNs = 600LL * 1'000'000'000;

enum class Phase {
  kPending,      // queued (or waiting out a backoff), no quota
  kReserved,     // quota reserved, waiting for its admission checks
  kAdmitted,     // quota reserved and every required check Ready: may run with its token
  kEvicting,     // evicted, quota held until the pods are gone or a drain deadline passes
  kFinished,
  kRejected,     // can never fit, or a duplicate: final
  kDeactivated,  // a check rejected it, retries ran out, or it ran too long: final
  kDeleted,
};
const char* PhaseName(Phase phase);
// Holds quota: reserved, admitted or still draining.
inline bool HoldsQuota(Phase p) {
  return p == Phase::kReserved || p == Phase::kAdmitted || p == Phase::kEvicting;
}
// May be evicted (preempted, revoked, drained).
inline bool Evictable(Phase p) { return p == Phase::kReserved || p == Phase::kAdmitted; }
inline bool Terminal(Phase p) {
  return p == Phase::kFinished || p == Phase::kRejected || p == Phase::kDeactivated ||
         p == Phase::kDeleted;
}

// The state of one required admission check (Kueue's AdmissionCheckState.state).
enum class CheckState { kPending, kReady, kRetry, kRejected };
inline constexpr CheckState kCheckStateLast = CheckState::kRejected;
// Kueue's name of a check state ("Pending", "Ready", "Retry", "Rejected"): what read models
// and explain show, and the text snapshots store.
const char* CheckStateName(CheckState state);
// The state a check report carries.
CheckState ToCheckState(schema::CheckState state);
// A check state from its name (a snapshot's text); nullopt for any other text.
std::optional<CheckState> CheckStateFromName(std::string_view name);

// What happens once an eviction's pods are gone.
enum class AfterEviction {
  kRequeue,     // requeue at once
  kRetry,       // requeue after the backoff a check asked for (Retry)
  kPodsReady,   // requeue after Kueue's podsReady backoff
  kDeactivate,  // deactivate (a check rejected it or timed out, maximum execution time)
};
inline constexpr AfterEviction kAfterEvictionLast = AfterEviction::kDeactivate;
// The text snapshots store for it: "", "retry", "podsready", "deactivate".
const char* AfterEvictionName(AfterEviction after);
// An action from its stored text; nullopt for any other text.
std::optional<AfterEviction> AfterEvictionFromName(std::string_view name);

// One required admission check of the current reservation.
struct CheckStatus {
  CheckState state = CheckState::kPending;
  std::string message;
  int64_t last_transition_ns = 0;  // Pending since, Ready since...
  uint64_t report_sequence = 0;    // the report this state came from (0: none yet)
  std::vector<PodSetUpdate> pod_set_updates;  // engine v17: the latest report's, podSet order
};

struct ClusterQueueState;
struct EquivalenceClass;

// Engine v12: a flavor search to resume in the next cycle (Kueue's LastAssignment), valid
// while its ClusterQueue's allocatable generation and the quota tree are those it was made
// under. Lives within one batch: the batch's cycles run until no workload has flavors left
// to try, and EndBatch drops what remains, so snapshots never hold one.
struct FlavorResume {
  std::vector<std::vector<int32_t>> start;  // Nomination::resume
  uint64_t cq_generation = 0;
  uint64_t tree_epoch = 0;
  uint32_t resumes = 0;  // in this batch; bounded by FlavorResumesMax
};

struct WorkloadState {
  std::string ns, name, uid, queue_name;
  std::string key;                 // namespace/name: the key of Engine::workloads()
  std::string local_queue_key;     // namespace/queue_name: the key of Engine::local_queues()
  std::string priority_class;
  int32_t priority = 0;
  int64_t creation_ns = 0;
  int64_t queued_at_ns = 0;        // FIFO timestamp: creation, or the last eviction
  std::vector<PodSetSpec> pod_sets;
  Labels namespace_labels;
  Labels labels;                   // metadata.labels: for the views (get -l), decide nothing
  Phase phase = Phase::kPending;
  std::string cluster_queue;       // where it is queued or admitted
  std::string class_key;           // its equivalence class while queued
  bool queued = false;             // present in a ClusterQueue's pending queue
  Assignment admission;
  std::optional<FlavorResume> flavor_resume;  // engine v12, within a batch only
  uint64_t generation = 0;         // reservation generation
  uint64_t quota_version = 0;
  int64_t reserved_at_ns = 0;
  bool pods_released = false;      // the runtime reported pods may exist
  bool imported = false;
  uint32_t requeue_count = 0;
  // Part 2: checks, pods, timers.
  std::map<std::string, CheckStatus> checks;   // required checks of the current generation
  uint32_t check_retries = 0;      // reservations released by a check's Retry (or TTL)
  uint32_t pods_ready_requeues = 0;
  std::string fencing_token;       // set while admitted
  bool pods_ready = false;
  int64_t admitted_at_ns = 0;
  int64_t requeue_at_ns = 0;       // waiting out a backoff until then (not queued)
  int64_t drain_deadline_ns = 0;   // evicting: quota released at the latest then
  int64_t pending_since_ns = 0;    // start of the current wait, for the starvation alert
  bool starvation_alerted = false;
  int64_t expected_runtime_ns = 0;
  int64_t max_execution_ns = 0;
  AfterEviction after_eviction = AfterEviction::kRequeue;  // once an eviction's pods are gone
  int64_t retry_after_ns = 0;
  std::string deactivate_reason, deactivate_message;
  std::string pending_reason;
  std::string pending_message;
  ConditionSet conditions;
  uint64_t submitted_sequence = 0;
  int32_t holder_index = -1;       // its place in its ClusterQueue's holders while holding quota
  // Derived lookups, not stored in snapshots (Engine owns both; its maps never move entries):
  // the state of `cluster_queue` once looked up (Engine::CqState; reset when it changes), and
  // the class it is a member of while queued (set by Enqueue and on restore).
  ClusterQueueState* cq_state = nullptr;
  EquivalenceClass* queued_class = nullptr;
};

// Kueue's spec.active: false once deactivated, or evicted to be deactivated.
inline bool IsActive(const WorkloadState& wl) {
  return wl.phase != Phase::kDeactivated &&
         !(wl.phase == Phase::kEvicting && wl.after_eviction == AfterEviction::kDeactivate);
}

// A quota holder of a ClusterQueue as the preemption search reads it: what it filters and
// orders on, copied, so the search does not touch every workload of a cohort. Priority,
// reservation time and usage do not change while quota is held.
struct Holder {
  WorkloadState* wl = nullptr;
  int32_t priority = 0;
  bool evictable = true;      // reserved or admitted, not draining
  bool single = false;        // uses one flavor-resource: `fr`, `amount`
  int64_t reserved_at_ns = 0;
  Fr fr = 0;
  int64_t amount = 0;
};

// The order of a pending queue: priority desc, FIFO timestamp asc, then the order of
// submission (the sequence of the submitting input: file order within one batch), then uid,
// then namespace/name. The last two are read from the member itself (they do not change while
// it is queued), so a queue entry copies no string.
struct QueueKey {
  int32_t priority = 0;
  int64_t timestamp = 0;
  uint64_t sequence = 0;
  WorkloadState* wl = nullptr;  // the member: its uid and key end the order
  bool operator<(const QueueKey& o) const {
    if (priority != o.priority) return priority > o.priority;
    if (timestamp != o.timestamp) return timestamp < o.timestamp;
    if (sequence != o.sequence) return sequence < o.sequence;
    if (wl == o.wl) return false;
    if (wl->uid != o.wl->uid) return wl->uid < o.wl->uid;
    return wl->key < o.wl->key;
  }
};

struct EquivalenceClass {
  std::set<QueueKey> members;
  bool inadmissible = false;
};

// A LocalQueue's workloads by phase (its status in the read models), kept as phases change.
struct LocalQueueCounts {
  size_t pending = 0;    // Phase::kPending
  size_t reserving = 0;  // holding quota (HoldsQuota)
  size_t admitted = 0;   // Phase::kAdmitted
};

struct ClusterQueueState {
  std::optional<ClusterQueueSpec> spec;
  // Bumped whenever a workload's quota here is released (Kueue's AllocatableResourceGeneration):
  // a flavor search resumed from an older generation starts over. Only compared within a
  // batch (FlavorResume never outlives one), so never stored in a snapshot.
  uint64_t allocatable_generation = 0;
  std::map<std::string, EquivalenceClass> classes;  // by class key
  // Workloads holding quota here, unordered (WorkloadState::holder_index): pointers into
  // Engine's workload map, whose entries holding quota are never erased.
  std::vector<Holder> holders;
  // The same workloads in the order of their keys, for the rare readers that need an order
  // (capacity enforcement, read models). O(holders log holders).
  std::vector<WorkloadState*> AdmittedInKeyOrder() const;
  FrQuantities usage;                               // reserved by admitted/evicting workloads
  size_t pending = 0;
  std::string inactive_reason;                      // empty: active
  // Its node in the quota tree, cached for one tree build (see Engine::NodeOf).
  mutable int node = -1;
  mutable uint64_t node_epoch = 0;
};

struct AdmissionCheckSpec {
  std::string name;
  std::string controller;          // the only identity allowed to report
  std::string parameters;          // a budget check's BudgetPolicy (engine v25)
  int64_t pending_ttl_ns = 0;      // 0: none
  bool reject_on_timeout = false;  // else Retry
  uint32_t retry_limit = 0;
  int64_t backoff_base_ns = 0;
  int64_t backoff_max_ns = 0;
  uint64_t version = 0;
};

struct EngineConfig {
  bool wait_for_pods_ready = false;
  int64_t pods_ready_timeout_ns = 0;
  int32_t backoff_base_seconds = 60;
  int32_t backoff_max_seconds = 3600;
  int32_t backoff_limit_count = 0;   // 0: no limit
  int64_t aging_step_ns = 0;         // 0: no aging
  int32_t aging_priority_max = 0;
  bool fair_sharing = false;
  // Kueue's objectRetentionPolicies.workloads (docs/decider.md, "Retention"): a workload that
  // ended leaves the live state this long after (ledger time); kRetainForever: never.
  int64_t retain_finished_ns = kDefaultRetentionNs;     // finished, rejected, deleted
  int64_t retain_deactivated_ns = kDefaultRetentionNs;
  // Kueue's admissionFairSharing (engine v14): off while the sampling interval is 0.
  int64_t afs_half_life_ns = 0;
  int64_t afs_sampling_ns = 0;
  std::map<int, int64_t> afs_weights_milli;  // resourceWeights by resource id; absent: 1
  // Kueue's fairSharing.preemptionStrategies (values of FsStrategy); empty: its default,
  // LessThanOrEqualToFinalShare then LessThanInitialShare.
  std::vector<uint8_t> fs_strategies;
};

// Kueue's fair-sharing preemption strategies (rules S2-a and S2-b).
enum FsStrategy : uint8_t { kLessThanOrEqualToFinalShare = 0, kLessThanInitialShare = 1 };
// The strategy a name of Kueue's configuration names, or nothing.
std::optional<FsStrategy> FsStrategyNamed(std::string_view name);

// Admission fair sharing (admission_fair_sharing.cc): one LocalQueue's usage, decayed (Kueue's
// AfsUsageLedger entry), and the entry penalties of its reservations not yet admitted.
struct AfsEntry {
  std::map<int, int64_t> consumed;  // resource id -> milli
  int64_t last_update_ns = 0;       // the last sampling tick or settlement
  std::map<std::string, std::map<int, int64_t>> penalties;  // by workload key
  std::map<int, int64_t> penalty_total;  // the sum of `penalties` (derived)
};

// A LocalQueue's admission fair sharing usage: the weighted sum of its consumed usage and
// pending penalties, over its weight; compared exactly (no floating point). A weight of 0 or
// less makes it infinite, as Kueue's CalculateUsage.
struct AfsScore {
  __int128 usage = 0;
  int64_t weight_milli = 1000;
  // <0, 0, >0 as this usage is lower, equal, higher than `other`'s.
  int Compare(const AfsScore& other) const;
};

struct MaintenanceWindowSpec {
  std::string name, flavor;
  int64_t start_ns = 0, end_ns = 0;
};

// The verdict on an input before it is recorded: refused (nothing is written), a no-op, or
// accepted.
struct InputVerdict {
  Status status;
  bool noop = false;
  std::string note;  // why it is a no-op
};

// Why a workload's pod sets request more than the decider can add up (kWorkloadRequestMilliMax,
// or a sum that overflows 64 bits) or have counts Kueue refuses (negative, minCount above
// count); empty when they do not. Pure; Engine::Validate's check.
std::string RequestsOutOfRange(capnp::List<schema::PodSet>::Reader pod_sets);

// Kueue's preemptionVariant of a victim (engine v23): within its ClusterQueue, a hierarchical
// reclaim (the preemptor's subtree holds the quota the victim uses), a reclaim only while the
// preemptor does not borrow, or one while it borrows (borrowWithinCohort).
enum VictimVariant : uint8_t {
  kVariantUnset = 0,
  kWithinClusterQueue,
  kHierarchicalReclaim,
  kReclaimWithoutBorrowing,
  kReclaimWhileBorrowing,
};

// The outcome of nominating a queue head (flavor assignment, maybe preemption).
enum NominationMode { kNoFit = 0, kPreempt = 1, kFit = 2 };  // larger is better
// Kueue's preemptionMode of a flavor, finer than the nomination's (engine v23, its preemption
// oracle): preempting with no candidates, preempting in the ClusterQueue, or reclaiming from
// other ClusterQueues only. Larger is better; before v23 only kGranularNoFit, kGranularPreempt
// and kGranularFit occur.
enum GranularMode {
  kGranularNoFit = 0,
  kGranularNoCandidates = 1,
  kGranularPreempt = 2,
  kGranularReclaim = 3,
  kGranularFit = 4,
};
struct Nomination {
  int mode = kNoFit;
  Assignment assignment;
  std::vector<WorkloadState*> victims;  // for kPreempt: the workloads to evict
  // Engine v23 (Kueue v0.17's classical preemption): why each victim is taken, by position in
  // `victims` (a VictimVariant); empty before v23 and under fair sharing.
  std::vector<uint8_t> victim_variants;
  bool partial = false;              // counts reduced toward minCount
  bool never_fits = false;           // no flavor could ever hold it
  // Engine v26: the quota fits (or may by preemption) but the topology placement does not;
  // the TAS pod sets' flavor-resources then need preemption (Kueue's updateMode(Preempt)).
  bool tas_failed = false;
  // Kueue's Assignment.Borrowing: the largest borrowing level of the chosen flavors (0: no
  // borrowing; 1 for any borrowing before engine v8, the borrowing height since).
  int borrowing_height = 0;
  // It fits only by preempting, but no victim set frees enough (Kueue's noPreemptionCandidates).
  bool preempt_without_victims = false;
  // Engine v16, fair sharing: the ClusterQueue stays within its nominal quota (the request
  // included) in every flavor-resource needing preemption, so the victims of other
  // ClusterQueues were taken without comparing shares and are InCohortReclamation (Kueue's
  // FairSharingPreemptWithinNominal).
  bool reclaim_within_nominal = false;
  // Engine v12: where the next flavor search of each pod set's resource groups starts, by pod
  // set then group (Kueue's LastTriedFlavorIdx + 1: 0 after the last flavor was tried, or when
  // no flavor was chosen). Some start > 0: flavors are left to try (Kueue's PendingFlavors).
  std::vector<std::vector<int32_t>> resume;
  std::string reason = "Pending";
  std::string message;
  std::string resource, flavor;      // the first shortfall found
  int64_t shortfall = 0;
};

// The decider's timers. Kinds in the order of their names, which is their firing order at one
// instant (the names were compared as text before timers were a struct).
enum class TimerKind : uint8_t {
  kDrain,      // "drain": a drain deadline passed
  kMaxExec,    // "maxexec": a maximum execution time passed
  kMaxWait,    // "maxwait": the starvation alert of a ClusterQueue's max wait
  kPodsReady,  // "podsready": waitForPodsReady's timeout
  kRequeue,    // "requeue": a backoff ended
  kRetire,     // "retire": an ended workload's retention passed
  kTtl,        // "ttl": an admission check's pending TTL
  kWindow,     // "window": a maintenance window ended
};
inline constexpr int kTimerKinds = 8;
const char* TimerKindName(TimerKind kind);
std::optional<TimerKind> TimerKindFromName(std::string_view name);

// One timer: what fires, for which object (a workload's key, a window's name), for which
// reservation generation, with a detail (a check's name, a uid, a pending-since time).
struct Timer {
  int64_t at_ns = 0;
  TimerKind kind = TimerKind::kDrain;
  std::string key;
  uint64_t generation = 0;
  std::string detail;
  // The firing order: by time, then as the text "kind|key|generation|detail" compares (the
  // timers' form until snapshot format 3), so decisions keep their order.
  bool operator<(const Timer& other) const;
  bool operator==(const Timer& other) const {
    return at_ns == other.at_ns && kind == other.kind && key == other.key &&
           generation == other.generation && detail == other.detail;
  }
};

// The bounds an Engine asserts (above). Everything but a test of a bound uses the defaults.
struct EngineLimits {
  size_t timers_max = kTimersMax;
  size_t timer_fires_per_round_max = kTimerFiresPerRoundMax;
};

class Engine {
 public:
  Engine();
  // With other bounds than the named constants: only tests, to show each bound is enforced.
  explicit Engine(const EngineLimits& limits);
  // Not copyable: ClusterQueueState::admitted points into the workload map.
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Applies one input event. REQUIRES: the event is an input (not a decision) and its
  // sequence is set. Decisions it forces are kept until EndBatch.
  void ApplyInput(schema::Event::Reader event);

  // Checks an input against the current state before intake records it: a check report
  // from the wrong identity or for a stale generation, a pod report with a stale token, a
  // revocation of nothing are refused; an identical repeated report is a no-op. Pure.
  InputVerdict Validate(schema::Event::Reader event) const;
  // Validate's check of a deletion: the object must be defined (else kInvalidArgument) and not
  // in use (else kFailedPrecondition; deletions.cc).
  Status ValidateDeletion(schema::ObjectDeleted::Reader del) const;

  // Runs admission cycles to a fixpoint and returns every decision since the last EndBatch,
  // as canonical Event bytes stamped with (causation, time) and this engine's version.
  // `version` is the decider behaviour to decide the batch with (DecidingVersion of the batch's
  // last input; REQUIRES: EngineVersionDecidable), and what its decisions record.
  std::vector<std::string> EndBatch(uint64_t batch_last_sequence, int64_t now_ns,
                                    uint32_t version = kEngineVersion);

  // The same decisions, stamped but not yet encoded: for a caller that encodes them elsewhere
  // (replay canonicalizes them on its comparison thread). Encode(i) gives EndBatch's bytes.
  struct BatchDecisions {
    // A decision held in the batch's arena. An orphan zeroes its object when destroyed; the
    // arena is freed whole with the batch, so that work is skipped: the orphan is never
    // destroyed (it owns nothing outside the arena).
    struct Held {
      union {
        capnp::Orphan<schema::Event> orphan;
      };
      explicit Held(capnp::Orphan<schema::Event>&& o) : orphan(std::move(o)) {}
      Held(Held&& other) noexcept : orphan(std::move(other.orphan)) {}
      Held& operator=(Held&&) = delete;
      ~Held() {}
      schema::Event::Builder get() { return orphan.get(); }
      schema::Event::Reader getReader() const { return orphan.getReader(); }
    };
    std::unique_ptr<capnp::MallocMessageBuilder> arena;
    std::vector<Held> events;  // in `arena`
    size_t size() const { return events.size(); }
    std::string Encode(size_t i) const;
  };
  BatchDecisions EndBatchDecisions(uint64_t batch_last_sequence, int64_t now_ns,
                                   uint32_t version = kEngineVersion);

  // Node capacity: node -> (flavor, capacity by resource id, failed).
  struct NodeState {
    std::string flavor;
    std::map<int, int64_t> capacity;
    bool failed = false;
    // Engine v26 (TAS): the Node's labels and taints, and the requests of pods on it that
    // were not admitted through TAS.
    Labels labels;
    std::vector<Taint> taints;
    std::map<int, int64_t> non_tas_usage;
  };

  // Read models.
  const std::map<std::string, WorkloadState>& workloads() const { return workloads_; }
  // The nodes reported (nodeCapacityChanged, nodeFailed, nodeRecovered) by name, and whether a
  // report said its reporter's inventory is complete (engine v19).
  const std::map<std::string, NodeState>& nodes() const { return nodes_; }
  bool node_inventory_complete() const { return node_inventory_complete_; }
  // The ledger's time: the last event's stamp (what views measure ages against).
  int64_t now_ns() const { return now_ns_; }
  // When the next timer is due (a forward simulation advances the clock to it); -1: none.
  int64_t next_timer_ns() const { return timers_.empty() ? -1 : timers_.begin()->at_ns; }
  const std::map<std::string, ClusterQueueState>& cluster_queues() const { return cqs_; }
  const std::map<std::string, LocalQueueSpec>& local_queues() const { return lqs_; }
  // The workloads of each LocalQueue key (namespace/name) that are pending or hold quota, by
  // phase; a key with none is absent. Any workload's queue, defined or not.
  const std::map<std::string, LocalQueueCounts>& local_queue_counts() const { return lq_counts_; }
  // Admission fair sharing entries by LocalQueue key (engine v14), as of their last update.
  const std::map<std::string, AfsEntry>& afs_entries() const { return afs_; }
  const std::map<std::string, CohortSpec>& cohorts() const { return cohort_specs_; }
  const std::map<std::string, Flavor>& flavors() const { return flavors_; }
  const QuotaTree& tree() const { return tree_; }
  const Interner& resource_names() const { return resources_; }
  const Interner& flavor_names() const { return flavor_ids_; }
  const std::map<std::string, AdmissionCheckSpec>& admission_checks() const { return checks_; }
  const std::map<std::string, BudgetPolicySpec>& budget_policies() const { return budgets_; }
  // Engine v26: the Topologies defined (name -> level labels, highest first).
  const std::map<std::string, std::vector<std::string>>& topologies() const { return topologies_; }
  // Engine v26: the TAS snapshot of a flavor (its domains, free capacity and TAS usage now), or
  // nullptr when the flavor has no topology (or its Topology is not defined).
  TasSnapshot* TasFor(int flavor) const;
  // Whether the flavor has a topology that is defined (engine v26), without building anything.
  bool IsTasFlavor(int flavor) const;
  // Whether every flavor of the ClusterQueue is a TAS flavor (Kueue's IsTASOnly).
  bool TasOnly(const ClusterQueueSpec& spec) const;
  // Whether the pod set asks for TAS in this ClusterQueue: a request, or implied.
  bool TasRequested(const PodSetSpec& ps, const ClusterQueueSpec& spec) const;
  // The usage fold the decider keeps (billing's model; engine v25 budgets read it).
  const UsageFold& usage() const { return usage_; }
  // Where a policy stands now, per limited resource: the period, limit, used and committed.
  std::vector<BudgetStanding> BudgetStandings(const BudgetPolicySpec& policy) const;
  const EngineConfig& config() const { return config_; }
  // Effective priority for ordering: priority plus aging for the time waited (bounded).
  int64_t EffectivePriority(const WorkloadState& wl, int64_t now) const;
  uint64_t decisions_made() const { return decisions_made_; }
  // Engine v19: the healthy nodes' capacity of a flavor-resource while it bounds admissions
  // (INT64_MAX: it bounds nothing).
  int64_t node_capacity(Fr fr) const { return NodeCapacity(fr); }
  // Workloads retired from the live state by their retention since this engine was built or
  // loaded (not stored in snapshots: a statistic).
  uint64_t retired() const { return retired_; }

  // Pending workloads of a ClusterQueue in queue order (for reading; O(pending)).
  std::vector<std::string> PendingInOrder(const std::string& cq) const;

  // The quota invariants (projections/invariants.cc), the pair of the code that keeps them
  // (AddUsage, AddHolder, RemoveHolder): a ClusterQueue's usage is the sum of its holders'
  // admissions (and its quota-tree node holds that usage), and a holder is exactly a workload
  // with reserved quota. kCorruption naming the first violation. O(workloads + holders): the
  // tests call it after every input; the decider's hot path does not.
  Status CheckInvariants() const;

 private:
  // A decision being built: an orphan in the batch's arena, encoded at EndBatch.
  struct PendingDecision {
    capnp::Orphan<schema::Event> event;
    uint64_t causation = 0;  // 0: the batch's last input
  };

  // Inputs (engine_inputs.cc): ApplyInput hands each input to one of these.
  std::vector<ResourceGroup> ToGroups(capnp::List<schema::ResourceGroup>::Reader groups);
  void DefineFlavor(schema::ResourceFlavorDef::Reader def, uint64_t seq);
  void DefineCohort(schema::CohortDef::Reader def, uint64_t seq);
  // The ClusterQueue a definition describes, as the decider keeps it (interns its names).
  ClusterQueueSpec ToClusterQueueSpec(schema::ClusterQueueDef::Reader def, uint64_t seq);
  void DefineClusterQueue(schema::ClusterQueueDef::Reader def, uint64_t seq, int64_t now);
  void DefineLocalQueue(schema::LocalQueueDef::Reader def, int64_t now);
  // A definition deleted (ClusterQueue, Cohort, ResourceFlavor, LocalQueue, priority class).
  // `version`: DecidingVersion of the deletion's own stamp (v13 changed what a deletion does).
  void ApplyObjectDeleted(schema::ObjectDeleted::Reader del, uint32_t version, int64_t now);
  void ReadPodSets(capnp::List<schema::PodSet>::Reader list, std::vector<PodSetSpec>* out);
  void InitWorkload(schema::Workload::Reader wl, uint64_t seq, int64_t now, WorkloadState* out);
  void DefinitionsChanged();
  void CountStoppedLocalQueues();  // sets stopped_local_queues_
  void CollectStrictFifoQueues();  // sets strict_fifo_cqs_
  // Evicts every admitted workload `selected` accepts (stopPolicy HoldAndDrain).
  void Drain(const std::function<bool(const WorkloadState&)>& selected, const std::string& reason,
             const std::string& message, int64_t now);
  std::string KeyOf(schema::WorkloadRef::Reader ref) const;
  void Submit(schema::Workload::Reader wl, uint64_t seq, int64_t now);
  void Import(schema::WorkloadImported::Reader imported, uint64_t seq, int64_t now);
  void Finish(const std::string& key, std::string_view message, int64_t now);
  void Remove(const std::string& key, int64_t now);
  void PodsReport(schema::PodsReported::Reader report, int64_t now);

  // Validate's verdicts by input (lifecycle.cc).
  // The workload a reference names, if it exists (and has the uid the reference names).
  const WorkloadState* FindReferenced(schema::WorkloadRef::Reader ref) const;
  InputVerdict ValidateCheckReport(schema::CheckStateReported::Reader r,
                                   capnp::Text::Reader actor_text) const;
  InputVerdict ValidatePodsReport(schema::PodsReported::Reader r) const;
  InputVerdict ValidateWorkload(schema::Workload::Reader wl) const;
  // A finished or deleted workload's reference: its namespace the workload's, a uid given with
  // a name that workload's; kNotFound when it names no workload the ledger holds. `input` names
  // the input in messages.
  InputVerdict ValidateRef(schema::WorkloadRef::Reader ref, const char* input) const;
  // workloadActivationSet: the workload exists and has not ended; the same activity it has is
  // a no-op (admitctl's "unchanged").
  InputVerdict ValidateActivation(schema::WorkloadActivation::Reader activation) const;
  // A definition's names (and a ClusterQueue's flavor names) are not empty.
  InputVerdict ValidateDefinitionNames(schema::Event::Reader event) const;

  // Admission checks (checks.cc).
  void DefineAdmissionCheck(schema::AdmissionCheckDef::Reader def, uint64_t seq);
  void ReportCheck(schema::CheckStateReported::Reader report, uint64_t seq, int64_t now);
  std::vector<std::string> RequiredChecks(const WorkloadState& wl) const;
  void StartChecks(WorkloadState& wl, int64_t now);
  // A check's new state, reported or decided: Ready tries to admit, Retry releases (or evicts)
  // and requeues after `requeue_after_ns`, Rejected evicts to deactivate.
  void SetCheckState(WorkloadState& wl, const std::string& check, CheckState state,
                     const std::string& message, uint64_t seq, int64_t requeue_after_ns,
                     int64_t now);

  // Budgets (budget_check.cc, engine v25; docs/budgets.md).
  void DefineBudgetPolicy(schema::BudgetPolicyDef::Reader def, uint64_t seq, int64_t now,
                          uint32_t version);
  // Folds an input, or a decision made (EndBatchDecisions), into the usage fold, and sums the
  // intervals it closed into usage_buckets_.
  void FeedUsage(schema::Event::Reader event);
  struct BudgetVerdict {
    CheckState state = CheckState::kPending;
    std::string message;
    int64_t requeue_after_ns = 0;
    BudgetWindow window;
    std::vector<BudgetStanding> figures;  // with `need` in need_
    std::vector<__int128> need;
  };
  BudgetVerdict EvaluateBudget(const WorkloadState& wl, const std::string& policy,
                               int64_t now) const;
  // Decides `wl`'s budget checks (just reserved) and records each decision. False when one
  // released or evicted the reservation.
  bool DecideBudgetChecks(WorkloadState& wl, int64_t now);
  // What is left of a holder's expected use of `resource` (milli x ms) at `now`.
  __int128 RemainingUse(const WorkloadState& wl, const BudgetPolicySpec& policy, int resource,
                        int64_t now) const;
  void TryAdmit(WorkloadState& wl, int64_t now);
  // Engine v17: the admission checks' pod template updates of `wl`, merged per podSet (checks
  // in name order) into `*merged`, podSets with no update left out; nothing when no check
  // reported any. Returns the first conflict (Kueue's message: with each other, with the
  // assigned flavors' nodeLabels, or with the podSet's nodeSelector), or nullopt.
  std::optional<std::string> MergeCheckUpdates(const WorkloadState& wl,
                                               std::vector<PodSetUpdate>* merged) const;
  // Engine v17: a reservation whose pod template updates conflict can never start (Kueue's
  // job reconciler finishes it with FailedToStart): quota released, Finished, and a Rejected
  // decision with reason FailedToStart and the conflict. Engine v18: also an Admitted workload
  // whose runtime reports pods failedToStart (the report's message).
  void FailToStart(WorkloadState& wl, const std::string& message, int64_t now);

  // After a reservation (lifecycle.cc): release and retry, deactivation, eviction, revocation.
  void DefineEngineConfig(schema::EngineConfigDef::Reader def);
  void Revoke(schema::RevocationRequested::Reader revocation, int64_t now);
  // Engine v21: Kueue's spec.active (docs/semantics.md, "Deactivation").
  void SetActive(schema::WorkloadActivation::Reader activation, int64_t now);
  void Reactivate(WorkloadState& wl, const std::string& message, int64_t now);
  // Engine v22: an import's PodsReady, admission checks and requeue count (Kueue's record).
  void ImportRecord(schema::WorkloadImported::Reader imported, WorkloadState& wl, int64_t now);
  void ImportPending(schema::WorkloadImported::Reader imported, uint64_t seq, int64_t now);
  // The workloads a revocation evicts, in key order: reserved or admitted, and the one it
  // names (looked up, not searched for), or every one that holds the check or uses the flavor
  // it names. Intake's validation counts them; the fold evicts them.
  std::vector<const WorkloadState*> RevocationTargets(
      schema::RevocationRequested::Reader revocation) const;
  void ReleaseAndRetry(WorkloadState& wl, const std::string& reason, const std::string& message,
                       int64_t requeue_after_ns, int64_t now);
  void Deactivate(WorkloadState& wl, const std::string& reason, const std::string& message,
                  int64_t now);
  void EvictForReason(WorkloadState& wl, const std::string& reason, const std::string& message,
                      int pod_set_action, int64_t drain_deadline_ns, int64_t now);
  void PodsGone(WorkloadState& wl, const std::string& why, int64_t now);

  // Timers and retention (timers.cc).
  // Call when a workload reaches a terminal phase: starts its retention timer.
  void Ended(const WorkloadState& wl, int64_t now);
  // A retention timer fired: the workload leaves the live state with its indexes, if it is
  // still the one that ended (same uid, still terminal).
  void Retire(const std::string& key, const std::string& uid, int64_t now);
  void AddTimer(int64_t at_ns, TimerKind kind, const std::string& key, uint64_t generation,
                const std::string& detail = "");
  // Fires every timer due at `now`; returns true if any changed the state.
  bool FireTimers(int64_t now);
  // A timer about a workload, if it still applies; returns true if it changed the state.
  bool FireWorkloadTimer(const Timer& timer, WorkloadState& wl, int64_t now);
  int64_t Backoff(const WorkloadState& wl, int64_t base_ns, int64_t max_ns, uint32_t attempt) const;

  // Capacity: nodes, maintenance windows, quota reclaims (capacity.cc).
  void NodeChanged(schema::NodeCapacity::Reader node, int kind, int64_t now);
  void DefineMaintenance(schema::MaintenanceWindow::Reader window, int64_t now);
  // Node failures and quota reclaims. `nodes_lost`: a known node failed or shrank (engine v19:
  // only then does node capacity evict; before v19 always).
  void EnforceCapacity(int64_t now, bool nodes_lost);
  // Engine v19: evicts the workloads a failed node's report names (their pods ran on it).
  void EvictFromLostNode(schema::NodeCapacity::Reader node, int64_t now);
  // The flavor-resources short of node capacity and the (ClusterQueue, flavor-resource) pairs
  // over their quota, with draining workloads' usage counted as gone.
  void FindOvercommitted(std::set<Fr>* node_short,
                         std::set<std::pair<std::string, Fr>>* quota_short);
  // The next workload to evict for them (`reason`: NodeFailure or QuotaReclaimed), or none.
  const WorkloadState* CapacityVictim(const std::set<Fr>& node_short,
                                      const std::set<std::pair<std::string, Fr>>& quota_short,
                                      std::string* reason) const;
  std::optional<std::string> MaintenanceConflict(const WorkloadState& wl, int flavor,
                                                 int64_t now) const;
  // The healthy nodes' capacity of a flavor-resource; INT64_MAX when no node of the flavor is
  // known.
  int64_t HealthyNodesCapacity(Fr fr) const;
  int64_t FlavorCapacityLeft(int flavor, int resource) const;   // INT64_MAX: unknown
  // Engine v19: the healthy nodes' capacity of a flavor-resource, INT64_MAX while it bounds
  // nothing (the inventory is not complete, or no node of the flavor is known).
  int64_t NodeCapacity(Fr fr) const;
  // Engine v19: what the nodes of a flavor-resource hold beyond every ClusterQueue's usage in
  // the quota tree (which a victim search lowers while it simulates); INT64_MAX: unbounded.
  int64_t NodeRoom(Fr fr) const;
  // Whether `request` fits the ClusterQueue's quota now and, from engine v19, the node room.
  bool FitsNow(int cq_node, const FrQuantities& request) const;
  // Topology-aware scheduling (tas_engine.cc, engine v26).
  void DefineTopology(schema::TopologyDef::Reader def);
  // Kueue's checkPodSetAndFlavorMatchForTAS: why the flavor cannot hold the pod set, or "".
  std::string TasFlavorMismatch(const PodSetSpec& ps, const ClusterQueueSpec& spec,
                                const ResourceGroup& group, int flavor) const;
  // The TAS requests of a nomination's pod sets, by TAS flavor; false (with *error) when a
  // pod set's flavors are not exactly one TAS flavor.
  struct TasRequests {
    // By TAS flavor id: the pod sets it places, in pod set order, and their pod set indices.
    std::map<int, std::vector<TasSnapshot::PodSetRequest>> by_flavor;
    std::map<int, std::vector<size_t>> index;
  };
  bool CollectTasRequests(const WorkloadState& wl, const ClusterQueueSpec& spec,
                          const Assignment& a, TasRequests* out, std::string* error) const;
  // After the quota fits or may by preemption: the placement (Kueue's assignFlavors' TAS step).
  void PlaceTopology(const WorkloadState& wl, const ClusterQueueSpec& spec, Nomination& n);
  // Places the nomination's TAS pod sets now; false when they do not fit (nothing changed).
  bool PlaceTopologyNow(const WorkloadState& wl, const ClusterQueueSpec& spec, Nomination& n);
  // A report's labels, taints and non-TAS usage into the node (engine v26).
  void NodeTopologyChanged(schema::NodeCapacity::Reader n, NodeState* node);
  // Starts the TAS side of a victim search (FindVictims): adds the TAS pod sets' flavor-
  // resources to `needing` and makes WorkloadFits check the placement; `storage` outlives it.
  void StartTasTrial(const WorkloadState& wl, const ClusterQueueSpec& spec, const Nomination& n,
                     TasRequests* storage, std::vector<Fr>* needing);
  // Whether the nomination's placements still fit (an earlier entry of the cycle may have
  // taken the room: Kueue's TASFlavorSnapshot.Fits).
  bool TopologyStillFits(const Assignment& a) const;
  // Engine v26, a failed node under a TAS workload (Kueue's TASFailedNodeReplacement): its pods
  // there placed on other nodes (within the required domain), recorded as topologyReplaced;
  // false when it has none there, or with *reason when no replacement fits (it is evicted).
  bool ReplaceFailedNode(WorkloadState& wl, const std::string& host, std::string* reason);
  // A holder's TAS usage added to (+1) or removed from (-1) the cached snapshots.
  void TasHolderChanged(const WorkloadState& wl, int sign) const;
  // During a victim search for a nomination whose placement failed: whether it fits the
  // topology with the candidates removed so far.
  bool TasTrialFits() const;

  // Admission fair sharing (admission_fair_sharing.cc; engine v14).
  bool AfsOn() const { return config_.afs_sampling_ns > 0; }
  // Engine v16: fair sharing chooses victims as Kueue's fairPreemptions (preemption.cc).
  bool FairPreemption() const { return config_.fair_sharing && batch_version_ >= 16; }
  // Whether the ClusterQueue orders its heads by LocalQueue usage.
  bool AfsOrders(const ClusterQueueSpec& spec) const {
    return AfsOn() && spec.usage_based_admission;
  }
  // Brings every LocalQueue's entry to `now`: creates missing ones, drops the penalties of
  // workloads that can no longer be admitted from it, and applies the sampling ticks due.
  // Called before each input and each batch's cycles, so a tick sees the usage before the
  // changes at its instant.
  void AfsSync(int64_t now);
  AfsEntry& AfsEntryOf(const std::string& local_queue_key, int64_t now);
  // What the LocalQueue's admitted workloads use, by resource (Kueue's GetAdmittedUsage).
  std::map<int, int64_t> AfsAdmittedUsage(const std::string& local_queue_key) const;
  // A reservation's entry penalty; its admission settles it into the consumed usage.
  void AfsPushPenalty(const WorkloadState& wl, int64_t now);
  void AfsSettle(const WorkloadState& wl, int64_t now);
  AfsScore AfsScoreOf(const std::string& local_queue_key) const;
  // The head order of a ClusterQueue that orders by usage: lower LocalQueue usage first, then
  // HeadBefore.
  bool AfsHeadBefore(const QueueKey& a, const QueueKey& b) const;

  // Queues (engine.cc).
  static std::string ClassKey(const WorkloadState& wl);
  std::string ResolveClusterQueue(const WorkloadState& wl, std::string* reason,
                                  std::string* message) const;
  void Enqueue(WorkloadState& wl, int64_t now);
  void Dequeue(WorkloadState& wl);
  // Engine v13: the queued workloads of a deleted LocalQueue leave their ClusterQueue's queue and
  // wait for a LocalQueue of that name, as Kueue's queue manager drops them (deletions.cc).
  void OrphanQueuedOf(const std::string& local_queue_key, int64_t now);
  void RequeueOrphans(int64_t now);
  void ReactivateTree(const std::string& cq_name);
  // A release only notes its ClusterQueue; the cohort trees are re-activated once, at the
  // start of the next cycle.
  void FlushReactivations();
  void RebuildTreeIfNeeded();
  // The tree node of a ClusterQueue (-1: not in the tree), without a name lookup once cached.
  int NodeOf(const ClusterQueueState& cq, const std::string& name) const;
  // Call after every tree_.Rebuild: refreshes the node caches below.
  void TreeRebuilt();
  void AddUsage(ClusterQueueState& cq, const std::string& cq_name, const FrQuantities& usage,
                int sign);
  // cqs_[wl.cluster_queue], looked up once per ClusterQueue the workload goes to (entries of
  // cqs_ are never erased).
  ClusterQueueState& CqState(WorkloadState& wl) {
    if (wl.cq_state == nullptr) wl.cq_state = &cqs_[wl.cluster_queue];
    return *wl.cq_state;
  }
  // Keep ClusterQueueState::holders: every workload holding quota there, and only those.
  static void AddHolder(ClusterQueueState& cq, WorkloadState& wl);
  static void RemoveHolder(ClusterQueueState& cq, WorkloadState& wl);

  // Reservations and evictions (engine.cc).
  // Takes the nomination's assignment (moved into the workload).
  void Reserve(WorkloadState& wl, Nomination& n, int64_t now);
  void Evict(WorkloadState& victim, const std::string& reason, const std::string& message,
             const std::string& preempt_reason, const WorkloadState* preemptor, int64_t now);
  void ReleaseQuota(WorkloadState& wl, const std::string& reason, int64_t now);
  void RequeueAfterEviction(WorkloadState& wl, int64_t now);
  // CheckInvariants' recount of lq_counts_.
  Status CheckLocalQueueCounts() const;
  // The one way a workload of workloads_ changes phase (keeps lq_counts_).
  void SetPhase(WorkloadState& wl, Phase phase);
  // Adds (+1) or removes (-1) the workload's phase from its LocalQueue's counts.
  void CountPhase(const WorkloadState& wl, int delta);
  void SetPending(WorkloadState& wl, const std::string& reason, const std::string& message,
                  const std::string& resource, const std::string& flavor, int64_t shortfall,
                  int64_t now, bool emit);
  static void SetCondition(WorkloadState& wl, ConditionType type, bool status,
                           std::string_view reason, std::string_view message, int64_t now);

  // The cycle (cycle.cc): Kueue's scheduler.schedule, one step per function.
  struct CycleEntry;  // a nominated head
  bool RunCycle(int64_t now);
  // The heads of the active ClusterQueues, nominated; ClusterQueues without one leave active_.
  void NominateHeads(int64_t now, std::vector<CycleEntry>* entries);
  // Marks every class of an inactive or stopped ClusterQueue inadmissible, its heads told why.
  void HoldHeadsOfInactive(ClusterQueueState& cq, const std::string& cq_name, int64_t now);
  // A pending workload whose reason says it waits for the victims it preempted (engine v28).
  static bool WaitsForVictims(const WorkloadState& wl);
  // The queue's head, past the heads of stopped LocalQueues (each marked and told why).
  WorkloadState* HeadPastStoppedLocalQueues(ClusterQueueState& cq, EquivalenceClass** head_class,
                                            int64_t now);
  // Engine v11: the sleeping StrictFIFO heads that found no victims, as entries that only hold
  // the capacity they need for the cycle.
  void NominateSleepingStrictFifoHeads(int64_t now, std::vector<CycleEntry>* entries);
  // Kueue's entry order (sets each entry's share under fair sharing).
  // A dominant resource share as Kueue's DRS compares them, exactly (integers): the largest
  // borrowed / lendable over the node's flavor-resources, over its weight (preemption.cc).
  struct Share {
    int64_t borrowed = 0;  // of the dominant flavor-resource; 0: not borrowing where it counts
    int64_t lendable = 1;
    int64_t weight_milli = 1000;
    bool ZeroWeightBorrows() const { return weight_milli == 0 && borrowed > 0; }
  };
  // Kueue's CompareDRS: negative, zero or positive as a's share is below, equal to or above b's.
  static int CompareShares(const Share& a, const Share& b);
  // The share of a tree node (ClusterQueue or cohort); `borrowing`: usage above its subtree
  // quota in some flavor-resource (Kueue's DRS.IsBorrowing).
  Share NodeShare(int node, bool* borrowing = nullptr) const;
  std::vector<CycleEntry*> OrderEntries(std::vector<CycleEntry>& entries) const;
  // Engine v24, fair sharing (Kueue's fairSharingIterator): takes from `left` the entry that
  // wins the tournament of the cohort tree of its first entry, shares computed now.
  struct Tournament {
    struct Seen {
      Share share;                // of the player's node below that cohort, its usage added
      bool borrowing_on = false;  // that node borrows in a flavor-resource the entry requests
    };
    struct Player {
      size_t index = 0;           // in `left`
      int node = -1;              // its ClusterQueue's node
      std::map<int, Seen> at;     // by cohort on its path
    };
    std::vector<Player> players;
  };
  CycleEntry* TakeTournamentWinner(std::vector<CycleEntry*>* left);
  // The winning player under `cohort`, or -1 when none plays there.
  int RunTournament(const Tournament& t, int cohort, const std::vector<CycleEntry*>& entries) const;
  // An entry's outcome in the cycle, by its nomination's mode; each returns whether the state
  // changed. `touched_roots`: the cohort trees changed earlier in the cycle.
  bool AdmitFitting(CycleEntry& e, int node, int root, std::set<int>* touched_roots, int64_t now);
  // `held`: capacity held for the rest of the cycle (returned at its end).
  bool PreemptForEntry(CycleEntry& e, int node, int root, std::set<int>* touched_roots,
                       std::vector<std::pair<int, FrQuantities>>* held, int64_t now);
  bool LeavePending(CycleEntry& e, int node, uint32_t resumes,
                    std::vector<std::pair<int, FrQuantities>>* held, int64_t now);
  // A victim's preemption reason and its wording in the eviction message; `index` is its
  // position in `n.victims`.
  std::pair<const char*, const char*> PreemptionReason(const ClusterQueueSpec& spec,
                                                       const WorkloadState& preemptor,
                                                       const WorkloadState& victim,
                                                       const Nomination& n, size_t index) const;
  // The workload to nominate from a ClusterQueue's pending queue, if any.
  // `cls` (optional) receives the head's equivalence class.
  // The queue's head: the best head of its admissible classes; under StrictFIFO the best of
  // all, and none when that one is inadmissible (unless `even_inadmissible`).
  WorkloadState* Head(ClusterQueueState& cq, EquivalenceClass** cls = nullptr,
                      bool even_inadmissible = false) const;
  bool HeadBefore(const QueueKey& a, const QueueKey& b) const;
  // Weighted dominant resource share (integer, per mille) of a ClusterQueue, optionally with
  // `extra` usage added.
  int64_t DominantShare(int cq_node, const FrQuantities* extra) const;
  // `cq`: the state of the workload's ClusterQueue, whose queue it heads.
  Nomination Nominate(const WorkloadState& wl, const ClusterQueueState& cq);
  // Partial admission (podset_reducer.cc): the nomination for the largest reduced counts that
  // fit, or nothing when no podSet may shrink or no reduction fits.
  std::optional<Nomination> NominatePartially(const WorkloadState& wl, const ClusterQueueSpec& spec,
                                              int node);
  // The id of `pods` when one of the ClusterQueue's resource groups covers it (engine v7).
  std::optional<int> CoveredPods(const ClusterQueueSpec& spec) const;
  // Flavor assignment (flavor_assignment.cc), one pod set, resource group and flavor at a time
  // (FlavorSearch).
  struct FlavorSearch;
  Nomination AssignFlavors(const WorkloadState& wl, const ClusterQueueSpec& spec, int cq_node,
                           const std::vector<int32_t>& counts);
  // Engine v12, flavor stickiness (Kueue's LastTriedFlavorIdx): the search a workload resumes,
  // if it has one made under the current quota of its ClusterQueue.
  const FlavorResume* ValidResume(const WorkloadState& wl, int cq_node) const;
  // After a nomination that admits nothing: keeps where its search stopped, when flavors are
  // left to try, so the next cycle tries them (the workload stays awake). False when nothing
  // is left to try, or the workload already resumed (`resumes`) FlavorResumesMax times in this
  // batch. REQUIRES: the workload keeps no search.
  bool KeepFlavorSearch(WorkloadState& wl, const ClusterQueueState& cq, const Nomination& n,
                        uint32_t resumes);
  // How often one workload may resume its search in a batch: each resume moves some group's
  // start forward unless quota changed meanwhile, so the pod sets times the flavors bound it,
  // and the bound keeps the batch's cycles finite whatever else happens in them.
  static uint32_t FlavorResumesMax(const WorkloadState& wl, const ClusterQueueSpec& spec);
  // Preemption (preemption.cc): sets `n.victims` to the minimal victim set that makes room for
  // `n.assignment`, or none (and `n.reclaim_within_nominal`). Under fair sharing since engine
  // v16, Kueue's fairPreemptions (FairSharingSearch); otherwise its classical preemptions.
  struct VictimSearch;
  void FindVictims(const WorkloadState& wl, const ClusterQueueSpec& spec, int cq_node,
                   Nomination& n);
  // Engine v23, Kueue's preemption oracle (SimulatePreemption): whether preempting frees
  // `val` of `fr` for the workload, and the borrowing level it then needs (`*borrow_after`):
  // kGranularNoCandidates (no victims; the level now), kGranularPreempt (some victim in its
  // ClusterQueue) or kGranularReclaim (victims of other ClusterQueues only).
  GranularMode SimulatePreemption(const WorkloadState& wl, const ClusterQueueSpec& spec,
                                  int cq_node, Fr fr, int64_t val, int* borrow_after);
  bool WorkloadFits(int cq_node, const FrQuantities& request, bool allow_borrowing) const;
  // Kueue's canBorrowWithinCohort: with borrowWithinCohort, the priority below which other
  // ClusterQueues' workloads may be preempted while borrowing (the preemptor's priority, or
  // maxPriorityThreshold + 1 when lower); nothing without it.
  // Engine v11: an entry that fits only by preempting but finds no victims holds the capacity
  // it needs for the rest of the cycle, unless its ClusterQueue can always reclaim (Kueue's
  // reserveCapacityForUnreclaimablePreempt); `held` gets what to give back at the cycle's end.
  void HoldCapacity(int cq_node, const Nomination& n, std::vector<std::pair<int, FrQuantities>>* held);
  static std::optional<int32_t> BorrowWithinCohortBelow(const ClusterQueueSpec& spec,
                                                        const WorkloadState& wl);
  // Engine v9: a victim of another ClusterQueue is preempted "while borrowing"
  // (InCohortReclaimWhileBorrowing) when it is below that priority, as Kueue's
  // minimalPreemptions names it; otherwise it is a reclamation (InCohortReclamation).
  static bool VictimWhileBorrowing(const ClusterQueueSpec& spec, const WorkloadState& preemptor,
                                   const WorkloadState& victim);

  // Decisions.
  schema::Event::Builder NewDecision(uint64_t causation);
  schema::WorkloadRef::Builder Ref(schema::WorkloadRef::Builder b, const WorkloadState& wl) const;

  // ---- State: what a snapshot stores (SnapshotCodec) ------------------------------------------
  std::map<std::string, Flavor> flavors_;
  std::map<std::string, ClusterQueueSpec> cq_specs_;
  std::map<std::string, CohortSpec> cohort_specs_;
  std::map<std::string, LocalQueueSpec> lqs_;       // by namespace/name
  std::map<std::string, int32_t> priority_classes_;
  std::map<std::string, AdmissionCheckSpec> checks_;
  std::map<std::string, BudgetPolicySpec> budgets_;  // engine v25
  std::map<std::string, std::vector<std::string>> topologies_;  // engine v26
  // Engine v26: TAS snapshots by flavor id, built on first use and kept current as holders
  // come and go (TasHolderChanged); dropped when nodes or definitions change.
  mutable std::map<int, std::unique_ptr<TasSnapshot>> tas_cache_;
  // Engine v26: the TAS requests of the victim search running for a placement that needs
  // preemption (FindVictims), or nullptr.
  const TasRequests* tas_trial_ = nullptr;
  // The usage model shared with billing (fed every input and decision) and its closed
  // intervals summed per quarter hour for the last kBudgetHorizonMs (engine v25 budgets).
  UsageFold usage_;
  UsageBuckets usage_buckets_;
  int64_t usage_pruned_at_ms_ = 0;
  EngineConfig config_;
  std::map<std::string, MaintenanceWindowSpec> windows_;
  std::map<std::string, NodeState> nodes_;
  // Engine v19: a node report said the reporter's inventory is complete; node capacity bounds
  // admissions from then on.
  bool node_inventory_complete_ = false;
  // Timers, fired in order at EndBatch. At most one per (kind, object, generation, detail) and
  // time; a workload starts a bounded number per reservation (a TTL per check, podsReady,
  // maxexec, requeue, drain, maxwait, retire), and a fired or stale one is dropped.
  std::set<Timer> timers_;  // at most limits_.timers_max
  // Not state: a snapshot does not store it (a loaded Engine has the defaults).
  EngineLimits limits_;
  std::string current_actor_;
  // ClusterQueue states: their queues are stored; spec, holders, usage and pending are derived
  // (RestoreDerivedState).
  std::map<std::string, ClusterQueueState> cqs_;
  std::map<std::string, WorkloadState> workloads_;  // by namespace/name
  std::map<std::string, AfsEntry> afs_;             // by LocalQueue namespace/name (engine v14)
  // Workloads by uid: for a reference by uid alone, which is rare. Kept lazily: submissions
  // append to uid_pending_ (the workloads, whose uid and key do not change), and UidIndex()
  // folds those into uid_to_key_ in order (the last submission of a uid wins, as when it was
  // kept eagerly) before anything reads it or erases from it. Replacing a finished workload
  // folds first, so no pending entry outlives its workload. Logically const. A snapshot stores
  // the folded index.
  const std::map<std::string, std::string>& UidIndex() const;
  mutable std::map<std::string, std::string> uid_to_key_;
  mutable std::vector<const WorkloadState*> uid_pending_;
  std::set<std::string> orphans_;                   // pending with no ClusterQueue to go to
  std::set<std::string> active_;                    // ClusterQueues with admissible heads
  // ClusterQueues whose cohort trees re-activate at the start of the next cycle
  // (FlushReactivations).
  std::set<std::string> reactivate_pending_;
  bool tree_dirty_ = true;
  Interner resources_;
  Interner flavor_ids_;
  uint64_t current_sequence_ = 0;
  uint64_t decisions_made_ = 0;
  int64_t now_ns_ = 0;

  // ---- Derived indexes: rebuilt from the state (RestoreDerivedState, TreeRebuilt) -------------
  // local_queue_counts(): every phase change of a workload in workloads_ goes through SetPhase
  // (a new workload is counted by CountPhase as it is inserted); CheckInvariants recounts.
  std::map<std::string, LocalQueueCounts> lq_counts_;
  // How many of lqs_ are stopped (stopPolicy not None). While none is, a cycle need not look
  // up each head's LocalQueue. Recounted by DefinitionsChanged and on restore.
  size_t stopped_local_queues_ = 0;
  // The ClusterQueues whose spec queues StrictFIFO, by name: the only ones whose sleeping heads
  // a cycle nominates (NominateSleepingStrictFifoHeads), instead of a walk over every
  // ClusterQueue at every cycle (7 % of admitd's CPU with a thousand of them). Collected by
  // DefinitionsChanged and on restore.
  std::set<std::string> strict_fifo_cqs_;
  QuotaTree tree_;                               // rebuilt from the specs and the usage
  uint64_t tree_epoch_ = 1;                      // bumped by every tree rebuild
  std::vector<ClusterQueueState*> cq_by_node_;   // tree node -> its state (nullptr: a cohort)
  // Workloads retired from the live state since this engine was built or loaded (a statistic).
  uint64_t retired_ = 0;

  // ---- Batch-local: empty (or reset) between batches, so never in a snapshot -----------------
  // The behaviour version of the batch being decided (EndBatchDecisions' `version`).
  uint32_t batch_version_ = kEngineVersion;
  // Engine v6: the workloads preempted so far in this batch (one instant of ledger time), and
  // the classes whose head was held back for it (ClusterQueue, class key). Such a workload may
  // still be admitted into free quota in the batch, but it preempts nobody before the next
  // batch: in Kueue a preempted workload is nominated again only after its eviction has been
  // observed and it was requeued, a later cycle. Without this, preemptions whose victims
  // release at once can rotate inside one batch without end (docs/semantics.md).
  std::set<std::string> preempted_in_batch_;
  // Engine v21: the workloads revoked in this batch, not admitted again before the next one
  // (Kueue readmits an evicted workload only in a later cycle, once its eviction is observed).
  std::set<std::string> revoked_in_batch_;
  std::vector<std::pair<std::string, std::string>> held_until_next_batch_;
  std::vector<std::string> resuming_;  // keys of workloads with a FlavorResume in this batch
  // One message per batch holds every decision of the batch (one allocation instead of one
  // per decision); reset by EndBatch. Declared before decisions_, whose orphans live in it, so
  // that they are destroyed first.
  static constexpr unsigned kDecisionArenaFirstWords = 256;
  std::unique_ptr<capnp::MallocMessageBuilder> decision_arena_;
  std::vector<PendingDecision> decisions_;

  // ---- Snapshots (projections/snapshot.cc; docs/replay.md, "Snapshots") ----------------------
  // SnapshotCodec writes and reads the members above. A member added here is either stored
  // by it or rebuilt by RestoreDerivedState, and kSnapshotFormatVersion is bumped.
  friend class SnapshotCodec;
  // Rebuilds every member a snapshot does not store from those it does, once, after loading;
  // `tree_cluster_queues` are the ClusterQueues the quota tree held when the snapshot was
  // taken. kCorruption if the stored members break an invariant the decider relies on.
  Status RestoreDerivedState(const std::set<std::string>& tree_cluster_queues);
  // ---- end of snapshots ----------------------------------------------------------------------
};

}  // namespace admission::projections

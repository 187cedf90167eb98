@0xb6274ef902ef47f1;
# The admission ledger's events: inputs (facts from outside) and decisions (what the engine
# concluded from them). Every stored event is one `Event` message in canonical form.
#
# How this schema may evolve: fields and union members are only ever appended, with the next
# ordinal. Nothing is renamed to mean something else, removed, renumbered or retyped; a field
# that is no longer used stays, documented as obsolete. Defaults are never changed. This keeps
# every ledger ever written readable, and keeps its hashes (over canonical bytes) valid: an
# old event read by new code re-encodes to the same canonical bytes.
#
# Units are in the names: `Ns` is nanoseconds of logical time since the Unix epoch, `Milli`
# is thousandths of the Kubernetes base unit (cpu cores, bytes, gpus, pods...). No floating
# point anywhere: the decider must be deterministic.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("admission::schema");
using Json = import "/capnp/compat/json.capnp";

# ---------------------------------------------------------------------------------------------
# Building blocks.

struct ResourceAmount {
  name @0 :Text;          # e.g. "cpu", "memory", "nvidia.com/gpu"
  milli @1 :Int64;        # exact: 1500 for "1.5" cpu, 1024000 for "1Ki" bytes
}

struct Label {
  key @0 :Text;
  value @1 :Text;
}

struct Taint {
  key @0 :Text;
  value @1 :Text;
  effect @2 :Text;        # NoSchedule, PreferNoSchedule, NoExecute
}

struct Toleration {
  key @0 :Text;
  operator @1 :Text;      # Equal (default) or Exists
  value @2 :Text;
  effect @3 :Text;        # empty matches every effect
}

struct PodSetUpdate {
  # What an admission check asks to add to one podSet's pod template when the workload is
  # admitted (Kueue's AdmissionCheckState.podSetUpdates): additive only; a key that another
  # source already sets to a different value is a conflict (docs/semantics.md, "Admission checks").
  podSet @0 :Text;                  # a podSet name of the workload
  labels @1 :List(Label);
  annotations @2 :List(Label);
  nodeSelector @3 :List(Label);
  tolerations @4 :List(Toleration);
}

struct SelectorRequirement {
  key @0 :Text;
  operator @1 :Text;      # In, NotIn, Exists, DoesNotExist
  values @2 :List(Text);
}

struct LabelSelector {
  # Empty selector: `matchesAll` tells "{}" (everything) from absent (nothing) where it matters.
  matchesAll @0 :Bool;
  matchLabels @1 :List(Label);
  matchExpressions @2 :List(SelectorRequirement);
}

# ---------------------------------------------------------------------------------------------
# Definitions (inputs). Each accepted definition is a new version of that object; its sequence
# number is the version that decisions cite (the "quota version" of a ClusterQueue).

struct ResourceFlavorDef {
  name @0 :Text;
  nodeLabels @1 :List(Label);       # GPU model, GPU memory, topology block, region...
  nodeTaints @2 :List(Taint);
  tolerations @3 :List(Toleration);
  topologyName @4 :Text;
}

struct ResourceQuota {
  name @0 :Text;
  nominalQuotaMilli @1 :Int64;
  hasBorrowingLimit @2 :Bool;
  borrowingLimitMilli @3 :Int64;
  hasLendingLimit @4 :Bool;
  lendingLimitMilli @5 :Int64;
}

struct FlavorQuotas {
  name @0 :Text;
  resources @1 :List(ResourceQuota);
}

struct ResourceGroup {
  coveredResources @0 :List(Text);
  flavors @1 :List(FlavorQuotas);   # in preference order
}

struct CohortDef {
  name @0 :Text;
  parentName @1 :Text;
  resourceGroups @2 :List(ResourceGroup);
  fairSharingWeightMilli @3 :Int64 = 1000;
}

enum QueueingStrategy {
  bestEffortFifo @0;
  strictFifo @1;
}

enum StopPolicy {
  none @0;
  hold @1;
  holdAndDrain @2;
}

enum WithinClusterQueuePolicy {
  never @0;
  lowerPriority @1;
  lowerOrNewerEqualPriority @2;
}

enum ReclaimWithinCohortPolicy {
  never @0;
  lowerPriority @1;
  any @2;
}

struct PreemptionPolicy {
  withinClusterQueue @0 :WithinClusterQueuePolicy;
  reclaimWithinCohort @1 :ReclaimWithinCohortPolicy;
  borrowWithinCohort @2 :ReclaimWithinCohortPolicy;   # never or lowerPriority
  hasMaxPriorityThreshold @3 :Bool;
  maxPriorityThreshold @4 :Int32;
}

enum FungibilityAction {
  borrow @0;           # whenCanBorrow: Borrow (default)
  tryNextFlavor @1;
  preempt @2;          # whenCanPreempt: Preempt
}

enum FungibilityPreference {
  borrowingOverPreemption @0;
  preemptionOverBorrowing @1;
}

struct FlavorFungibility {
  whenCanBorrow @0 :FungibilityAction = borrow;
  whenCanPreempt @1 :FungibilityAction = tryNextFlavor;
  preference @2 :FungibilityPreference;
}

struct AdmissionCheckStrategyRule {
  name @0 :Text;
  onFlavors @1 :List(Text);          # empty: every flavor
}

struct ClusterQueueDef {
  name @0 :Text;
  cohortName @1 :Text;
  resourceGroups @2 :List(ResourceGroup);
  queueingStrategy @3 :QueueingStrategy;
  namespaceSelector @4 :LabelSelector;
  stopPolicy @5 :StopPolicy;
  preemption @6 :PreemptionPolicy;
  flavorFungibility @7 :FlavorFungibility;
  admissionChecks @8 :List(Text);
  admissionChecksStrategy @9 :List(AdmissionCheckStrategyRule);
  fairSharingWeightMilli @10 :Int64 = 1000;
  maxWaitNs @11 :Int64;              # 0: no starvation alert
  admissionMode @12 :AdmissionMode;  # spec.admissionScope.admissionMode (engine v14)
}

enum AdmissionMode {
  noAdmissionFairSharing @0;
  usageBasedAdmissionFairSharing @1;
}

struct LocalQueueDef {
  namespace @0 :Text;
  name @1 :Text;
  clusterQueue @2 :Text;
  stopPolicy @3 :StopPolicy;
  fairSharingWeightMilli @4 :Int64 = 1000;  # spec.fairSharing.weight (admission fair sharing)
  # status.fairSharing.admissionFairSharingStatus.consumedResources, as Kueue persisted it: the
  # usage a LocalQueue's admission fair sharing starts from (Kueue's initializeAfsIfNeeded seeds
  # from it, with its lastUpdate reset to now, so the status' lastUpdate is not kept).
  consumedResourcesGiven @5 :Bool;   # (not "hasConsumedResources": Go capnp generates that method for the list)
  consumedResources @6 :List(ResourceAmount);
}

enum OnTimeout {
  retry @0;
  reject @1;
}

struct AdmissionCheckDef {
  name @0 :Text;
  controllerName @1 :Text;           # the owner identity: the only reporter allowed
  pendingTtlNs @2 :Int64;            # 0: no TTL
  onTimeout @3 :OnTimeout;
  retryLimit @4 :UInt32;             # Retry reports before deactivation; 4294967295: no limit
  backoffBaseNs @5 :Int64;
  backoffMaxNs @6 :Int64;
  parameters @7 :Text;
  # Engine v25: the BudgetPolicy a check of controller admission-ledger.io/budget decides by
  # (spec.parameters.name with kind BudgetPolicy); empty otherwise.
}

# ---------------------------------------------------------------------------------------------
# Budgets (engine v25, docs/budgets.md): resource-hours per period, decided by the ledger.

enum BudgetScopeKind {
  namespace @0;
  localQueue @1;
  clusterQueue @2;
  cohort @3;
}

enum BudgetPeriodKind {
  month @0;      # calendar months in timeZone
  week @1;       # calendar weeks from Monday 00:00 in timeZone
  rolling @2;    # the window before now
}

enum UnknownRuntime {
  maximumExecutionTime @0;   # without an expected runtime, count maximumExecutionTime
  reject @1;                 # without an expected runtime, reject
}

struct UtcOffset {
  fromNs @0 :Int64;            # in force from this instant (UTC)
  offsetSeconds @1 :Int32;     # local time = UTC + offset
}

struct BudgetLimit {
  resource @0 :Text;
  milliUnitHours @1 :Int64;    # e.g. 2000 GPU-hours: 2000000
}

struct TopologyDef {
  # kueue.x-k8s.io Topology (engine v26): the node labels of its levels, highest first
  # (e.g. block, rack, kubernetes.io/hostname).
  name @0 :Text;
  levels @1 :List(Text);
}

struct BudgetPolicyDef {
  name @0 :Text;
  scopeKind @1 :BudgetScopeKind;
  scopeNamespace @2 :Text;     # namespace and localQueue scopes
  scopeName @3 :Text;          # localQueue, clusterQueue and cohort scopes
  limits @4 :List(BudgetLimit);
  period @5 :BudgetPeriodKind;
  timeZone @6 :Text;           # IANA name; calendar periods
  utcOffsets @7 :List(UtcOffset);
  # The zone's offsets from 1970 (to 2037, where the system tz database's transitions end),
  # resolved when the policy was recorded (ascending; the
  # first from 1970 or earlier), so a tzdata update cannot change a replay.
  windowNs @8 :Int64;          # rolling periods
  halfLifeNs @9 :Int64;        # 0: no decay
  unknownRuntime @10 :UnknownRuntime;
}

struct BudgetFigure {
  # Resource-time in milli-units x milliseconds, as exact decimals (memory overflows 64 bits).
  resource @0 :Text;
  limit @1 :Text;
  used @2 :Text;
  committed @3 :Text;
  need @4 :Text;
}

struct PriorityClassDef {
  name @0 :Text;
  value @1 :Int32;
  description @2 :Text;
}

struct EngineConfigDef {
  # Knobs of the decider that are part of its input, so replay sees the same values.
  waitForPodsReadyEnabled @0 :Bool;
  podsReadyTimeoutNs @1 :Int64;
  backoffBaseSeconds @2 :Int32 = 60;
  backoffMaxSeconds @3 :Int32 = 3600;
  backoffLimitCount @4 :Int32;
  agingStepNs @5 :Int64;             # 0: no aging
  agingPriorityMax @6 :Int32;
  fairSharingEnabled @7 :Bool;
  # Kueue's objectRetentionPolicies.workloads: how long after it ended a workload stays in the
  # decider's live state (the ledger keeps everything). afterFinished covers finished, rejected
  # and deleted workloads, afterDeactivatedByKueue deactivated ones. -1: kept for ever.
  # Default 24 h (Kueue's default keeps them; an authority running for years cannot).
  retainFinishedNs @8 :Int64 = 86400000000000;
  retainDeactivatedNs @9 :Int64 = 86400000000000;
  # Kueue's admissionFairSharing (engine v14; docs/semantics.md, "Admission fair sharing"):
  # usageSamplingInterval 0 leaves it off. resourceWeights in milli (absent resource: 1).
  afsUsageHalfLifeNs @10 :Int64;
  afsUsageSamplingIntervalNs @11 :Int64;
  afsResourceWeights @12 :List(ResourceAmount);
  # Kueue's fairSharing.preemptionStrategies, in order: "LessThanOrEqualToFinalShare",
  # "LessThanInitialShare" (empty: both, in that order, Kueue's default).
  fairSharingPreemptionStrategies @13 :List(Text);
}

# ---------------------------------------------------------------------------------------------
# Workloads.

struct PodSet {
  name @0 :Text;
  count @1 :Int32;
  minCount @2 :Int32;                # 0: partial admission not allowed
  requests @3 :List(ResourceAmount); # per pod
  nodeSelector @4 :List(Label);
  tolerations @5 :List(Toleration);
  requiredAffinity @6 :List(SelectorRequirement);  # one nodeSelectorTerm, ANDed
  topologyRequest @7 :PodSetTopologyRequest;
  # Engine v26 (docs/tas.md): Kueue's podSet topologyRequest, from the pod template's
  # kueue.x-k8s.io/podset-*-topology annotations or a Workload's spec. Unset (null): none.
}

struct PodSetTopologyRequest {
  # Kueue's PodSetTopologyRequest: at most one of required, preferred, unconstrained.
  required @0 :Text;                 # a level's node label: all pods in one domain of it
  preferred @1 :Text;                # the lowest level that fits, then up, then spread
  unconstrained @2 :Bool;
  sliceRequiredTopology @3 :Text;    # podset-slice-required-topology
  sliceSize @4 :Int32;               # podset-slice-size; 0: not given
  groupName @5 :Text;                # podset-group-name: pod sets placed together
}

struct Workload {
  namespace @0 :Text;
  name @1 :Text;
  uid @2 :Text;
  queueName @3 :Text;
  hasPriority @4 :Bool;
  priority @5 :Int32;
  priorityClassName @6 :Text;
  podSets @7 :List(PodSet);
  labels @8 :List(Label);
  annotations @9 :List(Label);
  creationTimestampNs @10 :Int64;
  expectedRuntimeNs @11 :Int64;       # for maintenance windows; 0: unknown
  maxExecutionNs @12 :Int64;          # 0: unlimited
  active @13 :Bool = true;
  namespaceLabels @14 :List(Label);   # the namespace's labels, for namespaceSelector
  priorityClassSource @15 :Text;
  # Which kind of class priorityClassName names: "kueue.x-k8s.io/workloadpriorityclass" or
  # "scheduling.k8s.io/priorityclass" (Kueue v1beta1 spelling; v1beta2 priorityClassRef maps to
  # it). Empty: unknown or no class.
}

struct FlavorRef {
  resource @0 :Text;
  flavor @1 :Text;
}

struct PodSetAssignment {
  name @0 :Text;
  flavors @1 :List(FlavorRef);
  resourceUsage @2 :List(ResourceAmount);   # total for the podSet
  count @3 :Int32;
  topologyAssignment @4 :TopologyAssignment;  # engine v26: a TAS placement; null: none
}

struct TopologyAssignment {
  # Kueue's TopologyAssignment (v1beta1 shape): the levels given (the lowest only when it is
  # kubernetes.io/hostname) and per domain its values at those levels and its pod count.
  levels @0 :List(Text);
  domains @1 :List(TopologyDomainAssignment);
}

struct TopologyDomainAssignment {
  values @0 :List(Text);
  count @1 :Int32;
}

struct Admission {
  clusterQueue @0 :Text;
  podSetAssignments @1 :List(PodSetAssignment);
}

struct WorkloadRef {
  namespace @0 :Text;
  name @1 :Text;
  uid @2 :Text;
}

enum CheckState {
  pending @0;
  ready @1;
  retry @2;
  rejected @3;
}

enum PodsReport {
  released @0;       # write-ahead: the runtime is about to create pods
  ready @1;
  terminated @2;
  finished @3;
  failedToStart @4;  # engine v18: the runtime could not start the admitted pods (none ran);
                     # Kueue's FailedToStart: the workload finishes and its quota is released
}

enum PodSetAction {
  terminate @0;
  drain @1;
}

# ---------------------------------------------------------------------------------------------
# Inputs.

struct WorkloadSubmitted {
  workload @0 :Workload;
}

struct WorkloadImported {
  workload @0 :Workload;
  admission @1 :Admission;
  # Kueue's record of the admission, from the Workload's status (engine v22; 0, false or empty:
  # not known, the import's own time and nothing more, as before v22).
  reservedAtNs @2 :Int64;            # the QuotaReserved condition's lastTransitionTime
  admittedAtNs @3 :Int64;            # the Admitted condition's lastTransitionTime
  podsReady @4 :Bool;                # the PodsReady condition is True
  podsReadyAtNs @5 :Int64;           # its lastTransitionTime
  checks @6 :List(ImportedCheck);    # status.admissionChecks (every one Ready)
  requeueCount @7 :UInt32;           # status.requeueState.count
  requeueAtNs @8 :Int64;             # status.requeueState.requeueAt: waiting out a backoff
  evictionReason @9 :Text;           # the Evicted condition (True): its reason
  evictionMessage @10 :Text;         # ... its message
  evictedAtNs @11 :Int64;            # ... its lastTransitionTime
  # An import without an admission (admission.clusterQueue empty, engine v22) is a pending
  # workload: queued by its creation time, after its backoff; from engine v23 by the eviction's
  # time when Kueue orders it so (evicted by PodsReadyTimeout or an AdmissionCheck). With an
  # admission, an Evicted condition is an eviction in progress.
}

struct ImportedCheck {
  name @0 :Text;
  message @1 :Text;
  lastTransitionNs @2 :Int64;
}

struct WorkloadDeleted {
  workload @0 :WorkloadRef;
}

struct WorkloadFinished {
  workload @0 :WorkloadRef;
  message @1 :Text;
}

# Kueue's Workload spec.active, set on a workload the ledger holds (admitctl stop|resume
# workload, or the bridge forwarding a Workload object's spec.active). false deactivates it: a
# pending one leaves its queue, a reserved or admitted one is evicted (reason Deactivated) and
# deactivated once its pods are gone. true reactivates a deactivated one: requeued (reason
# Reactivated) with its retries forgotten. Engine v21 on.
struct WorkloadActivation {
  workload @0 :WorkloadRef;
  active @1 :Bool;
  message @2 :Text;                  # why, as the requester says it; empty: none
}

struct CheckStateReported {
  workload @0 :WorkloadRef;
  check @1 :Text;
  generation @2 :UInt64;
  state @3 :CheckState;
  message @4 :Text;
  requeueAfterNs @5 :Int64;
  viaFieldManager @6 :Text;
  # Empty: reported by the check's controller itself (the actor is its controllerName, proven
  # by its own certificate: the strong path). Set: forwarded by a bridge (the actor) from the
  # status of a cluster's Workload object, where the API server's managedFields named this field
  # manager as the writer of the check's state. The weaker proof: a field manager is a name the
  # writer chose, and the bridge vouches only that it matched the check's controllerName.
  podSetUpdates @7 :List(PodSetUpdate);
  # The check's pod template updates, at most one per podSet (engine v17 on). The latest report
  # of the check replaces the ones before it; Kueue's webhook keeps them immutable once Ready.
}

struct PodsReported {
  workload @0 :WorkloadRef;
  report @1 :PodsReport;
  fencingToken @2 :Text;
  message @3 :Text;
  # Why (failedToStart: the runtime's error, as Kueue's Finished condition message). Left unset
  # (null, not "") when there is none, so the other reports keep their canonical bytes.
}

struct NodeCapacity {
  node @0 :Text;
  flavor @1 :Text;
  capacity @2 :List(ResourceAmount);
  # Engine v19: the reporter's node inventory is complete with this report (the bridge: its
  # first full list of nodes is reported). From then on node capacity bounds admissions; sticky.
  inventoryComplete @3 :Bool;
  # Engine v19, nodeFailed: the workloads whose pods ran on the node (evicted first, with a
  # deadline for their pods to be reported gone). Unset (null) when the reporter does not know.
  workloads @4 :List(WorkloadRef);
  # Engine v26 (topology-aware scheduling): the Node's labels and taints, and what pods not
  # admitted through TAS request on it (DaemonSets and the like). Unset (null): unknown.
  labels @5 :List(Label);
  taints @6 :List(Taint);
  nonTasUsage @7 :List(ResourceAmount);
}

struct MaintenanceWindow {
  name @0 :Text;
  flavor @1 :Text;
  startNs @2 :Int64;
  endNs @3 :Int64;
}

struct RevocationRequested {
  target :union {
    workload @0 :WorkloadRef;
    check @1 :Text;
    flavor @2 :Text;
  }
  reason @3 :Text;
  podSetAction @4 :PodSetAction;
  drainDeadlineNs @5 :Int64;
}

struct ClockAdvanced {
  toNs @0 :Int64;
}

struct ObjectDeleted {
  kind @0 :Text;
  namespace @1 :Text;
  name @2 :Text;
}

# ---------------------------------------------------------------------------------------------
# Decisions. Each names the workload, the reason in Kueue's vocabulary where one exists, and the
# versions (sequences) of the definitions and reports it was made from.

struct QuotaReserved {
  workload @0 :WorkloadRef;
  generation @1 :UInt64;
  admission @2 :Admission;
  quotaVersion @3 :UInt64;            # sequence of the ClusterQueue definition used
  borrowing @4 :Bool;
  message @5 :Text;
}

struct Admitted {
  workload @0 :WorkloadRef;
  generation @1 :UInt64;
  fencingToken @2 :Text;
  quotaVersion @3 :UInt64;
  checkVersions @4 :List(UInt64);     # sequences of the check reports used
  podSetUpdates @5 :List(PodSetUpdate);
  # Engine v17 on, and only when some check reported updates: per podSet (in the workload's
  # podSet order), the admission checks' updates merged (checks in name order), for the runtime
  # to apply to the pod template together with the assigned flavors' nodeLabels and tolerations
  # (the decider has checked that these do not conflict). Absent otherwise, so admissions
  # without updates keep their bytes.
}

struct TopologyReplaced {
  # Engine v26: a TAS workload's pods on a failed node moved to other nodes (Kueue's
  # TASFailedNodeReplacement, on by default in v0.17): the pod set's placement from now on.
  workload @0 :WorkloadRef;
  generation @1 :UInt64;
  podSet @2 :Text;
  node @3 :Text;                                # the failed node's hostname
  topologyAssignment @4 :TopologyAssignment;
}

struct BudgetDecided {
  # Engine v25: the ledger decided a budget check at quota reservation (docs/budgets.md).
  workload @0 :WorkloadRef;
  generation @1 :UInt64;
  check @2 :Text;
  policy @3 :Text;
  state @4 :CheckState;        # pending (no such policy), ready, retry or rejected
  message @5 :Text;            # the arithmetic
  requeueAfterNs @6 :Int64;    # retry: until the next period start (or half-life boundary)
  periodStartNs @7 :Int64;
  periodEndNs @8 :Int64;       # 0: rolling
  figures @9 :List(BudgetFigure);
}

struct PendingReasonChanged {
  workload @0 :WorkloadRef;
  reason @1 :Text;                    # NoMatchingFlavor, WaitingForQuota, ...
  message @2 :Text;
  resource @3 :Text;
  flavor @4 :Text;
  shortfallMilli @5 :Int64;
}

struct EvictionStarted {
  workload @0 :WorkloadRef;
  generation @1 :UInt64;
  reason @2 :Text;                    # Preempted, PodsReadyTimeout, AdmissionCheck, ...
  message @3 :Text;
  podSetAction @4 :PodSetAction;
  drainDeadlineNs @5 :Int64;
}

struct QuotaReleased {
  workload @0 :WorkloadRef;
  generation @1 :UInt64;
  reason @2 :Text;
}

struct Requeued {
  workload @0 :WorkloadRef;
  requeueAtNs @1 :Int64;
  attempt @2 :UInt32;
  reason @3 :Text;
}

struct Rejected {
  workload @0 :WorkloadRef;
  reason @1 :Text;
  message @2 :Text;
}

struct Deactivated {
  workload @0 :WorkloadRef;
  reason @1 :Text;
  message @2 :Text;
}

struct Preempted {
  workload @0 :WorkloadRef;           # the victim
  preemptor @1 :WorkloadRef;
  reason @2 :Text;                    # InClusterQueue, InCohortReclamation, ...
  message @3 :Text;
}

struct StarvationAlert {
  workload @0 :WorkloadRef;
  waitingNs @1 :Int64;
  message @2 :Text;
}

struct DrainDeadlinePassed {
  workload @0 :WorkloadRef;
  generation @1 :UInt64;
  message @2 :Text;
}

# ---------------------------------------------------------------------------------------------
# The envelope.

struct Event {
  sequence @0 :UInt64;                # dense, from 1; assigned by the ledger
  recordedAtNs @1 :Int64;             # logical time; never decreases along the ledger
  actor @2 :Text;                     # identity of the caller (or "engine" for decisions)
  idempotencyKey @3 :Text;            # empty: not deduplicated
  causationSequence @4 :UInt64;       # for decisions: the input that caused them
  engineVersion @5 :UInt32;           # for decisions: the decider version that made them
  prevHash @6 :Data $Json.hex;        # SHA-256 chain value after the previous event

  body :union {
    # Inputs: definitions.
    flavorDefined @7 :ResourceFlavorDef;
    cohortDefined @8 :CohortDef;
    clusterQueueDefined @9 :ClusterQueueDef;
    localQueueDefined @10 :LocalQueueDef;
    admissionCheckDefined @11 :AdmissionCheckDef;
    priorityClassDefined @12 :PriorityClassDef;
    engineConfigDefined @13 :EngineConfigDef;
    objectDeleted @14 :ObjectDeleted;
    # Inputs: workloads and the world.
    workloadSubmitted @15 :WorkloadSubmitted;
    workloadImported @16 :WorkloadImported;
    workloadDeleted @17 :WorkloadDeleted;
    workloadFinished @18 :WorkloadFinished;
    checkStateReported @19 :CheckStateReported;
    podsReported @20 :PodsReported;
    nodeCapacityChanged @21 :NodeCapacity;
    nodeFailed @22 :NodeCapacity;
    nodeRecovered @23 :NodeCapacity;
    maintenanceWindowDefined @24 :MaintenanceWindow;
    revocationRequested @25 :RevocationRequested;
    clockAdvanced @26 :ClockAdvanced;
    # Decisions.
    quotaReserved @27 :QuotaReserved;
    admitted @28 :Admitted;
    pendingReasonChanged @29 :PendingReasonChanged;
    evictionStarted @30 :EvictionStarted;
    quotaReleased @31 :QuotaReleased;
    requeued @32 :Requeued;
    rejected @33 :Rejected;
    deactivated @34 :Deactivated;
    preempted @35 :Preempted;
    starvationAlert @36 :StarvationAlert;
    drainDeadlinePassed @37 :DrainDeadlinePassed;
    # An input added after the decisions (engine v21): schema/event_codec.h IsDecision.
    workloadActivationSet @39 :WorkloadActivation;
    # Engine v25: budgets (docs/budgets.md).
    budgetPolicyDefined @40 :BudgetPolicyDef;
    budgetDecided @41 :BudgetDecided;
    # Engine v26: topology-aware scheduling (docs/tas.md).
    topologyDefined @42 :TopologyDef;
    topologyReplaced @43 :TopologyReplaced;
  }

  endsBatch @38 :Bool;
  # Set by intake on the last input of one atomic append: the decider runs its admission cycles
  # after this input, and the decisions they make follow it in the same append.
}

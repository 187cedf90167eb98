@0xe34e6302a0e4a6a5;
# A snapshot: the projection state after a ledger sequence (docs/replay.md, "Snapshots").
# Stored as one `Snapshot` message in canonical form; its hash is the SHA-256 of those bytes.
#
# The state is the decider's own model (projections/engine.h), member for member: names are
# interned ids where the decider keeps ids (`resourceNames` and `flavorNames` give the ids'
# order), enums are the decider's enum values as integers (checked on load), maps are lists
# sorted by key (the decider's ordered containers), so the same state always has the same bytes.
# Only what cannot be derived is stored; Engine::RestoreDerivedState rebuilds the rest.
#
# Evolution: a change of what is stored bumps `formatVersion` (projections/snapshot.h); a snapshot
# of another format or engine version is not loaded (startup folds from an older one or the
# genesis), so unlike events.capnp this schema may change freely with the version.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("admission::schema::snap");

struct Snapshot {
  formatVersion @0 :UInt32;
  engineVersion @1 :UInt32;     # projections::kEngineVersion of the build that wrote it
  afterSequence @2 :UInt64;     # the state after this event (the last event of an append)
  chainHash @3 :Data;           # the ledger's chain value after `afterSequence` (32 bytes)
  state @4 :EngineState;
  definitions @5 :List(Definition);  # intake's current definition bodies (ops::Service)
}

struct Definition {
  key @0 :Text;                 # "kind/namespace/name"
  body @1 :Data;                # canonical Event bytes of the definition, envelope cleared
}

# ---------------------------------------------------------------------------------------------
# Building blocks (projections/model.h).

struct TextPair {
  key @0 :Text;
  value @1 :Text;
}

struct IdAmount {               # std::map<int, int64_t>
  id @0 :Int32;
  amount @1 :Int64;
}

struct IdPair {                 # std::map<int, int>
  id @0 :Int32;
  value @1 :Int32;
}

struct FrAmount {               # FrQuantities: (flavor << 32 | resource) -> milli
  fr @0 :UInt64;
  amount @1 :Int64;
}

struct Toleration {
  key @0 :Text;
  op @1 :Text;
  value @2 :Text;
  effect @3 :Text;
}

struct Taint {
  key @0 :Text;
  value @1 :Text;
  effect @2 :Text;
}

struct Requirement {
  key @0 :Text;
  op @1 :Text;
  values @2 :List(Text);
}

struct LabelSelector {
  present @0 :Bool;
  matchLabels @1 :List(TextPair);
  matchExpressions @2 :List(Requirement);
}

struct Flavor {
  key @0 :Text;
  name @1 :Text;
  nodeLabels @2 :List(TextPair);
  nodeTaints @3 :List(Taint);
  tolerations @4 :List(Toleration);
  version @5 :UInt64;
  topology @6 :Text;            # format 9 (engine v26): spec.topologyName
}

struct ResourceQuota {
  resource @0 :Int32;
  nominal @1 :Int64;
  hasBorrowingLimit @2 :Bool;
  borrowingLimit @3 :Int64;
  hasLendingLimit @4 :Bool;
  lendingLimit @5 :Int64;
}

struct FlavorQuotas {
  flavor @0 :Int32;
  resources @1 :List(ResourceQuota);
}

struct ResourceGroup {
  covered @0 :List(Int32);
  flavors @1 :List(FlavorQuotas);
}

struct AdmissionCheckRule {
  name @0 :Text;
  flavors @1 :List(Text);
}

struct ClusterQueueSpec {
  key @0 :Text;
  name @1 :Text;
  cohort @2 :Text;
  resourceGroups @3 :List(ResourceGroup);
  queueing @4 :UInt8;           # QueueingStrategy
  namespaceSelector @5 :LabelSelector;
  stopPolicy @6 :UInt8;         # StopPolicy
  withinClusterQueue @7 :UInt8; # WithinCq
  reclaimWithinCohort @8 :UInt8;  # ReclaimPolicy
  borrowWithinCohort @9 :UInt8;   # ReclaimPolicy
  hasMaxPriorityThreshold @10 :Bool;
  maxPriorityThreshold @11 :Int32;
  whenCanBorrow @12 :UInt8;     # FungibilityAction
  whenCanPreempt @13 :UInt8;    # FungibilityAction
  preference @14 :UInt8;        # FungibilityPreference
  admissionChecks @15 :List(AdmissionCheckRule);
  fairWeightMilli @16 :Int64;
  maxWaitNs @17 :Int64;
  version @18 :UInt64;
  usageBasedAdmission @19 :Bool;  # admissionMode UsageBasedAdmissionFairSharing (engine v14)
}

struct CohortSpec {
  key @0 :Text;
  name @1 :Text;
  parent @2 :Text;
  resourceGroups @3 :List(ResourceGroup);
  fairWeightMilli @4 :Int64;
  version @5 :UInt64;
}

struct LocalQueueSpec {
  key @0 :Text;                 # namespace/name
  namespace @1 :Text;
  name @2 :Text;
  clusterQueue @3 :Text;
  stopPolicy @4 :UInt8;
  weightMilli @5 :Int64;
  hasConsumedSeed @6 :Bool;
  consumedSeed @7 :List(IdAmount);
}

struct PriorityClass {
  name @0 :Text;
  value @1 :Int32;
}

struct AdmissionCheckSpec {
  key @0 :Text;
  name @1 :Text;
  controller @2 :Text;
  pendingTtlNs @3 :Int64;
  rejectOnTimeout @4 :Bool;
  retryLimit @5 :UInt32;
  backoffBaseNs @6 :Int64;
  backoffMaxNs @7 :Int64;
  version @8 :UInt64;
  parameters @9 :Text;
}

# Format 8 (engine v25): budgets and the usage fold.
struct BudgetPolicy {
  definition @0 :Data;          # canonical Event bytes of its budgetPolicyDefined
  version @1 :UInt64;
}

struct UsageBucket {            # projections::UsageBuckets: milli x ms in a quarter hour
  namespace @0 :Text;
  localQueue @1 :Text;
  clusterQueue @2 :Text;
  cohort @3 :Text;
  resource @4 :Text;
  startMs @5 :Int64;
  milliMsHigh @6 :Int64;
  milliMsLow @7 :UInt64;
}

struct EngineConfig {
  waitForPodsReady @0 :Bool;
  podsReadyTimeoutNs @1 :Int64;
  backoffBaseSeconds @2 :Int32;
  backoffMaxSeconds @3 :Int32;
  backoffLimitCount @4 :Int32;
  agingStepNs @5 :Int64;
  agingPriorityMax @6 :Int32;
  fairSharing @7 :Bool;
  retainFinishedNs @8 :Int64;
  retainDeactivatedNs @9 :Int64;
  afsHalfLifeNs @10 :Int64;
  afsSamplingIntervalNs @11 :Int64;
  afsResourceWeights @12 :List(IdAmount);
  fairSharingPreemptionStrategies @13 :List(UInt8);  # FsStrategy values; empty: the default
}

# Admission fair sharing (engine v14): one LocalQueue's decayed usage and the entry penalties
# not yet settled into it.
struct AfsPenalty {
  workload @0 :Text;            # namespace/name
  amounts @1 :List(IdAmount);
}

struct AfsEntry {
  localQueue @0 :Text;          # namespace/name
  consumed @1 :List(IdAmount);
  lastUpdateNs @2 :Int64;
  penalties @3 :List(AfsPenalty);
}

struct MaintenanceWindow {
  key @0 :Text;
  name @1 :Text;
  flavor @2 :Text;
  startNs @3 :Int64;
  endNs @4 :Int64;
}

struct NodeState {
  name @0 :Text;
  flavor @1 :Text;
  capacity @2 :List(IdAmount);  # resource id -> milli
  failed @3 :Bool;
  # Format 9 (engine v26): topology-aware scheduling.
  labels @4 :List(TextPair);
  taints @5 :List(Taint);
  nonTasUsage @6 :List(IdAmount);
}

# Format 9 (engine v26): topology-aware scheduling (docs/tas.md).
struct Topology {
  name @0 :Text;
  levels @1 :List(Text);
}

struct TopologyRequest {
  required @0 :Text;
  preferred @1 :Text;
  unconstrained @2 :Bool;
  sliceLevel @3 :Text;
  sliceSize @4 :Int32;
  group @5 :Text;
}

struct TopologyDomain {
  values @0 :List(Text);
  count @1 :Int32;
}

struct TopologyAssignment {
  levels @0 :List(Text);
  domains @1 :List(TopologyDomain);
}

struct Timer {
  atNs @0 :Int64;
  timer @1 :Text;               # format 2: kind|key|generation|detail; unused since format 3
  kind @2 :Text;                # format 3: projections::TimerKindName
  key @3 :Text;
  generation @4 :UInt64;
  detail @5 :Text;
}

# ---------------------------------------------------------------------------------------------
# Queues and workloads.

struct QueueKey {
  priority @0 :Int32;
  timestamp @1 :Int64;
  sequence @2 :UInt64;
  uid @3 :Text;
  key @4 :Text;
}

struct EquivalenceClass {
  key @0 :Text;
  members @1 :List(QueueKey);   # in the set's order
  inadmissible @2 :Bool;
}

# A ClusterQueue's stored state. Its spec, admitted set, usage and pending count are derived.
struct ClusterQueueState {
  name @0 :Text;
  classes @1 :List(EquivalenceClass);
  inactiveReason @2 :Text;
}

struct CheckStatus {
  name @0 :Text;
  state @1 :Text;
  message @2 :Text;
  lastTransitionNs @3 :Int64;
  reportSequence @4 :UInt64;
  podSetUpdates @5 :List(PodSetUpdate);   # format v5 on: the latest report's
}

struct PodSetUpdate {
  podSet @0 :Text;
  labels @1 :List(TextPair);
  annotations @2 :List(TextPair);
  nodeSelector @3 :List(TextPair);
  tolerations @4 :List(Toleration);
}

struct Condition {
  key @0 :Text;
  type @1 :Text;
  status @2 :Bool;
  reason @3 :Text;
  message @4 :Text;
  lastTransitionNs @5 :Int64;
}

struct PodSetSpec {
  name @0 :Text;
  count @1 :Int32;
  minCount @2 :Int32;
  requests @3 :List(IdAmount);  # per pod: resource id -> milli
  nodeSelector @4 :List(TextPair);
  tolerations @5 :List(Toleration);
  affinity @6 :List(Requirement);
  topology @7 :TopologyRequest;  # format 9; null: none
}

struct PodSetAssignment {
  name @0 :Text;
  count @1 :Int32;
  flavors @2 :List(IdPair);     # resource id -> flavor id
  usage @3 :List(IdAmount);     # resource id -> milli
  topology @4 :TopologyAssignment;  # format 9; null: none
}

struct Assignment {
  podSets @0 :List(PodSetAssignment);
  usage @1 :List(FrAmount);
  borrows @2 :Bool;
}

struct WorkloadState {
  key @0 :Text;                 # namespace/name
  namespace @1 :Text;
  name @2 :Text;
  uid @3 :Text;
  queueName @4 :Text;
  priorityClass @5 :Text;
  priority @6 :Int32;
  creationNs @7 :Int64;
  queuedAtNs @8 :Int64;
  podSets @9 :List(PodSetSpec);
  namespaceLabels @10 :List(TextPair);
  phase @11 :UInt8;             # projections::Phase
  clusterQueue @12 :Text;
  classKey @13 :Text;
  queued @14 :Bool;
  admission @15 :Assignment;
  generation @16 :UInt64;
  quotaVersion @17 :UInt64;
  reservedAtNs @18 :Int64;
  podsReleased @19 :Bool;
  imported @20 :Bool;
  requeueCount @21 :UInt32;
  checks @22 :List(CheckStatus);
  checkRetries @23 :UInt32;
  podsReadyRequeues @24 :UInt32;
  fencingToken @25 :Text;
  podsReady @26 :Bool;
  admittedAtNs @27 :Int64;
  requeueAtNs @28 :Int64;
  drainDeadlineNs @29 :Int64;
  pendingSinceNs @30 :Int64;
  starvationAlerted @31 :Bool;
  expectedRuntimeNs @32 :Int64;
  maxExecutionNs @33 :Int64;
  afterEviction @34 :Text;
  retryAfterNs @35 :Int64;
  deactivateReason @36 :Text;
  deactivateMessage @37 :Text;
  pendingReason @38 :Text;
  pendingMessage @39 :Text;
  conditions @40 :List(Condition);
  submittedSequence @41 :UInt64;
  labels @42 :List(TextPair);        # metadata.labels, for the views (get -l); decide nothing
}

# Every member of projections::Engine that is not derivable (see Engine::RestoreDerivedState).
struct EngineState {
  resourceNames @0 :List(Text);     # Interner order: id i is names[i]
  flavorNames @1 :List(Text);
  flavors @2 :List(Flavor);
  clusterQueueSpecs @3 :List(ClusterQueueSpec);
  cohortSpecs @4 :List(CohortSpec);
  localQueues @5 :List(LocalQueueSpec);
  priorityClasses @6 :List(PriorityClass);
  admissionChecks @7 :List(AdmissionCheckSpec);
  config @8 :EngineConfig;
  maintenanceWindows @9 :List(MaintenanceWindow);
  nodes @10 :List(NodeState);
  timers @11 :List(Timer);
  currentActor @12 :Text;
  clusterQueues @13 :List(ClusterQueueState);
  workloads @14 :List(WorkloadState);
  uidToKey @15 :List(TextPair);
  orphans @16 :List(Text);
  active @17 :List(Text);
  reactivatePending @18 :List(Text);
  treeDirty @19 :Bool;
  # The ClusterQueues the quota tree held when it was last built (a deleted one stays while it
  # holds usage): with treeDirty false, the tree is rebuilt from exactly these.
  treeClusterQueues @20 :List(Text);
  currentSequence @21 :UInt64;
  decisionsMade @22 :UInt64;
  nowNs @23 :Int64;
  afsEntries @24 :List(AfsEntry);
  # Format 6 (engine v19): a node reporter said its inventory is complete (node capacity bounds).
  nodeInventoryComplete @25 :Bool;
  budgetPolicies @26 :List(BudgetPolicy);
  usageEntries @27 :List(TextPair);      # UsageFold::Entries
  usageBuckets @28 :List(UsageBucket);
  usagePrunedAtMs @29 :Int64;
  topologies @30 :List(Topology);        # format 9 (engine v26)
}

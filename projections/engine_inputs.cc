// Engine: applying input events to the state, one handler per input (definitions, workloads,
// pod reports). Kueue: the core controllers (pkg/controller/core: clusterqueue, localqueue,
// cohort, resourceflavor and workload controllers) that feed its cache and queues.

#include <algorithm>
#include <limits>

#include "projections/engine.h"
#include "projections/engine_internal.h"
#include "schema/event_codec.h"
#include "schema/result.h"

namespace admission::projections {

namespace {

Labels ToLabels(capnp::List<schema::Label>::Reader list) {
  Labels out;
  for (auto l : list) out[std::string(View(l.getKey()))].assign(View(l.getValue()));
  return out;
}

std::vector<Toleration> ToTolerations(capnp::List<schema::Toleration>::Reader list) {
  std::vector<Toleration> out;
  for (auto t : list) {
    out.push_back(Toleration{t.getKey().cStr(), t.getOperator().cStr(), t.getValue().cStr(),
                             t.getEffect().cStr()});
  }
  return out;
}

std::vector<Requirement> ToRequirements(capnp::List<schema::SelectorRequirement>::Reader list) {
  std::vector<Requirement> out;
  for (auto r : list) {
    Requirement req{r.getKey().cStr(), r.getOperator().cStr(), {}};
    for (auto v : r.getValues()) req.values.push_back(v.cStr());
    out.push_back(std::move(req));
  }
  return out;
}

StopPolicy ToStopPolicy(schema::StopPolicy p) {
  switch (p) {
    case schema::StopPolicy::HOLD: return StopPolicy::kHold;
    case schema::StopPolicy::HOLD_AND_DRAIN: return StopPolicy::kHoldAndDrain;
    default: return StopPolicy::kNone;
  }
}

ReclaimPolicy ToReclaim(schema::ReclaimWithinCohortPolicy p) {
  switch (p) {
    case schema::ReclaimWithinCohortPolicy::LOWER_PRIORITY: return ReclaimPolicy::kLowerPriority;
    case schema::ReclaimWithinCohortPolicy::ANY: return ReclaimPolicy::kAny;
    default: return ReclaimPolicy::kNever;
  }
}

FungibilityAction ToAction(schema::FungibilityAction a) {
  switch (a) {
    case schema::FungibilityAction::BORROW: return FungibilityAction::kBorrow;
    case schema::FungibilityAction::PREEMPT: return FungibilityAction::kPreempt;
    default: return FungibilityAction::kTryNextFlavor;
  }
}

}  // namespace

std::vector<ResourceGroup> Engine::ToGroups(capnp::List<schema::ResourceGroup>::Reader groups) {
  std::vector<ResourceGroup> out;
  for (auto g : groups) {
    ResourceGroup group;
    for (auto r : g.getCoveredResources()) group.covered.push_back(resources_.Id(r.cStr()));
    for (auto f : g.getFlavors()) {
      FlavorQuotas fq;
      fq.flavor = flavor_ids_.Id(f.getName().cStr());
      for (auto r : f.getResources()) {
        ResourceQuota q;
        q.nominal = r.getNominalQuotaMilli();
        if (r.getHasBorrowingLimit()) q.borrowing_limit = r.getBorrowingLimitMilli();
        if (r.getHasLendingLimit()) q.lending_limit = r.getLendingLimitMilli();
        fq.resources[resources_.Id(r.getName().cStr())] = q;
      }
      group.flavors.push_back(std::move(fq));
    }
    out.push_back(std::move(group));
  }
  return out;
}

void Engine::ApplyInput(schema::Event::Reader event) {
  ADM_CHECK(!schema::IsDecision(event.getBody().which()), "decision %d applied as an input",
            static_cast<int>(event.getBody().which()));
  current_sequence_ = event.getSequence();
  current_actor_.assign(View(event.getActor()));
  now_ns_ = std::max(now_ns_, event.getRecordedAtNs());
  const uint64_t seq = event.getSequence();
  const int64_t now = now_ns_;
  AfsSync(now);
  FeedUsage(event);
  auto body = event.getBody();
  switch (body.which()) {
    case schema::Event::Body::FLAVOR_DEFINED:
      DefineFlavor(body.getFlavorDefined(), seq);
      break;
    case schema::Event::Body::COHORT_DEFINED:
      DefineCohort(body.getCohortDefined(), seq);
      break;
    case schema::Event::Body::CLUSTER_QUEUE_DEFINED:
      DefineClusterQueue(body.getClusterQueueDefined(), seq, now);
      break;
    case schema::Event::Body::LOCAL_QUEUE_DEFINED:
      DefineLocalQueue(body.getLocalQueueDefined(), now);
      break;
    case schema::Event::Body::TOPOLOGY_DEFINED:
      DefineTopology(body.getTopologyDefined());
      break;
    case schema::Event::Body::PRIORITY_CLASS_DEFINED: {
      auto def = body.getPriorityClassDefined();
      priority_classes_[def.getName().cStr()] = def.getValue();
      break;
    }
    case schema::Event::Body::OBJECT_DELETED:
      ApplyObjectDeleted(body.getObjectDeleted(), DecidingVersion(event.getEngineVersion()), now);
      break;
    case schema::Event::Body::WORKLOAD_SUBMITTED:
      Submit(body.getWorkloadSubmitted().getWorkload(), seq, now);
      break;
    case schema::Event::Body::WORKLOAD_IMPORTED:
      Import(body.getWorkloadImported(), seq, now);
      break;
    case schema::Event::Body::WORKLOAD_FINISHED: {
      auto ref = body.getWorkloadFinished().getWorkload();
      Finish(KeyOf(ref), View(body.getWorkloadFinished().getMessage()), now);
      break;
    }
    case schema::Event::Body::WORKLOAD_DELETED:
      Remove(KeyOf(body.getWorkloadDeleted().getWorkload()), now);
      break;
    case schema::Event::Body::PODS_REPORTED:
      PodsReport(body.getPodsReported(), now);
      break;
    case schema::Event::Body::ADMISSION_CHECK_DEFINED:
      DefineAdmissionCheck(body.getAdmissionCheckDefined(), seq);
      break;
    case schema::Event::Body::BUDGET_POLICY_DEFINED:
      DefineBudgetPolicy(body.getBudgetPolicyDefined(), seq, now,
                         DecidingVersion(event.getEngineVersion()));
      break;
    case schema::Event::Body::ENGINE_CONFIG_DEFINED:
      DefineEngineConfig(body.getEngineConfigDefined());
      break;
    case schema::Event::Body::CHECK_STATE_REPORTED:
      ReportCheck(body.getCheckStateReported(), seq, now);
      break;
    case schema::Event::Body::REVOCATION_REQUESTED:
      Revoke(body.getRevocationRequested(), now);
      break;
    case schema::Event::Body::WORKLOAD_ACTIVATION_SET:
      SetActive(body.getWorkloadActivationSet(), now);
      break;
    case schema::Event::Body::NODE_CAPACITY_CHANGED:
      NodeChanged(body.getNodeCapacityChanged(), 0, now);
      break;
    case schema::Event::Body::NODE_FAILED:
      NodeChanged(body.getNodeFailed(), 1, now);
      break;
    case schema::Event::Body::NODE_RECOVERED:
      NodeChanged(body.getNodeRecovered(), 2, now);
      break;
    case schema::Event::Body::MAINTENANCE_WINDOW_DEFINED:
      DefineMaintenance(body.getMaintenanceWindowDefined(), now);
      break;
    default:
      // clockAdvanced: time moved (above); the timers due fire at the end of the batch.
      break;
  }
}

void Engine::DefineFlavor(schema::ResourceFlavorDef::Reader def, uint64_t seq) {
  Flavor f;
  f.name = def.getName().cStr();
  f.node_labels = ToLabels(def.getNodeLabels());
  for (auto t : def.getNodeTaints()) {
    f.node_taints.push_back(Taint{t.getKey().cStr(), t.getValue().cStr(), t.getEffect().cStr()});
  }
  f.tolerations = ToTolerations(def.getTolerations());
  f.topology.assign(View(def.getTopologyName()));
  f.version = seq;
  flavor_ids_.Id(f.name);
  flavors_[f.name] = std::move(f);
  DefinitionsChanged();
}

void Engine::DefineCohort(schema::CohortDef::Reader def, uint64_t seq) {
  CohortSpec c;
  c.name = def.getName().cStr();
  c.parent = def.getParentName().cStr();
  c.resource_groups = ToGroups(def.getResourceGroups());
  c.fair_weight_milli = def.getFairSharingWeightMilli();
  c.version = seq;
  cohort_specs_[c.name] = std::move(c);
  DefinitionsChanged();
}

ClusterQueueSpec Engine::ToClusterQueueSpec(schema::ClusterQueueDef::Reader def, uint64_t seq) {
  ClusterQueueSpec cq;
  cq.name = def.getName().cStr();
  cq.cohort = def.getCohortName().cStr();
  cq.resource_groups = ToGroups(def.getResourceGroups());
  cq.queueing = def.getQueueingStrategy() == schema::QueueingStrategy::STRICT_FIFO
                    ? QueueingStrategy::kStrictFifo
                    : QueueingStrategy::kBestEffortFifo;
  auto sel = def.getNamespaceSelector();
  cq.namespace_selector.present =
      !sel.getMatchesAll() || sel.getMatchLabels().size() > 0 ||
      sel.getMatchExpressions().size() > 0;
  cq.namespace_selector.match_labels = ToLabels(sel.getMatchLabels());
  cq.namespace_selector.match_expressions = ToRequirements(sel.getMatchExpressions());
  if (!def.hasNamespaceSelector()) cq.namespace_selector.present = false;
  cq.stop_policy = ToStopPolicy(def.getStopPolicy());
  auto p = def.getPreemption();
  switch (p.getWithinClusterQueue()) {
    case schema::WithinClusterQueuePolicy::LOWER_PRIORITY:
      cq.preemption.within_cluster_queue = WithinCq::kLowerPriority;
      break;
    case schema::WithinClusterQueuePolicy::LOWER_OR_NEWER_EQUAL_PRIORITY:
      cq.preemption.within_cluster_queue = WithinCq::kLowerOrNewerEqualPriority;
      break;
    default: cq.preemption.within_cluster_queue = WithinCq::kNever;
  }
  cq.preemption.reclaim_within_cohort = ToReclaim(p.getReclaimWithinCohort());
  cq.preemption.borrow_within_cohort = ToReclaim(p.getBorrowWithinCohort());
  if (p.getHasMaxPriorityThreshold()) {
    cq.preemption.max_priority_threshold = p.getMaxPriorityThreshold();
  }
  auto fung = def.getFlavorFungibility();
  cq.when_can_borrow = ToAction(fung.getWhenCanBorrow());
  cq.when_can_preempt = ToAction(fung.getWhenCanPreempt());
  cq.preference = fung.getPreference() == schema::FungibilityPreference::PREEMPTION_OVER_BORROWING
                      ? FungibilityPreference::kPreemptionOverBorrowing
                      : FungibilityPreference::kBorrowingOverPreemption;
  for (auto c : def.getAdmissionChecks()) cq.admission_checks[c.cStr()];
  for (auto c : def.getAdmissionChecksStrategy()) {
    auto& flavors = cq.admission_checks[c.getName().cStr()];
    for (auto f : c.getOnFlavors()) flavors.push_back(f.cStr());
  }
  cq.max_wait_ns = def.getMaxWaitNs();
  cq.fair_weight_milli = def.getFairSharingWeightMilli();
  cq.usage_based_admission =
      def.getAdmissionMode() == schema::AdmissionMode::USAGE_BASED_ADMISSION_FAIR_SHARING;
  cq.version = seq;
  return cq;
}

void Engine::DefineClusterQueue(schema::ClusterQueueDef::Reader def, uint64_t seq, int64_t now) {
  ClusterQueueSpec cq = ToClusterQueueSpec(def, seq);
  const std::string name = cq.name;
  cq_specs_[name] = cq;
  cqs_[name].spec = std::move(cq);
  DefinitionsChanged();
  // Workloads of LocalQueues pointing here may now have a home.
  RequeueOrphans(now);
  EnforceCapacity(now, false);  // a lowered quota evicts what no longer fits
  if (cq_specs_.at(name).stop_policy == StopPolicy::kHoldAndDrain) {
    Drain([&](const WorkloadState& wl) { return wl.cluster_queue == name; },
          "ClusterQueueStopped", "The ClusterQueue is stopped", now);
  }
}

void Engine::DefineLocalQueue(schema::LocalQueueDef::Reader def, int64_t now) {
  LocalQueueSpec lq;
  lq.ns = def.getNamespace().cStr();
  lq.name = def.getName().cStr();
  lq.cluster_queue = def.getClusterQueue().cStr();
  lq.stop_policy = ToStopPolicy(def.getStopPolicy());
  lq.weight_milli = def.getFairSharingWeightMilli();
  lq.has_consumed_seed = def.getConsumedResourcesGiven();
  for (auto r : def.getConsumedResources()) {
    lq.consumed_seed[resources_.Id(r.getName().cStr())] += r.getMilli();
  }
  lqs_[lq.ns + "/" + lq.name] = lq;
  // Kueue's LocalQueue controller starts its admission fair sharing entry at once.
  if (AfsOn()) AfsEntryOf(lq.ns + "/" + lq.name, now);
  RequeueOrphans(now);
  if (lq.stop_policy == StopPolicy::kHoldAndDrain) {
    Drain([&](const WorkloadState& wl) { return wl.ns == lq.ns && wl.queue_name == lq.name; },
          "LocalQueueStopped", "The LocalQueue is stopped", now);
  }
  // A LocalQueue resumed (or stopped) changes which heads may be tried.
  DefinitionsChanged();
}

void Engine::ApplyObjectDeleted(schema::ObjectDeleted::Reader del, uint32_t version,
                                int64_t now) {
  std::string kind = del.getKind().cStr();
  std::string name = del.getName().cStr();
  if (kind == "ClusterQueue") {
    cq_specs_.erase(name);
    if (auto it = cqs_.find(name); it != cqs_.end()) it->second.spec.reset();
  } else if (kind == "Cohort") {
    cohort_specs_.erase(name);
  } else if (kind == "ResourceFlavor") {
    flavors_.erase(name);
  } else if (kind == "LocalQueue") {
    const std::string lq_key = std::string(del.getNamespace().cStr()) + "/" + name;
    lqs_.erase(lq_key);
    afs_.erase(lq_key);  // Kueue's AfsUsageLedger.Delete (engine v14; empty before)
    if (version >= 13) OrphanQueuedOf(lq_key, now);
  } else if (kind == "WorkloadPriorityClass") {
    priority_classes_.erase(name);
  } else if (kind == "BudgetPolicy") {
    budgets_.erase(name);
  } else if (kind == "Topology") {
    topologies_.erase(name);  // engine v26
  } else if (kind == "AdmissionCheck" && version >= 13) {
    // Engine v13: intake deletes a check only when nothing needs it (ValidateDeletion).
    checks_.erase(name);
  }
  DefinitionsChanged();
}

void Engine::Drain(const std::function<bool(const WorkloadState&)>& selected,
                   const std::string& reason, const std::string& message, int64_t now) {
  std::vector<std::string> keys;
  for (const auto& [key, wl] : workloads_) {
    if (Evictable(wl.phase) && selected(wl)) keys.push_back(key);
  }
  for (const std::string& key : keys) {
    EvictForReason(workloads_.at(key), reason, message, 0, 0, now);
  }
}

void Engine::CollectStrictFifoQueues() {
  strict_fifo_cqs_.clear();
  for (const auto& [name, cq] : cqs_) {
    if (cq.spec && cq.spec->queueing == QueueingStrategy::kStrictFifo) {
      strict_fifo_cqs_.insert(strict_fifo_cqs_.end(), name);
    }
  }
}

void Engine::CountStoppedLocalQueues() {
  stopped_local_queues_ = static_cast<size_t>(std::count_if(
      lqs_.begin(), lqs_.end(),
      [](const auto& lq) { return lq.second.stop_policy != StopPolicy::kNone; }));
}

const std::map<std::string, std::string>& Engine::UidIndex() const {
  for (const WorkloadState* wl : uid_pending_) uid_to_key_.insert_or_assign(wl->uid, wl->key);
  uid_pending_.clear();
  return uid_to_key_;
}

std::string Engine::KeyOf(schema::WorkloadRef::Reader ref) const {
  std::string key = Cat({View(ref.getNamespace()), "/", View(ref.getName())});
  if (ref.getName().size() == 0 && ref.getUid().size() > 0) {
    const auto& uids = UidIndex();
    auto it = uids.find(ref.getUid().cStr());
    if (it != uids.end()) return it->second;
  }
  return key;
}

void Engine::DefinitionsChanged() {
  tree_dirty_ = true;
  tas_cache_.clear();  // engine v26: nodes, flavors or topologies may have changed
  CountStoppedLocalQueues();
  CollectStrictFifoQueues();
  // Any definition may make room or make a class fit: every class is worth another look.
  for (auto& [name, cq] : cqs_) {
    for (auto& [key, cls] : cq.classes) cls.inadmissible = false;
    if (cq.pending > 0) active_.insert(name);
  }
}

void Engine::ReadPodSets(capnp::List<schema::PodSet>::Reader list, std::vector<PodSetSpec>* out) {
  for (auto ps : list) {
    PodSetSpec spec;
    spec.name.assign(View(ps.getName()));
    spec.count = ps.getCount();
    spec.min_count = ps.getMinCount();
    for (auto r : ps.getRequests()) {
      if (r.getMilli() != 0) spec.requests[resources_.Id(View(r.getName()))] += r.getMilli();
    }
    spec.node_selector = ToLabels(ps.getNodeSelector());
    spec.tolerations = ToTolerations(ps.getTolerations());
    spec.affinity = ToRequirements(ps.getRequiredAffinity());
    if (ps.hasTopologyRequest()) {
      auto t = ps.getTopologyRequest();
      TopologyRequest r;
      r.required.assign(View(t.getRequired()));
      r.preferred.assign(View(t.getPreferred()));
      r.unconstrained = t.getUnconstrained();
      r.slice_level.assign(View(t.getSliceRequiredTopology()));
      r.slice_size = t.getSliceSize();
      r.group.assign(View(t.getGroupName()));
      spec.topology = std::move(r);
    }
    out->push_back(std::move(spec));
  }
}

void Engine::InitWorkload(schema::Workload::Reader wl, uint64_t seq, int64_t now,
                          WorkloadState* out) {
  out->ns.assign(View(wl.getNamespace()));
  out->name.assign(View(wl.getName()));
  out->key = Cat({out->ns, "/", out->name});
  out->uid.assign(View(wl.getUid()));
  out->queue_name.assign(View(wl.getQueueName()));
  out->local_queue_key = Cat({out->ns, "/", out->queue_name});
  out->priority_class.assign(View(wl.getPriorityClassName()));
  if (wl.getHasPriority()) {
    out->priority = wl.getPriority();
  } else if (auto it = priority_classes_.find(out->priority_class); it != priority_classes_.end()) {
    out->priority = it->second;
  }
  out->creation_ns = wl.getCreationTimestampNs() != 0 ? wl.getCreationTimestampNs() : now;
  out->queued_at_ns = out->creation_ns;
  ReadPodSets(wl.getPodSets(), &out->pod_sets);
  out->namespace_labels = ToLabels(wl.getNamespaceLabels());
  out->labels = ToLabels(wl.getLabels());
  out->namespace_labels["kubernetes.io/metadata.name"] = out->ns;
  out->submitted_sequence = seq;
  out->expected_runtime_ns = wl.getExpectedRuntimeNs();
  out->max_execution_ns = wl.getMaxExecutionNs();
  out->class_key = ClassKey(*out);
}

void Engine::Submit(schema::Workload::Reader wl, uint64_t seq, int64_t now) {
  const std::string key = Cat({View(wl.getNamespace()), "/", View(wl.getName())});
  // One search of the workload map: its position serves as the hint for the insertion.
  auto it = workloads_.lower_bound(key);
  if (it != workloads_.end() && it->first == key) {
    const Phase p = it->second.phase;
    if (p != Phase::kFinished && p != Phase::kRejected && p != Phase::kDeleted) {
      // Intake refuses this; a ledger written by hand may still hold it. The decider records
      // that it ignored the duplicate rather than silently doing so.
      NewDecision(seq).initBody().initRejected().setReason("AlreadyExists");
      return;
    }
    UidIndex();  // no pending entry may name the workload replaced here
    uid_to_key_.erase(it->second.uid);
    it = workloads_.erase(it);
  }
  // Built in place: a WorkloadState is large.
  const size_t before = workloads_.size();
  it = workloads_.emplace_hint(it, std::piecewise_construct, std::forward_as_tuple(key),
                               std::forward_as_tuple());
  ADM_CHECK(workloads_.size() == before + 1, "workload %s inserted twice", key.c_str());
  WorkloadState& state = it->second;
  InitWorkload(wl, seq, now, &state);
  CountPhase(state, +1);
  if (!wl.getActive() && batch_version_ >= 21) {
    // Engine v21: submitted inactive (Kueue's spec.active false), it waits deactivated until
    // reactivated; before, it was rejected for good.
    Deactivate(state, "Deactivated", "The workload is deactivated", now);
  } else if (!wl.getActive()) {
    SetPhase(state, Phase::kRejected);
    Ended(state, now);
  }
  uid_pending_.push_back(&state);
  if (state.phase == Phase::kPending) Enqueue(state, now);
}

void Engine::Import(schema::WorkloadImported::Reader imported, uint64_t seq, int64_t now) {
  auto wl = imported.getWorkload();
  const std::string key = Cat({View(wl.getNamespace()), "/", View(wl.getName())});
  if (workloads_.count(key) != 0) {
    NewDecision(seq).initBody().initRejected().setReason("AlreadyExists");
    return;
  }
  if (imported.getAdmission().getClusterQueue().size() == 0) {
    ImportPending(imported, seq, now);
    return;
  }
  WorkloadState state;
  InitWorkload(wl, seq, now, &state);
  state.imported = true;
  state.pods_released = true;  // an imported workload's pods may already run
  auto adm = imported.getAdmission();
  state.cluster_queue = adm.getClusterQueue().cStr();
  for (auto psa : adm.getPodSetAssignments()) {
    PodSetAssignment a;
    a.name = psa.getName().cStr();
    a.count = psa.getCount();
    for (auto f : psa.getFlavors()) {
      a.flavors[resources_.Id(f.getResource().cStr())] = flavor_ids_.Id(f.getFlavor().cStr());
    }
    for (auto u : psa.getResourceUsage()) a.usage[resources_.Id(u.getName().cStr())] = u.getMilli();
    if (psa.hasTopologyAssignment()) a.topology = ToTopologyAssignment(psa.getTopologyAssignment());
    for (const auto& [r, amount] : a.usage) {
      auto f = a.flavors.find(r);
      if (f != a.flavors.end()) state.admission.usage[MakeFr(f->second, r)] += amount;
    }
    state.admission.pod_sets.push_back(std::move(a));
  }
  auto [it, inserted] = workloads_.emplace(key, std::move(state));
  uid_pending_.push_back(&it->second);
  WorkloadState& w = it->second;
  CountPhase(w, +1);
  ClusterQueueState& cq = CqState(w);
  RebuildTreeIfNeeded();
  SetPhase(w, Phase::kAdmitted);
  w.generation = 1;
  w.fencing_token = w.uid + "/1";
  w.quota_version = cq.spec ? cq.spec->version : 0;
  // Engine v22: Kueue's record of the admission, its times bounded by the import's own (a
  // later one is another clock's skew) and the admission not before the reservation.
  const bool record = batch_version_ >= 22;
  const auto at = [&](int64_t t, int64_t floor) {
    return record && t > 0 ? std::clamp(t, std::min(floor, now), now) : now;
  };
  w.reserved_at_ns = at(imported.getReservedAtNs(), std::numeric_limits<int64_t>::min());
  w.admitted_at_ns = at(imported.getAdmittedAtNs(), w.reserved_at_ns);
  AddHolder(cq, w);
  TasHolderChanged(w, +1);  // engine v26
  AddUsage(cq, w.cluster_queue, w.admission.usage, +1);
  SetCondition(w, ConditionType::kQuotaReserved, true, "QuotaReserved",
               "Imported with its admission in ClusterQueue " + w.cluster_queue, w.reserved_at_ns);
  SetCondition(w, ConditionType::kAdmitted, true, "Admitted", "Imported as admitted",
               w.admitted_at_ns);
  if (record) ImportRecord(imported, w, now);
  if (cq.spec && AfsOrders(*cq.spec)) AfsSettle(w, now);
  auto d = NewDecision(seq).initBody().initAdmitted();
  Ref(d.initWorkload(), w);
  d.setGeneration(w.generation);
  d.setFencingToken(TokenOf(w));
  d.setQuotaVersion(w.quota_version);
  if (record && imported.getEvictionReason().size() > 0) {
    // Kueue was evicting it: its pods (released) are to be reported gone, then it is requeued.
    EvictForReason(w, imported.getEvictionReason().cStr(), imported.getEvictionMessage().cStr(), 0,
                   0, now);
    bool added = false;
    Condition& evicted = w.conditions.Upsert(ConditionType::kEvicted, &added);
    if (imported.getEvictedAtNs() > 0) {
      evicted.last_transition_ns = std::clamp(imported.getEvictedAtNs(), w.admitted_at_ns, now);
    }
  }
}

void Engine::Finish(const std::string& key, std::string_view message, int64_t now) {
  auto it = workloads_.find(key);
  if (it == workloads_.end()) return;
  WorkloadState& wl = it->second;
  if (Terminal(wl.phase)) return;
  if (wl.queued) Dequeue(wl);
  if (HoldsQuota(wl.phase)) ReleaseQuota(wl, "Finished", now);
  wl.fencing_token.clear();
  SetPhase(wl, Phase::kFinished);
  SetCondition(wl, ConditionType::kFinished, true, "Succeeded", message.empty() ? "Job finished" : message, now);
  Ended(wl, now);
}

void Engine::Remove(const std::string& key, int64_t now) {
  auto it = workloads_.find(key);
  if (it == workloads_.end()) return;
  WorkloadState& wl = it->second;
  if (Terminal(wl.phase)) return;
  if (wl.queued) Dequeue(wl);
  if (HoldsQuota(wl.phase)) ReleaseQuota(wl, "Deleted", now);
  wl.fencing_token.clear();
  SetPhase(wl, Phase::kDeleted);
  SetCondition(wl, ConditionType::kFinished, true, "Deleted", "Workload deleted", now);
  Ended(wl, now);
}

void Engine::PodsReport(schema::PodsReported::Reader report, int64_t now) {
  const std::string key = KeyOf(report.getWorkload());
  auto it = workloads_.find(key);
  if (it == workloads_.end()) return;
  WorkloadState& wl = it->second;
  const std::string_view token = View(report.getFencingToken());
  const bool current = wl.phase == Phase::kAdmitted && token == wl.fencing_token;
  const bool of_evicted = wl.phase == Phase::kEvicting && token == wl.uid + "/" + std::to_string(wl.generation);
  // Intake refuses stale tokens; a hand-written ledger's stale report changes nothing.
  switch (report.getReport()) {
    case schema::PodsReport::RELEASED:
      if (current) wl.pods_released = true;
      break;
    case schema::PodsReport::READY:
      if (current) wl.pods_ready = true;
      break;
    case schema::PodsReport::TERMINATED:
      if (of_evicted) {
        PodsGone(wl, "PodsTerminated", now);
      } else if (current) {
        wl.pods_released = false;
        wl.pods_ready = false;
      }
      break;
    case schema::PodsReport::FINISHED:
      if (current || of_evicted) Finish(key, "pods finished", now);
      break;
    case schema::PodsReport::FAILED_TO_START:
      // Engine v18 (Kueue's job reconciler: startJob failed with a permanent error, the
      // workload is finished with reason FailedToStart). No pod ran, so the quota is released
      // at once, as for an admission whose checks' updates conflict (FailToStart, v17).
      if (current && batch_version_ >= 18) FailToStart(wl, report.getMessage().cStr(), now);
      break;
    default:
      break;
  }
}

void Engine::ImportRecord(schema::WorkloadImported::Reader imported, WorkloadState& wl,
                          int64_t now) {
  wl.pods_ready = imported.getPodsReady();
  wl.requeue_count = imported.getRequeueCount();
  for (auto c : imported.getChecks()) {
    CheckStatus& cs = wl.checks[c.getName().cStr()];
    cs.state = CheckState::kReady;
    cs.message = c.getMessage().cStr();
    cs.last_transition_ns = c.getLastTransitionNs() > 0 ? std::min(c.getLastTransitionNs(), now) : now;
    cs.report_sequence = current_sequence_;
  }
}

// Engine v22: a pending workload imported from Kueue: queued by its creation time (Kueue's queue
// order), its requeue count kept, and a backoff Kueue set waited out until its requeueAt.
void Engine::ImportPending(schema::WorkloadImported::Reader imported, uint64_t seq, int64_t now) {
  auto [it, inserted] = workloads_.try_emplace(
      Cat({View(imported.getWorkload().getNamespace()), "/", View(imported.getWorkload().getName())}));
  WorkloadState& w = it->second;
  InitWorkload(imported.getWorkload(), seq, now, &w);
  CountPhase(w, +1);
  uid_pending_.push_back(&w);
  w.requeue_count = imported.getRequeueCount();
  // Engine v23: Kueue's queue order timestamp (GetQueueOrderTimestamp with its default
  // requeuing timestamp, Eviction): the eviction's time for a workload evicted by its pods'
  // readiness timeout or an admission check, bounded by the import's own time.
  const std::string_view evicted_by = View(imported.getEvictionReason());
  if (batch_version_ >= 23 && imported.getEvictedAtNs() > 0 &&
      (evicted_by == "PodsReadyTimeout" || evicted_by == "AdmissionCheck")) {
    w.queued_at_ns = std::min(imported.getEvictedAtNs(), now);
    SetCondition(w, ConditionType::kEvicted, true, std::string(evicted_by),
                 View(imported.getEvictionMessage()), w.queued_at_ns);
  }
  if (imported.getRequeueAtNs() > now) {
    w.requeue_at_ns = imported.getRequeueAtNs();
    SetCondition(w, ConditionType::kRequeued, false, "Backoff",
                 "Imported while waiting out Kueue's requeue backoff", now);
    AddTimer(w.requeue_at_ns, TimerKind::kRequeue, w.key, w.generation);
    return;
  }
  Enqueue(w, now);
}

}  // namespace admission::projections

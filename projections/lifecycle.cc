// The lifecycle after a reservation: intake's verdict on an input (Validate), the engine
// configuration, release and retry, eviction, deactivation, the pods gone after an eviction,
// and revocation. Kueue: the workload controller (pkg/controller/core/workload_controller.go:
// eviction, requeue, deactivation) and the validating webhooks (pkg/webhooks) for Validate.

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <set>
#include <climits>

#include "projections/engine.h"
#include "projections/engine_internal.h"
#include "projections/pod_set_updates.h"
#include "schema/event_codec.h"
#include "schema/fencing_token.h"
#include "schema/result.h"

namespace admission::projections {

std::string RequestsOutOfRange(capnp::List<schema::PodSet>::Reader pod_sets) {
  std::map<std::string, int64_t> total;  // milli-units, by resource
  for (auto ps : pod_sets) {
    // A negative count or request would subtract from a ClusterQueue's usage (the decider
    // asserts usage never goes below zero): Kubernetes refuses both, and so do we.
    if (ps.getCount() < 0 || ps.getMinCount() < 0) {
      return std::string("pod set '") + ps.getName().cStr() + "' has a negative count";
    }
    if (ps.getMinCount() > ps.getCount()) {  // Kueue's CRD rule: minCount <= count
      return std::string("pod set '") + ps.getName().cStr() + "' has minCount " +
             std::to_string(ps.getMinCount()) + " above its count " +
             std::to_string(ps.getCount()) + " (Kueue refuses it too)";
    }
    std::map<std::string, int64_t> per_pod;
    for (auto r : ps.getRequests()) {
      if (r.getMilli() < 0) {
        return std::string("pod set '") + ps.getName().cStr() + "' requests a negative " +
               r.getName().cStr() + " (" + std::to_string(r.getMilli()) + " milli-units)";
      }
      int64_t& sum = per_pod[std::string(r.getName().cStr())];
      if (__builtin_add_overflow(sum, r.getMilli(), &sum)) {
        return std::string("the requests of pod set '") + ps.getName().cStr() + "' for " +
               r.getName().cStr() + " overflow 64 bits";
      }
    }
    for (const auto& [resource, milli] : per_pod) {
      int64_t all_pods = 0;
      int64_t& sum = total[resource];
      if (__builtin_mul_overflow(milli, static_cast<int64_t>(ps.getCount()), &all_pods) ||
          __builtin_add_overflow(sum, all_pods, &sum) || sum > kWorkloadRequestMilliMax ||
          sum < -kWorkloadRequestMilliMax) {
        return "its total request of " + resource + " is beyond " +
               std::to_string(kWorkloadRequestMilliMax) + " milli-units";
      }
    }
  }
  return "";
}

// The fencing token of a workload's current generation.
std::string TokenOf(const WorkloadState& wl) {
  return schema::FencingToken(wl.uid, wl.generation);
}

// ---------------------------------------------------------------------------------------------
// Definitions.

void Engine::DefineEngineConfig(schema::EngineConfigDef::Reader def) {
  config_.wait_for_pods_ready = def.getWaitForPodsReadyEnabled();
  config_.pods_ready_timeout_ns = def.getPodsReadyTimeoutNs();
  config_.backoff_base_seconds = def.getBackoffBaseSeconds();
  config_.backoff_max_seconds = def.getBackoffMaxSeconds();
  config_.backoff_limit_count = def.getBackoffLimitCount();
  config_.aging_step_ns = def.getAgingStepNs();
  config_.aging_priority_max = def.getAgingPriorityMax();
  config_.fair_sharing = def.getFairSharingEnabled();
  config_.retain_finished_ns = def.getRetainFinishedNs();
  config_.retain_deactivated_ns = def.getRetainDeactivatedNs();
  config_.afs_half_life_ns = def.getAfsUsageHalfLifeNs();
  config_.afs_sampling_ns = def.getAfsUsageSamplingIntervalNs();
  config_.afs_weights_milli.clear();
  for (auto w : def.getAfsResourceWeights()) {
    config_.afs_weights_milli[resources_.Id(w.getName().cStr())] = w.getMilli();
  }
  config_.fs_strategies.clear();
  for (auto name : def.getFairSharingPreemptionStrategies()) {
    if (auto s = FsStrategyNamed(View(name))) config_.fs_strategies.push_back(*s);
  }
  DefinitionsChanged();
}

std::optional<FsStrategy> FsStrategyNamed(std::string_view name) {
  if (name == "LessThanOrEqualToFinalShare") return kLessThanOrEqualToFinalShare;
  if (name == "LessThanInitialShare") return kLessThanInitialShare;
  return std::nullopt;
}

int64_t Engine::EffectivePriority(const WorkloadState& wl, int64_t now) const {
  if (config_.aging_step_ns <= 0 || wl.phase != Phase::kPending) return wl.priority;
  const int64_t waited = std::max<int64_t>(0, now - wl.queued_at_ns);
  return wl.priority + std::min<int64_t>(config_.aging_priority_max, waited / config_.aging_step_ns);
}

// ---------------------------------------------------------------------------------------------
// Validation at intake.

namespace {

// Why a pods report's token is refused: not a token at all, another workload's, a generation
// never issued, or a stale one (revoked or replaced).
std::string TokenRefusal(const WorkloadState& wl, const std::string& token, const std::string& key) {
  const std::string state = std::string(" (") + PhaseName(wl.phase) +
                            (wl.fencing_token.empty() ? std::string(", no valid token")
                                                      : ", current token " + wl.fencing_token) +
                            ")";
  auto parts = schema::ParseFencingToken(token);
  if (!parts) {
    return "malformed fencing token '" + token + "' for " + key +
           ": want UID/GENERATION, as the ledger issued it" + state;
  }
  if (parts->uid != wl.uid) {
    return "fencing token '" + token + "' names another workload than " + key + " (uid " +
           wl.uid + ")" + state;
  }
  if (parts->generation > wl.generation) {
    return "fencing token '" + token + "' names generation " + std::to_string(parts->generation) +
           " of " + key + ", which was never issued" + state;
  }
  return "stale fencing token '" + token + "' for " + key + state +
         ": the admission it named was revoked or replaced";
}

// A verdict refusing the input: nothing is recorded.
InputVerdict Refused(const std::string& why) {
  InputVerdict v;
  v.status = Status(Code::kInvalidArgument, why);
  return v;
}

// A reference as its sender wrote it, for messages: never the workload a uid-only reference
// resolves to, which may be another namespace's (that would tell a tenant it exists).
std::string RefText(schema::WorkloadRef::Reader ref) {
  std::string text = std::string(View(ref.getNamespace())) + "/";
  if (ref.getName().size() > 0) {
    text.append(View(ref.getName()));
  } else {
    text.append("(uid ").append(View(ref.getUid())).append(")");
  }
  return text;
}

}  // namespace

const WorkloadState* Engine::FindReferenced(schema::WorkloadRef::Reader ref) const {
  auto it = workloads_.find(KeyOf(ref));
  if (it == workloads_.end()) return nullptr;
  if (ref.getUid().size() > 0 && it->second.uid != ref.getUid().cStr()) return nullptr;
  // A uid-only reference resolves by uid across namespaces: it names a workload only in the
  // namespace it claims, which is the namespace the policy checked.
  if (it->second.ns != View(ref.getNamespace())) return nullptr;
  return &it->second;
}

InputVerdict Engine::ValidateRef(schema::WorkloadRef::Reader ref, const char* input) const {
  InputVerdict v;
  if (ref.getNamespace().size() == 0) {
    return Refused(std::string(input) + ": workload.namespace: empty");
  }
  if (ref.getName().size() == 0 && ref.getUid().size() == 0) {
    return Refused(std::string(input) + ": workload: neither a name nor a uid");
  }
  if (FindReferenced(ref) != nullptr) return v;
  auto named = workloads_.find(KeyOf(ref));
  if (ref.getName().size() > 0 && named != workloads_.end()) {
    return Refused(std::string(input) + ": workload " + RefText(ref) + " has uid " +
                   named->second.uid + ", not " + std::string(View(ref.getUid())) +
                   " (the reference names an earlier workload of that name)");
  }
  v.status = Status(Code::kNotFound, std::string(input) + ": no workload " + RefText(ref) +
                                         " in the ledger (never submitted, or retired after "
                                         "its retention); nothing recorded");
  return v;
}

InputVerdict Engine::ValidateDefinitionNames(schema::Event::Reader event) const {
  auto body = event.getBody();
  std::vector<std::pair<const char*, capnp::Text::Reader>> names;
  switch (body.which()) {
    case schema::Event::Body::FLAVOR_DEFINED:
      names.emplace_back("ResourceFlavor metadata.name", body.getFlavorDefined().getName());
      break;
    case schema::Event::Body::COHORT_DEFINED:
      names.emplace_back("Cohort metadata.name", body.getCohortDefined().getName());
      break;
    case schema::Event::Body::CLUSTER_QUEUE_DEFINED:
      names.emplace_back("ClusterQueue metadata.name", body.getClusterQueueDefined().getName());
      for (auto group : body.getClusterQueueDefined().getResourceGroups()) {
        for (auto flavor : group.getFlavors()) {
          names.emplace_back("ClusterQueue spec.resourceGroups[].flavors[].name", flavor.getName());
        }
      }
      break;
    case schema::Event::Body::LOCAL_QUEUE_DEFINED:
      names.emplace_back("LocalQueue metadata.namespace", body.getLocalQueueDefined().getNamespace());
      names.emplace_back("LocalQueue metadata.name", body.getLocalQueueDefined().getName());
      names.emplace_back("LocalQueue spec.clusterQueue", body.getLocalQueueDefined().getClusterQueue());
      break;
    case schema::Event::Body::ADMISSION_CHECK_DEFINED:
      names.emplace_back("AdmissionCheck metadata.name", body.getAdmissionCheckDefined().getName());
      break;
    case schema::Event::Body::PRIORITY_CLASS_DEFINED:
      names.emplace_back("WorkloadPriorityClass metadata.name",
                         body.getPriorityClassDefined().getName());
      break;
    case schema::Event::Body::BUDGET_POLICY_DEFINED:
      names.emplace_back("BudgetPolicy metadata.name", body.getBudgetPolicyDefined().getName());
      break;
    case schema::Event::Body::TOPOLOGY_DEFINED:
      names.emplace_back("Topology metadata.name", body.getTopologyDefined().getName());
      break;
    default:
      break;
  }
  for (const auto& [field, name] : names) {
    if (name.size() == 0) return Refused(std::string(field) + ": empty; nothing recorded");
  }
  return InputVerdict{};
}

InputVerdict Engine::Validate(schema::Event::Reader event) const {
  InputVerdict v;
  auto body = event.getBody();
  switch (body.which()) {
    case schema::Event::Body::CHECK_STATE_REPORTED:
      return ValidateCheckReport(body.getCheckStateReported(), event.getActor());
    case schema::Event::Body::PODS_REPORTED:
      return ValidatePodsReport(body.getPodsReported());
    case schema::Event::Body::WORKLOAD_SUBMITTED:
      return ValidateWorkload(body.getWorkloadSubmitted().getWorkload());
    case schema::Event::Body::WORKLOAD_IMPORTED:
      if (body.getWorkloadImported().getAdmission().getClusterQueue().size() == 0 &&
          batch_version_ < 22) {
        return Refused("workloadImported.admission: empty (a pending workload is imported from "
                       "engine v22 on)");
      }
      return ValidateWorkload(body.getWorkloadImported().getWorkload());
    case schema::Event::Body::WORKLOAD_FINISHED:
      return ValidateRef(body.getWorkloadFinished().getWorkload(), "workloadFinished");
    case schema::Event::Body::WORKLOAD_DELETED:
      return ValidateRef(body.getWorkloadDeleted().getWorkload(), "workloadDeleted");
    case schema::Event::Body::WORKLOAD_ACTIVATION_SET:
      return ValidateActivation(body.getWorkloadActivationSet());
    case schema::Event::Body::FLAVOR_DEFINED:
    case schema::Event::Body::COHORT_DEFINED:
    case schema::Event::Body::CLUSTER_QUEUE_DEFINED:
    case schema::Event::Body::LOCAL_QUEUE_DEFINED:
    case schema::Event::Body::ADMISSION_CHECK_DEFINED:
    case schema::Event::Body::PRIORITY_CLASS_DEFINED:
    case schema::Event::Body::BUDGET_POLICY_DEFINED:
    case schema::Event::Body::TOPOLOGY_DEFINED:
      return ValidateDefinitionNames(event);
    case schema::Event::Body::OBJECT_DELETED:
      v.status = ValidateDeletion(body.getObjectDeleted());
      return v;
    case schema::Event::Body::ENGINE_CONFIG_DEFINED: {
      // Kueue's validateAdmissionFairSharing (engine v14).
      auto c = body.getEngineConfigDefined();
      if (c.getAfsUsageHalfLifeNs() < 0) {
        return Refused("admissionFairSharing.usageHalfLifeTime must not be negative");
      }
      if (c.getAfsUsageSamplingIntervalNs() < 0 ||
          (c.getAfsUsageSamplingIntervalNs() == 0 && (c.getAfsUsageHalfLifeNs() > 0 ||
                                                      c.getAfsResourceWeights().size() > 0))) {
        return Refused("admissionFairSharing.usageSamplingInterval must be greater than 0");
      }
      for (auto w : c.getAfsResourceWeights()) {
        if (w.getMilli() < 0) {
          return Refused("admissionFairSharing.resourceWeights[" + std::string(View(w.getName())) +
                         "] must not be negative");
        }
      }
      // Kueue's validateFairSharing: known strategies, each at most once.
      std::set<std::string_view> seen;
      for (auto name : c.getFairSharingPreemptionStrategies()) {
        if (!FsStrategyNamed(View(name))) {
          return Refused("fairSharing.preemptionStrategies: '" + std::string(View(name)) +
                         "' is not LessThanOrEqualToFinalShare or LessThanInitialShare");
        }
        if (!seen.insert(View(name)).second) {
          return Refused("fairSharing.preemptionStrategies: '" + std::string(View(name)) +
                         "' is given twice");
        }
      }
      return v;
    }
    case schema::Event::Body::NODE_CAPACITY_CHANGED:
    case schema::Event::Body::NODE_RECOVERED: {
      // Engine v19: only a failure names the workloads whose pods ran on the node.
      const auto node = body.which() == schema::Event::Body::NODE_RECOVERED
                            ? body.getNodeRecovered()
                            : body.getNodeCapacityChanged();
      if (node.getNode().size() == 0) return Refused("node: empty; nothing recorded");
      if (node.hasWorkloads()) {
        return Refused("workloads: only nodeFailed names the workloads whose pods ran on node " +
                       std::string(View(node.getNode())));
      }
      return v;
    }
    case schema::Event::Body::NODE_FAILED: {
      auto node = body.getNodeFailed();
      if (node.getNode().size() == 0) return Refused("node: empty; nothing recorded");
      // A named workload that has ended since is not an error (the reporter saw its pods).
      for (auto ref : node.getWorkloads()) {
        if (ref.getNamespace().size() == 0 || (ref.getName().size() == 0 && ref.getUid().size() == 0)) {
          return Refused("nodeFailed.workloads: a workload without a namespace, or with neither "
                         "a name nor a uid");
        }
      }
      return v;
    }
    case schema::Event::Body::REVOCATION_REQUESTED: {
      const size_t affected = RevocationTargets(body.getRevocationRequested()).size();
      if (affected == 0) return Refused("the revocation affects no reserved or admitted workload");
      return v;
    }
    default:
      return v;
  }
}

InputVerdict Engine::ValidateCheckReport(schema::CheckStateReported::Reader r,
                                         capnp::Text::Reader actor_text) const {
  InputVerdict v;
  const std::string check = r.getCheck().cStr();
  auto spec = checks_.find(check);
  if (spec == checks_.end()) return Refused("no AdmissionCheck " + check);
  if (spec->second.controller == kBudgetController && batch_version_ >= 25) {
    return Refused("check " + check + " is a budget check: the ledger decides it "
                   "(controllerName " + std::string(kBudgetController) + "); nothing recorded");
  }
  const std::string actor = actor_text.cStr();
  const std::string via = r.getViaFieldManager().cStr();
  if (!via.empty()) {
    // Forwarded by a bridge from a cluster: the field manager it saw must be the owner.
    if (via != spec->second.controller) {
      return Refused("check " + check + " forwarded by '" + actor + "' was written by field "
                     "manager '" + via + "', not by its owner '" + spec->second.controller +
                     "'; nothing recorded");
    }
  } else if (actor != spec->second.controller) {
    return Refused("identity '" + actor + "' does not own check " + check + " (owner: '" +
                   spec->second.controller + "'); nothing recorded");
  }
  const WorkloadState* wl = FindReferenced(r.getWorkload());
  if (wl == nullptr) return Refused("no workload " + RefText(r.getWorkload()));
  if (!Evictable(wl->phase)) {
    return Refused("workload " + KeyOf(r.getWorkload()) + " holds no reservation (" +
                   PhaseName(wl->phase) + "); a report for generation " +
                   std::to_string(r.getGeneration()) + " is stale");
  }
  if (r.getGeneration() > wl->generation) {
    return Refused("report for generation " + std::to_string(r.getGeneration()) +
                   ", which was never issued: the current reservation of " +
                   KeyOf(r.getWorkload()) + " is generation " + std::to_string(wl->generation));
  }
  if (r.getGeneration() != wl->generation) {
    return Refused("stale report: generation " + std::to_string(r.getGeneration()) +
                   ", but the current reservation of " + KeyOf(r.getWorkload()) +
                   " is generation " + std::to_string(wl->generation));
  }
  auto cs = wl->checks.find(check);
  if (cs == wl->checks.end()) {
    return Refused("check " + check + " is not required for " + KeyOf(r.getWorkload()) +
                   " in ClusterQueue " + wl->cluster_queue);
  }
  if (wl->phase == Phase::kAdmitted && r.getState() == schema::CheckState::PENDING &&
      cs->second.state == CheckState::kReady) {
    return Refused("check " + check + " is Ready for the admitted generation " +
                   std::to_string(wl->generation) + " of " + KeyOf(r.getWorkload()) +
                   "; an admitted workload's check may report Retry or Rejected, or the "
                   "admission may be revoked, but it cannot go back to Pending");
  }
  if (auto invalid = InvalidPodSetUpdates(r.getPodSetUpdates(), wl->pod_sets)) {
    return Refused("check " + check + " report for " + KeyOf(r.getWorkload()) + ": " + *invalid +
                   "; nothing recorded");
  }
  const std::vector<PodSetUpdate> updates = ToPodSetUpdates(r.getPodSetUpdates());
  // Kueue's workload webhook: a Ready check's podSetUpdates are immutable while it stays Ready
  // (the runtime may already have applied them).
  if (cs->second.state == CheckState::kReady && r.getState() == schema::CheckState::READY &&
      cs->second.pod_set_updates != updates) {
    return Refused("check " + check + " is Ready for generation " +
                   std::to_string(wl->generation) + " of " + KeyOf(r.getWorkload()) +
                   " with other podSetUpdates; a Ready check's podSetUpdates cannot change "
                   "(report Retry to have the workload admitted again)");
  }
  if (cs->second.report_sequence != 0 && cs->second.state == ToCheckState(r.getState()) &&
      cs->second.message == r.getMessage().cStr() && cs->second.pod_set_updates == updates) {
    v.noop = true;
    v.note = "check " + check + " is already " + CheckStateName(cs->second.state) +
             " for generation " + std::to_string(wl->generation) + " (sequence " +
             std::to_string(cs->second.report_sequence) + ")";
  }
  return v;
}

InputVerdict Engine::ValidatePodsReport(schema::PodsReported::Reader r) const {
  InputVerdict v;
  const WorkloadState* wl = FindReferenced(r.getWorkload());
  if (wl == nullptr) return Refused("no workload " + RefText(r.getWorkload()));
  const std::string token = r.getFencingToken().cStr();
  const bool failed_to_start = r.getReport() == schema::PodsReport::FAILED_TO_START;
  if (r.hasMessage() && !failed_to_start) {
    return Refused("pods report for " + KeyOf(r.getWorkload()) + ": message: \"" +
                   r.getMessage().cStr() + "\": only a failedToStart report carries a message");
  }
  // Engine v18: only an admitted workload's pods can fail to start (Kueue starts a job only
  // while its workload is admitted).
  if (failed_to_start && wl->phase != Phase::kAdmitted) {
    return Refused("pods failedToStart for " + KeyOf(r.getWorkload()) + ": the workload is " +
                   PhaseName(wl->phase) + ", not Admitted; only an admitted workload's pods can "
                   "fail to start (token '" + token + "')");
  }
  const bool gone_report = r.getReport() == schema::PodsReport::TERMINATED ||
                           r.getReport() == schema::PodsReport::FINISHED;
  const bool valid = wl->phase == Phase::kAdmitted ? token == wl->fencing_token
                     : gone_report && wl->phase == Phase::kEvicting ? token == TokenOf(*wl)
                                                                    : false;
  if (!valid) return Refused(TokenRefusal(*wl, token, KeyOf(r.getWorkload())));
  if (failed_to_start && wl->pods_ready) {
    return Refused("pods failedToStart for " + KeyOf(r.getWorkload()) +
                   ": its pods were reported ready under token " + token +
                   "; pods that started cannot fail to start (report terminated or finished)");
  }
  if (failed_to_start && r.getMessage().size() == 0) {
    return Refused("pods failedToStart for " + KeyOf(r.getWorkload()) +
                   ": message: empty; give the runtime's reason the pods cannot start (it "
                   "becomes the workload's Finished message)");
  }
  if (r.getReport() == schema::PodsReport::RELEASED && wl->pods_released) {
    v.noop = true;
    v.note = "pods of " + KeyOf(r.getWorkload()) + " already reported released";
  }
  return v;
}

InputVerdict Engine::ValidateWorkload(schema::Workload::Reader wl) const {
  InputVerdict v;
  const std::string key = Cat({View(wl.getNamespace()), "/", View(wl.getName())});
  if (wl.getNamespace().size() == 0 || wl.getName().size() == 0) {
    return Refused("workload '" + key + "': metadata.namespace and metadata.name must not be empty");
  }
  std::string why = RequestsOutOfRange(wl.getPodSets());
  if (!why.empty()) return Refused("workload " + key + ": " + why);
  // A uid names one workload in the whole ledger (the fencing token is uid/generation), and a
  // name one live workload of its namespace (Kubernetes' AlreadyExists).
  const std::string uid(View(wl.getUid()));
  if (!uid.empty()) {
    const auto& uids = UidIndex();
    if (auto it = uids.find(uid); it != uids.end()) {
      v.status = Status(Code::kConflict,
                        "workload " + key + ": uid " + uid + " is already workload " + it->second +
                            "'s; a uid names one workload in the ledger (a new workload needs a "
                            "new uid); nothing recorded");
      return v;
    }
  }
  if (auto it = workloads_.find(key); it != workloads_.end() && !Terminal(it->second.phase)) {
    v.status = Status(Code::kConflict,
                      "workload " + key + " already exists (uid " + it->second.uid + ", " +
                          PhaseName(it->second.phase) +
                          "); finish or delete it before submitting another of that name; "
                          "nothing recorded");
    return v;
  }
  return v;
}

// ---------------------------------------------------------------------------------------------
// Release, retry and deactivation.

void Engine::ReleaseAndRetry(WorkloadState& wl, const std::string& reason,
                             const std::string& message, int64_t requeue_after_ns, int64_t now) {
  if (HoldsQuota(wl.phase)) ReleaseQuota(wl, reason, now);
  SetPhase(wl, Phase::kPending);
  wl.fencing_token.clear();
  wl.admission = Assignment{};
  ++wl.check_retries;
  // The limit and backoff of the strictest required check.
  uint32_t limit = UINT32_MAX;
  int64_t base = 0, max = 0;
  for (const auto& [name, cs] : wl.checks) {
    auto spec = checks_.find(name);
    if (spec == checks_.end()) continue;
    limit = std::min(limit, spec->second.retry_limit);
    base = std::max(base, spec->second.backoff_base_ns);
    max = std::max(max, spec->second.backoff_max_ns);
  }
  wl.checks.clear();
  if (limit != UINT32_MAX && wl.check_retries > limit) {
    Deactivate(wl, "AdmissionCheckRetryLimitExceeded",
               message + "; retried " + std::to_string(wl.check_retries - 1) +
                   " time(s), the limit is " + std::to_string(limit),
               now);
    return;
  }
  if (batch_version_ >= 24 && reason == "AdmissionCheck") {
    // Kueue evicts a workload whose check asked to retry (Evicted, reason AdmissionCheck) and
    // queues it by that eviction's time (GetQueueOrderTimestamp); an admitted one was evicted
    // when the report came, a reserved one now.
    const Condition* evicted = wl.conditions.Find(ConditionType::kEvicted);
    if (evicted == nullptr || !evicted->status || evicted->reason != "AdmissionCheck") {
      SetCondition(wl, ConditionType::kEvicted, true, "AdmissionCheck", message, now);
      evicted = wl.conditions.Find(ConditionType::kEvicted);
    }
    wl.queued_at_ns = evicted->last_transition_ns;
  }
  const int64_t wait = requeue_after_ns > 0 ? requeue_after_ns
                                            : Backoff(wl, base, max > 0 ? max : base, wl.check_retries);
  wl.requeue_at_ns = now + wait;
  SetCondition(wl, ConditionType::kRequeued, false, reason, message, now);
  SetCondition(wl, ConditionType::kQuotaReserved, false, reason, message, now);
  auto d = NewDecision(current_sequence_).initBody().initRequeued();
  Ref(d.initWorkload(), wl);
  d.setRequeueAtNs(wl.requeue_at_ns);
  d.setAttempt(wl.check_retries);
  d.setReason(reason + ": " + message);
  AddTimer(wl.requeue_at_ns, TimerKind::kRequeue, wl.key, wl.generation);
}

void Engine::Deactivate(WorkloadState& wl, const std::string& reason, const std::string& message,
                        int64_t now) {
  if (wl.queued) Dequeue(wl);
  if (HoldsQuota(wl.phase)) ReleaseQuota(wl, reason, now);
  SetPhase(wl, Phase::kDeactivated);
  wl.fencing_token.clear();
  SetCondition(wl, ConditionType::kDeactivated, true, reason, message, now);
  Ended(wl, now);
  auto d = NewDecision(current_sequence_).initBody().initDeactivated();
  Ref(d.initWorkload(), wl);
  d.setReason(reason);
  d.setMessage(message);
}

// ---------------------------------------------------------------------------------------------
// Evictions and pods.

void Engine::EvictForReason(WorkloadState& wl, const std::string& reason,
                            const std::string& message, int pod_set_action,
                            int64_t drain_deadline_ns, int64_t now) {
  if (!Evictable(wl.phase)) return;
  SetPhase(wl, Phase::kEvicting);
  cqs_.at(wl.cluster_queue).holders[static_cast<size_t>(wl.holder_index)].evictable = false;
  wl.fencing_token.clear();  // the token of this admission is no longer valid
  SetCondition(wl, ConditionType::kEvicted, true, reason, message, now);
  auto e = NewDecision(current_sequence_).initBody().initEvictionStarted();
  Ref(e.initWorkload(), wl);
  e.setGeneration(wl.generation);
  e.setReason(Txt(reason));
  e.setMessage(Txt(message));
  e.setPodSetAction(pod_set_action == 1 ? schema::PodSetAction::DRAIN : schema::PodSetAction::TERMINATE);
  e.setDrainDeadlineNs(drain_deadline_ns);
  if (!wl.pods_released) {
    PodsGone(wl, reason, now);
    return;
  }
  wl.drain_deadline_ns = drain_deadline_ns;
  if (drain_deadline_ns > 0) AddTimer(drain_deadline_ns, TimerKind::kDrain, wl.key, wl.generation);
}

void Engine::PodsGone(WorkloadState& wl, const std::string& why, int64_t now) {
  ADM_CHECK(wl.phase == Phase::kEvicting, "pods gone for %s in phase %s", wl.name.c_str(),
            PhaseName(wl.phase));
  wl.pods_released = false;
  wl.pods_ready = false;
  const AfterEviction after = wl.after_eviction;
  wl.after_eviction = AfterEviction::kRequeue;
  if (after == AfterEviction::kDeactivate) {
    Deactivate(wl, wl.deactivate_reason, wl.deactivate_message, now);
  } else if (after == AfterEviction::kRetry) {
    const int64_t requeue_after = wl.retry_after_ns;
    wl.retry_after_ns = 0;
    ReleaseAndRetry(wl, "AdmissionCheck", "requeued after the check asked to retry",
                    requeue_after, now);
  } else if (after == AfterEviction::kPodsReady) {
    ReleaseQuota(wl, why, now);
    ++wl.pods_ready_requeues;
    if (config_.backoff_limit_count > 0 &&
        static_cast<int32_t>(wl.pods_ready_requeues) > config_.backoff_limit_count) {
      SetPhase(wl, Phase::kPending);
      Deactivate(wl, "RequeuingLimitExceeded",
                 "not ready within the timeout " + std::to_string(wl.pods_ready_requeues) +
                     " times (limit " + std::to_string(config_.backoff_limit_count) + ")",
                 now);
      return;
    }
    SetPhase(wl, Phase::kPending);
    wl.admission = Assignment{};
    wl.checks.clear();
    wl.queued_at_ns = now;  // Kueue's requeuingTimestamp Eviction for PodsReadyTimeout
    const int64_t wait = Backoff(wl, int64_t{config_.backoff_base_seconds} * 1'000'000'000,
                                 int64_t{config_.backoff_max_seconds} * 1'000'000'000,
                                 wl.pods_ready_requeues);
    wl.requeue_at_ns = now + wait;
    SetCondition(wl, ConditionType::kRequeued, false, "PodsReadyTimeout", "waiting out the backoff", now);
    auto d = NewDecision(current_sequence_).initBody().initRequeued();
    Ref(d.initWorkload(), wl);
    d.setRequeueAtNs(wl.requeue_at_ns);
    d.setAttempt(wl.pods_ready_requeues);
    d.setReason("PodsReadyTimeout");
    AddTimer(wl.requeue_at_ns, TimerKind::kRequeue, wl.key, wl.generation);
  } else {
    ReleaseQuota(wl, why, now);
    RequeueAfterEviction(wl, now);
  }
}

std::vector<const WorkloadState*> Engine::RevocationTargets(
    schema::RevocationRequested::Reader r) const {
  std::vector<const WorkloadState*> out;
  auto target = r.getTarget();
  if (target.which() == schema::RevocationRequested::Target::WORKLOAD) {
    auto it = workloads_.find(KeyOf(target.getWorkload()));
    if (it != workloads_.end() && Evictable(it->second.phase)) out.push_back(&it->second);
    return out;
  }
  std::optional<int> flavor;
  if (target.which() == schema::RevocationRequested::Target::FLAVOR) {
    flavor = flavor_ids_.Find(target.getFlavor().cStr());
    if (!flavor) return out;  // a flavor never named is used by no workload
  }
  const std::string check =
      target.which() == schema::RevocationRequested::Target::CHECK ? target.getCheck().cStr() : "";
  for (const auto& [key, wl] : workloads_) {
    if (!Evictable(wl.phase)) continue;
    bool hit = false;
    if (flavor) {
      for (const auto& [fr, amount] : wl.admission.usage) hit = hit || FrFlavor(fr) == *flavor;
    } else {
      hit = wl.checks.count(check) != 0;
    }
    if (hit) out.push_back(&wl);
  }
  return out;
}

void Engine::Revoke(schema::RevocationRequested::Reader r, int64_t now) {
  const int action = r.getPodSetAction() == schema::PodSetAction::DRAIN ? 1 : 0;
  for (const WorkloadState* target : RevocationTargets(r)) {
    WorkloadState& wl = workloads_.at(target->key);  // the engine's own, found read-only
    if (batch_version_ >= 21) revoked_in_batch_.insert(wl.key);
    EvictForReason(wl, "Revoked", std::string("revoked by ") + current_actor_ + ": " +
                                      r.getReason().cStr(),
                   action, r.getDrainDeadlineNs(), now);
  }
}

// ---------------------------------------------------------------------------------------------
// Activation (Kueue's spec.active), engine v21.

InputVerdict Engine::ValidateActivation(schema::WorkloadActivation::Reader a) const {
  InputVerdict v = ValidateRef(a.getWorkload(), "workloadActivationSet");
  if (!v.status.ok()) return v;
  const WorkloadState* wl = FindReferenced(a.getWorkload());
  if (wl == nullptr) wl = &workloads_.at(KeyOf(a.getWorkload()));
  if (wl->phase != Phase::kDeactivated && Terminal(wl->phase)) {
    v.status = Status(Code::kFailedPrecondition,
                      "workload " + wl->key + " has ended (" + PhaseName(wl->phase) + "): " +
                          (a.getActive() ? "only a deactivated workload can be reactivated"
                                         : "there is nothing to deactivate") +
                          "; nothing recorded");
    return v;
  }
  if (a.getActive() == IsActive(*wl)) {
    v.noop = true;
    v.note = "workload " + wl->key +
             (a.getActive() ? " is active"
              : wl->phase == Phase::kDeactivated ? " is already deactivated"
                                                  : " is already being deactivated");
  }
  return v;
}

void Engine::SetActive(schema::WorkloadActivation::Reader a, int64_t now) {
  auto it = workloads_.find(KeyOf(a.getWorkload()));
  if (it == workloads_.end() ||
      (Terminal(it->second.phase) && it->second.phase != Phase::kDeactivated)) {
    return;  // intake refuses these; a ledger written by hand may still hold one
  }
  WorkloadState& wl = it->second;
  std::string message = a.getActive() ? "The workload was reactivated" : "The workload is deactivated";
  if (a.getMessage().size() > 0) message += ": " + std::string(View(a.getMessage()));
  if (a.getActive()) {
    if (wl.phase == Phase::kDeactivated) {
      Reactivate(wl, message, now);
    } else if (!IsActive(wl)) {
      // Active again while its pods go: requeued once they are gone, as any evicted workload.
      wl.after_eviction = AfterEviction::kRequeue;
      wl.deactivate_reason.clear();
      wl.deactivate_message.clear();
    }
    return;
  }
  if (!IsActive(wl)) return;
  // Kueue's workload controller: an inactive workload is evicted (reason Deactivated) if it
  // holds quota, and leaves its queue; it stays inactive until spec.active is true again.
  if (Evictable(wl.phase)) {
    wl.after_eviction = AfterEviction::kDeactivate;
    wl.deactivate_reason = "Deactivated";
    wl.deactivate_message = message;
    EvictForReason(wl, "Deactivated", message, 0, 0, now);
  } else if (wl.phase == Phase::kEvicting) {
    wl.after_eviction = AfterEviction::kDeactivate;
    wl.deactivate_reason = "Deactivated";
    wl.deactivate_message = message;
  } else {
    Deactivate(wl, "Deactivated", message, now);
  }
}

void Engine::Reactivate(WorkloadState& wl, const std::string& message, int64_t now) {
  // Kueue: Requeued True (Reactivated), the requeue state cleared, queued by its creation time.
  SetPhase(wl, Phase::kPending);
  wl.admission = Assignment{};
  wl.checks.clear();
  wl.fencing_token.clear();
  wl.check_retries = 0;
  wl.pods_ready_requeues = 0;
  wl.requeue_at_ns = 0;
  wl.queued_at_ns = wl.creation_ns;
  wl.after_eviction = AfterEviction::kRequeue;
  wl.deactivate_reason.clear();
  wl.deactivate_message.clear();
  SetCondition(wl, ConditionType::kDeactivated, false, "Reactivated", message, now);
  SetCondition(wl, ConditionType::kRequeued, true, "Reactivated", message, now);
  auto d = NewDecision(current_sequence_).initBody().initRequeued();
  Ref(d.initWorkload(), wl);
  d.setRequeueAtNs(now);
  d.setAttempt(0);
  d.setReason(Txt("Reactivated: " + message));
  Enqueue(wl, now);
}

}  // namespace admission::projections

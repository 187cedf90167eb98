// Engine, part 2: the step from reservation to running pods and back. Admission checks,
// pod runtime reports, timers (TTL, backoff, podsReady, drain deadlines, max wait, max
// execution, maintenance windows), revocation, node failures and quota reclaims.

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <climits>

#include "projections/engine.h"
#include "projections/engine_internal.h"
#include "schema/event_codec.h"
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

namespace {

// Jitter for backoffs: a hash of (uid, attempt), never a random number (FNV-1a, 64 bits).
uint64_t Fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string TokenOf(const WorkloadState& wl) { return wl.uid + "/" + std::to_string(wl.generation); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// Definitions.

void Engine::DefineAdmissionCheck(schema::AdmissionCheckDef::Reader def, uint64_t seq) {
  AdmissionCheckSpec spec;
  spec.name = def.getName().cStr();
  spec.controller = def.getControllerName().cStr();
  spec.pending_ttl_ns = def.getPendingTtlNs();
  spec.reject_on_timeout = def.getOnTimeout() == schema::OnTimeout::REJECT;
  spec.retry_limit = def.getRetryLimit();
  spec.backoff_base_ns = def.getBackoffBaseNs();
  spec.backoff_max_ns = def.getBackoffMaxNs();
  spec.version = seq;
  checks_[spec.name] = spec;
  DefinitionsChanged();
}

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
  DefinitionsChanged();
}

void Engine::DefineMaintenance(schema::MaintenanceWindow::Reader window, int64_t now) {
  MaintenanceWindowSpec spec{window.getName().cStr(), window.getFlavor().cStr(),
                             window.getStartNs(), window.getEndNs()};
  windows_[spec.name] = spec;
  // When the window is over, what it blocked may fit again.
  if (spec.end_ns > now) AddTimer(spec.end_ns, TimerKind::kWindow, spec.name, 0);
  DefinitionsChanged();
}

std::optional<std::string> Engine::MaintenanceConflict(const WorkloadState& wl, int flavor,
                                                       int64_t now) const {
  const std::string& name = flavor_ids_.Name(flavor);
  for (const auto& [wname, w] : windows_) {
    if (w.flavor != name || w.end_ns <= now) continue;
    // The expected runtime [now, now + runtime) overlaps the window; an unknown runtime only
    // conflicts while the window is open.
    const int64_t until = wl.expected_runtime_ns > 0 ? now + wl.expected_runtime_ns : now + 1;
    if (until > w.start_ns) {
      return "maintenance window " + wname + " on flavor " + name +
             " overlaps the expected runtime";
    }
  }
  return std::nullopt;
}

int64_t Engine::FlavorCapacityLeft(int flavor, int resource) const {
  const std::string& name = flavor_ids_.Name(flavor);
  bool known = false;
  int64_t capacity = 0;
  for (const auto& [node, n] : nodes_) {
    if (n.flavor != name) continue;
    known = true;
    if (n.failed) continue;
    auto c = n.capacity.find(resource);
    if (c != n.capacity.end()) capacity += c->second;
  }
  if (!known) return INT64_MAX;
  const Fr fr = MakeFr(flavor, resource);
  for (const auto& [cq_name, cq] : cqs_) {
    auto u = cq.usage.find(fr);
    if (u != cq.usage.end()) capacity -= u->second;
  }
  return capacity;
}

int64_t Engine::EffectivePriority(const WorkloadState& wl, int64_t now) const {
  if (config_.aging_step_ns <= 0 || wl.phase != Phase::kPending) return wl.priority;
  const int64_t waited = std::max<int64_t>(0, now - wl.queued_at_ns);
  return wl.priority + std::min<int64_t>(config_.aging_priority_max, waited / config_.aging_step_ns);
}

// ---------------------------------------------------------------------------------------------
// Validation at intake.

InputVerdict Engine::Validate(schema::Event::Reader event) const {
  InputVerdict v;
  auto body = event.getBody();
  auto find = [&](schema::WorkloadRef::Reader ref) -> const WorkloadState* {
    auto it = workloads_.find(KeyOf(ref));
    if (it == workloads_.end()) return nullptr;
    if (ref.getUid().size() > 0 && it->second.uid != ref.getUid().cStr()) return nullptr;
    return &it->second;
  };
  auto refuse = [&](const std::string& why) {
    v.status = Status(Code::kInvalidArgument, why);
    return v;
  };
  switch (body.which()) {
    case schema::Event::Body::CHECK_STATE_REPORTED: {
      auto r = body.getCheckStateReported();
      const std::string check = r.getCheck().cStr();
      auto spec = checks_.find(check);
      if (spec == checks_.end()) return refuse("no AdmissionCheck " + check);
      const std::string actor = event.getActor().cStr();
      const std::string via = r.getViaFieldManager().cStr();
      if (!via.empty()) {
        // Forwarded by a bridge from a cluster: the field manager it saw must be the owner.
        if (via != spec->second.controller) {
          return refuse("check " + check + " forwarded by '" + actor + "' was written by field "
                        "manager '" + via + "', not by its owner '" + spec->second.controller +
                        "'; nothing recorded");
        }
      } else if (actor != spec->second.controller) {
        return refuse("identity '" + actor + "' does not own check " + check + " (owner: '" +
                      spec->second.controller + "'); nothing recorded");
      }
      const WorkloadState* wl = find(r.getWorkload());
      if (wl == nullptr) return refuse("no workload " + KeyOf(r.getWorkload()));
      if (!Evictable(wl->phase)) {
        return refuse("workload " + KeyOf(r.getWorkload()) + " holds no reservation (" +
                      PhaseName(wl->phase) + "); a report for generation " +
                      std::to_string(r.getGeneration()) + " is stale");
      }
      if (r.getGeneration() != wl->generation) {
        return refuse("stale report: generation " + std::to_string(r.getGeneration()) +
                      ", but the current reservation of " + KeyOf(r.getWorkload()) +
                      " is generation " + std::to_string(wl->generation));
      }
      auto cs = wl->checks.find(check);
      if (cs == wl->checks.end()) {
        return refuse("check " + check + " is not required for " + KeyOf(r.getWorkload()) +
                      " in ClusterQueue " + wl->cluster_queue);
      }
      if (wl->phase == Phase::kAdmitted && r.getState() == schema::CheckState::PENDING &&
          cs->second.state == CheckState::kReady) {
        return refuse("check " + check + " is Ready for the admitted generation " +
                      std::to_string(wl->generation) + " of " + KeyOf(r.getWorkload()) +
                      "; an admitted workload's check may report Retry or Rejected, or the "
                      "admission may be revoked, but it cannot go back to Pending");
      }
      if (cs->second.report_sequence != 0 && cs->second.state == ToCheckState(r.getState()) &&
          cs->second.message == r.getMessage().cStr()) {
        v.noop = true;
        v.note = "check " + check + " is already " + CheckStateName(cs->second.state) +
                 " for generation " +
                 std::to_string(wl->generation) + " (sequence " +
                 std::to_string(cs->second.report_sequence) + ")";
      }
      return v;
    }
    case schema::Event::Body::PODS_REPORTED: {
      auto r = body.getPodsReported();
      const WorkloadState* wl = find(r.getWorkload());
      if (wl == nullptr) return refuse("no workload " + KeyOf(r.getWorkload()));
      const std::string token = r.getFencingToken().cStr();
      const bool gone_report = r.getReport() == schema::PodsReport::TERMINATED ||
                               r.getReport() == schema::PodsReport::FINISHED;
      const bool valid = wl->phase == Phase::kAdmitted ? token == wl->fencing_token
                         : gone_report && wl->phase == Phase::kEvicting ? token == TokenOf(*wl)
                                                                        : false;
      if (!valid) {
        return refuse("stale fencing token '" + token + "' for " + KeyOf(r.getWorkload()) +
                      " (" + PhaseName(wl->phase) +
                      (wl->fencing_token.empty() ? std::string(", no valid token")
                                                 : ", current token " + wl->fencing_token) +
                      "): the admission it named was revoked or replaced");
      }
      if (r.getReport() == schema::PodsReport::RELEASED && wl->pods_released) {
        v.noop = true;
        v.note = "pods of " + KeyOf(r.getWorkload()) + " already reported released";
      }
      return v;
    }
    case schema::Event::Body::WORKLOAD_SUBMITTED:
    case schema::Event::Body::WORKLOAD_IMPORTED: {
      schema::Workload::Reader wl = body.isWorkloadSubmitted()
                                        ? body.getWorkloadSubmitted().getWorkload()
                                        : body.getWorkloadImported().getWorkload();
      std::string why = RequestsOutOfRange(wl.getPodSets());
      if (!why.empty()) {
        return refuse(std::string("workload ") + wl.getNamespace().cStr() + "/" + wl.getName().cStr() +
                      ": " + why);
      }
      return v;
    }
    case schema::Event::Body::REVOCATION_REQUESTED: {
      const size_t affected = RevocationTargets(body.getRevocationRequested()).size();
      if (affected == 0) return refuse("the revocation affects no reserved or admitted workload");
      return v;
    }
    default:
      return v;
  }
}

// ---------------------------------------------------------------------------------------------
// Checks.

std::vector<std::string> Engine::RequiredChecks(const WorkloadState& wl) const {
  std::vector<std::string> out;
  // The ClusterQueue's spec: through the workload's cached state when it has one (its spec is
  // cq_specs_'s entry, set and reset with it), else looked up.
  const ClusterQueueSpec* spec = nullptr;
  if (wl.cq_state != nullptr) {
    if (wl.cq_state->spec) spec = &*wl.cq_state->spec;
  } else if (auto cq = cq_specs_.find(wl.cluster_queue); cq != cq_specs_.end()) {
    spec = &cq->second;
  }
  if (spec == nullptr || spec->admission_checks.empty()) return out;
  for (const auto& [check, on_flavors] : spec->admission_checks) {
    bool applies = on_flavors.empty();
    for (const auto& [fr, amount] : wl.admission.usage) {
      const std::string& flavor = flavor_ids_.Name(FrFlavor(fr));
      applies = applies || std::find(on_flavors.begin(), on_flavors.end(), flavor) != on_flavors.end();
    }
    if (applies) out.push_back(check);
  }
  return out;
}

void Engine::StartChecks(WorkloadState& wl, int64_t now) {
  wl.checks.clear();
  const std::string& key = wl.key;
  for (const std::string& check : RequiredChecks(wl)) {
    CheckStatus& cs = wl.checks[check];
    cs.state = CheckState::kPending;
    cs.last_transition_ns = now;
    auto spec = checks_.find(check);
    if (spec != checks_.end() && spec->second.pending_ttl_ns > 0) {
      AddTimer(now + spec->second.pending_ttl_ns, TimerKind::kTtl, key, wl.generation, check);
    }
  }
  TryAdmit(wl, now);
}

void Engine::TryAdmit(WorkloadState& wl, int64_t now) {
  if (wl.phase != Phase::kReserved) return;
  std::vector<uint64_t> versions;
  for (const auto& [name, cs] : wl.checks) {
    if (cs.state != CheckState::kReady) return;
    versions.push_back(cs.report_sequence);
  }
  // The reservation must still be valid: the ClusterQueue exists and is active.
  const ClusterQueueState* cq = wl.cq_state;
  if (cq == nullptr) {
    auto found = cqs_.find(wl.cluster_queue);
    if (found != cqs_.end()) cq = &found->second;
  }
  if (cq == nullptr || !cq->spec || !cq->inactive_reason.empty()) {
    ReleaseAndRetry(wl, "ReservationInvalid", "ClusterQueue " + wl.cluster_queue +
                                                  " no longer admits this reservation", 0, now);
    return;
  }
  wl.phase = Phase::kAdmitted;
  wl.admitted_at_ns = now;
  wl.fencing_token = TokenOf(wl);
  wl.pods_ready = false;
  SetCondition(wl, ConditionType::kAdmitted, true, "Admitted", "The workload is admitted", now);
  auto a = NewDecision(current_sequence_).initBody().initAdmitted();
  Ref(a.initWorkload(), wl);
  a.setGeneration(wl.generation);
  a.setFencingToken(Txt(wl.fencing_token));
  a.setQuotaVersion(wl.quota_version);
  auto cv = a.initCheckVersions(static_cast<unsigned>(versions.size()));
  for (size_t i = 0; i < versions.size(); ++i) cv.set(static_cast<unsigned>(i), versions[i]);
  const std::string& key = wl.key;
  if (config_.wait_for_pods_ready && config_.pods_ready_timeout_ns > 0) {
    AddTimer(now + config_.pods_ready_timeout_ns, TimerKind::kPodsReady, key, wl.generation);
  }
  if (wl.max_execution_ns > 0) AddTimer(now + wl.max_execution_ns, TimerKind::kMaxExec, key, wl.generation);
}

void Engine::ReportCheck(schema::CheckStateReported::Reader report, uint64_t seq, int64_t now) {
  auto it = workloads_.find(KeyOf(report.getWorkload()));
  if (it == workloads_.end()) return;
  WorkloadState& wl = it->second;
  // Intake refuses stale or foreign reports; a hand-written ledger may still hold one, and it
  // changes nothing (deterministically).
  if (!Evictable(wl.phase) || report.getGeneration() != wl.generation) return;
  const std::string check = report.getCheck().cStr();
  auto cs_it = wl.checks.find(check);
  if (cs_it == wl.checks.end()) return;
  CheckStatus& cs = cs_it->second;
  const CheckState state = ToCheckState(report.getState());
  // Intake refuses this; an admitted workload's checks never go back to Pending.
  if (wl.phase == Phase::kAdmitted && state == CheckState::kPending) return;
  if (cs.state != state) cs.last_transition_ns = now;
  cs.state = state;
  cs.message = report.getMessage().cStr();
  cs.report_sequence = seq;
  const AdmissionCheckSpec spec = checks_.count(check) ? checks_.at(check) : AdmissionCheckSpec{};
  if (state == CheckState::kReady) {
    TryAdmit(wl, now);
  } else if (state == CheckState::kRetry) {
    const std::string message = "check " + check + " asked to retry: " + cs.message;
    if (wl.phase == Phase::kAdmitted) {
      wl.after_eviction = AfterEviction::kRetry;
      wl.retry_after_ns = report.getRequeueAfterNs();
      EvictForReason(wl, "AdmissionCheck", message, 0, 0, now);
    } else {
      ReleaseAndRetry(wl, "AdmissionCheck", message, report.getRequeueAfterNs(), now);
    }
  } else if (state == CheckState::kRejected) {
    const std::string message = "check " + check + " rejected the workload: " + cs.message;
    wl.after_eviction = AfterEviction::kDeactivate;
    wl.deactivate_reason = "AdmissionCheckRejected";
    wl.deactivate_message = message;
    EvictForReason(wl, "AdmissionCheck", message, 0, 0, now);
  }
}

void Engine::ReleaseAndRetry(WorkloadState& wl, const std::string& reason,
                             const std::string& message, int64_t requeue_after_ns, int64_t now) {
  if (HoldsQuota(wl.phase)) ReleaseQuota(wl, reason, now);
  wl.phase = Phase::kPending;
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

int64_t Engine::Backoff(const WorkloadState& wl, int64_t base_ns, int64_t max_ns,
                        uint32_t attempt) const {
  if (base_ns <= 0) return 0;
  int64_t b = base_ns;
  for (uint32_t i = 1; i < attempt && b < max_ns; ++i) b = b > INT64_MAX / 2 ? INT64_MAX : b * 2;
  if (max_ns > 0) b = std::min(b, max_ns);
  // Up to 10% jitter, a hash of (uid, attempt): workloads requeued together spread out, and a
  // replay computes the same instant.
  const uint64_t h = Fnv1a(wl.uid + "/" + std::to_string(attempt));
  return b + static_cast<int64_t>(h % static_cast<uint64_t>(b / 10 + 1));
}

void Engine::Deactivate(WorkloadState& wl, const std::string& reason, const std::string& message,
                        int64_t now) {
  if (wl.queued) Dequeue(wl);
  if (HoldsQuota(wl.phase)) ReleaseQuota(wl, reason, now);
  wl.phase = Phase::kDeactivated;
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
  wl.phase = Phase::kEvicting;
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
      wl.phase = Phase::kPending;
      Deactivate(wl, "RequeuingLimitExceeded",
                 "not ready within the timeout " + std::to_string(wl.pods_ready_requeues) +
                     " times (limit " + std::to_string(config_.backoff_limit_count) + ")",
                 now);
      return;
    }
    wl.phase = Phase::kPending;
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
    EvictForReason(wl, "Revoked", std::string("revoked by ") + current_actor_ + ": " +
                                      r.getReason().cStr(),
                   action, r.getDrainDeadlineNs(), now);
  }
}

void Engine::NodeChanged(schema::NodeCapacity::Reader n, int kind, int64_t now) {
  NodeState& node = nodes_[n.getNode().cStr()];
  if (n.getFlavor().size() > 0) node.flavor = n.getFlavor().cStr();
  if (n.getCapacity().size() > 0) {
    node.capacity.clear();
    for (auto c : n.getCapacity()) node.capacity[resources_.Id(c.getName().cStr())] = c.getMilli();
  }
  node.failed = kind == 1;
  EnforceCapacity(now);
  DefinitionsChanged();
}

// Evicts what no longer fits after a node failure or a quota decrease: lowest priority first,
// then the most recently reserved, then uid. Quota held by workloads already draining counts
// as leaving.
void Engine::EnforceCapacity(int64_t now) {
  // Nothing holds quota (a platform being set up): nothing can be over a limit.
  if (std::all_of(cqs_.begin(), cqs_.end(), [](const auto& cq) { return cq.second.holders.empty(); })) {
    return;
  }
  RebuildTreeIfNeeded();
  // Each pass evicts one holder (which is then no longer evictable) or returns, so there are
  // at most as many passes as holders, plus the last one that finds nothing to do.
  size_t holders = 0;
  for (const auto& [name, cq] : cqs_) holders += cq.holders.size();
  const size_t passes_max = holders + 1;
  for (size_t pass = 0;; ++pass) {
    ADM_CHECK(pass < passes_max, "capacity enforcement: pass %zu, but only %zu holders", pass,
              holders);
    // Draining workloads' usage is on its way out.
    std::vector<std::pair<std::string, const WorkloadState*>> draining;
    for (const auto& [name, cq] : cqs_) {
      for (const WorkloadState* wl : cq.AdmittedInKeyOrder()) {
        if (wl->phase == Phase::kEvicting) draining.emplace_back(wl->cluster_queue, wl);
      }
    }
    for (auto& [cq, wl] : draining) {
      int node = tree_.FindClusterQueue(cq);
      if (node >= 0) tree_.AddUsage(node, wl->admission.usage, -1);
    }
    std::set<Fr> node_short;     // flavor-resources short of node capacity
    for (const auto& [name, node] : nodes_) {
      auto f = flavor_ids_.Find(node.flavor);
      if (!f) continue;
      for (const auto& [r, cap] : node.capacity) {
        int64_t left = FlavorCapacityLeft(*f, r);
        for (auto& [cq, wl] : draining) {
          auto u = wl->admission.usage.find(MakeFr(*f, r));
          if (u != wl->admission.usage.end()) left += u->second;
        }
        if (left < 0) node_short.insert(MakeFr(*f, r));
      }
    }
    std::set<std::pair<std::string, Fr>> quota_short;  // (ClusterQueue, fr) over its limits
    for (const auto& [name, cq] : cqs_) {
      int node = tree_.FindClusterQueue(name);
      if (node < 0) continue;
      for (const auto& [fr, amount] : cq.usage) {
        if (tree_.Available(node, fr) < 0) quota_short.insert({name, fr});
      }
    }
    for (auto& [cq, wl] : draining) {
      int node = tree_.FindClusterQueue(cq);
      if (node >= 0) tree_.AddUsage(node, wl->admission.usage, +1);
    }
    if (node_short.empty() && quota_short.empty()) return;
    const WorkloadState* victim = nullptr;
    std::string reason;
    for (const auto& [name, cq] : cqs_) {
      for (const WorkloadState* holder : cq.AdmittedInKeyOrder()) {
        const WorkloadState& wl = *holder;
        if (!Evictable(wl.phase)) continue;
        std::string why;
        for (const auto& [fr, amount] : wl.admission.usage) {
          if (amount == 0) continue;
          if (node_short.count(fr)) why = "NodeFailure";
          else if (why.empty() && quota_short.count({wl.cluster_queue, fr})) why = "QuotaReclaimed";
        }
        if (why.empty()) continue;
        // The lowest priority, then the most recently reserved, then the highest uid, then
        // the first key.
        bool better = victim == nullptr;
        if (!better && wl.priority != victim->priority) better = wl.priority < victim->priority;
        else if (!better && wl.reserved_at_ns != victim->reserved_at_ns) {
          better = wl.reserved_at_ns > victim->reserved_at_ns;
        } else if (!better && wl.uid != victim->uid) {
          better = wl.uid > victim->uid;
        } else if (!better) {
          better = wl.key < victim->key;
        }
        if (better) {
          victim = &wl;
          reason = why;
        }
      }
    }
    if (victim == nullptr) return;  // only draining workloads are left over: they will go
    WorkloadState& v = workloads_.at(victim->key);
    EvictForReason(v, reason,
                   reason == "NodeFailure"
                       ? "a node of its flavor failed and the rest cannot hold every admission"
                       : "its ClusterQueue's quota was lowered below what is admitted",
                   0, 0, now);
  }
}

// ---------------------------------------------------------------------------------------------
// Timers.

const char* TimerKindName(TimerKind kind) {
  switch (kind) {
    case TimerKind::kDrain: return "drain";
    case TimerKind::kMaxExec: return "maxexec";
    case TimerKind::kMaxWait: return "maxwait";
    case TimerKind::kPodsReady: return "podsready";
    case TimerKind::kRequeue: return "requeue";
    case TimerKind::kRetire: return "retire";
    case TimerKind::kTtl: return "ttl";
    case TimerKind::kWindow: return "window";
  }
  return "drain";
}

std::optional<TimerKind> TimerKindFromName(std::string_view name) {
  for (int k = 0; k < kTimerKinds; ++k) {
    if (name == TimerKindName(static_cast<TimerKind>(k))) return static_cast<TimerKind>(k);
  }
  return std::nullopt;
}

bool JoinedTextLess(const std::array<std::string_view, 3>& a,
                    const std::array<std::string_view, 3>& b) {
  // Walks both as if joined with '|', stopping at the first difference.
  size_t ia = 0, pa = 0, ib = 0, pb = 0;
  auto next = [](const std::array<std::string_view, 3>& parts, size_t& i, size_t& p,
                 unsigned char* c) {
    while (i < parts.size()) {
      if (p < parts[i].size()) {
        *c = static_cast<unsigned char>(parts[i][p++]);
        return true;
      }
      ++i;
      p = 0;
      if (i < parts.size()) {
        *c = '|';
        return true;
      }
    }
    return false;
  };
  for (;;) {
    unsigned char ca = 0, cb = 0;
    const bool has_a = next(a, ia, pa, &ca);
    const bool has_b = next(b, ib, pb, &cb);
    if (!has_a || !has_b) return !has_a && has_b;
    if (ca != cb) return ca < cb;
  }
}

bool Timer::operator<(const Timer& other) const {
  if (at_ns != other.at_ns) return at_ns < other.at_ns;
  // No kind's name is a prefix of another's, so the names decide first, in enum order.
  if (kind != other.kind) return kind < other.kind;
  char ga[24], gb[24];
  const auto ea = std::to_chars(ga, ga + sizeof ga, generation).ptr;
  const auto eb = std::to_chars(gb, gb + sizeof gb, other.generation).ptr;
  return JoinedTextLess({key, std::string_view(ga, static_cast<size_t>(ea - ga)), detail},
                        {other.key, std::string_view(gb, static_cast<size_t>(eb - gb)),
                         other.detail});
}

void Engine::AddTimer(int64_t at_ns, TimerKind kind, const std::string& key, uint64_t generation,
                      const std::string& detail) {
  timers_.insert(Timer{at_ns, kind, key, generation, detail});
}

void Engine::Ended(const WorkloadState& wl, int64_t now) {
  const int64_t keep =
      wl.phase == Phase::kDeactivated ? config_.retain_deactivated_ns : config_.retain_finished_ns;
  if (keep == kRetainForever) return;
  // Saturated: a retention of centuries is "never" in practice, and must not overflow.
  const int64_t at = keep > std::numeric_limits<int64_t>::max() - now
                         ? std::numeric_limits<int64_t>::max()
                         : now + std::max<int64_t>(keep, 0);
  AddTimer(at, TimerKind::kRetire, wl.key, wl.generation, wl.uid);
}

void Engine::Retire(const std::string& key, const std::string& uid) {
  auto it = workloads_.find(key);
  // Replaced by a new submission of the same name, or not ended (a hand-written ledger).
  if (it == workloads_.end() || it->second.uid != uid || !Terminal(it->second.phase)) return;
  const WorkloadState& wl = it->second;
  ADM_CHECK(!wl.queued && wl.holder_index < 0, "retiring %s, which is queued or holds quota",
            key.c_str());
  UidIndex();  // folds the pending entries, so none names it after this
  auto u = uid_to_key_.find(uid);
  if (u != uid_to_key_.end() && u->second == key) uid_to_key_.erase(u);
  orphans_.erase(key);  // an orphan that ended is dropped lazily (RequeueOrphans): now
  workloads_.erase(it);
  ++retired_;
}

bool Engine::FireTimers(int64_t now) {
  bool changed = false;
  while (!timers_.empty() && timers_.begin()->at_ns <= now) {
    const Timer timer = std::move(timers_.extract(timers_.begin()).value());
    const TimerKind kind = timer.kind;
    const std::string& key = timer.key;
    const uint64_t generation = timer.generation;
    const std::string& detail = timer.detail;
    if (kind == TimerKind::kWindow) {
      DefinitionsChanged();
      changed = true;
      continue;
    }
    if (kind == TimerKind::kRetire) {  // changes nothing a decision reads
      Retire(key, detail);
      continue;
    }
    auto it = workloads_.find(key);
    if (it == workloads_.end()) continue;
    WorkloadState& wl = it->second;
    if (kind == TimerKind::kTtl) {
      auto cs = wl.checks.find(detail);
      if (wl.phase != Phase::kReserved || wl.generation != generation || cs == wl.checks.end() ||
          cs->second.state != CheckState::kPending) {
        continue;
      }
      const AdmissionCheckSpec& spec = checks_.at(detail);
      const std::string message = "check " + detail + " still Pending after its TTL";
      if (spec.reject_on_timeout) {
        wl.after_eviction = AfterEviction::kDeactivate;
        wl.deactivate_reason = "AdmissionCheckTimeout";
        wl.deactivate_message = message;
        EvictForReason(wl, "AdmissionCheck", message, 0, 0, now);
      } else {
        ReleaseAndRetry(wl, "AdmissionCheckTimeout", message, 0, now);
      }
      changed = true;
    } else if (kind == TimerKind::kRequeue) {
      if (wl.phase != Phase::kPending || wl.queued || wl.requeue_at_ns > now) continue;
      wl.requeue_at_ns = 0;
      SetCondition(wl, ConditionType::kRequeued, true, "BackoffFinished", "The backoff is over", now);
      Enqueue(wl, now);
      changed = true;
    } else if (kind == TimerKind::kPodsReady) {
      if (wl.phase != Phase::kAdmitted || wl.generation != generation || wl.pods_ready) continue;
      wl.after_eviction = AfterEviction::kPodsReady;
      EvictForReason(wl, "PodsReadyTimeout", "not all pods ready within the timeout", 0, 0, now);
      changed = true;
    } else if (kind == TimerKind::kDrain) {
      if (wl.phase != Phase::kEvicting || wl.generation != generation) continue;
      auto d = NewDecision(current_sequence_).initBody().initDrainDeadlinePassed();
      Ref(d.initWorkload(), wl);
      d.setGeneration(wl.generation);
      d.setMessage("the runtime did not confirm the pods gone by the drain deadline; the quota "
                   "is released");
      PodsGone(wl, "DrainDeadlinePassed", now);
      changed = true;
    } else if (kind == TimerKind::kMaxExec) {
      if (!Evictable(wl.phase) || wl.generation != generation) continue;
      wl.after_eviction = AfterEviction::kDeactivate;
      wl.deactivate_reason = "MaximumExecutionTimeExceeded";
      wl.deactivate_message = "ran longer than its maximum execution time";
      EvictForReason(wl, "MaximumExecutionTimeExceeded", wl.deactivate_message, 0, 0, now);
      changed = true;
    } else if (kind == TimerKind::kMaxWait) {
      if (wl.phase != Phase::kPending || wl.starvation_alerted ||
          std::to_string(wl.pending_since_ns) != detail) {
        continue;
      }
      wl.starvation_alerted = true;
      auto d = NewDecision(current_sequence_).initBody().initStarvationAlert();
      Ref(d.initWorkload(), wl);
      d.setWaitingNs(now - wl.pending_since_ns);
      d.setMessage("pending longer than the max wait of ClusterQueue " + wl.cluster_queue +
                   "; it stays queued");
      changed = true;
    }
  }
  return changed;
}

}  // namespace admission::projections

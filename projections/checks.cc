// Admission checks: which checks a reservation requires, their states, and the step from
// QuotaReserved to Admitted once every one is Ready. Kueue: pkg/controller/admissionchecks and
// pkg/workload/admissionchecks.go (the workload controller's syncAdmissionCheckConditions).

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "projections/engine.h"
#include "projections/engine_internal.h"
#include "projections/pod_set_updates.h"
#include "schema/event_codec.h"
#include "schema/result.h"

namespace admission::projections {

void Engine::DefineAdmissionCheck(schema::AdmissionCheckDef::Reader def, uint64_t seq) {
  AdmissionCheckSpec spec;
  spec.name = def.getName().cStr();
  spec.controller = def.getControllerName().cStr();
  spec.parameters = def.getParameters().cStr();
  spec.pending_ttl_ns = def.getPendingTtlNs();
  spec.reject_on_timeout = def.getOnTimeout() == schema::OnTimeout::REJECT;
  spec.retry_limit = def.getRetryLimit();
  spec.backoff_base_ns = def.getBackoffBaseNs();
  spec.backoff_max_ns = def.getBackoffMaxNs();
  spec.version = seq;
  checks_[spec.name] = spec;
  DefinitionsChanged();
}

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
  // Engine v25: the ledger decides its own budget checks now, in this batch.
  if (batch_version_ >= 25 && !DecideBudgetChecks(wl, now)) return;
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
  std::vector<PodSetUpdate> updates;
  if (batch_version_ >= 17) {
    if (std::optional<std::string> conflict = MergeCheckUpdates(wl, &updates)) {
      FailToStart(wl, *conflict, now);
      return;
    }
  }
  SetPhase(wl, Phase::kAdmitted);
  wl.admitted_at_ns = now;
  wl.fencing_token = TokenOf(wl);
  wl.pods_ready = false;
  SetCondition(wl, ConditionType::kAdmitted, true, "Admitted", "The workload is admitted", now);
  if (AfsOrders(*cq->spec)) AfsSettle(wl, now);
  auto a = NewDecision(current_sequence_).initBody().initAdmitted();
  Ref(a.initWorkload(), wl);
  a.setGeneration(wl.generation);
  a.setFencingToken(Txt(wl.fencing_token));
  a.setQuotaVersion(wl.quota_version);
  auto cv = a.initCheckVersions(static_cast<unsigned>(versions.size()));
  for (size_t i = 0; i < versions.size(); ++i) cv.set(static_cast<unsigned>(i), versions[i]);
  if (!updates.empty()) {
    PutPodSetUpdates(a.initPodSetUpdates(static_cast<unsigned>(updates.size())), updates);
  }
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
  const CheckState state = ToCheckState(report.getState());
  // Intake refuses this; an admitted workload's checks never go back to Pending.
  if (wl.phase == Phase::kAdmitted && state == CheckState::kPending) return;
  if (batch_version_ >= 17) {
    cs_it->second.pod_set_updates = ToPodSetUpdates(report.getPodSetUpdates());
  }
  SetCheckState(wl, check, state, report.getMessage().cStr(), seq, report.getRequeueAfterNs(),
                now);
}

void Engine::SetCheckState(WorkloadState& wl, const std::string& check, CheckState state,
                           const std::string& message, uint64_t seq, int64_t requeue_after_ns,
                           int64_t now) {
  CheckStatus& cs = wl.checks.at(check);
  if (cs.state != state) cs.last_transition_ns = now;
  cs.state = state;
  cs.message = message;
  cs.report_sequence = seq;
  if (state == CheckState::kReady) {
    TryAdmit(wl, now);
  } else if (state == CheckState::kRetry) {
    const std::string why = "check " + check + " asked to retry: " + cs.message;
    if (wl.phase == Phase::kAdmitted) {
      wl.after_eviction = AfterEviction::kRetry;
      wl.retry_after_ns = requeue_after_ns;
      EvictForReason(wl, "AdmissionCheck", why, 0, 0, now);
    } else {
      ReleaseAndRetry(wl, "AdmissionCheck", why, requeue_after_ns, now);
    }
  } else if (state == CheckState::kRejected) {
    const std::string why = "check " + check + " rejected the workload: " + cs.message;
    wl.after_eviction = AfterEviction::kDeactivate;
    wl.deactivate_reason = "AdmissionCheckRejected";
    wl.deactivate_message = why;
    EvictForReason(wl, "AdmissionCheck", why, 0, 0, now);
  }
}

std::optional<std::string> Engine::MergeCheckUpdates(const WorkloadState& wl,
                                                     std::vector<PodSetUpdate>* merged) const {
  const bool any = std::any_of(wl.checks.begin(), wl.checks.end(),
                               [](const auto& c) { return !c.second.pod_set_updates.empty(); });
  if (!any) return std::nullopt;
  for (const PodSetSpec& ps : wl.pod_sets) {
    // What Kueue's job reconciler starts from: the assigned flavors' nodeLabels (a later flavor's
    // value wins, as utilmaps.Copy) and tolerations, each flavor once, by resource id.
    PodSetUpdate info;
    info.pod_set = ps.name;
    auto assignment = std::find_if(wl.admission.pod_sets.begin(), wl.admission.pod_sets.end(),
                                   [&](const PodSetAssignment& a) { return a.name == ps.name; });
    if (assignment != wl.admission.pod_sets.end()) {
      std::vector<int> seen;
      for (const auto& [resource, flavor_id] : assignment->flavors) {
        if (std::find(seen.begin(), seen.end(), flavor_id) != seen.end()) continue;
        seen.push_back(flavor_id);
        auto flavor = flavors_.find(flavor_ids_.Name(flavor_id));
        if (flavor == flavors_.end()) continue;
        for (const auto& [key, value] : flavor->second.node_labels) info.node_selector[key] = value;
        info.tolerations.insert(info.tolerations.end(), flavor->second.tolerations.begin(),
                                flavor->second.tolerations.end());
      }
    }
    // Then every check's update of this podSet, checks in name order.
    PodSetUpdate from_checks;
    from_checks.pod_set = ps.name;
    for (const auto& [check, cs] : wl.checks) {
      for (const PodSetUpdate& update : cs.pod_set_updates) {
        if (update.pod_set != ps.name) continue;
        if (std::optional<std::string> conflict = MergePodSetUpdate(update, &info)) {
          return "in admission check \"" + check + "\": " + *conflict;
        }
        // A subset of `info`'s keys: no conflict here once there was none there.
        (void)MergePodSetUpdate(update, &from_checks);
        break;
      }
    }
    // And onto the pod template: its nodeSelector and tolerations are the podSet's (its labels
    // and annotations are unknown here; the runtime checks those when it applies the updates).
    PodSetUpdate template_info;
    template_info.node_selector = ps.node_selector;
    template_info.tolerations = ps.tolerations;
    if (std::optional<std::string> conflict = MergePodSetUpdate(info, &template_info)) {
      return "podSet " + ps.name + "'s pod template: " + *conflict;
    }
    if (!(from_checks == PodSetUpdate{ps.name, {}, {}, {}, {}})) merged->push_back(from_checks);
  }
  return std::nullopt;
}

// Kueue's job reconciler finishing a workload whose job cannot start (FailedToStart): from
// TryAdmit when the checks' podSetUpdates conflict (v17), and for an Admitted workload whose
// runtime reports pods failedToStart (v18). No pod ran, so the quota is released at once.
void Engine::FailToStart(WorkloadState& wl, const std::string& message, int64_t now) {
  ReleaseQuota(wl, "FailedToStart", now);
  SetPhase(wl, Phase::kFinished);
  SetCondition(wl, ConditionType::kFinished, true, "FailedToStart", message, now);
  Ended(wl, now);
  auto r = NewDecision(current_sequence_).initBody().initRejected();
  Ref(r.initWorkload(), wl);
  r.setReason("FailedToStart");
  r.setMessage(Txt(message));
}

}  // namespace admission::projections

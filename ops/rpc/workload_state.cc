#include "ops/rpc/workload_state.h"

#include "ops/views/render.h"
#include "schema/fencing_token.h"

namespace admission::ops::rpc {

namespace {

using ::admission::rpc::WorkloadState;
using projections::Phase;

WorkloadState::Phase PhaseOf(Phase phase) {
  switch (phase) {
    case Phase::kPending: return WorkloadState::Phase::PENDING;
    case Phase::kReserved: return WorkloadState::Phase::QUOTA_RESERVED;
    case Phase::kAdmitted: return WorkloadState::Phase::ADMITTED;
    case Phase::kEvicting: return WorkloadState::Phase::EVICTING;
    case Phase::kFinished: return WorkloadState::Phase::FINISHED;
    case Phase::kRejected: return WorkloadState::Phase::REJECTED;
    case Phase::kDeactivated: return WorkloadState::Phase::DEACTIVATED;
    case Phase::kDeleted: return WorkloadState::Phase::DELETED;
  }
  return WorkloadState::Phase::PENDING;
}

void FillLabels(capnp::List<::admission::rpc::KeyValue>::Builder out,
                const projections::Labels& labels) {
  unsigned i = 0;
  for (const auto& [key, value] : labels) {
    out[i].setKey(key);
    out[i].setValue(value);
    ++i;
  }
}

void FillUpdates(capnp::List<::admission::rpc::PodSetUpdate>::Builder out,
                 const std::vector<projections::PodSetUpdate>& updates) {
  for (unsigned i = 0; i < updates.size(); ++i) {
    const auto& u = updates[i];
    out[i].setPodSet(u.pod_set);
    FillLabels(out[i].initLabels(static_cast<unsigned>(u.labels.size())), u.labels);
    FillLabels(out[i].initAnnotations(static_cast<unsigned>(u.annotations.size())), u.annotations);
    FillLabels(out[i].initNodeSelector(static_cast<unsigned>(u.node_selector.size())),
               u.node_selector);
    auto ts = out[i].initTolerations(static_cast<unsigned>(u.tolerations.size()));
    for (unsigned t = 0; t < u.tolerations.size(); ++t) {
      ts[t].setKey(u.tolerations[t].key);
      ts[t].setOperator(u.tolerations[t].op);
      ts[t].setValue(u.tolerations[t].value);
      ts[t].setEffect(u.tolerations[t].effect);
    }
  }
}

void FillChecks(capnp::List<::admission::rpc::AdmissionCheckState>::Builder out,
                const projections::WorkloadState& wl) {
  unsigned i = 0;
  for (const auto& [name, cs] : wl.checks) {
    out[i].setName(name);
    out[i].setState(projections::CheckStateName(cs.state));
    out[i].setMessage(cs.message);
    out[i].setReportSequence(cs.report_sequence);
    out[i].setRetryCount(wl.check_retries);
    FillUpdates(out[i].initPodSetUpdates(static_cast<unsigned>(cs.pod_set_updates.size())),
                cs.pod_set_updates);
    ++i;
  }
}

void FillPodSets(capnp::List<::admission::rpc::PodSetAssignment>::Builder out,
                 const projections::Engine& engine, const projections::WorkloadState& wl) {
  for (unsigned i = 0; i < wl.admission.pod_sets.size(); ++i) {
    const auto& psa = wl.admission.pod_sets[i];
    out[i].setName(psa.name);
    out[i].setCount(psa.count);
    auto flavors = out[i].initFlavors(static_cast<unsigned>(psa.flavors.size()));
    unsigned f = 0;
    for (const auto& [resource, flavor] : psa.flavors) {
      flavors[f].setResource(engine.resource_names().Name(resource));
      flavors[f].setFlavor(engine.flavor_names().Name(flavor));
      ++f;
    }
  }
}

}  // namespace

void FillWorkloadState(WorkloadState::Builder out, const projections::Engine& engine,
                       const projections::WorkloadState& wl) {
  out.setNamespace(wl.ns);
  out.setName(wl.name);
  out.setUid(wl.uid);
  out.setPhase(PhaseOf(wl.phase));
  out.setGeneration(wl.generation);
  out.setFencingToken(wl.fencing_token);
  if (wl.phase == Phase::kEvicting && wl.generation > 0) {
    out.setEvictingToken(schema::FencingToken(wl.uid, wl.generation));
  }
  if (projections::HoldsQuota(wl.phase)) {
    out.setClusterQueue(wl.cluster_queue);
    FillPodSets(out.initPodSets(static_cast<unsigned>(wl.admission.pod_sets.size())), engine, wl);
  }
  FillChecks(out.initChecks(static_cast<unsigned>(wl.checks.size())), wl);
  if (wl.phase == Phase::kPending) {
    out.setPendingReason(wl.pending_reason);
    out.setPendingMessage(wl.pending_message);
  }
  out.setPodsReady(wl.pods_ready);
  out.setPodsReleased(wl.phase == Phase::kEvicting && wl.pods_released);
  out.setActive(projections::IsActive(wl));
  // Import admits at generation 1 (projections' Import); every later reservation is another.
  out.setImportedAdmission(wl.imported && wl.generation == 1);
  out.setStatus(WorkloadStatusJson(engine, wl).dump());
}

}  // namespace admission::ops::rpc

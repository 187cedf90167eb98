// Deletions of definitions (objectDeleted; docs/k8s.md, "Definition deletions"): what
// intake refuses, and what the decider does with one. Kueue keeps an in-use ResourceFlavor with
// its finalizer (resourceflavor_controller.go), and a deleted ClusterQueue terminates: it admits
// nothing new while its admitted workloads run on (clusterqueue_controller.go, cache's
// TerminateClusterQueue); a deleted LocalQueue's workloads leave the queue (queue manager's
// DeleteLocalQueue) and wait as "LocalQueue NAME doesn't exist" (workload_controller.go).

#include <string>
#include <vector>

#include "projections/engine.h"

namespace admission::projections {

namespace {

std::string JoinNames(const std::vector<std::string>& names) {
  constexpr size_t kNamesShownMax = 5;
  std::string out;
  for (size_t i = 0; i < names.size() && i < kNamesShownMax; ++i) {
    out += (i == 0 ? "" : ", ") + names[i];
  }
  if (names.size() > kNamesShownMax) {
    out += " and " + std::to_string(names.size() - kNamesShownMax) + " more";
  }
  return out;
}

}  // namespace

// The refusal of an object still in use is kFailedPrecondition (only a change elsewhere lets it
// pass): the Kubernetes bridge keeps such an object and tries again (ops/k8s/bridge/internal/
// definitions/deletion.go, InUse, by the code admitd answers); any other refusal is
// kInvalidArgument, and lets it go.
Status Engine::ValidateDeletion(schema::ObjectDeleted::Reader del) const {
  const std::string kind = del.getKind().cStr();
  const std::string ns = del.getNamespace().cStr();
  const std::string name = del.getName().cStr();
  auto refuse = [&](const std::string& why, Code code = Code::kInvalidArgument) {
    return Status(code, "cannot delete " + kind + " '" + (ns.empty() ? name : ns + "/" + name) +
                            "': " + why + "; nothing recorded");
  };
  auto in_use = [&](const std::string& why) { return refuse(why, Code::kFailedPrecondition); };
  bool defined = false;
  if (kind == "ResourceFlavor") {
    defined = flavors_.count(name) > 0;
  } else if (kind == "Cohort") {
    defined = cohort_specs_.count(name) > 0;
  } else if (kind == "ClusterQueue") {
    defined = cq_specs_.count(name) > 0;
  } else if (kind == "LocalQueue") {
    defined = lqs_.count(ns + "/" + name) > 0;
  } else if (kind == "AdmissionCheck") {
    defined = checks_.count(name) > 0;
  } else if (kind == "WorkloadPriorityClass") {
    defined = priority_classes_.count(name) > 0;
  } else if (kind == "BudgetPolicy") {
    defined = budgets_.count(name) > 0;
  } else if (kind == "Topology") {
    // Engine v26 (docs/tas.md): kept while a ResourceFlavor names it (Kueue's finalizer).
    if (topologies_.count(name) == 0) return refuse("the ledger does not define it");
    std::vector<std::string> flavors;
    for (const auto& [fname, f] : flavors_) {
      if (f.topology == name) flavors.push_back(fname);
    }
    if (flavors.empty()) return Status::Ok();
    return in_use("in use by ResourceFlavor " + JoinNames(flavors) +
                  " (delete it or remove its topologyName first)");
  } else {
    return refuse("not a kind of definition (ResourceFlavor, Cohort, ClusterQueue, LocalQueue, "
                  "AdmissionCheck, WorkloadPriorityClass, Topology or BudgetPolicy)");
  }
  if (!defined) return refuse("the ledger does not define it");
  // In use: Kueue's finalizer keeps a ResourceFlavor that a ClusterQueue names. The ledger also
  // keeps an AdmissionCheck that a ClusterQueue names or a reserved workload waits on (Kueue
  // deletes it and the ClusterQueue turns inactive; docs/semantics.md).
  std::vector<std::string> users;
  for (const auto& [cq_name, spec] : cq_specs_) {
    bool uses = false;
    if (kind == "ResourceFlavor") {
      for (const ResourceGroup& g : spec.resource_groups) {
        for (const FlavorQuotas& f : g.flavors) uses = uses || flavor_ids_.Name(f.flavor) == name;
      }
    } else if (kind == "AdmissionCheck") {
      uses = spec.admission_checks.count(name) > 0;
    }
    if (uses) users.push_back(cq_name);
  }
  if (!users.empty()) {
    return in_use("in use by ClusterQueue " + JoinNames(users) +
                  " (delete it or remove the reference first)");
  }
  if (kind == "AdmissionCheck") {
    for (const auto& [key, wl] : workloads_) {
      if (Evictable(wl.phase) && wl.checks.count(name) > 0) users.push_back(key);
    }
    if (!users.empty()) {
      return in_use("the reservations of " + JoinNames(users) + " wait on it");
    }
  }
  return Status::Ok();
}

void Engine::OrphanQueuedOf(const std::string& local_queue_key, int64_t now) {
  for (auto& [key, wl] : workloads_) {
    if (!wl.queued || wl.local_queue_key != local_queue_key) continue;
    Dequeue(wl);
    orphans_.insert(key);
    std::string reason, message;
    ResolveClusterQueue(wl, &reason, &message);
    SetPending(wl, "Inadmissible", message, "", "", 0, now, /*emit=*/true);
  }
}

}  // namespace admission::projections

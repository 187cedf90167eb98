#include "projections/engine_version.h"

#include <iterator>

namespace admission::projections {

namespace {

// What each engine version changed, version 1 first: a data table, one entry a version.
constexpr const char* kEngineVersionNotes[] = {
    // v1
    "decider part 1: quota, flavors, cohorts, preemption, partial admission",
    // v2
    "decider part 2: admission checks, pods and fencing tokens, revocation, node "
    "capacity, quota reclaim, maintenance windows, aging, fair sharing; decisions "
    "record the causing input's actor",
    // v3
    "a preemption whose cohort changed earlier in the cycle re-chooses its victims "
    "(or reserves, if it now fits) instead of waiting a cycle; cohort trees are "
    "re-activated once per cycle",
    // v4
    "a head held by a stopped LocalQueue no longer ends its ClusterQueue's turn in a "
    "cycle: the next head is tried, as in Kueue, where a stopped LocalQueue's "
    "workloads are not queued at all",
    // v5
    "a workload that ended leaves the live state after its retention (Kueue's "
    "objectRetentionPolicies.workloads, default 24 h of ledger time), so its name is "
    "free again; v4 ledgers replay under v5 (same decisions for every ledger v4's "
    "intake could write)",
    // v6
    "a workload preempted in a batch (one instant of ledger time) preempts nobody "
    "before the next batch, as in Kueue, where it is nominated again only after its "
    "eviction was observed; without this, preemptions whose victims release at once "
    "could rotate inside one batch without end (the decider aborted). Inputs record the "
    "version that sequenced them, and replay decides each batch as that version did "
    "(v5 for older inputs)",
    // v7
    "a ClusterQueue that covers `pods` counts one per pod of each podSet against that "
    "flavor's quota, and `pods` appears in the assignment, as in Kueue",
    // v8
    "hierarchical cohorts: the entries of a cycle are ordered by borrowing height "
    "(how far up the cohort tree their quota comes from) before priority, and flavors "
    "compare by it, as in Kueue (FindHeightOfLowestSubtreeThatFits)",
    // v9
    "the victim search follows Kueue's getTargets: a ClusterQueue is under nominal "
    "when its usage is below nominal in the resources needing preemption (not usage "
    "plus request), and then tries all candidates without borrowing first; with "
    "borrowWithinCohort a victim at or above the threshold forbids borrowing for the "
    "rest of the search, and at or above nominal such victims are left out; a victim "
    "of another ClusterQueue is InCohortReclaimWhileBorrowing only when below the "
    "threshold, else InCohortReclamation",
    // v10
    "quantities in flavor assignment messages are in Kubernetes' canonical form, as "
    "Kueue writes them (memory 64Gi, not 68719476736)",
    // v11
    "an entry that fits only by preempting but finds no victims holds the capacity it "
    "needs for the rest of the cycle unless its ClusterQueue's reclaimWithinCohort is "
    "Any, as Kueue's reserveCapacityForUnreclaimablePreempt; a StrictFIFO head waiting "
    "so holds it in every cycle, as Kueue nominates such a head in every cycle",
    // v12
    "flavor stickiness: a workload whose flavor search stopped before its last flavor "
    "and admitted nothing resumes the search after that flavor in the next cycle, until "
    "its ClusterQueue releases quota or changes, as Kueue's LastTriedFlavorIdx; such a "
    "resumed search never concludes that the workload can never fit",
    // v13
    "deletions of definitions, as Kueue's finalizers and queue manager treat them: the "
    "queued workloads of a deleted LocalQueue leave the queue and wait with "
    "\"LocalQueue NAME doesn't exist\" (v12 left them queued), a deleted AdmissionCheck "
    "is removed (v12 kept it); intake refuses deleting an undefined object, a "
    "ResourceFlavor a ClusterQueue names, or an AdmissionCheck a ClusterQueue or a "
    "reservation needs",
    // v14
    "admission fair sharing (Kueue's admissionFairSharing): in a ClusterQueue whose "
    "admissionScope is UsageBasedAdmissionFairSharing, heads are ordered by their "
    "LocalQueue's decayed usage over its weight before priority, and victims of one "
    "ClusterQueue from a LocalQueue of higher usage go first; usage decays with "
    "usageHalfLifeTime at every usageSamplingInterval, and a reservation adds its entry "
    "penalty until admitted (no ledger before v14 can enable it)",
    // v15
    "victims already being evicted: a preemptor's victim search keeps workloads that "
    "are draining (Evicting) as candidates and orders them first (Kueue's "
    "candidatesOrdering), and evicts only those not already evicted; when all its "
    "victims are draining it evicts nobody more and waits (v14 left draining workloads "
    "out and could preempt more while they drained)",
    // v16
    "fair-sharing preemption as Kueue's fairPreemptions: the ClusterQueues give back in "
    "the order of their dominant share, walking the cohort tree down from the root; a "
    "preemptor within its nominal quota takes from them without comparing shares "
    "(InCohortReclamation), otherwise a victim is taken when the preemptor's share after "
    "admission is at most the target's after giving it back (LessThanOrEqualToFinalShare), "
    "else, one per ClusterQueue, below the target's share now (LessThanInitialShare), so "
    "a borrowing preemptor takes from queues with a higher share; borrowWithinCohort no "
    "longer takes part in the choice under fair sharing, and reclaimWithinCohort lets a request "
    "above nominal quota preempt (Kueue's canPreemptWhileBorrowing); shares compare "
    "exactly, by the almost least common ancestors in hierarchical cohorts",
    // v17
    "admission checks' podSetUpdates (Kueue's AdmissionCheckState.podSetUpdates): the "
    "decider keeps each check's latest updates, and at admission merges them per podSet "
    "(checks in name order) with the assigned flavors' nodeLabels and tolerations and "
    "the podSet's nodeSelector as Kueue's PodSetInfo.Merge does; the Admitted decision "
    "carries the checks' merged updates when there are any, and a conflict finishes the "
    "workload instead (Rejected, reason FailedToStart, quota released), as Kueue's job "
    "reconciler does; before v17 a report's podSetUpdates are ignored",
    // v18
    "a runtime that cannot start an admitted workload's pods (e.g. an admission check's "
    "podSetUpdates conflicting with the pod template's own labels, which only the "
    "runtime sees) reports pods failedToStart with the admission's token and its error: "
    "the workload is finished as Kueue's job reconciler finishes it when starting the "
    "job fails for good (Rejected, reason FailedToStart, the report's message) and, as "
    "no pod ran, its quota is released at once; no ledger before v18 holds the report",
    // v19
    "a node model a real inventory cannot trip: node capacity bounds admissions only once "
    "a node report says the inventory is complete, and preemption frees it as it frees "
    "quota (a borrower no longer starves its lender); a node that appears is never a "
    "failure, only a known node lost or shrunk evicts, and a quota decrease evicts by "
    "quota only; a failed node's report names the workloads whose pods ran on it, which "
    "are evicted first, and every NodeFailure eviction releases the quota when the pods "
    "are reported gone or 10 minutes after the failure at the latest",
    // v20
    "a preemptor waiting for its victims to drain keeps its place at the head of its "
    "ClusterQueue and holds the capacity it needs in every cycle, as Kueue requeues it at "
    "once (RequeueReasonPendingPreemption) and adds its usage to the cycle's snapshot; "
    "before, it slept until the next release while lower-priority workloads took the "
    "room its victims freed, and were preempted by it in turn",
    // v21
    "Kueue's spec.active: an input sets a workload's activation; false deactivates it (a "
    "pending one leaves its queue, a reserved or admitted one is evicted with reason "
    "Deactivated and deactivated once its pods are gone) and true reactivates a "
    "deactivated one (Requeued, reason Reactivated, its retries forgotten, queued by its "
    "creation time); a workload submitted inactive waits deactivated instead of being "
    "rejected; and a revoked workload is not admitted again in the batch that revoked it, "
    "as a preempted one is not (Kueue readmits an evicted workload in a later cycle); no "
    "ledger before v21 holds the input",
    // v22
    "an imported workload keeps Kueue's record of its admission: the QuotaReserved and "
    "Admitted times of its status (bounded by the import's own time), PodsReady, its "
    "admission checks (Ready, with their messages and times), its requeue count and an "
    "eviction in progress (imported evicting), so preemption orders it by when Kueue "
    "reserved it (newest first) and its read model shows Kueue's times; a Workload without "
    "an admission imports pending, by its creation time, after its requeueAt; before, "
    "every import was reserved and admitted at the import",
    // v23
    "classical preemption as Kueue v0.17's: hierarchical reclaim (a workload of another "
    "ClusterQueue that uses the quota of a subtree that holds the preemptor's request is "
    "reclaimed whatever the borrowing, InCohortReclamation), candidates of other "
    "ClusterQueues only under reclaimWithinCohort and only while they and their cohorts "
    "below the common one exceed their quota, borrowWithinCohort's threshold per victim "
    "(InCohortReclaimWhileBorrowing below it), evicted candidates first, and the attempts "
    "with and without borrowing in Kueue's order; before, Kueue v0.9's, where a preemptor "
    "whose subtree had room stayed pending. The flavor assigner simulates each flavor's "
    "preemption (Kueue's oracle): no candidates moves the search on, reclaiming ranks above "
    "preempting, borrowing is counted after the victims go. An imported pending workload "
    "evicted by PodsReadyTimeout or an admission check is queued by its eviction's time",
    // v24
    "fair sharing orders a cycle's entries as Kueue's fairSharingIterator: one tournament "
    "up the cohort tree per entry taken, each cohort preferring the child that does not "
    "borrow what its entry requests, then the lower dominant share with the entry's usage "
    "added (cohort weights count), then priority and queue order time, shares recomputed "
    "after each entry; before, entries were sorted once by their ClusterQueue's share. A "
    "workload whose admission check asked to retry is evicted (Evicted, AdmissionCheck) and "
    "queues by that time, as Kueue's GetQueueOrderTimestamp; a preempted one queues by its "
    "creation time even after such an eviction (before, a retry kept the creation time and "
    "a later preemption the retry's)",
    // v25
    "budgets: an admission check of controller admission-ledger.io/budget is decided by the "
    "ledger at quota reservation, from the BudgetPolicy its parameters name: Ready when the "
    "resource-hours used in the period, those committed by workloads holding quota and this "
    "workload's fit the limit, Retry until the next period when they do not, Rejected when "
    "no period can hold it (docs/budgets.md); before, such a check waited for a report",
    // v26
    "topology-aware scheduling: a pod set with a topology request (or in a ClusterQueue "
    "whose flavors all have a topology) is placed on the domains of its TAS flavor's "
    "Topology by Kueue v0.17's algorithm, from the nodes' labels, capacity and non-TAS "
    "usage in the ledger; the placement is recorded as its topologyAssignment, a placement "
    "that does not fit makes it preempt or wait (docs/tas.md); before, topologies and "
    "topology requests were ignored",
    // v27
    "a pending workload's reason is emitted (pendingReasonChanged) only when it differs from "
    "the one last emitted: the reason a cycle does not emit (\"Workload no longer fits after "
    "processing another workload\") changes its condition but no longer replaces the reason "
    "shown; before, the next cycle emitted that same reason again",
    // v28
    "a pending workload that waited for the victims it preempted, passed over because a "
    "workload of the same requests and priority ahead of it found it cannot fit, takes that "
    "workload's reason (pendingReasonChanged); before, it kept saying it waited for "
    "evictions that had ended",
};
static_assert(std::size(kEngineVersionNotes) == kEngineVersion,
              "every engine version has its note");

}  // namespace

const char* EngineVersionNote(uint32_t version) {
  if (version == 0 || version > std::size(kEngineVersionNotes)) return "unknown engine version";
  return kEngineVersionNotes[version - 1];
}

}  // namespace admission::projections

package jobs

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"admission-ledger/bridge/internal/ledger"
	"admission-ledger/bridge/internal/ledgerevents"
)

// PodsReadyCondition is the Workload condition that says whether the admitted pods are ready,
// as Kueue's job reconciler writes it (its reasons and messages).
const PodsReadyCondition = "PodsReady"

// Kueue's reasons and messages of the PodsReady condition.
const (
	podsReadyReasonStarted      = "Started"
	podsReadyReasonWaitForStart = "WaitForStart"
	podsReadyMessageReady       = "All pods reached readiness and the workload is running"
	podsReadyMessageNotReady    = "Not all pods are ready or succeeded"
)

// PodsReady: as Kueue's batch Job integration computes it, the Job's Ready pods and succeeded
// pods together reach the admitted count.
func PodsReady(job *batchv1.Job, admitted int32) bool {
	return ptr.Deref(job.Status.Ready, 0)+job.Status.Succeeded >= admitted
}

// reportReady records `pods ready` with the current token, once: when the object runs under
// that token, its pods reached the admitted counts of Ready or succeeded (the kind's
// PodsReady), and the ledger does not hold it yet (a repeat is answered from the ledger by its
// request id anyway).
func (r *Reconciler) reportReady(ctx context.Context, job GenericJob, state *LedgerWorkload,
	token string) (ctrl.Result, error) {
	podSets := job.PodSets()
	admitted := make([]int32, 0, len(podSets))
	for _, ps := range podSets {
		_, count, ok := state.Assignment(ps.Name)
		if !ok {
			return pollAfter(r.Ledger), nil
		}
		admitted = append(admitted, count)
	}
	if state.PodsReady || !job.PodsReady(admitted) {
		return pollAfter(r.Ledger), nil
	}
	if err := r.recordPods(ctx, state, ledgerevents.PodsReport_ready, token, ""); err != nil {
		return r.retryOrDrop(ctx, job, err)
	}
	log.FromContext(ctx).Info("pods ready reported", "fencingToken", token, "admitted", admitted)
	return pollAfter(r.Ledger), nil
}

// PodsReadyConditionFor is the PodsReady condition the Workload object shows for the ledger's
// state, given the one it has (nil: none), or nil for none. While Admitted: True (reason
// Started) once the ledger holds `pods ready` for the admission, False (WaitForStart)
// before. After an admission ended (evicted, requeued, deactivated), a condition the object
// has turns False (WaitForStart), as Kueue's does when the workload is no longer admitted; a
// workload never admitted has none, and a Finished one keeps its own. The transition time is
// kept while the status stays the same.
func PodsReadyConditionFor(state *LedgerWorkload, current map[string]any, now time.Time) map[string]any {
	status, reason, message := "False", podsReadyReasonWaitForStart, podsReadyMessageNotReady
	switch {
	case state.Phase == ledger.PhaseAdmitted && state.PodsReady:
		status, reason, message = "True", podsReadyReasonStarted, podsReadyMessageReady
	case state.Phase == ledger.PhaseAdmitted:
	case current == nil:
		return nil
	case state.Phase == ledger.PhaseFinished:
		return current
	}
	since := now.UTC().Format(time.RFC3339)
	if current != nil && current["status"] == status {
		if t, ok := current["lastTransitionTime"].(string); ok && t != "" {
			since = t
		}
	}
	return map[string]any{"type": PodsReadyCondition, "status": status, "reason": reason,
		"message": message, "lastTransitionTime": since}
}

// withPodsReady puts the PodsReady condition for the ledger's state into desired (a status to
// write), from the one the Workload object's status has.
func withPodsReady(desired, current map[string]any, state *LedgerWorkload, now time.Time) {
	var have map[string]any
	if list, ok := current["conditions"].([]any); ok {
		for _, c := range list {
			if m, ok := c.(map[string]any); ok && m["type"] == PodsReadyCondition {
				have = m
			}
		}
	}
	condition := PodsReadyConditionFor(state, have, now)
	if condition == nil {
		return
	}
	list, _ := desired["conditions"].([]any)
	desired["conditions"] = append(list, condition)
}

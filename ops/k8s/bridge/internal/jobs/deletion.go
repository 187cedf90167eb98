package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"admission-ledger/bridge/internal/finalizers"
	"admission-ledger/bridge/internal/ledger"
	"admission-ledger/bridge/internal/ledgerevents"
)

// JobFinalizer holds a labelled Job's deletion until the ledger has recorded its workload's
// deletion (Kueue holds its Workloads with kueue.x-k8s.io/resource-in-use the same way): a
// bridge that was down when the Job was deleted still finds it, with a deletion timestamp,
// when it starts again.
const JobFinalizer = "admission-ledger.io/workload"

// DeleteRequestID names the deletion of one object's workload: one call per uid.
func DeleteRequestID(obj client.Object) string { return deleteRequestIDOf(string(obj.GetUID())) }

// deleteRequestIDOf: DeleteRequestID of the object with this uid.
func deleteRequestIDOf(uid string) string {
	sum := sha256.Sum256([]byte("deleted\x00" + uid))
	return "admit-k8s/delete/" + hex.EncodeToString(sum[:16])
}

// ensureFinalizer adds JobFinalizer to a labelled object that does not carry it yet.
func (r *Reconciler) ensureFinalizer(ctx context.Context, job GenericJob) error {
	return finalizers.Add(ctx, r.Client, job.Object(), r.Kind.Name, JobFinalizer)
}

// deleted handles a Job being deleted: its workload is deleted in the ledger (WorkloadDeleted,
// the ledger releases any quota it holds), and only then is the finalizer removed.
func (r *Reconciler) deleted(ctx context.Context, job GenericJob) (ctrl.Result, error) {
	obj := job.Object()
	if !controllerutil.ContainsFinalizer(obj, JobFinalizer) {
		return ctrl.Result{}, nil
	}
	logger := log.FromContext(ctx)
	state, err := r.ledgerWorkloadOf(ctx, obj)
	if err != nil {
		logger.Error(err, "reading the ledger's workloads failed; will retry")
		return ctrl.Result{RequeueAfter: RetryAfterTransportError}, nil
	}
	// Nothing to tell when the ledger never had it or already deleted it. The ledger's workload
	// of this name is this Job's (the finalizer keeps the name taken until it is recorded), or
	// an earlier Job's that ended: its deletion changes nothing, and is recorded as before.
	if state != nil && state.Phase != ledger.PhaseDeleted {
		event, err := WorkloadDeletedEvent(state.Namespace, state.Name, state.UID)
		if err != nil {
			return ctrl.Result{}, err
		}
		outcome, err := r.Ledger.Record(ctx, DeleteRequestID(obj), [][]byte{event})
		var refused *ledger.Refused
		switch {
		case errors.As(err, &refused) && !refused.Retryable():
			// The ledger will not take it (e.g. it retired the workload meanwhile): say so and
			// let the Job go; a deletion it refuses cannot be retried into existence.
			r.Events.Event(obj, corev1.EventTypeWarning, "LedgerRefused", "deleting workload: "+refused.Message)
		case err != nil:
			logger.Error(err, "reporting the Job's deletion failed; will retry")
			return ctrl.Result{RequeueAfter: RetryAfterTransportError}, nil
		case len(outcome.Sequences) > 0:
			logger.Info("workload deleted in the ledger", "sequence", outcome.Sequences[0])
		}
	}
	return ctrl.Result{}, finalizers.Remove(ctx, r.Client, obj, r.Kind.Name, JobFinalizer)
}

// WorkloadDeletedEvent is the input `admitctl delete NAMESPACE/NAME` records.
func WorkloadDeletedEvent(namespace, name, uid string) ([]byte, error) {
	return ledger.BuildEvent(func(event ledgerevents.Event) error {
		d, err := event.Body().NewWorkloadDeleted()
		if err != nil {
			return err
		}
		return ledger.SetNewWorkloadRef(d, namespace, name, uid)
	})
}

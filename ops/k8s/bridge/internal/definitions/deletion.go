package definitions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"admission-ledger/bridge/internal/finalizers"
	"admission-ledger/bridge/internal/ledger"
)

// DefinitionFinalizer holds a definition's deletion until the ledger has recorded it (and, for
// a ClusterQueue, until no workload reserves quota in it: Kueue's resource-in-use finalizer), so
// a bridge that was down when it was deleted still finds it, with a deletion timestamp.
const DefinitionFinalizer = "admission-ledger.io/ledger"

// InUseRetry is how often a deletion the ledger refused because the object is still in use (a
// ResourceFlavor or an AdmissionCheck a ClusterQueue names) is tried again, and how often a
// terminating ClusterQueue is looked at until it is empty.
const InUseRetry = 10 * time.Second

// Deleting is true once an object carries a deletion timestamp: the change that starts a
// deletion changes neither labels nor annotations, and the generation only for some kinds.
var Deleting = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp() == nil && e.ObjectNew.GetDeletionTimestamp() != nil
	},
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// DeleteRequestID names the deletion of one object: one call per uid, so a retry or a restarted
// bridge is answered from admitd's record of the first call.
func DeleteRequestID(obj *unstructured.Unstructured) string {
	sum := sha256.Sum256([]byte("deleted\x00" + obj.GetKind() + "\x00" + obj.GetNamespace() +
		"\x00" + obj.GetName() + "\x00" + string(obj.GetUID())))
	return "admit-k8s/definition-deleted/" + hex.EncodeToString(sum[:16])
}

// ensureFinalizer adds DefinitionFinalizer to an object that does not carry it yet.
func (r *Reconciler) ensureFinalizer(ctx context.Context, obj *unstructured.Unstructured) error {
	return finalizers.Add(ctx, r.Client, obj, r.Kind, DefinitionFinalizer)
}

// deleted forwards the deletion of an object that carries our finalizer, then removes the
// finalizer: at once, or for a ClusterQueue once the ledger shows no workload reserving quota in
// it, or, when the ledger refused because the object is still in use, after it was recorded on a
// later try.
func (r *Reconciler) deleted(ctx context.Context, obj *unstructured.Unstructured) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(obj, DefinitionFinalizer) {
		return ctrl.Result{}, nil
	}
	logger := log.FromContext(ctx).WithValues("kind", r.Kind)
	manifest, err := Manifest(obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	outcome, err := r.Ledger.RecordManifest(ctx, DeleteRequestID(obj), "delete", manifest)
	var refused *ledger.Refused
	switch {
	case errors.As(err, &refused) && InUse(refused):
		logger.Info("the ledger keeps it while it is in use; will retry", "reason", refused.Message)
		r.Events.Event(obj, corev1.EventTypeWarning, "InUse", refused.Message)
		return ctrl.Result{RequeueAfter: InUseRetry}, nil
	case errors.As(err, &refused) && !refused.Retryable():
		// The ledger does not define it (it refused the definition, or never saw it): there is
		// nothing to delete there.
		logger.Info("the ledger does not take the deletion; letting the object go", "reason", refused.Message)
	case err != nil:
		logger.Error(err, "forwarding the deletion failed; will retry")
		return ctrl.Result{RequeueAfter: RetryAfterTransportError}, nil
	case len(outcome.Sequences) > 0 && !outcome.Retried:
		logger.Info("deletion recorded", "sequence", outcome.Sequences[0])
		r.Events.Event(obj, corev1.EventTypeNormal, "DeletionRecorded",
			fmt.Sprintf("deletion recorded in the admission ledger at sequence %d", outcome.Sequences[0]))
	}
	if r.Kind == "ClusterQueue" {
		reserving, err := r.reservingWorkloads(ctx, obj.GetName())
		if err != nil {
			logger.Error(err, "reading the ledger's ClusterQueues failed; will retry")
			return ctrl.Result{RequeueAfter: RetryAfterTransportError}, nil
		}
		if reserving > 0 {
			logger.Info("terminating: workloads still reserve quota in it", "reservingWorkloads", reserving)
			return ctrl.Result{RequeueAfter: InUseRetry}, nil
		}
	}
	return ctrl.Result{}, finalizers.Remove(ctx, r.Client, obj, r.Kind, DefinitionFinalizer)
}

// InUse is true for the ledger's refusal of a deletion whose object something still needs:
// intake's FailedPrecondition (projections/deletions.cc, Engine::ValidateDeletion), told apart by
// its code, not its text; only a later change elsewhere can make it succeed.
func InUse(refused *ledger.Refused) bool {
	return refused.Code == ledger.CodeFailedPrecondition
}

// reservingWorkloads is the ledger's count of workloads reserving quota in a ClusterQueue (a
// deleted one is listed while it is terminating); 0 when the ledger does not list it.
func (r *Reconciler) reservingWorkloads(ctx context.Context, name string) (int64, error) {
	text, err := r.Ledger.Get(ctx, "clusterqueues", "json")
	if err != nil {
		return 0, err
	}
	var list struct {
		Items []map[string]any `json:"items"`
	}
	if err := utiljson.Unmarshal([]byte(text), &list); err != nil {
		return 0, fmt.Errorf("the ledger's clusterqueues are not a JSON List: %w", err)
	}
	for _, item := range list.Items {
		if (&unstructured.Unstructured{Object: item}).GetName() != name {
			continue
		}
		n, _, _ := unstructured.NestedInt64(item, "status", "reservingWorkloads")
		return n, nil
	}
	return 0, nil
}

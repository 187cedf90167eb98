package definitions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"admission-ledger/bridge/internal/finalizers"
	"admission-ledger/bridge/internal/ledger"
)

// DefinitionFinalizer holds a definition's deletion until the ledger has recorded it (and, for
// a ClusterQueue, until no workload reserves quota in it: Kueue's resource-in-use finalizer), so
// a bridge that was down when it was deleted still finds it, with a deletion timestamp. Not on
// the unfinalized kinds (a LocalQueue).
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
// deleted one is listed while it is terminating); 0 when the ledger does not list it. It reads
// that one ClusterQueue: the runner of Kueue's benchmark deletes a thousand at once, and a list
// of all at each made the clean-up quadratic.
func (r *Reconciler) reservingWorkloads(ctx context.Context, name string) (int64, error) {
	text, err := r.Ledger.GetWith(ctx, "clusterqueues", "json", ledger.Query{Name: name})
	var refused *ledger.Refused
	if errors.As(err, &refused) && refused.Code == ledger.CodeNotFound {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	// A named object comes alone, as kubectl prints it (not in a List).
	var item map[string]any
	if err := utiljson.Unmarshal([]byte(text), &item); err != nil {
		return 0, fmt.Errorf("the ledger's clusterqueue %s is not a JSON object: %w", name, err)
	}
	if (&unstructured.Unstructured{Object: item}).GetName() != name {
		return 0, fmt.Errorf("asked the ledger for clusterqueue %s, got %q", name,
			(&unstructured.Unstructured{Object: item}).GetName())
	}
	n, _, _ := unstructured.NestedInt64(item, "status", "reservingWorkloads")
	return n, nil
}

// unfinalized kinds carry no finalizer of ours, as Kueue puts none on them (a LocalQueue): the
// deletion is recorded once the object is gone (its uid from the informer's last copy), and
// for objects deleted while the bridge was down by the sweep at its start. That saves two API
// writes per object (adding and removing the finalizer), which with a thousand LocalQueues
// created at once held the ledger's view of them back behind the client's write budget.
var unfinalized = map[string]bool{"LocalQueue": true}

// finalizedAfter kinds are recorded without waiting for our finalizer, which a controller of its
// own puts on them (finalizing), so that the ledger learns of them without waiting for the API
// server (a thousand ClusterQueues created at once queue their finalizers behind the runner's
// creations). Their deletion is recorded as for the unfinalized kinds when the object goes
// before it carries the finalizer.
var finalizedAfter = map[string]bool{"ClusterQueue": true}

// objects enqueues the objects of an unfinalized kind, keeping the uid of each one deleted.
func (r *Reconciler) objects() handler.TypedEventHandler[client.Object, reconcile.Request] {
	enqueue := func(obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
	}
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object],
			q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.Object, q)
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object],
			q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.ObjectNew, q)
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[client.Object],
			q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.tombstones.Store(client.ObjectKeyFromObject(e.Object), string(e.Object.GetUID()))
			enqueue(e.Object, q)
		},
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[client.Object],
			q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.Object, q)
		},
	}
}

// goneManifest names an object of kind for a deletion (`kubectl delete -f` reads no more).
func goneManifest(kind string, key types.NamespacedName) string {
	metadata := map[string]any{"name": key.Name}
	if key.Namespace != "" {
		metadata["namespace"] = key.Namespace
	}
	manifest, _ := json.Marshal(map[string]any{"apiVersion": GVK(kind).GroupVersion().String(),
		"kind": kind, "metadata": metadata})
	return string(manifest)
}

// gone: the object key no longer exists. For a kind with our finalizer its deletion was
// recorded before the finalizer went; for an unfinalized kind it is recorded now (requestID
// names this deletion; "" for the object seen deleted: its uid's).
func (r *Reconciler) gone(ctx context.Context, key types.NamespacedName) (ctrl.Result, error) {
	if !unfinalized[r.Kind] && !finalizedAfter[r.Kind] {
		return ctrl.Result{}, nil
	}
	uid, seen := r.tombstones.Load(key)
	if !seen {
		return ctrl.Result{}, nil // never seen (or already recorded): the sweep finds the rest
	}
	sum := sha256.Sum256([]byte("deleted\x00" + r.Kind + "\x00" + key.Namespace + "\x00" + key.Name +
		"\x00" + uid.(string)))
	result, err := r.recordGone(ctx, key, "admit-k8s/definition-deleted/"+hex.EncodeToString(sum[:16]))
	if err == nil && result.RequeueAfter == 0 {
		r.tombstones.Delete(key)
	}
	return result, err
}

// recordGone records the deletion of the ledger's definition of key, whose object is gone. The
// ledger refusing it (it does not define it) ends the matter.
func (r *Reconciler) recordGone(ctx context.Context, key types.NamespacedName, requestID string) (ctrl.Result, error) {
	logger := log.FromContext(ctx).WithValues("kind", r.Kind, "object", key.String())
	outcome, err := r.Ledger.RecordManifest(ctx, requestID, "delete", goneManifest(r.Kind, key))
	var refused *ledger.Refused
	switch {
	case errors.As(err, &refused) && !refused.Retryable():
		logger.V(1).Info("the ledger does not take the deletion", "reason", refused.Message)
	case err != nil:
		logger.Error(err, "forwarding the deletion failed; will retry")
		return ctrl.Result{RequeueAfter: RetryAfterTransportError}, nil
	case len(outcome.Sequences) > 0 && !outcome.Retried:
		logger.Info("deletion recorded", "sequence", outcome.Sequences[0])
	}
	return ctrl.Result{}, nil
}

// sweeper records, once the bridge leads, the deletion of each definition of an unfinalized or
// finalizedAfter kind the ledger holds whose object is not in the cluster (deleted while the
// bridge was down, or before it carried our finalizer).
func (r *Reconciler) sweeper() manager.Runnable {
	return leaderRunnable(func(ctx context.Context) error {
		logger := ctrl.Log.WithName("definitions-sweep").WithValues("kind", r.Kind)
		for {
			err := r.sweep(ctx)
			if err == nil || ctx.Err() != nil {
				return nil
			}
			logger.Error(err, "looking for definitions whose objects are gone; will retry")
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(RetryAfterTransportError):
			}
		}
	})
}

// sweep: one pass of sweeper.
func (r *Reconciler) sweep(ctx context.Context) error {
	items, err := ledgerItems(ctx, r.Ledger, queuePlurals[r.Kind])
	if err != nil {
		return err
	}
	for _, item := range items {
		from := unstructured.Unstructured{Object: item}
		if terminating(item) {
			continue // deleted in the ledger already, held there by its workloads
		}
		key := types.NamespacedName{Namespace: from.GetNamespace(), Name: from.GetName()}
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(GVK(r.Kind))
		err := r.Client.Get(ctx, key, obj)
		if !apierrors.IsNotFound(err) {
			if err != nil {
				return err
			}
			continue
		}
		// No uid to name this deletion by: the time does (a retry is refused, as nothing is
		// left to delete).
		sum := sha256.Sum256([]byte("gone\x00" + r.Kind + "\x00" + key.String() + "\x00" +
			time.Now().UTC().Format(time.RFC3339Nano)))
		if result, err := r.recordGone(ctx, key, "admit-k8s/definition-gone/"+hex.EncodeToString(sum[:16])); err != nil || result.RequeueAfter != 0 {
			return fmt.Errorf("recording the deletion of %s %s failed", r.Kind, key)
		}
	}
	return nil
}

// terminating: a ClusterQueue the ledger lists though deleted (workloads still reserve quota in
// it), by its condition Active's reason.
func terminating(item map[string]any) bool {
	conditions, _, _ := unstructured.NestedSlice(item, "status", "conditions")
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok && m["type"] == "Active" && m["reason"] == "Terminating" {
			return true
		}
	}
	return false
}

// leaderRunnable runs f on the leader only.
type leaderRunnable func(ctx context.Context) error

func (f leaderRunnable) Start(ctx context.Context) error { return f(ctx) }
func (f leaderRunnable) NeedLeaderElection() bool        { return true }

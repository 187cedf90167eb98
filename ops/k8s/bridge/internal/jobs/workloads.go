package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"admission-ledger/bridge/internal/finalizers"
	"admission-ledger/bridge/internal/ledger"
	"admission-ledger/bridge/internal/ledgerevents"
)

// OwnedWorkloads governs Kueue Workload objects that their creator owns: created with kubectl
// or by a controller of a kind the bridge does not govern (Kueue's contract for workload
// owners, which its own scalability runner follows). The object is the workload: it is
// submitted as it is, its status follows the ledger's, and its owner's answers go back:
//   - the owner runs its pods once the status shows an admission, so `pods released` with the
//     admission's token is recorded before the admission is shown (write-ahead);
//   - a Finished condition the owner writes is the workload's finish (`workloadFinished`);
//   - an eviction is complete when the owner clears the quota reservation (status.admission
//     gone while the Evicted condition the bridge showed is there): `pods terminated` with the
//     evicted admission's token.
//
// Workload objects the bridge makes for its own kinds (owned by a Job or JobSet) are not these.
type OwnedWorkloads struct {
	Client client.Client
	Ledger Ledger
	Events record.EventRecorder
	jobs   *Reconciler // the shared steps: finding the ledger's workload, mirroring, pod reports
	// OnUnsubmitted (may be nil) is called when a Workload object the ledger does not hold yet is
	// seen: the queue status writer copies the counts again (definitions.StatusWriter.Notify).
	OnUnsubmitted func()
	adoption      *AdoptionGate // nil: no adoption to wait for
	// tombstones: the uid of each owned Workload object seen deleted (namespace/name -> uid),
	// until its deletion is recorded.
	tombstones sync.Map
}

// ownedByItsCreator: a Workload object that no Job or JobSet controls.
func ownedByItsCreator(obj client.Object) bool {
	owner := metav1.GetControllerOfNoCopy(obj)
	if owner == nil {
		return true
	}
	for _, kind := range Kinds {
		if owner.Kind == kind.Name && owner.APIVersion == kind.APIVersion {
			return false
		}
	}
	return true
}

// SetupOwnedWorkloads registers the reconciler of owned Workload objects, triggered also by the
// ledger's decisions (events; nil: none).
func SetupOwnedWorkloads(mgr ctrl.Manager, l Ledger, events *LedgerEvents, onUnsubmitted func(),
	adoption *AdoptionGate) error {
	r := &OwnedWorkloads{Client: mgr.GetClient(), Ledger: l, Events: mgr.GetEventRecorderFor("admit-k8s"),
		OnUnsubmitted: onUnsubmitted, adoption: adoption}
	r.jobs = &Reconciler{Client: r.Client, Ledger: l, Events: mgr.GetEventRecorderFor("admit-k8s")}
	owned := predicate.NewPredicateFuncs(func(o client.Object) bool {
		queue, _, _ := unstructured.NestedString(o.(*unstructured.Unstructured).Object, "spec", "queueName")
		return queue != "" && ownedByItsCreator(o)
	})
	b := ctrl.NewControllerManagedBy(mgr).Named("workloads").
		Watches(newWorkloadObject(), r.objects(), builder.WithPredicates(owned)).
		WithOptions(controller.Options{MaxConcurrentReconciles: Concurrency,
			UsePriorityQueue: ptr.To(true)})
	if events != nil {
		b = b.WatchesRawSource(events.WorkloadSource())
	}
	return b.Complete(r)
}

// objects: the informers' requests (objects), and a deleted object's uid kept for gone.
func (r *OwnedWorkloads) objects() handler.TypedEventHandler[client.Object, reconcile.Request] {
	h := objects
	h.DeleteFunc = func(ctx context.Context, e event.TypedDeleteEvent[client.Object],
		q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		r.tombstones.Store(client.ObjectKeyFromObject(e.Object), string(e.Object.GetUID()))
		objects.DeleteFunc(ctx, e, q)
	}
	return h
}

// WorkloadSubmitRequestID: one submission per Workload object's uid and generation.
func WorkloadSubmitRequestID(obj client.Object) string {
	sum := sha256.Sum256([]byte(string(obj.GetUID()) + "\x00" + strconv.FormatInt(obj.GetGeneration(), 10)))
	return "admit-k8s/workload/" + hex.EncodeToString(sum[:16])
}

// finishRequestID: one finish per uid.
func finishRequestID(obj client.Object) string {
	sum := sha256.Sum256([]byte("finished\x00" + string(obj.GetUID())))
	return "admit-k8s/finish/" + hex.EncodeToString(sum[:16])
}

// Reconcile takes one owned Workload object one step further.
func (r *OwnedWorkloads) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	if err := r.adoption.Wait(ctx); err != nil {
		return ctrl.Result{}, err
	}
	wl := newWorkloadObject()
	if err := r.Client.Get(ctx, req.NamespacedName, wl); err != nil {
		if apierrors.IsNotFound(err) {
			return r.gone(ctx, req)
		}
		return ctrl.Result{}, err
	}
	queue, _, _ := unstructured.NestedString(wl.Object, "spec", "queueName")
	if queue == "" || !ownedByItsCreator(wl) {
		return ctrl.Result{}, nil
	}
	if wl.GetDeletionTimestamp() != nil {
		return r.deleted(ctx, wl)
	}
	state, err := r.jobs.findLedgerWorkload(ctx, wl.GetNamespace(), wl.GetName())
	if err != nil {
		logger.Error(err, "reading the ledger's workloads failed; will retry")
		return ctrl.Result{RequeueAfter: RetryAfterTransportError}, nil
	}
	if state != nil && state.UID != string(wl.GetUID()) {
		// An earlier object's of this name: it is gone (names are unique), so its deletion is
		// recorded if it was not; then this one is a new workload.
		if state.Phase != ledger.PhaseDeleted {
			return r.recordDeletion(ctx, state, wl)
		}
		state = nil
	}
	if state == nil {
		if r.OnUnsubmitted != nil {
			r.OnUnsubmitted() // its queue's status counts it pending from now, as Kueue's
		}
		return r.submit(ctx, wl)
	}
	if done, err := r.jobs.syncActivation(ctx, wl, state); err != nil {
		return r.retryOrDrop(ctx, wl, err)
	} else if done {
		return pollAfter(r.Ledger), nil
	}
	// The owner's answers first: the mirror below writes the ledger's status over them.
	if result, done, err := r.forwardOwner(ctx, wl, state); done || err != nil {
		return result, err
	}
	if conditionTrue(wl, "Finished") && state.Phase.Ended() {
		// The owner finished it and the ledger holds the finish: as Kueue, nothing more is
		// written to the object.
		return ctrl.Result{}, nil
	}
	if state.Phase == ledger.PhaseAdmitted && state.FencingToken != "" && !showsAdmission(wl, state.FencingToken) {
		// Write-ahead: the owner may start pods as soon as it sees the admission.
		if err := r.jobs.recordPods(ctx, state, ledgerevents.PodsReport_released, state.FencingToken, ""); err != nil {
			return r.retryOrDrop(ctx, wl, err)
		}
	}
	wait, err := r.jobs.mirror(ctx, wl, state)
	switch {
	case err != nil:
		return ctrl.Result{}, err
	case wait > 0:
		return ctrl.Result{RequeueAfter: wait, Priority: ptr.To(NotePriority)}, nil
	}
	return pollAfter(r.Ledger), nil
}

// forwardOwner records what the owner said and the ledger does not hold yet: a Finished
// condition, or a cleared reservation under an eviction. done: something was recorded or is to
// be retried, so the mirror waits for the ledger's answer (its watch triggers the next step).
func (r *OwnedWorkloads) forwardOwner(ctx context.Context, wl *unstructured.Unstructured,
	state *LedgerWorkload) (ctrl.Result, bool, error) {
	var err error
	switch {
	case conditionTrue(wl, "Finished") && !state.Phase.Ended():
		var event []byte
		event, err = WorkloadFinishedEvent(state.Namespace, state.Name, state.UID,
			conditionMessage(wl, "Finished"))
		if err != nil {
			return ctrl.Result{}, true, err
		}
		_, err = r.Ledger.Record(ctx, finishRequestID(wl), [][]byte{event})
		log.FromContext(ctx).Info("the owner finished the workload", "error", err)
	case state.Phase == ledger.PhaseEvicting && conditionTrue(wl, "Evicted") && ownerCleared(wl, state):
		err = r.jobs.recordPods(ctx, state, ledgerevents.PodsReport_terminated, state.EvictingToken, "")
		log.FromContext(ctx).Info("the owner cleared the evicted workload's reservation", "error", err)
	default:
		return ctrl.Result{}, false, nil
	}
	if err != nil {
		result, err := r.retryOrDrop(ctx, wl, err)
		return result, true, err
	}
	return pollAfter(r.Ledger), true, nil
}

func (r *OwnedWorkloads) submit(ctx context.Context, wl *unstructured.Unstructured) (ctrl.Result, error) {
	manifest, err := workloadManifest(wl)
	if err != nil {
		r.Events.Event(wl, corev1.EventTypeWarning, "NotSubmitted", err.Error())
		return ctrl.Result{}, nil
	}
	outcome, err := r.Ledger.RecordManifest(ctx, WorkloadSubmitRequestID(wl), "submit", manifest)
	var refused *ledger.Refused
	switch {
	case errors.As(err, &refused) && !refused.Retryable():
		r.Events.Event(wl, corev1.EventTypeWarning, "LedgerRefused", refused.Message)
		return ctrl.Result{}, nil
	case err != nil:
		log.FromContext(ctx).Error(err, "submitting failed; will retry")
		return ctrl.Result{RequeueAfter: RetryAfterTransportError}, nil
	}
	if len(outcome.Sequences) > 0 && !outcome.Retried && !outcome.Unchanged[0] {
		r.Events.Event(wl, corev1.EventTypeNormal, "Submitted",
			"submitted to the admission ledger at sequence "+strconv.FormatUint(outcome.Sequences[0], 10))
	}
	return pollAfter(r.Ledger), nil
}

// workloadManifest: the Workload as the ledger's parser takes it (its apiVersion, metadata and
// spec; not its status).
func workloadManifest(wl *unstructured.Unstructured) (string, error) {
	metadata := map[string]any{"name": wl.GetName(), "namespace": wl.GetNamespace(), "uid": string(wl.GetUID())}
	if len(wl.GetLabels()) > 0 {
		metadata["labels"] = wl.GetLabels()
	}
	annotations := map[string]string{}
	for k, v := range wl.GetAnnotations() {
		if k != corev1.LastAppliedConfigAnnotation {
			annotations[k] = v
		}
	}
	if len(annotations) > 0 {
		metadata["annotations"] = annotations
	}
	spec, _, _ := unstructured.NestedMap(wl.Object, "spec")
	text, err := json.Marshal(map[string]any{"apiVersion": wl.GetAPIVersion(), "kind": "Workload",
		"metadata": metadata, "spec": spec})
	if err != nil {
		return "", fmt.Errorf("encoding Workload %s/%s: %w", wl.GetNamespace(), wl.GetName(), err)
	}
	return string(text), nil
}

func (r *OwnedWorkloads) retryOrDrop(ctx context.Context, wl *unstructured.Unstructured, err error) (ctrl.Result, error) {
	return retryOrDrop(ctx, r.Events, wl, err)
}

// gone: the object namespace/name no longer exists. Owned Workload objects carry no finalizer
// (as in Kueue, the object is the workload), so its deletion is recorded here: for the object
// seen deleted (its uid must be the ledger's workload's), or, with no uid kept (deleted while
// the bridge was down; ResyncAll asks for these), for the ledger's workload of a Workload
// object's name (not a governed kind's: a Job's workload goes with its Job).
func (r *OwnedWorkloads) gone(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	uid, seen := r.tombstones.Load(req.NamespacedName)
	if !seen && !workloadObjectName(req.Name) {
		return ctrl.Result{}, nil
	}
	state, err := r.jobs.findLedgerWorkload(ctx, req.Namespace, req.Name)
	if err != nil {
		return ctrl.Result{RequeueAfter: RetryAfterTransportError}, nil
	}
	if state == nil || state.Phase == ledger.PhaseDeleted || (seen && state.UID != uid.(string)) {
		r.tombstones.Delete(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	result, err := r.recordDeletion(ctx, state, nil)
	if err == nil && result.RequeueAfter != RetryAfterTransportError {
		r.tombstones.Delete(req.NamespacedName)
	}
	return result, err
}

// workloadObjectName: a ledger workload of this name is a Workload object's, not the workload
// of a job of a governed kind (ours, or Kueue's name for it).
func workloadObjectName(name string) bool {
	if kind, _ := KindOfWorkload(name); kind != nil {
		return false
	}
	if base, ok := kueueBaseName(name); ok {
		if kind, _ := KindOfWorkload(base); kind != nil {
			return false
		}
	}
	return true
}

// recordDeletion records the deletion of the ledger's workload state (its object gone or going;
// obj, if not nil, for an event about a refusal).
func (r *OwnedWorkloads) recordDeletion(ctx context.Context, state *LedgerWorkload,
	obj client.Object) (ctrl.Result, error) {
	event, err := WorkloadDeletedEvent(state.Namespace, state.Name, state.UID)
	if err != nil {
		return ctrl.Result{}, err
	}
	if _, err := r.Ledger.Record(ctx, deleteRequestIDOf(state.UID), [][]byte{event}); err != nil {
		var refused *ledger.Refused
		if !errors.As(err, &refused) || refused.Retryable() {
			return ctrl.Result{RequeueAfter: RetryAfterTransportError}, nil
		}
		log.FromContext(ctx).Info("the ledger refused the deletion", "message", refused.Message)
		if obj != nil {
			r.Events.Event(obj, corev1.EventTypeWarning, "LedgerRefused", "deleting workload: "+refused.Message)
		}
	}
	return pollAfter(r.Ledger), nil
}

// deleted: an object that carries the finalizer (older bridges added it): the workload is
// deleted in the ledger before the finalizer lets the object go. Objects without it are
// recorded when gone.
func (r *OwnedWorkloads) deleted(ctx context.Context, wl *unstructured.Unstructured) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(wl, JobFinalizer) {
		return ctrl.Result{}, nil
	}
	state, err := r.jobs.findLedgerWorkload(ctx, wl.GetNamespace(), wl.GetName())
	if err != nil {
		return ctrl.Result{RequeueAfter: RetryAfterTransportError}, nil
	}
	if state != nil && state.UID == string(wl.GetUID()) && state.Phase != ledger.PhaseDeleted {
		if result, err := r.recordDeletion(ctx, state, wl); err != nil ||
			result.RequeueAfter == RetryAfterTransportError {
			return result, err
		}
	}
	err = finalizers.Remove(ctx, r.Client, wl, "Workload", JobFinalizer)
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, err
}

// conditionTrue: the object's status has condition type True.
func conditionTrue(wl *unstructured.Unstructured, condition string) bool {
	return conditionField(wl, condition, "status") == "True"
}

func conditionMessage(wl *unstructured.Unstructured, condition string) string {
	return conditionField(wl, condition, "message")
}

func conditionField(wl *unstructured.Unstructured, condition, field string) string {
	list, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
	for _, c := range list {
		if m, ok := c.(map[string]any); ok && m["type"] == condition {
			v, _ := m[field].(string)
			return v
		}
	}
	return ""
}

// ownerCleared: the owner cleared the evicted workload's quota reservation: status.admission is
// gone, or QuotaReserved is False where the ledger shows it otherwise. Kueue's helper
// (workload.PatchAdmissionStatus, which Kueue's scalability runner uses) applies the cleared
// status server-side as Kueue's own field manager: it sets the conditions, but cannot remove the
// admission the bridge wrote (another manager's field).
func ownerCleared(wl *unstructured.Unstructured, state *LedgerWorkload) bool {
	if !hasAdmission(wl) {
		return true
	}
	ledgerShows := &unstructured.Unstructured{Object: map[string]any{"status": state.Status}}
	return conditionField(wl, "QuotaReserved", "status") == "False" &&
		conditionField(ledgerShows, "QuotaReserved", "status") != "False"
}

func hasAdmission(wl *unstructured.Unstructured) bool {
	admission, found, _ := unstructured.NestedMap(wl.Object, "status", "admission")
	return found && admission != nil
}

// showsAdmission: the object's status already shows the admission of token.
func showsAdmission(wl *unstructured.Unstructured, token string) bool {
	shown, _, _ := unstructured.NestedString(wl.Object, "status", "fencingToken")
	return hasAdmission(wl) && shown == token
}

// WorkloadFinishedEvent is the input `admitctl finish NAMESPACE/NAME` records, with the owner's
// message.
func WorkloadFinishedEvent(namespace, name, uid, message string) ([]byte, error) {
	return ledger.BuildEvent(func(event ledgerevents.Event) error {
		f, err := event.Body().NewWorkloadFinished()
		if err != nil {
			return err
		}
		if err := ledger.SetNewWorkloadRef(f, namespace, name, uid); err != nil {
			return err
		}
		if message != "" {
			return f.SetMessage_(message)
		}
		return nil
	})
}

// Package definitions forwards Kueue definitions (ResourceFlavor, Cohort, ClusterQueue,
// LocalQueue, AdmissionCheck, WorkloadPriorityClass, Topology) and the ledger's own BudgetPolicy
// (admission-ledger.io/v1alpha1, docs/budgets.md) from the cluster to the ledger as they
// change. admitd parses each object with the ledger's own parser (recordManifest, mode
// "apply"): an identical object is `unchanged` there, so resyncs and restarts write nothing.
package definitions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"admission-ledger/bridge/internal/checks"
	"admission-ledger/bridge/internal/conversion"
	"admission-ledger/bridge/internal/ledger"
)

// Group and StoredVersion of our kueue.x-k8s.io CRDs (ops/k8s/crds/): objects are read in the
// stored version.
const (
	Group         = "kueue.x-k8s.io"
	StoredVersion = "v1beta2"
)

// BudgetPolicyKind is the ledger's own definition kind, in BudgetGroup and BudgetVersion
// (ops/k8s/crds/budgetpolicies.yaml), which an AdmissionCheck of controllerName
// admission-ledger.io/budget names.
const (
	BudgetPolicyKind = "BudgetPolicy"
	BudgetGroup      = "admission-ledger.io"
	BudgetVersion    = "v1alpha1"
)

// Kinds forwarded, each by a controller of its own.
var Kinds = []string{"ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue", "AdmissionCheck",
	"WorkloadPriorityClass", TopologyKind, BudgetPolicyKind}

// TopologyKind is Kueue's Topology (topology-aware scheduling, docs/tas.md): its levels, which a
// ResourceFlavor names in spec.topologyName. No status: the outcome is an Event.
const TopologyKind = "Topology"

// optionalKinds are forwarded only when the cluster serves them: a cluster whose CRDs predate
// budgets has no BudgetPolicy, one whose CRDs predate topology-aware scheduling no Topology
// (and the bridge starts all the same).
var optionalKinds = map[string]bool{BudgetPolicyKind: true, TopologyKind: true}

// GVK is the group, version and kind in which objects of kind (one of Kinds) are read and
// forwarded.
func GVK(kind string) schema.GroupVersionKind {
	if kind == BudgetPolicyKind {
		return schema.GroupVersionKind{Group: BudgetGroup, Version: BudgetVersion, Kind: kind}
	}
	return schema.GroupVersionKind{Group: Group, Version: StoredVersion, Kind: kind}
}

// RetryAfterTransportError is how long a definition waits after admitd could not be reached or
// asked to retry, on top of controller-runtime's own backoff.
const RetryAfterTransportError = 5 * time.Second

// Recorder is what the reconciler needs of the ledger client: forwarding objects and their
// deletions, and reading the ClusterQueues (is a deleted one still terminating).
type Recorder interface {
	RecordManifest(ctx context.Context, requestID, mode, manifest string) (ledger.Outcome, error)
	Get(ctx context.Context, kind, format string) (string, error)
	GetWith(ctx context.Context, kind, format string, q ledger.Query) (string, error)
}

// Reconciler forwards one kind.
type Reconciler struct {
	Kind   string
	Client client.Client
	Ledger Recorder
	Events record.EventRecorder
	// Status (may be nil): for a queue kind, writes its condition Recorded with the rest of its
	// status (one write, not two).
	Status *StatusWriter
	// tombstones: the uid of each object of an unfinalized kind seen deleted (namespace/name ->
	// uid), until its deletion is recorded.
	tombstones sync.Map
}

// Concurrency is how many objects of one kind are forwarded at once (never one object twice at
// once). Kueue reconciles its queues one at a time, but its scheduler reads them from its cache;
// the ledger learns of a queue only from the bridge, whose reconcile waits for admitd: with a
// thousand queues created at once, one at a time held their workloads back for minutes, and
// more calls at once make larger group commits.
const Concurrency = 10

// SetupWithManager registers one controller per kind of Kinds (of optionalKinds, only those
// the cluster serves).
// The queues' condition Recorded goes with their status (statusWriter, may be nil: written by the
// reconcile).
func SetupWithManager(mgr ctrl.Manager, ledgerClient Recorder, statusWriter *StatusWriter) error {
	for _, kind := range Kinds {
		gvk := GVK(kind)
		if optionalKinds[kind] {
			if _, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
				mgr.GetLogger().Info("not forwarding a kind the cluster does not serve",
					"kind", gvk.String(), "reason", err.Error())
				continue
			}
		}
		r := &Reconciler{
			Kind:   kind,
			Client: mgr.GetClient(),
			Ledger: ledgerClient,
			Events: mgr.GetEventRecorderFor("admit-k8s"),
		}
		if queuePlurals[kind] != "" {
			r.Status = statusWriter
		}
		watched := &unstructured.Unstructured{}
		watched.SetGroupVersionKind(gvk)
		// A change of the spec bumps the generation; labels and annotations (the ledger's
		// settings of a check) do not, and the ledger reads them too; a deletion starts with a
		// deletion timestamp, or, for a kind without our finalizer, is the object gone.
		changed := builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{},
			predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{}, Deleting))
		b := ctrl.NewControllerManagedBy(mgr).Named("definitions-" + strings.ToLower(kind)).
			WithOptions(controller.Options{MaxConcurrentReconciles: Concurrency})
		if unfinalized[kind] || finalizedAfter[kind] {
			b = b.Watches(watched, r.objects(), changed)
			if err := mgr.Add(r.sweeper()); err != nil {
				return err
			}
			if finalizedAfter[kind] {
				if err := ctrl.NewControllerManagedBy(mgr).Named("finalizers-"+strings.ToLower(kind)).
					WithOptions(controller.Options{MaxConcurrentReconciles: FinalizerConcurrency}).
					For(watched, builder.WithPredicates(predicate.Funcs{
						UpdateFunc: func(e event.UpdateEvent) bool {
							return !controllerutil.ContainsFinalizer(e.ObjectNew, DefinitionFinalizer)
						}})).
					Complete(finalizing{r}); err != nil {
					return fmt.Errorf("setting up the %s finalizers' controller: %w", kind, err)
				}
			}
		} else {
			b = b.For(watched, changed)
		}
		if err := b.Complete(r); err != nil {
			return fmt.Errorf("setting up the %s controller: %w", kind, err)
		}
	}
	return nil
}

// Reconcile forwards the object's current state, after putting DefinitionFinalizer on it, or its
// deletion (deletion.go).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(GVK(r.Kind))
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			// gone: its deletion was forwarded before our finalizer went, or, for a kind
			// without it, is forwarded now.
			return r.gone(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, err
	}
	r.tombstones.Delete(req.NamespacedName) // an object of that name again: this one counts
	if obj.GetDeletionTimestamp() != nil {
		return r.deleted(ctx, obj)
	}
	if !unfinalized[r.Kind] && !finalizedAfter[r.Kind] {
		if err := r.ensureFinalizer(ctx, obj); err != nil {
			return ctrl.Result{}, err
		}
	}
	return r.forward(ctx, obj)
}

// forward records the object's current state and writes its condition Recorded.
func (r *Reconciler) forward(ctx context.Context, obj *unstructured.Unstructured) (ctrl.Result, error) {
	logger := log.FromContext(ctx).WithValues("kind", r.Kind)
	manifest, err := Manifest(obj)
	if err != nil {
		r.Events.Event(obj, corev1.EventTypeWarning, "NotForwarded", err.Error())
		return ctrl.Result{}, nil
	}
	outcome, err := r.Ledger.RecordManifest(ctx, RequestID(obj), "apply", manifest)
	var refused *ledger.Refused
	switch {
	case errors.As(err, &refused) && !refused.Retryable():
		// The object itself is wrong for the ledger: only a changed object can succeed.
		logger.Info("the ledger refused the definition", "reason", refused.Message)
		r.Events.Event(obj, corev1.EventTypeWarning, "LedgerRefused", refused.Message)
		return ctrl.Result{}, setRecordedCondition(ctx, r.Client, obj, metav1.ConditionFalse, ReasonLedgerRefused, refused.Message)
	case err != nil:
		logger.Error(err, "forwarding the definition failed; will retry")
		return ctrl.Result{RequeueAfter: RetryAfterTransportError}, nil
	}
	if len(outcome.Sequences) == 0 {
		return ctrl.Result{}, fmt.Errorf("admitd answered without a sequence")
	}
	return ctrl.Result{}, r.recordedCondition(ctx, obj, outcome)
}

// FinalizerConcurrency is how many objects of a finalizedAfter kind get our finalizer at once,
// in a controller of their own (finalizing): a write waits for the API server, which the
// creations of a large-scale run slow to seconds a write. In the recording controller, the
// finalizers of the first ClusterQueues held all its workers for 7 to 11 s while 900 more waited
// to be recorded, and their workloads with them (Kueue's runner, seeing no queue with work as
// its generation ended, stopped).
const FinalizerConcurrency = 2

// finalizing puts DefinitionFinalizer on each object of a finalizedAfter kind that is not being
// deleted. Whether before or after its recording: a deletion that finds the ledger without the
// definition ends there (deleted), and one before the finalizer is recorded as for an
// unfinalized kind (gone, the sweep).
type finalizing struct{ r *Reconciler }

func (f finalizing) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(GVK(f.r.Kind))
	if err := f.r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if obj.GetDeletionTimestamp() != nil {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, client.IgnoreNotFound(f.r.ensureFinalizer(ctx, obj))
}

// recordedCondition tells that the ledger holds obj (the outcome of its forwarding): an Event
// when newly recorded, and the condition Recorded True, with the queue's status if the status
// writer writes it, else now.
func (r *Reconciler) recordedCondition(ctx context.Context, obj *unstructured.Unstructured, outcome ledger.Outcome) error {
	logger := log.FromContext(ctx).WithValues("kind", r.Kind)
	if outcome.Retried || outcome.Unchanged[0] {
		logger.V(1).Info("already in the ledger", "sequence", outcome.Sequences[0])
	} else {
		logger.Info("recorded", "sequence", outcome.Sequences[0])
		r.Events.Event(obj, corev1.EventTypeNormal, "Recorded", recorded(outcome.Sequences[0]))
	}
	if r.Status != nil {
		r.Status.Recorded(r.Kind, client.ObjectKeyFromObject(obj), outcome.Sequences[0])
		return nil
	}
	return setRecordedCondition(ctx, r.Client, obj, metav1.ConditionTrue, ReasonRecorded, recorded(outcome.Sequences[0]))
}

// RequestID is the same for every forwarding of one version of one object (so a retry, or a
// restarted bridge, is answered from admitd's record of the first call) and differs after any
// write to it: its resourceVersion changes then, even when only annotations changed (which do
// not bump the generation) or when a later write restores an earlier spec. It fits admitd's
// limit of 128 bytes whatever the names.
func RequestID(obj *unstructured.Unstructured) string {
	sum := sha256.Sum256([]byte(obj.GetKind() + "\x00" + obj.GetNamespace() + "\x00" +
		obj.GetName() + "\x00" + string(obj.GetUID()) + "\x00" + obj.GetResourceVersion()))
	return "admit-k8s/definition/" + hex.EncodeToString(sum[:16])
}

// Manifest is the object as the ledger's parser takes it: JSON with apiVersion, kind, the
// metadata the parser reads (name, namespace, uid, labels, annotations) and the spec (or, for a
// WorkloadPriorityClass, value and description), in v1beta2 (a BudgetPolicy in v1alpha1): the
// CRDs convert what users write in v1beta1 (internal/conversion). The status, the server's
// bookkeeping and the conversion's stash of v1beta1 fields stay out. An object stored before
// the CRDs converted may still carry a v1beta1 spelling; it is normalized to v1beta2's. A
// LocalQueue also carries its admission fair sharing seed (AfsSeed), the one part of a status
// the ledger reads.
func Manifest(obj *unstructured.Unstructured) (string, error) {
	metadata := map[string]any{"name": obj.GetName()}
	if ns := obj.GetNamespace(); ns != "" {
		metadata["namespace"] = ns
	}
	if uid := obj.GetUID(); uid != "" {
		metadata["uid"] = string(uid)
	}
	if labels := obj.GetLabels(); len(labels) > 0 {
		metadata["labels"] = labels
	}
	if annotations := obj.GetAnnotations(); len(annotations) > 0 {
		delete(annotations, corev1.LastAppliedConfigAnnotation)
		delete(annotations, conversion.StashAnnotation)
		if len(annotations) > 0 {
			metadata["annotations"] = annotations
		}
	}
	out := map[string]any{
		"apiVersion": GVK(obj.GetKind()).GroupVersion().String(),
		"kind":       obj.GetKind(),
		"metadata":   metadata,
	}
	for _, field := range []string{"spec", "value", "description"} {
		if v, ok := obj.Object[field]; ok {
			out[field] = runtime.DeepCopyJSONValue(v)
		}
	}
	if obj.GetKind() == "LocalQueue" {
		if consumed, ok := AfsSeed(obj); ok {
			out["status"] = map[string]any{"fairSharing": map[string]any{
				"admissionFairSharingStatus": map[string]any{"consumedResources": consumed}}}
		}
	}
	conversion.Normalize(out)
	text, err := json.Marshal(out)
	if err != nil {
		return "", fmt.Errorf("encoding %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return string(text), nil
}

// AfsSeed is a LocalQueue's status.fairSharing.admissionFairSharingStatus.consumedResources as
// another writer persisted it (Kueue's LocalQueue controller, before the ledger took over): the
// usage the ledger's admission fair sharing starts the queue from (docs/semantics.md,
// "Admission fair sharing"; Kueue seeds its entry from this status). ok is false when the
// status has none, or when the bridge owns it (managedFields on the status subresource): then it
// is the ledger's own consumed usage, written back by the status writer, and forwarding it would
// make a LocalQueueDef differ from the recorded one at each restart although the ledger, which
// seeds an entry only once, reads nothing new in it.
func AfsSeed(obj *unstructured.Unstructured) (map[string]any, bool) {
	consumed, found, err := unstructured.NestedMap(obj.Object, "status", "fairSharing",
		"admissionFairSharingStatus", "consumedResources")
	if !found || err != nil {
		return nil, false
	}
	foreign := false
	for _, entry := range obj.GetManagedFields() {
		if entry.Subresource != "status" || entry.FieldsV1 == nil || entry.Manager == checks.BridgeFieldManager {
			continue
		}
		var fields map[string]any
		if json.Unmarshal(entry.FieldsV1.Raw, &fields) != nil {
			continue
		}
		_, owns, _ := unstructured.NestedMap(fields, "f:status", "f:fairSharing",
			"f:admissionFairSharingStatus", "f:consumedResources")
		foreign = foreign || owns
	}
	return consumed, foreign
}

package nodes

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"admission-ledger/bridge/internal/jobs"
	"admission-ledger/bridge/internal/ledger"
)

// InventoryKey is the one reconcile request of the controller: every reconcile compares the
// whole inventory (every node, every flavor) with the ledger's nodes.
const InventoryKey = "inventory"

// ResyncInterval is how often the inventory is compared with the ledger without a change in
// the cluster: a safety resync (a node reported by hand, a refused call).
const ResyncInterval = 5 * time.Minute

// RetryAfterTransportError is the wait after admitd could not be reached or asked to retry.
const RetryAfterTransportError = 5 * time.Second

// EventsPerCall bounds the node events of one record call (admitd takes at most 2048 inputs a
// call, and the evictions a failure causes count towards one append's 4096 events).
const EventsPerCall = 64

// PodChangeDelay is how long after a pod's change the inventory is compared: the changes of a
// burst of pods (a Job's) go in one reconcile.
const PodChangeDelay = time.Second

// podChanged queues the inventory PodChangeDelay after a pod's event.
var podChanged = handler.Funcs{
	CreateFunc: func(_ context.Context, _ event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		q.AddAfter(inventoryRequest, PodChangeDelay)
	},
	UpdateFunc: func(_ context.Context, _ event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		q.AddAfter(inventoryRequest, PodChangeDelay)
	},
	DeleteFunc: func(_ context.Context, _ event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		q.AddAfter(inventoryRequest, PodChangeDelay)
	},
}

var inventoryRequest = reconcile.Request{NamespacedName: types.NamespacedName{Name: InventoryKey}}

var flavorGVK = schema.GroupVersionKind{Group: jobs.KueueGroup, Version: jobs.KueueVersion, Kind: "ResourceFlavor"}

// Ledger is what the inventory needs of admitd.
type Ledger interface {
	Head(ctx context.Context) (uint64, error)
	Get(ctx context.Context, kind, format string) (string, error)
	Record(ctx context.Context, requestID string, inputs [][]byte) (ledger.Outcome, error)
}

// Reconciler keeps the ledger's nodes in step with the cluster's. It keeps no state of its own:
// each reconcile reads the nodes and flavors (the manager's cache), the ledger's nodes, and
// records the difference.
type Reconciler struct {
	Client client.Client
	// Pods reads the pods bound to a failed node straight from the API server (a field selector
	// on spec.nodeName), so the bridge keeps no cache of every pod.
	Pods   client.Reader
	Ledger Ledger
}

// SetupWithManager registers the inventory: triggered by Node changes the ledger models
// (labels, allocatable, Ready, cordoned, created, deleted), by ResourceFlavor changes, and by
// pods that change a node's non-TAS usage (NonTasPodChanged; a burst of them is one reconcile
// PodChangeDelay later). The
// first reconcile runs once the caches hold every node and flavor: its report completes the
// inventory.
func SetupWithManager(mgr ctrl.Manager, l Ledger) error {
	r := &Reconciler{Client: mgr.GetClient(), Pods: mgr.GetAPIReader(), Ledger: l}
	inventory := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{inventoryRequest}
	})
	flavor := &unstructured.Unstructured{}
	flavor.SetGroupVersionKind(flavorGVK)
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodes").
		// Once at the start: a cluster without nodes and flavors sends no event, and the
		// ledger may still hold nodes of the bridge's that are gone.
		WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			q.Add(inventoryRequest)
			return nil
		})).
		Watches(&corev1.Node{}, inventory, builder.WithPredicates(NodeChanged)).
		Watches(&corev1.Pod{}, podChanged, builder.WithPredicates(NonTasPodChanged)).
		Watches(flavor, inventory, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		Complete(r)
}

// NodeChanged passes a Node's creation and deletion, and an update of what the ledger models:
// labels, taints other than its conditions', allocatable, the Ready condition's status,
// spec.unschedulable or the deletion timestamp. Heartbeats (the conditions' times, images,
// addresses) pass nothing.
var NodeChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		before, ok1 := e.ObjectOld.(*corev1.Node)
		after, ok2 := e.ObjectNew.(*corev1.Node)
		if !ok1 || !ok2 {
			return true
		}
		return !equality.Semantic.DeepEqual(modelled(before), modelled(after))
	},
}

type nodeModel struct {
	Labels        map[string]string
	Taints        []corev1.Taint
	Allocatable   corev1.ResourceList
	Healthy       bool
	Why           string
	Unschedulable bool
	Deleting      bool
}

func modelled(n *corev1.Node) nodeModel {
	healthy, why := Healthy(n)
	return nodeModel{Labels: n.Labels, Taints: SchedulingTaints(n.Spec.Taints), Allocatable: n.Status.Allocatable, Healthy: healthy, Why: why,
		Unschedulable: n.Spec.Unschedulable, Deleting: n.DeletionTimestamp != nil}
}

// Reconcile compares every node with the ledger's and records the events that differ. The
// first one after the bridge starts (leads) lists every node: if the ledger does not hold the
// inventory complete yet, an event of the last call says it is (Completing), or one more event
// does, the report of a node as the ledger holds it, when nothing differs.
func (r *Reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	desired, err := r.desired(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	head, err := r.Ledger.Head(ctx)
	if err != nil {
		logger.Error(err, "reading the ledger's head failed; will retry")
		return ctrl.Result{RequeueAfter: RetryAfterTransportError}, nil
	}
	text, err := r.Ledger.Get(ctx, "nodes", "json")
	if err != nil {
		logger.Error(err, "reading the ledger's nodes failed; will retry")
		return ctrl.Result{RequeueAfter: RetryAfterTransportError}, nil
	}
	recorded, complete, err := ParseRecorded(text)
	if err != nil {
		return ctrl.Result{}, err
	}
	changes := Plan(desired, recorded)
	for i := range changes {
		if changes[i].Kind != Failed {
			continue
		}
		refs, err := r.workloadsOn(ctx, changes[i].Node)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("listing the pods on node %s: %w", changes[i].Node, err)
		}
		changes[i].Workloads = refs
	}
	if !complete {
		if len(changes) == 0 && len(desired) > 0 {
			changes = append(changes, Reassert(firstHealthy(desired)))
		}
		if len(changes) > 0 {
			changes[Completing(changes)].InventoryComplete = true
		}
	}
	if len(changes) == 0 {
		logger.Info("the ledger's nodes are in step with the cluster's", "nodes", len(desired))
		return ctrl.Result{RequeueAfter: ResyncInterval}, nil
	}
	if err := r.record(ctx, head, changes); err != nil {
		var refused *ledger.Refused
		if errors.As(err, &refused) && !refused.Retryable() {
			logger.Error(err, "the ledger refused node events; trying again at the next resync")
			return ctrl.Result{RequeueAfter: ResyncInterval}, nil
		}
		logger.Error(err, "recording node events failed; will retry")
		return ctrl.Result{RequeueAfter: RetryAfterTransportError}, nil
	}
	return ctrl.Result{RequeueAfter: ResyncInterval}, nil
}

// desired is what the ledger should hold of every node (the manager's cache: nodes, flavors,
// and the pods whose non-TAS usage each node carries), in name order.
func (r *Reconciler) desired(ctx context.Context) ([]Desired, error) {
	var nodeList corev1.NodeList
	if err := r.Client.List(ctx, &nodeList); err != nil {
		return nil, err
	}
	flavors, err := r.flavors(ctx)
	if err != nil {
		return nil, err
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods); err != nil {
		return nil, fmt.Errorf("listing the pods: %w", err)
	}
	usage := NonTasUsage(pods.Items)
	var desired []Desired
	for i := range nodeList.Items {
		node := &nodeList.Items[i]
		desired = append(desired, DesiredOf(node, flavors, usage[node.Name])...)
	}
	sort.Slice(desired, func(i, j int) bool { return desired[i].Name < desired[j].Name })
	return desired, nil
}

// Completing is the index of the change that says the inventory is complete: in the last
// record call (before it, capacity of later calls is missing), its last report of a healthy
// node, so that every capacity precedes it and the failures after it (a known node that failed
// while no bridge ran) are weighed against the whole inventory; the call's last change when it
// reports no healthy node.
func Completing(changes []Change) int {
	last := len(changes) - 1
	for i := last; i >= last/EventsPerCall*EventsPerCall; i-- {
		if changes[i].Kind != Failed {
			return i
		}
	}
	return last
}

// firstHealthy is the first healthy node of desired, or its first if none is: a report of a
// healthy node as it is changes nothing but the flag it carries.
func firstHealthy(desired []Desired) Desired {
	for _, d := range desired {
		if !d.Failed {
			return d
		}
	}
	return desired[0]
}

// record sends the changes in calls of at most EventsPerCall events, in order.
func (r *Reconciler) record(ctx context.Context, head uint64, changes []Change) error {
	logger := log.FromContext(ctx)
	for start := 0; start < len(changes); start += EventsPerCall {
		part := changes[start:min(start+EventsPerCall, len(changes))]
		events := make([][]byte, 0, len(part))
		for _, c := range part {
			e, err := c.Event()
			if err != nil {
				return err
			}
			events = append(events, e)
		}
		outcome, err := r.Ledger.Record(ctx, RequestID(head, events), events)
		if err != nil {
			return err
		}
		for i, c := range part {
			sequence := uint64(0)
			if i < len(outcome.Sequences) {
				sequence = outcome.Sequences[i]
			}
			logger.Info("node reported", "event", c.Kind.String(), "node", c.Name, "flavor", c.Flavor,
				"workloads", len(c.Workloads), "inventoryComplete", c.InventoryComplete,
				"sequence", sequence, "retried", outcome.Retried)
		}
	}
	return nil
}

// flavors reads the ResourceFlavors' nodeLabels and tolerations from the cache.
func (r *Reconciler) flavors(ctx context.Context) ([]Flavor, error) {
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(flavorGVK.GroupVersion().WithKind("ResourceFlavorList"))
	if err := r.Client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing ResourceFlavors: %w", err)
	}
	out := make([]Flavor, 0, len(list.Items))
	for _, item := range list.Items {
		labels, _, err := unstructured.NestedStringMap(item.Object, "spec", "nodeLabels")
		if err != nil {
			return nil, fmt.Errorf("ResourceFlavor %s: spec.nodeLabels: %w", item.GetName(), err)
		}
		f := Flavor{Name: item.GetName(), NodeLabels: labels}
		tolerations, _, _ := unstructured.NestedSlice(item.Object, "spec", "tolerations")
		for _, entry := range tolerations {
			m, ok := entry.(map[string]any)
			if !ok {
				continue
			}
			var t corev1.Toleration
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &t); err != nil {
				return nil, fmt.Errorf("ResourceFlavor %s: a toleration: %w", item.GetName(), err)
			}
			f.Tolerations = append(f.Tolerations, t)
		}
		out = append(out, f)
	}
	return out, nil
}

// workloadsOn lists the workloads whose pods are bound to the node and not finished: pods a
// Job the bridge released created (they carry the fencing token annotation), named as the
// reconciler names a Job's workload, with the Job's uid.
func (r *Reconciler) workloadsOn(ctx context.Context, node string) ([]WorkloadRef, error) {
	var pods corev1.PodList
	if err := r.Pods.List(ctx, &pods, client.MatchingFields{"spec.nodeName": node}); err != nil {
		return nil, err
	}
	return WorkloadsOf(pods.Items), nil
}

// workloadOfPod: the workload of a pod of a released JobSet (its JobSet's name and uid labels)
// or of a released Job (its controller).
func workloadOfPod(pod *corev1.Pod) (WorkloadRef, bool) {
	if name, uid := pod.Labels[jobs.JobSetNameLabel], pod.Labels[jobs.JobSetUIDLabel]; name != "" && uid != "" {
		return WorkloadRef{Namespace: pod.Namespace, Name: jobs.JobSetKind.WorkloadName(name), UID: uid}, true
	}
	owner := metav1.GetControllerOf(pod)
	if owner == nil || owner.Kind != "Job" || owner.APIVersion != "batch/v1" {
		return WorkloadRef{}, false
	}
	return WorkloadRef{Namespace: pod.Namespace, Name: jobs.BatchJobKind.WorkloadName(owner.Name),
		UID: string(owner.UID)}, true
}

// WorkloadsOf returns the workloads, in namespace and name order, of the pods that a Job or
// JobSet the bridge released created and that have not finished.
func WorkloadsOf(pods []corev1.Pod) []WorkloadRef {
	seen := map[WorkloadRef]bool{}
	var out []WorkloadRef
	for i := range pods {
		pod := &pods[i]
		if pod.Annotations[jobs.FencingTokenAnnotation] == "" ||
			pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		ref, ok := workloadOfPod(pod)
		if !ok {
			continue
		}
		if !seen[ref] {
			seen[ref] = true
			out = append(out, ref)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

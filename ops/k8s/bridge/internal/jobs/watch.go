package jobs

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"admission-ledger/bridge/internal/ledger"
)

// WatchedKinds are the ledger's events that change what the bridge does with a Job or shows
// in its Workload: each triggers a reconcile of the Job of that workload at once.
var WatchedKinds = []string{
	"workloadSubmitted", "workloadImported", "workloadDeleted", "workloadFinished",
	"checkStateReported",
	// The ledger's own budget checks, decided at quota reservation or, for a check whose
	// BudgetPolicy was missing, once the policy is defined (docs/budgets.md).
	"budgetDecided",
	"quotaReserved", "admitted", "pendingReasonChanged", "evictionStarted", "quotaReleased",
	"requeued", "rejected", "deactivated", "preempted", "drainDeadlinePassed",
	// A pod report changes the workload's status (podsReady: the PodsReady condition).
	"podsReported",
}

var watchedKinds = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range WatchedKinds {
		m[k] = true
	}
	return m
}()

// LedgerEvents turns the ledger watch's events into reconcile requests for the objects they
// are about (one source.Channel per kind), so that a decision is acted on at once instead of
// at the next poll.
type LedgerEvents struct {
	reader client.Reader
	mu     sync.Mutex
	ch     map[*Kind]chan event.GenericEvent
	// owned: the requests for owned Workload objects (OwnedWorkloads), nil until its source.
	owned chan event.GenericEvent
	// Workloads (may be nil) lists the ledger's workloads that are not deleted, for ResyncAll
	// to find those whose Workload object went while the bridge was down.
	Workloads func(ctx context.Context) ([]types.NamespacedName, error)
}

// NewLedgerEvents: reader lists the objects to resync when a watch (re)starts.
func NewLedgerEvents(reader client.Reader) *LedgerEvents {
	return &LedgerEvents{reader: reader, ch: map[*Kind]chan event.GenericEvent{}}
}

func (l *LedgerEvents) channel(kind *Kind, create bool) chan event.GenericEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch, ok := l.ch[kind]
	if !ok && create {
		ch = make(chan event.GenericEvent, 1024)
		l.ch[kind] = ch
	}
	return ch
}

// DecisionPriority is the priority of a reconcile the ledger's events ask for, and of a new
// object's, in the work queue shared with the informers' other requests (priority 0): the
// ledger's decisions and new submissions go ahead of the changes of objects (most of them the
// bridge's own writes), so a burst does not hold admissions back.
const DecisionPriority = 10

// addAt enqueues obj's request at priority (in a plain queue: as it comes).
func addAt(q workqueue.TypedRateLimitingInterface[reconcile.Request], obj client.Object, priority int) {
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)}
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(priority)}, req)
		return
	}
	q.Add(req)
}

// NotePriority is the priority of a reconcile for a workload whose only news is a new pending
// reason: the message a pending Workload shows waits behind admissions and evictions, and behind
// the changes of objects (priority 0: an owner's Finished condition frees quota); most pending
// workloads' reasons change at each decision near them (Kueue writes them only for the
// workloads its scheduler tried). In the large-scale profile tens of thousands of them at 0 held
// the owners' finishes back for a minute.
const NotePriority = -10

// OwnerPriority is the priority of a change by which a Workload's owner frees quota (its
// Finished condition, or its reservation cleared under an eviction): it goes ahead of the
// ledger's decisions. Recording it writes nothing to the API server, while the decisions'
// status writes wait for the client's rate limit; behind them, quota that the owner had freed
// stayed held in the ledger for seconds (20 s for the small workloads of Kueue's benchmark),
// and the workloads that came for it preempted others instead.
const OwnerPriority = 20

// freesQuota: the change of a Workload object is its owner's Finished condition turning True or
// its status.admission going.
func freesQuota(before, after client.Object) bool {
	o, ok1 := before.(*unstructured.Unstructured)
	n, ok2 := after.(*unstructured.Unstructured)
	if !ok1 || !ok2 || n.GetKind() != "Workload" {
		return false
	}
	finished := func(u *unstructured.Unstructured) bool {
		list, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "conditions")
		conditions, _ := list.([]any)
		for _, c := range conditions {
			if m, ok := c.(map[string]any); ok && m["type"] == "Finished" {
				return m["status"] == "True"
			}
		}
		return false
	}
	admitted := func(u *unstructured.Unstructured) bool {
		a, found, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "admission")
		return found && a != nil
	}
	return (finished(n) && !finished(o)) || (admitted(o) && !admitted(n))
}

// notesOnly marks a request object of the ledger's events sent at NotePriority.
const notesOnly = "admission-ledger.io/notes-only"

// decisions enqueues each event's object at DecisionPriority, or NotePriority when marked so.
var decisions = handler.TypedFuncs[client.Object, reconcile.Request]{
	GenericFunc: func(_ context.Context, e event.TypedGenericEvent[client.Object],
		q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		priority := DecisionPriority
		if e.Object.GetAnnotations()[notesOnly] != "" {
			priority = NotePriority
		}
		addAt(q, e.Object, priority)
	},
}

// noteKinds are the ledger's events that change only what a pending workload's status says.
var noteKinds = map[string]bool{"pendingReasonChanged": true}

// requestObject is the object of a request for namespace/name: new, marked when notes only.
func requestObject(obj client.Object, namespace, name string, notes bool) client.Object {
	obj.SetNamespace(namespace)
	obj.SetName(name)
	if notes {
		obj.SetAnnotations(map[string]string{notesOnly: "true"})
	}
	return obj
}

// objects enqueues the informers' requests for the governed objects: a new one at
// DecisionPriority too (until it is submitted the ledger's queue counts leave it out), one of the
// initial list and every change at 0.
var objects = handler.TypedFuncs[client.Object, reconcile.Request]{
	CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object],
		q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		priority := DecisionPriority
		if e.IsInInitialList {
			priority = 0
		}
		addAt(q, e.Object, priority)
	},
	UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object],
		q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		priority := 0
		if freesQuota(e.ObjectOld, e.ObjectNew) {
			priority = OwnerPriority
		}
		addAt(q, e.ObjectNew, priority)
	},
	DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[client.Object],
		q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		addAt(q, e.Object, 0)
	},
}

// Source is the controller-runtime source of the requests for the kind's objects.
func (l *LedgerEvents) Source(kind *Kind) source.Source {
	return source.Channel(l.channel(kind, true), decisions)
}

// WorkloadSource is the source of the requests for owned Workload objects: every workload the
// ledger's events are about (the reconciler passes over those it does not own).
func (l *LedgerEvents) WorkloadSource() source.Source {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.owned == nil {
		l.owned = make(chan event.GenericEvent, 1024)
	}
	return source.Channel(l.owned, decisions)
}

// sendWorkload requests a reconcile of the Workload object namespace/name, when owned Workload
// objects are governed.
func (l *LedgerEvents) sendWorkload(ctx context.Context, namespace, name string, notes bool) {
	l.mu.Lock()
	ch := l.owned
	l.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case ch <- event.GenericEvent{Object: requestObject(newWorkloadObject(), namespace, name, notes)}:
	case <-ctx.Done():
	}
}

// send requests a reconcile of the kind's object, when the kind is governed (has a source).
func (l *LedgerEvents) send(ctx context.Context, kind *Kind, namespace, name string, notes bool) {
	ch := l.channel(kind, false)
	if ch == nil {
		return
	}
	select {
	case ch <- event.GenericEvent{Object: requestObject(kind.New().Object(), namespace, name, notes)}:
	case <-ctx.Done():
	}
}

// Handle sends a request for the object of each workload the events are about. The workqueue
// merges repeats.
// A workload whose events in the batch are all notes (noteKinds) is sent at NotePriority, or not
// at all while its note waits for a slot of the notes' budget (notePacer).
func (l *LedgerEvents) Handle(ctx context.Context, events []ledger.WatchedEvent) {
	notes := map[types.NamespacedName]bool{}
	var order []types.NamespacedName
	for _, e := range events {
		if e.Name == "" || !watchedKinds[e.Kind] {
			continue
		}
		key := types.NamespacedName{Namespace: e.Namespace, Name: e.Name}
		only, seen := notes[key]
		if !seen {
			order = append(order, key)
			only = true
		}
		notes[key] = only && noteKinds[e.Kind]
	}
	for _, w := range order {
		if notes[w] && pacedNotes.waiting(w) {
			continue // its note's slot reconciles it (notePacer)
		}
		if kind, name := KindOfWorkload(w.Name); kind != nil {
			l.send(ctx, kind, w.Namespace, name, notes[w])
		}
		// An adopted job's workload has Kueue's name (KueueWorkloadNames): its job is the name
		// less the hash. A job of that name that is not its owner reconciles to no change.
		if base, ok := kueueBaseName(w.Name); ok {
			if kind, name := KindOfWorkload(base); kind != nil {
				l.send(ctx, kind, w.Namespace, name, notes[w])
			}
		}
		l.sendWorkload(ctx, w.Namespace, w.Name, notes[w])
	}
}

// ResyncAll sends a request for every object of a governed kind with the queue label: what
// happened in the ledger before a watch started is read by these reconciles.
func (l *LedgerEvents) ResyncAll(ctx context.Context) {
	for _, kind := range Kinds {
		if l.channel(kind, false) == nil {
			continue
		}
		objects, err := kind.List(ctx, l.reader)
		if err != nil {
			log.FromContext(ctx).Error(err, "listing objects to resync after the ledger watch started",
				"kind", kind.Name)
			continue
		}
		for _, obj := range objects {
			l.send(ctx, kind, obj.GetNamespace(), obj.GetName(), false)
		}
	}
	l.mu.Lock()
	owned := l.owned != nil
	l.mu.Unlock()
	if !owned {
		return
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(newWorkloadObject().GroupVersionKind().GroupVersion().WithKind("WorkloadList"))
	if err := l.reader.List(ctx, list); err != nil {
		log.FromContext(ctx).Error(err, "listing Workload objects to resync after the ledger watch started")
		return
	}
	present := map[types.NamespacedName]bool{}
	for i := range list.Items {
		present[client.ObjectKeyFromObject(&list.Items[i])] = true
		if ownedByItsCreator(&list.Items[i]) {
			l.sendWorkload(ctx, list.Items[i].GetNamespace(), list.Items[i].GetName(), false)
		}
	}
	l.resyncGone(ctx, present)
}

// resyncGone sends a request for each of the ledger's workloads of a Workload object's name
// whose object is not there (OwnedWorkloads.gone records its deletion).
func (l *LedgerEvents) resyncGone(ctx context.Context, present map[types.NamespacedName]bool) {
	if l.Workloads == nil {
		return
	}
	held, err := l.Workloads(ctx)
	if err != nil {
		log.FromContext(ctx).Error(err, "listing the ledger's workloads to resync after the ledger watch started")
		return
	}
	for _, w := range held {
		if !present[w] && workloadObjectName(w.Name) {
			l.sendWorkload(ctx, w.Namespace, w.Name, false)
		}
	}
}

package jobs

import (
	"context"
	"testing"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"admission-ledger/bridge/internal/ledger"
)

// A reconcile the ledger's events ask for goes ahead of the changes already queued
// (a burst of new Workloads must not hold the ledger's admissions back).
func TestLedgerDecisionsGoAheadOfChanges(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	created := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ml", Name: "new"}}
	q.Add(created)
	admitted := newWorkloadObject()
	admitted.SetNamespace("ml")
	admitted.SetName("admitted")
	decisions.Generic(context.Background(), event.GenericEvent{Object: admitted}, q)
	first, priority, _ := q.GetWithPriority()
	if first.Name != "admitted" || priority != DecisionPriority {
		t.Fatalf("first out: %v at priority %d, want ml/admitted at %d", first, priority, DecisionPriority)
	}
	q.Done(first)
	if second, _, _ := q.GetWithPriority(); second != created {
		t.Fatalf("second out: %v", second)
	}
}

// A new object is submitted ahead of the changes already queued (until then the ledger's queue
// counts leave it out); one of the informers' initial list is not.
func TestNewObjectsGoAheadOfChanges(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	obj := func(name string) *unstructured.Unstructured {
		o := newWorkloadObject()
		o.SetNamespace("ml")
		o.SetName(name)
		return o
	}
	ctx := context.Background()
	objects.Update(ctx, event.UpdateEvent{ObjectOld: obj("changed"), ObjectNew: obj("changed")}, q)
	objects.Create(ctx, event.CreateEvent{Object: obj("listed"), IsInInitialList: true}, q)
	objects.Create(ctx, event.CreateEvent{Object: obj("new")}, q)
	first, priority, _ := q.GetWithPriority()
	if first.Name != "new" || priority != DecisionPriority {
		t.Fatalf("first out: %v at priority %d, want ml/new at %d", first, priority, DecisionPriority)
	}
	q.Done(first)
	if second, priority, _ := q.GetWithPriority(); priority != 0 {
		t.Fatalf("second out: %v at priority %d, want 0", second, priority)
	}
}

// ledgerEventsQueue: LedgerEvents whose owned-Workload source feeds a priority queue, for the
// test's lifetime.
func ledgerEventsQueue(t *testing.T) (priorityqueue.PriorityQueue[reconcile.Request], *LedgerEvents, context.Context) {
	t.Helper()
	q := priorityqueue.New[reconcile.Request]("test")
	t.Cleanup(q.ShutDown)
	l := NewLedgerEvents(nil)
	src := l.WorkloadSource()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := src.Start(ctx, q); err != nil {
		t.Fatal(err)
	}
	return q, l, ctx
}

// A workload whose only news in a batch is a new pending reason is reconciled after those with
// decisions (admissions, evictions): its message waits, an admission does not.
func TestPendingNotesGoBehindDecisions(t *testing.T) {
	q, l, ctx := ledgerEventsQueue(t)
	l.Handle(ctx, []ledger.WatchedEvent{
		{Kind: "pendingReasonChanged", Namespace: "ml", Name: "waiting"},
		{Kind: "pendingReasonChanged", Namespace: "ml", Name: "admitted"},
		{Kind: "admitted", Namespace: "ml", Name: "admitted"},
		{Kind: "pendingReasonChanged", Namespace: "ml", Name: "noted"},
	})
	// The channel source delivers them to the queue on its own goroutine.
	for deadline := time.Now().Add(5 * time.Second); q.Len() < 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests queued, want 3", q.Len())
		}
	}
	// A change of an object (an owner's Finished condition, say) goes ahead of the notes too.
	changed := &unstructured.Unstructured{}
	changed.SetNamespace("ml")
	changed.SetName("finished")
	objects.Update(ctx, event.TypedUpdateEvent[client.Object]{ObjectOld: changed, ObjectNew: changed}, q)
	want := []struct {
		name     string
		priority int
	}{{"admitted", DecisionPriority}, {"finished", 0}, {"waiting", NotePriority}, {"noted", NotePriority}}
	for _, w := range want {
		got, priority, _ := q.GetWithPriority()
		if got.Name != w.name || priority != w.priority {
			t.Fatalf("out: %v at priority %d, want ml/%s at %d", got, priority, w.name, w.priority)
		}
		q.Done(got)
	}
}

// A workload whose note waits for its slot of the notes' budget is not reconciled again for a
// new pending reason (the slot's reconcile reads it then); a decision about it still is.
func TestNotesOfAWorkloadWaitingForItsSlotAreNotSent(t *testing.T) {
	saved := pacedNotes
	defer func() { pacedNotes = saved }()
	pacedNotes = &notePacer{slots: map[types.NamespacedName]noteSlot{}}
	limiter := rate.NewLimiter(1, 1)
	now := time.Now()
	pacedNotes.take(limiter, types.NamespacedName{Namespace: "ml", Name: "first"}, now)
	if wait := pacedNotes.take(limiter, types.NamespacedName{Namespace: "ml", Name: "slotted"}, now); wait <= 0 {
		t.Fatalf("the second note of a budget of 1 waits %v", wait)
	}
	q, l, ctx := ledgerEventsQueue(t)
	queued := func(n int) map[string]int {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); q.Len() < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d requests queued, want %d", q.Len(), n)
			}
		}
		time.Sleep(50 * time.Millisecond) // one more, were it sent, would be queued by now
		got := map[string]int{}
		for q.Len() > 0 {
			r, priority, _ := q.GetWithPriority()
			got[r.Name] = priority
			q.Done(r)
		}
		return got
	}
	l.Handle(ctx, []ledger.WatchedEvent{
		{Kind: "pendingReasonChanged", Namespace: "ml", Name: "slotted"},
		{Kind: "pendingReasonChanged", Namespace: "ml", Name: "other"},
	})
	if got := queued(1); len(got) != 1 || got["other"] != NotePriority {
		t.Fatalf("notes queued %v, want only ml/other at %d", got, NotePriority)
	}
	l.Handle(ctx, []ledger.WatchedEvent{{Kind: "admitted", Namespace: "ml", Name: "slotted"}})
	if got := queued(1); len(got) != 1 || got["slotted"] != DecisionPriority {
		t.Fatalf("a decision queued %v, want ml/slotted at %d", got, DecisionPriority)
	}
}

// An owner's change that frees quota (Finished, or the reservation cleared under an eviction)
// goes ahead of the ledger's decisions; any other change of an object does not.
func TestOwnersFreeingQuotaGoAheadOfDecisions(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	ctx := context.Background()
	wl := func(name string, status map[string]any) *unstructured.Unstructured {
		o := newWorkloadObject()
		o.SetNamespace("ml")
		o.SetName(name)
		o.Object["status"] = status
		return o
	}
	admission := map[string]any{"admission": map[string]any{"clusterQueue": "cq"}}
	finished := map[string]any{"admission": map[string]any{"clusterQueue": "cq"},
		"conditions": []any{map[string]any{"type": "Finished", "status": "True"}}}
	decisions.Generic(ctx, event.GenericEvent{Object: wl("decided", nil)}, q)
	objects.Update(ctx, event.UpdateEvent{ObjectOld: wl("shown", nil), ObjectNew: wl("shown", admission)}, q)
	objects.Update(ctx, event.UpdateEvent{ObjectOld: wl("finished", admission), ObjectNew: wl("finished", finished)}, q)
	objects.Update(ctx, event.UpdateEvent{ObjectOld: wl("cleared", admission), ObjectNew: wl("cleared", map[string]any{})}, q)
	want := []struct {
		name     string
		priority int
	}{{"finished", OwnerPriority}, {"cleared", OwnerPriority}, {"decided", DecisionPriority}, {"shown", 0}}
	for _, w := range want {
		got, priority, _ := q.GetWithPriority()
		if got.Name != w.name || priority != w.priority {
			t.Fatalf("out: %v at priority %d, want ml/%s at %d", got, priority, w.name, w.priority)
		}
		q.Done(got)
	}
}

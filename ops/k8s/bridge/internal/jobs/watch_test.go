package jobs

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
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

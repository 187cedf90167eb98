package jobs

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// A reconcile the ledger's events ask for goes ahead of the informers' requests already queued
// (a burst of new Workloads must not hold the ledger's admissions back).
func TestLedgerDecisionsGoAheadOfNewObjects(t *testing.T) {
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

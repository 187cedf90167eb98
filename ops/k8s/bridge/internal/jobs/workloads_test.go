package jobs

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"admission-ledger/bridge/internal/ledger"
)

// workloadsLedger: a ledger whose workload read model the test sets, recording what is sent.
type workloadsLedger struct {
	state     *ledger.WorkloadState
	manifests []string
	inputs    []string // "kind name token" per Record
}

func (l *workloadsLedger) WorkloadState(context.Context, string, string) (*ledger.WorkloadState, error) {
	return l.state, nil
}

func (l *workloadsLedger) RecordManifest(_ context.Context, _, _, manifest string) (ledger.Outcome, error) {
	l.manifests = append(l.manifests, manifest)
	return ledger.Outcome{Sequences: []uint64{1}, Unchanged: []bool{false}}, nil
}

func (l *workloadsLedger) Record(_ context.Context, _ string, inputs [][]byte) (ledger.Outcome, error) {
	event, err := ledger.ReadEvent(inputs[0])
	if err != nil {
		return ledger.Outcome{}, err
	}
	body := event.Body()
	switch {
	case body.HasPodsReported():
		r, _ := body.PodsReported()
		token, _ := r.FencingToken()
		l.inputs = append(l.inputs, "pods "+r.Report().String()+" "+token)
	case body.HasWorkloadActivationSet():
		a, _ := body.WorkloadActivationSet()
		l.inputs = append(l.inputs, fmt.Sprintf("activate %t", a.Active()))
	case body.HasWorkloadFinished():
		f, _ := body.WorkloadFinished()
		message, _ := f.Message_()
		l.inputs = append(l.inputs, "finished "+message)
	default:
		l.inputs = append(l.inputs, "other")
	}
	return ledger.Outcome{Sequences: []uint64{uint64(len(l.inputs))}}, nil
}

// setPhase: the workload ml/train in the ledger, its status (Kueue's, to mirror) as given with
// the phase, and its tokens from the status's.
func (l *workloadsLedger) setPhase(phase ledger.Phase, status map[string]any) {
	status["phase"] = phase.String()
	fencing, _ := status["fencingToken"].(string)
	evicting, _ := status["evictingToken"].(string)
	l.state = &ledger.WorkloadState{Namespace: "ml", Name: "train", UID: "wl-uid", Phase: phase,
		FencingToken: fencing, EvictingToken: evicting, Status: status, Active: phase != ledger.PhaseDeactivated}
}

// A Workload created with kubectl: submitted as it is; once admitted, `pods released` is
// recorded before its status shows the admission; the owner's Finished condition is the finish;
// an eviction is complete when the owner clears the reservation.
func TestOwnedWorkloadFollowsKueuesContractForOwners(t *testing.T) {
	wl := newWorkloadObject()
	wl.SetNamespace("ml")
	wl.SetName("train")
	wl.SetUID("wl-uid")
	wl.Object["spec"] = map[string]any{"queueName": "gpus", "podSets": []any{map[string]any{
		"name": "main", "count": int64(1), "template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "c"}}}}}}}
	c := fake.NewClientBuilder().WithObjects(wl).WithStatusSubresource(wl).Build()
	l := &workloadsLedger{}
	r := &OwnedWorkloads{Client: c, Ledger: l, Events: record.NewFakeRecorder(10)}
	r.jobs = &Reconciler{Client: c, Ledger: l, Events: r.Events}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ml", Name: "train"}}
	reconcile := func() {
		t.Helper()
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	stored := func() *unstructured.Unstructured {
		got := newWorkloadObject()
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(wl), got); err != nil {
			t.Fatal(err)
		}
		return got
	}

	reconcile()
	if len(l.manifests) != 1 || !strings.Contains(l.manifests[0], `"kind":"Workload"`) ||
		!strings.Contains(l.manifests[0], `"queueName":"gpus"`) {
		t.Fatalf("submitted %q", l.manifests)
	}

	admission := map[string]any{"clusterQueue": "cq", "podSetAssignments": []any{
		map[string]any{"name": "main", "count": int64(1), "flavors": map[string]any{"cpu": "default"}}}}
	l.setPhase(ledger.PhaseAdmitted, map[string]any{"fencingToken": "wl-uid/1", "admission": admission})
	reconcile()
	if strings.Join(l.inputs, ";") != "pods released wl-uid/1" || !showsAdmission(stored(), "wl-uid/1") {
		t.Fatalf("inputs %q; admission shown %v", l.inputs, showsAdmission(stored(), "wl-uid/1"))
	}

	// Evicted: the owner clears the reservation; then, and only then, `pods terminated`.
	l.setPhase(ledger.PhaseEvicting, map[string]any{"evictingToken": "wl-uid/1", "admission": admission,
		"conditions": []any{map[string]any{"type": "Evicted", "status": "True", "reason": "Preempted"}}})
	reconcile()
	if strings.HasPrefix(l.inputs[len(l.inputs)-1], "pods terminated") {
		t.Fatal("terminated reported before the owner cleared the reservation")
	}
	owned := stored()
	delete(owned.Object["status"].(map[string]any), "admission")
	if err := c.Status().Update(context.Background(), owned); err != nil {
		t.Fatal(err)
	}
	reconcile()
	if l.inputs[len(l.inputs)-1] != "pods terminated wl-uid/1" {
		t.Fatalf("inputs %q", l.inputs)
	}

	// Admitted again, released again; the owner finishes it: forwarded, and the status is not
	// written over the owner's condition before the ledger holds the finish.
	l.setPhase(ledger.PhaseAdmitted, map[string]any{"fencingToken": "wl-uid/2", "admission": admission})
	reconcile()
	if l.inputs[len(l.inputs)-1] != "pods released wl-uid/2" {
		t.Fatalf("inputs %q", l.inputs)
	}
	owned = stored()
	owned.Object["status"].(map[string]any)["conditions"] = []any{map[string]any{"type": "Finished",
		"status": "True", "reason": "ByTest", "message": "done by the owner",
		"lastTransitionTime": metav1.Now().UTC().Format("2006-01-02T15:04:05Z")}}
	if err := c.Status().Update(context.Background(), owned); err != nil {
		t.Fatal(err)
	}
	reconcile()
	if l.inputs[len(l.inputs)-1] != "finished done by the owner" || !conditionTrue(stored(), "Finished") {
		t.Fatalf("inputs %q", l.inputs)
	}
	l.setPhase(ledger.PhaseFinished, map[string]any{})
	calls := len(l.inputs)
	reconcile()
	if len(l.inputs) != calls {
		t.Fatalf("recorded again once the ledger holds the finish: %q", l.inputs[calls:])
	}
}

// A Workload object the bridge made for a Job is not an owned one.
func TestWorkloadsOfGovernedKindsAreNotOwned(t *testing.T) {
	wl := newWorkloadObject()
	wl.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j",
		UID: "u", Controller: ptrTo(true)}})
	if ownedByItsCreator(wl) {
		t.Fatal("a Job's Workload counted as owned by its creator")
	}
	wl.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Trainer",
		Name: "t", UID: "u", Controller: ptrTo(true)}})
	if !ownedByItsCreator(wl) {
		t.Fatal("a Workload of another controller's kind is not governed")
	}
}

func ptrTo[T any](v T) *T { return &v }

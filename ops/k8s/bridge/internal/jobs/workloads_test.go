package jobs

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/time/rate"
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
	case body.HasWorkloadDeleted():
		d, _ := body.WorkloadDeleted()
		w, _ := d.Workload()
		uid, _ := w.Uid()
		l.inputs = append(l.inputs, "deleted "+uid)
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
	l.setPhase(ledger.PhaseFinished, map[string]any{"conditions": []any{map[string]any{
		"type": "Finished", "status": "True", "reason": "Succeeded", "message": "done by the owner"}}})
	calls := len(l.inputs)
	reconcile()
	if len(l.inputs) != calls {
		t.Fatalf("recorded again once the ledger holds the finish: %q", l.inputs[calls:])
	}
	// As Kueue: nothing is written over what the owner finished, and no finalizer holds it.
	if reason := conditionField(stored(), "Finished", "reason"); reason != "ByTest" {
		t.Fatalf("the owner's Finished condition was written over: reason %q", reason)
	}
	if len(stored().GetFinalizers()) != 0 {
		t.Fatalf("finalizers %q", stored().GetFinalizers())
	}
}

// An owned Workload object carries no finalizer: its deletion is recorded once it is gone, for
// the object seen deleted (its uid) or, deleted while the bridge was down, for the ledger's
// workload of a Workload object's name; never for a job's workload.
func TestOwnedWorkloadGoneIsDeletedInTheLedger(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	l := &workloadsLedger{}
	r := &OwnedWorkloads{Client: c, Ledger: l, Events: record.NewFakeRecorder(10)}
	r.jobs = &Reconciler{Client: c, Ledger: l, Events: r.Events}
	gone := func(name string) string {
		t.Helper()
		l.inputs = nil
		req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ml", Name: name}}
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		return strings.Join(l.inputs, ";")
	}
	l.setPhase(ledger.PhaseAdmitted, map[string]any{"fencingToken": "wl-uid/1"})

	// Seen deleted with another uid: an earlier object's; nothing recorded.
	r.tombstones.Store(types.NamespacedName{Namespace: "ml", Name: "train"}, "other-uid")
	if got := gone("train"); got != "" {
		t.Fatalf("recorded %q for another object's deletion", got)
	}
	// Seen deleted with the ledger's uid: recorded, and the uid forgotten.
	r.tombstones.Store(types.NamespacedName{Namespace: "ml", Name: "train"}, "wl-uid")
	if got := gone("train"); got != "deleted wl-uid" {
		t.Fatalf("recorded %q", got)
	}
	if _, kept := r.tombstones.Load(types.NamespacedName{Namespace: "ml", Name: "train"}); kept {
		t.Fatal("the uid is kept after the deletion was recorded")
	}
	// Not seen (the bridge was down): recorded for a Workload object's name only.
	if got := gone("train"); got != "deleted wl-uid" {
		t.Fatalf("recorded %q", got)
	}
	if got := gone("job-train"); got != "" {
		t.Fatalf("recorded %q for a Job's workload", got)
	}
	if got := gone("job-train-1a2b3"); got != "" {
		t.Fatalf("recorded %q for Kueue's name of a Job's workload", got)
	}
	l.setPhase(ledger.PhaseDeleted, map[string]any{})
	if got := gone("train"); got != "" {
		t.Fatalf("recorded %q for a deleted workload", got)
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

// ownedWorkloadFixture: the owned Workload object ml/train (uid wl-uid, queue gpus, status as
// given or none) in a fake cluster, a recording ledger, and its reconciler and request.
func ownedWorkloadFixture(status map[string]any) (*unstructured.Unstructured, client.Client,
	*workloadsLedger, *OwnedWorkloads, ctrl.Request) {
	wl := newWorkloadObject()
	wl.SetNamespace("ml")
	wl.SetName("train")
	wl.SetUID("wl-uid")
	wl.Object["spec"] = map[string]any{"queueName": "gpus"}
	if status != nil {
		wl.Object["status"] = status
	}
	c := fake.NewClientBuilder().WithObjects(wl).WithStatusSubresource(wl).Build()
	l := &workloadsLedger{}
	r := &OwnedWorkloads{Client: c, Ledger: l, Events: record.NewFakeRecorder(10)}
	r.jobs = &Reconciler{Client: c, Ledger: l, Events: r.Events}
	return wl, c, l, r, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ml", Name: "train"}}
}

// What a pending Workload says (its first pending status, a new message) is a note: over the
// notes' budget it waits (NoteRetry for a budget of nothing) behind the notes, nothing written, and the object counts as submitted though
// it shows no condition; an admission never waits.
func TestPendingNotesWaitForTheirBudget(t *testing.T) {
	saved := noteWrites
	defer func() { noteWrites = saved }()
	noteWrites = rate.NewLimiter(0, 0) // no note may be written
	wl, c, l, r, req := ownedWorkloadFixture(nil)
	pending := func(message string) map[string]any {
		return map[string]any{"conditions": []any{map[string]any{"type": "QuotaReserved",
			"status": "False", "reason": "Pending", "message": message}}}
	}
	shown := func() string {
		got := newWorkloadObject()
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(wl), got); err != nil {
			t.Fatal(err)
		}
		return conditionField(got, "QuotaReserved", "message")
	}
	reconcile := func() ctrl.Result {
		t.Helper()
		result, err := r.Reconcile(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return result
	}
	l.setPhase(ledger.PhasePending, pending("1 more needed"))
	if result := reconcile(); result.RequeueAfter != NoteRetry || result.Priority == nil ||
		*result.Priority != NotePriority || shown() != "" || !SubmittedButUnshown("ml", "train") {
		t.Fatalf("a first pending status over the budget: result %+v, shown %q, counted submitted %v",
			result, shown(), SubmittedButUnshown("ml", "train"))
	}
	noteWrites = rate.NewLimiter(rate.Inf, 1)
	reconcile()
	if shown() != "1 more needed" || SubmittedButUnshown("ml", "train") {
		t.Fatalf("a note within the budget: shown %q, still counted unshown %v", shown(),
			SubmittedButUnshown("ml", "train"))
	}
	noteWrites = rate.NewLimiter(0, 0)
	l.setPhase(ledger.PhasePending, pending("3 more needed"))
	if result := reconcile(); result.RequeueAfter != NoteRetry || shown() != "1 more needed" {
		t.Fatalf("a new message over the budget: result %+v, shown %q", result, shown())
	}
	l.setPhase(ledger.PhaseAdmitted, map[string]any{"fencingToken": "wl-uid/1", "admission": map[string]any{
		"clusterQueue": "cq", "podSetAssignments": []any{}}})
	reconcile()
	got := newWorkloadObject()
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(wl), got); err != nil {
		t.Fatal(err)
	}
	if !showsAdmission(got, "wl-uid/1") {
		t.Fatal("an admission waited for the notes' budget")
	}
}

// An owner that clears the reservation as Kueue's helper does (QuotaReserved False applied
// server-side; the admission the bridge wrote stays, another manager's field) completes the
// eviction too; a QuotaReserved False that the ledger shows itself does not.
func TestOwnerClearingTheReservationByItsConditionCompletesTheEviction(t *testing.T) {
	admission := map[string]any{"clusterQueue": "cq", "podSetAssignments": []any{}}
	condition := func(kind, status string) map[string]any {
		return map[string]any{"type": kind, "status": status, "reason": "R"}
	}
	wl, c, l, r, req := ownedWorkloadFixture(map[string]any{"admission": admission,
		"conditions": []any{condition("QuotaReserved", "False"), condition("Evicted", "True")}})
	evicting := func(quotaReserved string) {
		l.setPhase(ledger.PhaseEvicting, map[string]any{"evictingToken": "wl-uid/1", "admission": admission,
			"conditions": []any{condition("QuotaReserved", quotaReserved), condition("Evicted", "True")}})
	}
	evicting("False")
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if strings.Join(l.inputs, ";") != "" {
		t.Fatalf("recorded %q while the ledger itself shows QuotaReserved False", l.inputs)
	}
	got := newWorkloadObject()
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(wl), got); err != nil {
		t.Fatal(err)
	}
	got.Object["status"] = map[string]any{"admission": admission, "conditions": []any{
		condition("QuotaReserved", "False"), condition("Evicted", "True")}}
	if err := c.Status().Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	evicting("True")
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if strings.Join(l.inputs, ";") != "pods terminated wl-uid/1" {
		t.Fatalf("inputs %q", l.inputs)
	}
}

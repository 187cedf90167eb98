package jobs

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/utils/ptr"

	"admission-ledger/bridge/internal/ledger"
)

// Kueue's batch Job PodsReady: Ready pods and succeeded pods together reach the count.
func TestPodsReadyCountsReadyAndSucceededPods(t *testing.T) {
	for _, c := range []struct {
		ready            *int32
		succeeded, count int32
		want             bool
	}{
		{nil, 0, 1, false},
		{ptr.To(int32(2)), 0, 3, false},
		{ptr.To(int32(3)), 0, 3, true},
		{ptr.To(int32(1)), 2, 3, true},
		{nil, 3, 3, true},
		{ptr.To(int32(4)), 0, 3, true},
	} {
		job := &batchv1.Job{Status: batchv1.JobStatus{Ready: c.ready, Succeeded: c.succeeded}}
		if got := PodsReady(job, c.count); got != c.want {
			t.Errorf("ready %v succeeded %d count %d: %v, want %v", ptr.Deref(c.ready, -1), c.succeeded, c.count, got, c.want)
		}
	}
}

func workloadIn(phase ledger.Phase, podsReady bool) *LedgerWorkload {
	return &LedgerWorkload{Namespace: "ml", Name: "job-train", Phase: phase, PodsReady: podsReady}
}

// The PodsReady condition: Kueue's reasons and messages, False while the ledger has no
// `pods ready`, True after; the transition time kept while the status stays; none for a
// workload never admitted; False again after an eviction; a Finished workload keeps its own.
func TestPodsReadyConditionFollowsTheLedger(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	if c := PodsReadyConditionFor(workloadIn(ledger.PhasePending, false), nil, t0); c != nil {
		t.Fatalf("a pending workload got %v", c)
	}
	waiting := PodsReadyConditionFor(workloadIn(ledger.PhaseAdmitted, false), nil, t0)
	if waiting["status"] != "False" || waiting["reason"] != "WaitForStart" ||
		waiting["message"] != "Not all pods are ready or succeeded" || waiting["lastTransitionTime"] != "2025-01-02T03:04:05Z" {
		t.Fatalf("admitted, not ready: %v", waiting)
	}
	if again := PodsReadyConditionFor(workloadIn(ledger.PhaseAdmitted, false), waiting, t1); again["lastTransitionTime"] != "2025-01-02T03:04:05Z" {
		t.Fatalf("the transition time moved without a transition: %v", again)
	}
	ready := PodsReadyConditionFor(workloadIn(ledger.PhaseAdmitted, true), waiting, t1)
	if ready["status"] != "True" || ready["reason"] != "Started" ||
		ready["message"] != "All pods reached readiness and the workload is running" || ready["lastTransitionTime"] != "2025-01-02T03:05:05Z" {
		t.Fatalf("ready: %v", ready)
	}
	if finished := PodsReadyConditionFor(workloadIn(ledger.PhaseFinished, false), ready, t1.Add(time.Hour)); finished["status"] != "True" ||
		finished["lastTransitionTime"] != "2025-01-02T03:05:05Z" {
		t.Fatalf("a finished workload's condition changed: %v", finished)
	}
	evicted := PodsReadyConditionFor(workloadIn(ledger.PhaseEvicting, false), ready, t1.Add(time.Hour))
	if evicted["status"] != "False" || evicted["reason"] != "WaitForStart" || evicted["lastTransitionTime"] != "2025-01-02T04:05:05Z" {
		t.Fatalf("evicted: %v", evicted)
	}
}

// The mirror appends the condition to the ledger's conditions, from the object's own.
func TestWithPodsReadyKeepsTheLedgersConditions(t *testing.T) {
	admitted := map[string]any{"type": "Admitted", "status": "True"}
	desired := map[string]any{"conditions": []any{admitted}}
	current := map[string]any{"conditions": []any{admitted, map[string]any{"type": "PodsReady", "status": "True",
		"reason": "Started", "lastTransitionTime": "2025-01-02T03:04:05Z"}}}
	withPodsReady(desired, current, workloadIn(ledger.PhaseAdmitted, true), time.Now())
	list := desired["conditions"].([]any)
	if len(list) != 2 || list[0].(map[string]any)["type"] != "Admitted" ||
		list[1].(map[string]any)["lastTransitionTime"] != "2025-01-02T03:04:05Z" {
		t.Fatalf("conditions %v", list)
	}
}

// A released Job whose pods are all Ready: `pods ready` with the current token, once; not
// before the pods are ready, and not when the ledger shows it already.
func TestRunningJobReportsReadyOnce(t *testing.T) {
	r, job, state, l, _ := releaseReconciler(t, nil)
	if _, err := r.release(context.Background(), &BatchJob{Job: job}, state); err != nil {
		t.Fatal(err)
	}
	if got := reportsOf(t, l); len(got) != 1 || got[0] != "released uid/1 " {
		t.Fatalf("reports %q", got)
	}
	job.Status.Ready = ptr.To(int32(0))
	if _, err := r.release(context.Background(), &BatchJob{Job: job}, state); err != nil {
		t.Fatal(err)
	}
	if got := reportsOf(t, l); len(got) != 1 {
		t.Fatalf("reported before the pods were ready: %q", got)
	}
	job.Status.Ready = ptr.To(int32(1))
	for attempt := 1; attempt <= 2; attempt++ {
		if _, err := r.release(context.Background(), &BatchJob{Job: job}, state); err != nil {
			t.Fatal(err)
		}
		if got := reportsOf(t, l); len(got) != 2 || got[1] != "ready uid/1 " {
			t.Fatalf("attempt %d: reports %q", attempt, got)
		}
	}
	state.PodsReady = true
	calls := l.calls
	if _, err := r.release(context.Background(), &BatchJob{Job: job}, state); err != nil {
		t.Fatal(err)
	}
	if l.calls != calls {
		t.Fatal("reported again although the ledger holds pods ready")
	}
}

package jobs

import (
	"context"
	"errors"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"admission-ledger/bridge/internal/ledger"
	"admission-ledger/bridge/internal/ledgerevents"
	"admission-ledger/bridge/internal/podsetupdates"
)

// A released Job: the ledger's admission on flavor h100 (nodeLabels gpu=h100, a toleration),
// and check provisioning's podSetUpdates for podSet main.
func releaseFixture(updates []any) (*Reconciler, *batchv1.Job, *LedgerWorkload) {
	flavor := &unstructured.Unstructured{}
	flavor.SetGroupVersionKind(schema.GroupVersionKind{Group: KueueGroup, Version: KueueVersion, Kind: "ResourceFlavor"})
	flavor.SetName("h100")
	flavor.Object["spec"] = map[string]any{"nodeLabels": map[string]any{"gpu": "h100"},
		"tolerations": []any{map[string]any{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}}}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train"},
		Spec: batchv1.JobSpec{Parallelism: ptr.To(int32(1)), Suspend: ptr.To(true),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "train"}},
				Spec: corev1.PodSpec{NodeSelector: map[string]string{"tier": "gold"}}}}}
	parsed, err := podsetupdates.FromEntry(map[string]any{"podSetUpdates": updates})
	if err != nil {
		panic(err)
	}
	state := &LedgerWorkload{Namespace: "ml", Name: "job-train", ClusterQueue: "gpu", Status: map[string]any{},
		PodSets: []ledger.PodSetAssignment{{Name: "main", Count: 1, Flavors: map[string]string{"nvidia.com/gpu": "h100"}}},
		Checks:  []ledger.CheckState{{Name: "provisioning", State: "Ready", PodSetUpdates: parsed}}}
	r := &Reconciler{Kind: BatchJobKind, Client: fake.NewClientBuilder().WithObjects(flavor).Build()}
	return r, job, state
}

// At release the pod template gets the flavor's node labels and tolerations and the check's
// labels, annotations, nodeSelector and tolerations; a second admission starts again from the
// Job's own template (the first admission's updates do not stay).
func TestReleaseAppliesTheChecksPodSetUpdates(t *testing.T) {
	r, job, state := releaseFixture([]any{map[string]any{"name": "main",
		"labels": map[string]any{"pool": "a"}, "annotations": map[string]any{"example.com/request": "pr-1"},
		"nodeSelector": map[string]any{"zone": "z1"},
		"tolerations":  []any{map[string]any{"key": "reserved", "operator": "Equal", "value": "a", "effect": "NoSchedule"}}}})
	if _, err := r.applyAdmission(context.Background(), &BatchJob{Job: job}, state, "uid/1"); err != nil {
		t.Fatal(err)
	}
	tmpl := job.Spec.Template
	if tmpl.Labels["pool"] != "a" || tmpl.Labels["app"] != "train" || tmpl.Annotations["example.com/request"] != "pr-1" {
		t.Fatalf("template labels %v annotations %v", tmpl.Labels, tmpl.Annotations)
	}
	if tmpl.Spec.NodeSelector["zone"] != "z1" || tmpl.Spec.NodeSelector["gpu"] != "h100" || tmpl.Spec.NodeSelector["tier"] != "gold" {
		t.Fatalf("nodeSelector %v", tmpl.Spec.NodeSelector)
	}
	if len(tmpl.Spec.Tolerations) != 2 || tmpl.Spec.Tolerations[1].Key != "reserved" {
		t.Fatalf("tolerations %v", tmpl.Spec.Tolerations)
	}
	// The next admission: the check reports nothing this time.
	_, _, next := releaseFixture(nil)
	if _, err := r.applyAdmission(context.Background(), &BatchJob{Job: job}, next, "uid/2"); err != nil {
		t.Fatal(err)
	}
	tmpl = job.Spec.Template
	if _, kept := tmpl.Labels["pool"]; kept || tmpl.Spec.NodeSelector["zone"] != "" || len(tmpl.Spec.Tolerations) != 1 {
		t.Fatalf("the first admission's updates stayed: labels %v nodeSelector %v tolerations %v",
			tmpl.Labels, tmpl.Spec.NodeSelector, tmpl.Spec.Tolerations)
	}
	if tmpl.Labels["app"] != "train" || tmpl.Annotations[FencingTokenAnnotation] != "uid/2" {
		t.Fatalf("labels %v annotations %v", tmpl.Labels, tmpl.Annotations)
	}
}

// A check's label with another value than the template's is Kueue's conflict: not applied.
func TestReleaseRefusesAConflictWithTheTemplate(t *testing.T) {
	r, job, state := releaseFixture([]any{map[string]any{"name": "main", "labels": map[string]any{"app": "other"}}})
	_, err := r.applyAdmission(context.Background(), &BatchJob{Job: job}, state, "uid/1")
	var conflict *cannotStart
	if !errors.As(err, &conflict) || !strings.Contains(err.Error(),
		`in admission check "provisioning": invalid admission check PodSetUpdate: conflict for labels: conflict for key=app, value1=train, value2=other`) {
		t.Fatalf("err %v", err)
	}
}

// podsLedger records pod reports as admitd would: a request id it has seen is answered from its
// record and writes nothing.
type podsLedger struct {
	ids     map[string]bool
	reports []ledgerevents.PodsReported
	calls   int
}

func (l *podsLedger) RecordManifest(context.Context, string, string, string) (ledger.Outcome, error) {
	return ledger.Outcome{}, errors.New("not expected")
}

func (l *podsLedger) WorkloadState(context.Context, string, string) (*ledger.WorkloadState, error) {
	return nil, errors.New("not expected")
}

func (l *podsLedger) Record(_ context.Context, requestID string, inputs [][]byte) (ledger.Outcome, error) {
	l.calls++
	if l.ids[requestID] {
		return ledger.Outcome{Sequences: []uint64{1}, Retried: true}, nil
	}
	event, err := ledger.ReadEvent(inputs[0])
	if err != nil {
		return ledger.Outcome{}, err
	}
	r, err := event.Body().PodsReported()
	if err != nil {
		return ledger.Outcome{}, err
	}
	l.ids[requestID] = true
	l.reports = append(l.reports, r)
	return ledger.Outcome{Sequences: []uint64{uint64(len(l.reports))}}, nil
}

// releaseReconciler: releaseFixture's Job stored in the fake API server (admitted with token
// uid/1), a ledger of pod reports and an event recorder.
func releaseReconciler(t *testing.T, updates []any) (*Reconciler, *batchv1.Job, *LedgerWorkload, *podsLedger, *record.FakeRecorder) {
	r, job, state := releaseFixture(updates)
	state.UID = "uid"
	state.Phase = ledger.PhaseAdmitted
	state.FencingToken = "uid/1"
	if err := r.Client.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	l := &podsLedger{ids: map[string]bool{}}
	events := record.NewFakeRecorder(10)
	r.Ledger, r.Events = l, events
	return r, job, state, l, events
}

func reportsOf(t *testing.T, l *podsLedger) []string {
	var out []string
	for _, r := range l.reports {
		token, _ := r.FencingToken()
		message, _ := r.Message_()
		out = append(out, r.Report().String()+" "+token+" "+message)
	}
	return out
}

// A check's label conflicting with the template's own is found before `pods released`: the
// bridge reports failedToStart with Kueue's message and the token (once per token, also when
// asked again), leaves the Job suspended and untouched, and keeps the Warning Event.
func TestReleaseOfAConflictingAdmissionReportsFailedToStart(t *testing.T) {
	r, job, state, l, events := releaseReconciler(t,
		[]any{map[string]any{"name": "main", "labels": map[string]any{"app": "other"}}})
	const want = `failedToStart uid/1 in admission check "provisioning": invalid admission check PodSetUpdate: conflict for labels: conflict for key=app, value1=train, value2=other`
	for attempt := 1; attempt <= 2; attempt++ {
		if _, err := r.release(context.Background(), &BatchJob{Job: job}, state); err != nil {
			t.Fatalf("attempt %d: %v", attempt, err)
		}
		if got := reportsOf(t, l); len(got) != 1 || got[0] != want {
			t.Fatalf("attempt %d: reports %q, want only %q", attempt, got, want)
		}
		select {
		case e := <-events.Events:
			if !strings.HasPrefix(e, "Warning FailedToStart ") || !strings.Contains(e, "conflict for key=app") {
				t.Fatalf("attempt %d: event %q", attempt, e)
			}
		default:
			t.Fatalf("attempt %d: no Warning Event", attempt)
		}
	}
	stored := &batchv1.Job{}
	if err := r.Client.Get(context.Background(), client.ObjectKeyFromObject(job), stored); err != nil {
		t.Fatal(err)
	}
	if stored.Spec.Suspend == nil || !*stored.Spec.Suspend || stored.Spec.Template.Labels["app"] != "train" ||
		stored.Annotations[FencingTokenAnnotation] != "" {
		t.Fatalf("the Job changed: suspend %v, labels %v, annotations %v",
			stored.Spec.Suspend, stored.Spec.Template.Labels, stored.Annotations)
	}
}

// Without a conflict the release goes on as before: `pods released` (no message), then the Job
// runs under the token.
func TestReleaseWithoutConflictReportsReleased(t *testing.T) {
	r, job, state, l, _ := releaseReconciler(t,
		[]any{map[string]any{"name": "main", "labels": map[string]any{"pool": "a"}}})
	if _, err := r.release(context.Background(), &BatchJob{Job: job}, state); err != nil {
		t.Fatal(err)
	}
	if got := reportsOf(t, l); len(got) != 1 || got[0] != "released uid/1 " {
		t.Fatalf("reports %q", got)
	}
	if l.reports[0].HasMessage_() {
		t.Fatal("a report without a message carries one (its canonical bytes changed)")
	}
	stored := &batchv1.Job{}
	if err := r.Client.Get(context.Background(), client.ObjectKeyFromObject(job), stored); err != nil {
		t.Fatal(err)
	}
	if stored.Spec.Suspend == nil || *stored.Spec.Suspend || stored.Spec.Template.Annotations[FencingTokenAnnotation] != "uid/1" {
		t.Fatalf("not released: suspend %v, template annotations %v", stored.Spec.Suspend, stored.Spec.Template.Annotations)
	}
}

// A Job that completed while the ledger evicted it: the Job controller never adds a Suspended
// condition to a finished Job, so the bridge does not wait for one. While one of its pods still
// runs, nothing is reported; once all are Succeeded or Failed, `pods finished` with the evicted
// admission's token (the load test saw such workloads left Evicting for good).
func TestEvictedJobThatFinishedReportsFinished(t *testing.T) {
	r, job, state, l, _ := releaseReconciler(t, nil)
	state.Phase = ledger.PhaseEvicting
	state.EvictingToken = "uid/1"
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	if err := r.Client.Status().Update(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	stored := &batchv1.Job{}
	if err := r.Client.Get(context.Background(), client.ObjectKeyFromObject(job), stored); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train-0",
		Labels: map[string]string{JobControllerUIDLabel: string(stored.UID)}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if err := r.Client.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	r.APIReader = r.Client
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(job)}
	if _, err := r.evicting(context.Background(), req, state); err != nil {
		t.Fatal(err)
	}
	if got := reportsOf(t, l); len(got) != 0 {
		t.Fatalf("reported while a pod runs: %q", got)
	}
	pod.Status.Phase = corev1.PodSucceeded
	if err := r.Client.Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if _, err := r.evicting(context.Background(), req, state); err != nil {
		t.Fatal(err)
	}
	if got := reportsOf(t, l); len(got) != 1 || got[0] != "finished uid/1 " {
		t.Fatalf("reports %q, want finished with the evicted token", got)
	}
}

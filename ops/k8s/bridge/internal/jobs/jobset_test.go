package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"admission-ledger/bridge/internal/ledger"
)

// A JobSet of a leader (1 pod) and workers (2 replicas of a 3-pod Job, completions 2) and an
// elastic replicated job (1 replica of 4 pods).
func testJobSet() *JobSet {
	rj := func(name string, replicas int32, parallelism, completions *int32) jobsetapi.ReplicatedJob {
		return jobsetapi.ReplicatedJob{Name: name, Replicas: replicas,
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Parallelism: parallelism,
				Completions: completions, Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"role": name}},
					Spec:       corev1.PodSpec{NodeSelector: map[string]string{"tier": "gold"}}}}}}
	}
	return &JobSet{JobSet: &jobsetapi.JobSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train", UID: "js-uid"},
		Spec: jobsetapi.JobSetSpec{Suspend: ptr.To(true), ReplicatedJobs: []jobsetapi.ReplicatedJob{
			rj("leader", 1, nil, nil), rj("workers", 2, ptr.To(int32(3)), ptr.To(int32(2))),
			rj("elastic", 1, ptr.To(int32(4)), nil)}}}}
}

func TestJobSetPodSetsFollowKueue(t *testing.T) {
	js := testJobSet()
	var got []string
	for _, ps := range js.PodSets() {
		got = append(got, ps.Name+"="+string(rune('0'+ps.Count)))
	}
	if strings.Join(got, " ") != "leader=1 workers=4 elastic=4" {
		t.Fatalf("pod sets %v", got)
	}
	// A whole admission changes nothing; a partial one cannot run (the counts are immutable).
	if err := js.Admit(1, 4); err != nil {
		t.Fatal(err)
	}
	if p := js.JobSet.Spec.ReplicatedJobs[1].Template.Spec.Parallelism; *p != 3 {
		t.Fatalf("workers parallelism changed to %d", *p)
	}
	if err := js.Admit(2, 2); err == nil || !strings.Contains(err.Error(), "admitted with 2 of its 4 pods") {
		t.Fatalf("a partial admission: %v", err)
	}
}

func TestJobSetFinishedAndPodsReadyFromItsStatus(t *testing.T) {
	js := testJobSet()
	if js.Finished() || js.PodsReady(nil) {
		t.Fatal("a new JobSet is finished or ready")
	}
	js.JobSet.Status.ReplicatedJobsStatus = []jobsetapi.ReplicatedJobStatus{
		{Name: "leader", Ready: 1}, {Name: "workers", Ready: 1, Succeeded: 1}, {Name: "elastic"}}
	if js.PodsReady(nil) {
		t.Fatal("ready with the elastic Job not ready")
	}
	js.JobSet.Status.ReplicatedJobsStatus[2].Ready = 1
	if !js.PodsReady(nil) {
		t.Fatal("not ready with every Job ready or succeeded")
	}
	js.JobSet.Status.Conditions = []metav1.Condition{{Type: string(jobsetapi.JobSetCompleted), Status: metav1.ConditionTrue}}
	if !js.Finished() {
		t.Fatal("a Completed JobSet is not finished")
	}
}

// The admission is applied per pod set: each pod set's flavor's node labels, the token on every
// pod template and on the JobSet; the original settings are recorded as a list by pod set, and a
// second admission starts from them; a partial one cannot start.
func TestJobSetAdmissionPerPodSet(t *testing.T) {
	flavor := func(name, label string) *unstructured.Unstructured {
		f := &unstructured.Unstructured{}
		f.SetGroupVersionKind(schema.GroupVersionKind{Group: KueueGroup, Version: KueueVersion, Kind: "ResourceFlavor"})
		f.SetName(name)
		f.Object["spec"] = map[string]any{"nodeLabels": map[string]any{"gpu": label}}
		return f
	}
	r := &Reconciler{Kind: JobSetKind, Client: fake.NewClientBuilder().
		WithObjects(flavor("cpu", "none"), flavor("h100", "h100"), flavor("a100", "a100")).Build()}
	assignment := func(ps, f string, count int32) ledger.PodSetAssignment {
		return ledger.PodSetAssignment{Name: ps, Count: count, Flavors: map[string]string{"cpu": f}}
	}
	state := &LedgerWorkload{Namespace: "ml", Name: "jobset-train", PodSets: []ledger.PodSetAssignment{
		assignment("leader", "cpu", 1), assignment("workers", "h100", 4), assignment("elastic", "h100", 4)}}
	js := testJobSet()
	if _, err := r.applyAdmission(context.Background(), js, state, "js-uid/1"); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"leader": "none", "workers": "h100", "elastic": "h100"}
	for _, ps := range js.PodSets() {
		if ps.Template.Spec.NodeSelector["gpu"] != want[ps.Name] || ps.Template.Spec.NodeSelector["tier"] != "gold" {
			t.Fatalf("%s: nodeSelector %v", ps.Name, ps.Template.Spec.NodeSelector)
		}
		if ps.Template.Annotations[FencingTokenAnnotation] != "js-uid/1" {
			t.Fatalf("%s: no token on the pod template", ps.Name)
		}
	}
	if js.JobSet.Annotations[FencingTokenAnnotation] != "js-uid/1" {
		t.Fatal("no token on the JobSet")
	}
	var recorded []originalPodSet
	if err := json.Unmarshal([]byte(js.JobSet.Annotations[OriginalPodSetAnnotation]), &recorded); err != nil ||
		len(recorded) != 3 || recorded[1].Name != "workers" || *recorded[2].Parallelism != 4 {
		t.Fatalf("original pod sets recorded as %s (%v)", js.JobSet.Annotations[OriginalPodSetAnnotation], err)
	}
	// Readmitted on a100: the workers leave h100.
	state.PodSets = []ledger.PodSetAssignment{assignment("leader", "cpu", 1),
		assignment("workers", "a100", 4), assignment("elastic", "a100", 4)}
	if _, err := r.applyAdmission(context.Background(), js, state, "js-uid/2"); err != nil {
		t.Fatal(err)
	}
	if sel := js.JobSet.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.NodeSelector; sel["gpu"] != "a100" {
		t.Fatalf("workers nodeSelector %v after the second admission", sel)
	}
	// An admission of fewer pods than asked for cannot start: failedToStart, not a release.
	state.PodSets = []ledger.PodSetAssignment{assignment("leader", "cpu", 1),
		assignment("workers", "a100", 2), assignment("elastic", "a100", 4)}
	_, err := r.applyAdmission(context.Background(), js, state, "js-uid/3")
	var cannot *cannotStart
	if !errors.As(err, &cannot) {
		t.Fatalf("a partial admission applied: %v", err)
	}
}

func TestKindOfWorkload(t *testing.T) {
	for name, want := range map[string]string{"job-a": "Job/a", "jobset-a": "JobSet/a",
		"job-set-x": "Job/set-x", "jobsetx": "", "job-": "", "other-a": ""} {
		kind, obj := KindOfWorkload(name)
		got := ""
		if kind != nil {
			got = kind.Name + "/" + obj
		}
		if got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}

// The webhook suspends a labelled JobSet as it does a Job.
func TestWebhookSuspendsALabelledJobSet(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := jobsetapi.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	js := testJobSet().JobSet
	js.TypeMeta = metav1.TypeMeta{APIVersion: jobsetapi.GroupVersion.String(), Kind: "JobSet"}
	js.Spec.Suspend = nil
	js.Labels = map[string]string{QueueNameLabel: "gpus"}
	resp := admitRequest(t, scheme, js)
	if !resp.Allowed || len(resp.Patches) != 1 || resp.Patches[0].Path != "/spec/suspend" {
		t.Fatalf("response %+v", resp)
	}
	js.Labels = nil
	if resp := admitRequest(t, scheme, js); !resp.Allowed || len(resp.Patches) != 0 {
		t.Fatalf("an unlabelled JobSet was changed: %+v", resp)
	}
}

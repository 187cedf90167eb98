package jobs

import (
	"context"
	"encoding/json"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"admission-ledger/bridge/internal/ledger"
)

// Kueue's names, computed independently (Python's hashlib over Kueue's getHash input).
func TestKueueWorkloadNamesAreKueues(t *testing.T) {
	got := BatchJobKind.KueueWorkloadNames("sample-job", "5b1d0e42-0000-4000-8000-000000000001")
	if len(got) != 1 || got[0] != "job-sample-job-96f32" {
		t.Fatalf("Job: %v", got)
	}
	if got := JobSetKind.KueueWorkloadNames("js", "u-2"); got[0] != "jobset-js-835f1" {
		t.Fatalf("JobSet: %v", got)
	}
	for name, want := range map[string]string{"job-sample-job-96f32": "job-sample-job",
		"job-sample-job": "", "job-x-9G3f2": "", "job-sample": ""} {
		base, ok := kueueBaseName(name)
		if base != want || ok != (want != "") {
			t.Errorf("kueueBaseName(%q) = %q, %v", name, base, ok)
		}
	}
}

func workloadObject(name, queue, ownerName, ownerUID string,
	status map[string]any) *unstructured.Unstructured {
	wl := newWorkloadObject()
	wl.SetNamespace("default")
	wl.SetName(name)
	wl.SetUID(types.UID("wl-uid-" + name))
	if ownerName != "" {
		controller := true
		wl.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job",
			Name: ownerName, UID: types.UID(ownerUID), Controller: &controller}})
	}
	wl.Object["spec"] = map[string]any{"queueName": queue}
	if status != nil {
		wl.Object["status"] = status
	}
	return wl
}

// Adoptable: Kueue's (its name for a Job's Workload, or a creator's Workload with a status),
// not the bridge's own nor one without a queue.
func TestAdoptableIsWhatKueueMade(t *testing.T) {
	admitted := map[string]any{"admission": map[string]any{"clusterQueue": "cq"}}
	cases := []struct {
		wl   *unstructured.Unstructured
		want bool
	}{
		{workloadObject("job-a-12345", "lq", "a", "job-uid", nil), true},
		{workloadObject("job-a", "lq", "a", "job-uid", nil), false},
		{workloadObject("job-a-12345", "", "a", "job-uid", nil), false},
		{workloadObject("mine", "lq", "", "", admitted), true},
		{workloadObject("mine", "lq", "", "", nil), false},
		{workloadObject("job-a-12345", "lq", "a", "job-uid", map[string]any{"conditions": []any{
			map[string]any{"type": "Finished", "status": "True"}}}), false},
	}
	for i, c := range cases {
		if got := adoptable(c.wl); got != c.want {
			t.Errorf("case %d (%s): adoptable %v, want %v", i, c.wl.GetName(), got, c.want)
		}
	}
}

// The ledger's workload of an adopted Job carries the Job's uid; the bookkeeping goes.
func TestImportManifestTakesTheJobsUID(t *testing.T) {
	wl := workloadObject("job-a-12345", "lq", "a", "job-uid", map[string]any{"x": int64(1)})
	wl.SetResourceVersion("7")
	m := ImportManifest(wl)
	metadata := m["metadata"].(map[string]any)
	if metadata["uid"] != "job-uid" || metadata["resourceVersion"] != nil ||
		metadata["ownerReferences"] != nil {
		t.Fatalf("metadata %v", metadata)
	}
	if wl.GetUID() != "wl-uid-job-a-12345" {
		t.Fatalf("the object itself changed: %s", wl.GetUID())
	}
}

// adoptLedger: knows the names in known; records the import manifests.
type adoptLedger struct {
	known   map[string]bool
	imports []string
	applies int
}

func (l *adoptLedger) RecordManifest(_ context.Context, _, mode, manifest string) (
	ledger.Outcome, error) {
	if mode == "apply" {
		l.applies++
		return ledger.Outcome{Sequences: []uint64{1}, Unchanged: []bool{true}}, nil
	}
	var list struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal([]byte(manifest), &list); err != nil {
		return ledger.Outcome{}, err
	}
	out := ledger.Outcome{}
	for _, item := range list.Items {
		name := item["metadata"].(map[string]any)["name"].(string)
		l.imports = append(l.imports, name)
		l.known["default/"+name] = true
		out.Sequences = append(out.Sequences, uint64(len(l.imports)))
		out.Unchanged = append(out.Unchanged, false)
	}
	return out, nil
}

func (l *adoptLedger) WorkloadStates(_ context.Context, names []string) (
	map[string]*ledger.WorkloadState, uint64, error) {
	out := map[string]*ledger.WorkloadState{}
	for _, n := range names {
		if l.known[n] {
			out[n] = &ledger.WorkloadState{}
		}
	}
	return out, 0, nil
}

// A first adoption imports what the ledger does not know; a second imports nothing.
func TestAdoptImportsOnce(t *testing.T) {
	c := fake.NewClientBuilder().WithObjects(
		workloadObject("job-a-12345", "lq", "a", "job-uid", nil),
		workloadObject("job-b", "lq", "b", "job-uid", nil),
		workloadObject("job-c-abcde", "lq", "c", "job-uid", nil)).Build()
	l := &adoptLedger{known: map[string]bool{"default/job-c-abcde": true}}
	n, err := Adopt(context.Background(), c, l)
	if err != nil || n != 1 || len(l.imports) != 1 || l.imports[0] != "job-a-12345" {
		t.Fatalf("first: %d %v %v", n, err, l.imports)
	}
	n, err = Adopt(context.Background(), c, l)
	if err != nil || n != 0 || len(l.imports) != 1 {
		t.Fatalf("second: %d %v %v", n, err, l.imports)
	}
}

// An adopted Job's first release starts from Kueue's Workload's pod set, not from the node
// selector Kueue's admission put on its template.
func TestOriginalOfAnAdoptedJobIsKueuesPodSet(t *testing.T) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default", UID: "job-uid"}}
	job.Spec.Template.Labels = map[string]string{"job-name": "a"}
	job.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "kueue-flavor", "own": "x"}
	wl := workloadObject("job-a-12345", "lq", "a", "job-uid", nil)
	wl.Object["spec"].(map[string]any)["podSets"] = []any{map[string]any{"name": "main",
		"count": int64(1), "template": map[string]any{"spec": map[string]any{
			"nodeSelector": map[string]any{"own": "x"}}}}}
	r := &Reconciler{Kind: BatchJobKind}
	j := &BatchJob{Job: job}
	if err := r.originalFromKueue(j, wl); err != nil {
		t.Fatal(err)
	}
	if err := startFromOriginal(j); err != nil {
		t.Fatal(err)
	}
	if got := job.Spec.Template.Spec.NodeSelector; len(got) != 1 || got["own"] != "x" {
		t.Fatalf("node selector %v", got)
	}
	if job.Spec.Template.Labels["job-name"] != "a" {
		t.Fatalf("labels %v", job.Spec.Template.Labels)
	}
	// Ours: the template is the original.
	job.Annotations = nil
	job.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "p"}
	if err := r.originalFromKueue(j, workloadObject("job-a", "lq", "a", "job-uid", nil)); err != nil ||
		job.Annotations[OriginalPodSetAnnotation] != "" {
		t.Fatalf("%v %v", err, job.Annotations)
	}
}

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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
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
	state := &LedgerWorkload{Namespace: "ml", Name: "job-train", Status: map[string]any{
		"admission": map[string]any{"clusterQueue": "gpu", "podSetAssignments": []any{map[string]any{
			"name": "main", "count": int64(1), "flavors": map[string]any{"nvidia.com/gpu": "h100"}}}},
		"admissionChecks": []any{map[string]any{"name": "provisioning", "state": "Ready", "podSetUpdates": updates}}}}
	r := &Reconciler{Client: fake.NewClientBuilder().WithObjects(flavor).Build()}
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
	if _, err := r.applyAdmission(context.Background(), job, state, "uid/1"); err != nil {
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
	if _, err := r.applyAdmission(context.Background(), job, next, "uid/2"); err != nil {
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
	_, err := r.applyAdmission(context.Background(), job, state, "uid/1")
	var conflict *podSetUpdateConflict
	if !errors.As(err, &conflict) || !strings.Contains(err.Error(),
		`in admission check "provisioning": invalid admission check PodSetUpdate: conflict for labels: conflict for key=app, value1=train, value2=other`) {
		t.Fatalf("err %v", err)
	}
}

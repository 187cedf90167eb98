package jobs

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The cache keeps a Workload's managed fields only while it has admission checks.
func TestSlimWorkloadDropsManagedFieldsOfAWorkloadWithoutChecks(t *testing.T) {
	managed := []any{map[string]any{"manager": "kueue", "operation": "Update"}}
	without := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "a", "managedFields": managed},
		"status":   map[string]any{"admissionChecks": []any{}}}}
	with := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "b", "managedFields": managed},
		"status":   map[string]any{"admissionChecks": []any{map[string]any{"name": "scan", "state": "Pending"}}}}}
	for _, c := range []struct {
		obj  *unstructured.Unstructured
		keep bool
	}{{without, false}, {with, true}} {
		got, err := SlimWorkload(c.obj)
		if err != nil {
			t.Fatal(err)
		}
		_, kept, _ := unstructured.NestedSlice(got.(*unstructured.Unstructured).Object, "metadata", "managedFields")
		if kept != c.keep || got.(*unstructured.Unstructured).GetName() != c.obj.GetName() {
			t.Errorf("%s: managed fields kept %v, want %v", c.obj.GetName(), kept, c.keep)
		}
	}
	if got, _ := SlimWorkload("not an object"); got != "not an object" {
		t.Errorf("another value was changed: %v", got)
	}
}

package podsetupdates

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kueue's PodSetInfo.Merge: new keys are added, equal values are no conflict, a toleration
// equal to one present (an empty operator being Equal) is added once.
func TestMergeAddsAndKeepsEqualValues(t *testing.T) {
	meta := metav1.ObjectMeta{Labels: map[string]string{"app": "x", "pool": "a"}}
	spec := corev1.PodSpec{NodeSelector: map[string]string{"gpu": "h100"},
		Tolerations: []corev1.Toleration{{Key: "reserved", Value: "a", Effect: corev1.TaintEffectNoSchedule}}}
	err := Merge(&meta, &spec, PodSetUpdate{Name: "main",
		Labels: map[string]string{"pool": "a", "team": "ml"}, Annotations: map[string]string{"note": "n"},
		NodeSelector: map[string]string{"gpu": "h100", "zone": "z1"},
		Tolerations: []corev1.Toleration{{Key: "reserved", Operator: corev1.TolerationOpEqual, Value: "a", Effect: corev1.TaintEffectNoSchedule},
			{Key: "spot", Operator: corev1.TolerationOpExists}}})
	if err != nil {
		t.Fatal(err)
	}
	if meta.Labels["team"] != "ml" || meta.Annotations["note"] != "n" || spec.NodeSelector["zone"] != "z1" {
		t.Fatalf("merged labels %v annotations %v nodeSelector %v", meta.Labels, meta.Annotations, spec.NodeSelector)
	}
	if len(spec.Tolerations) != 2 || spec.Tolerations[1].Key != "spot" {
		t.Fatalf("tolerations %v, want reserved once and spot", spec.Tolerations)
	}
}

// Another value for a key the template holds is a conflict in Kueue's words, and nothing changes.
func TestMergeConflictChangesNothing(t *testing.T) {
	meta := metav1.ObjectMeta{Labels: map[string]string{"pool": "a"}}
	spec := corev1.PodSpec{NodeSelector: map[string]string{"zone": "z1"}}
	err := Merge(&meta, &spec, PodSetUpdate{Name: "main", Labels: map[string]string{"team": "ml"},
		NodeSelector: map[string]string{"zone": "z2"}})
	want := "invalid admission check PodSetUpdate: conflict for nodeSelector: conflict for key=zone, value1=z1, value2=z2"
	if err == nil || err.Error() != want {
		t.Fatalf("err %v, want %q", err, want)
	}
	if _, added := meta.Labels["team"]; added {
		t.Fatalf("a conflicting update changed the labels: %v", meta.Labels)
	}
	err = Merge(&meta, &spec, PodSetUpdate{Name: "main", Labels: map[string]string{"pool": "b"}})
	if err == nil || !strings.Contains(err.Error(), "conflict for labels: conflict for key=pool, value1=a, value2=b") {
		t.Fatalf("err %v", err)
	}
}

func TestFromEntryReadsKueuesShapeAndRefusesTolerationSeconds(t *testing.T) {
	entry := map[string]any{"podSetUpdates": []any{map[string]any{"name": "main",
		"annotations": map[string]any{"a": "1"},
		"tolerations": []any{map[string]any{"key": "k", "operator": "Exists"}}}}}
	updates, err := FromEntry(entry)
	if err != nil || len(updates) != 1 || updates[0].Annotations["a"] != "1" || updates[0].Tolerations[0].Key != "k" {
		t.Fatalf("FromEntry = %+v, %v", updates, err)
	}
	if Key(updates) != `[{"name":"main","annotations":{"a":"1"},"tolerations":[{"key":"k","operator":"Exists"}]}]` {
		t.Fatalf("Key = %s", Key(updates))
	}
	entry["podSetUpdates"].([]any)[0].(map[string]any)["tolerations"] = []any{
		map[string]any{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": int64(5)}}
	if _, err := FromEntry(entry); err == nil || !strings.Contains(err.Error(), "podSetUpdates[0].tolerations[0].tolerationSeconds") {
		t.Fatalf("err %v", err)
	}
	if updates, err := FromEntry(map[string]any{}); err != nil || updates != nil {
		t.Fatalf("no podSetUpdates: %v, %v", updates, err)
	}
}

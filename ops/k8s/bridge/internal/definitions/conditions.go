package definitions

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RecordedCondition is the condition the bridge keeps in the status of a definition: True once
// the ledger holds the object as it is (reason ReasonRecorded, the sequence in the message),
// False with reason ReasonLedgerRefused and the ledger's message when the ledger refused it. The
// queues' other conditions are the ledger's (the status writer copies them and keeps this one).
const (
	RecordedCondition   = "Recorded"
	ReasonRecorded      = "Recorded"
	ReasonLedgerRefused = "LedgerRefused"
)

// conditionKinds have a status subresource in our CRDs (ops/k8s/crds/). A ResourceFlavor (as
// Kueue's) and a WorkloadPriorityClass have no status: their refusals are Events only.
var conditionKinds = map[string]bool{"ClusterQueue": true, "Cohort": true, "LocalQueue": true,
	"AdmissionCheck": true, BudgetPolicyKind: true}

// recorded is the condition's message for an object the ledger holds: the sequence that
// recorded it, or none when it was identical to the ledger's definition already.
func recorded(sequence uint64) string {
	if sequence == 0 {
		return "the admission ledger holds this definition"
	}
	return "recorded in the admission ledger at sequence " + strconv.FormatUint(sequence, 10)
}

// setRecordedCondition writes the Recorded condition (status True or False, reason, message) into
// obj's status when it differs from the one there, keeping every other condition. A conflict
// (the status writer or the user wrote meanwhile) is returned: the reconcile is retried.
func setRecordedCondition(ctx context.Context, c client.Client, obj *unstructured.Unstructured,
	status metav1.ConditionStatus, reason, message string) error {
	if !conditionKinds[obj.GetKind()] {
		return nil
	}
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	want := map[string]any{
		"type":               RecordedCondition,
		"status":             string(status),
		"reason":             reason,
		"message":            message,
		"observedGeneration": obj.GetGeneration(),
	}
	index := -1
	for i, existing := range conditions {
		if m, ok := existing.(map[string]any); ok && m["type"] == RecordedCondition {
			index = i
			break
		}
	}
	if index >= 0 {
		old := conditions[index].(map[string]any)
		// The transition time is the last change of status, as meta.SetStatusCondition keeps it.
		want["lastTransitionTime"] = old["lastTransitionTime"]
		if old["status"] != want["status"] || old["lastTransitionTime"] == nil {
			want["lastTransitionTime"] = time.Now().UTC().Format(time.RFC3339)
		}
		if equality.Semantic.DeepEqual(runtime.DeepCopyJSONValue(old), runtime.DeepCopyJSONValue(want)) {
			return nil
		}
		conditions[index] = want
	} else {
		want["lastTransitionTime"] = time.Now().UTC().Format(time.RFC3339)
		conditions = append(conditions, want)
	}
	updated := obj.DeepCopy()
	if err := unstructured.SetNestedSlice(updated.Object, conditions, "status", "conditions"); err != nil {
		return err
	}
	if err := c.Status().Update(ctx, updated); err != nil {
		return fmt.Errorf("writing the %s condition of %s %s: %w", RecordedCondition, obj.GetKind(),
			obj.GetName(), err)
	}
	return nil
}

// keepRecordedCondition returns the ledger's status of a queue with the Recorded condition of
// current (the object's status in the cluster) added, so that the status writer does not drop it.
func keepRecordedCondition(ledgerStatus, current map[string]any) map[string]any {
	conditions, _, _ := unstructured.NestedSlice(current, "conditions")
	for _, c := range conditions {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != RecordedCondition {
			continue
		}
		out := runtime.DeepCopyJSON(ledgerStatus)
		own, _, _ := unstructured.NestedSlice(out, "conditions")
		filtered := own[:0]
		for _, o := range own {
			if om, ok := o.(map[string]any); !ok || om["type"] != RecordedCondition {
				filtered = append(filtered, o)
			}
		}
		_ = unstructured.SetNestedSlice(out, append(filtered, runtime.DeepCopyJSONValue(m)), "conditions")
		return out
	}
	return ledgerStatus
}

// withRecordedCondition returns the ledger's status of a queue with the condition Recorded True
// at sequence (its transition time kept from current's while it was True already).
func withRecordedCondition(ledgerStatus, current map[string]any, generation int64, sequence uint64) map[string]any {
	want := map[string]any{
		"type":               RecordedCondition,
		"status":             string(metav1.ConditionTrue),
		"reason":             ReasonRecorded,
		"message":            recorded(sequence),
		"observedGeneration": generation,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}
	conditions, _, _ := unstructured.NestedSlice(current, "conditions")
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok && m["type"] == RecordedCondition && m["status"] == want["status"] &&
			m["lastTransitionTime"] != nil {
			want["lastTransitionTime"] = m["lastTransitionTime"]
		}
	}
	return keepRecordedCondition(ledgerStatus, map[string]any{"conditions": []any{want}})
}

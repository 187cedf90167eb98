package definitions

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"admission-ledger/bridge/internal/conversion"
	"admission-ledger/bridge/internal/ledger"
)

// parse reads JSON objects as the API server's client does (integers as int64).
func parse(t *testing.T, texts ...string) []map[string]any {
	t.Helper()
	out := make([]map[string]any, len(texts))
	for i, text := range texts {
		if err := utiljson.Unmarshal([]byte(text), &out[i]); err != nil {
			t.Fatalf("bad test JSON %s: %v", text, err)
		}
	}
	return out
}

// Manifest forwards v1beta2: an object stored with v1beta1's spelling (before the CRDs
// converted) is normalized, the conversion's stash and kubectl's last-applied annotation stay
// out, and the cached object is not touched.
func TestManifest(t *testing.T) {
	obj := &unstructured.Unstructured{Object: parse(t, `{"apiVersion":"kueue.x-k8s.io/v1beta2",
		"kind":"ClusterQueue","metadata":{"name":"a","uid":"u","resourceVersion":"7","annotations":{
		"`+conversion.StashAnnotation+`":"{}","kubectl.kubernetes.io/last-applied-configuration":"{}"}},
		"spec":{"cohort":"research"},"status":{"pendingWorkloads":1}}`)[0]}
	got, err := Manifest(obj)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ClusterQueue","metadata":{"name":"a","uid":"u"},"spec":{"cohortName":"research"}}`
	if got != want {
		t.Errorf("Manifest:\n got %s\nwant %s", got, want)
	}
	if _, found, _ := unstructured.NestedString(obj.Object, "spec", "cohort"); !found {
		t.Errorf("Manifest changed the object it was given: %v", obj.Object)
	}
}

// The status writer keeps the bridge's Recorded condition when it copies the ledger's status.
func TestKeepRecordedCondition(t *testing.T) {
	parsed := parse(t, `{"pendingWorkloads":2,"conditions":[{"type":"Active","status":"True"}]}`,
		`{"pendingWorkloads":1,"conditions":[{"type":"Active","status":"False"},
		{"type":"Recorded","status":"True","reason":"Recorded"}]}`, `{}`)
	ledger, current := parsed[0], parsed[1]
	got := keepRecordedCondition(ledger, current)
	conditions, _, _ := unstructured.NestedSlice(got, "conditions")
	if len(conditions) != 2 || conditions[0].(map[string]any)["status"] != "True" ||
		conditions[1].(map[string]any)["type"] != RecordedCondition {
		t.Errorf("conditions %v", conditions)
	}
	if n, _, _ := unstructured.NestedInt64(got, "pendingWorkloads"); n != 2 {
		t.Errorf("pendingWorkloads %d, want the ledger's 2", n)
	}
	// Without a Recorded condition in the cluster: the ledger's status as it is.
	if got := keepRecordedCondition(ledger, parsed[2]); len(got["conditions"].([]any)) != 1 {
		t.Errorf("conditions %v", got["conditions"])
	}
}

// A deletion is kept and retried (InUse) for the ledger's FailedPrecondition refusal, whatever
// its text; an InvalidArgument refusal lets the object go, even if its text says "in use by".
func TestInUseDecidesByCode(t *testing.T) {
	for _, tc := range []struct {
		refused ledger.Refused
		want    bool
	}{
		{ledger.Refused{Code: ledger.CodeFailedPrecondition, Message: "cannot delete ResourceFlavor " +
			"'default-flavor': in use by ClusterQueue cluster-queue; nothing recorded"}, true},
		{ledger.Refused{Code: ledger.CodeFailedPrecondition, Message: "cannot delete AdmissionCheck " +
			"'scan': the reservations of team/a wait on it; nothing recorded"}, true},
		{ledger.Refused{Code: ledger.CodeInvalidArgument, Message: "cannot delete ClusterQueue " +
			"'x': in use by ClusterQueue y; wait on it"}, false},
		{ledger.Refused{Code: ledger.CodeNoSpace, Message: "the ledger's disk is full"}, false},
	} {
		if got := InUse(&tc.refused); got != tc.want {
			t.Errorf("InUse(code %d, %q) = %v, want %v", tc.refused.Code, tc.refused.Message, got, tc.want)
		}
	}
}

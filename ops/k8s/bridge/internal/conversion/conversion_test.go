package conversion

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// object parses JSON as the webhook does (integers as int64).
func object(t *testing.T, text string) map[string]any {
	t.Helper()
	var obj map[string]any
	if err := utiljson.Unmarshal([]byte(text), &obj); err != nil {
		t.Fatalf("bad test JSON %s: %v", text, err)
	}
	return obj
}

func mustConvert(t *testing.T, obj map[string]any, to string) map[string]any {
	t.Helper()
	out, err := Convert(obj, to)
	if err != nil {
		t.Fatalf("Convert(%v, %s): %v", obj, to, err)
	}
	return out
}

func text(t *testing.T, obj map[string]any) string {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Each renamed field, both ways: the v1beta1 spelling becomes v1beta2's and back.
func TestRenamedFields(t *testing.T) {
	cases := []struct{ name, v1beta1, v1beta2 string }{
		{"ClusterQueue cohort",
			`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ClusterQueue","metadata":{"name":"a"},"spec":{"cohort":"research","queueingStrategy":"StrictFIFO"}}`,
			`{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ClusterQueue","metadata":{"name":"a"},"spec":{"cohortName":"research","queueingStrategy":"StrictFIFO"}}`},
		{"Cohort parentName (Kueue's v1beta1 spelling)",
			`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Cohort","metadata":{"name":"c"},"spec":{"parentName":"root"}}`,
			`{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"Cohort","metadata":{"name":"c"},"spec":{"parentName":"root"}}`},
		{"LocalQueue status",
			`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"LocalQueue","metadata":{"name":"q","namespace":"n"},"spec":{"clusterQueue":"a"},"status":{"flavorUsage":[{"name":"f"}],"pendingWorkloads":3}}`,
			`{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"LocalQueue","metadata":{"name":"q","namespace":"n"},"spec":{"clusterQueue":"a"},"status":{"flavorsUsage":[{"name":"f"}],"pendingWorkloads":3}}`},
		{"Workload WorkloadPriorityClass",
			`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"w"},"spec":{"queueName":"q","priorityClassName":"high","priorityClassSource":"kueue.x-k8s.io/workloadpriorityclass","priority":100},"status":{"accumulatedPastExexcutionTimeSeconds":12}}`,
			`{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"Workload","metadata":{"name":"w"},"spec":{"queueName":"q","priorityClassRef":{"group":"kueue.x-k8s.io","kind":"WorkloadPriorityClass","name":"high"},"priority":100},"status":{"accumulatedPastExecutionTimeSeconds":12}}`},
		{"Workload pod PriorityClass",
			`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"w"},"spec":{"priorityClassName":"system","priorityClassSource":"scheduling.k8s.io/priorityclass"}}`,
			`{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"Workload","metadata":{"name":"w"},"spec":{"priorityClassRef":{"group":"scheduling.k8s.io","kind":"PriorityClass","name":"system"}}}`},
		{"ResourceFlavor (same shape)",
			`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"f"},"spec":{"nodeLabels":{"a":"b"}}}`,
			`{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ResourceFlavor","metadata":{"name":"f"},"spec":{"nodeLabels":{"a":"b"}}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v1, v2 := object(t, c.v1beta1), object(t, c.v1beta2)
			if got := mustConvert(t, v1, V1beta2); !equality.Semantic.DeepEqual(got, v2) {
				t.Errorf("up:\n got %s\nwant %s", text(t, got), c.v1beta2)
			}
			if got := mustConvert(t, v2, V1beta1); !equality.Semantic.DeepEqual(got, v1) {
				t.Errorf("down:\n got %s\nwant %s", text(t, got), c.v1beta1)
			}
		})
	}
}

// What v1beta2 cannot say goes into the stash and comes back; v1beta2 readers see Kueue's
// conversion.
func TestStash(t *testing.T) {
	v1 := object(t, `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Cohort","metadata":{"name":"c","annotations":{"a":"b"}},"spec":{"parent":"root"}}`)
	v2 := mustConvert(t, v1, V1beta2)
	if p, _ := get(v2, "spec.parentName"); p != "root" {
		t.Errorf("v1beta2 parentName = %v, want root: %s", p, text(t, v2))
	}
	if _, ok := get(v2, "spec.parent"); ok {
		t.Errorf("v1beta2 kept spec.parent: %s", text(t, v2))
	}
	if s, _ := annotation(v2, StashAnnotation); s != `{"spec.parent":"root"}` {
		t.Errorf("stash = %q", s)
	}
	if back := mustConvert(t, v2, V1beta1); !equality.Semantic.DeepEqual(back, v1) {
		t.Errorf("round trip: %s", text(t, back))
	}
	// Changed in v1beta2 since: the stash no longer holds, the plain conversion wins.
	set(v2, "spec.parentName", "other")
	back := mustConvert(t, v2, V1beta1)
	want := object(t, `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Cohort","metadata":{"name":"c","annotations":{"a":"b"}},"spec":{"parentName":"other"}}`)
	if !equality.Semantic.DeepEqual(back, want) {
		t.Errorf("after a v1beta2 change: %s", text(t, back))
	}
	// A priority class name without a source: Kueue makes no reference; the stash keeps it.
	w1 := object(t, `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Workload","metadata":{"name":"w"},"spec":{"priorityClassName":"high","priorityClassSource":""}}`)
	w2 := mustConvert(t, w1, V1beta2)
	if spec, _ := get(w2, "spec"); !reflect.DeepEqual(spec, map[string]any{}) {
		t.Errorf("v1beta2 spec = %v, want {}", spec)
	}
	if back := mustConvert(t, w2, V1beta1); !equality.Semantic.DeepEqual(back, w1) {
		t.Errorf("round trip: %s", text(t, back))
	}
}

func TestConvertRefuses(t *testing.T) {
	for _, c := range []struct{ obj, to string }{
		{`{"apiVersion":"kueue.x-k8s.io/v1alpha1","kind":"Cohort"}`, V1beta2},
		{`{"apiVersion":"batch/v1","kind":"Job"}`, V1beta1},
		{`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Cohort"}`, "v2"},
	} {
		if _, err := Convert(object(t, c.obj), c.to); err == nil {
			t.Errorf("Convert(%s, %s) succeeded", c.obj, c.to)
		}
	}
}

// Normalize: an object stored as written before the CRDs converted, read as v1beta2.
func TestNormalize(t *testing.T) {
	obj := object(t, `{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ClusterQueue","metadata":{"name":"a"},"spec":{"cohort":"research"}}`)
	Normalize(obj)
	if text(t, obj) != `{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ClusterQueue","metadata":{"name":"a"},"spec":{"cohortName":"research"}}` {
		t.Errorf("normalized: %s", text(t, obj))
	}
}

// values a generated field may take: what users write and what they should not.
var values = []any{"", "root", "research", "kueue.x-k8s.io/workloadpriorityclass",
	"scheduling.k8s.io/priorityclass", "other/source", int64(0), int64(7), 1.5, true, nil,
	map[string]any{}, map[string]any{"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"},
	map[string]any{"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "system"},
	map[string]any{"group": "x", "kind": "y", "name": "z"},
	[]any{map[string]any{"name": "f", "resources": []any{}}}, []any{}}

// randomObject: a v1beta1 object of kind with every field the conversion knows (each owned
// path of every kind, so also the other kinds' fields) present or not, with any of values, and
// other fields, labels and annotations around them.
func randomObject(rng *rand.Rand, kind string) map[string]any {
	obj := map[string]any{"apiVersion": Group + "/" + V1beta1, "kind": kind,
		"metadata": map[string]any{"name": fmt.Sprintf("o%d", rng.Intn(100))}}
	var paths []string
	for _, r := range rules {
		paths = append(paths, r.owned...)
	}
	paths = append(paths, "spec.queueingStrategy", "spec.nodeLabels.zone", "status.pendingWorkloads",
		"spec.resourceGroups", "metadata.labels.team", "metadata.annotations.note", "value")
	if rng.Intn(4) == 0 {
		paths = append(paths, "metadata.annotations."+StashAnnotation)
	}
	for _, p := range paths {
		if rng.Intn(2) == 0 {
			continue
		}
		v := runtime.DeepCopyJSONValue(values[rng.Intn(len(values))])
		if strings.HasPrefix(p, "metadata.") && p != "metadata.name" {
			v = fmt.Sprint(v) // labels and annotations are strings
		}
		set(obj, p, v)
	}
	return obj
}

// v1beta1Only: the spellings v1beta2's CRDs refuse or do not have.
var v1beta1Only = map[string][]string{
	"ClusterQueue": {"spec.cohort"},
	"Cohort":       {"spec.parent"},
	"LocalQueue":   {"status.flavorUsage"},
	"Workload":     {"spec.priorityClassName", "spec.priorityClassSource", "status.accumulatedPastExexcutionTimeSeconds"},
}

// The round-trip property: for every kind, v1beta1 -> v1beta2 -> v1beta1 gives back the object
// as written, field for field (what StashAnnotation a v1beta1 object carries aside: ours, not
// the user's), and v1beta2 -> v1beta1 -> v1beta2 too for objects written in v1beta2.
func TestRoundTripProperty(t *testing.T) {
	rng := rand.New(rand.NewSource(18))
	kinds := append(Kinds(), "ResourceFlavor", "AdmissionCheck", "WorkloadPriorityClass")
	stashed := 0
	for i := 0; i < 20000; i++ {
		kind := kinds[rng.Intn(len(kinds))]
		v1 := randomObject(rng, kind)
		removeAnnotation(v1, StashAnnotation)
		v2 := mustConvert(t, v1, V1beta2)
		if _, ok := annotation(v2, StashAnnotation); ok {
			stashed++
		}
		if back := mustConvert(t, v2, V1beta1); !equality.Semantic.DeepEqual(back, v1) {
			t.Fatalf("v1beta1 round trip of %s:\n  in %s\n  v2 %s\n out %s", kind, text(t, v1), text(t, v2), text(t, back))
		}
		// The conversion does not touch its input.
		if again := mustConvert(t, v1, V1beta2); !equality.Semantic.DeepEqual(again, v2) {
			t.Fatalf("converting %s twice gave two answers", text(t, v1))
		}
		// An object written in v1beta2 (as v1beta2's CRD lets it be: without v1beta1's spellings).
		w2 := randomObject(rng, kind)
		w2["apiVersion"] = Group + "/" + V1beta2
		removeAnnotation(w2, StashAnnotation)
		for _, path := range v1beta1Only[kind] {
			remove(w2, path)
		}
		w1 := mustConvert(t, w2, V1beta1)
		if back := mustConvert(t, w1, V1beta2); !equality.Semantic.DeepEqual(back, w2) {
			t.Fatalf("v1beta2 round trip of %s:\n  in %s\n  v1 %s\n out %s", kind, text(t, w2), text(t, w1), text(t, back))
		}
	}
	if stashed == 0 {
		t.Errorf("no generated object needed the stash: the property did not cover it")
	}
}

// The webhook answers a ConversionReview as the API server sends it.
func TestWebhook(t *testing.T) {
	review := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u-1",
	"desiredAPIVersion":"kueue.x-k8s.io/v1beta2","objects":[
	{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ClusterQueue","metadata":{"name":"a","resourceVersion":"12"},"spec":{"cohort":"research","resourceGroups":[{"flavors":[{"name":"f","resources":[{"name":"cpu","nominalQuota":9}]}]}]}},
	{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ClusterQueue","metadata":{"name":"b"},"spec":{"cohortName":"x"}}]}}`
	rec := httptest.NewRecorder()
	Webhook{}.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, WebhookPath, bytes.NewBufferString(review)))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body.String())
	}
	var answer apiextensionsv1.ConversionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil || answer.Response == nil {
		t.Fatalf("not a review: %v %s", err, rec.Body.String())
	}
	if answer.Response.UID != "u-1" || answer.Response.Result.Status != "Success" || answer.Request != nil {
		t.Fatalf("response %+v", answer.Response)
	}
	want := []string{
		`{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ClusterQueue","metadata":{"name":"a","resourceVersion":"12"},"spec":{"cohortName":"research","resourceGroups":[{"flavors":[{"name":"f","resources":[{"name":"cpu","nominalQuota":9}]}]}]}}`,
		`{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ClusterQueue","metadata":{"name":"b"},"spec":{"cohortName":"x"}}`,
	}
	if len(answer.Response.ConvertedObjects) != len(want) {
		t.Fatalf("%d objects", len(answer.Response.ConvertedObjects))
	}
	for i, w := range want {
		if got := string(answer.Response.ConvertedObjects[i].Raw); got != w {
			t.Errorf("object %d:\n got %s\nwant %s", i, got, w)
		}
	}

	bad := strings.Replace(review, "kueue.x-k8s.io/v1beta2\",\"objects", "kueue.x-k8s.io/v9\",\"objects", 1)
	rec = httptest.NewRecorder()
	Webhook{}.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, WebhookPath, bytes.NewBufferString(bad)))
	if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil || answer.Response.Result.Status != "Failure" {
		t.Errorf("an unknown version: %s", rec.Body.String())
	}
	rec = httptest.NewRecorder()
	Webhook{}.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, WebhookPath, bytes.NewBufferString("{}")))
	if rec.Code != http.StatusBadRequest {
		t.Errorf("a review without a request: status %d", rec.Code)
	}
}

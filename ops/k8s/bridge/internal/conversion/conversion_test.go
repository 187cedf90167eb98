package conversion

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
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
		if p == "status.admission.podSetAssignments" && rng.Intn(4) != 0 {
			v = randomAssignments(rng, V1beta1)
		}
		if strings.HasPrefix(p, "metadata.") && p != "metadata.name" {
			v = fmt.Sprint(v) // labels and annotations are strings
		}
		set(obj, p, v)
	}
	return obj
}

// v1beta1Only: the spellings v1beta2's CRDs refuse or do not have (a topology assignment's
// domains: randomAssignments makes v1beta2 ones).
var v1beta1Only = map[string][]string{
	"ClusterQueue": {"spec.cohort"},
	"Cohort":       {"spec.parent"},
	"LocalQueue":   {"status.flavorUsage"},
	"Workload":     {"spec.priorityClassName", "spec.priorityClassSource", "status.accumulatedPastExexcutionTimeSeconds"},
}

// randomAssignments: a podSetAssignments list of 1 to 3 entries, each with a topology assignment
// well formed in version (v1beta1 domains, or v1beta2 slices in any of the encodings: one or
// more slices, universal or individual values with or without a prefix and suffix, universal or
// individual pod counts), or one that is not (a count that is no integer, a field of the other
// version, a missing field, a value of the wrong type), or none.
func randomAssignments(rng *rand.Rand, version string) []any {
	pick := func(options ...string) string { return options[rng.Intn(len(options))] }
	list := []any{}
	for i := range 1 + rng.Intn(3) {
		psa := map[string]any{"name": fmt.Sprintf("ps%d", i), "count": int64(rng.Intn(5))}
		levels := []any{}
		for range 1 + rng.Intn(3) {
			levels = append(levels, pick("cloud.com/block", "cloud.com/rack", "kubernetes.io/hostname"))
		}
		ta := map[string]any{"levels": levels}
		if version == V1beta1 {
			domains := []any{}
			for range rng.Intn(4) {
				values := []any{}
				for range levels {
					values = append(values, pick("block-1", "block-2", "rack-1", "rack-12", "b-1-rack-1", "x", "xx", ""))
				}
				domains = append(domains, map[string]any{"values": values, "count": int64(1 + rng.Intn(3))})
			}
			ta["domains"] = domains
		} else {
			slices := []any{}
			for range rng.Intn(3) {
				n := 1 + rng.Intn(3)
				perLevel := []any{}
				for range levels {
					if rng.Intn(3) == 0 {
						perLevel = append(perLevel, map[string]any{"universal": pick("block-1", "rack-1", "")})
						continue
					}
					roots := []any{}
					for range n {
						roots = append(roots, pick("1", "2", "12", "a", ""))
					}
					individual := map[string]any{"roots": roots}
					if rng.Intn(2) == 0 {
						individual["prefix"] = pick("rack-", "r", "block-1-rack-")
					}
					if rng.Intn(2) == 0 {
						individual["suffix"] = pick("-node", "1")
					}
					perLevel = append(perLevel, map[string]any{"individual": individual})
				}
				podCounts := map[string]any{"universal": int64(1 + rng.Intn(3))}
				if rng.Intn(2) == 0 {
					counts := []any{}
					for range n {
						counts = append(counts, int64(1+rng.Intn(3)))
					}
					podCounts = map[string]any{"individual": counts}
				}
				slices = append(slices, map[string]any{"domainCount": int64(n), "valuesPerLevel": perLevel,
					"podCounts": podCounts})
			}
			ta["slices"] = slices
		}
		switch rng.Intn(8) {
		case 0: // not well formed
			broken := map[string]any{"levels": "cloud.com/rack", "count": 1.5, "slices": []any{map[string]any{"x": int64(1)}},
				"domains": []any{map[string]any{"values": []any{}, "count": 1.5}}}
			for k := range broken {
				if rng.Intn(2) == 0 {
					ta[k] = broken[k]
				}
			}
		case 1:
			psa["topologyAssignment"] = values[rng.Intn(len(values))]
			list = append(list, psa)
			continue
		case 2: // none
			list = append(list, psa)
			continue
		}
		psa["topologyAssignment"] = ta
		list = append(list, psa)
	}
	return list
}

// The round-trip property: for every kind, v1beta1 -> v1beta2 -> v1beta1 gives back the object
// as written, field for field (what StashAnnotation a v1beta1 object carries aside: ours, not
// the user's), and v1beta2 -> v1beta1 -> v1beta2 too for objects written in v1beta2.
func TestRoundTripProperty(t *testing.T) {
	rng := rand.New(rand.NewSource(18))
	kinds := append(Kinds(), "ResourceFlavor", "AdmissionCheck", "WorkloadPriorityClass")
	stashed, topologyStashed := 0, 0
	for i := 0; i < 20000; i++ {
		kind := kinds[rng.Intn(len(kinds))]
		v1 := randomObject(rng, kind)
		removeAnnotation(v1, StashAnnotation)
		removeAnnotation(v1, TopologyStashAnnotation)
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
		removeAnnotation(w2, TopologyStashAnnotation)
		for _, path := range v1beta1Only[kind] {
			remove(w2, path)
		}
		if _, ok := get(w2, "status.admission.podSetAssignments"); ok {
			set(w2, "status.admission.podSetAssignments", randomAssignments(rng, V1beta2))
		}
		if _, ok := annotation(mustConvert(t, w2, V1beta1), TopologyStashAnnotation); ok {
			topologyStashed++
		}
		w1 := mustConvert(t, w2, V1beta1)
		if back := mustConvert(t, w1, V1beta2); !equality.Semantic.DeepEqual(back, w2) {
			t.Fatalf("v1beta2 round trip of %s:\n  in %s\n  v1 %s\n out %s", kind, text(t, w2), text(t, w1), text(t, back))
		}
	}
	if stashed == 0 || topologyStashed == 0 {
		t.Errorf("%d generated objects needed the stash, %d the topology's: the property did not cover it",
			stashed, topologyStashed)
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

// workloadWithTopology: a Workload of version whose one podSetAssignment has the topology
// assignment ta (JSON), and annotations (JSON object, or "").
func workloadWithTopology(t *testing.T, version, ta, annotations string) map[string]any {
	t.Helper()
	metadata := `{"name":"w"}`
	if annotations != "" {
		metadata = `{"name":"w","annotations":` + annotations + `}`
	}
	return object(t, `{"apiVersion":"kueue.x-k8s.io/`+version+`","kind":"Workload","metadata":`+metadata+
		`,"spec":{"queueName":"q"},"status":{"admission":{"clusterQueue":"cq","podSetAssignments":[`+
		`{"name":"main","count":30,"topologyAssignment":`+ta+`}]}}}`)
}

// Kueue's own cases (apis/kueue/v1beta1/workload_conversion_test.go, "with TopologyAssignment"):
// v1beta1 domains become one slice, "a1" universal, "b1", "b2" prefix "b" and roots; and back.
func TestTopologyUp(t *testing.T) {
	v1 := workloadWithTopology(t, V1beta1, `{"levels":["a","b"],"domains":[`+
		`{"values":["a1","b1"],"count":10},{"values":["a1","b2"],"count":20}]}`, "")
	want := workloadWithTopology(t, V1beta2, `{"levels":["a","b"],"slices":[{"domainCount":2,`+
		`"valuesPerLevel":[{"universal":"a1"},{"individual":{"prefix":"b","roots":["1","2"]}}],`+
		`"podCounts":{"individual":[10,20]}}]}`, "")
	v2 := mustConvert(t, v1, V1beta2)
	if !equality.Semantic.DeepEqual(v2, want) {
		t.Fatalf("v1beta1 -> v1beta2:\n got %s\nwant %s", text(t, v2), text(t, want))
	}
	if back := mustConvert(t, v2, V1beta1); !equality.Semantic.DeepEqual(back, v1) {
		t.Fatalf("and back: %s", text(t, back))
	}
	// Common prefix and suffix that would overlap ("ababa", "aba": both "aba"): the prefix gives
	// way, as Kueue's.
	v2 = mustConvert(t, workloadWithTopology(t, V1beta1, `{"levels":["h"],"domains":[`+
		`{"values":["ababa"],"count":1},{"values":["aba"],"count":1}]}`, ""), V1beta2)
	got, _ := get(v2, "status.admission.podSetAssignments")
	if s := text(t, map[string]any{"p": got}); !strings.Contains(s,
		`"valuesPerLevel":[{"individual":{"roots":["ab",""],"suffix":"aba"}}]`) {
		t.Fatalf("overlapping prefix and suffix: %s", s)
	}
}

// Kueue's "with TopologyAssignment, multiple slices": two slices expand to four domains in
// order; the v1beta1 object keeps the v1beta2 encoding for the way back, until v1beta1 changes
// the domains.
func TestTopologyDown(t *testing.T) {
	ta2 := `{"levels":["a","b"],"slices":[` +
		`{"domainCount":2,"valuesPerLevel":[{"universal":"a1"},{"individual":{"prefix":"b","roots":["1","2"]}}],"podCounts":{"individual":[10,20]}},` +
		`{"domainCount":2,"valuesPerLevel":[{"universal":"a2"},{"individual":{"roots":["first","second"],"suffix":"-in-a2"}}],"podCounts":{"universal":50}}]}`
	v2 := workloadWithTopology(t, V1beta2, ta2, "")
	domains := `{"levels":["a","b"],"domains":[{"values":["a1","b1"],"count":10},{"values":["a1","b2"],"count":20},` +
		`{"values":["a2","first-in-a2"],"count":50},{"values":["a2","second-in-a2"],"count":50}]}`
	var stashed map[string]any
	if err := json.Unmarshal([]byte(ta2), &stashed); err != nil {
		t.Fatal(err)
	}
	stash, _ := json.Marshal(map[string]any{"0": stashed})
	want := workloadWithTopology(t, V1beta1, domains, `{"`+TopologyStashAnnotation+`":`+strconv.Quote(string(stash))+`}`)
	v1 := mustConvert(t, v2, V1beta1)
	if !equality.Semantic.DeepEqual(v1, want) {
		t.Fatalf("v1beta2 -> v1beta1:\n got %s\nwant %s", text(t, v1), text(t, want))
	}
	if back := mustConvert(t, v1, V1beta2); !equality.Semantic.DeepEqual(back, v2) {
		t.Fatalf("and back: %s", text(t, back))
	}
	// A change through v1beta1 (the last domain's count) wins over the stash: re-encoded.
	changed := workloadWithTopology(t, V1beta1, strings.Replace(domains, `"count":50}]}`, `"count":51}]}`, 1),
		`{"`+TopologyStashAnnotation+`":`+strconv.Quote(string(stash))+`}`)
	got := mustConvert(t, changed, V1beta2)
	if _, ok := annotation(got, TopologyStashAnnotation); ok {
		t.Fatalf("the topology's stash reached v1beta2: %s", text(t, got))
	}
	if s := text(t, got); !strings.Contains(s, `"podCounts":{"individual":[10,20,50,51]}`) {
		t.Fatalf("a v1beta1 change did not win over the stash: %s", s)
	}
}

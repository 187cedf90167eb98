// Package conversion converts our kueue.x-k8s.io objects between v1beta1 and v1beta2, the two
// versions our CRDs serve (ops/k8s/crds/), as Kueue's own conversion does for the fields that
// were renamed between them (apis/kueue/v1beta1/*_conversion.go of sigs.k8s.io/kueue), and serves
// that as the CRDs' conversion webhook (webhook.go). docs/k8s.md, "Converted".
//
// Objects are JSON maps, as the API server sends them: every field our renames do not touch
// passes through as written, whatever the version (the CRDs keep unknown fields). A round trip
// v1beta1 -> v1beta2 -> v1beta1 gives back the object as written: where v1beta2 cannot say what
// v1beta1 said (the early Cohort spelling spec.parent, a priorityClassName without a source
// Kueue converts), the v1beta1 fields are kept in the annotation StashAnnotation of the v1beta2
// object and restored on the way back, as long as v1beta2 has not changed them since. The other
// way, v1beta2 -> v1beta1 -> v1beta2 gives back the object as written too: a Workload's
// topology assignment, which v1beta2 can encode in many ways (slices, prefixes, universal
// values) and v1beta1 only one (domains), keeps its v1beta2 encoding in the annotation
// TopologyStashAnnotation of the v1beta1 object (topology.go).
package conversion

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// Group and the versions converted between.
const (
	Group   = "kueue.x-k8s.io"
	V1beta1 = "v1beta1"
	V1beta2 = "v1beta2"
)

// StashAnnotation holds, on a v1beta2 object converted from v1beta1, the v1beta1 fields that
// v1beta2 cannot represent (JSON: dotted path -> value), for the way back. The bridge does not
// forward it to the ledger.
const StashAnnotation = "admission-ledger.io/v1beta1-fields"

// The priority class sources of a v1beta1 Workload and the group/kind v1beta2 names them by.
const (
	workloadPriorityClassSource = "kueue.x-k8s.io/workloadpriorityclass"
	podPriorityClassSource      = "scheduling.k8s.io/priorityclass"
)

var priorityClassRefs = map[string][2]string{
	workloadPriorityClassSource: {"kueue.x-k8s.io", "WorkloadPriorityClass"},
	podPriorityClassSource:      {"scheduling.k8s.io", "PriorityClass"},
}

// kindRules: what changes between the versions of one kind.
type kindRules struct {
	// up and down rewrite a copy of the object in place (v1beta1 -> v1beta2, and back).
	up, down func(obj map[string]any)
	// owned lists the fields (dotted paths) up and down read or write: what the stash keeps.
	owned []string
}

// rules of the kinds whose versions differ. ResourceFlavor, AdmissionCheck and
// WorkloadPriorityClass have the same shape in both (Kueue drops AdmissionCheck's v1beta1
// retryDelayMinutes; our CRDs keep it as written) and are not converted.
var rules = map[string]kindRules{
	// ClusterQueue: v1beta1 spec.cohort is v1beta2 spec.cohortName. (Kueue also turns v1beta1
	// spec.admissionChecks into admissionChecksStrategy, one way only, and Borrow/Preempt of
	// flavorFungibility into MayStopSearch, one way only; our v1beta2 keeps both as written, and
	// the ledger reads them in both versions.)
	"ClusterQueue": {
		up:    func(o map[string]any) { rename(o, "spec.cohort", "spec.cohortName") },
		down:  func(o map[string]any) { rename(o, "spec.cohortName", "spec.cohort") },
		owned: []string{"spec.cohort", "spec.cohortName"},
	},
	// Cohort: parentName in both; v1beta1 also takes the early spelling spec.parent (equal to
	// parentName when both are written), which v1beta2 does not.
	"Cohort": {
		up: func(o map[string]any) {
			if _, ok := get(o, "spec.parentName"); ok {
				remove(o, "spec.parent")
			} else {
				rename(o, "spec.parent", "spec.parentName")
			}
		},
		down:  func(map[string]any) {},
		owned: []string{"spec.parent", "spec.parentName"},
	},
	// LocalQueue: status.flavorUsage (v1beta1) is status.flavorsUsage (v1beta2).
	"LocalQueue": {
		up:    func(o map[string]any) { rename(o, "status.flavorUsage", "status.flavorsUsage") },
		down:  func(o map[string]any) { rename(o, "status.flavorsUsage", "status.flavorUsage") },
		owned: []string{"status.flavorUsage", "status.flavorsUsage"},
	},
	// Workload: v1beta1 spec.priorityClassName and priorityClassSource are v1beta2
	// spec.priorityClassRef {group, kind, name}; status.accumulatedPastExexcutionTimeSeconds (sic,
	// v1beta1) is status.accumulatedPastExecutionTimeSeconds; the topology assignment of each
	// status.admission.podSetAssignments entry is v1beta1 {levels, domains} and v1beta2 {levels,
	// slices} (topology.go).
	"Workload": {
		up:   workloadUp,
		down: workloadDown,
		owned: []string{"spec.priorityClassName", "spec.priorityClassSource", "spec.priorityClassRef",
			"status.accumulatedPastExexcutionTimeSeconds", "status.accumulatedPastExecutionTimeSeconds",
			"status.admission.podSetAssignments"},
	},
}

// Kinds are the kinds whose CRDs convert with this webhook (the others use strategy None).
func Kinds() []string {
	return []string{"ClusterQueue", "Cohort", "LocalQueue", "Workload"}
}

func workloadUp(o map[string]any) {
	rename(o, "status.accumulatedPastExexcutionTimeSeconds", "status.accumulatedPastExecutionTimeSeconds")
	topologyUp(o)
	if _, ok := get(o, "spec.priorityClassRef"); ok {
		return // v1beta2's spelling in a v1beta1 object (the CRD refuses it): left as written
	}
	name, hasName := get(o, "spec.priorityClassName")
	source, hasSource := get(o, "spec.priorityClassSource")
	if !hasName && !hasSource {
		return
	}
	// As Kueue: a known source and a name make a reference; anything else (no source, the
	// empty source, no name) makes none. The stash keeps what was written for the way back.
	remove(o, "spec.priorityClassName")
	remove(o, "spec.priorityClassSource")
	sourceText, _ := source.(string)
	nameText, _ := name.(string)
	if ref, known := priorityClassRefs[sourceText]; known && nameText != "" {
		set(o, "spec.priorityClassRef", map[string]any{"group": ref[0], "kind": ref[1], "name": nameText})
	}
}

func workloadDown(o map[string]any) {
	rename(o, "status.accumulatedPastExecutionTimeSeconds", "status.accumulatedPastExexcutionTimeSeconds")
	topologyDown(o)
	ref, ok := get(o, "spec.priorityClassRef")
	if !ok {
		return
	}
	refMap, _ := ref.(map[string]any)
	group, _ := refMap["group"].(string)
	kind, _ := refMap["kind"].(string)
	name, _ := refMap["name"].(string)
	for source, gk := range priorityClassRefs {
		if gk == [2]string{group, kind} {
			remove(o, "spec.priorityClassRef")
			set(o, "spec.priorityClassName", name)
			set(o, "spec.priorityClassSource", source)
			return
		}
	}
	// Another group/kind (the v1beta2 CRD refuses it): left as written.
}

// Convert returns a copy of obj (apiVersion kueue.x-k8s.io/v1beta1 or v1beta2) in version to.
// An object already in that version, or of a kind whose versions do not differ, only has its
// apiVersion set.
func Convert(obj map[string]any, to string) (map[string]any, error) {
	apiVersion, _ := obj["apiVersion"].(string)
	from, ok := strings.CutPrefix(apiVersion, Group+"/")
	if !ok || (from != V1beta1 && from != V1beta2) {
		return nil, fmt.Errorf("apiVersion %q is not %s/%s or %s", apiVersion, Group, V1beta1, V1beta2)
	}
	if to != V1beta1 && to != V1beta2 {
		return nil, fmt.Errorf("cannot convert to version %q: only %s and %s", to, V1beta1, V1beta2)
	}
	out := runtime.DeepCopyJSON(obj)
	out["apiVersion"] = Group + "/" + to
	kind, _ := obj["kind"].(string)
	r, converted := rules[kind]
	if from == to || !converted {
		return out, nil
	}
	if to == V1beta2 {
		return up(r, obj, out)
	}
	return down(r, out)
}

// Normalize rewrites, in place, v1beta1 spellings that an object read as v1beta2 still carries
// because it was stored before our CRDs converted (they stored it as written then), into
// v1beta2's; an object without them is left as it is.
func Normalize(obj map[string]any) {
	kind, _ := obj["kind"].(string)
	if r, ok := rules[kind]; ok {
		r.up(obj)
	}
}

// up converts in (v1beta1) into out (its copy) and stashes what the way back would lose.
func up(r kindRules, in, out map[string]any) (map[string]any, error) {
	removeAnnotation(out, StashAnnotation)
	r.up(out)
	back := runtime.DeepCopyJSON(out)
	back["apiVersion"] = in["apiVersion"]
	r.down(back)
	original := runtime.DeepCopyJSON(in)
	removeAnnotation(original, StashAnnotation)
	// The topology's stash is remade on the way back as the v1beta2 encoding needs it: what the
	// stash below must keep is the v1beta1 fields.
	removeAnnotation(original, TopologyStashAnnotation)
	removeAnnotation(back, TopologyStashAnnotation)
	if equality.Semantic.DeepEqual(back, original) {
		return out, nil
	}
	stash := map[string]any{}
	for _, path := range r.owned {
		if v, ok := get(in, path); ok {
			stash[path] = v
		}
	}
	text, err := json.Marshal(stash)
	if err != nil {
		return nil, err
	}
	setAnnotation(out, StashAnnotation, string(text))
	return out, nil
}

// down converts out (a copy of the v1beta2 object) to v1beta1, restoring the stashed v1beta1
// fields when they still convert to what the v1beta2 object says.
func down(r kindRules, out map[string]any) (map[string]any, error) {
	text, stashed := annotation(out, StashAnnotation)
	removeAnnotation(out, StashAnnotation)
	converted := runtime.DeepCopyJSON(out)
	r.down(converted)
	if !stashed {
		return converted, nil
	}
	var stash map[string]any
	// utiljson: integers as int64, as the API server's objects have them.
	if err := utiljson.Unmarshal([]byte(text), &stash); err != nil {
		return converted, nil // not ours to trust: the plain conversion
	}
	restored := runtime.DeepCopyJSON(converted)
	for _, path := range r.owned {
		remove(restored, path)
		if v, ok := stash[path]; ok {
			set(restored, path, runtime.DeepCopyJSONValue(v))
		}
	}
	// The stash still holds only if it goes up to the v1beta2 object as it is now: without the
	// topology's stash that converted got (the v1beta1 object as it was written had none), or
	// else with it.
	withoutTopology := runtime.DeepCopyJSON(restored)
	removeAnnotation(withoutTopology, TopologyStashAnnotation)
	for _, candidate := range []map[string]any{withoutTopology, restored} {
		check := runtime.DeepCopyJSON(candidate)
		r.up(check)
		check["apiVersion"] = out["apiVersion"]
		if equality.Semantic.DeepEqual(check, out) {
			return candidate, nil
		}
	}
	return converted, nil
}

// get, set, remove and rename act on dotted paths of maps.
func get(obj map[string]any, path string) (any, bool) {
	parts := strings.Split(path, ".")
	m := obj
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			return nil, false
		}
		m = next
	}
	v, ok := m[parts[len(parts)-1]]
	return v, ok
}

func set(obj map[string]any, path string, value any) {
	parts := strings.Split(path, ".")
	m := obj
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = value
}

func remove(obj map[string]any, path string) {
	parts := strings.Split(path, ".")
	m := obj
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			return
		}
		m = next
	}
	delete(m, parts[len(parts)-1])
}

// rename moves from to to, unless to is written too (then both stay as written).
func rename(obj map[string]any, from, to string) {
	v, ok := get(obj, from)
	if !ok {
		return
	}
	if _, taken := get(obj, to); taken {
		return
	}
	remove(obj, from)
	set(obj, to, v)
}

func annotation(obj map[string]any, key string) (string, bool) {
	v, ok := get(obj, "metadata.annotations")
	if !ok {
		return "", false
	}
	m, _ := v.(map[string]any)
	text, ok := m[key].(string)
	return text, ok
}

func setAnnotation(obj map[string]any, key, value string) {
	v, _ := get(obj, "metadata.annotations")
	m, ok := v.(map[string]any)
	if !ok {
		m = map[string]any{}
		set(obj, "metadata.annotations", m)
	}
	m[key] = value
}

func removeAnnotation(obj map[string]any, key string) {
	v, ok := get(obj, "metadata.annotations")
	if !ok {
		return
	}
	m, _ := v.(map[string]any)
	if _, present := m[key]; !present {
		return
	}
	delete(m, key)
	if len(m) == 0 {
		remove(obj, "metadata.annotations")
	}
}

package conversion

// A Workload's topology assignments (status.admission.podSetAssignments[].topologyAssignment):
// v1beta1 lists one entry per topology domain, {levels, domains: [{values, count}]}; v1beta2
// encodes the same domains in slices, {levels, slices: [{domainCount, valuesPerLevel, podCounts}]},
// where each level's values are either one `universal` value or `individual` roots with an
// optional common `prefix` and `suffix`, and the pod counts one `universal` count or `individual`
// counts (Kueue's apis/kueue/v1beta2/workload_types.go; its conversion expands the slices into
// domains, pkg/util/tas InternalSeqFrom, and encodes domains as one compacted slice,
// singleCompactTopologyAssignmentEncoding). Ours does the same, written from those semantics.
//
// Many v1beta2 encodings give the same domains, so v1beta2 -> v1beta1 -> v1beta2 would not give
// back the encoding as written: the v1beta1 object keeps each such v1beta2 assignment in the
// annotation TopologyStashAnnotation, used on the way back while it still expands to the
// domains the v1beta1 object holds (a later change through v1beta1 wins). An assignment that is
// not well formed in its version (a missing or mistyped field, a count that is no integer, a
// field the other version has no place for) is left as written.

import (
	"encoding/json"
	"strconv"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// TopologyStashAnnotation holds, on a v1beta1 Workload converted from v1beta2, the v1beta2
// topology assignments whose encoding v1beta1's domains cannot tell (JSON: index of the
// podSetAssignments entry -> its v1beta2 topologyAssignment), for the way back.
const TopologyStashAnnotation = "admission-ledger.io/v1beta2-topology"

// eachAssignment replaces every topology assignment of the Workload o (that of the
// podSetAssignments entry at index i) with convert's answer.
func eachAssignment(o map[string]any, convert func(i int, ta any) any) {
	v, _ := get(o, "status.admission.podSetAssignments")
	list, _ := v.([]any)
	for i, e := range list {
		psa, ok := e.(map[string]any)
		if !ok {
			continue
		}
		if ta, present := psa["topologyAssignment"]; present {
			psa["topologyAssignment"] = convert(i, ta)
		}
	}
}

// topologyUp converts, in place, every topology assignment of a v1beta1 Workload to v1beta2,
// taking the encoding stashed by topologyDown where it still holds.
func topologyUp(o map[string]any) {
	text, stashed := annotation(o, TopologyStashAnnotation)
	removeAnnotation(o, TopologyStashAnnotation)
	var stash map[string]any
	if stashed && utiljson.Unmarshal([]byte(text), &stash) != nil {
		stash = nil // not ours to trust
	}
	eachAssignment(o, func(i int, ta any) any {
		if kept, ok := stash[strconv.Itoa(i)]; ok && equality.Semantic.DeepEqual(domainsOf(kept), ta) {
			return runtime.DeepCopyJSONValue(kept)
		}
		return slicesOf(ta)
	})
}

// topologyDown converts, in place, every topology assignment of a v1beta2 Workload to v1beta1,
// stashing those whose encoding the way back would not give again.
func topologyDown(o map[string]any) {
	removeAnnotation(o, TopologyStashAnnotation)
	stash := map[string]any{}
	eachAssignment(o, func(i int, ta any) any {
		down := domainsOf(ta)
		if !equality.Semantic.DeepEqual(slicesOf(down), ta) {
			stash[strconv.Itoa(i)] = ta
		}
		return down
	})
	if len(stash) == 0 {
		return
	}
	text, err := json.Marshal(stash)
	if err != nil {
		return // JSON values from JSON: cannot happen
	}
	setAnnotation(o, TopologyStashAnnotation, string(text))
}

func stringList(v any) ([]string, bool) {
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, len(list))
	for i, e := range list {
		if out[i], ok = e.(string); !ok {
			return nil, false
		}
	}
	return out, true
}

func integer(v any) (int64, bool) {
	n, ok := v.(int64)
	return n, ok
}

// onlyKeys: m has no key but those named (each optional).
func onlyKeys(m map[string]any, keys ...string) bool {
	known := 0
	for _, k := range keys {
		if _, ok := m[k]; ok {
			known++
		}
	}
	return known == len(m)
}

// domain is one v1beta1 topology domain.
type domain struct {
	values []string
	count  int64
}

// parts returns the topology assignment v, its levels and its list named key ("domains" or
// "slices"); false unless they are well formed and the other version's list, other, is absent.
func parts(v any, key, other string) (map[string]any, []string, []any, bool) {
	ta, ok := v.(map[string]any)
	if !ok {
		return nil, nil, nil, false
	}
	levels, okLevels := stringList(ta["levels"])
	list, okList := ta[key].([]any)
	_, hasOther := ta[other]
	return ta, levels, list, okLevels && okList && !hasOther
}

// slicesOf returns the v1beta2 form of a v1beta1 topology assignment (a copy), or a copy of
// it as written when it is not a well-formed v1beta1 one.
func slicesOf(v any) any {
	ta, levels, list, ok := parts(v, "domains", "slices")
	if !ok {
		return runtime.DeepCopyJSONValue(v)
	}
	domains := make([]domain, len(list))
	for i, e := range list {
		d, ok := e.(map[string]any)
		if !ok || !onlyKeys(d, "values", "count") {
			return runtime.DeepCopyJSONValue(v)
		}
		values, okValues := stringList(d["values"])
		count, okCount := integer(d["count"])
		if !okValues || !okCount || len(values) != len(levels) {
			return runtime.DeepCopyJSONValue(v)
		}
		domains[i] = domain{values, count}
	}
	out := runtime.DeepCopyJSON(ta)
	delete(out, "domains")
	slices := []any{}
	if len(domains) > 0 {
		slices = append(slices, compactSlice(len(levels), domains))
	}
	out["slices"] = slices
	return out
}

// compactSlice encodes domains as one slice: per level one universal value when all are
// equal, else the roots left by their longest common prefix and suffix; one universal pod
// count when all are equal.
func compactSlice(levels int, domains []domain) map[string]any {
	perLevel := make([]any, levels)
	for l := range levels {
		values := make([]string, len(domains))
		for i, d := range domains {
			values[i] = d.values[l]
		}
		perLevel[l] = levelValues(values)
	}
	counts := make([]any, len(domains))
	same := true
	for i, d := range domains {
		counts[i] = d.count
		same = same && d.count == domains[0].count
	}
	podCounts := map[string]any{"individual": counts}
	if same {
		podCounts = map[string]any{"universal": domains[0].count}
	}
	return map[string]any{"domainCount": int64(len(domains)), "valuesPerLevel": perLevel, "podCounts": podCounts}
}

func levelValues(values []string) map[string]any {
	prefix, suffix := values[0], values[0]
	shortest, allEqual := len(values[0]), true
	for _, s := range values[1:] {
		allEqual = allEqual && s == values[0]
		shortest = min(shortest, len(s))
		n := 0
		for n < len(prefix) && n < len(s) && prefix[n] == s[n] {
			n++
		}
		prefix = prefix[:n]
		n = 0
		for n < len(suffix) && n < len(s) && suffix[len(suffix)-1-n] == s[len(s)-1-n] {
			n++
		}
		suffix = suffix[len(suffix)-n:]
	}
	if allEqual {
		return map[string]any{"universal": values[0]}
	}
	if len(prefix)+len(suffix) > shortest { // they would overlap ("aba" in "ababa", "aba")
		prefix = prefix[:shortest-len(suffix)]
	}
	roots := make([]any, len(values))
	for i, s := range values {
		roots[i] = s[len(prefix) : len(s)-len(suffix)]
	}
	individual := map[string]any{"roots": roots}
	if prefix != "" {
		individual["prefix"] = prefix
	}
	if suffix != "" {
		individual["suffix"] = suffix
	}
	return map[string]any{"individual": individual}
}

// domainsOf returns the v1beta1 form of a v1beta2 topology assignment (a copy), or a copy of it
// as written when it is not a well-formed v1beta2 one.
func domainsOf(v any) any {
	ta, levels, slices, ok := parts(v, "slices", "domains")
	if !ok {
		return runtime.DeepCopyJSONValue(v)
	}
	domains := []any{}
	for _, e := range slices {
		expanded, ok := expandSlice(e, len(levels))
		if !ok {
			return runtime.DeepCopyJSONValue(v)
		}
		domains = append(domains, expanded...)
	}
	out := runtime.DeepCopyJSON(ta)
	delete(out, "slices")
	out["domains"] = domains
	return out
}

// expandSlice lists the domains of one v1beta2 slice; false when it is not well formed.
func expandSlice(v any, levels int) ([]any, bool) {
	slice, ok := v.(map[string]any)
	if !ok || !onlyKeys(slice, "domainCount", "valuesPerLevel", "podCounts") {
		return nil, false
	}
	n, okCount := integer(slice["domainCount"])
	perLevel, okLevels := slice["valuesPerLevel"].([]any)
	podCounts, okPods := slice["podCounts"].(map[string]any)
	if !okCount || n < 0 || !okLevels || len(perLevel) != levels || !okPods {
		return nil, false
	}
	values := make([][]string, levels)
	for l, e := range perLevel {
		if values[l], ok = levelValuesOf(e, int(n)); !ok {
			return nil, false
		}
	}
	counts, ok := podCountsOf(podCounts, int(n))
	if !ok {
		return nil, false
	}
	domains := make([]any, n)
	for i := range domains {
		v := make([]any, levels)
		for l := range v {
			v[l] = values[l][i]
		}
		domains[i] = map[string]any{"values": v, "count": counts[i]}
	}
	return domains, true
}

func levelValuesOf(v any, n int) ([]string, bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return nil, false
	}
	if universal, present := m["universal"]; present {
		s, ok := universal.(string)
		out := make([]string, n)
		for i := range out {
			out[i] = s
		}
		return out, ok
	}
	individual, ok := m["individual"].(map[string]any)
	if !ok || !onlyKeys(individual, "prefix", "suffix", "roots") {
		return nil, false
	}
	roots, ok := stringList(individual["roots"])
	prefix, okPrefix := individual["prefix"].(string)
	suffix, okSuffix := individual["suffix"].(string)
	_, hasPrefix := individual["prefix"]
	_, hasSuffix := individual["suffix"]
	if !ok || len(roots) != n || (hasPrefix && !okPrefix) || (hasSuffix && !okSuffix) {
		return nil, false
	}
	out := make([]string, n)
	for i, r := range roots {
		out[i] = prefix + r + suffix
	}
	return out, true
}

func podCountsOf(m map[string]any, n int) ([]int64, bool) {
	if len(m) != 1 {
		return nil, false
	}
	if universal, present := m["universal"]; present {
		c, ok := integer(universal)
		out := make([]int64, n)
		for i := range out {
			out[i] = c
		}
		return out, ok
	}
	list, ok := m["individual"].([]any)
	if !ok || len(list) != n {
		return nil, false
	}
	out := make([]int64, n)
	for i, e := range list {
		if out[i], ok = integer(e); !ok {
			return nil, false
		}
	}
	return out, true
}

// TopologyAssignmentV1beta2 is a topology assignment in v1beta2's shape {levels, slices}: one in
// v1beta1's {levels, domains} encoded as one compacted slice, any other returned as it is (a
// copy).
func TopologyAssignmentV1beta2(ta any) any { return slicesOf(ta) }

// TopologyAssignmentV1beta1 is a topology assignment in v1beta1's shape {levels, domains}: one in
// v1beta2's {levels, slices} expanded, any other returned as it is (a copy).
func TopologyAssignmentV1beta1(ta any) any { return domainsOf(ta) }

// StatusTopologyToV1beta2 converts, in place, the topology assignments of a Workload's status
// (status.admission.podSetAssignments[].topologyAssignment) to v1beta2's shape: the ledger shows
// Kueue's v1beta1 {levels, domains}, the bridge writes v1beta2 Workloads.
func StatusTopologyToV1beta2(status map[string]any) {
	eachAssignment(map[string]any{"status": status}, func(_ int, ta any) any { return slicesOf(ta) })
}

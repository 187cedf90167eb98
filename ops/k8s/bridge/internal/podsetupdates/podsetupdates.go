// Package podsetupdates reads admission checks' podSetUpdates (Kueue's
// AdmissionCheckState.podSetUpdates) from unstructured objects, builds them into the ledger's
// check reports, and merges them into a pod template at release with Kueue's rules
// (pkg/podset/podset.go, PodSetInfo.Merge): additive only, another value for a key that is
// already set is a conflict, a toleration is added once (docs/k8s.md, docs/semantics.md).
package podsetupdates

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"admission-ledger/bridge/internal/ledgerevents"
)

// PodSetUpdate is Kueue's PodSetUpdate.
type PodSetUpdate struct {
	Name         string              `json:"name"`
	Labels       map[string]string   `json:"labels,omitempty"`
	Annotations  map[string]string   `json:"annotations,omitempty"`
	NodeSelector map[string]string   `json:"nodeSelector,omitempty"`
	Tolerations  []corev1.Toleration `json:"tolerations,omitempty"`
}

// FromEntry reads the podSetUpdates of one admissionChecks entry (absent: none). A toleration
// with tolerationSeconds is refused: the ledger does not carry it.
func FromEntry(entry map[string]any) ([]PodSetUpdate, error) {
	raw, found := entry["podSetUpdates"]
	if !found || raw == nil {
		return nil, nil
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("podSetUpdates is not a list")
	}
	out := make([]PodSetUpdate, 0, len(list))
	for i, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("podSetUpdates[%d] is not an object", i)
		}
		var u PodSetUpdate
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &u); err != nil {
			return nil, fmt.Errorf("podSetUpdates[%d]: %w", i, err)
		}
		for j, t := range u.Tolerations {
			if t.TolerationSeconds != nil {
				return nil, fmt.Errorf("podSetUpdates[%d].tolerations[%d].tolerationSeconds: not "+
					"carried by the ledger", i, j)
			}
		}
		out = append(out, u)
	}
	return out, nil
}

// Key is a canonical text of updates (encoding/json sorts map keys), for comparisons and
// request ids.
func Key(updates []PodSetUpdate) string {
	if len(updates) == 0 {
		return ""
	}
	text, _ := json.Marshal(updates)
	return string(text)
}

func setLabels(list ledgerevents.Label_List, m map[string]string) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		if err := list.At(i).SetKey(k); err != nil {
			return err
		}
		if err := list.At(i).SetValue(m[k]); err != nil {
			return err
		}
	}
	return nil
}

// Set writes updates into a check report.
func Set(r ledgerevents.CheckStateReported, updates []PodSetUpdate) error {
	if len(updates) == 0 {
		return nil
	}
	list, err := r.NewPodSetUpdates(int32(len(updates)))
	if err != nil {
		return err
	}
	for i, u := range updates {
		b := list.At(i)
		if err := b.SetPodSet(u.Name); err != nil {
			return err
		}
		for _, field := range []struct {
			m   map[string]string
			new func(int32) (ledgerevents.Label_List, error)
		}{{u.Labels, b.NewLabels}, {u.Annotations, b.NewAnnotations}, {u.NodeSelector, b.NewNodeSelector}} {
			if len(field.m) == 0 {
				continue
			}
			l, err := field.new(int32(len(field.m)))
			if err != nil {
				return err
			}
			if err := setLabels(l, field.m); err != nil {
				return err
			}
		}
		if len(u.Tolerations) == 0 {
			continue
		}
		ts, err := b.NewTolerations(int32(len(u.Tolerations)))
		if err != nil {
			return err
		}
		for j, t := range u.Tolerations {
			tb := ts.At(j)
			for _, set := range []struct {
				f func(string) error
				v string
			}{{tb.SetKey, t.Key}, {tb.SetOperator, string(t.Operator)}, {tb.SetValue, t.Value}, {tb.SetEffect, string(t.Effect)}} {
				if err := set.f(set.v); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Conflict is Kueue's utilmaps.HaveConflict, over the keys of `have` in order: another value
// in `add` for a key `have` holds.
func conflict(field string, have, add map[string]string) error {
	keys := make([]string, 0, len(have))
	for k := range have {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v, found := add[k]; found && v != have[k] {
			return fmt.Errorf("invalid admission check PodSetUpdate: conflict for %s: conflict for key=%s, value1=%s, value2=%s",
				field, k, have[k], v)
		}
	}
	return nil
}

func copyInto(into *map[string]string, from map[string]string) {
	if len(from) == 0 {
		return
	}
	if *into == nil {
		*into = map[string]string{}
	}
	for k, v := range from {
		(*into)[k] = v
	}
}

func sameToleration(a, b corev1.Toleration) bool {
	if a.Operator == "" {
		a.Operator = corev1.TolerationOpEqual
	}
	if b.Operator == "" {
		b.Operator = corev1.TolerationOpEqual
	}
	return a.MatchToleration(&b)
}

// Merge applies u to a pod template as Kueue's podset.Merge: nothing changes on a conflict.
func Merge(meta *metav1.ObjectMeta, spec *corev1.PodSpec, u PodSetUpdate) error {
	if err := conflict("annotations", meta.Annotations, u.Annotations); err != nil {
		return err
	}
	if err := conflict("labels", meta.Labels, u.Labels); err != nil {
		return err
	}
	if err := conflict("nodeSelector", spec.NodeSelector, u.NodeSelector); err != nil {
		return err
	}
	copyInto(&meta.Annotations, u.Annotations)
	copyInto(&meta.Labels, u.Labels)
	copyInto(&spec.NodeSelector, u.NodeSelector)
	for _, t := range u.Tolerations {
		if !slices.ContainsFunc(spec.Tolerations, func(have corev1.Toleration) bool { return sameToleration(have, t) }) {
			spec.Tolerations = append(spec.Tolerations, t)
		}
	}
	return nil
}

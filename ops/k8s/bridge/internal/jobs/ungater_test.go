package jobs

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"admission-ledger/bridge/internal/ledger"
)

func tasPod(name string, rank int, hasRank, gated bool, selector map[string]string) TopologyPod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeSelector: selector}}
	if gated {
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "other"}, {Name: TopologySchedulingGate}}
	}
	return TopologyPod{Pod: p, PodSet: PodSetName, Rank: rank, HasRank: hasRank}
}

func placements(ps []Placement) map[string]string {
	out := map[string]string{}
	for _, p := range ps {
		out[p.Pod.Name] = p.NodeSelector["rack"] + "/" + p.NodeSelector[HostnameLabel]
	}
	return out
}

// Gated pods fill the domains in the assignment's order, by index then name; a pod placed
// before counts in its domain; a finished one does not.
func TestPlacePods(t *testing.T) {
	ta := &ledger.TopologyAssignment{Levels: []string{"rack", HostnameLabel}, Domains: []ledger.TopologyDomain{
		{Values: []string{"r1", "h1"}, Count: 2}, {Values: []string{"r1", "h2"}, Count: 1}}}
	got := placements(PlacePods(ta, []TopologyPod{
		tasPod("c", 2, true, true, nil), tasPod("a", 0, true, true, nil), tasPod("b", 1, true, true, nil)}))
	if want := map[string]string{"a": "r1/h1", "b": "r1/h1", "c": "r1/h2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
	done := tasPod("done", 0, true, false, map[string]string{"rack": "r1", HostnameLabel: "h2"})
	done.Pod.Status.Phase = corev1.PodFailed
	got = placements(PlacePods(ta, []TopologyPod{
		tasPod("running", 1, true, false, map[string]string{"rack": "r1", HostnameLabel: "h1"}), done,
		tasPod("z", 0, false, true, nil), tasPod("y", 0, false, true, nil), tasPod("x", 5, true, true, nil),
		tasPod("w", 0, false, true, nil)}))
	if want := map[string]string{"x": "r1/h1", "w": "r1/h2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
}

// A TAS pod set's template gets the gate, and the unconstrained annotation when it asks for no
// topology; a later admission without TAS takes the gate off again.
func TestApplyTopology(t *testing.T) {
	ta := &ledger.TopologyAssignment{Levels: []string{HostnameLabel}}
	implied := &corev1.PodTemplateSpec{}
	applyTopology(implied, ta)
	if !HasGate(&implied.Spec, TopologySchedulingGate) ||
		implied.Annotations[PodSetUnconstrainedTopologyAnnotation] != "true" {
		t.Fatalf("%+v", implied)
	}
	applyTopology(implied, ta)
	if len(implied.Spec.SchedulingGates) != 1 {
		t.Fatalf("the gate twice: %v", implied.Spec.SchedulingGates)
	}
	required := &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		PodSetRequiredTopologyAnnotation: "rack"}}}
	applyTopology(required, ta)
	if _, found := required.Annotations[PodSetUnconstrainedTopologyAnnotation]; found ||
		!IsTASPod(&corev1.Pod{ObjectMeta: required.ObjectMeta}) {
		t.Fatalf("%+v", required)
	}
	applyTopology(required, nil)
	if len(required.Spec.SchedulingGates) != 0 {
		t.Fatalf("gate kept without TAS: %v", required.Spec.SchedulingGates)
	}
}

// The pods to place are read from the API server, not the manager's cache: a cache one ungating
// behind showed a placed pod as gated, and a second pod went to the same host (k8s_bridge_tas).
func TestUngateReadsThePodsLive(t *testing.T) {
	cache, live := fake.NewClientBuilder().Build(), fake.NewClientBuilder().Build()
	var readFrom client.Reader
	kind := &Kind{Name: "Job", TopologyPods: func(_ context.Context, reader client.Reader, _ GenericJob) ([]TopologyPod, error) {
		readFrom = reader
		return nil, nil
	}}
	r := &Reconciler{Kind: kind, Client: cache, APIReader: live}
	state := &LedgerWorkload{PodSets: []ledger.PodSetAssignment{{Name: PodSetName,
		Topology: &ledger.TopologyAssignment{Levels: []string{HostnameLabel}}}}}
	if err := r.ungate(context.Background(), nil, state); err != nil {
		t.Fatal(err)
	}
	if readFrom != client.Reader(live) {
		t.Fatal("the pods were read from the cache")
	}
}

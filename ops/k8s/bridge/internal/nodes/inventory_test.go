package nodes

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"admission-ledger/bridge/internal/ledger"
	"admission-ledger/bridge/internal/ledgerevents"
)

var testFlavors = []Flavor{
	{Name: "on-demand"}, // no nodeLabels: every node
	{Name: "h100", NodeLabels: map[string]string{"gpu": "h100", "pool": "a"}},
	{Name: "a100", NodeLabels: map[string]string{"gpu": "a100"}},
}

// A node belongs to every flavor whose nodeLabels it carries, all of them, in name order.
func TestMatchingFlavors(t *testing.T) {
	for _, c := range []struct {
		labels map[string]string
		want   []string
	}{
		{nil, []string{"on-demand"}},
		{map[string]string{"gpu": "h100"}, []string{"on-demand"}},
		{map[string]string{"gpu": "h100", "pool": "a", "zone": "z"}, []string{"h100", "on-demand"}},
		{map[string]string{"gpu": "a100"}, []string{"a100", "on-demand"}},
	} {
		if got := MatchingFlavors(c.labels, nil, testFlavors); !reflect.DeepEqual(got, c.want) {
			t.Errorf("labels %v: %v, want %v", c.labels, got, c.want)
		}
	}
	if got := MatchingFlavors(map[string]string{"gpu": "h100"}, nil, testFlavors[1:]); got != nil {
		t.Errorf("matched %v", got)
	}
}

// A node's NoSchedule and NoExecute taints keep it out of the flavors whose tolerations do not
// tolerate them (their pods cannot land there); PreferNoSchedule and the taints of its
// conditions (node.kubernetes.io/...) do not.
func TestMatchingFlavorsTolerateTheNodesTaints(t *testing.T) {
	flavors := []Flavor{
		{Name: "cpu"},
		{Name: "h100", NodeLabels: map[string]string{"gpu": "h100"},
			Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}},
	}
	gpu := map[string]string{"gpu": "h100"}
	gpuTaint := corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
	for _, c := range []struct {
		taints []corev1.Taint
		want   []string
	}{
		{nil, []string{"cpu", "h100"}},
		{[]corev1.Taint{gpuTaint}, []string{"h100"}},
		{[]corev1.Taint{gpuTaint, {Key: "reserved", Effect: corev1.TaintEffectNoExecute}}, nil},
		{[]corev1.Taint{{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}, []string{"cpu", "h100"}},
		{[]corev1.Taint{{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoExecute},
			{Key: "node.kubernetes.io/unschedulable", Effect: corev1.TaintEffectNoSchedule}}, []string{"cpu", "h100"}},
	} {
		if got := MatchingFlavors(gpu, c.taints, flavors); !reflect.DeepEqual(got, c.want) {
			t.Errorf("taints %v: %v, want %v", c.taints, got, c.want)
		}
	}
}

// Allocatable in thousandths, as the ledger's quantities: exact, in name order; a quantity
// beyond an int64 of thousandths is left out.
func TestCapacityInMilli(t *testing.T) {
	got := Capacity(corev1.ResourceList{
		"nvidia.com/gpu":    resource.MustParse("8"),
		"cpu":               resource.MustParse("3500m"),
		"memory":            resource.MustParse("16Gi"),
		"pods":              resource.MustParse("110"),
		"ephemeral-storage": resource.MustParse("20Ei"),
	})
	want := []Amount{{"cpu", 3500}, {"memory", 16 << 30 * 1000}, {"nvidia.com/gpu", 8000}, {"pods", 110000}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
}

func node(name string, labels map[string]string, ready corev1.ConditionStatus) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{"cpu": resource.MustParse("8")}}}
	if ready != "" {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
			{Type: corev1.NodeReady, Status: ready}}
	}
	return n
}

// Healthy: Ready True, not cordoned, not being deleted.
func TestHealthy(t *testing.T) {
	if ok, why := Healthy(node("n", nil, corev1.ConditionTrue)); !ok {
		t.Fatalf("a Ready node: %s", why)
	}
	for _, c := range []struct {
		node *corev1.Node
		why  string
	}{
		{node("n", nil, corev1.ConditionFalse), "Ready is False"},
		{node("n", nil, corev1.ConditionUnknown), "Ready is Unknown"},
		{node("n", nil, ""), "no Ready condition"},
	} {
		if ok, why := Healthy(c.node); ok || why != c.why {
			t.Errorf("%v, %q; want false, %q", ok, why, c.why)
		}
	}
	cordoned := node("n", nil, corev1.ConditionTrue)
	cordoned.Spec.Unschedulable = true
	if ok, why := Healthy(cordoned); ok || why != "cordoned" {
		t.Errorf("cordoned: %v %q", ok, why)
	}
	deleting := node("n", nil, corev1.ConditionTrue)
	deleting.DeletionTimestamp = &metav1.Time{}
	if ok, why := Healthy(deleting); ok || why != "being deleted" {
		t.Errorf("deleting: %v %q", ok, why)
	}
}

// One ledger node per matching flavor, NODE/FLAVOR; none for a node matching no flavor.
func TestDesiredOf(t *testing.T) {
	n := node("gpu-1", map[string]string{"gpu": "a100"}, corev1.ConditionFalse)
	n.Spec.Taints = []corev1.Taint{{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule},
		{Key: "dedicated", Value: "ml", Effect: corev1.TaintEffectPreferNoSchedule}}
	usage := []Amount{{"cpu", 500}, {"pods", 1000}}
	got := DesiredOf(n, testFlavors, usage)
	// The condition's taint and the PreferNoSchedule one keep no pod off the node: not sent.
	topology := Topology{Labels: []Label{{"gpu", "a100"}}, Taints: []Taint{}, NonTas: usage}
	want := []Desired{
		{Name: "gpu-1/a100", Node: "gpu-1", Flavor: "a100", Capacity: []Amount{{"cpu", 8000}}, Failed: true,
			Topology: topology},
		{Name: "gpu-1/on-demand", Node: "gpu-1", Flavor: "on-demand", Capacity: []Amount{{"cpu", 8000}}, Failed: true,
			Topology: topology},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%+v, want %+v", got, want)
	}
	if got := DesiredOf(node("gpu-1", map[string]string{"gpu": "a100"}, corev1.ConditionTrue), testFlavors[1:2], nil); got != nil {
		t.Fatalf("a node of no flavor: %+v", got)
	}
	if node, owned := Owned("gpu-1/a100"); !owned || node != "gpu-1" {
		t.Fatalf("Owned: %q %v", node, owned)
	}
	if _, owned := Owned("rack-7"); owned {
		t.Fatal("a node reported by admitctl is the bridge's")
	}
}

// The ledger's `get nodes -o json` as ops/views/render.cc writes it.
const recordedJSON = `{
  "apiVersion": "v1",
  "kind": "List",
  "items": [
    {"kind": "Node", "metadata": {"name": "a/f"}, "flavor": "f",
     "capacity": {"cpu": "3500m", "memory": "16Gi", "nvidia.com/gpu": "8"}, "failed": false},
    {"kind": "Node", "metadata": {"name": "b/f"}, "flavor": "f", "capacity": {"cpu": "8"}, "failed": true},
    {"kind": "Node", "metadata": {"name": "rack-7"}, "flavor": "f", "capacity": {"cpu": "64"}, "failed": false}
  ],
  "inventoryComplete": true
}`

func TestParseRecorded(t *testing.T) {
	got, complete, err := ParseRecorded(recordedJSON)
	if err != nil || !complete {
		t.Fatalf("%v %v", complete, err)
	}
	want := Recorded{Name: "a/f", Flavor: "f", Capacity: []Amount{{"cpu", 3500}, {"memory", 16 << 30 * 1000}, {"nvidia.com/gpu", 8000}}}
	if !reflect.DeepEqual(got["a/f"], want) || !got["b/f"].Failed || len(got) != 3 {
		t.Fatalf("%+v", got)
	}
	if _, _, err := ParseRecorded(`{"items": [{"metadata": {"name": "x/f"}, "capacity": {"cpu": "lots"}}]}`); err == nil {
		t.Fatal("an unreadable quantity was taken")
	}
}

func summary(changes []Change) []string {
	var out []string
	for _, c := range changes {
		out = append(out, c.Kind.String()+" "+c.Name)
	}
	return out
}

// The plan: new nodes reported (failed when not healthy), recoveries, capacity changes,
// failures, the bridge's nodes no longer desired failed; nothing for what the ledger holds
// already, for a failed node's capacity, or for a node reported by admitctl.
func TestPlan(t *testing.T) {
	cpu := func(milli int64) []Amount { return []Amount{{"cpu", milli}} }
	desired := []Desired{
		{Name: "new/f", Node: "new", Flavor: "f", Capacity: cpu(8000)},
		{Name: "new-down/f", Node: "new-down", Flavor: "f", Capacity: cpu(8000), Failed: true},
		{Name: "same/f", Node: "same", Flavor: "f", Capacity: cpu(8000)},
		{Name: "grown/f", Node: "grown", Flavor: "f", Capacity: cpu(16000)},
		{Name: "back/f", Node: "back", Flavor: "f", Capacity: cpu(8000)},
		{Name: "down/f", Node: "down", Flavor: "f", Capacity: cpu(8000), Failed: true},
		{Name: "still-down/f", Node: "still-down", Flavor: "f", Capacity: cpu(4000), Failed: true},
		{Name: "no-allocatable/f", Node: "no-allocatable", Flavor: "f"},
	}
	recorded := map[string]Recorded{
		"same/f":           {Name: "same/f", Flavor: "f", Capacity: cpu(8000)},
		"grown/f":          {Name: "grown/f", Flavor: "f", Capacity: cpu(8000)},
		"back/f":           {Name: "back/f", Flavor: "f", Capacity: cpu(8000), Failed: true},
		"down/f":           {Name: "down/f", Flavor: "f", Capacity: cpu(8000)},
		"still-down/f":     {Name: "still-down/f", Flavor: "f", Capacity: cpu(8000), Failed: true},
		"no-allocatable/f": {Name: "no-allocatable/f", Flavor: "f", Capacity: cpu(8000)},
		"deleted/f":        {Name: "deleted/f", Flavor: "f", Capacity: cpu(8000)},
		"deleted-down/f":   {Name: "deleted-down/f", Flavor: "f", Failed: true},
		"rack-7":           {Name: "rack-7", Flavor: "f", Capacity: cpu(8000)},
	}
	got := summary(Plan(desired, recorded))
	want := []string{"nodeRecovered back/f", "nodeCapacityChanged grown/f", "nodeCapacityChanged new/f",
		"nodeFailed deleted/f", "nodeFailed down/f", "nodeFailed new-down/f"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q\nwant %q", got, want)
	}
	// The ledger in step: nothing.
	if changes := Plan(desired[2:3], map[string]Recorded{"same/f": recorded["same/f"]}); len(changes) != 0 {
		t.Fatalf("%q", summary(changes))
	}
	deleted := Plan(nil, recorded)
	if deleted[0].Node != "deleted" || deleted[0].Flavor != "f" || deleted[0].Capacity != nil {
		t.Fatalf("%+v", deleted[0])
	}
}

// The events as admitctl's node command builds them, read back from their canonical bytes.
func TestChangeEvent(t *testing.T) {
	c := Change{Kind: Failed, Name: "gpu-1/a100", Node: "gpu-1", Flavor: "a100",
		Capacity: []Amount{{"cpu", 8000}, {"nvidia.com/gpu", 4000}}, InventoryComplete: true,
		Workloads: []WorkloadRef{{"ml", "job-train", "uid-1"}}}
	bytes, err := c.Event()
	if err != nil {
		t.Fatal(err)
	}
	event, err := ledger.ReadEvent(bytes)
	if err != nil {
		t.Fatal(err)
	}
	if event.Body().Which() != ledgerevents.Event_body_Which_nodeFailed {
		t.Fatalf("body %v", event.Body().Which())
	}
	n, _ := event.Body().NodeFailed()
	name, _ := n.Node()
	flavor, _ := n.Flavor()
	capacity, _ := n.Capacity()
	refs, _ := n.Workloads()
	gpu, _ := capacity.At(1).Name()
	ns, _ := refs.At(0).Namespace()
	wl, _ := refs.At(0).Name()
	uid, _ := refs.At(0).Uid()
	if name != "gpu-1/a100" || flavor != "a100" || capacity.Len() != 2 || gpu != "nvidia.com/gpu" ||
		capacity.At(1).Milli() != 4000 || !n.InventoryComplete() || refs.Len() != 1 ||
		ns != "ml" || wl != "job-train" || uid != "uid-1" {
		t.Fatalf("%s", n)
	}
	for kind, which := range map[Kind]ledgerevents.Event_body_Which{
		Recovered: ledgerevents.Event_body_Which_nodeRecovered, CapacityChanged: ledgerevents.Event_body_Which_nodeCapacityChanged} {
		// Only a failure names workloads (the ledger refuses them elsewhere).
		bytes, err := Change{Kind: kind, Name: "x/f", Flavor: "f", Workloads: c.Workloads}.Event()
		if err != nil {
			t.Fatal(err)
		}
		event, _ := ledger.ReadEvent(bytes)
		if event.Body().Which() != which {
			t.Fatalf("%v: body %v", kind, event.Body().Which())
		}
		if strings.Contains(event.String(), "job-train") {
			t.Fatalf("%v names workloads: %s", kind, event)
		}
	}
}

// A request id is the same for the same events after the same head, and differs for other
// events or a later head; it fits admitd's 128 bytes.
func TestRequestID(t *testing.T) {
	a, b := []byte("event a"), []byte("event b")
	id := RequestID(7, [][]byte{a, b})
	if id != RequestID(7, [][]byte{a, b}) || len(id) > 128 || !strings.HasPrefix(id, "admit-k8s/nodes/") {
		t.Fatalf("%q", id)
	}
	for _, other := range []string{RequestID(8, [][]byte{a, b}), RequestID(7, [][]byte{b, a}),
		RequestID(7, [][]byte{a}), RequestID(7, [][]byte{[]byte("event a\x00event b")})} {
		if other == id {
			t.Fatalf("%q for other calls", id)
		}
	}
}

func pod(namespace, name string, annotated bool, owner *metav1.OwnerReference, phase corev1.PodPhase) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Status: corev1.PodStatus{Phase: phase}}
	if annotated {
		p.Annotations = map[string]string{"admission-ledger.io/fencing-token": "uid/1"}
	}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return p
}

// The workloads of the pods on a node: pods of Jobs the bridge released (the token annotation,
// a Job as controller), not finished; one per Job, in namespace and name order.
func TestWorkloadsOf(t *testing.T) {
	yes := true
	job := func(name, uid string) *metav1.OwnerReference {
		return &metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: name, UID: types.UID("uid-" + uid), Controller: &yes}
	}
	got := WorkloadsOf([]corev1.Pod{
		pod("ml", "train-a", true, job("train", "t"), corev1.PodRunning),
		pod("ml", "train-b", true, job("train", "t"), corev1.PodPending),
		pod("ab", "eval-a", true, job("eval", "e"), corev1.PodRunning),
		pod("ml", "done-a", true, job("done", "d"), corev1.PodSucceeded),
		pod("ml", "failed-a", true, job("failed", "f"), corev1.PodFailed),
		pod("ml", "foreign-a", false, job("foreign", "x"), corev1.PodRunning),
		pod("ml", "bare", true, nil, corev1.PodRunning),
		pod("ml", "rs-a", true, &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", Controller: &yes}, corev1.PodRunning),
	})
	want := []WorkloadRef{{"ab", "job-eval", "uid-e"}, {"ml", "job-train", "uid-t"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
}

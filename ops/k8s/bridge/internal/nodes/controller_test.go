package nodes

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"admission-ledger/bridge/internal/ledger"
	"admission-ledger/bridge/internal/ledgerevents"
)

// nodeLedger keeps nodes as the engine does (projections/capacity.cc's NodeChanged) and
// answers `get nodes -o json` as ops/views/render.cc writes it; a request id it has seen is
// answered from its record.
type nodeLedger struct {
	nodes    map[string]Recorded
	complete bool
	// showTopology: the ledger keeps and shows nodes' labels, taints and non-TAS usage (engine
	// v26); else it shows none of them, as before.
	showTopology bool
	head         uint64
	ids          map[string]bool
	calls        int
	events       []string // "KIND NAME [workloads] [complete]", in order
}

func newNodeLedger() *nodeLedger {
	return &nodeLedger{nodes: map[string]Recorded{}, ids: map[string]bool{}}
}

func (l *nodeLedger) Head(context.Context) (uint64, error) { return l.head, nil }

func (l *nodeLedger) Get(_ context.Context, kind, format string) (string, error) {
	if kind != "nodes" || format != "json" {
		return "", &ledger.Refused{Code: ledger.CodeInvalidArgument, Message: "not expected"}
	}
	var items []any
	for _, n := range l.nodes {
		capacity := map[string]string{}
		for _, a := range n.Capacity {
			capacity[a.Name] = resource.NewMilliQuantity(a.Milli, resource.DecimalSI).String()
		}
		item := map[string]any{"kind": "Node", "metadata": map[string]any{"name": n.Name},
			"flavor": n.Flavor, "capacity": capacity, "failed": n.Failed}
		if l.showTopology {
			renderTopology(item, n.Topology)
		}
		items = append(items, item)
	}
	text, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items,
		"inventoryComplete": l.complete})
	return string(text), err
}

func (l *nodeLedger) Record(_ context.Context, requestID string, inputs [][]byte) (ledger.Outcome, error) {
	l.calls++
	if l.ids[requestID] {
		return ledger.Outcome{Sequences: []uint64{l.head}, Retried: true}, nil
	}
	l.ids[requestID] = true
	var out ledger.Outcome
	for _, input := range inputs {
		event, err := ledger.ReadEvent(input)
		if err != nil {
			return ledger.Outcome{}, err
		}
		var n ledgerevents.NodeCapacity
		kind := event.Body().Which()
		switch kind {
		case ledgerevents.Event_body_Which_nodeCapacityChanged:
			n, err = event.Body().NodeCapacityChanged()
		case ledgerevents.Event_body_Which_nodeFailed:
			n, err = event.Body().NodeFailed()
		case ledgerevents.Event_body_Which_nodeRecovered:
			n, err = event.Body().NodeRecovered()
		default:
			return ledger.Outcome{}, &ledger.Refused{Code: ledger.CodeInvalidArgument, Message: kind.String()}
		}
		if err != nil {
			return ledger.Outcome{}, err
		}
		name, _ := n.Node()
		flavor, _ := n.Flavor()
		r := l.nodes[name]
		r.Name = name
		if flavor != "" {
			r.Flavor = flavor
		}
		if list, _ := n.Capacity(); list.Len() > 0 {
			r.Capacity = nil
			for i := 0; i < list.Len(); i++ {
				resource, _ := list.At(i).Name()
				r.Capacity = append(r.Capacity, Amount{resource, list.At(i).Milli()})
			}
		}
		r.Failed = kind == ledgerevents.Event_body_Which_nodeFailed
		keepTopology(n, &r)
		l.nodes[name] = r
		summary := kind.String() + " " + name
		if refs, _ := n.Workloads(); refs.Len() > 0 {
			for i := 0; i < refs.Len(); i++ {
				ns, _ := refs.At(i).Namespace()
				wl, _ := refs.At(i).Name()
				summary += " " + ns + "/" + wl
			}
		}
		if n.InventoryComplete() {
			l.complete = true
			summary += " complete"
		}
		l.events = append(l.events, summary)
		l.head++
		out.Sequences = append(out.Sequences, l.head)
		out.Unchanged = append(out.Unchanged, false)
	}
	return out, nil
}

// renderTopology adds the node's labels, taints and non-TAS usage as the ledger's `get nodes -o
// json` shows them from engine v26.
func renderTopology(item map[string]any, t Topology) {
	labels := map[string]string{}
	for _, l := range t.Labels {
		labels[l.Key] = l.Value
	}
	taints := []any{}
	for _, taint := range t.Taints {
		taints = append(taints, map[string]any{"key": taint.Key, "value": taint.Value, "effect": taint.Effect})
	}
	usage := map[string]string{}
	for _, a := range t.NonTas {
		usage[a.Name] = resource.NewMilliQuantity(a.Milli, resource.DecimalSI).String()
	}
	item["labels"], item["taints"], item["nonTasUsage"] = labels, taints, usage
}

// keepTopology takes the event's labels, taints and non-TAS usage, those it sets.
func keepTopology(n ledgerevents.NodeCapacity, r *Recorded) {
	if n.HasLabels() {
		list, _ := n.Labels()
		r.Topology.Labels = []Label{}
		for i := 0; i < list.Len(); i++ {
			k, _ := list.At(i).Key()
			v, _ := list.At(i).Value()
			r.Topology.Labels = append(r.Topology.Labels, Label{k, v})
		}
	}
	if n.HasTaints() {
		list, _ := n.Taints()
		r.Topology.Taints = []Taint{}
		for i := 0; i < list.Len(); i++ {
			k, _ := list.At(i).Key()
			v, _ := list.At(i).Value()
			e, _ := list.At(i).Effect()
			r.Topology.Taints = append(r.Topology.Taints, Taint{k, v, e})
		}
	}
	if n.HasNonTasUsage() {
		list, _ := n.NonTasUsage()
		r.Topology.NonTas = []Amount{}
		for i := 0; i < list.Len(); i++ {
			name, _ := list.At(i).Name()
			r.Topology.NonTas = append(r.Topology.NonTas, Amount{name, list.At(i).Milli()})
		}
	}
}

func testFlavor(name string, labels map[string]any) *unstructured.Unstructured {
	f := &unstructured.Unstructured{}
	f.SetGroupVersionKind(flavorGVK)
	f.SetName(name)
	f.Object["spec"] = map[string]any{"nodeLabels": labels}
	return f
}

func cluster(objects ...client.Object) client.Client {
	return fake.NewClientBuilder().WithObjects(objects...).
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string {
			return []string{o.(*corev1.Pod).Spec.NodeName}
		}).Build()
}

func reconcileOnce(t *testing.T, c client.Client, l *nodeLedger) []string {
	t.Helper()
	before := len(l.events)
	r := &Reconciler{Client: c, Pods: c, Ledger: l}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{}); err != nil {
		t.Fatal(err)
	}
	return l.events[before:]
}

func setReady(t *testing.T, c client.Client, name string, status corev1.ConditionStatus) {
	t.Helper()
	n := &corev1.Node{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, n); err != nil {
		t.Fatal(err)
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}
	if err := c.Status().Update(context.Background(), n); err != nil {
		t.Fatal(err)
	}
}

// The whole flow against a ledger that keeps nodes as the engine does: the first reconcile
// reports every node of a flavor and completes the inventory with its last event; a node
// matching no flavor is not reported; a failed node names the workloads of the pods on it; a
// reconcile in step, or a restarted bridge, sends nothing; recovery, a second failure of the
// same node and a deletion are each recorded.
func TestReconcileKeepsTheLedgerInStep(t *testing.T) {
	yes := true
	c := cluster(
		testFlavor("a100", map[string]any{"gpu": "a100"}),
		node("gpu-1", map[string]string{"gpu": "a100"}, corev1.ConditionTrue),
		node("gpu-2", map[string]string{"gpu": "a100"}, corev1.ConditionFalse),
		node("plain", nil, corev1.ConditionTrue),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train-0",
			Annotations:     map[string]string{"admission-ledger.io/fencing-token": "uid-t/1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "uid-t", Controller: &yes}}},
			Spec: corev1.PodSpec{NodeName: "gpu-2"}},
	)
	l := newNodeLedger()
	got := reconcileOnce(t, c, l)
	want := []string{"nodeCapacityChanged gpu-1/a100 complete", "nodeFailed gpu-2/a100 ml/job-train"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("first reconcile: %q\nwant %q", got, want)
	}
	if l.nodes["gpu-1/a100"].Capacity[0] != (Amount{"cpu", 8000}) {
		t.Fatalf("capacity %v", l.nodes["gpu-1/a100"].Capacity)
	}
	calls := l.calls
	if got := reconcileOnce(t, c, l); len(got) != 0 || l.calls != calls {
		t.Fatalf("a reconcile in step recorded %q (%d calls)", got, l.calls-calls)
	}
	setReady(t, c, "gpu-2", corev1.ConditionTrue)
	if got := reconcileOnce(t, c, l); !reflect.DeepEqual(got, []string{"nodeRecovered gpu-2/a100"}) {
		t.Fatalf("recovery: %q", got)
	}
	setReady(t, c, "gpu-2", corev1.ConditionUnknown)
	if got := reconcileOnce(t, c, l); !reflect.DeepEqual(got, []string{"nodeFailed gpu-2/a100 ml/job-train"}) {
		t.Fatalf("second failure: %q", got)
	}
	if err := c.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"}}); err != nil {
		t.Fatal(err)
	}
	if got := reconcileOnce(t, c, l); !reflect.DeepEqual(got, []string{"nodeFailed gpu-1/a100"}) {
		t.Fatalf("deletion: %q", got)
	}
}

// The change that completes the inventory: the last healthy report of the last call, or its
// last change.
func TestCompleting(t *testing.T) {
	of := func(kinds ...Kind) []Change {
		var out []Change
		for _, k := range kinds {
			out = append(out, Change{Kind: k})
		}
		return out
	}
	if got := Completing(of(CapacityChanged, Recovered, Failed, Failed)); got != 1 {
		t.Errorf("%d", got)
	}
	if got := Completing(of(Failed, Failed)); got != 1 {
		t.Errorf("%d", got)
	}
	// Two calls, the second of failures only: its last change.
	long := of(make([]Kind, EventsPerCall)...)
	long = append(long, of(Failed, Failed)...)
	if got := Completing(long); got != EventsPerCall+1 {
		t.Errorf("%d", got)
	}
}

// A ledger in step but not complete (a bridge stopped between its reports and the last one):
// one report of a node as it is, healthy first, carries inventoryComplete.
func TestReconcileCompletesAnInventoryInStep(t *testing.T) {
	c := cluster(testFlavor("a100", map[string]any{"gpu": "a100"}),
		node("gpu-1", map[string]string{"gpu": "a100"}, corev1.ConditionFalse),
		node("gpu-2", map[string]string{"gpu": "a100"}, corev1.ConditionTrue))
	l := newNodeLedger()
	l.nodes["gpu-1/a100"] = Recorded{Name: "gpu-1/a100", Flavor: "a100", Capacity: []Amount{{"cpu", 8000}}, Failed: true}
	l.nodes["gpu-2/a100"] = Recorded{Name: "gpu-2/a100", Flavor: "a100", Capacity: []Amount{{"cpu", 8000}}}
	got := reconcileOnce(t, c, l)
	if !reflect.DeepEqual(got, []string{"nodeCapacityChanged gpu-2/a100 complete"}) {
		t.Fatalf("%q", got)
	}
	if got := reconcileOnce(t, c, l); len(got) != 0 {
		t.Fatalf("%q", got)
	}
	// An empty cluster completes nothing: no node, nothing to bound.
	empty := newNodeLedger()
	if got := reconcileOnce(t, cluster(), empty); len(got) != 0 || empty.complete {
		t.Fatalf("%q", got)
	}
}

// A flavor's nodeLabels changed: the nodes that no longer match fail, the ones that now do
// are reported.
func TestReconcileFollowsTheFlavors(t *testing.T) {
	flavor := testFlavor("pool", map[string]any{"pool": "a"})
	c := cluster(flavor,
		node("n-a", map[string]string{"pool": "a"}, corev1.ConditionTrue),
		node("n-b", map[string]string{"pool": "b"}, corev1.ConditionTrue))
	l := newNodeLedger()
	reconcileOnce(t, c, l)
	stored := testFlavor("pool", nil)
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(flavor), stored); err != nil {
		t.Fatal(err)
	}
	stored.Object["spec"] = map[string]any{"nodeLabels": map[string]any{"pool": "b"}}
	if err := c.Update(context.Background(), stored); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(reconcileOnce(t, c, l), ", ")
	if got != "nodeCapacityChanged n-b/pool, nodeFailed n-a/pool" {
		t.Fatalf("%s", got)
	}
}

// boundPod is a pod bound to node (none: "") requesting cpu, owned by nothing the bridge knows.
func boundPod(name, node, cpu string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: annotations},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse(cpu)}}}}}}
}

// Topology-aware scheduling's node inputs (docs/tas.md): every report carries the node's labels,
// its taints that keep pods off it and the non-TAS usage of the pods bound to it (not a TAS
// pod's, not a finished pod's, not an unbound one's; one `pods` each). A ledger that shows them
// gets a node again when its labels, taints or non-TAS usage change, and nothing when they
// did not; a ledger that does not show them (before engine v26) gets nothing more.
func TestReconcileReportsLabelsTaintsAndNonTasUsage(t *testing.T) {
	gpu := node("gpu-1", map[string]string{"gpu": "a100", "rack": "r1"}, corev1.ConditionTrue)
	gpu.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}
	flavor := testFlavor("a100", map[string]any{"gpu": "a100"})
	flavor.Object["spec"].(map[string]any)["tolerations"] = []any{map[string]any{"key": "nvidia.com/gpu", "operator": "Exists"}}
	done := boundPod("done", "gpu-1", "4", nil)
	done.Status.Phase = corev1.PodSucceeded
	c := cluster(flavor, gpu, boundPod("daemon", "gpu-1", "250m", nil), boundPod("unbound", "", "1", nil), done,
		boundPod("tas", "gpu-1", "2", map[string]string{"kueue.x-k8s.io/podset-required-topology": "rack"}))
	l := newNodeLedger()
	l.showTopology = true
	reconcileOnce(t, c, l)
	got := l.nodes["gpu-1/a100"].Topology
	want := Topology{Labels: []Label{{"gpu", "a100"}, {"rack", "r1"}},
		Taints: []Taint{{"nvidia.com/gpu", "present", "NoSchedule"}}, NonTas: []Amount{{"cpu", 250}, {"pods", 1000}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("reported %+v\nwant %+v", got, want)
	}
	if got := reconcileOnce(t, c, l); len(got) != 0 {
		t.Fatalf("in step: %q", got)
	}
	// Another non-TAS pod lands on the node: its usage is reported again.
	if err := c.Create(context.Background(), boundPod("other", "gpu-1", "1", nil)); err != nil {
		t.Fatal(err)
	}
	if got := reconcileOnce(t, c, l); !reflect.DeepEqual(got, []string{"nodeCapacityChanged gpu-1/a100"}) {
		t.Fatalf("a new pod: %q", got)
	}
	if got := l.nodes["gpu-1/a100"].Topology.NonTas; !reflect.DeepEqual(got, []Amount{{"cpu", 1250}, {"pods", 2000}}) {
		t.Fatalf("usage %v", got)
	}
	// A label changes.
	stored := &corev1.Node{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "gpu-1"}, stored); err != nil {
		t.Fatal(err)
	}
	stored.Labels["rack"] = "r2"
	if err := c.Update(context.Background(), stored); err != nil {
		t.Fatal(err)
	}
	if got := reconcileOnce(t, c, l); !reflect.DeepEqual(got, []string{"nodeCapacityChanged gpu-1/a100"}) {
		t.Fatalf("a label: %q", got)
	}
	// A ledger that does not show them is not sent them again.
	l.showTopology = false
	if err := c.Create(context.Background(), boundPod("third", "gpu-1", "1", nil)); err != nil {
		t.Fatal(err)
	}
	if got := reconcileOnce(t, c, l); len(got) != 0 {
		t.Fatalf("a ledger that shows no usage: %q", got)
	}
}

// Effective requests as the scheduler counts them: containers and sidecars together, an init
// container's need beside the sidecars started before it when larger, pod-level requests, the
// overhead.
func TestPodRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	req := func(cpu string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse(cpu)}}
	}
	spec := corev1.PodSpec{
		Containers:     []corev1.Container{{Resources: req("1")}, {Resources: req("500m")}},
		InitContainers: []corev1.Container{{Resources: req("100m"), RestartPolicy: &always}, {Resources: req("3")}},
		Overhead:       corev1.ResourceList{"cpu": resource.MustParse("10m")},
	}
	// max(1 + 0.5 + 0.1 sidecar, 3 + 0.1) + 0.01
	if got := PodRequests(&spec)["cpu"]; got.MilliValue() != 3110 {
		t.Fatalf("cpu %s, want 3110m", got.String())
	}
	spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("4")}}
	if got := PodRequests(&spec)["cpu"]; got.MilliValue() != 4010 {
		t.Fatalf("pod-level: cpu %s, want 4010m", got.String())
	}
}

// The ledger's nodes with labels, taints and non-TAS usage (engine v26) read back; a report
// differs only in what the ledger shows.
func TestParseRecordedTopology(t *testing.T) {
	got, _, err := ParseRecorded(`{"items": [{"metadata": {"name": "a/f"}, "flavor": "f",
		"capacity": {"cpu": "8"}, "labels": {"rack": "r1", "block": "b1"},
		"taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}],
		"nonTasUsage": {"cpu": "250m", "pods": "1"}}, {"metadata": {"name": "b/f"}, "flavor": "f"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	a := got["a/f"]
	want := Topology{Labels: []Label{{"block", "b1"}, {"rack", "r1"}}, Taints: []Taint{{"gpu", "yes", "NoSchedule"}},
		NonTas: []Amount{{"cpu", 250}, {"pods", 1000}}}
	if !reflect.DeepEqual(a.Topology, want) || a.Shows != (Shown{true, true, true}) {
		t.Fatalf("%+v", a)
	}
	if b := got["b/f"]; b.Shows != (Shown{}) {
		t.Fatalf("%+v", b)
	}
	d := Desired{Name: "b/f", Node: "b", Flavor: "f", Topology: want}
	if changes := Plan([]Desired{d}, map[string]Recorded{"b/f": got["b/f"]}); len(changes) != 0 {
		t.Fatalf("a ledger showing no topology: %q", summary(changes))
	}
	d.Name, d.Node = "a/f", "a"
	d.Topology.NonTas = []Amount{{"cpu", 250}}
	changes := Plan([]Desired{d}, map[string]Recorded{"a/f": a})
	if len(changes) != 1 || changes[0].Kind != CapacityChanged || changes[0].Topology == nil {
		t.Fatalf("%+v", changes)
	}
	bytes, err := changes[0].Event()
	if err != nil {
		t.Fatal(err)
	}
	event, _ := ledger.ReadEvent(bytes)
	n, _ := event.Body().NodeCapacityChanged()
	var r Recorded
	keepTopology(n, &r)
	if !reflect.DeepEqual(r.Topology, d.Topology) {
		t.Fatalf("event carries %+v, want %+v", r.Topology, d.Topology)
	}
}

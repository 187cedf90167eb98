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
	head     uint64
	ids      map[string]bool
	calls    int
	events   []string // "KIND NAME [workloads] [complete]", in order
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
		items = append(items, map[string]any{"kind": "Node", "metadata": map[string]any{"name": n.Name},
			"flavor": n.Flavor, "capacity": capacity, "failed": n.Failed})
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

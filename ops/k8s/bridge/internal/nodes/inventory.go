// Package nodes forwards the cluster's Node objects to the ledger as its node model reads them
// (docs/semantics.md, "Node capacity"; docs/k8s.md, "Node inventory"): each node's allocatable
// under each ResourceFlavor whose pods can land on it (nodeCapacityChanged), a node NotReady,
// cordoned or deleted (nodeFailed, naming the workloads whose pods are on it), a node back
// (nodeRecovered), and, once the first full list of nodes is in the ledger, that the inventory
// is complete.
//
// This file holds the pure parts: which flavors a node belongs to, what the ledger should hold
// for it, how that differs from what the ledger holds, and the events that close the gap.
package nodes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"

	"admission-ledger/bridge/internal/ledger"
	"admission-ledger/bridge/internal/ledgerevents"
)

// Separator joins a cluster node's name and a flavor's into the name of a node in the ledger,
// "NODE/FLAVOR". Kubernetes node names never hold it, so a ledger node named with it is the
// bridge's (admitctl node reports of platforms without Kubernetes use plain names).
const Separator = "/"

// LedgerName is the ledger's name for a cluster node's capacity under one flavor.
func LedgerName(node, flavor string) string { return node + Separator + flavor }

// Owned says whether a ledger node is one the bridge reports (LedgerName's form), and returns
// the cluster node's name.
func Owned(ledgerName string) (string, bool) {
	node, _, found := strings.Cut(ledgerName, Separator)
	return node, found && node != ""
}

// Flavor is what the bridge reads of a ResourceFlavor: its name, spec.nodeLabels and
// spec.tolerations.
type Flavor struct {
	Name        string
	NodeLabels  map[string]string
	Tolerations []corev1.Toleration
}

// ConditionTaintPrefix is the prefix of the taints Kubernetes puts on nodes for their
// conditions (not-ready, unreachable, unschedulable, memory-pressure, out-of-service...): they
// say a node is unhealthy (Healthy), not which flavors it serves, so matching ignores them.
const ConditionTaintPrefix = "node.kubernetes.io/"

// Matches: a pod admitted on the flavor can land on the node. The node carries every one of
// the flavor's nodeLabels (the node selector such a pod gets; a flavor without nodeLabels:
// every node), and the flavor's tolerations (which such a pod gets too) tolerate each of the
// node's NoSchedule and NoExecute taints, those of its conditions aside (a GPU node's
// nvidia.com/gpu taint keeps it out of a CPU flavor without that toleration).
func (f Flavor) Matches(labels map[string]string, taints []corev1.Taint) bool {
	for k, v := range f.NodeLabels {
		if have, ok := labels[k]; !ok || have != v {
			return false
		}
	}
	for i := range taints {
		taint := &taints[i]
		if !Repelling(taint) {
			continue
		}
		tolerated := false
		for j := range f.Tolerations {
			// Without the comparison operators (Gt, Lt: alpha in Kubernetes 1.35, off here).
			tolerated = tolerated || f.Tolerations[j].ToleratesTaint(klog.Background(), taint, false)
		}
		if !tolerated {
			return false
		}
	}
	return true
}

// Repelling: a taint that keeps pods without a toleration off the node, other than a
// condition's.
func Repelling(t *corev1.Taint) bool {
	return (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) &&
		!strings.HasPrefix(t.Key, ConditionTaintPrefix)
}

// SchedulingTaints are the node's taints that matching reads (Repelling), in their order.
func SchedulingTaints(taints []corev1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for i := range taints {
		if Repelling(&taints[i]) {
			out = append(out, taints[i])
		}
	}
	return out
}

// MatchingFlavors are the names, in name order, of the flavors a node with these labels and
// taints belongs to.
func MatchingFlavors(labels map[string]string, taints []corev1.Taint, flavors []Flavor) []string {
	var names []string
	for _, f := range flavors {
		if f.Matches(labels, taints) {
			names = append(names, f.Name)
		}
	}
	sort.Strings(names)
	return names
}

// Amount is one resource of a node's capacity in thousandths, as the ledger counts every
// quantity (1 cpu is 1000, 1Ki of memory 1024000).
type Amount struct {
	Name  string
	Milli int64
}

// Capacity is a node's allocatable in resource name order. A quantity too large for the
// ledger's thousandths in an int64 (beyond 9.2e15 units) is left out, as if the node did not
// have the resource.
func Capacity(allocatable corev1.ResourceList) []Amount {
	out := make([]Amount, 0, len(allocatable))
	for name, q := range allocatable {
		if q.Sign() < 0 || q.CmpInt64(math.MaxInt64/1000) > 0 {
			continue
		}
		out = append(out, Amount{Name: string(name), Milli: q.MilliValue()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Healthy says whether pods may run on the node: its Ready condition is True, it is not
// cordoned (spec.unschedulable) and not being deleted; otherwise why not.
func Healthy(node *corev1.Node) (bool, string) {
	if node.DeletionTimestamp != nil {
		return false, "being deleted"
	}
	if node.Spec.Unschedulable {
		return false, "cordoned"
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return true, ""
			}
			return false, "Ready is " + string(c.Status)
		}
	}
	return false, "no Ready condition"
}

// Label is one of a node's labels.
type Label struct{ Key, Value string }

// Taint is one of a node's taints as the ledger keeps it.
type Taint struct{ Key, Value, Effect string }

// Topology is what topology-aware scheduling reads of a node (docs/tas.md, "Inputs"): its
// labels in key order, its taints that keep pods off it (SchedulingTaints), and NonTas, what
// the pods bound to it that were not admitted through TAS request (NonTasUsage).
type Topology struct {
	Labels []Label
	Taints []Taint
	NonTas []Amount
}

// TopologyOf is the node's labels and scheduling taints, with the non-TAS usage given.
func TopologyOf(node *corev1.Node, nonTas []Amount) Topology {
	t := Topology{Labels: []Label{}, Taints: []Taint{}, NonTas: nonTas}
	if t.NonTas == nil {
		t.NonTas = []Amount{}
	}
	for k, v := range node.Labels {
		t.Labels = append(t.Labels, Label{k, v})
	}
	sort.Slice(t.Labels, func(i, j int) bool { return t.Labels[i].Key < t.Labels[j].Key })
	for _, taint := range SchedulingTaints(node.Spec.Taints) {
		t.Taints = append(t.Taints, Taint{taint.Key, taint.Value, string(taint.Effect)})
	}
	return t
}

// Desired is what the ledger should hold of one node under one flavor.
type Desired struct {
	Name     string // in the ledger: LedgerName(Node, Flavor)
	Node     string // the cluster node
	Flavor   string
	Capacity []Amount
	Failed   bool
	Topology Topology
}

// DesiredOf is what the ledger should hold of a node whose non-TAS pods request nonTas: one
// entry per matching flavor, in flavor name order; none when it matches no flavor.
func DesiredOf(node *corev1.Node, flavors []Flavor, nonTas []Amount) []Desired {
	healthy, _ := Healthy(node)
	capacity := Capacity(node.Status.Allocatable)
	var out []Desired
	for _, flavor := range MatchingFlavors(node.Labels, node.Spec.Taints, flavors) {
		out = append(out, Desired{Name: LedgerName(node.Name, flavor), Node: node.Name,
			Flavor: flavor, Capacity: capacity, Failed: !healthy, Topology: TopologyOf(node, nonTas)})
	}
	return out
}

// Recorded is what the ledger holds of a node (`get nodes -o json`, ops/views/render.cc).
// Topology's parts are those the ledger shows (Shows): a ledger before engine v26 shows none,
// and what it does not show is not compared.
type Recorded struct {
	Name     string
	Flavor   string
	Capacity []Amount
	Failed   bool
	Topology Topology
	Shows    Shown
}

// Shown says which parts of a node's Topology the ledger's `get nodes -o json` has.
type Shown struct{ Labels, Taints, NonTas bool }

// ledgerNodeJSON is one node of the ledger's `get nodes -o json`. labels, taints and nonTasUsage
// (engine v26) are absent from a ledger that does not keep them.
type ledgerNodeJSON struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Flavor   string             `json:"flavor"`
	Capacity map[string]string  `json:"capacity"`
	Failed   bool               `json:"failed"`
	Labels   *map[string]string `json:"labels"`
	Taints   *[]struct {
		Key    string `json:"key"`
		Value  string `json:"value"`
		Effect string `json:"effect"`
	} `json:"taints"`
	NonTasUsage *map[string]string `json:"nonTasUsage"`
}

// ParseRecorded reads the ledger's `get nodes -o json`: its nodes by name, and whether a report
// said the node inventory is complete.
func ParseRecorded(text string) (map[string]Recorded, bool, error) {
	var list struct {
		InventoryComplete bool             `json:"inventoryComplete"`
		Items             []ledgerNodeJSON `json:"items"`
	}
	if err := json.Unmarshal([]byte(text), &list); err != nil {
		return nil, false, fmt.Errorf("the ledger's nodes are not a JSON List: %w", err)
	}
	out := make(map[string]Recorded, len(list.Items))
	for _, item := range list.Items {
		r := Recorded{Name: item.Metadata.Name, Flavor: item.Flavor, Failed: item.Failed}
		var err error
		if r.Capacity, err = parseAmounts(r.Name, item.Capacity); err != nil {
			return nil, false, err
		}
		if err := r.readTopology(&item); err != nil {
			return nil, false, err
		}
		out[r.Name] = r
	}
	return out, list.InventoryComplete, nil
}

// readTopology takes the parts of the node's topology that the ledger shows.
func (r *Recorded) readTopology(item *ledgerNodeJSON) error {
	if item.Labels != nil {
		r.Shows.Labels = true
		r.Topology.Labels = []Label{}
		for k, v := range *item.Labels {
			r.Topology.Labels = append(r.Topology.Labels, Label{k, v})
		}
		sort.Slice(r.Topology.Labels, func(i, j int) bool { return r.Topology.Labels[i].Key < r.Topology.Labels[j].Key })
	}
	if item.Taints != nil {
		r.Shows.Taints = true
		r.Topology.Taints = []Taint{}
		for _, t := range *item.Taints {
			r.Topology.Taints = append(r.Topology.Taints, Taint{t.Key, t.Value, t.Effect})
		}
	}
	if item.NonTasUsage != nil {
		r.Shows.NonTas = true
		var err error
		if r.Topology.NonTas, err = parseAmounts(r.Name, *item.NonTasUsage); err != nil {
			return err
		}
	}
	return nil
}

// parseAmounts reads quantities by resource name into amounts in name order.
func parseAmounts(node string, quantities map[string]string) ([]Amount, error) {
	out := []Amount{}
	for name, text := range quantities {
		q, err := resource.ParseQuantity(text)
		if err != nil {
			return nil, fmt.Errorf("the ledger's node %s: %s=%q: %w", node, name, text, err)
		}
		out = append(out, Amount{Name: name, Milli: q.MilliValue()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// topologyDiffers: a part of the node's topology that the ledger shows is not the desired one.
func topologyDiffers(d Desired, r Recorded) bool {
	return (r.Shows.Labels && !slicesEqual(d.Topology.Labels, r.Topology.Labels)) ||
		(r.Shows.Taints && !slicesEqual(d.Topology.Taints, r.Topology.Taints)) ||
		(r.Shows.NonTas && !sameAmounts(d.Topology.NonTas, r.Topology.NonTas))
}

func slicesEqual[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Kind of a node event.
type Kind int

// The three node events of schema/events.capnp, in the order a plan sends them: nodes coming
// back and capacity reports first, failures last, so that a node that changes flavors never
// counts for neither on the way.
const (
	Recovered Kind = iota
	CapacityChanged
	Failed
)

func (k Kind) String() string {
	switch k {
	case Recovered:
		return "nodeRecovered"
	case CapacityChanged:
		return "nodeCapacityChanged"
	}
	return "nodeFailed"
}

// WorkloadRef names a workload whose pods are on a failed node.
type WorkloadRef struct {
	Namespace, Name, UID string
}

// Change is one node event to record.
type Change struct {
	Kind     Kind
	Name     string // the ledger's node name
	Node     string // the cluster node
	Flavor   string
	Capacity []Amount // empty: the ledger keeps the capacity it holds
	// Topology is sent with a report of a node's capacity or recovery (nil: not).
	Topology *Topology
	// Failed only: the workloads whose pods are on the node (nil: none known).
	Workloads         []WorkloadRef
	InventoryComplete bool
}

// Plan lists the events that bring the ledger's nodes to the desired ones: a node it does not
// hold is reported (failed if it is not healthy: a node that appears never evicts), a healthy
// node it holds as failed recovers, a changed capacity (or labels, taints or non-TAS usage,
// those the ledger shows: topologyDiffers) is reported again, a node no longer
// healthy fails, and a node of the bridge's (Owned) that is no longer desired (deleted, or its
// labels or the flavor's nodeLabels changed) fails. The capacity of a node the ledger holds as
// failed is reported when it recovers. Recovered first, then capacity reports, then failures;
// each in name order.
func Plan(desired []Desired, recorded map[string]Recorded) []Change {
	var changes []Change
	wanted := make(map[string]bool, len(desired))
	for _, d := range desired {
		wanted[d.Name] = true
		r, known := recorded[d.Name]
		change := Change{Name: d.Name, Node: d.Node, Flavor: d.Flavor, Capacity: d.Capacity,
			Topology: &d.Topology}
		switch {
		case !known && d.Failed, known && d.Failed && !r.Failed:
			change.Kind = Failed
		case !known:
			change.Kind = CapacityChanged
		case d.Failed:
			continue // failed in both
		case r.Failed:
			change.Kind = Recovered
		case r.Flavor != d.Flavor || (len(d.Capacity) > 0 && !sameAmounts(r.Capacity, d.Capacity)) ||
			topologyDiffers(d, r):
			change.Kind = CapacityChanged
		default:
			continue
		}
		changes = append(changes, change)
	}
	for name, r := range recorded {
		node, owned := Owned(name)
		if !owned || wanted[name] || r.Failed {
			continue
		}
		changes = append(changes, Change{Kind: Failed, Name: name, Node: node, Flavor: r.Flavor})
	}
	sort.SliceStable(changes, func(i, j int) bool {
		if changes[i].Kind != changes[j].Kind {
			return changes[i].Kind < changes[j].Kind
		}
		return changes[i].Name < changes[j].Name
	})
	return changes
}

// Reassert is the report of a desired node as the ledger already holds it, which only carries
// InventoryComplete: the state it says is the one recorded (a failure names no workload).
func Reassert(d Desired) Change {
	kind := CapacityChanged
	if d.Failed {
		kind = Failed
	}
	return Change{Kind: kind, Name: d.Name, Node: d.Node, Flavor: d.Flavor, Capacity: d.Capacity,
		Topology: &d.Topology, InventoryComplete: true}
}

func sameAmounts(a, b []Amount) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Event is the change as the input `admitctl node capacity|fail|recover` records, in the
// canonical bytes admitd takes.
func (c Change) Event() ([]byte, error) {
	return ledger.BuildEvent(func(event ledgerevents.Event) error {
		var n ledgerevents.NodeCapacity
		var err error
		switch c.Kind {
		case Recovered:
			n, err = event.Body().NewNodeRecovered()
		case CapacityChanged:
			n, err = event.Body().NewNodeCapacityChanged()
		default:
			n, err = event.Body().NewNodeFailed()
		}
		if err != nil {
			return err
		}
		if err := n.SetNode(c.Name); err != nil {
			return err
		}
		if err := n.SetFlavor(c.Flavor); err != nil {
			return err
		}
		if len(c.Capacity) > 0 {
			list, err := n.NewCapacity(int32(len(c.Capacity)))
			if err != nil {
				return err
			}
			if err := setAmounts(list, c.Capacity); err != nil {
				return err
			}
		}
		if c.Topology != nil && c.Kind != Failed {
			if err := setTopology(n, c.Topology); err != nil {
				return err
			}
		}
		if c.InventoryComplete {
			n.SetInventoryComplete(true)
		}
		if c.Kind == Failed && len(c.Workloads) > 0 {
			refs, err := n.NewWorkloads(int32(len(c.Workloads)))
			if err != nil {
				return err
			}
			for i, w := range c.Workloads {
				if err := ledger.SetWorkloadRef(refs.At(i), w.Namespace, w.Name, w.UID); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// setAmounts fills list (of len(amounts)) with amounts.
func setAmounts(list ledgerevents.ResourceAmount_List, amounts []Amount) error {
	for i, a := range amounts {
		if err := list.At(i).SetName(a.Name); err != nil {
			return err
		}
		list.At(i).SetMilli(a.Milli)
	}
	return nil
}

// setTopology sets the node's labels, taints and non-TAS usage (engine v26): each list set,
// empty when the node has none (unset would say unknown).
func setTopology(n ledgerevents.NodeCapacity, t *Topology) error {
	labels, err := n.NewLabels(int32(len(t.Labels)))
	if err != nil {
		return err
	}
	for i, l := range t.Labels {
		if err := labels.At(i).SetKey(l.Key); err != nil {
			return err
		}
		if err := labels.At(i).SetValue(l.Value); err != nil {
			return err
		}
	}
	taints, err := n.NewTaints(int32(len(t.Taints)))
	if err != nil {
		return err
	}
	for i, taint := range t.Taints {
		at := taints.At(i)
		for _, set := range []struct {
			f func(string) error
			v string
		}{{at.SetKey, taint.Key}, {at.SetValue, taint.Value}, {at.SetEffect, taint.Effect}} {
			if err := set.f(set.v); err != nil {
				return err
			}
		}
	}
	usage, err := n.NewNonTasUsage(int32(len(t.NonTas)))
	if err != nil {
		return err
	}
	return setAmounts(usage, t.NonTas)
}

// RequestID names one record call of node events: the events' bytes and the ledger's head when
// they were planned. A retry of the call sends the same id and is answered from admitd's
// record; the same report made again later (a node failing a second time, after it recovered)
// follows a later head and is recorded anew. A restarted bridge plans from what the ledger
// holds, so it sends nothing already recorded.
func RequestID(head uint64, events [][]byte) string {
	h := sha256.New()
	h.Write([]byte(strconv.FormatUint(head, 10)))
	for _, e := range events {
		h.Write([]byte{0})
		h.Write([]byte(strconv.Itoa(len(e))))
		h.Write([]byte{0})
		h.Write(e)
	}
	return "admit-k8s/nodes/" + hex.EncodeToString(h.Sum(nil)[:16])
}

package ledger

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"admission-ledger/bridge/internal/conversion"
	"admission-ledger/bridge/internal/ledgerrpc"
	"admission-ledger/bridge/internal/podsetupdates"
)

// Phase is a workload's phase in the ledger (projections/engine.h's Phase).
type Phase int

// The phases, in the schema's order (schema/admission_rpc.capnp, WorkloadState.Phase).
const (
	PhasePending Phase = iota
	PhaseQuotaReserved
	PhaseAdmitted
	PhaseEvicting
	PhaseFinished
	PhaseRejected
	PhaseDeactivated
	PhaseDeleted
)

var phaseNames = [...]string{"Pending", "QuotaReserved", "Admitted", "Evicting", "Finished",
	"Rejected", "Deactivated", "Deleted"}

// String is the ledger's name of the phase, as `admitctl get workloads` shows it.
func (p Phase) String() string {
	if p < 0 || int(p) >= len(phaseNames) {
		return fmt.Sprintf("Phase(%d)", int(p))
	}
	return phaseNames[p]
}

// Ended: the workload holds no quota and never will again.
func (p Phase) Ended() bool {
	return p == PhaseFinished || p == PhaseRejected || p == PhaseDeactivated || p == PhaseDeleted
}

// WorkloadState is one workload as the ledger holds it (Ledger.workloadStates): what the
// decider decided, typed, and Kueue's status (Status) that the bridge mirrors into the Workload
// object unchanged.
type WorkloadState struct {
	Namespace, Name string
	// UID is the workload's uid in the ledger: its object's uid (the ledger's parser takes a
	// Job's metadata.uid), so an earlier object of the same name has another.
	UID        string
	Phase      Phase
	Generation int64 // the admission's generation (0: never reserved)
	// FencingToken is the current admission's token, in the ledger's form
	// (schema/fencing_token.h); the bridge compares and copies it, never builds one.
	FencingToken string
	// EvictingToken is the token of the admission being evicted, which the report that its
	// pods are gone carries ("" unless evicting).
	EvictingToken  string
	ClusterQueue   string
	PodSets        []PodSetAssignment
	Checks         []CheckState // by name
	PendingReason  string
	PendingMessage string
	PodsReady      bool // the runtime reported the current admission's pods ready
	PodsReleased   bool // evicting: the evicted admission's pods had been released
	// Active is Kueue's spec.active as the ledger holds it: false once deactivated, or while
	// evicted to be deactivated.
	Active bool
	// ImportedAdmission: generation 1 is an admission imported from Kueue (admitctl import, the
	// bridge's adoption): its pods ran before the ledger, released without its fencing token.
	ImportedAdmission bool
	// Status is Kueue's Workload .status as the ledger renders it (`get workloads -o json`),
	// integers as int64 as the API server's objects have them.
	Status map[string]any
}

// PodSetAssignment is one pod set's admission: its flavor per resource and count, and its
// placement when admitted through topology-aware scheduling (nil: none).
type PodSetAssignment struct {
	Name     string
	Count    int32
	Flavors  map[string]string
	Topology *TopologyAssignment
}

// TopologyAssignment is a pod set's placement (Kueue's v1beta1 TopologyAssignment; docs/tas.md):
// the node labels of the levels given, and per domain its values at those levels and its pods.
type TopologyAssignment struct {
	Levels  []string
	Domains []TopologyDomain
}

// TopologyDomain is one domain of a TopologyAssignment.
type TopologyDomain struct {
	Values []string
	Count  int32
}

// CheckState is one admission check's state in the ledger.
type CheckState struct {
	Name, State, Message string
	ReportSequence       uint64 // the report this state came from (0: none yet)
	RetryCount           uint32
	PodSetUpdates        []podsetupdates.PodSetUpdate
}

// Key is "NAMESPACE/NAME", the ledger's name of a workload.
func Key(namespace, name string) string { return namespace + "/" + name }

// Topology returns pod set podSet's topology assignment (nil: none).
func (w *WorkloadState) Topology(podSet string) *TopologyAssignment {
	for _, psa := range w.PodSets {
		if psa.Name == podSet {
			return psa.Topology
		}
	}
	return nil
}

// Assignment returns the flavors (resource -> flavor) and count of pod set podSet.
func (w *WorkloadState) Assignment(podSet string) (map[string]string, int32, bool) {
	for _, psa := range w.PodSets {
		if psa.Name == podSet {
			return psa.Flavors, psa.Count, true
		}
	}
	return nil, 0, false
}

// Check returns the check named name.
func (w *WorkloadState) Check(name string) (CheckState, bool) {
	for _, c := range w.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return CheckState{}, false
}

// WorkloadStates reads the named workloads ("NAMESPACE/NAME", at most 1024) at the ledger's
// head: the states of those it holds by name, and the head's sequence.
// Errors: *Refused (not allowed, too many names), or the transport's.
func (c *Client) WorkloadStates(ctx context.Context, names []string) (map[string]*WorkloadState, uint64, error) {
	l, err := c.connected(ctx)
	if err != nil {
		return nil, 0, err
	}
	defer l.Release()
	future, release := l.WorkloadStates(ctx, func(p ledgerrpc.Ledger_workloadStates_Params) error {
		list, err := p.NewNames(int32(len(names)))
		if err != nil {
			return err
		}
		for i, n := range names {
			if err := list.Set(i, n); err != nil {
				return err
			}
		}
		return nil
	})
	defer release()
	results, err := future.Struct()
	if err != nil {
		c.failed()
		return nil, 0, fmt.Errorf("workloadStates: %w", err)
	}
	if results.HasError() {
		e, err := results.Error()
		if err != nil {
			return nil, 0, fmt.Errorf("workloadStates: %w", err)
		}
		return nil, 0, refusedOf(e)
	}
	list, err := results.States()
	if err != nil {
		return nil, 0, fmt.Errorf("workloadStates: %w", err)
	}
	out := make(map[string]*WorkloadState, list.Len())
	for i := 0; i < list.Len(); i++ {
		state, err := workloadStateOf(list.At(i))
		if err != nil {
			return nil, 0, fmt.Errorf("workloadStates: %w", err)
		}
		out[Key(state.Namespace, state.Name)] = state
	}
	return out, results.Head(), nil
}

func workloadStateOf(s ledgerrpc.WorkloadState) (*WorkloadState, error) {
	var w WorkloadState
	var texts = []struct {
		field *string
		get   func() (string, error)
	}{{&w.Namespace, s.Namespace}, {&w.Name, s.Name}, {&w.UID, s.Uid},
		{&w.FencingToken, s.FencingToken}, {&w.EvictingToken, s.EvictingToken},
		{&w.ClusterQueue, s.ClusterQueue}, {&w.PendingReason, s.PendingReason},
		{&w.PendingMessage, s.PendingMessage}}
	for _, t := range texts {
		v, err := t.get()
		if err != nil {
			return nil, err
		}
		*t.field = v
	}
	w.Phase = Phase(s.Phase())
	w.Generation = int64(s.Generation())
	w.PodsReady, w.PodsReleased, w.Active = s.PodsReady(), s.PodsReleased(), s.Active()
	w.ImportedAdmission = s.ImportedAdmission()
	if err := readPodSets(s, &w); err != nil {
		return nil, err
	}
	if err := readChecks(s, &w); err != nil {
		return nil, err
	}
	status, err := s.Status()
	if err != nil {
		return nil, err
	}
	// utiljson keeps integers as int64, as the API server's objects have them, so that a
	// status copied from the ledger compares equal to the one read back.
	if err := utiljson.Unmarshal([]byte(status), &w.Status); err != nil {
		return nil, fmt.Errorf("the status of %s/%s is not JSON: %w", w.Namespace, w.Name, err)
	}
	if err := readTopology(&w); err != nil {
		return nil, fmt.Errorf("the status of %s/%s: %w", w.Namespace, w.Name, err)
	}
	return &w, nil
}

func readPodSets(s ledgerrpc.WorkloadState, w *WorkloadState) error {
	list, err := s.PodSets()
	if err != nil {
		return err
	}
	for i := 0; i < list.Len(); i++ {
		p := list.At(i)
		name, err := p.Name()
		if err != nil {
			return err
		}
		flavors, err := p.Flavors()
		if err != nil {
			return err
		}
		psa := PodSetAssignment{Name: name, Count: p.Count(), Flavors: map[string]string{}}
		for j := 0; j < flavors.Len(); j++ {
			resource, err1 := flavors.At(j).Resource()
			flavor, err2 := flavors.At(j).Flavor()
			if err1 != nil || err2 != nil {
				return fmt.Errorf("pod set %s: a flavor is unreadable", name)
			}
			psa.Flavors[resource] = flavor
		}
		w.PodSets = append(w.PodSets, psa)
	}
	return nil
}

// readTopology takes each pod set's topology assignment from the status the ledger shows
// (status.admission.podSetAssignments[].topologyAssignment, v1beta1's {levels, domains} or
// v1beta2's {levels, slices}): the workload-state RPC carries none of its own.
func readTopology(w *WorkloadState) error {
	list, _, _ := unstructured.NestedSlice(w.Status, "admission", "podSetAssignments")
	for _, e := range list {
		psa, _ := e.(map[string]any)
		ta, found := psa["topologyAssignment"]
		name, _ := psa["name"].(string)
		if !found || ta == nil {
			continue
		}
		text, err := json.Marshal(conversion.TopologyAssignmentV1beta1(ta))
		if err != nil {
			return err
		}
		var parsed struct {
			Levels  []string `json:"levels"`
			Domains []struct {
				Values []string `json:"values"`
				Count  int32    `json:"count"`
			} `json:"domains"`
		}
		if err := json.Unmarshal(text, &parsed); err != nil || len(parsed.Levels) == 0 {
			return fmt.Errorf("pod set %s: the topology assignment %s is not readable", name, text)
		}
		t := &TopologyAssignment{Levels: parsed.Levels}
		for _, d := range parsed.Domains {
			if len(d.Values) != len(t.Levels) {
				return fmt.Errorf("pod set %s: a domain of the topology assignment has %d values for %d levels",
					name, len(d.Values), len(t.Levels))
			}
			t.Domains = append(t.Domains, TopologyDomain{Values: d.Values, Count: d.Count})
		}
		for i := range w.PodSets {
			if w.PodSets[i].Name == name {
				w.PodSets[i].Topology = t
			}
		}
	}
	return nil
}

func readChecks(s ledgerrpc.WorkloadState, w *WorkloadState) error {
	list, err := s.Checks()
	if err != nil {
		return err
	}
	for i := 0; i < list.Len(); i++ {
		c := list.At(i)
		var cs CheckState
		var err1, err2, err3 error
		cs.Name, err1 = c.Name()
		cs.State, err2 = c.State()
		cs.Message, err3 = c.Message_()
		if err1 != nil || err2 != nil || err3 != nil {
			return fmt.Errorf("a check of %s/%s is unreadable", w.Namespace, w.Name)
		}
		cs.ReportSequence, cs.RetryCount = c.ReportSequence(), c.RetryCount()
		updates, err := c.PodSetUpdates()
		if err != nil {
			return err
		}
		for j := 0; j < updates.Len(); j++ {
			u, err := podSetUpdateOf(updates.At(j))
			if err != nil {
				return fmt.Errorf("check %s: %w", cs.Name, err)
			}
			cs.PodSetUpdates = append(cs.PodSetUpdates, u)
		}
		w.Checks = append(w.Checks, cs)
	}
	return nil
}

func podSetUpdateOf(u ledgerrpc.PodSetUpdate) (podsetupdates.PodSetUpdate, error) {
	var out podsetupdates.PodSetUpdate
	var err error
	if out.Name, err = u.PodSet(); err != nil {
		return out, err
	}
	maps := []struct {
		dst *map[string]string
		get func() (ledgerrpc.KeyValue_List, error)
	}{{&out.Labels, u.Labels}, {&out.Annotations, u.Annotations}, {&out.NodeSelector, u.NodeSelector}}
	for _, m := range maps {
		list, err := m.get()
		if err != nil {
			return out, err
		}
		for i := 0; i < list.Len(); i++ {
			k, err1 := list.At(i).Key()
			v, err2 := list.At(i).Value()
			if err1 != nil || err2 != nil {
				return out, fmt.Errorf("pod set %s: a key or value is unreadable", out.Name)
			}
			if *m.dst == nil {
				*m.dst = map[string]string{}
			}
			(*m.dst)[k] = v
		}
	}
	tolerations, err := u.Tolerations()
	if err != nil {
		return out, err
	}
	for i := 0; i < tolerations.Len(); i++ {
		t := tolerations.At(i)
		key, _ := t.Key()
		op, _ := t.Operator()
		value, _ := t.Value()
		effect, _ := t.Effect()
		out.Tolerations = append(out.Tolerations, corev1.Toleration{Key: key,
			Operator: corev1.TolerationOperator(op), Value: value, Effect: corev1.TaintEffect(effect)})
	}
	return out, nil
}

// WorkloadState reads one workload at the ledger's head (nil: the ledger holds none of that
// name).
func (c *Client) WorkloadState(ctx context.Context, namespace, name string) (*WorkloadState, error) {
	states, _, err := c.WorkloadStates(ctx, []string{Key(namespace, name)})
	if err != nil {
		return nil, err
	}
	return states[Key(namespace, name)], nil
}

// WorkloadNames lists the ledger's workloads that are not deleted (`get workloads -o json`),
// by namespace and name.
func WorkloadNames(ctx context.Context, g interface {
	Get(ctx context.Context, kind, format string) (string, error)
}) ([]types.NamespacedName, error) {
	text, err := g.Get(ctx, "workloads", "json")
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []struct {
			Metadata struct{ Namespace, Name string } `json:"metadata"`
			Status   struct{ Phase string }           `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(text), &list); err != nil {
		return nil, fmt.Errorf("reading the ledger's workloads: %w", err)
	}
	names := make([]types.NamespacedName, 0, len(list.Items))
	for _, w := range list.Items {
		if w.Status.Phase != PhaseDeleted.String() {
			names = append(names, types.NamespacedName{Namespace: w.Metadata.Namespace, Name: w.Metadata.Name})
		}
	}
	return names, nil
}

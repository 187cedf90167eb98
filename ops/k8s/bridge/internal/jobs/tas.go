package jobs

import corev1 "k8s.io/api/core/v1"

// Topology-aware scheduling's names on pods and pod templates (docs/tas.md; Kueue v0.17's
// apis/kueue/v1beta2/topology_types.go).
const (
	// TopologySchedulingGate holds a pod of a TAS admission until the bridge has given it the
	// node selector of its domain (ungater.go).
	TopologySchedulingGate = "kueue.x-k8s.io/topology"
	// The pod set annotations that ask for TAS; a pod carrying one was admitted through TAS
	// (IsTASPod). The bridge puts the unconstrained one on a released template that has none of
	// them (Kueue's implied TAS), as Kueue v0.14 and later do instead of a label.
	PodSetRequiredTopologyAnnotation      = "kueue.x-k8s.io/podset-required-topology"
	PodSetPreferredTopologyAnnotation     = "kueue.x-k8s.io/podset-preferred-topology"
	PodSetUnconstrainedTopologyAnnotation = "kueue.x-k8s.io/podset-unconstrained-topology"
	// TASLabel is the label Kueue before v0.14 put on TAS pods; such pods count as TAS too.
	TASLabel = "kueue.x-k8s.io/tas"
	// HostnameLabel is the node label of the lowest level of most topologies.
	HostnameLabel = corev1.LabelHostname
)

// IsTASPod says whether the pod was admitted through topology-aware scheduling: its usage is
// then in the ledger's TAS assignments, not the node's non-TAS usage (Kueue's utiltas.IsTAS,
// and the label of Kueue's older releases).
func IsTASPod(pod *corev1.Pod) bool {
	for _, key := range []string{PodSetRequiredTopologyAnnotation, PodSetPreferredTopologyAnnotation,
		PodSetUnconstrainedTopologyAnnotation} {
		if _, found := pod.Annotations[key]; found {
			return true
		}
	}
	return pod.Labels[TASLabel] == "true"
}

// HasGate says whether the pod carries the scheduling gate.
func HasGate(spec *corev1.PodSpec, gate string) bool {
	for _, g := range spec.SchedulingGates {
		if g.Name == gate {
			return true
		}
	}
	return false
}

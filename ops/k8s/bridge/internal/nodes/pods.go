package nodes

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"admission-ledger/bridge/internal/jobs"
)

// Non-TAS usage (docs/tas.md, "Inputs"): what the pods bound to a node that were not admitted
// through topology-aware scheduling request on it (DaemonSets, pods of other schedulers, Jobs
// admitted without TAS), which TAS takes off the node's allocatable. As Kueue's non-TAS usage
// cache (pkg/cache/scheduler/tas_non_tas_pod_cache.go, v0.17): every pod bound to the node
// (spec.nodeName) that is neither Succeeded nor Failed and not a TAS pod (jobs.IsTASPod),
// with its effective requests (PodRequests) and one `pods` each.

// podLevelResources are the resources a pod's spec.resources may request (Kubernetes' pod-level
// resources): they replace the containers' sum for the pod.
var podLevelResources = map[corev1.ResourceName]bool{corev1.ResourceCPU: true, corev1.ResourceMemory: true}

// PodRequests are the pod's effective requests as the scheduler counts them (Kubernetes'
// resourcehelper.PodRequests without options): the containers' sum with the sidecars
// (restartable init containers), or the largest an init container needs while it runs beside
// the sidecars started before it if that is more; pod-level requests where given; plus the
// pod's overhead.
func PodRequests(spec *corev1.PodSpec) corev1.ResourceList {
	sum := corev1.ResourceList{}
	for i := range spec.Containers {
		addResources(sum, spec.Containers[i].Resources.Requests)
	}
	sidecars, initMax := corev1.ResourceList{}, corev1.ResourceList{}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		var during corev1.ResourceList
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			addResources(sum, c.Resources.Requests)
			addResources(sidecars, c.Resources.Requests)
			during = sidecars.DeepCopy()
		} else {
			during = c.Resources.Requests.DeepCopy()
			if during == nil {
				during = corev1.ResourceList{}
			}
			addResources(during, sidecars)
		}
		maxResources(initMax, during)
	}
	maxResources(sum, initMax)
	if spec.Resources != nil {
		for name, q := range spec.Resources.Requests {
			if podLevelResources[name] || isHugePages(name) {
				sum[name] = q.DeepCopy()
			}
		}
	}
	addResources(sum, spec.Overhead)
	return sum
}

func isHugePages(name corev1.ResourceName) bool {
	return len(name) > len(corev1.ResourceHugePagesPrefix) &&
		string(name[:len(corev1.ResourceHugePagesPrefix)]) == corev1.ResourceHugePagesPrefix
}

func addResources(into, add corev1.ResourceList) {
	for name, q := range add {
		have := into[name]
		have.Add(q)
		into[name] = have
	}
}

func maxResources(into, other corev1.ResourceList) {
	for name, q := range other {
		if have, ok := into[name]; !ok || q.Cmp(have) > 0 {
			into[name] = q.DeepCopy()
		}
	}
}

// CountsAsNonTas says whether the pod's requests count in its node's non-TAS usage, and on
// which node.
func CountsAsNonTas(pod *corev1.Pod) (string, bool) {
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded ||
		pod.Status.Phase == corev1.PodFailed || jobs.IsTASPod(pod) {
		return "", false
	}
	return pod.Spec.NodeName, true
}

// NonTasUsage is each node's non-TAS usage in resource name order, zero amounts left out.
func NonTasUsage(pods []corev1.Pod) map[string][]Amount {
	sums := map[string]corev1.ResourceList{}
	for i := range pods {
		node, counts := CountsAsNonTas(&pods[i])
		if !counts {
			continue
		}
		if sums[node] == nil {
			sums[node] = corev1.ResourceList{}
		}
		addResources(sums[node], PodRequests(&pods[i].Spec))
		addResources(sums[node], corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")})
	}
	out := make(map[string][]Amount, len(sums))
	for node, sum := range sums {
		amounts := []Amount{}
		for _, a := range Capacity(sum) {
			if a.Milli != 0 {
				amounts = append(amounts, a)
			}
		}
		sort.Slice(amounts, func(i, j int) bool { return amounts[i].Name < amounts[j].Name })
		out[node] = amounts
	}
	return out
}

// nonTasShare is what one pod adds to a node's non-TAS usage (node "" when nothing).
type nonTasShare struct {
	Node     string
	Requests corev1.ResourceList
}

func shareOf(pod *corev1.Pod) nonTasShare {
	node, counts := CountsAsNonTas(pod)
	if !counts {
		return nonTasShare{}
	}
	return nonTasShare{Node: node, Requests: PodRequests(&pod.Spec)}
}

// NonTasPodChanged passes a pod's event when it changes a node's non-TAS usage: a counted pod
// created or deleted, bound, ended, or its requests resized.
var NonTasPodChanged = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool {
		pod, ok := e.Object.(*corev1.Pod)
		return !ok || shareOf(pod).Node != ""
	},
	DeleteFunc: func(e event.DeleteEvent) bool {
		pod, ok := e.Object.(*corev1.Pod)
		return !ok || shareOf(pod).Node != ""
	},
	UpdateFunc: func(e event.UpdateEvent) bool {
		before, ok1 := e.ObjectOld.(*corev1.Pod)
		after, ok2 := e.ObjectNew.(*corev1.Pod)
		if !ok1 || !ok2 {
			return true
		}
		b, a := shareOf(before), shareOf(after)
		return b.Node != a.Node || !resourceListsEqual(b.Requests, a.Requests)
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
}

func resourceListsEqual(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		if other, ok := b[name]; !ok || q.Cmp(other) != 0 {
			return false
		}
	}
	return true
}

// SlimPod is the cache's transform of a pod: it keeps what the bridge reads of pods through the
// manager's cache (the non-TAS usage here; the ungater's pods, their labels, annotations,
// owners, node selector and scheduling gates) and drops the rest (managed fields, the
// containers' commands, images, environment, volumes, most of the status), so that a cache of
// every pod of the cluster stays small. A pod the bridge writes (the ungater's patch) is
// compared with its slim copy: only the fields changed are sent.
func SlimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Pod{TypeMeta: pod.TypeMeta}
	meta := &slim.ObjectMeta
	meta.Name, meta.Namespace, meta.UID = pod.Name, pod.Namespace, pod.UID
	meta.ResourceVersion, meta.Generation = pod.ResourceVersion, pod.Generation
	meta.Labels, meta.Annotations, meta.OwnerReferences = pod.Labels, pod.Annotations, pod.OwnerReferences
	meta.DeletionTimestamp, meta.CreationTimestamp = pod.DeletionTimestamp, pod.CreationTimestamp
	spec := &slim.Spec
	spec.NodeName, spec.NodeSelector, spec.SchedulingGates = pod.Spec.NodeName, pod.Spec.NodeSelector, pod.Spec.SchedulingGates
	spec.Overhead, spec.Resources = pod.Spec.Overhead, pod.Spec.Resources
	spec.Containers = slimContainers(pod.Spec.Containers)
	spec.InitContainers = slimContainers(pod.Spec.InitContainers)
	slim.Status.Phase = pod.Status.Phase
	return slim, nil
}

func slimContainers(containers []corev1.Container) []corev1.Container {
	if containers == nil {
		return nil
	}
	out := make([]corev1.Container, len(containers))
	for i := range containers {
		out[i] = corev1.Container{Name: containers[i].Name, Resources: containers[i].Resources,
			RestartPolicy: containers[i].RestartPolicy}
	}
	return out
}

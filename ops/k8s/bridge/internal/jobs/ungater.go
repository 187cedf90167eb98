package jobs

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"admission-ledger/bridge/internal/ledger"
)

// The topology ungater (docs/tas.md, "Release"; Kueue's TopologyUngater): a pod set admitted
// through topology-aware scheduling is released with the scheduling gate TopologySchedulingGate
// on its pod template (applyTopology), so its pods wait; each pod then gets the node selector of
// one domain of the assignment (the domain's value at each of its levels) and loses the gate.
// A domain takes at most its count of pods, those placed before (ungated, not finished)
// included. Deterministic: gated pods in the order of their index (a Job's completion index, a
// JobSet's job index and completion index), those without one after them by name.

// TopologyPod is one pod of an object: its pod set and, when it has one, its index.
type TopologyPod struct {
	Pod     *corev1.Pod
	PodSet  string
	Rank    int
	HasRank bool
}

// Placement is a gated pod and the node selector of its domain.
type Placement struct {
	Pod          *corev1.Pod
	NodeSelector map[string]string
}

// applyTopology puts the gate on a pod template of a TAS pod set (ta not nil), and Kueue's
// unconstrained annotation when the template asks for no topology (the ClusterQueue's flavors
// all have one: Kueue's implied TAS), which marks its pods as TAS pods (IsTASPod). Without a
// topology assignment, the gate is taken off a template an earlier admission gave it.
func applyTopology(template *corev1.PodTemplateSpec, ta *ledger.TopologyAssignment) {
	var gates []corev1.PodSchedulingGate
	for _, g := range template.Spec.SchedulingGates {
		if g.Name != TopologySchedulingGate {
			gates = append(gates, g)
		}
	}
	template.Spec.SchedulingGates = gates
	if ta == nil {
		return
	}
	template.Spec.SchedulingGates = append(template.Spec.SchedulingGates,
		corev1.PodSchedulingGate{Name: TopologySchedulingGate})
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: template.Annotations}}
	if !IsTASPod(probe) {
		if template.Annotations == nil {
			template.Annotations = map[string]string{}
		}
		template.Annotations[PodSetUnconstrainedTopologyAnnotation] = "true"
	}
}

// domainID names a domain by its values.
func domainID(values []string) string { return strings.Join(values, "\x00") }

// PlacePods assigns the gated pods of one pod set to the domains of its assignment: each domain
// takes, in the assignment's order, as many of the gated pods (in rank order, then by name) as
// its count less the pods not gated, not finished, whose node selector names it already.
func PlacePods(ta *ledger.TopologyAssignment, pods []TopologyPod) []Placement {
	placed := map[string]int32{}
	var gated []TopologyPod
	for _, p := range pods {
		if p.Pod.Status.Phase == corev1.PodSucceeded || p.Pod.Status.Phase == corev1.PodFailed {
			continue
		}
		if HasGate(&p.Pod.Spec, TopologySchedulingGate) {
			gated = append(gated, p)
			continue
		}
		values := make([]string, len(ta.Levels))
		for i, level := range ta.Levels {
			values[i] = p.Pod.Spec.NodeSelector[level]
		}
		placed[domainID(values)]++
	}
	sort.SliceStable(gated, func(i, j int) bool {
		a, b := gated[i], gated[j]
		if a.HasRank != b.HasRank {
			return a.HasRank
		}
		if a.HasRank && a.Rank != b.Rank {
			return a.Rank < b.Rank
		}
		return a.Pod.Name < b.Pod.Name
	})
	var out []Placement
	for _, d := range ta.Domains {
		for free := d.Count - placed[domainID(d.Values)]; free > 0 && len(gated) > 0; free-- {
			selector := make(map[string]string, len(ta.Levels))
			for i, level := range ta.Levels {
				selector[level] = d.Values[i]
			}
			out = append(out, Placement{Pod: gated[0].Pod, NodeSelector: selector})
			gated = gated[1:]
		}
	}
	return out
}

// ungate places the gated pods of each TAS pod set of the released object (PlacePods): a patch
// per pod adds its domain's node selector and removes the gate, refused if the pod changed
// since it was read (the next reconcile reads it again). Pods are read from the API server: the
// placement counts the pods placed before, and the manager's cache may not show the last
// reconcile's yet (a second pod would go to a full host).
func (r *Reconciler) ungate(ctx context.Context, job GenericJob, state *LedgerWorkload) error {
	if r.Kind.TopologyPods == nil || !hasTopology(state) {
		return nil
	}
	pods, err := r.Kind.TopologyPods(ctx, r.APIReader, job)
	if err != nil {
		return fmt.Errorf("listing the pods of %s %s/%s: %w", r.Kind.Name, job.Object().GetNamespace(),
			job.Object().GetName(), err)
	}
	bySet := map[string][]TopologyPod{}
	for _, p := range pods {
		bySet[p.PodSet] = append(bySet[p.PodSet], p)
	}
	for _, psa := range state.PodSets {
		if psa.Topology == nil {
			continue
		}
		for _, placement := range PlacePods(psa.Topology, bySet[psa.Name]) {
			if err := r.ungatePod(ctx, placement); err != nil {
				return err
			}
		}
	}
	return nil
}

func hasTopology(state *LedgerWorkload) bool {
	for _, psa := range state.PodSets {
		if psa.Topology != nil {
			return true
		}
	}
	return false
}

// ungatePod patches one pod: its domain's node selector added, the gate removed.
func (r *Reconciler) ungatePod(ctx context.Context, placement Placement) error {
	pod := placement.Pod.DeepCopy()
	before := pod.DeepCopy()
	if pod.Spec.NodeSelector == nil {
		pod.Spec.NodeSelector = map[string]string{}
	}
	for k, v := range placement.NodeSelector {
		pod.Spec.NodeSelector[k] = v
	}
	var gates []corev1.PodSchedulingGate
	for _, g := range pod.Spec.SchedulingGates {
		if g.Name != TopologySchedulingGate {
			gates = append(gates, g)
		}
	}
	pod.Spec.SchedulingGates = gates
	err := r.Client.Patch(ctx, pod, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ungating pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	log.FromContext(ctx).Info("ungated a pod of a TAS admission", "pod", pod.Name,
		"nodeSelector", placement.NodeSelector)
	return nil
}

// indexLabel reads a non-negative integer label.
func indexLabel(pod *corev1.Pod, label string) (int, bool) {
	text, found := pod.Labels[label]
	if !found {
		return 0, false
	}
	n, err := strconv.Atoi(text)
	return n, err == nil && n >= 0
}

// batchJobTopologyPods: a Job's pods (its controller-uid label), all of pod set main, ranked by
// their completion index (an Indexed Job's).
func batchJobTopologyPods(ctx context.Context, reader client.Reader, job GenericJob) ([]TopologyPod, error) {
	obj := job.Object()
	pods, err := listPods(ctx, reader, obj.GetNamespace(), JobControllerUIDLabel, string(obj.GetUID()))
	if err != nil {
		return nil, err
	}
	out := make([]TopologyPod, 0, len(pods))
	for i := range pods {
		rank, ok := indexLabel(&pods[i], batchv1.JobCompletionIndexAnnotation)
		out = append(out, TopologyPod{Pod: &pods[i], PodSet: PodSetName, Rank: rank, HasRank: ok})
	}
	return out, nil
}

// jobSetTopologyPods: a JobSet's pods (its uid label), of the pod set of their replicated job,
// ranked by job index times the replicated job's pods per Job plus their completion index.
func jobSetTopologyPods(ctx context.Context, reader client.Reader, job GenericJob) ([]TopologyPod, error) {
	js, ok := job.(*JobSet)
	if !ok {
		return nil, fmt.Errorf("not a JobSet: %T", job)
	}
	perJob := map[string]int{}
	for i := range js.JobSet.Spec.ReplicatedJobs {
		rj := &js.JobSet.Spec.ReplicatedJobs[i]
		perJob[rj.Name] = int(jobPods(&rj.Template.Spec))
	}
	pods, err := listPods(ctx, reader, js.JobSet.Namespace, jobsetapi.JobSetUIDKey, string(js.JobSet.UID))
	if err != nil {
		return nil, err
	}
	out := make([]TopologyPod, 0, len(pods))
	for i := range pods {
		set := pods[i].Labels[jobsetapi.ReplicatedJobNameKey]
		jobIndex, ok1 := indexLabel(&pods[i], jobsetapi.JobIndexKey)
		podIndex, ok2 := indexLabel(&pods[i], batchv1.JobCompletionIndexAnnotation)
		out = append(out, TopologyPod{Pod: &pods[i], PodSet: set, Rank: jobIndex*perJob[set] + podIndex,
			HasRank: ok1 && ok2})
	}
	return out, nil
}

// batchJobOfPod: the Job that controls the pod.
func batchJobOfPod(pod *corev1.Pod) (string, bool) {
	owner := metav1.GetControllerOf(pod)
	if owner == nil || owner.Kind != "Job" || owner.APIVersion != "batch/v1" {
		return "", false
	}
	return owner.Name, true
}

// jobSetOfPod: the JobSet whose pod it is.
func jobSetOfPod(pod *corev1.Pod) (string, bool) {
	name := pod.Labels[jobsetapi.JobSetNameKey]
	return name, name != ""
}

// gatedPods queues the object of a pod that waits for the topology ungater (created gated, or
// still gated after a change), through the kind's PodOwner.
func gatedPods(kind *Kind) (handler.EventHandler, predicate.Predicate) {
	gated := predicate.NewPredicateFuncs(func(o client.Object) bool {
		pod, ok := o.(*corev1.Pod)
		return ok && HasGate(&pod.Spec, TopologySchedulingGate)
	})
	gated.DeleteFunc = func(event.DeleteEvent) bool { return false }
	toOwner := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		pod, ok := o.(*corev1.Pod)
		if !ok {
			return nil
		}
		name, ok := kind.PodOwner(pod)
		if !ok {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: pod.Namespace, Name: name}}}
	})
	return toOwner, gated
}

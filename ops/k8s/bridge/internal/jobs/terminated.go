package jobs

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SuspendedAtAnnotation is when the bridge last suspended a Job (RFC3339, the bridge's clock),
// written in the same merge patch as `spec.suspend: true` and removed in the patch that
// unsuspends it (release), so a value present always belongs to the current suspension.
const SuspendedAtAnnotation = "admission-ledger.io/suspended-at"

// NeverStartedGrace: how long after its suspension a Job the Job controller never started
// (podsGone) must show no pod before its pods count as gone.
const NeverStartedGrace = 10 * time.Second

// WaitForPodsGonePoll: how often an evicted Job is looked at while its pods go.
const WaitForPodsGonePoll = 2 * time.Second

// JobControllerUIDLabel is the label the Job controller puts on its pods: the Job's uid.
const JobControllerUIDLabel = "batch.kubernetes.io/controller-uid"

// suspensionStamp is the time a suspension at now is recorded at (SuspendedAtAnnotation): now,
// or the next second when the object's Suspended condition turned True in now's second. Times
// compare at one second (a condition's lastTransitionTime), so a condition from before a release
// in that same second (the object created suspended, released and suspended again within it)
// would read as the controller having observed this suspension: pods it was creating for the
// release would then be missed (a pod of k8s_pods_load ran after its quota was released).
func suspensionStamp(obj client.Object, now time.Time) time.Time {
	now = now.UTC()
	fields, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return now
	}
	conditions, _, _ := unstructured.NestedSlice(fields, "status", "conditions")
	for _, c := range conditions {
		m, _ := c.(map[string]any)
		if m["type"] != "Suspended" || m["status"] != "True" {
			continue
		}
		since, err := time.Parse(time.RFC3339, fmt.Sprint(m["lastTransitionTime"]))
		if err == nil && since.Truncate(time.Second).Equal(now.Truncate(time.Second)) {
			return now.Truncate(time.Second).Add(time.Second)
		}
	}
	return now
}

// suspendedAt is the bridge's recorded suspension of the object, or false when none is recorded.
func suspendedAt(obj client.Object) (time.Time, bool) {
	v, ok := obj.GetAnnotations()[SuspendedAtAnnotation]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}

// podsGone decides whether a suspended Job's pods are gone and no more will come, the proof
// `pods terminated` needs (the ledger releases the quota on it). status.active and
// status.terminating are not proof: the Job controller writes them only after it synced, so
// right after an unsuspend they read 0 while it still creates pods. Proof is:
//
//  1. the Job controller has observed the suspension: the condition Suspended is True and it
//     became True at or after the bridge's suspension (suspendedAt, compared at one second, the
//     resolution of lastTransitionTime). A True condition from before (a suspension the
//     controller observed before the last release, not yet turned False) proves nothing. With
//     no recorded suspension (hasSuspendedAt false: the Job was suspended by someone else, or
//     never released since it was created suspended) a True condition is taken as it is;
//  2. none of its pods, listed live from the API server, is not terminal: no pod Pending,
//     Running or Unknown, none being deleted and not yet Succeeded or Failed.
//
// A Job whose SuccessCriteriaMet or FailureTarget condition is True is ending: the controller
// creates no more pods whether or not it observed the suspension, and writes no Suspended
// condition, so only 2 is asked. (The Job controller of Kubernetes 1.34 can leave such a Job
// suspended and never Complete: its status write of a release's startTime conflicted with the
// suspension, and a finished Job needs a startTime. Once the quota is released and the workload
// admitted again, the release gives it one and it completes, as under Kueue, which asks only
// for status.active 0.)
//
// One case has no proof to wait for: the bridge released and suspended the Job again before the
// Job controller synced, so the controller never saw the release, and its Suspended condition
// stays True from before, never to move. Its status.startTime (reset on every suspension the
// controller observes, set when it starts the Job) is then unset. After NeverStartedGrace since
// the bridge's suspension with startTime unset and no pod, the Job is taken as never started: a
// controller sync that saw the release and creates pods would have shown them by then. This is
// a bounded wait, not proof; docs/k8s.md says so.
//
// Returns a short reason when not gone, for the log.
func podsGone(job *batchv1.Job, pods []corev1.Pod, suspendedAt time.Time, hasSuspendedAt bool,
	now time.Time) (bool, string) {
	if job.Spec.Suspend == nil || !*job.Spec.Suspend {
		return false, "the Job is not suspended"
	}
	var suspended *batchv1.JobCondition
	for i := range job.Status.Conditions {
		c := &job.Status.Conditions[i]
		if c.Type == batchv1.JobSuspended {
			suspended = c
		}
		if (c.Type == batchv1.JobSuccessCriteriaMet || c.Type == batchv1.JobFailureTarget) &&
			c.Status == corev1.ConditionTrue {
			// Ending: the controller creates no more pods (and writes no Suspended condition).
			return terminalPods(pods)
		}
	}
	if suspended == nil || suspended.Status != corev1.ConditionTrue {
		return false, "the Job controller has not observed the suspension yet"
	}
	if hasSuspendedAt && suspended.LastTransitionTime.Time.Truncate(time.Second).Before(suspendedAt.Truncate(time.Second)) {
		if job.Status.StartTime != nil || now.Sub(suspendedAt) < NeverStartedGrace {
			return false, "the Job's Suspended condition is from before the bridge's suspension"
		}
	}
	return terminalPods(pods)
}

// terminalPods: gone when none of pods is not terminal, else the first such one.
func terminalPods(pods []corev1.Pod) (bool, string) {
	if running := firstNotTerminal(pods); running != "" {
		return false, running
	}
	return true, ""
}

// firstNotTerminal names the first pod not Succeeded or Failed ("pod NAME is PHASE"), or "".
func firstNotTerminal(pods []corev1.Pod) string {
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		return fmt.Sprintf("pod %s is %s", p.Name, podState(p))
	}
	return ""
}

func podState(p *corev1.Pod) string {
	phase := string(p.Status.Phase)
	if phase == "" {
		phase = "without a phase"
	}
	if p.DeletionTimestamp != nil {
		return phase + ", being deleted"
	}
	return phase
}

// listPods lists the pods of namespace that carry label=value, live from the API server (the
// bridge keeps no cache of pods; a cache could lag behind the pods a controller just created).
func listPods(ctx context.Context, reader client.Reader, namespace, label, value string) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := reader.List(ctx, &list, client.InNamespace(namespace),
		client.MatchingLabels{label: value}); err != nil {
		return nil, fmt.Errorf("listing the pods with %s=%s in %s: %w", label, value, namespace, err)
	}
	return list.Items, nil
}

package jobs

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func suspendedJob(conditions ...batchv1.JobCondition) *batchv1.Job {
	job := &batchv1.Job{}
	job.Spec.Suspend = ptr.To(true)
	job.Status.Conditions = conditions
	return job
}

func suspendedCondition(status corev1.ConditionStatus, at time.Time) batchv1.JobCondition {
	return batchv1.JobCondition{Type: batchv1.JobSuspended, Status: status, LastTransitionTime: metav1.NewTime(at)}
}

func pod(name string, phase corev1.PodPhase, deleting bool) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{Phase: phase}}
	if deleting {
		p.DeletionTimestamp = ptr.To(metav1.Now())
	}
	return p
}

func TestPodsGone(t *testing.T) {
	at := time.Date(2025, 5, 1, 15, 14, 55, 0, time.UTC)
	cases := []struct {
		name  string
		job   *batchv1.Job
		pods  []corev1.Pod
		at    time.Time
		hasAt bool
		gone  bool
		now   time.Time // zero: one second after at
	}{
		// The race of k8s_pods_load: right after an unsuspend the Job reads active=0 and the
		// controller has not synced the suspension yet (nor created its pods).
		{name: "active 0, no Suspended condition yet", job: suspendedJob(), at: at, hasAt: true},
		{name: "Suspended False (the unsuspend observed, the suspension not yet)",
			job: suspendedJob(suspendedCondition(corev1.ConditionFalse, at.Add(time.Second))), at: at, hasAt: true},
		{name: "Suspended True from before the bridge's suspension",
			job: suspendedJob(suspendedCondition(corev1.ConditionTrue, at.Add(-3*time.Second))), at: at, hasAt: true},
		{name: "Suspended True at the same second (sub-second times ignored)",
			job: suspendedJob(suspendedCondition(corev1.ConditionTrue, at.Add(200*time.Millisecond))),
			at:  at.Add(900 * time.Millisecond), hasAt: true, gone: true},
		{name: "observed, no pods", job: suspendedJob(suspendedCondition(corev1.ConditionTrue, at.Add(time.Second))),
			at: at, hasAt: true, gone: true},
		{name: "observed, a pod Running", job: suspendedJob(suspendedCondition(corev1.ConditionTrue, at)),
			pods: []corev1.Pod{pod("a", corev1.PodSucceeded, false), pod("b", corev1.PodRunning, false)}, at: at, hasAt: true},
		{name: "observed, a pod Pending", job: suspendedJob(suspendedCondition(corev1.ConditionTrue, at)),
			pods: []corev1.Pod{pod("a", corev1.PodPending, false)}, at: at, hasAt: true},
		{name: "observed, a pod Unknown", job: suspendedJob(suspendedCondition(corev1.ConditionTrue, at)),
			pods: []corev1.Pod{pod("a", corev1.PodUnknown, false)}, at: at, hasAt: true},
		{name: "observed, a pod being deleted, still Running", job: suspendedJob(suspendedCondition(corev1.ConditionTrue, at)),
			pods: []corev1.Pod{pod("a", corev1.PodRunning, true)}, at: at, hasAt: true},
		{name: "observed, only Succeeded and Failed pods (one being deleted)",
			job:  suspendedJob(suspendedCondition(corev1.ConditionTrue, at)),
			pods: []corev1.Pod{pod("a", corev1.PodSucceeded, false), pod("b", corev1.PodFailed, true)},
			at:   at, hasAt: true, gone: true},
		{name: "not suspended", job: func() *batchv1.Job {
			j := suspendedJob(suspendedCondition(corev1.ConditionTrue, at))
			j.Spec.Suspend = ptr.To(false)
			return j
		}(), at: at, hasAt: true},
		{name: "no recorded suspension: a True condition is taken",
			job: suspendedJob(suspendedCondition(corev1.ConditionTrue, at.Add(-time.Hour))), gone: true},
		{name: "no recorded suspension, no condition", job: suspendedJob()},
		// Released and suspended again before the controller synced: its True condition stays
		// from before; never started (no startTime), no pod, past the grace: gone.
		{name: "stale True condition, never started, no pod, past the grace",
			job: suspendedJob(suspendedCondition(corev1.ConditionTrue, at.Add(-3*time.Second))), at: at,
			hasAt: true, now: at.Add(NeverStartedGrace + time.Second), gone: true},
		{name: "stale True condition, never started, no pod, within the grace",
			job: suspendedJob(suspendedCondition(corev1.ConditionTrue, at.Add(-3*time.Second))), at: at,
			hasAt: true, now: at.Add(NeverStartedGrace - time.Second)},
		{name: "stale True condition, started (startTime set), past the grace",
			job: func() *batchv1.Job {
				j := suspendedJob(suspendedCondition(corev1.ConditionTrue, at.Add(-3*time.Second)))
				j.Status.StartTime = ptr.To(metav1.NewTime(at.Add(-time.Second)))
				return j
			}(), at: at, hasAt: true, now: at.Add(NeverStartedGrace + time.Second)},
		{name: "stale True condition, never started, a pod Pending, past the grace",
			job:  suspendedJob(suspendedCondition(corev1.ConditionTrue, at.Add(-3*time.Second))),
			pods: []corev1.Pod{pod("a", corev1.PodPending, false)}, at: at, hasAt: true,
			now: at.Add(NeverStartedGrace + time.Second)},
		// k8s_pods_load in CI: the Job controller created the pod of a release but its status
		// write (with startTime) conflicted with the bridge's suspension; the pod then succeeded,
		// and the controller, which creates no pod once the success criteria are met, can never
		// write Complete (startTime is required for a finished Job) nor Suspended (a Job meeting
		// its criteria is not suspended). Its pods being terminal is the proof.
		{name: "SuccessCriteriaMet, no Suspended condition, the pod Succeeded",
			job: suspendedJob(batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet,
				Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at.Add(7 * time.Second))}),
			pods: []corev1.Pod{pod("a", corev1.PodSucceeded, false)}, at: at, hasAt: true, gone: true},
		{name: "FailureTarget, no Suspended condition, the pod Failed",
			job: suspendedJob(batchv1.JobCondition{Type: batchv1.JobFailureTarget,
				Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at.Add(time.Second))}),
			pods: []corev1.Pod{pod("a", corev1.PodFailed, false)}, at: at, hasAt: true, gone: true},
		{name: "SuccessCriteriaMet, a pod still Running",
			job: suspendedJob(batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet,
				Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at.Add(time.Second))}),
			pods: []corev1.Pod{pod("a", corev1.PodSucceeded, false), pod("b", corev1.PodRunning, false)},
			at:   at, hasAt: true},
		{name: "SuccessCriteriaMet False proves nothing",
			job: suspendedJob(batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet,
				Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(at.Add(time.Second))}),
			pods: []corev1.Pod{pod("a", corev1.PodSucceeded, false)}, at: at, hasAt: true},
	}
	for _, c := range cases {
		now := c.now
		if now.IsZero() {
			now = c.at.Add(time.Second)
		}
		gone, why := podsGone(c.job, c.pods, c.at, c.hasAt, now)
		if gone != c.gone {
			t.Errorf("%s: podsGone = %v (%s), want %v", c.name, gone, why, c.gone)
		}
		if !gone && why == "" {
			t.Errorf("%s: no reason given", c.name)
		}
	}
}

func TestSuspendedAt(t *testing.T) {
	job := &batchv1.Job{}
	if _, ok := suspendedAt(job); ok {
		t.Errorf("suspendedAt of a Job without the annotation: recorded")
	}
	job.Annotations = map[string]string{SuspendedAtAnnotation: "2025-05-01T15:14:55Z"}
	at, ok := suspendedAt(job)
	if !ok || !at.Equal(time.Date(2025, 5, 1, 15, 14, 55, 0, time.UTC)) {
		t.Errorf("suspendedAt = %v, %v", at, ok)
	}
	job.Annotations[SuspendedAtAnnotation] = "garbage"
	if _, ok := suspendedAt(job); ok {
		t.Errorf("suspendedAt of a malformed annotation: recorded")
	}
}

// A suspension in the same second as the Job's Suspended condition turned True is recorded at
// the next second: that condition may be from before a release in that second, not proof.
func TestSuspensionInTheSecondOfAnEarlierSuspendedConditionIsStampedAfterIt(t *testing.T) {
	now := time.Date(2026, 12, 6, 17, 13, 46, 900_000_000, time.UTC)
	job := &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{
		Type: batchv1.JobSuspended, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(now.Truncate(time.Second))}}}}
	if got, want := suspensionStamp(job, now), now.Truncate(time.Second).Add(time.Second); !got.Equal(want) {
		t.Fatalf("stamp %v, want %v", got, want)
	}
	job.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-2 * time.Second))
	if got := suspensionStamp(job, now); !got.Equal(now) {
		t.Fatalf("stamp %v, want %v", got, now)
	}
	// With the next second's stamp, the stale condition is no proof that the pods are gone.
	job.Spec.Suspend = ptr.To(true)
	job.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
	if gone, _ := podsGone(job, nil, suspensionStamp(job, now), true, now); gone {
		t.Fatal("a Suspended condition of the suspension's own second taken as proof")
	}
}

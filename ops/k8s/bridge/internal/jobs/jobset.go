package jobs

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// JobSetKind: jobset.x-k8s.io/v1alpha2 JobSets, one pod set per replicated job of replicas x
// the Job's pod count (the ledger's ParseJobSet, as Kueue's JobSet integration).
var JobSetKind = &Kind{
	Name:       "JobSet",
	APIVersion: jobsetapi.GroupVersion.String(),
	Prefix:     "jobset",
	New:        func() GenericJob { return &JobSet{JobSet: &jobsetapi.JobSet{}} },
	List: func(ctx context.Context, reader client.Reader) ([]client.Object, error) {
		var list jobsetapi.JobSetList
		return listLabelled(ctx, reader, &list, func() []client.Object {
			out := make([]client.Object, 0, len(list.Items))
			for i := range list.Items {
				out = append(out, &list.Items[i])
			}
			return out
		})
	},
	TopologyPods: jobSetTopologyPods,
	PodOwner:     jobSetOfPod,
}

// The labels the JobSet controller puts on its Jobs and their pods.
const (
	JobSetNameLabel = jobsetapi.JobSetNameKey
	JobSetUIDLabel  = jobsetapi.JobSetUIDKey
)

// JobSet is a JobSet as a GenericJob. Its controller suspends and resumes its child Jobs with
// it; the Job controller creates and deletes their pods.
type JobSet struct{ JobSet *jobsetapi.JobSet }

func (j *JobSet) Object() client.Object { return j.JobSet }
func (j *JobSet) Copy() GenericJob      { return &JobSet{JobSet: j.JobSet.DeepCopy()} }
func (j *JobSet) IsSuspended() bool     { return ptr.Deref(j.JobSet.Spec.Suspend, false) }
func (j *JobSet) SetSuspended(s bool)   { j.JobSet.Spec.Suspend = ptr.To(s) }

func (j *JobSet) Spec() (map[string]any, error) {
	return runtime.DefaultUnstructuredConverter.ToUnstructured(&j.JobSet.Spec)
}

// jobPods is a replicated job's pods per Job: parallelism, fewer when completions is smaller.
func jobPods(spec *batchv1.JobSpec) int32 {
	n := ptr.Deref(spec.Parallelism, 1)
	if spec.Completions != nil && *spec.Completions < n {
		n = *spec.Completions
	}
	return n
}

func (j *JobSet) PodSets() []PodSet {
	out := make([]PodSet, 0, len(j.JobSet.Spec.ReplicatedJobs))
	for i := range j.JobSet.Spec.ReplicatedJobs {
		rj := &j.JobSet.Spec.ReplicatedJobs[i]
		out = append(out, PodSet{Name: rj.Name, Count: rj.Replicas * jobPods(&rj.Template.Spec),
			Template: &rj.Template.Spec.Template})
	}
	return out
}

func (j *JobSet) CountField(i int) *int32 {
	return j.JobSet.Spec.ReplicatedJobs[i].Template.Spec.Parallelism
}

func (j *JobSet) SetCountField(i int, value *int32) {
	j.JobSet.Spec.ReplicatedJobs[i].Template.Spec.Parallelism = value
}

// Admit: a JobSet runs only whole: its replicated jobs' pod counts are immutable once it exists
// (the JobSet controller's webhook), so a smaller count cannot start (the ledger's parser
// refuses the annotation that would allow one; an imported admission could still carry one).
func (j *JobSet) Admit(i int, count int32) error {
	rj := &j.JobSet.Spec.ReplicatedJobs[i]
	if whole := rj.Replicas * jobPods(&rj.Template.Spec); count < whole {
		return fmt.Errorf("pod set %s is admitted with %d of its %d pods, and a JobSet cannot run "+
			"fewer pods than it asks for", rj.Name, count, whole)
	}
	return nil
}

func (j *JobSet) Finished() bool {
	for _, t := range []jobsetapi.JobSetConditionType{jobsetapi.JobSetCompleted, jobsetapi.JobSetFailed} {
		if apimeta.IsStatusConditionTrue(j.JobSet.Status.Conditions, string(t)) {
			return true
		}
	}
	return false
}

// PodsReady: every replicated job's Jobs are ready or succeeded (Kueue's JobSet PodsReady
// counts Jobs, as the JobSet's status does).
func (j *JobSet) PodsReady([]int32) bool {
	var replicas, ready int32
	for _, rj := range j.JobSet.Spec.ReplicatedJobs {
		replicas += rj.Replicas
	}
	for _, s := range j.JobSet.Status.ReplicatedJobsStatus {
		ready += s.Ready + s.Succeeded
	}
	return ready >= replicas
}

// ClearStartTime: a JobSet keeps none; its controller clears its child Jobs' own.
func (j *JobSet) ClearStartTime() bool { return false }

// PodsGone: the JobSet controller observed the suspension (its Suspended condition True since
// the bridge's suspension, or from before when the JobSet never started since), and each
// child Job's pods are gone by the same proof as a Job's own (podsGone: the Job controller
// observed the suspension, and none of its pods, listed live, is left running).
func (j *JobSet) PodsGone(ctx context.Context, reader client.Reader, at time.Time, hasAt bool,
	now time.Time) (bool, string, error) {
	suspended := apimeta.FindStatusCondition(j.JobSet.Status.Conditions, string(jobsetapi.JobSetSuspended))
	if suspended == nil || suspended.Status != metav1.ConditionTrue {
		return false, "the JobSet controller has not observed the suspension yet", nil
	}
	var jobs batchv1.JobList
	if err := reader.List(ctx, &jobs, client.InNamespace(j.JobSet.Namespace),
		client.MatchingLabels{jobsetapi.JobSetUIDKey: string(j.JobSet.UID)}); err != nil {
		return false, "", fmt.Errorf("listing the Jobs of JobSet %s/%s: %w", j.JobSet.Namespace, j.JobSet.Name, err)
	}
	for i := range jobs.Items {
		job := &jobs.Items[i]
		if jobFinished(job) {
			if running, err := runningPod(ctx, reader, job); err != nil || running != "" {
				return false, running, err
			}
			continue
		}
		pods, err := listPods(ctx, reader, job.Namespace, JobControllerUIDLabel, string(job.UID))
		if err != nil {
			return false, "", err
		}
		if gone, why := podsGone(job, pods, at, hasAt, now); !gone {
			return false, "Job " + job.Name + ": " + why, nil
		}
	}
	// Pods of Jobs already deleted (a JobSet restart recreates its Jobs) carry the JobSet's uid.
	pods, err := listPods(ctx, reader, j.JobSet.Namespace, jobsetapi.JobSetUIDKey, string(j.JobSet.UID))
	if err != nil {
		return false, "", err
	}
	if running := firstNotTerminal(pods); running != "" {
		return false, running, nil
	}
	return true, "", nil
}

func (j *JobSet) RunningPod(ctx context.Context, reader client.Reader) (string, error) {
	pods, err := listPods(ctx, reader, j.JobSet.Namespace, jobsetapi.JobSetUIDKey, string(j.JobSet.UID))
	if err != nil {
		return "", err
	}
	return firstNotTerminal(pods), nil
}

// runningPod names a pod of the Job that is not Succeeded or Failed, or "".
func runningPod(ctx context.Context, reader client.Reader, job *batchv1.Job) (string, error) {
	pods, err := listPods(ctx, reader, job.Namespace, JobControllerUIDLabel, string(job.UID))
	if err != nil {
		return "", err
	}
	return firstNotTerminal(pods), nil
}

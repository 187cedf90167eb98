package jobs

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// BatchJobKind: batch/v1 Jobs, one pod set "main" (the ledger's ParseJob, as Kueue).
var BatchJobKind = &Kind{
	Name:       "Job",
	APIVersion: "batch/v1",
	Prefix:     "job",
	New:        func() GenericJob { return &BatchJob{Job: &batchv1.Job{}} },
	List: func(ctx context.Context, reader client.Reader) ([]client.Object, error) {
		var list batchv1.JobList
		return listLabelled(ctx, reader, &list, func() []client.Object {
			out := make([]client.Object, 0, len(list.Items))
			for i := range list.Items {
				out = append(out, &list.Items[i])
			}
			return out
		})
	},
	TopologyPods: batchJobTopologyPods,
	PodOwner:     batchJobOfPod,
}

// BatchJob is a batch/v1 Job as a GenericJob.
type BatchJob struct{ Job *batchv1.Job }

func (j *BatchJob) Object() client.Object { return j.Job }
func (j *BatchJob) Copy() GenericJob      { return &BatchJob{Job: j.Job.DeepCopy()} }
func (j *BatchJob) IsSuspended() bool     { return ptr.Deref(j.Job.Spec.Suspend, false) }
func (j *BatchJob) SetSuspended(s bool)   { j.Job.Spec.Suspend = ptr.To(s) }

func (j *BatchJob) Spec() (map[string]any, error) {
	return runtime.DefaultUnstructuredConverter.ToUnstructured(&j.Job.Spec)
}

// PodSets: one pod set "main" of parallelism pods (fewer when completions is smaller).
func (j *BatchJob) PodSets() []PodSet {
	count := ptr.Deref(j.Job.Spec.Parallelism, 1)
	if j.Job.Spec.Completions != nil && *j.Job.Spec.Completions < count {
		count = *j.Job.Spec.Completions
	}
	return []PodSet{{Name: PodSetName, Count: count, Template: &j.Job.Spec.Template}}
}

func (j *BatchJob) CountField(int) *int32 { return j.Job.Spec.Parallelism }

func (j *BatchJob) SetCountField(_ int, value *int32) { j.Job.Spec.Parallelism = value }

// Admit: the Job runs the admitted count of pods at once (parallelism, when unset or larger).
func (j *BatchJob) Admit(_ int, count int32) error {
	if j.Job.Spec.Parallelism == nil || count < *j.Job.Spec.Parallelism {
		j.Job.Spec.Parallelism = ptr.To(count)
	}
	return nil
}

func (j *BatchJob) Finished() bool { return jobFinished(j.Job) }

// PodsReady: Ready and succeeded pods together reach the admitted count (Kueue's batch Job).
func (j *BatchJob) PodsReady(admitted []int32) bool {
	return len(admitted) == 1 && PodsReady(j.Job, admitted[0])
}

func (j *BatchJob) ClearStartTime() bool {
	if j.Job.Status.StartTime == nil {
		return false
	}
	j.Job.Status.StartTime = nil
	return true
}

// PodsGone: the Job controller observed the suspension and none of the Job's pods, listed
// live, is left running (podsGone).
func (j *BatchJob) PodsGone(ctx context.Context, reader client.Reader, at time.Time, hasAt bool,
	now time.Time) (bool, string, error) {
	pods, err := listPods(ctx, reader, j.Job.Namespace, JobControllerUIDLabel, string(j.Job.UID))
	if err != nil {
		return false, "", err
	}
	gone, why := podsGone(j.Job, pods, at, hasAt, now)
	return gone, why, nil
}

func (j *BatchJob) RunningPod(ctx context.Context, reader client.Reader) (string, error) {
	return runningPod(ctx, reader, j.Job)
}

func jobFinished(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

package jobs

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// GenericJob is one object of a kind the bridge holds suspended until the ledger admits it and
// then releases (Kueue's jobframework.GenericJob is the model). The reconciler, the webhook and
// the release path are the same for every kind; a kind says only how its object is read and
// changed. Methods that change the object change it in memory; the reconciler writes it.
type GenericJob interface {
	// Object is the object itself.
	Object() client.Object
	// Copy is a deep copy, to change and compare with the original.
	Copy() GenericJob
	IsSuspended() bool
	SetSuspended(suspended bool)
	// Spec is the object's spec as the ledger's parser reads it.
	Spec() (map[string]any, error)
	// PodSets are the object's pod sets in the order the ledger's parser gives them: name,
	// the pods asked for, and the pod template, a pointer into the object.
	PodSets() []PodSet
	// CountField is pod set i's own count setting (a Job's parallelism), nil when unset; it is
	// recorded before the first release and restored before every later one.
	CountField(i int) *int32
	SetCountField(i int, value *int32)
	// Admit sets pod set i's count setting for the admitted count (a partial admission's is
	// below the pods asked for); an error when the kind cannot run that count.
	Admit(i int, count int32) error
	// Finished: the object completed or failed.
	Finished() bool
	// PodsReady: with admitted[i] pods admitted for pod set i, as many of them are Ready or
	// succeeded (Kueue's PodsReady of the kind).
	PodsReady(admitted []int32) bool
	// ClearStartTime clears a start time the kind's controller keeps from an earlier run, which
	// stops the pod templates' scheduling directives from changing; reports whether it did
	// (the reconciler then writes the status).
	ClearStartTime() bool
	// PodsGone decides, reading the cluster live, whether the suspended object's pods are gone
	// and no more will come (the proof `pods terminated` needs); at is the bridge's recorded
	// suspension (hasAt false: none). Returns a short reason when not.
	PodsGone(ctx context.Context, reader client.Reader, at time.Time, hasAt bool,
		now time.Time) (bool, string, error)
	// RunningPod names one of the object's pods, listed live, that is not Succeeded or Failed,
	// or "" when none is.
	RunningPod(ctx context.Context, reader client.Reader) (string, error)
}

// PodSet is one pod set of a GenericJob.
type PodSet struct {
	Name     string
	Count    int32
	Template *corev1.PodTemplateSpec
}

// Kind is one kind the bridge governs: how its objects are made, named and listed.
type Kind struct {
	// Name is the Kubernetes kind, e.g. "Job"; APIVersion its group/version.
	Name       string
	APIVersion string
	// Prefix of its workloads' names in the ledger: PREFIX-<object name> (the ledger's parser).
	Prefix string
	// New wraps a new empty object, to read one into.
	New func() GenericJob
	// List lists the objects that carry the queue label.
	List func(ctx context.Context, reader client.Reader) ([]client.Object, error)
	// TopologyPods lists the object's pods with their pod set and index, for the topology
	// ungater (ungater.go); PodOwner names the object of one of its pods.
	TopologyPods func(ctx context.Context, reader client.Reader, job GenericJob) ([]TopologyPod, error)
	PodOwner     func(pod *corev1.Pod) (string, bool)
}

// listLabelled lists into list the objects that carry the queue label; items returns them.
func listLabelled(ctx context.Context, reader client.Reader, list client.ObjectList,
	items func() []client.Object) ([]client.Object, error) {
	if err := reader.List(ctx, list, client.HasLabels{QueueNameLabel}); err != nil {
		return nil, err
	}
	return items(), nil
}

// GVK is the kind's group, version and kind.
func (k *Kind) GVK() schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(k.APIVersion, k.Name)
}

// WorkloadName is the name of the workload of the kind's object `name`, in the ledger and of
// its Workload object.
func (k *Kind) WorkloadName(name string) string { return k.Prefix + "-" + name }

// Kinds are the kinds the bridge governs, each by its own controller.
var Kinds = []*Kind{BatchJobKind, JobSetKind}

// KindOfWorkload returns the kind whose workloads are named like `workload` and the object's
// name, or nil. The prefixes with their "-" do not overlap ("job-" and "jobset-").
func KindOfWorkload(workload string) (*Kind, string) {
	for _, k := range Kinds {
		if name, ok := strings.CutPrefix(workload, k.Prefix+"-"); ok && name != "" {
			return k, name
		}
	}
	return nil, ""
}

// Kueue's names of the Workload of a job (jobframework.GetWorkloadNameForOwnerWithGVK):
// "<lower-case kind>-<name>" cut to the name limit less the hash, "-", then the first
// kueueHashLength hex digits of sha1(kind, group, name, uid joined by newlines). The limit is
// 253, or 63 under Kueue's ShortWorkloadNames feature gate.
const (
	kueueHashLength    = 5
	kueueNameLengthMax = 253
	kueueShortNameMax  = 63
)

// KueueWorkloadNames are the names Kueue may have given the Workload of the kind's object
// name/uid: one, or two when the name is long enough for the feature gate to matter. An
// adopted job keeps its Workload under that name (adopt.go).
func (k *Kind) KueueWorkloadNames(name string, uid types.UID) []string {
	gvk := k.GVK()
	h := sha1.New()
	h.Write([]byte(gvk.Kind + "\n" + gvk.Group + "\n" + name + "\n" + string(uid)))
	hash := hex.EncodeToString(h.Sum(nil))[:kueueHashLength]
	prefix := strings.ToLower(gvk.Kind) + "-" + name
	var names []string
	for _, max := range []int{kueueNameLengthMax, kueueShortNameMax} {
		p := prefix
		if n := max - 1 - kueueHashLength; len(p) > n {
			p = p[:n]
		}
		if len(names) == 0 || names[0] != p+"-"+hash {
			names = append(names, p+"-"+hash)
		}
	}
	return names
}

// kueueBaseName strips the "-HASH" of a name of Kueue's (KueueWorkloadNames) whose prefix was
// not cut: "job-sample-1b2c3" -> "job-sample". ok is false for a name without such a suffix.
func kueueBaseName(workload string) (string, bool) {
	i := len(workload) - kueueHashLength - 1
	if i <= 0 || workload[i] != '-' {
		return "", false
	}
	for _, c := range workload[i+1:] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", false
		}
	}
	return workload[:i], true
}

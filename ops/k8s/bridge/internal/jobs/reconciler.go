package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"admission-ledger/bridge/internal/checks"
	"admission-ledger/bridge/internal/conversion"
	"admission-ledger/bridge/internal/ledger"
	"admission-ledger/bridge/internal/ledgerevents"
	"admission-ledger/bridge/internal/podsetupdates"
)

// FencingTokenAnnotation carries the ledger's fencing token of the admission that released a
// Job, on the Job and on its pod template (so every pod carries it).
const FencingTokenAnnotation = "admission-ledger.io/fencing-token"

// PodSetName is the one podSet of a Job's Workload (ops/kueue_yaml/kueue_yaml.cc's ParseJob, as Kueue).
const PodSetName = "main"

// Group and version of the Workload objects the bridge writes (ops/k8s/crds/workloads.yaml).
const (
	KueueGroup   = "kueue.x-k8s.io"
	KueueVersion = "v1beta2"
)

// PollInterval is how often a Job whose Workload the ledger has not finished with is looked at
// again without a reason while the ledger's watch is not running (pollAfter). While it runs,
// the ledger's decisions reach the bridge through it (LedgerEvents, watch.go) and trigger a
// reconcile of the Job at once.
const PollInterval = 45 * time.Second

// Concurrency is how many objects of one kind are reconciled at once (never one object twice
// at once). Kueue's default groupKindConcurrency for Jobs and Workloads is 5, but its scheduler
// writes each admission to the API server in a goroutine of its own; here the reconcile writes
// it, and with five, each waiting for an API server that a burst of creations slows to a second
// a write, admissions reached the objects at a few a second, not the client's 50.
const Concurrency = 20

// RetryAfterTransportError is the wait after admitd could not be reached or asked to retry.
const RetryAfterTransportError = 5 * time.Second

// Ledger is what the reconciler needs of admitd.
type Ledger interface {
	RecordManifest(ctx context.Context, requestID, mode, manifest string) (ledger.Outcome, error)
	Record(ctx context.Context, requestID string, inputs [][]byte) (ledger.Outcome, error)
	// WorkloadState reads one workload of the ledger (nil: the ledger holds none of that name).
	WorkloadState(ctx context.Context, namespace, name string) (*ledger.WorkloadState, error)
}

// Reconciler drives one object of its kind at a time through submission, mirroring and release.
// It keeps no state of its own: the object, its Workload and the ledger are the state, so a
// restarted bridge carries on where the last one stopped.
type Reconciler struct {
	Kind   *Kind
	Client client.Client
	// APIReader reads straight from the API server, not the cache: the Job and its pods when
	// deciding whether an evicted Job's pods are gone (terminated.go).
	APIReader client.Reader
	Ledger    Ledger
	Events    record.EventRecorder
	// Adoption (nil: none) holds every reconcile until Kueue's Workloads are imported.
	Adoption *AdoptionGate
}

// SetupWithManager registers one reconciler per kind of Kinds whose API the cluster serves,
// for the objects that carry the queue label, also triggered by the ledger's decisions about
// their workloads (events; nil: none). Returns the kinds it set up.
// Reconciles wait for adoption (nil: not at all).
func SetupWithManager(mgr ctrl.Manager, l Ledger, events *LedgerEvents, adoption *AdoptionGate) (
	[]*Kind, error) {
	var set []*Kind
	for _, kind := range Kinds {
		gvk := kind.GVK()
		if _, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			mgr.GetLogger().Info("not governing a kind the cluster does not serve",
				"kind", gvk.String(), "reason", err.Error())
			continue
		}
		r := &Reconciler{Kind: kind, Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
			Ledger: l, Events: mgr.GetEventRecorderFor("admit-k8s"), Adoption: adoption}
		managed := predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[QueueNameLabel] != ""
		})
		b := ctrl.NewControllerManagedBy(mgr).
			Named(strings.ToLower(kind.Name)+"s").
			Watches(kind.New().Object(), objects, builder.WithPredicates(managed)).
			// A change of its Workload object's spec (spec.active: activation.go); the
			// bridge's own status writes do not bump the generation.
			Watches(newWorkloadObject(), handler.EnqueueRequestForOwner(mgr.GetScheme(),
				mgr.GetRESTMapper(), kind.New().Object(), handler.OnlyControllerOwner()),
				builder.WithPredicates(predicate.GenerationChangedPredicate{})).
			WithOptions(controller.Options{MaxConcurrentReconciles: Concurrency,
				UsePriorityQueue: ptr.To(true)})
		if events != nil {
			b = b.WatchesRawSource(events.Source(kind))
		}
		if kind.PodOwner != nil {
			// Pods waiting for the topology ungater (ungater.go).
			toOwner, gated := gatedPods(kind)
			b = b.Watches(&corev1.Pod{}, toOwner, builder.WithPredicates(gated))
		}
		if err := b.Complete(r); err != nil {
			return nil, err
		}
		set = append(set, kind)
	}
	return set, nil
}

// WorkloadName is the name the ledger gives a Job's workload (ParseJob: "job-" + the Job's
// name); the Workload object the bridge creates has the same name.
func WorkloadName(job *batchv1.Job) string { return BatchJobKind.WorkloadName(job.Name) }

// SubmitRequestID is derived from the object's uid and generation: a retry, or a restarted
// bridge, sends the same id and is answered from admitd's record of the first call.
func (k *Kind) SubmitRequestID(obj client.Object) string {
	sum := sha256.Sum256([]byte(string(obj.GetUID()) + "\x00" + strconv.FormatInt(obj.GetGeneration(), 10)))
	return "admit-k8s/" + k.Prefix + "/" + hex.EncodeToString(sum[:16])
}

// podsRequestID names one pod report: the same report on the same token is one call.
func podsRequestID(report, namespace, name, token string) string {
	sum := sha256.Sum256([]byte(report + "\x00" + namespace + "\x00" + name + "\x00" + token))
	return "admit-k8s/pods/" + hex.EncodeToString(sum[:16])
}

// LedgerWorkload is what the bridge reads of a workload in the ledger (Ledger.workloadStates).
type LedgerWorkload = ledger.WorkloadState

// checkUpdates returns the podSetUpdates of pod set podSet that the ledger's admission checks
// hold, checks in the ledger's order (by name), as the decider merged them into the Admitted
// decision.
func checkUpdates(w *LedgerWorkload, podSet string) ([]podsetupdates.PodSetUpdate, []string) {
	var updates []podsetupdates.PodSetUpdate
	var checks []string
	for _, c := range w.Checks {
		for _, u := range c.PodSetUpdates {
			if u.Name == podSet {
				updates = append(updates, u)
				checks = append(checks, c.Name)
			}
		}
	}
	return updates, checks
}

// findLedgerWorkload reads the workload namespace/name of the ledger, or nil.
func (r *Reconciler) findLedgerWorkload(ctx context.Context, namespace, name string) (*LedgerWorkload, error) {
	return r.Ledger.WorkloadState(ctx, namespace, name)
}

// Reconcile takes one object one step further: Workload object, submission, status, release
// or suspension. Each step is idempotent and decided from the current state alone.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	if err := r.Adoption.Wait(ctx); err != nil {
		return ctrl.Result{}, err
	}
	job := r.Kind.New()
	obj := job.Object()
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			// Its Workload object goes with it (owner reference); the ledger was told before
			// the finalizer let it go (deletion.go).
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if obj.GetDeletionTimestamp() != nil {
		return r.deleted(ctx, job)
	}
	if obj.GetLabels()[QueueNameLabel] == "" {
		return ctrl.Result{}, nil
	}
	if err := r.ensureFinalizer(ctx, job); err != nil {
		return ctrl.Result{}, err
	}
	workload, err := r.ensureWorkloadObject(ctx, job)
	if err != nil {
		return ctrl.Result{}, err
	}
	// The ledger knows the workload by its Workload object's name: ours, or Kueue's for a job
	// adopted from Kueue (adopt.go).
	state, err := r.findLedgerWorkload(ctx, obj.GetNamespace(), workload.GetName())
	if err != nil {
		logger.Error(err, "reading the ledger's workloads failed; will retry")
		return ctrl.Result{RequeueAfter: RetryAfterTransportError}, nil
	}
	if state == nil && workload.GetName() != r.Kind.WorkloadName(obj.GetName()) {
		// Kueue's Workload that the adoption at start did not import (it failed, or came
		// later): imported now with its status, not submitted (which would name it anew).
		return r.importKueueWorkload(ctx, job, workload)
	}
	if state != nil && state.UID != string(obj.GetUID()) && !job.Finished() {
		// The ledger's workload of this name is an earlier object's (deleted, and this one
		// created with the same name). Once it ended, the name is free: this one is a new
		// workload. (A workload recorded before the ledger took the object's uid has a derived
		// one: a finished object is left alone, an unfinished one whose workload ended is
		// submitted once more, under its own uid.)
		switch state.Phase {
		case ledger.PhaseFinished, ledger.PhaseRejected, ledger.PhaseDeleted, ledger.PhaseDeactivated:
			logger.Info("the ledger's workload of this name is an earlier object's; submitting this one",
				"earlierUID", state.UID, "phase", state.Phase.String())
			state = nil
		default:
			if err := r.suspend(ctx, job, "an earlier "+r.Kind.Name+"'s workload of this name is still "+state.Phase.String()); err != nil {
				return ctrl.Result{}, err
			}
			return pollAfter(r.Ledger), nil
		}
	}
	if state == nil {
		// Not in the ledger: nothing may run, then submit.
		if err := r.suspend(ctx, job, "not admitted by the ledger"); err != nil {
			return ctrl.Result{}, err
		}
		return r.submit(ctx, job)
	}
	if done, err := r.syncActivation(ctx, workload, state); err != nil {
		return r.retryOrDrop(ctx, job, err)
	} else if done {
		return pollAfter(r.Ledger), nil
	}
	wait, err := r.mirror(ctx, workload, state)
	if err != nil {
		return ctrl.Result{}, err
	}
	result, err := r.follow(ctx, req, job, workload, state)
	if wait > 0 && err == nil && (result.RequeueAfter == 0 || result.RequeueAfter > wait) {
		result.RequeueAfter, result.Priority = wait, ptr.To(NotePriority)
	}
	return result, err
}

// pollAfter is the result of a reconcile that waits for a change: none while the ledger's watch
// runs (every change then comes as an event: the ledger's decisions through the watch, the
// object's through its informer; Kueue polls neither), else another look after PollInterval. A
// periodic look at every object would cost each one reconciles in proportion to how long it
// waits (in a burst of N objects, O(N) each: tests/bench/k8s_burst.sh).
func pollAfter(l Ledger) ctrl.Result {
	if watched, ok := l.(interface{ Live() bool }); ok && watched.Live() {
		return ctrl.Result{}
	}
	return ctrl.Result{RequeueAfter: PollInterval}
}

// follow does what the ledger's phase of the workload asks of the object.
func (r *Reconciler) follow(ctx context.Context, req ctrl.Request, job GenericJob,
	workload *unstructured.Unstructured, state *LedgerWorkload) (ctrl.Result, error) {
	switch state.Phase {
	case ledger.PhaseAdmitted:
		if job.Finished() {
			return r.reportPods(ctx, job, state, ledgerevents.PodsReport_finished, state.FencingToken)
		}
		if err := r.originalFromKueue(job, workload); err != nil {
			return ctrl.Result{}, err
		}
		return r.release(ctx, job, state)
	case ledger.PhaseEvicting:
		return r.evicting(ctx, req, state)
	case ledger.PhaseFinished, ledger.PhaseRejected, ledger.PhaseDeleted, ledger.PhaseDeactivated:
		// An object that completed or failed is left as it is; any other stops.
		if !job.Finished() {
			if err := r.suspend(ctx, job, "the ledger's workload is "+state.Phase.String()); err != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{}, nil
	default:
		// Pending or QuotaReserved: nothing runs without an admission.
		if err := r.suspend(ctx, job, "not admitted by the ledger"); err != nil {
			return ctrl.Result{}, err
		}
		return pollAfter(r.Ledger), nil
	}
}

// evicting suspends an object the ledger evicts and reports its pods terminated once none is
// left.
func (r *Reconciler) evicting(ctx context.Context, req ctrl.Request, state *LedgerWorkload) (ctrl.Result, error) {
	// The pods must go before the ledger releases the quota: suspend (the kind's controllers
	// delete them), and report terminated only with proof that none is left and no more will
	// come (PodsGone). The object is read from the API server: the cache may not have the
	// bridge's own unsuspend yet, and show it suspended as it was before.
	job := r.Kind.New()
	if err := r.APIReader.Get(ctx, req.NamespacedName, job.Object()); err != nil {
		return ctrl.Result{}, err
	}
	if job.Finished() {
		// It completed or failed while being evicted: its controller creates no more pods and
		// ignores a suspension (no Suspended condition will come, so PodsGone would wait
		// forever). Once none of its pods runs, the workload is finished, as Kueue finishes
		// the workload of a finished job; the report carries the evicted admission's token.
		running, err := job.RunningPod(ctx, r.APIReader)
		if err != nil {
			return ctrl.Result{}, err
		}
		if running != "" {
			log.FromContext(ctx).V(1).Info("finished while evicted; waiting for the pods to end", "why", running)
			return ctrl.Result{RequeueAfter: WaitForPodsGonePoll}, nil
		}
		return r.reportPods(ctx, job, state, ledgerevents.PodsReport_finished, state.EvictingToken)
	}
	if !job.IsSuspended() {
		pauseAt(ctx, "evicted-before-suspend", state)
	}
	if err := r.suspend(ctx, job, "evicted by the ledger"); err != nil {
		return ctrl.Result{}, err
	}
	at, hasAt := suspendedAt(job.Object())
	gone, why, err := job.PodsGone(ctx, r.APIReader, at, hasAt, time.Now())
	if err != nil {
		return ctrl.Result{}, err
	}
	if !gone {
		log.FromContext(ctx).V(1).Info("evicted; waiting for the pods to go", "why", why)
		return ctrl.Result{RequeueAfter: WaitForPodsGonePoll}, nil
	}
	pauseAt(ctx, "before-terminated", state)
	return r.reportPods(ctx, job, state, ledgerevents.PodsReport_terminated, state.EvictingToken)
}

// submit sends the object to the ledger, parsed there by the ledger's own parser.
func (r *Reconciler) submit(ctx context.Context, job GenericJob) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	obj := job.Object()
	manifest, err := r.Kind.Manifest(job)
	if err != nil {
		r.Events.Event(obj, corev1.EventTypeWarning, "NotSubmitted", err.Error())
		return ctrl.Result{}, nil
	}
	outcome, err := r.Ledger.RecordManifest(ctx, r.Kind.SubmitRequestID(obj), "submit", manifest)
	var refused *ledger.Refused
	switch {
	case errors.As(err, &refused) && !refused.Retryable():
		logger.Info("the ledger refused the object", "reason", refused.Message)
		r.Events.Event(obj, corev1.EventTypeWarning, "LedgerRefused", refused.Message)
		return ctrl.Result{}, nil
	case err != nil:
		logger.Error(err, "submitting failed; will retry")
		return ctrl.Result{RequeueAfter: RetryAfterTransportError}, nil
	}
	if len(outcome.Sequences) > 0 && !outcome.Retried && !outcome.Unchanged[0] {
		logger.Info("submitted", "sequence", outcome.Sequences[0])
		r.Events.Event(obj, corev1.EventTypeNormal, "Submitted",
			"submitted to the admission ledger at sequence "+strconv.FormatUint(outcome.Sequences[0], 10))
	}
	return pollAfter(r.Ledger), nil
}

// Manifest is the object as the ledger's parser takes it: apiVersion, kind, the metadata it
// reads and the spec.
func (k *Kind) Manifest(job GenericJob) (string, error) {
	obj := job.Object()
	spec, err := job.Spec()
	if err != nil {
		return "", err
	}
	metadata := map[string]any{"name": obj.GetName(), "namespace": obj.GetNamespace(), "uid": string(obj.GetUID())}
	if len(obj.GetLabels()) > 0 {
		metadata["labels"] = obj.GetLabels()
	}
	annotations := map[string]string{}
	for k, v := range obj.GetAnnotations() {
		if k != corev1.LastAppliedConfigAnnotation && k != FencingTokenAnnotation && k != OriginalPodSetAnnotation {
			annotations[k] = v
		}
	}
	if len(annotations) > 0 {
		metadata["annotations"] = annotations
	}
	text, err := json.Marshal(map[string]any{"apiVersion": k.APIVersion, "kind": k.Name,
		"metadata": metadata, "spec": spec})
	if err != nil {
		return "", fmt.Errorf("encoding %s %s/%s: %w", k.Name, obj.GetNamespace(), obj.GetName(), err)
	}
	return string(text), nil
}

// JobManifest is a Job as the ledger's parser takes it.
func JobManifest(job *batchv1.Job) (string, error) {
	return BatchJobKind.Manifest(&BatchJob{Job: job})
}

func newWorkloadObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: KueueGroup, Version: KueueVersion, Kind: "Workload"})
	return u
}

// ensureWorkloadObject returns the object's Workload object: ours, or the one Kueue made for it
// (kueueWorkloadObject), or else a new one of ours, owned by the object so that the garbage
// collector deletes it with the object.
func (r *Reconciler) ensureWorkloadObject(ctx context.Context, job GenericJob) (*unstructured.Unstructured, error) {
	obj := job.Object()
	workload := newWorkloadObject()
	key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: r.Kind.WorkloadName(obj.GetName())}
	err := r.Client.Get(ctx, key, workload)
	if err == nil || !apierrors.IsNotFound(err) {
		return workload, err
	}
	if kueue, err := r.kueueWorkloadObject(ctx, obj); kueue != nil || err != nil {
		return kueue, err
	}
	var podSets []any
	for _, ps := range job.PodSets() {
		template, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ps.Template)
		if err != nil {
			return nil, err
		}
		unstructured.RemoveNestedField(template, "metadata", "creationTimestamp")
		podSets = append(podSets, map[string]any{"name": ps.Name, "count": int64(ps.Count), "template": template})
	}
	workload = newWorkloadObject()
	workload.SetNamespace(obj.GetNamespace())
	workload.SetName(key.Name)
	workload.SetLabels(map[string]string{checks.JobUIDLabel: string(obj.GetUID())})
	workload.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(obj, r.Kind.GVK())})
	workload.Object["spec"] = map[string]any{
		"queueName": obj.GetLabels()[QueueNameLabel],
		"podSets":   podSets,
	}
	if err := r.Client.Create(ctx, workload); err != nil {
		return nil, fmt.Errorf("creating Workload %s: %w", key, err)
	}
	return workload, nil
}

// mirror writes the ledger's status of the workload into the Workload object's status.
// wait: the write is a note (noteWrite) over the budget of notes, its slot that far ahead
// (notePacer); the caller looks again then (0: written, or nothing to write).
func (r *Reconciler) mirror(ctx context.Context, workload *unstructured.Unstructured,
	state *LedgerWorkload) (wait time.Duration, err error) {
	current, _, _ := unstructured.NestedMap(workload.Object, "status")
	desired := runtime.DeepCopyJSONValue(state.Status).(map[string]any)
	// A check state that a check controller wrote and the ledger does not hold yet is the
	// check forwarder's to forward or revert (internal/checks), not the mirror's to overwrite.
	if desired != nil {
		// The ledger shows a TAS placement in v1beta1's shape; the Workload is v1beta2.
		conversion.StatusTopologyToV1beta2(desired)
		checks.KeepForeignChecks(workload, desired)
		// Kueue's job reconciler writes PodsReady; here it shows the ledger's `pods ready`.
		withPodsReady(desired, current, state, time.Now())
	}
	key := client.ObjectKeyFromObject(workload)
	now := time.Now()
	if equality.Semantic.DeepEqual(current, desired) {
		pacedNotes.drop(key, now)
		return 0, nil
	}
	if !noteWrite(workload, state) {
		pacedNotes.drop(key, now)
		workloadWrites.spend(now)
	} else if wait := pacedNotes.take(noteWrites, key, now); wait > 0 {
		if _, had := unshown.LoadOrStore(key, struct{}{}); !had && OnSubmittedButUnshown != nil {
			OnSubmittedButUnshown(key.Namespace, key.Name)
		}
		return wait, nil
	}
	workload.Object["status"] = desired
	if err := r.Client.Status().Update(ctx, workload); err != nil {
		return 0, fmt.Errorf("writing the status of Workload %s/%s: %w", workload.GetNamespace(), workload.GetName(), err)
	}
	unshown.Delete(key)
	return 0, nil
}

// unshown: the Workload objects whose status a deferred note left without what the ledger holds
// (namespace/name), so a Workload showing no condition is not taken for one the ledger has not
// seen (SubmittedButUnshown).
var unshown sync.Map

// OnSubmittedButUnshown (may be nil) is told of each Workload object that SubmittedButUnshown
// answers true for from now on (definitions.StatusWriter.SubmittedNow). Set before the
// controllers start.
var OnSubmittedButUnshown func(namespace, name string)

// SubmittedButUnshown: the ledger holds the Workload object namespace/name, though its status
// may show nothing yet (its first pending status waits for the notes' budget).
func SubmittedButUnshown(namespace, name string) bool {
	_, ok := unshown.Load(types.NamespacedName{Namespace: namespace, Name: name})
	return ok
}

// The status writes that change only what a pending Workload says (noteWrite: its pending reason
// and message change at most decisions near it) share a budget of NoteWritesPerSecond
// (burst noteWriteBurst), so that they never hold the API client's rate limit (Kueue's 50 a
// second) from admissions and evictions; a note over it waits for its slot (notePacer). Kueue writes
// such messages only for the workloads its scheduler tries.
const (
	NoteWritesPerSecond = 10
	noteWriteBurst      = 20
	// NoteRetry: the wait of a note when the budget allows none at all (a burst of 0).
	NoteRetry = 2 * time.Second
)

var noteWrites = rate.NewLimiter(NoteWritesPerSecond, noteWriteBurst)

// noteWrite: the ledger's workload is pending and the object shows no admission: the write
// would change what the object says of its wait only (its first pending status, a new reason
// or message, an eviction of an admission it never showed).
func noteWrite(workload *unstructured.Unstructured, state *LedgerWorkload) bool {
	return state.Phase == ledger.PhasePending && !hasAdmission(workload)
}

// suspend sets spec.suspend: the kind's controllers then delete its pods.
func (r *Reconciler) suspend(ctx context.Context, job GenericJob, why string) error {
	if job.IsSuspended() {
		return nil
	}
	// A patch of the one field: the controllers' status writes do not make it conflict. The
	// time of this suspension goes in the same patch (PodsGone compares the controllers'
	// Suspended conditions with it).
	obj := job.Object()
	before := job.Copy().Object()
	job.SetSuspended(true)
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[SuspendedAtAnnotation] = suspensionStamp(before, time.Now()).Format(time.RFC3339)
	obj.SetAnnotations(annotations)
	if err := r.Client.Patch(ctx, obj, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("suspending %s %s/%s: %w", r.Kind.Name, obj.GetNamespace(), obj.GetName(), err)
	}
	log.FromContext(ctx).Info("suspended", "why", why)
	r.Events.Event(obj, corev1.EventTypeNormal, "Suspended", why)
	return nil
}

// reportPods records a pod report for the workload with the given token. A repeat of a report
// already recorded is answered from the ledger and writes nothing.
func (r *Reconciler) reportPods(ctx context.Context, job GenericJob, state *LedgerWorkload,
	report ledgerevents.PodsReport, token string) (ctrl.Result, error) {
	if err := r.recordPods(ctx, state, report, token, ""); err != nil {
		return r.retryOrDrop(ctx, job, err)
	}
	return pollAfter(r.Ledger), nil
}

// recordPods records a pod report; message only with failedToStart (why), "" otherwise. The
// request id names the report and the token alone: one report per token, whatever its message.
func (r *Reconciler) recordPods(ctx context.Context, state *LedgerWorkload,
	report ledgerevents.PodsReport, token, message string) error {
	event, err := PodsReportedEvent(state.Namespace, state.Name, state.UID, report, token, message)
	if err != nil {
		return err
	}
	_, err = r.Ledger.Record(ctx, podsRequestID(report.String(), state.Namespace, state.Name, token), [][]byte{event})
	return err
}

// retryOrDrop: a transport failure is retried; a refusal (a stale token: the ledger moved on)
// is reported on the object and the object is looked at again with the ledger's new state.
func (r *Reconciler) retryOrDrop(ctx context.Context, job GenericJob, err error) (ctrl.Result, error) {
	return retryOrDrop(ctx, r.Events, job.Object(), err)
}

// retryOrDrop: a transport failure is retried soon; a refusal is shown on obj as a
// LedgerRefused Warning Event and obj is looked at again at the next poll.
func retryOrDrop(ctx context.Context, events record.EventRecorder, obj client.Object, err error) (ctrl.Result, error) {
	var refused *ledger.Refused
	if errors.As(err, &refused) && !refused.Retryable() {
		log.FromContext(ctx).Info("the ledger refused a report", "reason", refused.Message)
		events.Event(obj, corev1.EventTypeWarning, "LedgerRefused", refused.Message)
		return ctrl.Result{RequeueAfter: PollInterval}, nil
	}
	log.FromContext(ctx).Error(err, "reporting to the ledger failed; will retry")
	return ctrl.Result{RequeueAfter: RetryAfterTransportError}, nil
}

// release lets an admitted object run, write-ahead: (0) the admission is applied to a copy of
// the object, and when the admission checks' podSetUpdates conflict with a pod template it
// cannot start: `pods failedToStart` is reported instead (failedToStart), (1) `pods released`
// is in the ledger before anything else, (2) the pod templates get the flavors' node
// selectors and tolerations, the admitted counts (partial admission) and the fencing token,
// (3) only then is the object unsuspended. A crash between steps repeats the rest: (0) and (2)
// are comparisons, (1) is answered from the ledger, (3) happens only after (2) is stored.
func (r *Reconciler) release(ctx context.Context, job GenericJob, state *LedgerWorkload) (ctrl.Result, error) {
	token := state.FencingToken
	if token == "" {
		return pollAfter(r.Ledger), nil
	}
	obj := job.Object()
	running := !job.IsSuspended()
	if running && obj.GetAnnotations()[FencingTokenAnnotation] == token {
		// Released before: its pods may wait for their domains (TAS), or be ready now.
		if err := r.ungate(ctx, job, state); err != nil {
			return ctrl.Result{}, err
		}
		return r.reportReady(ctx, job, state, token)
	}
	if running && adoptedRunning(obj, state) {
		// Kueue released it and the ledger imported that admission: its pods run already
		// (the ledger counts them released) and its pod template is immutable. It is not
		// stopped nor released again; its pods carry no token (docs/k8s.md, "Adopting a Kueue
		// cluster").
		return r.reportReady(ctx, job, state, token)
	}
	if running {
		// Unsuspended, but not by this admission: stop it before releasing anew.
		if err := r.suspend(ctx, job, "running without the ledger's current admission"); err != nil {
			return ctrl.Result{}, err
		}
	}
	pauseAt(ctx, "before-pods-released", state)
	// (0) Before anything is recorded: an admission the object cannot take is not released.
	// Also after a restart that finds `pods released` already recorded: the object is still
	// suspended then (it is unsuspended only after (2), which the conflict stops), so no pod ran.
	if _, err := r.applyAdmission(ctx, job.Copy(), state, token); err != nil {
		var conflict *cannotStart
		if errors.As(err, &conflict) {
			return r.failedToStart(ctx, job, state, token, conflict)
		}
		return ctrl.Result{}, err
	}
	// (1)
	if err := r.recordPods(ctx, state, ledgerevents.PodsReport_released, token, ""); err != nil {
		return r.retryOrDrop(ctx, job, err)
	}
	// Kubernetes lets the scheduling directives of a suspended Job change only while it has no
	// start time, and the Job controller keeps the start of an earlier run (an eviction, a
	// revocation): clear it, as Kueue does.
	if job.ClearStartTime() {
		if err := r.Client.Status().Update(ctx, obj); err != nil {
			return ctrl.Result{}, fmt.Errorf("clearing the start time of %s %s/%s: %w", r.Kind.Name, obj.GetNamespace(), obj.GetName(), err)
		}
	}
	// (2)
	changed, err := r.applyAdmission(ctx, job, state, token)
	var conflict *cannotStart
	if errors.As(err, &conflict) {
		// (0) found none a moment ago: the ledger's workload or a flavor changed in between.
		return r.failedToStart(ctx, job, state, token, conflict)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if changed {
		if err := r.Client.Update(ctx, obj); err != nil {
			return ctrl.Result{}, fmt.Errorf("setting the admission on %s %s/%s: %w", r.Kind.Name, obj.GetNamespace(), obj.GetName(), err)
		}
	}
	// (3), a patch of the one field, as suspend's.
	pauseAt(ctx, "before-unsuspend", state)
	// The recorded suspension goes with it: a later eviction's proof compares with its own.
	before := job.Copy().Object()
	job.SetSuspended(false)
	annotations := obj.GetAnnotations()
	delete(annotations, SuspendedAtAnnotation)
	obj.SetAnnotations(annotations)
	if err := r.Client.Patch(ctx, obj, client.MergeFrom(before)); err != nil {
		return ctrl.Result{}, fmt.Errorf("unsuspending %s %s/%s: %w", r.Kind.Name, obj.GetNamespace(), obj.GetName(), err)
	}
	log.FromContext(ctx).Info("released", "fencingToken", token)
	r.Events.Event(obj, corev1.EventTypeNormal, "Released", "admitted by the ledger with fencing token "+token)
	return pollAfter(r.Ledger), nil
}

// failedToStart: the admission checks' podSetUpdates conflict with a pod template. The decider
// checked what it knows (the checks' updates with each other, the flavors' node labels and the
// pod sets' nodeSelectors); the templates' own labels and annotations only the bridge sees. As
// Kueue's job reconciler finishes such a workload (FailedToStart, its quota released), the
// bridge reports `pods failedToStart` with Kueue's message and the admission's token (one
// request id per token, as the other pod reports), keeps the object suspended and says why in
// a Warning Event. The ledger then finishes the workload; a refusal (the token went stale
// meanwhile) is shown on the object and the next reconcile reads the ledger's new state.
func (r *Reconciler) failedToStart(ctx context.Context, job GenericJob, state *LedgerWorkload,
	token string, conflict *cannotStart) (ctrl.Result, error) {
	r.Events.Event(job.Object(), corev1.EventTypeWarning, "FailedToStart", conflict.Error())
	log.FromContext(ctx).Info("not released: the checks' podSetUpdates conflict with the pod template", "why", conflict.Error())
	if err := r.recordPods(ctx, state, ledgerevents.PodsReport_failedToStart, token, conflict.Error()); err != nil {
		return r.retryOrDrop(ctx, job, err)
	}
	return pollAfter(r.Ledger), nil
}

// cannotStart: the object cannot run as admitted (an admission check's podSetUpdate conflicts
// with a pod template, or the kind cannot run the admitted count).
type cannotStart struct{ err error }

func (c *cannotStart) Error() string { return c.err.Error() }

// applyAdmission sets, on the (suspended) object, starting from its own settings
// (OriginalPodSetAnnotation), what the admission assigned to each pod set: the node labels of
// the assigned flavors as node selectors, their tolerations, the admission checks'
// podSetUpdates (labels, annotations, nodeSelector, tolerations; Kueue's merge, a conflict is
// a *cannotStart), the admitted count (a partial admission's is smaller), and the
// fencing token on the object and on every pod template. Reports whether anything changed.
func (r *Reconciler) applyAdmission(ctx context.Context, job GenericJob, state *LedgerWorkload, token string) (bool, error) {
	before := job.Copy()
	if err := startFromOriginal(job); err != nil {
		return false, err
	}
	for i, ps := range job.PodSets() {
		flavors, count, ok := state.Assignment(ps.Name)
		if !ok {
			return false, fmt.Errorf("the ledger's admission of %s/%s has no podSet %q", state.Namespace, state.Name, ps.Name)
		}
		if err := r.applyFlavors(ctx, flavors, &ps.Template.Spec); err != nil {
			return false, err
		}
		updates, checks := checkUpdates(state, ps.Name)
		for u := range updates {
			if err := podsetupdates.Merge(&ps.Template.ObjectMeta, &ps.Template.Spec, updates[u]); err != nil {
				return false, &cannotStart{fmt.Errorf("in admission check %q: %w", checks[u], err)}
			}
		}
		if err := job.Admit(i, count); err != nil {
			return false, &cannotStart{err}
		}
		applyTopology(ps.Template, state.Topology(ps.Name))
		if ps.Template.Annotations == nil {
			ps.Template.Annotations = map[string]string{}
		}
		ps.Template.Annotations[FencingTokenAnnotation] = token
	}
	obj := job.Object()
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[FencingTokenAnnotation] = token
	obj.SetAnnotations(annotations)
	return !equality.Semantic.DeepEqual(before.Object(), obj), nil
}

// applyFlavors adds the node labels of the flavors (resource -> flavor) as node selectors and
// their tolerations to the pod spec.
func (r *Reconciler) applyFlavors(ctx context.Context, flavors map[string]string, podSpec *corev1.PodSpec) error {
	names := make([]string, 0, len(flavors))
	seen := map[string]bool{}
	for _, flavor := range flavors {
		if !seen[flavor] {
			seen[flavor] = true
			names = append(names, flavor)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		flavor := &unstructured.Unstructured{}
		flavor.SetGroupVersionKind(schema.GroupVersionKind{Group: KueueGroup, Version: KueueVersion, Kind: "ResourceFlavor"})
		if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, flavor); err != nil {
			return fmt.Errorf("reading ResourceFlavor %s: %w", name, err)
		}
		labels, _, _ := unstructured.NestedStringMap(flavor.Object, "spec", "nodeLabels")
		for k, v := range labels {
			if podSpec.NodeSelector == nil {
				podSpec.NodeSelector = map[string]string{}
			}
			podSpec.NodeSelector[k] = v
		}
		tolerations, _, _ := unstructured.NestedSlice(flavor.Object, "spec", "tolerations")
		for _, item := range tolerations {
			m, ok := item.(map[string]any)
			if !ok {
				continue
			}
			var t corev1.Toleration
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &t); err != nil {
				return fmt.Errorf("ResourceFlavor %s: a toleration: %w", name, err)
			}
			present := false
			for _, have := range podSpec.Tolerations {
				if have.MatchToleration(&t) && have.Value == t.Value && ptr.Equal(have.TolerationSeconds, t.TolerationSeconds) {
					present = true
				}
			}
			if !present {
				podSpec.Tolerations = append(podSpec.Tolerations, t)
			}
		}
	}
	return nil
}

// OriginalPodSetAnnotation keeps what the object asked for before its first release (per pod
// set: node selector, tolerations, count setting, the template's labels and annotations), so
// that every admission is applied to that and not on top of an earlier admission's flavors
// (Kueue restores the same on a stop).
const OriginalPodSetAnnotation = "admission-ledger.io/original-pod-set"

type originalPodSet struct {
	// Name of the pod set; absent in the single object recorded for one pod set.
	Name         string              `json:"name,omitempty"`
	NodeSelector map[string]string   `json:"nodeSelector,omitempty"`
	Tolerations  []corev1.Toleration `json:"tolerations,omitempty"`
	Parallelism  *int32              `json:"parallelism,omitempty"`
	// The template's labels and annotations, which admission checks' podSetUpdates add to;
	// absent from a record made before the bridge applied them (then left as they are).
	Template *originalTemplate `json:"template,omitempty"`
}

type originalTemplate struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// readOriginal parses the annotation: a list, one entry per pod set, or a single object for
// one pod set.
func readOriginal(text string) ([]originalPodSet, error) {
	if strings.HasPrefix(strings.TrimSpace(text), "[") {
		var list []originalPodSet
		err := json.Unmarshal([]byte(text), &list)
		return list, err
	}
	var one originalPodSet
	if err := json.Unmarshal([]byte(text), &one); err != nil {
		return nil, err
	}
	return []originalPodSet{one}, nil
}

// startFromOriginal records the object's own pod-set settings the first time, and restores
// them from the record every later time.
func startFromOriginal(job GenericJob) error {
	obj := job.Object()
	podSets := job.PodSets()
	if text, found := obj.GetAnnotations()[OriginalPodSetAnnotation]; found {
		original, err := readOriginal(text)
		if err == nil && len(original) != len(podSets) {
			err = fmt.Errorf("%d pod sets recorded, %d in the object", len(original), len(podSets))
		}
		if err != nil {
			return fmt.Errorf("%s/%s: annotation %s: %w", obj.GetNamespace(), obj.GetName(), OriginalPodSetAnnotation, err)
		}
		for i, ps := range podSets {
			ps.Template.Spec.NodeSelector = original[i].NodeSelector
			ps.Template.Spec.Tolerations = original[i].Tolerations
			job.SetCountField(i, original[i].Parallelism)
			if original[i].Template != nil {
				ps.Template.Labels = original[i].Template.Labels
				ps.Template.Annotations = original[i].Template.Annotations
			}
		}
		return nil
	}
	record := make([]originalPodSet, 0, len(podSets))
	for i, ps := range podSets {
		record = append(record, originalPodSet{Name: ps.Name, NodeSelector: ps.Template.Spec.NodeSelector,
			Tolerations: ps.Template.Spec.Tolerations, Parallelism: job.CountField(i),
			Template: &originalTemplate{Labels: ps.Template.Labels, Annotations: ps.Template.Annotations}})
	}
	return recordOriginal(obj, record)
}

// recordOriginal sets OriginalPodSetAnnotation on obj (in memory) to record.
func recordOriginal(obj client.Object, record []originalPodSet) error {
	// One pod set (a Job's) is recorded as the single object; several as a list, by name.
	var text []byte
	var err error
	if len(record) == 1 {
		record[0].Name = ""
		text, err = json.Marshal(record[0])
	} else {
		text, err = json.Marshal(record)
	}
	if err != nil {
		return err
	}
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[OriginalPodSetAnnotation] = string(text)
	obj.SetAnnotations(annotations)
	return nil
}

// PodsReportedEvent is the input `admitctl pods REPORT NAMESPACE/NAME --token T [--message M]`
// records, in the canonical bytes admitd takes. An empty message is left unset, as admitctl
// leaves it, so a report without one has the bytes it had before the field existed.
func PodsReportedEvent(namespace, name, uid string, report ledgerevents.PodsReport, token, message string) ([]byte, error) {
	return ledger.BuildEvent(func(event ledgerevents.Event) error {
		r, err := event.Body().NewPodsReported()
		if err != nil {
			return err
		}
		if err := ledger.SetNewWorkloadRef(r, namespace, name, uid); err != nil {
			return err
		}
		r.SetReport(report)
		if message != "" {
			if err := r.SetMessage_(message); err != nil {
				return err
			}
		}
		return r.SetFencingToken(token)
	})
}

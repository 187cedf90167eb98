package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"admission-ledger/bridge/internal/definitions"
	"admission-ledger/bridge/internal/ledger"
)

// Adopting a cluster where Kueue ran (docs/k8s.md, "Adopting a Kueue cluster"). Kueue stopped;
// its Workload objects, with its status, and its Jobs stay. Before the controllers start, the
// bridge imports every Workload the ledger does not know (Adopt): admitted ones keep running
// under the ledger's imported admission, pending ones wait in the ledger's queues. Its Jobs keep
// the Workloads under Kueue's names (KueueWorkloadNames), which the ledger takes too.

// Bounds of one adoption.
const (
	// adoptAttemptsMax: tries of the whole adoption (admitd or the API server unreachable),
	// adoptRetryWait apart, before the bridge gives up and exits (to be restarted).
	adoptAttemptsMax = 60
	adoptRetryWait   = 5 * time.Second
	// adoptImportObjectsMax: Workloads in one recordManifest "import" call (admitd takes at most
	// kAppendBatchEventsMax / 2 = 2048 objects and 2 MiB).
	adoptImportObjectsMax = 200
	// adoptImportBytesMax: the manifest of one call, under admitd's 2 MiB.
	adoptImportBytesMax = 1536 << 10
	// adoptStatesNamesMax: names in one workloadStates read (admitd's limit).
	adoptStatesNamesMax = 1024
)

// AdoptLedger is what the adoption needs of admitd.
type AdoptLedger interface {
	RecordManifest(ctx context.Context, requestID, mode, manifest string) (ledger.Outcome, error)
	WorkloadStates(ctx context.Context, names []string) (map[string]*ledger.WorkloadState,
		uint64, error)
}

// adoptDefinitionKinds: the order in which definitions go to the ledger before the imports
// (each names only kinds before it).
var adoptDefinitionKinds = []string{"WorkloadPriorityClass", "ResourceFlavor", "AdmissionCheck",
	"Cohort", "ClusterQueue", "LocalQueue"}

// Adopt imports the Workload objects of the cluster that the ledger does not know and that
// Kueue made (adoptable), with their status, in creation order; first it forwards the
// definitions (as the definitions' controllers will, with their request ids), so that the
// imports find their queues. Returns how many it imported; 0, with nothing written, when the
// ledger knows them all (a restart). A Workload the ledger refuses is left out, logged; its job
// tries again when reconciled (importKueueWorkload).
func Adopt(ctx context.Context, c client.Reader, l AdoptLedger) (int, error) {
	logger := log.FromContext(ctx).WithName("adopt")
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: KueueGroup, Version: KueueVersion,
		Kind: "WorkloadList"})
	if err := c.List(ctx, list); err != nil {
		return 0, fmt.Errorf("listing Workloads to adopt: %w", err)
	}
	var candidates []*unstructured.Unstructured
	for i := range list.Items {
		if adoptable(&list.Items[i]) {
			candidates = append(candidates, &list.Items[i])
		}
	}
	unknown, err := unknownToLedger(ctx, l, candidates)
	if err != nil || len(unknown) == 0 {
		return 0, err
	}
	logger.Info("adopting Kueue's Workloads the ledger does not know", "count", len(unknown))
	if err := forwardDefinitions(ctx, c, l); err != nil {
		return 0, err
	}
	sort.Slice(unknown, func(i, j int) bool { return adoptOrder(unknown[i], unknown[j]) })
	imported := 0
	for start := 0; start < len(unknown); {
		end := start
		size := 0
		for end < len(unknown) && end-start < adoptImportObjectsMax {
			text, _ := json.Marshal(ImportManifest(unknown[end]))
			if end > start && size+len(text) > adoptImportBytesMax {
				break
			}
			size += len(text)
			end++
		}
		n, err := importBatch(ctx, l, unknown[start:end])
		if err != nil {
			return imported, err
		}
		imported += n
		start = end
	}
	logger.Info("adopted", "imported", imported)
	return imported, nil
}

// adoptable: a Workload with a queue that Kueue made: owned by a job of a governed kind under
// another name than the bridge gives (Kueue's), or owned by its creator and carrying a status
// (the bridge writes none before the ledger knows it).
func adoptable(wl *unstructured.Unstructured) bool {
	queue, _, _ := unstructured.NestedString(wl.Object, "spec", "queueName")
	if queue == "" || wl.GetDeletionTimestamp() != nil || kueueFinished(wl) {
		return false
	}
	if kind, owner := governingKind(wl); kind != nil {
		return wl.GetName() != kind.WorkloadName(owner.Name)
	}
	status, _, _ := unstructured.NestedMap(wl.Object, "status")
	return len(status) > 0
}

// kueueFinished: Kueue finished the Workload (condition Finished True); it holds no quota and
// its job runs no more: nothing to import.
func kueueFinished(wl *unstructured.Unstructured) bool {
	conditions, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
	for _, item := range conditions {
		c, _ := item.(map[string]any)
		if c["type"] == "Finished" && c["status"] == "True" {
			return true
		}
	}
	return false
}

// governingKind: the governed kind and the owner reference of a Workload a job controls.
func governingKind(wl client.Object) (*Kind, *metav1.OwnerReference) {
	owner := metav1.GetControllerOfNoCopy(wl)
	if owner == nil {
		return nil, nil
	}
	for _, kind := range Kinds {
		if owner.Kind == kind.Name && owner.APIVersion == kind.APIVersion {
			return kind, owner
		}
	}
	return nil, nil
}

// unknownToLedger: the Workloads of which the ledger holds no workload of that name.
func unknownToLedger(ctx context.Context, l AdoptLedger, wls []*unstructured.Unstructured) (
	[]*unstructured.Unstructured, error) {
	var unknown []*unstructured.Unstructured
	for start := 0; start < len(wls); start += adoptStatesNamesMax {
		chunk := wls[start:min(start+adoptStatesNamesMax, len(wls))]
		names := make([]string, 0, len(chunk))
		for _, wl := range chunk {
			names = append(names, ledger.Key(wl.GetNamespace(), wl.GetName()))
		}
		states, _, err := l.WorkloadStates(ctx, names)
		if err != nil {
			return nil, fmt.Errorf("reading the ledger's workloads to adopt: %w", err)
		}
		for i, wl := range chunk {
			if states[names[i]] == nil {
				unknown = append(unknown, wl)
			}
		}
	}
	return unknown, nil
}

// adoptOrder: by creation time (Kueue's queue order among equals), then namespace and name.
func adoptOrder(a, b *unstructured.Unstructured) bool {
	ta, tb := a.GetCreationTimestamp(), b.GetCreationTimestamp()
	if !ta.Equal(&tb) {
		return ta.Before(&tb)
	}
	if a.GetNamespace() != b.GetNamespace() {
		return a.GetNamespace() < b.GetNamespace()
	}
	return a.GetName() < b.GetName()
}

// forwardDefinitions records every Kueue definition of the cluster as its controller will (the
// same manifest and request id: that controller's call is then answered from admitd's
// record). A refusal is the controller's to report; it is logged here and passed over.
func forwardDefinitions(ctx context.Context, c client.Reader, l AdoptLedger) error {
	for _, kind := range adoptDefinitionKinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: definitions.Group,
			Version: definitions.StoredVersion, Kind: kind + "List"})
		if err := c.List(ctx, list); err != nil {
			return fmt.Errorf("listing %ss before adopting: %w", kind, err)
		}
		for i := range list.Items {
			obj := &list.Items[i]
			if obj.GetDeletionTimestamp() != nil {
				continue
			}
			manifest, err := definitions.Manifest(obj)
			if err == nil {
				_, err = l.RecordManifest(ctx, definitions.RequestID(obj), "apply", manifest)
			}
			var refused *ledger.Refused
			if errors.As(err, &refused) && !refused.Retryable() {
				log.FromContext(ctx).Info("the ledger refused a definition before the adoption",
					"kind", kind, "name", obj.GetName(), "reason", refused.Message)
			} else if err != nil {
				return fmt.Errorf("forwarding %s %s before adopting: %w", kind, obj.GetName(), err)
			}
		}
	}
	return nil
}

// importBatch imports the Workloads in one call; when the ledger refuses it, one by one, so
// that one it cannot take does not hold back the others. Returns how many it recorded.
func importBatch(ctx context.Context, l AdoptLedger, wls []*unstructured.Unstructured) (
	int, error) {
	items := make([]any, 0, len(wls))
	for _, wl := range wls {
		items = append(items, ImportManifest(wl))
	}
	text, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		return 0, err
	}
	outcome, err := l.RecordManifest(ctx, ImportRequestID(wls), "import", string(text))
	var refused *ledger.Refused
	switch {
	case err == nil:
		n := 0
		for _, unchanged := range outcome.Unchanged {
			if !unchanged && !outcome.Retried {
				n++
			}
		}
		return n, nil
	case !errors.As(err, &refused) || refused.Retryable():
		return 0, fmt.Errorf("importing Kueue's Workloads: %w", err)
	case len(wls) == 1:
		log.FromContext(ctx).Info("the ledger refused to import a Workload; its job stays held",
			"workload", wls[0].GetNamespace()+"/"+wls[0].GetName(), "reason", refused.Message)
		return 0, nil
	}
	total := 0
	for _, wl := range wls {
		n, err := importBatch(ctx, l, []*unstructured.Unstructured{wl})
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// ImportManifest is a Workload as the ledger's import takes it: the object with Kueue's status,
// without the server's bookkeeping, and with the uid of the job that controls it (the ledger's
// workload of a job carries the job's uid, as a submitted one: its fencing tokens are the
// job's).
func ImportManifest(wl *unstructured.Unstructured) map[string]any {
	out := runtime.DeepCopyJSON(wl.Object)
	out["apiVersion"] = KueueGroup + "/" + KueueVersion
	out["kind"] = "Workload"
	metadata, _ := out["metadata"].(map[string]any)
	for _, field := range []string{"managedFields", "resourceVersion", "generation", "ownerReferences",
		"finalizers"} {
		delete(metadata, field)
	}
	if _, owner := governingKind(wl); owner != nil {
		metadata["uid"] = string(owner.UID)
	}
	return out
}

// ImportRequestID names one import of these Workloads (their names and uids): a retry is
// answered from admitd's record; another import of any of them is known by its key and
// writes nothing (mode "import" keys each workload by its object).
func ImportRequestID(wls []*unstructured.Unstructured) string {
	h := sha256.New()
	for _, wl := range wls {
		h.Write([]byte(wl.GetNamespace() + "\x00" + wl.GetName() + "\x00" + string(wl.GetUID()) + "\x00"))
	}
	return "admit-k8s/import/" + hex.EncodeToString(h.Sum(nil)[:16])
}

// kueueWorkloadObject finds the Workload Kueue made for the object (KueueWorkloadNames), when
// the object controls it; nil when there is none.
func (r *Reconciler) kueueWorkloadObject(ctx context.Context, obj client.Object) (
	*unstructured.Unstructured, error) {
	for _, name := range r.Kind.KueueWorkloadNames(obj.GetName(), obj.GetUID()) {
		wl := newWorkloadObject()
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}, wl)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if owner := metav1.GetControllerOfNoCopy(wl); owner != nil && owner.UID == obj.GetUID() {
			return wl, nil
		}
	}
	return nil, nil
}

// ledgerWorkloadOf: the ledger's workload of the object under our name, or, when that is not
// the object's (another uid, or none), under Kueue's names.
func (r *Reconciler) ledgerWorkloadOf(ctx context.Context, obj client.Object) (
	*LedgerWorkload, error) {
	ours, err := r.findLedgerWorkload(ctx, obj.GetNamespace(), r.Kind.WorkloadName(obj.GetName()))
	if err != nil || (ours != nil && ours.UID == string(obj.GetUID())) {
		return ours, err
	}
	for _, name := range r.Kind.KueueWorkloadNames(obj.GetName(), obj.GetUID()) {
		state, err := r.findLedgerWorkload(ctx, obj.GetNamespace(), name)
		if err != nil {
			return nil, err
		}
		if state != nil && state.UID == string(obj.GetUID()) {
			return state, nil
		}
	}
	return ours, nil
}

// adoptedRunning: the ledger's current admission is the one imported from Kueue and the object
// was not released by the bridge (no token): Kueue released it, and its pods may run.
func adoptedRunning(obj client.Object, state *LedgerWorkload) bool {
	return state.ImportedAdmission && state.Generation == 1 &&
		obj.GetAnnotations()[FencingTokenAnnotation] == ""
}

// importKueueWorkload imports the object's Workload that Kueue made, which the ledger does not
// know: as Adopt does at start, for one. Refused, the object is held suspended (nothing runs
// without the ledger's admission) and a LedgerRefused Warning Event says why.
func (r *Reconciler) importKueueWorkload(ctx context.Context, job GenericJob,
	wl *unstructured.Unstructured) (ctrl.Result, error) {
	if kueueFinished(wl) || job.Finished() {
		// Kueue's to the end: no quota held, nothing runs.
		return ctrl.Result{}, nil
	}
	wls := []*unstructured.Unstructured{wl}
	text, err := json.Marshal(ImportManifest(wl))
	if err != nil {
		return ctrl.Result{}, err
	}
	_, err = r.Ledger.RecordManifest(ctx, ImportRequestID(wls), "import", string(text))
	var refused *ledger.Refused
	switch {
	case errors.As(err, &refused) && !refused.Retryable():
		r.Events.Event(job.Object(), corev1.EventTypeWarning, "LedgerRefused",
			"importing Kueue's Workload "+wl.GetName()+": "+refused.Message)
		if err := r.suspend(ctx, job, "its Workload could not be imported"); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: PollInterval}, nil
	case err != nil:
		log.FromContext(ctx).Error(err, "importing Kueue's Workload failed; will retry")
		return ctrl.Result{RequeueAfter: RetryAfterTransportError}, nil
	}
	log.FromContext(ctx).Info("imported Kueue's Workload", "workload", wl.GetName())
	r.Events.Event(job.Object(), corev1.EventTypeNormal, "Imported",
		"Kueue's Workload "+wl.GetName()+" imported into the admission ledger")
	return pollAfter(r.Ledger), nil
}

// AdoptionGate holds the job controllers' reconciles until the adoption is done (Open): no job
// is submitted, suspended or released before the ledger holds Kueue's Workloads. A nil gate is
// open.
type AdoptionGate struct {
	done chan struct{}
	once sync.Once
}

// NewAdoptionGate is a closed gate.
func NewAdoptionGate() *AdoptionGate { return &AdoptionGate{done: make(chan struct{})} }

// Open lets every reconcile through, now and later.
func (g *AdoptionGate) Open() { g.once.Do(func() { close(g.done) }) }

// Wait returns once the gate is open, or ctx's error.
func (g *AdoptionGate) Wait(ctx context.Context) error {
	if g == nil {
		return nil
	}
	select {
	case <-g.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// RunAdoption is the leader's first task (a manager runnable: the webhooks, the conversion of
// stored v1beta1 Workloads among them, serve by then): Adopt, retried, then the gate opened.
// Returns an error only when every attempt failed.
func RunAdoption(ctx context.Context, c client.Reader, l AdoptLedger, gate *AdoptionGate) error {
	logger := log.FromContext(ctx).WithName("adopt")
	var err error
	for attempt := 1; attempt <= adoptAttemptsMax; attempt++ {
		if _, err = Adopt(ctx, c, l); err == nil {
			gate.Open()
			return nil
		}
		logger.Error(err, "adopting Kueue's Workloads failed; will retry", "attempt", attempt)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(adoptRetryWait):
		}
	}
	return fmt.Errorf("adopting Kueue's Workloads: %d attempts failed, the last: %w",
		adoptAttemptsMax, err)
}

// originalFromKueue: an adopted object that the bridge never released carries what Kueue's
// admission set on its pod templates (its flavors' node selectors and tolerations). Its own
// are those of Kueue's Workload spec (which Kueue restores on a stop), so the first release
// records the original node selectors and tolerations from there (in memory; the release writes
// it). Objects with a record, and those whose Workload is ours, are left alone.
func (r *Reconciler) originalFromKueue(job GenericJob, wl *unstructured.Unstructured) error {
	obj := job.Object()
	if wl.GetName() == r.Kind.WorkloadName(obj.GetName()) {
		return nil
	}
	if _, found := obj.GetAnnotations()[OriginalPodSetAnnotation]; found {
		return nil
	}
	specs, _, _ := unstructured.NestedSlice(wl.Object, "spec", "podSets")
	templates := map[string]map[string]any{}
	for _, item := range specs {
		m, _ := item.(map[string]any)
		name, _, _ := unstructured.NestedString(m, "name")
		template, _, _ := unstructured.NestedMap(m, "template")
		templates[name] = template
	}
	record := make([]originalPodSet, 0, len(job.PodSets()))
	for i, ps := range job.PodSets() {
		template, ok := templates[ps.Name]
		if !ok {
			// Not Kueue's record of this object: record its own templates, as for any object.
			return nil
		}
		var t corev1.PodTemplateSpec
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(template, &t); err != nil {
			return fmt.Errorf("Workload %s: podSet %s's template: %w", wl.GetName(), ps.Name, err)
		}
		// The labels and annotations stay the template's: the Job controller's selector labels
		// are there (a Workload created from the Job before the API server stored it may lack
		// them), and a check's podSetUpdates labels left over do not stop a new admission.
		record = append(record, originalPodSet{Name: ps.Name, NodeSelector: t.Spec.NodeSelector,
			Tolerations: t.Spec.Tolerations, Parallelism: job.CountField(i),
			Template: &originalTemplate{Labels: ps.Template.Labels,
				Annotations: ps.Template.Annotations}})
	}
	return recordOriginal(obj, record)
}

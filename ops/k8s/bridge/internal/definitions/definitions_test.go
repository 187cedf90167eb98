package definitions

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"admission-ledger/bridge/internal/checks"
	"admission-ledger/bridge/internal/conversion"
	"admission-ledger/bridge/internal/ledger"
)

// parse reads JSON objects as the API server's client does (integers as int64).
func parse(t *testing.T, texts ...string) []map[string]any {
	t.Helper()
	out := make([]map[string]any, len(texts))
	for i, text := range texts {
		if err := utiljson.Unmarshal([]byte(text), &out[i]); err != nil {
			t.Fatalf("bad test JSON %s: %v", text, err)
		}
	}
	return out
}

// Manifest forwards v1beta2: an object stored with v1beta1's spelling (before the CRDs
// converted) is normalized, the conversion's stash and kubectl's last-applied annotation stay
// out, and the cached object is not touched.
func TestManifest(t *testing.T) {
	obj := &unstructured.Unstructured{Object: parse(t, `{"apiVersion":"kueue.x-k8s.io/v1beta2",
		"kind":"ClusterQueue","metadata":{"name":"a","uid":"u","resourceVersion":"7","annotations":{
		"`+conversion.StashAnnotation+`":"{}","kubectl.kubernetes.io/last-applied-configuration":"{}"}},
		"spec":{"cohort":"research"},"status":{"pendingWorkloads":1}}`)[0]}
	got, err := Manifest(obj)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ClusterQueue","metadata":{"name":"a","uid":"u"},"spec":{"cohortName":"research"}}`
	if got != want {
		t.Errorf("Manifest:\n got %s\nwant %s", got, want)
	}
	if _, found, _ := unstructured.NestedString(obj.Object, "spec", "cohort"); !found {
		t.Errorf("Manifest changed the object it was given: %v", obj.Object)
	}
}

// The status writer keeps the bridge's Recorded condition when it copies the ledger's status.
func TestKeepRecordedCondition(t *testing.T) {
	parsed := parse(t, `{"pendingWorkloads":2,"conditions":[{"type":"Active","status":"True"}]}`,
		`{"pendingWorkloads":1,"conditions":[{"type":"Active","status":"False"},
		{"type":"Recorded","status":"True","reason":"Recorded"}]}`, `{}`)
	ledger, current := parsed[0], parsed[1]
	got := keepRecordedCondition(ledger, current)
	conditions, _, _ := unstructured.NestedSlice(got, "conditions")
	if len(conditions) != 2 || conditions[0].(map[string]any)["status"] != "True" ||
		conditions[1].(map[string]any)["type"] != RecordedCondition {
		t.Errorf("conditions %v", conditions)
	}
	if n, _, _ := unstructured.NestedInt64(got, "pendingWorkloads"); n != 2 {
		t.Errorf("pendingWorkloads %d, want the ledger's 2", n)
	}
	// Without a Recorded condition in the cluster: the ledger's status as it is.
	if got := keepRecordedCondition(ledger, parsed[2]); len(got["conditions"].([]any)) != 1 {
		t.Errorf("conditions %v", got["conditions"])
	}
}

// A deletion is kept and retried (InUse) for the ledger's FailedPrecondition refusal, whatever
// its text; an InvalidArgument refusal lets the object go, even if its text says "in use by".
func TestInUseDecidesByCode(t *testing.T) {
	for _, tc := range []struct {
		refused ledger.Refused
		want    bool
	}{
		{ledger.Refused{Code: ledger.CodeFailedPrecondition, Message: "cannot delete ResourceFlavor " +
			"'default-flavor': in use by ClusterQueue cluster-queue; nothing recorded"}, true},
		{ledger.Refused{Code: ledger.CodeFailedPrecondition, Message: "cannot delete AdmissionCheck " +
			"'scan': the reservations of team/a wait on it; nothing recorded"}, true},
		{ledger.Refused{Code: ledger.CodeInvalidArgument, Message: "cannot delete ClusterQueue " +
			"'x': in use by ClusterQueue y; wait on it"}, false},
		{ledger.Refused{Code: ledger.CodeNoSpace, Message: "the ledger's disk is full"}, false},
	} {
		if got := InUse(&tc.refused); got != tc.want {
			t.Errorf("InUse(code %d, %q) = %v, want %v", tc.refused.Code, tc.refused.Message, got, tc.want)
		}
	}
}

// afsOwner is a managedFields entry on the status subresource owning a LocalQueue's
// status.fairSharing.admissionFairSharingStatus (consumedResources and lastUpdate), as the API
// server writes it for manager.
func afsOwner(manager string) metav1.ManagedFieldsEntry {
	raw := `{"f:status":{"f:fairSharing":{".":{},"f:admissionFairSharingStatus":{".":{},` +
		`"f:consumedResources":{".":{},"f:cpu":{}},"f:lastUpdate":{}}}}}`
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate,
		APIVersion: "kueue.x-k8s.io/v1beta2", FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(raw)}, Subresource: "status"}
}

// A LocalQueue's admission fair sharing usage persisted by another writer (Kueue) is forwarded
// as the seed the ledger's parser reads; the same status written back by the bridge is not (it
// is the ledger's own usage); a LocalQueue without it forwards no status.
func TestManifestForwardsAForeignAfsSeed(t *testing.T) {
	const object = `{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"LocalQueue",
		"metadata":{"name":"lq","namespace":"team","uid":"u"},"spec":{"clusterQueue":"cq"},
		"status":{"pendingWorkloads":0,"fairSharing":{"weightedShare":0,"admissionFairSharingStatus":{
		"consumedResources":{"cpu":"2500m"},"lastUpdate":"2026-01-01T00:00:00Z"}}}}`
	const spec = `{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"LocalQueue","metadata":{"name":"lq",` +
		`"namespace":"team","uid":"u"},"spec":{"clusterQueue":"cq"}`
	for _, tc := range []struct {
		name     string
		managers []string
		want     string
	}{
		{"written by Kueue", []string{"kueue", checks.BridgeFieldManager},
			spec + `,"status":{"fairSharing":{"admissionFairSharingStatus":{"consumedResources":{"cpu":"2500m"}}}}}`},
		{"written back by the bridge", []string{checks.BridgeFieldManager}, spec + `}`},
	} {
		obj := &unstructured.Unstructured{Object: parse(t, object)[0]}
		var managed []metav1.ManagedFieldsEntry
		for _, m := range tc.managers {
			managed = append(managed, afsOwner(m))
		}
		obj.SetManagedFields(managed)
		got, err := Manifest(obj)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s: Manifest:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
	obj := &unstructured.Unstructured{Object: parse(t, object)[0]}
	unstructured.RemoveNestedField(obj.Object, "status", "fairSharing")
	obj.SetManagedFields([]metav1.ManagedFieldsEntry{afsOwner("kueue")})
	if got, _ := Manifest(obj); got != spec+`}` {
		t.Errorf("without a fair sharing status: Manifest %s", got)
	}
}

// fakeReader answers `get` with fixed JSON lists.
type fakeReader map[string]string

func (r fakeReader) Get(_ context.Context, kind, _ string) (string, error) {
	return r[kind], nil
}

// The status writer copies a LocalQueue's admission fair sharing status from the ledger's read
// model, as the bridge's field manager, keeping the Recorded condition.
func TestStatusWriterCopiesAfsStatus(t *testing.T) {
	lq := &unstructured.Unstructured{Object: parse(t, `{"apiVersion":"kueue.x-k8s.io/v1beta2",
		"kind":"LocalQueue","metadata":{"name":"lq","namespace":"team"},"spec":{"clusterQueue":"cq"},
		"status":{"conditions":[{"type":"Recorded","status":"True","reason":"Recorded"}]}}`)[0]}
	var written map[string]any
	var owner string
	c := fake.NewClientBuilder().WithObjects(lq).WithInterceptorFuncs(interceptor.Funcs{
		SubResourcePatch: func(_ context.Context, _ client.Client, _ string, obj client.Object,
			_ client.Patch, opts ...client.SubResourcePatchOption) error {
			written = obj.(*unstructured.Unstructured).Object["status"].(map[string]any)
			o := &client.SubResourcePatchOptions{}
			o.ApplyOptions(opts)
			owner = o.FieldManager
			return nil
		},
	}).Build()
	w := &StatusWriter{Client: c, Ledger: fakeReader{"localqueues": `{"apiVersion":"v1","kind":"List",
		"items":[{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"LocalQueue",
		"metadata":{"name":"lq","namespace":"team"},"spec":{"clusterQueue":"cq"},
		"status":{"pendingWorkloads":0,"reservingWorkloads":1,"admittedWorkloads":1,
		"fairSharing":{"admissionFairSharingStatus":{"consumedResources":{"cpu":"1234m"},
		"lastUpdate":"2026-12-02T21:40:57.547332179Z"}}}}]}`}}
	if err := w.copyStatus(context.Background(), "LocalQueue"); err != nil {
		t.Fatal(err)
	}
	got, _, _ := unstructured.NestedString(written, "fairSharing", "admissionFairSharingStatus",
		"consumedResources", "cpu")
	last, _, _ := unstructured.NestedString(written, "fairSharing", "admissionFairSharingStatus", "lastUpdate")
	if got != "1234m" || last != "2026-12-02T21:40:57.547332179Z" {
		t.Errorf("written status %v", written)
	}
	if conditions, _, _ := unstructured.NestedSlice(written, "conditions"); len(conditions) != 1 {
		t.Errorf("the Recorded condition was not kept: %v", written)
	}
	if owner != checks.BridgeFieldManager {
		t.Errorf("written as field manager %q, want %q (AfsSeed tells the bridge's writes by it)", owner,
			checks.BridgeFieldManager)
	}
}

// fakeRecorder records the manifests forwarded to it, each recorded at the next sequence.
type fakeRecorder struct {
	manifests []string
}

func (f *fakeRecorder) RecordManifest(_ context.Context, _, mode, manifest string) (
	ledger.Outcome, error) {
	f.manifests = append(f.manifests, mode+" "+manifest)
	sequence := uint64(len(f.manifests))
	return ledger.Outcome{Sequences: []uint64{sequence}, Unchanged: []bool{false}}, nil
}

func (f *fakeRecorder) Get(context.Context, string, string) (string, error) { return "", nil }

func (f *fakeRecorder) GetWith(_ context.Context, _, _ string, q ledger.Query) (string, error) {
	return "", &ledger.Refused{Code: ledger.CodeNotFound, Message: q.Name + " not found"}
}

// A BudgetPolicy (admission-ledger.io/v1alpha1, the ledger's own kind) goes through the one
// framework of the Kueue definitions: read in its own group and version, forwarded as it is
// (apiVersion admission-ledger.io/v1alpha1, not kueue.x-k8s.io's), held by the finalizer, and
// its condition Recorded written.
func TestBudgetPolicyIsForwarded(t *testing.T) {
	gvk := GVK(BudgetPolicyKind)
	if gvk.String() != "admission-ledger.io/v1alpha1, Kind=BudgetPolicy" {
		t.Fatalf("GVK(BudgetPolicy) = %s", gvk)
	}
	if queue := GVK("ClusterQueue"); queue.String() != "kueue.x-k8s.io/v1beta2, Kind=ClusterQueue" {
		t.Fatalf("GVK(ClusterQueue) = %s", queue)
	}
	policy := &unstructured.Unstructured{Object: parse(t, `{
		"apiVersion":"admission-ledger.io/v1alpha1","kind":"BudgetPolicy",
		"metadata":{"name":"team-a-month","uid":"u","resourceVersion":"3"},
		"spec":{"scope":{"namespace":"team-a"},"limits":{"nvidia.com/gpu":"2000"},
		"period":{"calendar":"Month","timeZone":"Europe/Berlin"}}}`)[0]}
	var status map[string]any
	c := fake.NewClientBuilder().WithObjects(policy).WithInterceptorFuncs(interceptor.Funcs{
		SubResourceUpdate: func(_ context.Context, _ client.Client, _ string, obj client.Object,
			_ ...client.SubResourceUpdateOption) error {
			status = obj.(*unstructured.Unstructured).Object["status"].(map[string]any)
			return nil
		},
	}).Build()
	recorder := &fakeRecorder{}
	r := &Reconciler{Kind: BudgetPolicyKind, Client: c, Ledger: recorder,
		Events: record.NewFakeRecorder(4)}
	if _, err := r.Reconcile(context.Background(),
		ctrl.Request{NamespacedName: types.NamespacedName{Name: "team-a-month"}}); err != nil {
		t.Fatal(err)
	}
	want := `apply {"apiVersion":"admission-ledger.io/v1alpha1","kind":"BudgetPolicy",` +
		`"metadata":{"name":"team-a-month","uid":"u"},"spec":{"limits":{"nvidia.com/gpu":"2000"},` +
		`"period":{"calendar":"Month","timeZone":"Europe/Berlin"},"scope":{"namespace":"team-a"}}}`
	if len(recorder.manifests) != 1 || recorder.manifests[0] != want {
		t.Fatalf("forwarded %q\nwant [%s]", recorder.manifests, want)
	}
	stored := &unstructured.Unstructured{}
	stored.SetGroupVersionKind(gvk)
	key := types.NamespacedName{Name: "team-a-month"}
	if err := c.Get(context.Background(), key, stored); err != nil {
		t.Fatal(err)
	}
	finalizers := stored.GetFinalizers()
	if len(finalizers) != 1 || finalizers[0] != DefinitionFinalizer {
		t.Errorf("finalizers %v, want [%s]", finalizers, DefinitionFinalizer)
	}
	conditions, _, _ := unstructured.NestedSlice(status, "conditions")
	if len(conditions) != 1 || conditions[0].(map[string]any)["type"] != RecordedCondition ||
		conditions[0].(map[string]any)["status"] != "True" {
		t.Errorf("status %v, want the condition Recorded True", status)
	}
}

// A Topology (v1beta1 or v1beta2, read in v1beta2) is forwarded as the other definitions, with
// its levels, and no status written (it has none: the outcome is an Event).
func TestTopologyIsForwarded(t *testing.T) {
	if gvk := GVK(TopologyKind); gvk.String() != "kueue.x-k8s.io/v1beta2, Kind=Topology" {
		t.Fatalf("GVK(Topology) = %s", gvk)
	}
	topology := &unstructured.Unstructured{Object: parse(t, `{
		"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"Topology",
		"metadata":{"name":"default","uid":"u","resourceVersion":"3"},
		"spec":{"levels":[{"nodeLabel":"cloud.google.com/gce-topology-block"},
		{"nodeLabel":"cloud.google.com/gce-topology-subblock"},{"nodeLabel":"kubernetes.io/hostname"}]}}`)[0]}
	statusWrites := 0
	c := fake.NewClientBuilder().WithObjects(topology).WithInterceptorFuncs(interceptor.Funcs{
		SubResourceUpdate: func(context.Context, client.Client, string, client.Object,
			...client.SubResourceUpdateOption) error {
			statusWrites++
			return nil
		},
	}).Build()
	recorder := &fakeRecorder{}
	events := record.NewFakeRecorder(4)
	r := &Reconciler{Kind: TopologyKind, Client: c, Ledger: recorder, Events: events}
	if _, err := r.Reconcile(context.Background(),
		ctrl.Request{NamespacedName: types.NamespacedName{Name: "default"}}); err != nil {
		t.Fatal(err)
	}
	want := `apply {"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"Topology",` +
		`"metadata":{"name":"default","uid":"u"},"spec":{"levels":[` +
		`{"nodeLabel":"cloud.google.com/gce-topology-block"},` +
		`{"nodeLabel":"cloud.google.com/gce-topology-subblock"},{"nodeLabel":"kubernetes.io/hostname"}]}}`
	if len(recorder.manifests) != 1 || recorder.manifests[0] != want {
		t.Fatalf("forwarded %q\nwant [%s]", recorder.manifests, want)
	}
	if statusWrites != 0 {
		t.Errorf("%d status writes to a Topology, which has no status", statusWrites)
	}
	if len(events.Events) != 1 {
		t.Errorf("%d events, want one Recorded", len(events.Events))
	}
}

// The queues' counts of Workload objects the ledger has not seen are kept from the informer's
// events: an object with a queue and no condition counts until it shows one, is deleted, or the
// ledger holds it (Submitted when seen, SubmittedNow later).
func TestUnsubmittedCountsFollowTheWorkloadEvents(t *testing.T) {
	w := &StatusWriter{indexed: true, bare: map[types.NamespacedName]string{},
		Submitted: func(_, name string) bool { return name == "held" }}
	workload := func(name string, conditions ...any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"spec": map[string]any{"queueName": "gpus"}}}
		u.SetNamespace("ml")
		u.SetName(name)
		if len(conditions) > 0 {
			u.Object["status"] = map[string]any{"conditions": conditions}
		}
		return u
	}
	for _, name := range []string{"a", "b", "held"} {
		w.observe(types.NamespacedName{Namespace: "ml", Name: name}, workload(name))
	}
	w.observe(types.NamespacedName{Namespace: "ml", Name: "b"},
		workload("b", map[string]any{"type": "QuotaReserved", "status": "False"}))
	counts, err := w.bareQueues(context.Background())
	if err != nil || counts["ml/gpus"] != 1 {
		t.Fatalf("counts %v, %v; want ml/gpus 1 (a)", counts, err)
	}
	w.observe(types.NamespacedName{Namespace: "ml", Name: "a"}, nil)
	if counts, _ := w.bareQueues(context.Background()); counts["ml/gpus"] != 0 {
		t.Fatalf("counts %v after a's deletion", counts)
	}
	// c is counted until the ledger holds it, though it still shows no condition.
	w.observe(types.NamespacedName{Namespace: "ml", Name: "c"}, workload("c"))
	if counts, _ := w.bareQueues(context.Background()); counts["ml/gpus"] != 1 {
		t.Fatalf("counts %v with c unsubmitted", counts)
	}
	w.SubmittedNow("ml", "c")
	if counts, _ := w.bareQueues(context.Background()); counts["ml/gpus"] != 0 {
		t.Fatalf("counts %v after c was submitted", counts)
	}
}

// A conflict writing one queue's status (the cache's copy was older than the object) skips that
// queue, not the rest of the copy, and asks for another copy soon, so that one queue being
// changed does not leave a thousand others showing nothing for a retry interval.
func TestStatusWriterWritesPastAConflict(t *testing.T) {
	var objects []client.Object
	items := ""
	for _, name := range []string{"cq-a", "cq-b", "cq-c"} {
		objects = append(objects, &unstructured.Unstructured{Object: parse(t, `{"apiVersion":"kueue.x-k8s.io/v1beta2",
			"kind":"ClusterQueue","metadata":{"name":"`+name+`"},"spec":{}}`)[0]})
		if items != "" {
			items += ","
		}
		items += `{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ClusterQueue","metadata":{"name":"` + name +
			`"},"status":{"pendingWorkloads":3}}`
	}
	var written sync.Map
	c := fake.NewClientBuilder().WithObjects(objects...).WithInterceptorFuncs(interceptor.Funcs{
		SubResourcePatch: func(_ context.Context, _ client.Client, _ string, obj client.Object,
			_ client.Patch, _ ...client.SubResourcePatchOption) error {
			if obj.GetName() == "cq-a" {
				return apierrors.NewConflict(schema.GroupResource{Group: Group, Resource: "clusterqueues"},
					obj.GetName(), nil)
			}
			written.Store(obj.GetName(), true)
			return nil
		},
	}).Build()
	w := &StatusWriter{Client: c, notify: make(chan struct{}, 1),
		Ledger: fakeReader{"clusterqueues": `{"apiVersion":"v1","kind":"List","items":[` + items + `]}`}}
	if err := w.copyStatus(context.Background(), "ClusterQueue"); err != nil {
		t.Fatalf("a conflict is retried soon, not an error to wait for: %v", err)
	}
	_, b := written.Load("cq-b")
	_, c3 := written.Load("cq-c")
	if !b || !c3 {
		t.Errorf("cq-b written %v, cq-c %v: the queues after the conflicting one were not written", b, c3)
	}
	select {
	case <-w.notify:
	default:
		t.Error("no copy asked for after the conflict")
	}
}

// listingRecorder: a fakeRecorder whose ledger lists the given LocalQueues.
type listingRecorder struct {
	fakeRecorder
	localQueues string
	ids         []string
}

func (f *listingRecorder) RecordManifest(ctx context.Context, id, mode, manifest string) (ledger.Outcome, error) {
	f.ids = append(f.ids, id)
	return f.fakeRecorder.RecordManifest(ctx, id, mode, manifest)
}

func (f *listingRecorder) Get(_ context.Context, kind, _ string) (string, error) {
	if kind != "localqueues" {
		return "", fmt.Errorf("unexpected kind %s", kind)
	}
	return `{"apiVersion":"v1","kind":"List","items":[` + f.localQueues + `]}`, nil
}

// A LocalQueue carries no finalizer of ours (Kueue puts none on it): it is forwarded, and its
// deletion recorded once the object is gone, named by its uid; a LocalQueue deleted while the
// bridge was down is found by the sweep of the ledger's LocalQueues.
func TestALocalQueueIsDeletedInTheLedgerWhenItIsGone(t *testing.T) {
	ctx := context.Background()
	lq := &unstructured.Unstructured{Object: parse(t, `{"apiVersion":"kueue.x-k8s.io/v1beta2",
		"kind":"LocalQueue","metadata":{"name":"lq","namespace":"team","uid":"u1","resourceVersion":"3"},
		"spec":{"clusterQueue":"cq"}}`)[0]}
	c := fake.NewClientBuilder().WithObjects(lq).WithStatusSubresource(lq).Build()
	recorder := &listingRecorder{}
	r := &Reconciler{Kind: "LocalQueue", Client: c, Ledger: recorder, Events: record.NewFakeRecorder(8)}
	key := types.NamespacedName{Namespace: "team", Name: "lq"}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	stored := &unstructured.Unstructured{}
	stored.SetGroupVersionKind(GVK("LocalQueue"))
	if err := c.Get(ctx, key, stored); err != nil {
		t.Fatal(err)
	}
	if len(stored.GetFinalizers()) != 0 || len(recorder.manifests) != 1 ||
		!strings.HasPrefix(recorder.manifests[0], "apply ") {
		t.Fatalf("finalizers %v, forwarded %q: want none and one apply", stored.GetFinalizers(), recorder.manifests)
	}
	// Deleted: the informer's delete event keeps its uid; the reconcile finds it gone.
	if err := c.Delete(ctx, stored); err != nil {
		t.Fatal(err)
	}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	r.objects().Delete(ctx, event.TypedDeleteEvent[client.Object]{Object: stored}, q)
	for i := 0; i < 2; i++ { // the second finds nothing left to do
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
	}
	want := `delete {"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"LocalQueue","metadata":{"name":"lq","namespace":"team"}}`
	if len(recorder.manifests) != 2 || recorder.manifests[1] != want {
		t.Fatalf("forwarded %q, want the apply and then %s", recorder.manifests, want)
	}
	// The sweep: the ledger holds lq (gone) and kept (in the cluster).
	kept := &unstructured.Unstructured{Object: parse(t, `{"apiVersion":"kueue.x-k8s.io/v1beta2",
		"kind":"LocalQueue","metadata":{"name":"kept","namespace":"team"},"spec":{"clusterQueue":"cq"}}`)[0]}
	if err := c.Create(ctx, kept); err != nil {
		t.Fatal(err)
	}
	recorder.localQueues = `{"metadata":{"name":"lq","namespace":"team"}},{"metadata":{"name":"kept","namespace":"team"}}`
	if err := r.sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if len(recorder.manifests) != 3 || recorder.manifests[2] != want || recorder.ids[2] == recorder.ids[1] {
		t.Fatalf("forwarded %q (request ids %q), want one more deletion of lq under an id of its own",
			recorder.manifests, recorder.ids)
	}
}

// orderedRecorder notes each call in the order shared with the client's writes.
type orderedRecorder struct {
	listingRecorder
	order *[]string
}

func (f *orderedRecorder) RecordManifest(ctx context.Context, id, mode, manifest string) (ledger.Outcome, error) {
	*f.order = append(*f.order, "record "+mode)
	for i, seen := range f.ids {
		if seen == id { // admitd answers a request id it has answered before so
			return ledger.Outcome{Sequences: []uint64{uint64(i + 1)}, Unchanged: []bool{true}, Retried: true}, nil
		}
	}
	return f.listingRecorder.RecordManifest(ctx, id, mode, manifest)
}

func (f *orderedRecorder) Get(_ context.Context, kind, _ string) (string, error) {
	return `{"apiVersion":"v1","kind":"List","items":[` + f.localQueues + `]}`, nil
}

// A ClusterQueue is recorded without waiting for the API server: its reconcile writes nothing
// there, and the finalizers' controller puts ours on it; the sweep records the deletion of a
// ClusterQueue whose object is gone, not of one the ledger lists as terminating.
func TestAClusterQueueIsRecordedWithoutItsFinalizer(t *testing.T) {
	ctx := context.Background()
	cq := &unstructured.Unstructured{Object: parse(t, `{"apiVersion":"kueue.x-k8s.io/v1beta2",
		"kind":"ClusterQueue","metadata":{"name":"cq","uid":"u1","resourceVersion":"3"},"spec":{}}`)[0]}
	var order []string
	c := fake.NewClientBuilder().WithObjects(cq).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch,
			opts ...client.PatchOption) error {
			order = append(order, "finalizer")
			return c.Patch(ctx, obj, patch, opts...)
		},
		SubResourceUpdate: func(context.Context, client.Client, string, client.Object,
			...client.SubResourceUpdateOption) error {
			return nil
		},
	}).Build()
	recorder := &orderedRecorder{order: &order}
	r := &Reconciler{Kind: "ClusterQueue", Client: c, Ledger: recorder, Events: record.NewFakeRecorder(8)}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "cq"}}
	if result, err := r.Reconcile(ctx, req); err != nil || result.RequeueAfter != 0 {
		t.Fatalf("recording: %+v, %v", result, err)
	}
	if strings.Join(order, ", ") != "record apply" {
		t.Fatalf("the recording did %q, want the record alone", order)
	}
	for range 2 { // the second finds it there
		if _, err := (finalizing{r}).Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(GVK("ClusterQueue"))
	if err := c.Get(ctx, req.NamespacedName, got); err != nil || !controllerutil.ContainsFinalizer(got, DefinitionFinalizer) {
		t.Fatalf("finalizers %v, %v; want ours", got.GetFinalizers(), err)
	}
	if strings.Join(order, ", ") != "record apply, finalizer" {
		t.Fatalf("order %q, want the record and then one finalizer", order)
	}
	recorder.localQueues = `{"metadata":{"name":"cq"},"status":{}},` +
		`{"metadata":{"name":"old"},"status":{"conditions":[{"type":"Active","reason":"Terminating"}]}},` +
		`{"metadata":{"name":"gone"},"status":{"conditions":[{"type":"Active","reason":"Ready"}]}}`
	if err := r.sweep(ctx); err != nil {
		t.Fatal(err)
	}
	want := `delete {"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ClusterQueue","metadata":{"name":"gone"}}`
	if len(recorder.manifests) != 2 || recorder.manifests[1] != want {
		t.Fatalf("forwarded %q, want the apply and then %s", recorder.manifests, want)
	}
}

// A queue's condition Recorded is written with its status by the status writer's copy (one
// write), not by the reconcile that forwarded it.
func TestAQueuesRecordedConditionGoesWithItsStatus(t *testing.T) {
	ctx := context.Background()
	lq := &unstructured.Unstructured{Object: parse(t, `{"apiVersion":"kueue.x-k8s.io/v1beta2",
		"kind":"LocalQueue","metadata":{"name":"lq","namespace":"team","generation":2},"spec":{"clusterQueue":"cq"}}`)[0]}
	var writes []map[string]any
	c := fake.NewClientBuilder().WithObjects(lq).WithInterceptorFuncs(interceptor.Funcs{
		SubResourceUpdate: func(_ context.Context, _ client.Client, _ string, obj client.Object,
			_ ...client.SubResourceUpdateOption) error {
			writes = append(writes, obj.(*unstructured.Unstructured).Object["status"].(map[string]any))
			return nil
		},
		SubResourcePatch: func(_ context.Context, _ client.Client, _ string, obj client.Object,
			_ client.Patch, _ ...client.SubResourcePatchOption) error {
			writes = append(writes, obj.(*unstructured.Unstructured).Object["status"].(map[string]any))
			return nil
		},
	}).Build()
	w := &StatusWriter{Client: c, notify: make(chan struct{}, 1), Ledger: fakeReader{"localqueues": `{"items":[
		{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"LocalQueue","metadata":{"name":"lq","namespace":"team"},
		"status":{"pendingWorkloads":2}}]}`}}
	r := &Reconciler{Kind: "LocalQueue", Client: c, Ledger: &fakeRecorder{}, Events: record.NewFakeRecorder(8), Status: w}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "team", Name: "lq"}}); err != nil {
		t.Fatal(err)
	}
	if len(writes) != 0 {
		t.Fatalf("the reconcile wrote the status: %v", writes)
	}
	if err := w.copyStatus(ctx, "LocalQueue"); err != nil {
		t.Fatal(err)
	}
	conditions, _, _ := unstructured.NestedSlice(writes[0], "conditions")
	if len(writes) != 1 || writes[0]["pendingWorkloads"] != int64(2) || len(conditions) != 1 ||
		conditions[0].(map[string]any)["message"] != recorded(1) ||
		conditions[0].(map[string]any)["observedGeneration"] != int64(2) {
		t.Fatalf("writes %v: want one, with the counts and Recorded at sequence 1", writes)
	}
}

// A copy writes first the queues that have work their status does not show yet (Kueue's runner
// waits while some ClusterQueue shows work), then the others in the ledger's order.
func TestQueuesWithUnshownWorkAreWrittenFirst(t *testing.T) {
	var objects []client.Object
	items := ""
	for _, q := range []struct{ name, pending string }{{"a", "0"}, {"b", "2"}, {"c", "1"}, {"d", "0"}} {
		objects = append(objects, &unstructured.Unstructured{Object: parse(t, `{"apiVersion":"kueue.x-k8s.io/v1beta2",
			"kind":"ClusterQueue","metadata":{"name":"`+q.name+`"},"spec":{}}`)[0]})
		if items != "" {
			items += ","
		}
		items += `{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ClusterQueue","metadata":{"name":"` + q.name +
			`"},"status":{"pendingWorkloads":` + q.pending + `,"conditions":[{"type":"Active","status":"True"}]}}`
	}
	var written []string
	c := fake.NewClientBuilder().WithObjects(objects...).WithInterceptorFuncs(interceptor.Funcs{
		SubResourcePatch: func(_ context.Context, _ client.Client, _ string, obj client.Object,
			_ client.Patch, _ ...client.SubResourcePatchOption) error {
			written = append(written, obj.GetName())
			return nil
		},
	}).Build()
	// One write at a time: the order they start in is the order they are written in.
	w := &StatusWriter{Client: c, Ledger: fakeReader{"clusterqueues": `{"items":[` + items + `]}`},
		WriteWorkers: 1}
	w.shown.Store("ClusterQueue//b", true)
	if err := w.copyStatus(context.Background(), "ClusterQueue"); err != nil {
		t.Fatal(err)
	}
	if strings.Join(written, ",") != "c,a,b,d" {
		t.Fatalf("written in the order %v, want c (work not shown) first, then a, b, d", written)
	}
	if shown, _ := w.shown.Load("ClusterQueue//c"); shown != true {
		t.Error("c's work is not remembered as shown")
	}
}

// One copy writes at most StatusWritesPerPass queues, several at once, and asks for another copy
// for the rest.
func TestACopyWritesABoundedNumberOfQueues(t *testing.T) {
	var objects []client.Object
	items := ""
	for i := 0; i < StatusWritesPerPass+5; i++ {
		name := fmt.Sprintf("cq-%d", i)
		objects = append(objects, &unstructured.Unstructured{Object: parse(t, `{"apiVersion":"kueue.x-k8s.io/v1beta2",
			"kind":"ClusterQueue","metadata":{"name":"`+name+`"},"spec":{}}`)[0]})
		if items != "" {
			items += ","
		}
		items += `{"metadata":{"name":"` + name + `"},"status":{"pendingWorkloads":1}}`
	}
	var mu sync.Mutex
	writes, now, most := 0, 0, 0
	c := fake.NewClientBuilder().WithObjects(objects...).WithInterceptorFuncs(interceptor.Funcs{
		SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch,
			...client.SubResourcePatchOption) error {
			mu.Lock()
			writes, now = writes+1, now+1
			most = max(most, now)
			mu.Unlock()
			time.Sleep(5 * time.Millisecond) // an API server's answer
			mu.Lock()
			now--
			mu.Unlock()
			return nil
		},
	}).Build()
	w := &StatusWriter{Client: c, notify: make(chan struct{}, 1),
		Ledger: fakeReader{"clusterqueues": `{"items":[` + items + `]}`}}
	if err := w.copyStatus(context.Background(), "ClusterQueue"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.notify:
	default:
		t.Error("no copy asked for the rest")
	}
	if writes != StatusWritesPerPass {
		t.Fatalf("%d writes in one copy, want %d", writes, StatusWritesPerPass)
	}
	if most < 2 || most > StatusWriteWorkers {
		t.Fatalf("%d writes at once, want 2 to %d", most, StatusWriteWorkers)
	}
}

// A copy reads and compares only the queues whose inputs (the ledger's item, the Workload
// objects it has not seen, the condition Recorded) changed since their status was last written
// or found equal; a resync compares them all again, so that a status changed by someone else is
// put back.
func TestACopySkipsQueuesWhoseInputsAreUnchanged(t *testing.T) {
	var objects []client.Object
	item := func(name, pending string) string {
		return `{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ClusterQueue","metadata":{"name":"` + name +
			`"},"status":{"pendingWorkloads":` + pending + `}}`
	}
	for _, name := range []string{"a", "b", "c"} {
		objects = append(objects, &unstructured.Unstructured{Object: parse(t, `{"apiVersion":"kueue.x-k8s.io/v1beta2",
			"kind":"ClusterQueue","metadata":{"name":"`+name+`"},"spec":{}}`)[0]})
	}
	var mu sync.Mutex
	var read, written []string
	c := fake.NewClientBuilder().WithObjects(objects...).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object,
			opts ...client.GetOption) error {
			mu.Lock()
			read = append(read, key.Name)
			mu.Unlock()
			return c.Get(ctx, key, obj, opts...)
		},
		// Not applied: the cluster keeps its status, as if someone else wrote it back.
		SubResourcePatch: func(_ context.Context, _ client.Client, _ string, obj client.Object,
			_ client.Patch, _ ...client.SubResourcePatchOption) error {
			mu.Lock()
			written = append(written, obj.GetName())
			mu.Unlock()
			return nil
		},
	}).Build()
	ledgerList := fakeReader{}
	w := &StatusWriter{Client: c, notify: make(chan struct{}, 1), Ledger: ledgerList}
	copyWith := func(a, b, c string) (string, string) {
		t.Helper()
		ledgerList["clusterqueues"] = `{"items":[` + item("a", a) + `,` + item("b", b) + `,` + item("c", c) + `]}`
		read, written = nil, nil
		if err := w.copyStatus(context.Background(), "ClusterQueue"); err != nil {
			t.Fatal(err)
		}
		sort.Strings(read)
		sort.Strings(written)
		return strings.Join(read, ","), strings.Join(written, ",")
	}
	if r, wr := copyWith("1", "2", "3"); r != "a,b,c" || wr != "a,b,c" {
		t.Fatalf("first copy read %q, wrote %q: want every queue", r, wr)
	}
	if r, wr := copyWith("1", "2", "3"); r != "" || wr != "" {
		t.Fatalf("nothing changed, yet the copy read %q and wrote %q", r, wr)
	}
	if r, wr := copyWith("1", "5", "3"); r != "b" || wr != "b" {
		t.Fatalf("b changed: the copy read %q and wrote %q", r, wr)
	}
	w.Recorded("ClusterQueue", types.NamespacedName{Name: "c"}, 9)
	if r, wr := copyWith("1", "5", "3"); r != "c" || wr != "c" {
		t.Fatalf("c recorded anew: the copy read %q and wrote %q", r, wr)
	}
	w.resync("ClusterQueue")
	if r, wr := copyWith("1", "5", "3"); r != "a,b,c" || wr != "a,b,c" {
		t.Fatalf("after a resync the copy read %q and wrote %q: want every queue compared (and, the "+
			"cluster's statuses not being the ledger's, written)", r, wr)
	}
}

// countingRecorder: a fakeRecorder whose ledger knows one ClusterQueue, read by name only.
type countingRecorder struct {
	fakeRecorder
	lists, reads int
}

func (f *countingRecorder) Get(context.Context, string, string) (string, error) {
	f.lists++
	return `{"items":[]}`, nil
}

func (f *countingRecorder) GetWith(_ context.Context, kind, _ string, q ledger.Query) (string, error) {
	f.reads++
	if kind != "clusterqueues" || q.Name != "cq" {
		return "", &ledger.Refused{Code: ledger.CodeNotFound, Message: "clusterqueue \"" + q.Name + "\" not found"}
	}
	return `{"metadata":{"name":"cq"},"status":{"reservingWorkloads":2}}`, nil
}

// A ClusterQueue's deletion reads that ClusterQueue of the ledger, not the list of all (which
// made deleting a thousand quadratic); one the ledger does not know reserves nothing.
func TestReservingWorkloadsReadsOneClusterQueue(t *testing.T) {
	l := &countingRecorder{}
	r := &Reconciler{Kind: "ClusterQueue", Ledger: l}
	if n, err := r.reservingWorkloads(context.Background(), "cq"); err != nil || n != 2 {
		t.Fatalf("cq: %d, %v; want 2", n, err)
	}
	if n, err := r.reservingWorkloads(context.Background(), "gone"); err != nil || n != 0 {
		t.Fatalf("gone: %d, %v; want 0 (the ledger does not know it)", n, err)
	}
	if l.lists != 0 || l.reads != 2 {
		t.Fatalf("%d lists and %d reads by name; want 0 and 2", l.lists, l.reads)
	}
}

// A copy waits the debounce after a notification, and longer after an expensive read: the reads
// of the ledger's items take at most 1/StatusReadShare of the time.
func TestCopyWaitSpacesCopiesByTheirReads(t *testing.T) {
	for _, c := range []struct{ read, since, want time.Duration }{
		{time.Millisecond, 10 * time.Millisecond, StatusDebounce},
		{40 * time.Millisecond, 0, StatusReadShare * 40 * time.Millisecond},
		{40 * time.Millisecond, 600 * time.Millisecond, StatusReadShare*40*time.Millisecond - 600*time.Millisecond},
		{40 * time.Millisecond, 5 * time.Second, StatusDebounce},
		{time.Second, 0, StatusMaxWait},
	} {
		if got := copyWait(c.read, c.since); got != c.want {
			t.Errorf("copyWait(%v, %v) = %v, want %v", c.read, c.since, got, c.want)
		}
	}
}

package checks

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"admission-ledger/bridge/internal/ledger"
	"admission-ledger/bridge/internal/ledgerevents"
	"admission-ledger/bridge/internal/podsetupdates"
)

const (
	testNamespace  = "default"
	testWorkload   = "job-checked"
	testController = "example.com/scan"
)

// owns is a managedFields entry on the status subresource owning FIELDS of check scan, as the
// API server writes them.
func owns(manager string, operation metav1.ManagedFieldsOperationType, fields ...string) metav1.ManagedFieldsEntry {
	item := map[string]any{".": map[string]any{}, "f:name": map[string]any{}}
	for _, f := range fields {
		item["f:"+f] = map[string]any{}
	}
	raw, _ := json.Marshal(map[string]any{"f:status": map[string]any{
		"f:admissionChecks": map[string]any{`k:{"name":"scan"}`: item}}})
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: operation, APIVersion: "kueue.x-k8s.io/v1beta2",
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: raw}, Subresource: "status"}
}

// The mirror's Update wrote the entry; the check controller then changed the message alone:
// the API server gives it `f:message` only, and that makes it the entry's foreign writer.
func TestMessageOwnerIsAWriter(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{
		owns(BridgeFieldManager, metav1.ManagedFieldsOperationUpdate, "state", "lastTransitionTime"),
		owns(testController, metav1.ManagedFieldsOperationUpdate, "message"),
	}
	w := Writers(managed)
	if got := fmt.Sprint(w["scan"]); got != "map[message:[example.com/scan] state:[admit-k8s]]" {
		t.Fatalf("Writers = %s", got)
	}
	if got := ForeignWriter(w["scan"]); got != testController {
		t.Fatalf("ForeignWriter = %q, want %q", got, testController)
	}
}

func TestForeignWriter(t *testing.T) {
	for _, c := range []struct {
		name   string
		fields map[string][]string
		want   string
	}{
		{"nobody", nil, ""},
		{"the bridge alone", map[string][]string{"state": {BridgeFieldManager}, "message": {BridgeFieldManager}}, ""},
		{"forwarded and acknowledged", map[string][]string{"state": {BridgeFieldManager, testController},
			"message": {BridgeFieldManager, testController}}, ""},
		{"a new state", map[string][]string{"state": {testController}, "message": {BridgeFieldManager}}, testController},
		{"a new message after an acknowledged state", map[string][]string{"state": {BridgeFieldManager, testController},
			"message": {testController}}, testController},
		{"state and message by two managers", map[string][]string{"state": {testController}, "message": {"intruder"}},
			"example.com/scan,intruder"},
		{"the intruder's message", map[string][]string{"state": {BridgeFieldManager}, "message": {"intruder"}}, "intruder"},
	} {
		if got := ForeignWriter(c.fields); got != c.want {
			t.Errorf("%s: ForeignWriter = %q, want %q", c.name, got, c.want)
		}
	}
}

func workloadWith(entry map[string]any, managed ...metav1.ManagedFieldsEntry) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(workloadGVK)
	u.SetNamespace(testNamespace)
	u.SetName(testWorkload)
	u.SetLabels(map[string]string{JobUIDLabel: "job-uid"})
	u.SetManagedFields(managed)
	u.Object["status"] = map[string]any{"admissionChecks": []any{entry}}
	return u
}

func ledgerEntry(state, message string, sequence int64) map[string]any {
	return map[string]any{"name": "scan", "state": state, "message": message, "reportSequence": sequence}
}

func TestKeepForeignChecksKeepsAForeignMessage(t *testing.T) {
	written := map[string]any{"name": "scan", "state": "Pending", "message": "scanning: 40%"}
	byController := workloadWith(written,
		owns(BridgeFieldManager, metav1.ManagedFieldsOperationUpdate, "state"),
		owns(testController, metav1.ManagedFieldsOperationUpdate, "message"))
	desired := map[string]any{"admissionChecks": []any{ledgerEntry("Pending", "", 7)}}
	KeepForeignChecks(byController, desired)
	if got := desired["admissionChecks"].([]any)[0].(map[string]any)["message"]; got != "scanning: 40%" {
		t.Fatalf("the mirror would overwrite the controller's message with %q", got)
	}
	// Once the ledger holds it, the ledger's entry (its report sequence) is written.
	desired = map[string]any{"admissionChecks": []any{ledgerEntry("Pending", "scanning: 40%", 9)}}
	KeepForeignChecks(byController, desired)
	if got := desired["admissionChecks"].([]any)[0].(map[string]any)["reportSequence"]; got != int64(9) {
		t.Fatalf("the ledger's entry was replaced although it holds the message: reportSequence %v", got)
	}
	// The bridge's own message (a reservation's reset) is not kept.
	byBridge := workloadWith(written,
		owns(BridgeFieldManager, metav1.ManagedFieldsOperationUpdate, "state", "message"),
		owns(testController, metav1.ManagedFieldsOperationUpdate))
	desired = map[string]any{"admissionChecks": []any{ledgerEntry("Pending", "", 11)}}
	KeepForeignChecks(byBridge, desired)
	if got := desired["admissionChecks"].([]any)[0].(map[string]any)["message"]; got != "" {
		t.Fatalf("the bridge's own message was kept as a report: %q", got)
	}
}

func TestCheckRequestID(t *testing.T) {
	id := func(message string, after int64) string {
		return CheckRequestID(testNamespace, testWorkload, "uid", 2, "scan", "Pending", message, testController, after, nil)
	}
	if id("a", 5) != id("a", 5) {
		t.Fatal("the same report after the same ledger report has two request ids")
	}
	// Message a, then b, then a again: three reports.
	first, second, third := id("a", 5), id("b", 6), id("a", 7)
	if first == second || first == third || second == third {
		t.Fatalf("a, b, a again do not make three request ids: %s %s %s", first, second, third)
	}
}

func TestAcknowledgementAppliesTheMessage(t *testing.T) {
	ack := Acknowledgement(testNamespace, testWorkload, map[string]any{"name": "scan", "state": "Pending",
		"message": "scanning: 40%", "lastTransitionTime": "2026-01-01T00:00:00Z"})
	got, _ := json.Marshal(ack.Object["status"])
	if string(got) != `{"admissionChecks":[{"message":"scanning: 40%","name":"scan","state":"Pending"}]}` {
		t.Fatalf("acknowledgement %s", got)
	}
	ack = Acknowledgement(testNamespace, testWorkload, map[string]any{"name": "scan", "state": "Ready"})
	got, _ = json.Marshal(ack.Object["status"])
	if string(got) != `{"admissionChecks":[{"name":"scan","state":"Ready"}]}` {
		t.Fatalf("acknowledgement of an entry without a message %s", got)
	}
}

// fakeLedger holds one workload with check scan and records reports as admitd would: a
// request id it has seen is answered from its record, a new report changes the check.
type fakeLedger struct {
	check   ledgerCheck
	next    int64
	ids     map[string]uint64
	reports []*ledgerevents.CheckStateReported
}

func (l *fakeLedger) Record(_ context.Context, requestID string, inputs [][]byte) (ledger.Outcome, error) {
	if seq, seen := l.ids[requestID]; seen {
		return ledger.Outcome{Sequences: []uint64{seq}, Retried: true}, nil
	}
	event, err := ledger.ReadEvent(inputs[0])
	if err != nil {
		return ledger.Outcome{}, err
	}
	r, err := event.Body().CheckStateReported()
	if err != nil {
		return ledger.Outcome{}, err
	}
	message, _ := r.Message_()
	l.next++
	l.ids[requestID] = uint64(l.next)
	l.reports = append(l.reports, &r)
	for name, state := range checkStates {
		if state == r.State() {
			l.check = ledgerCheck{State: name, Message: message, ReportSequence: l.next}
		}
	}
	return ledger.Outcome{Sequences: []uint64{uint64(l.next)}}, nil
}

// entry is the ledger's check scan as its read model writes it.
func (l *fakeLedger) entry() map[string]any {
	e := ledgerEntry(l.check.State, l.check.Message, l.check.ReportSequence)
	if l.check.RawPodSetUpdates != nil {
		e["podSetUpdates"] = l.check.RawPodSetUpdates
	}
	return e
}

func (l *fakeLedger) WorkloadState(_ context.Context, namespace, name string) (*ledger.WorkloadState, error) {
	if namespace != testNamespace || name != testWorkload {
		return nil, nil
	}
	updates, err := podsetupdates.FromEntry(l.entry())
	if err != nil {
		return nil, err
	}
	return &ledger.WorkloadState{Namespace: namespace, Name: name, UID: "uid", Generation: 2,
		Checks: []ledger.CheckState{{Name: "scan", State: l.check.State, Message: l.check.Message,
			ReportSequence: uint64(l.check.ReportSequence), PodSetUpdates: updates}},
		Status: map[string]any{"admissionGeneration": int64(2), "admissionChecks": []any{l.entry()}}}, nil
}

// harness: a Reconciler over a fake API server holding the Workload and the AdmissionCheck,
// recording the status patches (acknowledgements) and updates (reverts) the bridge sends.
type harness struct {
	reconciler *Reconciler
	ledger     *fakeLedger
	events     *record.FakeRecorder
	acks       []string
	reverts    []map[string]any
}

func newHarness(t *testing.T, workload *unstructured.Unstructured, held ledgerCheck) *harness {
	t.Helper()
	check := &unstructured.Unstructured{}
	check.SetGroupVersionKind(checkGVK)
	check.SetName("scan")
	check.Object["spec"] = map[string]any{"controllerName": testController}
	h := &harness{ledger: &fakeLedger{check: held, next: held.ReportSequence, ids: map[string]uint64{}},
		events: record.NewFakeRecorder(16)}
	c := fake.NewClientBuilder().WithObjects(check).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if u, ok := obj.(*unstructured.Unstructured); ok && u.GetKind() == "Workload" {
				workload.DeepCopyInto(u)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
		SubResourcePatch: func(_ context.Context, _ client.Client, _ string, obj client.Object, patch client.Patch,
			_ ...client.SubResourcePatchOption) error {
			if patch.Type() != types.ApplyPatchType {
				return fmt.Errorf("status patch of type %s, not a server-side apply", patch.Type())
			}
			text, err := json.Marshal(obj.(*unstructured.Unstructured).Object["status"])
			h.acks = append(h.acks, string(text))
			return err
		},
		SubResourceUpdate: func(_ context.Context, _ client.Client, _ string, obj client.Object,
			_ ...client.SubResourceUpdateOption) error {
			entries := entriesOf(obj.(*unstructured.Unstructured).Object)
			h.reverts = append(h.reverts, entries[0].(map[string]any))
			return nil
		},
	}).Build()
	h.reconciler = &Reconciler{Client: c, Ledger: h.ledger, Events: h.events}
	return h
}

func (h *harness) reconcile(t *testing.T) {
	t.Helper()
	if _, err := h.reconciler.Reconcile(context.Background(),
		ctrl.Request{NamespacedName: types.NamespacedName{Namespace: testNamespace, Name: testWorkload}}); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) event() string {
	select {
	case e := <-h.events.Events:
		return e
	default:
		return ""
	}
}

// byController: a Workload whose check scan is Pending with message, the state written by the
// bridge's mirror and the message by the check's controller alone.
func byController(message string) *unstructured.Unstructured {
	return workloadWith(map[string]any{"name": "scan", "state": "Pending", "message": message},
		owns(BridgeFieldManager, metav1.ManagedFieldsOperationUpdate, "state"),
		owns(testController, metav1.ManagedFieldsOperationUpdate, "message"))
}

// The check controller changes only the message of a Pending check: forwarded once (the same
// reconcile again, or a restarted bridge, records nothing more) and acknowledged with the message.
func TestMessageAloneIsForwardedOnce(t *testing.T) {
	h := newHarness(t, byController("scanning: 40%"), ledgerCheck{State: "Pending", Message: "", ReportSequence: 0})
	h.reconcile(t)
	if len(h.ledger.reports) != 1 {
		t.Fatalf("%d reports recorded, not 1", len(h.ledger.reports))
	}
	r := h.ledger.reports[0]
	message, _ := r.Message_()
	via, _ := r.ViaFieldManager()
	if r.State() != ledgerevents.CheckState_pending || message != "scanning: 40%" || via != testController ||
		r.Generation() != 2 {
		t.Fatalf("recorded state %v message %q via %q generation %d", r.State(), message, via, r.Generation())
	}
	want := `{"admissionChecks":[{"message":"scanning: 40%","name":"scan","state":"Pending"}]}`
	if len(h.acks) != 1 || h.acks[0] != want {
		t.Fatalf("acknowledgements %v, want one %s", h.acks, want)
	}
	if e := h.event(); !strings.HasPrefix(e, "Normal CheckForwarded") || !strings.Contains(e, `"scanning: 40%"`) {
		t.Fatalf("event %q", e)
	}
	// A repeated reconcile of the same object (the acknowledgement not seen yet), and a
	// restarted bridge: the ledger holds the message, nothing more is recorded.
	h.reconcile(t)
	restarted := &Reconciler{Client: h.reconciler.Client, Ledger: h.ledger, Events: h.events}
	if _, err := restarted.Reconcile(context.Background(),
		ctrl.Request{NamespacedName: types.NamespacedName{Namespace: testNamespace, Name: testWorkload}}); err != nil {
		t.Fatal(err)
	}
	if len(h.ledger.reports) != 1 || len(h.reverts) != 0 {
		t.Fatalf("%d reports and %d reverts after repeated reconciles, not 1 and 0", len(h.ledger.reports), len(h.reverts))
	}
}

// The controller writes message a, then b, then a again: three reports.
func TestMessageBackAndForthIsThreeReports(t *testing.T) {
	workload := byController("")
	h := newHarness(t, workload, ledgerCheck{State: "Pending", ReportSequence: 0})
	for _, message := range []string{"a", "b", "a"} {
		workload.Object["status"] = map[string]any{"admissionChecks": []any{
			map[string]any{"name": "scan", "state": "Pending", "message": message}}}
		h.reconcile(t)
	}
	if len(h.ledger.reports) != 3 || h.ledger.check.Message != "a" {
		t.Fatalf("%d reports, the ledger holds %q; want 3 and \"a\"", len(h.ledger.reports), h.ledger.check.Message)
	}
}

// Another field manager changes only the message: reverted to the ledger's, with a Warning
// Event naming it and the controllerName, nothing recorded.
func TestForeignMessageIsReverted(t *testing.T) {
	workload := workloadWith(map[string]any{"name": "scan", "state": "Pending", "message": "all clear"},
		owns(BridgeFieldManager, metav1.ManagedFieldsOperationUpdate, "state"),
		owns("intruder", metav1.ManagedFieldsOperationUpdate, "message"))
	h := newHarness(t, workload, ledgerCheck{State: "Pending", Message: "scanning", ReportSequence: 4})
	h.reconcile(t)
	if len(h.ledger.reports) != 0 {
		t.Fatalf("%d reports recorded for the intruder's message", len(h.ledger.reports))
	}
	if len(h.reverts) != 1 || h.reverts[0]["message"] != "scanning" || h.reverts[0]["state"] != "Pending" {
		t.Fatalf("reverts %v, want one back to Pending \"scanning\"", h.reverts)
	}
	e := h.event()
	if !strings.HasPrefix(e, "Warning CheckReverted") || !strings.Contains(e, `message "all clear"`) ||
		!strings.Contains(e, `"intruder"`) || !strings.Contains(e, `"example.com/scan"`) {
		t.Fatalf("event %q", e)
	}
}

// A report the ledger holds already (a bridge stopped between the record and the
// acknowledgement) is acknowledged, not recorded again.
func TestHeldReportIsAcknowledged(t *testing.T) {
	h := newHarness(t, byController("scanning"), ledgerCheck{State: "Pending", Message: "scanning", ReportSequence: 4})
	h.reconcile(t)
	if len(h.ledger.reports) != 0 || len(h.acks) != 1 {
		t.Fatalf("%d reports and %d acknowledgements, want 0 and 1", len(h.ledger.reports), len(h.acks))
	}
}

// retryWorkload: check scan's state and message as the ledger holds them (written by the
// bridge), and FIELD set to VALUE by manager alone (a change takes a field from its other owners).
func retryWorkload(manager, field string, value int64) *unstructured.Unstructured {
	bridge := []string{"state", "message"}
	if field != "retryCount" {
		bridge = append(bridge, "retryCount")
	}
	return workloadWith(map[string]any{"name": "scan", "state": "Pending", "message": "scanning", field: value},
		owns(BridgeFieldManager, metav1.ManagedFieldsOperationUpdate, bridge...),
		owns(manager, metav1.ManagedFieldsOperationUpdate, field))
}

// The check's controller changes only requeueAfterSeconds of a Pending check: no report (the
// ledger, as Kueue, reads it with state Retry only); reverted with a Warning Event that says so.
func TestRequeueAfterAloneIsReverted(t *testing.T) {
	h := newHarness(t, retryWorkload(testController, "requeueAfterSeconds", 30),
		ledgerCheck{State: "Pending", Message: "scanning", ReportSequence: 4})
	h.reconcile(t)
	if len(h.ledger.reports) != 0 || len(h.acks) != 0 {
		t.Fatalf("%d reports and %d acknowledgements for requeueAfterSeconds alone, want none",
			len(h.ledger.reports), len(h.acks))
	}
	if len(h.reverts) != 1 {
		t.Fatalf("%d reverts, want 1", len(h.reverts))
	}
	if _, kept := h.reverts[0]["requeueAfterSeconds"]; kept || h.reverts[0]["state"] != "Pending" ||
		h.reverts[0]["message"] != "scanning" {
		t.Fatalf("reverted to %v, want the ledger's Pending \"scanning\" without requeueAfterSeconds", h.reverts[0])
	}
	e := h.event()
	if !strings.HasPrefix(e, "Warning CheckReverted") || !strings.Contains(e, "requeueAfterSeconds 30") ||
		!strings.Contains(e, "only with state Retry") || !strings.Contains(e, `"example.com/scan"`) {
		t.Fatalf("event %q", e)
	}
}

// retryCount is the ledger's: a controller's change of it alone is reverted to the ledger's count.
func TestRetryCountAloneIsReverted(t *testing.T) {
	h := newHarness(t, retryWorkload(testController, "retryCount", 5),
		ledgerCheck{State: "Pending", Message: "scanning", ReportSequence: 4})
	h.reconcile(t)
	if len(h.ledger.reports) != 0 || len(h.reverts) != 1 || h.reverts[0]["retryCount"] != int64(0) {
		t.Fatalf("%d reports, reverts %v; want none and one back to retryCount 0", len(h.ledger.reports), h.reverts)
	}
	if e := h.event(); !strings.HasPrefix(e, "Warning CheckReverted") || !strings.Contains(e, "retryCount 5") {
		t.Fatalf("event %q", e)
	}
	// Retry fields as the ledger has them (the mirror's retryCount): nothing to do.
	h = newHarness(t, retryWorkload(testController, "retryCount", 0),
		ledgerCheck{State: "Pending", Message: "scanning", ReportSequence: 4})
	h.reconcile(t)
	if len(h.reverts) != 0 || h.event() != "" {
		t.Fatalf("reverts %v for the ledger's own retryCount", h.reverts)
	}
}

// State Retry with requeueAfterSeconds in one write: one report carrying the delay, and the
// acknowledgement shares requeueAfterSeconds, which is then no change of the controller's alone.
func TestRequeueAfterWithRetryIsForwarded(t *testing.T) {
	workload := workloadWith(map[string]any{"name": "scan", "state": "Retry", "message": "busy",
		"requeueAfterSeconds": int64(30)},
		owns(BridgeFieldManager, metav1.ManagedFieldsOperationUpdate, "retryCount"),
		owns(testController, metav1.ManagedFieldsOperationUpdate, "state", "message", "requeueAfterSeconds"))
	h := newHarness(t, workload, ledgerCheck{State: "Pending", Message: "", ReportSequence: 4})
	h.reconcile(t)
	if len(h.ledger.reports) != 1 || h.ledger.reports[0].RequeueAfterNs() != 30_000_000_000 || len(h.reverts) != 0 {
		t.Fatalf("%d reports (want 1 with requeueAfterNs 30 s), reverts %v", len(h.ledger.reports), h.reverts)
	}
	want := `{"admissionChecks":[{"message":"busy","name":"scan","requeueAfterSeconds":30,"state":"Retry"}]}`
	if len(h.acks) != 1 || h.acks[0] != want {
		t.Fatalf("acknowledgements %v, want %s", h.acks, want)
	}
	acknowledged := map[string][]string{"state": {BridgeFieldManager, testController},
		"message": {BridgeFieldManager, testController}, "requeueAfterSeconds": {BridgeFieldManager, testController}}
	if w := RetryWriter(acknowledged); w != "" {
		t.Fatalf("RetryWriter after the acknowledgement = %q, want none", w)
	}
}

// The mirror keeps an entry whose requeueAfterSeconds another manager changed alone until the
// forwarder reverts it (with its Event), and writes the ledger's once the bridge owns it.
func TestKeepForeignChecksKeepsAForeignRequeueAfter(t *testing.T) {
	desired := map[string]any{"admissionChecks": []any{ledgerEntry("Pending", "scanning", 4)}}
	KeepForeignChecks(retryWorkload(testController, "requeueAfterSeconds", 30), desired)
	if got := desired["admissionChecks"].([]any)[0].(map[string]any)["requeueAfterSeconds"]; got != int64(30) {
		t.Fatalf("the mirror would drop the controller's requeueAfterSeconds without an Event: %v", got)
	}
	desired = map[string]any{"admissionChecks": []any{ledgerEntry("Pending", "scanning", 4)}}
	KeepForeignChecks(retryWorkload(BridgeFieldManager, "requeueAfterSeconds", 30), desired)
	if _, kept := desired["admissionChecks"].([]any)[0].(map[string]any)["requeueAfterSeconds"]; kept {
		t.Fatal("the bridge's own requeueAfterSeconds was kept")
	}
}

// Only the retry fields another manager changed are named: a requeueAfterSeconds the bridge
// applied with its report is not called a change of the controller's alone.
func TestRetryChangeNamesOnlyForeignFields(t *testing.T) {
	workload := workloadWith(map[string]any{"name": "scan", "state": "Pending", "message": "scanning",
		"requeueAfterSeconds": int64(30), "retryCount": int64(5)},
		owns(BridgeFieldManager, metav1.ManagedFieldsOperationApply, "state", "message", "requeueAfterSeconds"),
		owns(testController, metav1.ManagedFieldsOperationUpdate, "requeueAfterSeconds", "retryCount"))
	h := newHarness(t, workload, ledgerCheck{State: "Pending", Message: "scanning", ReportSequence: 4})
	h.reconcile(t)
	if e := h.event(); !strings.Contains(e, "retryCount 5") || strings.Contains(e, "requeueAfterSeconds 30") {
		t.Fatalf("event %q, want retryCount named and not the shared requeueAfterSeconds", e)
	}
}

// The check controller writes Ready with podSetUpdates (Kueue's AdmissionCheckState): the
// forwarded report carries them, and a Workload whose updates the ledger cannot carry
// (tolerationSeconds) is reverted with the reason.
func TestPodSetUpdatesAreForwarded(t *testing.T) {
	entry := map[string]any{"name": "scan", "state": "Ready", "message": "provisioned",
		"podSetUpdates": []any{map[string]any{"name": "main",
			"labels":       map[string]any{"pool": "a"},
			"nodeSelector": map[string]any{"zone": "z1"},
			"tolerations":  []any{map[string]any{"key": "reserved", "operator": "Equal", "value": "a", "effect": "NoSchedule"}}}}}
	workload := workloadWith(entry, owns(testController, metav1.ManagedFieldsOperationUpdate, "state", "message"))
	h := newHarness(t, workload, ledgerCheck{State: "Pending", ReportSequence: 3})
	h.reconcile(t)
	if len(h.ledger.reports) != 1 {
		t.Fatalf("%d reports recorded, not 1", len(h.ledger.reports))
	}
	updates, err := h.ledger.reports[0].PodSetUpdates()
	if err != nil || updates.Len() != 1 {
		t.Fatalf("recorded podSetUpdates: %d, %v; want 1", updates.Len(), err)
	}
	u := updates.At(0)
	podSet, _ := u.PodSet()
	labels, _ := u.Labels()
	selector, _ := u.NodeSelector()
	tolerations, _ := u.Tolerations()
	key, _ := labels.At(0).Key()
	zone, _ := selector.At(0).Value()
	effect, _ := tolerations.At(0).Effect()
	if podSet != "main" || labels.Len() != 1 || key != "pool" || zone != "z1" || tolerations.Len() != 1 || effect != "NoSchedule" {
		t.Fatalf("recorded update podSet %q labels %d (%q) zone %q tolerations %d (%q)", podSet, labels.Len(), key, zone,
			tolerations.Len(), effect)
	}

	entry["podSetUpdates"].([]any)[0].(map[string]any)["tolerations"] = []any{map[string]any{
		"key": "reserved", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": int64(30)}}
	h = newHarness(t, workloadWith(entry, owns(testController, metav1.ManagedFieldsOperationUpdate, "state", "message")),
		ledgerCheck{State: "Pending", ReportSequence: 3})
	h.reconcile(t)
	if len(h.ledger.reports) != 0 || len(h.reverts) != 1 {
		t.Fatalf("%d reports and %d reverts, want 0 and 1", len(h.ledger.reports), len(h.reverts))
	}
	if e := h.event(); !strings.Contains(e, "tolerationSeconds: not carried by the ledger") {
		t.Fatalf("event %q", e)
	}
}

// The check's controller changes only the podSetUpdates of its Pending check: forwarded as a
// report of the same state carrying them (a Ready check's are immutable: the ledger refuses a
// change, as Kueue's webhook does, and the bridge reverts it), and acknowledged with them; another manager's change
// of them alone is reverted to the ledger's updates, with the Event naming the field.
func TestPodSetUpdatesAloneAreForwardedOrReverted(t *testing.T) {
	held := []any{map[string]any{"name": "main", "nodeSelector": map[string]any{"zone": "z1"}}}
	entry := func() map[string]any {
		return map[string]any{"name": "scan", "state": "Pending", "message": "provisioning",
			"podSetUpdates": []any{map[string]any{"name": "main", "nodeSelector": map[string]any{"zone": "z2"}}}}
	}
	ledgerHeld := ledgerCheck{State: "Pending", Message: "provisioning", ReportSequence: 4, RawPodSetUpdates: held}
	h := newHarness(t, workloadWith(entry(),
		owns(BridgeFieldManager, metav1.ManagedFieldsOperationUpdate, "state", "message"),
		owns(testController, metav1.ManagedFieldsOperationUpdate, "podSetUpdates")), ledgerHeld)
	h.reconcile(t)
	if len(h.ledger.reports) != 1 || len(h.reverts) != 0 {
		t.Fatalf("%d reports and %d reverts for the controller's podSetUpdates alone, want 1 and 0",
			len(h.ledger.reports), len(h.reverts))
	}
	updates, err := h.ledger.reports[0].PodSetUpdates()
	if err != nil || updates.Len() != 1 || h.ledger.reports[0].State() != ledgerevents.CheckState_pending {
		t.Fatalf("recorded %d podSetUpdates (%v), state %v; want 1 with state Pending", updates.Len(), err,
			h.ledger.reports[0].State())
	}
	if selector, _ := updates.At(0).NodeSelector(); selector.Len() != 1 {
		t.Fatalf("recorded nodeSelector of %d entries, want zone=z2", selector.Len())
	} else if zone, _ := selector.At(0).Value(); zone != "z2" {
		t.Fatalf("recorded zone %q, want z2", zone)
	}
	if len(h.acks) != 1 || !strings.Contains(h.acks[0], `"podSetUpdates":[{"name":"main","nodeSelector":{"zone":"z2"}}]`) {
		t.Fatalf("acknowledgements %v, want one sharing the podSetUpdates", h.acks)
	}

	h = newHarness(t, workloadWith(entry(),
		owns(BridgeFieldManager, metav1.ManagedFieldsOperationUpdate, "state", "message"),
		owns("intruder", metav1.ManagedFieldsOperationUpdate, "podSetUpdates")), ledgerHeld)
	h.reconcile(t)
	if len(h.ledger.reports) != 0 || len(h.reverts) != 1 {
		t.Fatalf("%d reports and %d reverts for another manager's podSetUpdates, want 0 and 1",
			len(h.ledger.reports), len(h.reverts))
	}
	if got, _ := json.Marshal(h.reverts[0]["podSetUpdates"]); string(got) != `[{"name":"main","nodeSelector":{"zone":"z1"}}]` {
		t.Fatalf("reverted podSetUpdates to %s, want the ledger's zone z1", got)
	}
	if e := h.event(); !strings.Contains(e, "status.admissionChecks[scan].podSetUpdates written by field manager \"intruder\"") {
		t.Fatalf("event %q", e)
	}
}

// A budget check (controllerName admission-ledger.io/budget) is the ledger's own: a state written
// by a field manager of that name is not forwarded (admitd would refuse it) but reverted to the
// ledger's, with a Warning Event that says the ledger decides it.
func TestBudgetCheckIsNotForwarded(t *testing.T) {
	workload := workloadWith(map[string]any{"name": "scan", "state": "Ready", "message": "fits"},
		owns(BridgeFieldManager, metav1.ManagedFieldsOperationUpdate),
		owns(BudgetController, metav1.ManagedFieldsOperationUpdate, "state", "message"))
	h := newHarness(t, workload, ledgerCheck{State: "Pending", Message: "", ReportSequence: 0})
	ac := &unstructured.Unstructured{}
	ac.SetGroupVersionKind(checkGVK)
	ctx := context.Background()
	if err := h.reconciler.Client.Get(ctx, types.NamespacedName{Name: "scan"}, ac); err != nil {
		t.Fatal(err)
	}
	ac.Object["spec"] = map[string]any{"controllerName": BudgetController,
		"parameters": map[string]any{"apiGroup": "admission-ledger.io", "kind": "BudgetPolicy",
			"name": "team-a-month"}}
	if err := h.reconciler.Client.Update(ctx, ac); err != nil {
		t.Fatal(err)
	}
	h.reconcile(t)
	if len(h.ledger.reports) != 0 || len(h.acks) != 0 {
		t.Fatalf("%d reports and %d acknowledgements for a budget check, want none",
			len(h.ledger.reports), len(h.acks))
	}
	if len(h.reverts) != 1 || h.reverts[0]["state"] != "Pending" || h.reverts[0]["message"] != "" {
		t.Fatalf("reverts %v, want one back to the ledger's Pending", h.reverts)
	}
	if e := h.event(); !strings.HasPrefix(e, "Warning CheckReverted") ||
		!strings.Contains(e, "is a budget check") ||
		!strings.Contains(e, "decided by the ledger itself") {
		t.Fatalf("event %q", e)
	}
}

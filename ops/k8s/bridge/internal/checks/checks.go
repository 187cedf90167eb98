// Package checks forwards admission check states written inside the cluster to the ledger
// (docs/k8s.md, "Checks from inside the cluster"). A check controller written for Kueue sets
// `status.admissionChecks[i].state` and `.message` of a Workload; the API server's managedFields
// name the field manager that wrote each. When that manager is the AdmissionCheck's
// `spec.controllerName`, the bridge records the report (a new state, or a new message alone) in
// the ledger as its own input, with the entry's podSetUpdates, marked `viaFieldManager` (the weaker proof: a field manager is a
// name the writer chose, vouched for by the bridge, where a check controller's own certificate
// to admitd is the strong path). A state or message written by any other manager is reverted to
// the ledger's, with a Warning Event naming the manager and the controllerName expected. A budget
// check (controllerName BudgetController) is the ledger's own: no report of it is forwarded, and
// any write of its state or message is reverted.
package checks

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
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"admission-ledger/bridge/internal/ledger"
	"admission-ledger/bridge/internal/ledgerevents"
	"admission-ledger/bridge/internal/podsetupdates"
)

// BridgeFieldManager is the field manager of the bridge's own writes (its user agent: the API
// server names an Update's manager after it; main sets it).
const BridgeFieldManager = "admit-k8s"

// BudgetController is the controllerName of the checks the ledger decides itself at quota
// reservation (docs/budgets.md); admitd refuses a report for one.
const BudgetController = "admission-ledger.io/budget"

// JobUIDLabel marks the Workload objects the bridge creates for Jobs.
const JobUIDLabel = "kueue.x-k8s.io/job-uid"

// RetryAfterTransportError is the wait after admitd could not be reached or asked to retry.
const RetryAfterTransportError = 5 * time.Second

var (
	workloadGVK = schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "Workload"}
	checkGVK    = schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "AdmissionCheck"}
)

// Ledger is what the check forwarder needs of admitd.
type Ledger interface {
	Record(ctx context.Context, requestID string, inputs [][]byte) (ledger.Outcome, error)
	// WorkloadState reads one workload of the ledger (nil: none of that name).
	WorkloadState(ctx context.Context, namespace, name string) (*ledger.WorkloadState, error)
}

// Reconciler looks at one Workload at a time: every admissionChecks entry whose state differs
// from the ledger's and was written by someone other than the bridge is forwarded or reverted.
type Reconciler struct {
	Client client.Client
	Ledger Ledger
	Events record.EventRecorder
}

// SetupWithManager registers the forwarder for the Workloads the bridge creates for Jobs.
func SetupWithManager(mgr ctrl.Manager, l Ledger) error {
	r := &Reconciler{Client: mgr.GetClient(), Ledger: l, Events: mgr.GetEventRecorderFor("admit-k8s")}
	owned := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[JobUIDLabel] != ""
	})
	workload := &unstructured.Unstructured{}
	workload.SetGroupVersionKind(workloadGVK)
	return ctrl.NewControllerManagedBy(mgr).
		Named("checks").
		For(workload, builder.WithPredicates(owned)).
		Complete(r)
}

// ledgerCheck is one check of the ledger's workload read model. ReportSequence is the sequence
// of the report the state came from (0: none yet).
type ledgerCheck struct {
	State, Message string
	ReportSequence int64
	RetryCount     int64
	PodSetUpdates  string // podsetupdates.Key of the ledger's
	// The ledger's podSetUpdates as its read model writes them (nil: none), for a revert.
	RawPodSetUpdates []any
}

type ledgerWorkload struct {
	UID        string
	Generation int64
	Checks     map[string]ledgerCheck
}

// findLedgerWorkload reads the workload's checks of the ledger (nil: no such workload).
func (r *Reconciler) findLedgerWorkload(ctx context.Context, namespace, name string) (*ledgerWorkload, error) {
	state, err := r.Ledger.WorkloadState(ctx, namespace, name)
	if err != nil || state == nil {
		return nil, err
	}
	w := &ledgerWorkload{UID: state.UID, Generation: state.Generation, Checks: map[string]ledgerCheck{}}
	// The podSetUpdates as the ledger's status has them, for a revert to write back as they are.
	raw := map[string][]any{}
	entries, _, _ := unstructured.NestedSlice(state.Status, "admissionChecks")
	for _, e := range entries {
		if m, ok := e.(map[string]any); ok {
			name, _ := m["name"].(string)
			raw[name], _, _ = unstructured.NestedSlice(m, "podSetUpdates")
		}
	}
	for _, c := range state.Checks {
		w.Checks[c.Name] = ledgerCheck{State: c.State, Message: c.Message,
			ReportSequence: int64(c.ReportSequence), RetryCount: int64(c.RetryCount),
			PodSetUpdates: podsetupdates.Key(c.PodSetUpdates), RawPodSetUpdates: raw[c.Name]}
	}
	return w, nil
}

// ReportedFields are the fields of an admissionChecks entry that make a check controller's
// report: a change of any is one. A change of podSetUpdates alone is forwarded as a report of
// the same state with the new updates (the ledger keeps a check's latest, as Kueue keeps the
// status it reads when the job starts).
var ReportedFields = []string{"state", "message", "podSetUpdates"}

// RetryFields are the retry fields of an admissionChecks entry. A change of them alone is no
// report: Kueue reads requeueAfterSeconds only when the state is Retry (its workload controller
// requeues after lastTransitionTime + requeueAfterSeconds), and the ledger's CheckStateReported
// carries it (requeueAfterNs) only for a report whose state is Retry, which the ledger acts on
// at once (the reservation is released; a later change is for a reservation that is gone);
// retryCount is counted by Kueue itself, here by the ledger. So the bridge forwards them with a
// report and reverts a change of them alone (RetryWriter).
var RetryFields = []string{"requeueAfterSeconds", "retryCount"}

// Writers returns, per check name and field (ReportedFields and RetryFields), the field managers
// that own `status.admissionChecks[name=...].FIELD` of the object (managedFields on the status
// subresource; the CRD declares admissionChecks a map list keyed by name, so each entry's fields
// are owned separately).
func Writers(managed []metav1.ManagedFieldsEntry) map[string]map[string][]string {
	writers := map[string]map[string][]string{}
	for _, entry := range managed {
		if entry.Subresource != "status" || entry.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if err := json.Unmarshal(entry.FieldsV1.Raw, &fields); err != nil {
			continue
		}
		status, _ := fields["f:status"].(map[string]any)
		list, _ := status["f:admissionChecks"].(map[string]any)
		for key, value := range list {
			if !strings.HasPrefix(key, "k:") {
				continue
			}
			var k struct {
				Name string `json:"name"`
			}
			if err := json.Unmarshal([]byte(strings.TrimPrefix(key, "k:")), &k); err != nil {
				continue
			}
			item, _ := value.(map[string]any)
			for _, field := range append(append([]string{}, ReportedFields...), RetryFields...) {
				if _, owns := item["f:"+field]; !owns {
					continue
				}
				if writers[k.Name] == nil {
					writers[k.Name] = map[string][]string{}
				}
				writers[k.Name][field] = append(writers[k.Name][field], entry.Manager)
			}
		}
	}
	return writers
}

// ForeignWriter names who wrote an entry's report that the bridge has not seen: the managers
// of each reported field (state, message) that the bridge does not own, alone or shared (it
// shares a field once it has forwarded it), sorted and joined by ","; "" when the bridge owns
// every owned field. A message changed alone by a check controller is its report as much as
// a changed state.
func ForeignWriter(fields map[string][]string) string {
	return foreignOf(fields, ReportedFields)
}

// RetryWriter names who changed an entry's retry fields (RetryFields) without the bridge having
// seen it, as ForeignWriter does for the report: "" when the bridge owns each owned one (the
// mirror wrote it, or the bridge applied it with the report it came with).
func RetryWriter(fields map[string][]string) string {
	return foreignOf(fields, RetryFields)
}

func foreignOf(fields map[string][]string, of []string) string {
	foreign := map[string]bool{}
	for _, field := range of {
		owners := fields[field]
		bridge := false
		for _, w := range owners {
			bridge = bridge || w == BridgeFieldManager
		}
		if bridge {
			continue
		}
		for _, w := range owners {
			foreign[w] = true
		}
	}
	names := make([]string, 0, len(foreign))
	for w := range foreign {
		names = append(names, w)
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

// sameReport: the entry says what the ledger's entry `held` says (state, message and
// podSetUpdates; an absent message is the empty one, as the ledger's).
func sameReport(entry, held map[string]any) bool {
	return fmt.Sprint(entry["state"]) == fmt.Sprint(held["state"]) &&
		messageOf(entry) == messageOf(held) && updatesKeyOf(entry) == updatesKeyOf(held)
}

// updatesKeyOf is the canonical text of an entry's podSetUpdates ("" also when unreadable: such
// an entry is reverted when forwarded).
func updatesKeyOf(entry map[string]any) string {
	updates, err := podsetupdates.FromEntry(entry)
	if err != nil {
		return "unreadable"
	}
	return podsetupdates.Key(updates)
}

func messageOf(entry map[string]any) string {
	message, _ := entry["message"].(string)
	return message
}

// sameRetry: the entry's retry fields are the ledger's entry `held`'s (the ledger's read model
// has retryCount and no requeueAfterSeconds; absent is 0 and absent alike).
func sameRetry(entry, held map[string]any) bool {
	for _, field := range RetryFields {
		a, _, _ := unstructured.NestedFieldNoCopy(entry, field)
		b, _, _ := unstructured.NestedFieldNoCopy(held, field)
		if fmt.Sprint(orZero(a)) != fmt.Sprint(orZero(b)) {
			return false
		}
	}
	return true
}

func orZero(v any) any {
	if v == nil {
		return int64(0)
	}
	return v
}

func entriesOf(obj map[string]any) []any {
	entries, _, _ := unstructured.NestedSlice(obj, "status", "admissionChecks")
	return entries
}

// KeepForeignChecks is for the bridge's status mirror: in `desired` (the ledger's status about
// to be written over the Workload's), it keeps every admissionChecks entry of the Workload
// whose state or message a field manager other than the bridge wrote and the ledger does not
// hold yet, so the mirror does not overwrite a check controller's report (a new state, or a
// new message alone) before this package has forwarded or reverted it; and likewise an entry
// whose retry fields another manager changed, which this package reverts with an Event.
func KeepForeignChecks(workload *unstructured.Unstructured, desired map[string]any) {
	entries := entriesOf(workload.Object)
	if len(entries) == 0 {
		// Nothing to keep, and no need to decode the managed fields (a tenth of the bridge's
		// CPU in Kueue's benchmark, whose Workloads have no checks).
		return
	}
	writers := Writers(workload.GetManagedFields())
	desiredEntries, _ := desired["admissionChecks"].([]any)
	index := map[string]int{}
	for i, e := range desiredEntries {
		m, _ := e.(map[string]any)
		name, _ := m["name"].(string)
		index[name] = i
	}
	changed := false
	for _, e := range entries {
		m, _ := e.(map[string]any)
		name, _ := m["name"].(string)
		report, retry := ForeignWriter(writers[name]) != "", RetryWriter(writers[name]) != ""
		if !report && !retry {
			continue
		}
		i, found := index[name]
		if found {
			d, _ := desiredEntries[i].(map[string]any)
			if (!report || sameReport(m, d)) && (!retry || sameRetry(m, d)) {
				continue
			}
			desiredEntries[i] = runtime.DeepCopyJSONValue(m)
		} else {
			desiredEntries = append(desiredEntries, runtime.DeepCopyJSONValue(m))
		}
		changed = true
	}
	if changed {
		desired["admissionChecks"] = desiredEntries
	}
}

// checkStates are Kueue's states of an admission check, as the ledger's CheckState.
var checkStates = map[string]ledgerevents.CheckState{
	"Pending":  ledgerevents.CheckState_pending,
	"Ready":    ledgerevents.CheckState_ready,
	"Retry":    ledgerevents.CheckState_retry,
	"Rejected": ledgerevents.CheckState_rejected,
}

// Reconcile forwards or reverts the foreign check reports (states and messages) of one Workload.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	workload := &unstructured.Unstructured{}
	workload.SetGroupVersionKind(workloadGVK)
	if err := r.Client.Get(ctx, req.NamespacedName, workload); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	entries := entriesOf(workload.Object)
	if len(entries) == 0 || workload.GetDeletionTimestamp() != nil {
		return ctrl.Result{}, nil
	}
	writers := Writers(workload.GetManagedFields())
	var foreign []map[string]any
	for _, e := range entries {
		m, _ := e.(map[string]any)
		name, _ := m["name"].(string)
		if ForeignWriter(writers[name]) != "" || RetryWriter(writers[name]) != "" {
			foreign = append(foreign, m)
		}
	}
	if len(foreign) == 0 {
		return ctrl.Result{}, nil
	}
	state, err := r.findLedgerWorkload(ctx, workload.GetNamespace(), workload.GetName())
	if err != nil {
		log.FromContext(ctx).Error(err, "reading the ledger's workloads failed; will retry")
		return ctrl.Result{RequeueAfter: RetryAfterTransportError}, nil
	}
	for _, entry := range foreign {
		name, _ := entry["name"].(string)
		value, _ := entry["state"].(string)
		message := messageOf(entry)
		writer := ForeignWriter(writers[name])
		var held ledgerCheck
		found := false
		if state != nil {
			held, found = state.Checks[name]
		}
		if writer == "" {
			// The retry fields alone: no report (RetryFields).
			if why := retryChange(entry, held, found, writers[name]); why != "" {
				return ctrl.Result{}, r.revert(ctx, workload, name, state, why)
			}
			continue
		}
		updates, updatesErr := podsetupdates.FromEntry(entry)
		if found && held.State == value && held.Message == message &&
			updatesErr == nil && held.PodSetUpdates == podsetupdates.Key(updates) {
			// The ledger holds it already: forwarded by a bridge that stopped before it
			// acknowledged, or the same by chance. Acknowledge it now, so that the mirror does
			// not keep it as a report for a later reservation.
			if err := r.acknowledge(ctx, workload, entry); err != nil {
				return ctrl.Result{}, err
			}
			continue
		}
		what := fmt.Sprintf("status.admissionChecks[%s].state %q", name, value)
		switch {
		case found && held.State == value && held.Message == message:
			what = fmt.Sprintf("status.admissionChecks[%s].podSetUpdates", name)
		case found && held.State == value:
			what = fmt.Sprintf("status.admissionChecks[%s].message %q", name, message)
		}
		if !found {
			return ctrl.Result{}, r.revert(ctx, workload, name, state, fmt.Sprintf(
				"%s written by field manager %q: the ledger's "+
					"workload holds no reservation that requires check %s; reverted",
				what, writer, name))
		}
		controller, err := r.controllerName(ctx, name)
		if err != nil {
			return ctrl.Result{}, err
		}
		if why := notForwarded(entry, what, writer, controller, held, updatesErr); why != "" {
			return ctrl.Result{}, r.revert(ctx, workload, name, state, why)
		}
		result, done, err := r.forward(ctx, workload, state, entry, updates, writer)
		if done || err != nil {
			return result, err
		}
	}
	return ctrl.Result{}, nil
}

// notForwarded says why a report that writer made in entry (what: the fields it changed) is
// reverted rather than forwarded, given the AdmissionCheck's controllerName and the ledger's
// state of the check; "" when it is forwarded. updatesErr: the entry's podSetUpdates unreadable.
func notForwarded(entry map[string]any, what, writer, controller string, held ledgerCheck,
	updatesErr error) string {
	name, _ := entry["name"].(string)
	value, _ := entry["state"].(string)
	switch {
	case controller == BudgetController:
		// The ledger decides it at quota reservation and refuses any report of it.
		return fmt.Sprintf("%s written by field manager %q: check %s is a budget check "+
			"(controllerName %q), decided by the ledger itself: not forwarded, reverted to the "+
			"ledger's state %q, message %q", what, writer, name, controller, held.State,
			held.Message)
	case writer != controller:
		return fmt.Sprintf("%s written by field manager %q, but the "+
			"AdmissionCheck's spec.controllerName is %q: not forwarded to the ledger, "+
			"reverted to state %q, message %q", what, writer, controller, held.State, held.Message)
	case updatesErr != nil:
		return fmt.Sprintf("status.admissionChecks[%s].podSetUpdates written by field manager "+
			"%q: %v; reverted", name, writer, updatesErr)
	}
	if _, known := checkStates[value]; !known {
		return fmt.Sprintf("status.admissionChecks[%s].state %q written by field manager %q is "+
			"not one of Pending, Ready, Retry, Rejected; reverted to %q", name, value, writer,
			held.State)
	}
	return ""
}

// retryChange says why an entry whose state and message the bridge has seen but whose retry
// fields another manager changed (fields: the entry's Writers) is reverted; "" when those are
// the ledger's (nothing to revert).
func retryChange(entry map[string]any, held ledgerCheck, found bool, fields map[string][]string) string {
	name, _ := entry["name"].(string)
	writer := RetryWriter(fields)
	changedBy := func(field string) bool { return foreignOf(fields, []string{field}) != "" }
	if !found {
		return fmt.Sprintf("status.admissionChecks[%s] retry fields written by field manager %q: the "+
			"ledger's workload holds no reservation that requires check %s; reverted", name, writer, name)
	}
	var changed []string
	if v, present := entry["requeueAfterSeconds"]; present && changedBy("requeueAfterSeconds") {
		changed = append(changed, fmt.Sprintf("requeueAfterSeconds %v without a new state is not a report: "+
			"the ledger, as Kueue, reads it only with state Retry (write both in one update)", v))
	}
	if v, _, _ := unstructured.NestedFieldNoCopy(entry, "retryCount"); changedBy("retryCount") &&
		fmt.Sprint(orZero(v)) != fmt.Sprint(held.RetryCount) {
		changed = append(changed, fmt.Sprintf("retryCount %v is not a report: the ledger counts "+
			"the retries (Kueue increments it itself), %d so far", v, held.RetryCount))
	}
	if len(changed) == 0 {
		return ""
	}
	return fmt.Sprintf("status.admissionChecks[%s] written by field manager %q: %s; reverted to the "+
		"ledger's (state %q, message %q)", name, writer, strings.Join(changed, "; "), held.State, held.Message)
}

// controllerName reads the AdmissionCheck's spec.controllerName.
func (r *Reconciler) controllerName(ctx context.Context, check string) (string, error) {
	ac := &unstructured.Unstructured{}
	ac.SetGroupVersionKind(checkGVK)
	if err := r.Client.Get(ctx, types.NamespacedName{Name: check}, ac); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil // no such AdmissionCheck: no manager is its controller
		}
		return "", fmt.Errorf("reading AdmissionCheck %s: %w", check, err)
	}
	name, _, _ := unstructured.NestedString(ac.Object, "spec", "controllerName")
	return name, nil
}

// CheckRequestID names one forwarded report: the same state and message by the same writer for
// the same reservation, after the same report the ledger held (`after`, its reportSequence), is
// one call, however often the bridge (or a restarted one) sends it; a controller that writes
// message A, then B, then A again makes three reports.
// The podSetUpdates are part of the report: their canonical text (podsetupdates.Key) is hashed
// too, and only when there are any, so ids of reports without them are as before.
func CheckRequestID(namespace, name, uid string, generation int64, check, state, message, writer string,
	after int64, updates []podsetupdates.PodSetUpdate) string {
	parts := []string{namespace, name, uid,
		strconv.FormatInt(generation, 10), check, state, message, writer, strconv.FormatInt(after, 10)}
	if key := podsetupdates.Key(updates); key != "" {
		parts = append(parts, key)
	}
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return "admit-k8s/check/" + hex.EncodeToString(sum[:16])
}

// CheckReportedEvent is the input a forwarded report records: `admitctl report-check`'s, with
// the entry's podSetUpdates and viaFieldManager set to the writer.
func CheckReportedEvent(namespace, name, uid string, generation int64, check, state, message string,
	requeueAfterSeconds int64, writer string, updates []podsetupdates.PodSetUpdate) ([]byte, error) {
	return ledger.BuildEvent(func(event ledgerevents.Event) error {
		r, err := event.Body().NewCheckStateReported()
		if err != nil {
			return err
		}
		if err := ledger.SetNewWorkloadRef(r, namespace, name, uid); err != nil {
			return err
		}
		if err := r.SetCheck(check); err != nil {
			return err
		}
		r.SetGeneration(uint64(generation))
		r.SetState(checkStates[state])
		if err := r.SetMessage_(message); err != nil {
			return err
		}
		r.SetRequeueAfterNs(requeueAfterSeconds * int64(time.Second))
		if err := podsetupdates.Set(r, updates); err != nil {
			return err
		}
		return r.SetViaFieldManager(writer)
	})
}

// forward records the entry's state in the ledger. done: stop looking at this Workload now.
func (r *Reconciler) forward(ctx context.Context, workload *unstructured.Unstructured, state *ledgerWorkload,
	entry map[string]any, updates []podsetupdates.PodSetUpdate, writer string) (ctrl.Result, bool, error) {
	logger := log.FromContext(ctx)
	check, _ := entry["name"].(string)
	value, _ := entry["state"].(string)
	message := messageOf(entry)
	requeueAfter, _, _ := unstructured.NestedInt64(entry, "requeueAfterSeconds")
	ns, name := workload.GetNamespace(), workload.GetName()
	event, err := CheckReportedEvent(ns, name, state.UID, state.Generation, check, value, message, requeueAfter, writer, updates)
	if err != nil {
		return ctrl.Result{}, true, err
	}
	after := state.Checks[check].ReportSequence
	outcome, err := r.Ledger.Record(ctx, CheckRequestID(ns, name, state.UID, state.Generation, check, value, message, writer, after, updates),
		[][]byte{event})
	var refused *ledger.Refused
	switch {
	case errors.As(err, &refused) && !refused.Retryable():
		return ctrl.Result{}, true, r.revert(ctx, workload, check, state, fmt.Sprintf(
			"status.admissionChecks[%s].state %q, message %q by field manager %q: the ledger refused the report: %s; reverted",
			check, value, message, writer, refused.Message))
	case err != nil:
		logger.Error(err, "forwarding a check report failed; will retry", "check", check)
		return ctrl.Result{RequeueAfter: RetryAfterTransportError}, true, nil
	}
	sequence := ""
	if len(outcome.Sequences) > 0 {
		sequence = strconv.FormatUint(outcome.Sequences[0], 10)
	}
	logger.Info("forwarded a check report", "check", check, "state", value, "message", message,
		"fieldManager", writer, "sequence", sequence)
	r.Events.Event(workload, corev1.EventTypeNormal, "CheckForwarded", fmt.Sprintf(
		"check %s %s (message %q), written by field manager %q (the AdmissionCheck's controllerName), recorded in "+
			"the ledger at sequence %s via admit-k8s (proof: the field manager, not the controller's certificate)",
		check, value, message, writer, sequence))
	if err := r.acknowledge(ctx, workload, entry); err != nil {
		return ctrl.Result{}, true, err
	}
	return ctrl.Result{}, false, nil
}

// Acknowledgement is the server-side apply (field manager admit-k8s, forced) by which the
// bridge shares the ownership of a forwarded entry's state and message (and the
// requeueAfterSeconds and podSetUpdates forwarded with them): a later write by the
// mirror (a later reservation's reset) is then not taken for the check controller's report
// again, and neither is the controller's own copy.
func Acknowledgement(namespace, name string, entry map[string]any) *unstructured.Unstructured {
	ack := &unstructured.Unstructured{}
	ack.SetGroupVersionKind(workloadGVK)
	ack.SetNamespace(namespace)
	ack.SetName(name)
	applied := map[string]any{"name": entry["name"], "state": entry["state"]}
	if message, present := entry["message"]; present {
		applied["message"] = message
	}
	// Forwarded with the report: the bridge shares them too, so they are not a change of their own.
	for _, field := range []string{"requeueAfterSeconds", "podSetUpdates"} {
		if value, present := entry[field]; present {
			applied[field] = value
		}
	}
	ack.Object["status"] = map[string]any{"admissionChecks": []any{applied}}
	return ack
}

func (r *Reconciler) acknowledge(ctx context.Context, workload *unstructured.Unstructured, entry map[string]any) error {
	ack := Acknowledgement(workload.GetNamespace(), workload.GetName(), entry)
	if err := r.Client.Status().Patch(ctx, ack, client.Apply, client.FieldOwner(BridgeFieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("acknowledging check %v on Workload %s/%s: %w", entry["name"], workload.GetNamespace(), workload.GetName(), err)
	}
	return nil
}

// revert writes the ledger's state, message, podSetUpdates and retry fields of the check back over the entry
// (or removes the entry when the ledger has none) and says why in a Warning Event.
func (r *Reconciler) revert(ctx context.Context, workload *unstructured.Unstructured, check string,
	state *ledgerWorkload, why string) error {
	entries := entriesOf(workload.Object)
	kept := make([]any, 0, len(entries))
	for _, e := range entries {
		m, _ := e.(map[string]any)
		if m["name"] != check {
			kept = append(kept, e)
			continue
		}
		if state == nil {
			continue
		}
		held, found := state.Checks[check]
		if !found {
			continue
		}
		m = runtime.DeepCopyJSONValue(m).(map[string]any)
		m["state"] = held.State
		m["message"] = held.Message
		// The ledger's retry fields: its count, and no requeueAfterSeconds (RetryFields).
		m["retryCount"] = held.RetryCount
		delete(m, "requeueAfterSeconds")
		// The ledger's podSetUpdates, or none.
		if held.RawPodSetUpdates != nil {
			m["podSetUpdates"] = runtime.DeepCopyJSONValue(held.RawPodSetUpdates)
		} else {
			delete(m, "podSetUpdates")
		}
		kept = append(kept, m)
	}
	if err := unstructured.SetNestedSlice(workload.Object, kept, "status", "admissionChecks"); err != nil {
		return err
	}
	if err := r.Client.Status().Update(ctx, workload, client.FieldOwner(BridgeFieldManager)); err != nil {
		return fmt.Errorf("reverting check %s on Workload %s/%s: %w", check, workload.GetNamespace(), workload.GetName(), err)
	}
	log.FromContext(ctx).Info("reverted a check state", "check", check, "why", why)
	r.Events.Event(workload, corev1.EventTypeWarning, "CheckReverted", why)
	return nil
}

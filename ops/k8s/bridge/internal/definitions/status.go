package definitions

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"admission-ledger/bridge/internal/checks"
)

// StatusInterval is how often ClusterQueue and LocalQueue status is copied from the ledger's
// read models without a reason: a safety resync. The ledger watch (Notify) makes the writer copy
// it as soon as a decision or a definition changed it, after StatusDebounce.
const StatusInterval = 45 * time.Second

// StatusWritesPerPass bounds the writes of one copy of a kind: the rest go at the next copy,
// ranked again, so that a queue whose work its status does not show waits for at most this
// many writes (the client's budget is 50 a second), not for a pass over a thousand queues.
const StatusWritesPerPass = 25

// StatusWriteWorkers: how many writes of one copy are under way at once. A write waits for the
// API server, which the creations of a large-scale run slow to a second: one at a time, the
// ClusterQueues with work showed it only after Kueue's runner had stopped for want of one.
const StatusWriteWorkers = 10

// StatusDebounce is how long the writer waits after a notification before it copies, so that
// the decisions of one admission cycle make one copy.
const StatusDebounce = 200 * time.Millisecond

// StatusReadShare: a copy starts at least StatusReadShare times its predecessor's read after it
// (the read: every queue of the kind from the ledger as JSON, and decoding it; up to
// StatusMaxWait), so the reads take about 1/StatusReadShare of the time, and of admitd's loop,
// which answers them between the records. With a thousand ClusterQueues a read takes 20 to
// 40 ms: copies at the debounce after each decision of Kueue's large-scale run read them three
// times a second, and the reads were 29 % of admitd's CPU and a tenth of the bridge's.
const StatusReadShare = 25

// StatusMaxWait bounds copyWait: on a loaded machine a read of a thousand queues took 100 to
// 400 ms, which would have spaced the copies (and the queues' news) by up to ten seconds.
const StatusMaxWait = time.Second

// copyWait: how long a copy notified now waits, the last copy having started since ago and
// read for read.
func copyWait(read, since time.Duration) time.Duration {
	return max(StatusDebounce, min(StatusReadShare*read-since, StatusMaxWait))
}

// StatusKinds are the ledger's events that change a ClusterQueue's or a LocalQueue's status.
var StatusKinds = []string{
	"flavorDefined", "cohortDefined", "clusterQueueDefined", "localQueueDefined", "objectDeleted",
	"workloadSubmitted", "workloadImported", "workloadDeleted", "workloadFinished",
	"quotaReserved", "admitted", "evictionStarted", "quotaReleased", "requeued", "rejected",
	"deactivated", "preempted",
	// Admission fair sharing's consumed usage (status.fairSharing of a LocalQueue): its
	// configuration, and the sampling ticks that logical time brings (the ticks that another
	// input brings show at that input's copy, or at the next resync).
	"engineConfigDefined", "clockAdvanced",
}

// Reader is what the status writer needs of the ledger client.
type Reader interface {
	Get(ctx context.Context, kind, format string) (string, error)
}

// StatusWriter writes the ledger's status of every ClusterQueue and LocalQueue (`admitctl get
// clusterqueues|localqueues -o json`: pending, reserving and admitted workloads, flavors'
// reservation and usage, conditions, a LocalQueue's admission fair sharing status) into the objects of the same name in the cluster. Runs
// only on the leader.
type StatusWriter struct {
	Client client.Client
	Ledger Reader
	// Submitted (may be nil): the ledger holds this Workload object though it shows no condition.
	Submitted func(namespace, name string) bool
	notify    chan struct{} // for the ClusterQueues' copy
	notifyLQ  chan struct{} // for the LocalQueues' copy
	// Informers (may be nil: unsubmitted lists every Workload at each copy) feed bare.
	Informers cache.Informers
	mu        sync.Mutex
	indexed   bool
	// bare: the Workload objects with a queue that show no condition, are not being deleted and
	// are not Submitted, by namespace/name, to the key of their LocalQueue ("NAMESPACE/NAME");
	// kept by the Workload informer's events and SubmittedNow, so a copy counts these few, not
	// every Workload (nor asks Submitted of thousands of pending ones at each copy).
	bare map[types.NamespacedName]string
	// recorded: the sequence that recorded each queue as it is ("KIND/NAMESPACE/NAME"), for its
	// condition Recorded, which the copy writes.
	recorded sync.Map
	// shown: whether the status last written says the queue has work ("KIND/NAMESPACE/NAME").
	shown sync.Map
	// settled: the inputs (settledAs) each queue's status in the cluster was last found equal
	// to or written from ("KIND/NAMESPACE/NAME"); a copy skips the queues whose inputs are the
	// same, a resync (every StatusInterval) forgets them.
	settled sync.Map
	// decoded: the ledger's items of each plural as the last copy read them, by their text.
	decoded map[string]map[string]map[string]any
	// WriteWorkers: writes of one copy under way at once (0: StatusWriteWorkers).
	WriteWorkers int
}

func (w *StatusWriter) writeWorkers() int {
	if w.WriteWorkers > 0 {
		return w.WriteWorkers
	}
	return StatusWriteWorkers
}

// Recorded: the ledger holds the queue kind/key as it is, since sequence; its condition
// Recorded is written with the next copy of its status.
func (w *StatusWriter) Recorded(kind string, key types.NamespacedName, sequence uint64) {
	w.recorded.Store(kind+"/"+key.String(), sequence)
	w.Notify()
}

// observe keeps bare up to date with one Workload object (nil obj: key deleted).
func (w *StatusWriter) observe(key types.NamespacedName, obj *unstructured.Unstructured) {
	queue := ""
	if obj != nil {
		conditions, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "status", "conditions")
		name, _, _ := unstructured.NestedString(obj.Object, "spec", "queueName")
		if list, _ := conditions.([]any); len(list) == 0 && name != "" && obj.GetDeletionTimestamp() == nil {
			queue = key.Namespace + "/" + name
		}
	}
	w.mu.Lock()
	// Checked under the lock that SubmittedNow takes: a submission between the two is seen by
	// one or the other.
	if queue != "" && w.Submitted != nil && w.Submitted(key.Namespace, key.Name) {
		queue = ""
	}
	before, had := w.bare[key]
	if queue == "" {
		delete(w.bare, key)
	} else {
		w.bare[key] = queue
	}
	w.mu.Unlock()
	if had != (queue != "") || before != queue {
		w.Notify() // a queue's count of unsubmitted Workload objects changed
	}
}

// SubmittedNow: the ledger holds the Workload object namespace/name, which shows no condition
// yet (Submitted answers true from now on): it leaves bare.
func (w *StatusWriter) SubmittedNow(namespace, name string) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	w.mu.Lock()
	_, had := w.bare[key]
	delete(w.bare, key)
	w.mu.Unlock()
	if had {
		w.Notify()
	}
}

// index subscribes observe to the Workload informer's events (its existing objects first).
func (w *StatusWriter) index(ctx context.Context) error {
	wl := &unstructured.Unstructured{}
	wl.SetGroupVersionKind(schema.GroupVersionKind{Group: Group, Version: StoredVersion, Kind: "Workload"})
	informer, err := w.Informers.GetInformer(ctx, wl)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.bare = map[types.NamespacedName]string{}
	w.mu.Unlock()
	seen := func(obj any) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			w.observe(client.ObjectKeyFromObject(u), u)
		}
	}
	_, err = informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, obj any) { seen(obj) },
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if u, ok := obj.(*unstructured.Unstructured); ok {
				w.observe(client.ObjectKeyFromObject(u), nil)
			}
		},
	})
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.indexed = true
	w.mu.Unlock()
	return nil
}

// AddStatusWriter registers the writer with the manager.
func AddStatusWriter(mgr ctrl.Manager, l Reader) (*StatusWriter, error) {
	w := &StatusWriter{Client: mgr.GetClient(), Ledger: l, notify: make(chan struct{}, 1),
		notifyLQ:  make(chan struct{}, 1),
		Informers: mgr.GetCache()}
	return w, mgr.Add(w)
}

// NeedLeaderElection: only the leader writes.
func (w *StatusWriter) NeedLeaderElection() bool { return true }

// Notify asks for a copy soon (the ledger watch saw a change); never blocks.
func (w *StatusWriter) Notify() {
	for _, ch := range []chan struct{}{w.notify, w.notifyLQ} {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Start copies the status at once, on each Notify (debounced) and every StatusInterval, until
// ctx ends: the ClusterQueues' and the LocalQueues' each in a loop of its own, so that the
// writes of a thousand LocalQueues do not hold back the ClusterQueues' (and the other way).
func (w *StatusWriter) Start(ctx context.Context) error {
	logger := ctrl.Log.WithName("queue-status")
	if w.Informers != nil {
		if err := w.index(ctx); err != nil {
			logger.Error(err, "watching Workload objects for the queues' counts; listing them at each copy")
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.copyLoop(ctx, logger, "ClusterQueue", w.notify)
	}()
	w.copyLoop(ctx, logger, "LocalQueue", w.notifyLQ)
	<-done
	return nil
}

// copyLoop copies the status of kind at once, on each notification of notify (debounced) and
// every StatusInterval, until ctx ends. A failed round is logged and retried after
// RetryAfterTransportError.
func (w *StatusWriter) copyLoop(ctx context.Context, logger logr.Logger, kind string, notify chan struct{}) {
	ticker := time.NewTicker(StatusInterval)
	defer ticker.Stop()
	for {
		var retry <-chan time.Time
		started := time.Now()
		read, err := w.copyStatusTimed(ctx, kind)
		if err != nil && ctx.Err() == nil {
			logger.Error(err, "copying the ledger's status failed; will retry", "kind", kind)
			retry = time.After(RetryAfterTransportError)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			w.resync(kind)
		case <-retry:
		case <-notify:
			select {
			case <-ctx.Done():
				return
			case <-time.After(copyWait(read, time.Since(started))):
			}
			select { // the notifications of the wait are covered by this copy
			case <-notify:
			default:
			}
		}
	}
}

// unsubmitted counts the Workload objects the ledger has not seen yet (no condition mirrored
// from it), per LocalQueue ("NAMESPACE/NAME") or, for kind ClusterQueue, per ClusterQueue (by
// the LocalQueue objects' spec.clusterQueue).
func (w *StatusWriter) unsubmitted(ctx context.Context, kind string) (map[string]int64, error) {
	perQueue, err := w.bareQueues(ctx)
	if err != nil {
		return nil, err
	}
	if kind == "LocalQueue" || len(perQueue) == 0 {
		return perQueue, nil
	}
	queues := &unstructured.UnstructuredList{}
	queues.SetGroupVersionKind(schema.GroupVersionKind{Group: Group, Version: StoredVersion, Kind: "LocalQueueList"})
	if err := w.Client.List(ctx, queues, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing LocalQueue objects: %w", err)
	}
	perCQ := map[string]int64{}
	for i := range queues.Items {
		lq := &queues.Items[i]
		cq, _, _ := unstructured.NestedString(lq.Object, "spec", "clusterQueue")
		perCQ[cq] += perQueue[lq.GetNamespace()+"/"+lq.GetName()]
	}
	return perCQ, nil
}

// bareQueues counts the Workload objects without a condition per LocalQueue, less those the
// ledger holds already (Submitted): bare's, or from a list of every Workload without the index.
func (w *StatusWriter) bareQueues(ctx context.Context) (map[string]int64, error) {
	perQueue := map[string]int64{}
	w.mu.Lock()
	if w.indexed {
		for _, queue := range w.bare {
			perQueue[queue]++
		}
		w.mu.Unlock()
		return perQueue, nil
	}
	w.mu.Unlock()
	workloads := &unstructured.UnstructuredList{}
	workloads.SetGroupVersionKind(schema.GroupVersionKind{Group: Group, Version: StoredVersion, Kind: "WorkloadList"})
	// Read only: the cache's objects themselves, not a copy of every Workload on each call.
	if err := w.Client.List(ctx, workloads, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing Workload objects: %w", err)
	}
	for i := range workloads.Items {
		wl := &workloads.Items[i]
		conditions, _, _ := unstructured.NestedFieldNoCopy(wl.Object, "status", "conditions")
		queue, _, _ := unstructured.NestedString(wl.Object, "spec", "queueName")
		if list, _ := conditions.([]any); len(list) == 0 && queue != "" && wl.GetDeletionTimestamp() == nil &&
			(w.Submitted == nil || !w.Submitted(wl.GetNamespace(), wl.GetName())) {
			perQueue[wl.GetNamespace()+"/"+queue]++
		}
	}
	return perQueue, nil
}

// queuePlurals: the ledger's names of the queue kinds' read models.
var queuePlurals = map[string]string{"ClusterQueue": "clusterqueues", "LocalQueue": "localqueues"}

// ledgerItems reads the ledger's read model of a kind (`admitctl get PLURAL -o json`): its
// objects, integers as int64 (utiljson), as objects read from the API server have them.
func ledgerItems(ctx context.Context, l Reader, plural string) ([]map[string]any, error) {
	text, err := l.Get(ctx, plural, "json")
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []map[string]any `json:"items"`
	}
	if err := utiljson.Unmarshal([]byte(text), &list); err != nil {
		return nil, fmt.Errorf("the ledger's %s are not a JSON List: %w", plural, err)
	}
	return list.Items, nil
}

// ledgerItem: one item of the ledger's List, its text and its decoded object (shared by the
// copies that read the same text: never changed).
type ledgerItem struct {
	text   string
	object map[string]any
}

// currentItems reads the ledger's read model of plural as ledgerItems does, but decodes only
// the items whose text the last read of plural did not have: a ClusterQueue's status changes
// at a decision, and between two copies a few of a thousand did (decoding every item into maps
// at every copy was a fifth of the bridge's CPU in Kueue's benchmark).
func (w *StatusWriter) currentItems(ctx context.Context, plural string) ([]ledgerItem, error) {
	text, err := w.Ledger.Get(ctx, plural, "json")
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal([]byte(text), &list); err != nil {
		return nil, fmt.Errorf("the ledger's %s are not a JSON List: %w", plural, err)
	}
	w.mu.Lock()
	before := w.decoded[plural]
	w.mu.Unlock()
	now := make(map[string]map[string]any, len(list.Items))
	items := make([]ledgerItem, len(list.Items))
	for i, raw := range list.Items {
		item := ledgerItem{text: string(raw)}
		if item.object = before[item.text]; item.object == nil {
			if err := utiljson.Unmarshal(raw, &item.object); err != nil {
				return nil, fmt.Errorf("the ledger's %s: item %d is not a JSON object: %w", plural, i, err)
			}
		}
		now[item.text] = item.object
		items[i] = item
	}
	w.mu.Lock()
	if w.decoded == nil {
		w.decoded = map[string]map[string]map[string]any{}
	}
	w.decoded[plural] = now
	w.mu.Unlock()
	return items, nil
}

// settledAs: what a queue's status in the cluster was last found equal to, or written from.
type settledAs struct {
	text        string // the ledger's item
	unsubmitted int64  // the Workload objects the ledger had not seen
	recorded    uint64 // the sequence of its condition Recorded (0: none)
}

// settledKey: the key of a queue in settled and shown ("KIND/NAMESPACE/NAME").
func settledKey(kind string, item map[string]any) string { return kind + "/" + itemKey(item) }

// inputsOf: what the status written for item depends on.
func (w *StatusWriter) inputsOf(kind string, item ledgerItem, unsubmitted map[string]int64) settledAs {
	in := settledAs{text: item.text, unsubmitted: unsubmitted[queueKeyOf(kind, item.object)]}
	if sequence, ok := w.recorded.Load(settledKey(kind, item.object)); ok {
		in.recorded = sequence.(uint64)
	}
	return in
}

// unsettled: the queue's status in the cluster may differ from what the ledger's item says
// (no copy since its inputs changed).
func (w *StatusWriter) unsettled(kind string, item ledgerItem, unsubmitted map[string]int64) bool {
	last, ok := w.settled.Load(settledKey(kind, item.object))
	return !ok || last.(settledAs) != w.inputsOf(kind, item, unsubmitted)
}

// resync forgets what every queue of kind was settled as, so that the next copy compares each
// object with the ledger again (a write by someone else shows there).
func (w *StatusWriter) resync(kind string) {
	w.settled.Range(func(key, _ any) bool {
		if strings.HasPrefix(key.(string), kind+"/") {
			w.settled.Delete(key)
		}
		return true
	})
}

// queueKeyOf: the key of the ledger's queue item in unsubmitted's counts (a LocalQueue's
// "NAMESPACE/NAME", a ClusterQueue's name).
func queueKeyOf(kind string, item map[string]any) string {
	from := unstructured.Unstructured{Object: item}
	if kind == "LocalQueue" {
		return from.GetNamespace() + "/" + from.GetName()
	}
	return from.GetName()
}

// copyStatus copies the ledger's status of every object of kind that exists in the cluster. An
// object changed since the cache's copy (a conflict) is skipped and another copy asked for soon
// (Notify); any other failed write is skipped too and reported at the end, so that one object
// never holds back the others' status.
func (w *StatusWriter) copyStatus(ctx context.Context, kind string) error {
	_, err := w.copyStatusTimed(ctx, kind)
	return err
}

// copyStatusTimed is copyStatus, answering how long it read the ledger's items.
func (w *StatusWriter) copyStatusTimed(ctx context.Context, kind string) (time.Duration, error) {
	plural := queuePlurals[kind]
	started := time.Now()
	all, err := w.currentItems(ctx, plural)
	read := time.Since(started)
	if err != nil {
		return read, err
	}
	unsubmitted, err := w.unsubmitted(ctx, kind)
	if err != nil {
		return read, err
	}
	// Only the queues whose inputs changed since the status in the cluster was last found equal
	// to them (or written): a copy follows every decision, and reading and comparing each of a
	// thousand objects at each was most of a copy's work. A resync compares them all.
	var items []ledgerItem
	for _, item := range all {
		if w.unsettled(kind, item, unsubmitted) {
			items = append(items, item)
		}
	}
	// First the queues that have work they do not show yet (Kueue's runner waits while some
	// ClusterQueue shows work; a pass over a thousand queues takes the client's write budget
	// for minutes).
	busy, urgent := make([]bool, len(items)), make([]bool, len(items))
	order := make([]int, len(items))
	for i, item := range items {
		order[i] = i
		busy[i] = w.busy(kind, item.object, unsubmitted)
		urgent[i] = w.unshownWork(kind, item.object, busy[i])
	}
	sort.SliceStable(order, func(a, b int) bool { return urgent[order[a]] && !urgent[order[b]] })
	tally := w.writeRanked(ctx, kind, items, order, busy, unsubmitted)
	ctrl.Log.WithName("queue-status").V(1).Info("copied", "kind", kind, "queues", len(all),
		"changed", len(items), "written", tally.writes, "conflicts", tally.conflicts, "failures", tally.failures,
		"readSeconds", read.Seconds(), "seconds", time.Since(started).Seconds())
	if tally.conflicts > 0 {
		w.Notify()
	}
	if tally.failed != nil {
		return read, fmt.Errorf("%d of %d %s not written, the first: %w", tally.failures, len(all),
			plural, tally.failed)
	}
	return read, nil
}

// passTally: what one copy's writes did.
type passTally struct {
	writes, failures, conflicts int
	failed                      error // the first failure other than a conflict
}

// writeRanked writes the queues in order, at most writeWorkers at once, until StatusWritesPerPass
// of them were written (then asks for another copy for the rest).
func (w *StatusWriter) writeRanked(ctx context.Context, kind string, items []ledgerItem, order []int,
	busy []bool, unsubmitted map[string]int64) passTally {
	var (
		mu       sync.Mutex
		t        passTally
		inflight int
		wg       sync.WaitGroup
	)
	workers := make(chan struct{}, w.writeWorkers())
	for _, i := range order {
		mu.Lock()
		room := StatusWritesPerPass - t.writes - inflight
		mu.Unlock()
		if room <= 0 { // the writes under way may fill the bound: wait for them
			wg.Wait()
			if t.writes >= StatusWritesPerPass {
				w.Notify() // the rest at the next pass, ranked again
				break
			}
		}
		workers <- struct{}{}
		mu.Lock()
		inflight++
		mu.Unlock()
		wg.Go(func() {
			defer func() { <-workers }()
			item := items[i]
			inputs := w.inputsOf(kind, item, unsubmitted)
			result, err := w.copyOne(ctx, kind, item.object, unsubmitted)
			if err == nil {
				w.shown.Store(settledKey(kind, item.object), busy[i])
			}
			if err == nil && result != copiedNothing {
				w.settled.Store(settledKey(kind, item.object), inputs)
			}
			mu.Lock()
			defer mu.Unlock()
			inflight--
			if result == copiedWritten {
				t.writes++
			}
			switch {
			case err == nil:
			case apierrors.IsConflict(err):
				t.conflicts++
			default:
				if t.failed == nil {
					t.failed = err
				}
				t.failures++
			}
		})
	}
	wg.Wait()
	return t
}

// itemKey: "NAMESPACE/NAME" of a ledger's item.
func itemKey(item map[string]any) string {
	from := unstructured.Unstructured{Object: item}
	return from.GetNamespace() + "/" + from.GetName()
}

// busy: the ledger's item (with the Workload objects it has not seen) says the queue has work
// (pending or reserving) and is Active.
func (w *StatusWriter) busy(kind string, item map[string]any, unsubmitted map[string]int64) bool {
	pending, _, _ := unstructured.NestedInt64(item, "status", "pendingWorkloads")
	reserving, _, _ := unstructured.NestedInt64(item, "status", "reservingWorkloads")
	if pending+reserving+unsubmitted[queueKeyOf(kind, item)] == 0 {
		return false
	}
	conditions, _, _ := unstructured.NestedSlice(item, "status", "conditions")
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok && m["type"] == "Active" {
			return m["status"] == "True"
		}
	}
	return kind == "LocalQueue" // the ledger's LocalQueues carry no condition
}

// unshownWork: the queue is busy and the last status written did not say so.
func (w *StatusWriter) unshownWork(kind string, item map[string]any, busy bool) bool {
	if !busy {
		return false
	}
	shown, _ := w.shown.Load(settledKey(kind, item))
	return shown != true
}

// copied: what copyOne did.
type copied int

const (
	copiedNothing copied = iota // the ledger's item has no status, or the cluster no such object
	copiedEqual                 // the object's status was the ledger's already
	copiedWritten
)

// copyOne writes one queue's status from the ledger's item, if it differs from the object's.
func (w *StatusWriter) copyOne(ctx context.Context, kind string, item map[string]any,
	unsubmitted map[string]int64) (copied, error) {
	from := unstructured.Unstructured{Object: item}
	status, found, _ := unstructured.NestedMap(item, "status")
	if !found {
		return copiedNothing, nil
	}
	// A Workload object is pending in Kueue from its creation; the ledger counts it from
	// its submission: until then the bridge counts it (Kueue's runner stops when no queue
	// says it has work).
	queueKey := queueKeyOf(kind, item)
	if pending, _, _ := unstructured.NestedInt64(status, "pendingWorkloads"); pending < unsubmitted[queueKey] {
		status["pendingWorkloads"] = unsubmitted[queueKey]
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(schema.GroupVersionKind{Group: Group, Version: StoredVersion, Kind: kind})
	key := types.NamespacedName{Namespace: from.GetNamespace(), Name: from.GetName()}
	if err := w.Client.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return copiedNothing, nil // in the ledger, not (or no longer) in the cluster
		}
		return copiedNothing, err
	}
	current, _, _ := unstructured.NestedMap(obj.Object, "status")
	if sequence, ok := w.recorded.Load(kind + "/" + key.String()); ok {
		status = withRecordedCondition(status, current, obj.GetGeneration(), sequence.(uint64))
	} else {
		status = keepRecordedCondition(status, current)
	}
	if equality.Semantic.DeepEqual(current, status) {
		return copiedEqual, nil
	}
	before := obj.DeepCopy()
	obj.Object["status"] = status
	// A merge patch: no conflict with a write of the object meanwhile (our finalizer). As the
	// bridge's field manager, which AfsSeed tells from a foreign writer's.
	if err := w.Client.Status().Patch(ctx, obj, client.MergeFrom(before),
		client.FieldOwner(checks.BridgeFieldManager)); err != nil {
		return copiedNothing, fmt.Errorf("writing the status of %s %s: %w", kind, key, err)
	}
	return copiedWritten, nil
}

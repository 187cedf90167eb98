package jobs

import (
	"context"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"admission-ledger/bridge/internal/ledger"
)

// WatchedKinds are the ledger's events that change what the bridge does with a Job or shows
// in its Workload: each triggers a reconcile of the Job of that workload at once.
var WatchedKinds = []string{
	"workloadSubmitted", "workloadDeleted", "workloadFinished", "checkStateReported",
	"quotaReserved", "admitted", "pendingReasonChanged", "evictionStarted", "quotaReleased",
	"requeued", "rejected", "deactivated", "preempted", "drainDeadlinePassed",
	// A pod report changes the workload's status (podsReady: the PodsReady condition).
	"podsReported",
}

var watchedKinds = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range WatchedKinds {
		m[k] = true
	}
	return m
}()

// workloadPrefix: the ledger names a Job's workload "job-" + the Job's name (WorkloadName).
const workloadPrefix = "job-"

// LedgerEvents turns the ledger watch's events into reconcile requests for the Jobs they are
// about (source.Channel), so that a decision is acted on at once instead of at the next poll.
type LedgerEvents struct {
	reader client.Reader
	ch     chan event.GenericEvent
}

// NewLedgerEvents: reader lists the Jobs to resync when a watch (re)starts.
func NewLedgerEvents(reader client.Reader) *LedgerEvents {
	return &LedgerEvents{reader: reader, ch: make(chan event.GenericEvent, 1024)}
}

// Source is the controller-runtime source of these requests.
func (l *LedgerEvents) Source() source.Source {
	return source.Channel(l.ch, &handler.EnqueueRequestForObject{})
}

func (l *LedgerEvents) send(ctx context.Context, namespace, name string) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	select {
	case l.ch <- event.GenericEvent{Object: job}:
	case <-ctx.Done():
	}
}

// Handle sends a request for the Job of each workload the events are about. The workqueue
// merges repeats.
func (l *LedgerEvents) Handle(ctx context.Context, events []ledger.WatchedEvent) {
	for _, e := range events {
		if e.Name == "" || !strings.HasPrefix(e.Name, workloadPrefix) || !watchedKinds[e.Kind] {
			continue
		}
		l.send(ctx, e.Namespace, strings.TrimPrefix(e.Name, workloadPrefix))
	}
}

// ResyncAll sends a request for every Job with the queue label: what happened in the ledger
// before a watch started is read by these reconciles.
func (l *LedgerEvents) ResyncAll(ctx context.Context) {
	var list batchv1.JobList
	if err := l.reader.List(ctx, &list, client.HasLabels{QueueNameLabel}); err != nil {
		log.FromContext(ctx).Error(err, "listing Jobs to resync after the ledger watch started")
		return
	}
	for i := range list.Items {
		l.send(ctx, list.Items[i].Namespace, list.Items[i].Name)
	}
}

package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"capnproto.org/go/capnp/v3"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"admission-ledger/bridge/internal/ledgerevents"
	"admission-ledger/bridge/internal/ledgerrpc"
)

// Backoff between attempts to (re)establish a watch: doubled after each failure up to the
// maximum, back to the minimum once a watch was established.
const (
	WatchBackoffMin = 100 * time.Millisecond
	WatchBackoffMax = 5 * time.Second
)

// WatchFilter is the schema's WatchFilter: event kinds as `admitctl log` prints them
// (quotaReserved, admitted, ...), namespaces, ClusterQueues; an empty list matches everything.
type WatchFilter struct {
	Kinds, Namespaces, ClusterQueues []string
}

// WatchedEvent is what the bridge reads of an event the watch pushed: its sequence, its kind
// and, for an event about a workload, the workload's namespace and name.
type WatchedEvent struct {
	Sequence  uint64
	Kind      string
	Namespace string
	Name      string // "" when the event is about no workload
}

// Head returns the ledger's head sequence (0 when empty).
func (c *Client) Head(ctx context.Context) (uint64, error) {
	ledger, err := c.connected(ctx)
	if err != nil {
		return 0, err
	}
	defer ledger.Release()
	future, release := ledger.Head(ctx, nil)
	defer release()
	results, err := future.Struct()
	if err != nil {
		c.failed()
		return 0, fmt.Errorf("head: %w", err)
	}
	if results.HasError() {
		e, err := results.Error()
		if err != nil {
			return 0, fmt.Errorf("head: %w", err)
		}
		return 0, refusedOf(e)
	}
	head, err := results.Head()
	if err != nil {
		return 0, fmt.Errorf("head: %w", err)
	}
	return head.Sequence(), nil
}

// Watch streams the events after the ledger's head at its start that match filter to handle,
// in order, until ctx ends; it returns only then (nil) or when admitd refuses the watch for
// good (a *Refused that is not retryable: not allowed, a wrong filter). It holds a connection
// of its own. After a transport failure, or when admitd ends the stream (`end`: shutting down,
// the watcher fell behind), it dials again with backoff and resumes from the first sequence it
// has not been sent, so handle sees every matching event once, in order. established is called
// each time a watch is in place (the first time and after each resumption) with the sequence it
// starts from, and lost each time such a watch ends: in between, every matching event appended
// is pushed.
//
// handle runs on the connection's goroutine, one push at a time, and admitd waits for it
// before the next push: it must not block for long.
func (c *Client) Watch(ctx context.Context, filter WatchFilter, established func(from uint64),
	lost func(), handle func([]WatchedEvent)) error {
	logger := log.FromContext(ctx).WithName("ledger-watch")
	var next uint64 // 0: not known yet (the head is read first)
	backoff := WatchBackoffMin
	for ctx.Err() == nil {
		if next == 0 {
			head, err := c.Head(ctx)
			if err == nil {
				next = head + 1
			} else if !retryable(err) {
				return err
			} else if ctx.Err() == nil {
				logger.Info("reading the ledger's head failed; will retry", "error", err.Error(), "after", backoff)
			}
		}
		if next != 0 {
			resume, reason, err := c.watchOnce(ctx, next, filter, func(from uint64) {
				backoff = WatchBackoffMin
				if established != nil {
					established(from)
				}
			}, handle)
			if lost != nil {
				lost()
			}
			next = resume
			switch {
			case ctx.Err() != nil:
				return nil
			case err != nil && !retryable(err):
				return err
			case err != nil:
				logger.Info("the ledger watch failed; resuming", "from", next, "error", err.Error(), "after", backoff)
			default:
				logger.Info("admitd ended the ledger watch; resuming", "from", next, "reason", reason, "after", backoff)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, WatchBackoffMax)
	}
	return nil
}

func retryable(err error) bool {
	var refused *Refused
	return !errors.As(err, &refused) || refused.Retryable()
}

// sink is our EventSink: admitd calls push and end on it.
type sink struct {
	handle func([]WatchedEvent)

	mu     sync.Mutex
	next   uint64 // the first sequence not yet received
	ended  chan struct{}
	reason string
	once   sync.Once
}

func (s *sink) Push(ctx context.Context, call ledgerrpc.EventSink_push) error {
	list, err := call.Args().Events()
	if err != nil {
		return err
	}
	events := make([]WatchedEvent, 0, list.Len())
	last := uint64(0)
	for i := 0; i < list.Len(); i++ {
		stored := list.At(i)
		bytes, err := stored.Bytes()
		if err != nil {
			return err
		}
		event, err := DecodeWatched(stored.Sequence(), bytes)
		if err != nil {
			// Not ours to refuse: note it and go on (the safety resync covers it).
			log.FromContext(ctx).Error(err, "an event pushed by the ledger watch is unreadable", "sequence", stored.Sequence())
		} else {
			events = append(events, event)
		}
		last = stored.Sequence()
	}
	if len(events) > 0 {
		s.handle(events)
	}
	if last != 0 {
		s.mu.Lock()
		s.next = last + 1
		s.mu.Unlock()
	}
	return nil
}

func (s *sink) End(_ context.Context, call ledgerrpc.EventSink_end) error {
	reason, _ := call.Args().Reason()
	resume := call.Args().ResumeSequence()
	s.mu.Lock()
	if resume > s.next {
		s.next = resume
	}
	s.reason = reason
	s.mu.Unlock()
	s.once.Do(func() { close(s.ended) })
	return nil
}

func (s *sink) resume() (uint64, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next, s.reason
}

// watchOnce holds one watch from `from` on a connection of its own until the connection fails,
// admitd ends the stream or ctx ends. Returns the sequence to resume from, admitd's reason
// when it ended the stream, and the error that ended it otherwise.
func (c *Client) watchOnce(ctx context.Context, from uint64, filter WatchFilter,
	established func(uint64), handle func([]WatchedEvent)) (uint64, string, error) {
	s := &sink{handle: handle, next: from, ended: make(chan struct{})}
	conn, ledger, err := c.dial(ctx)
	if err != nil {
		return from, "", err
	}
	defer func() {
		ledger.Release()
		_ = conn.Close()
	}()
	client := ledgerrpc.EventSink_ServerToClient(s)
	future, release := ledger.Watch(ctx, func(p ledgerrpc.Ledger_watch_Params) error {
		p.SetFromSequence(from)
		f, err := p.NewFilter()
		if err != nil {
			return err
		}
		if err := setTexts(f.NewKinds, filter.Kinds); err != nil {
			return err
		}
		if err := setTexts(f.NewNamespaces, filter.Namespaces); err != nil {
			return err
		}
		if err := setTexts(f.NewClusterQueues, filter.ClusterQueues); err != nil {
			return err
		}
		return p.SetSink(client)
	})
	defer release()
	results, err := future.Struct()
	if err != nil {
		return from, "", fmt.Errorf("watch: %w", err)
	}
	if results.HasError() {
		e, err := results.Error()
		if err != nil {
			return from, "", fmt.Errorf("watch: %w", err)
		}
		return from, "", refusedOf(e)
	}
	// Dropping the handle stops the watch: hold it until we are done.
	watchHandle := results.Handle().AddRef()
	defer watchHandle.Release()
	established(from)
	select {
	case <-ctx.Done():
	case <-conn.Done():
		next, _ := s.resume()
		return next, "", errors.New("the connection to admitd was lost")
	case <-s.ended:
	}
	next, reason := s.resume()
	return next, reason, nil
}

func setTexts(newList func(int32) (capnp.TextList, error), values []string) error {
	if len(values) == 0 {
		return nil
	}
	list, err := newList(int32(len(values)))
	if err != nil {
		return err
	}
	for i, v := range values {
		if err := list.Set(i, v); err != nil {
			return err
		}
	}
	return nil
}

// DecodeWatched reads the kind and the workload of an event from its stored canonical bytes
// (one segment without a segment table, schema/event_codec.h).
func DecodeWatched(sequence uint64, stored []byte) (WatchedEvent, error) {
	// The bytes belong to the push's message, released when Push returns: ReadEvent copies them.
	event, err := ReadEvent(stored)
	if err != nil {
		return WatchedEvent{}, fmt.Errorf("event %d: %w", sequence, err)
	}
	body := event.Body()
	out := WatchedEvent{Sequence: sequence, Kind: body.Which().String()}
	namespace, name, err := workloadOf(body)
	if err != nil {
		return WatchedEvent{}, fmt.Errorf("event %d (%s): %w", sequence, out.Kind, err)
	}
	out.Namespace, out.Name = namespace, name
	return out, nil
}

type refHolder interface {
	Workload() (ledgerevents.WorkloadRef, error)
}

func refOf[T refHolder](member T, err error) (string, string, error) {
	if err != nil {
		return "", "", err
	}
	ref, err := member.Workload()
	if err != nil {
		return "", "", err
	}
	namespace, err := ref.Namespace()
	if err != nil {
		return "", "", err
	}
	name, err := ref.Name()
	return namespace, name, err
}

// workloadOf: the namespace and name of the workload an event is about ("" for none).
func workloadOf(body ledgerevents.Event_body) (string, string, error) {
	switch body.Which() {
	case ledgerevents.Event_body_Which_workloadSubmitted:
		s, err := body.WorkloadSubmitted()
		if err != nil {
			return "", "", err
		}
		w, err := s.Workload()
		if err != nil {
			return "", "", err
		}
		namespace, err := w.Namespace()
		if err != nil {
			return "", "", err
		}
		name, err := w.Name()
		return namespace, name, err
	case ledgerevents.Event_body_Which_workloadDeleted:
		return refOf(body.WorkloadDeleted())
	case ledgerevents.Event_body_Which_workloadFinished:
		return refOf(body.WorkloadFinished())
	case ledgerevents.Event_body_Which_checkStateReported:
		return refOf(body.CheckStateReported())
	case ledgerevents.Event_body_Which_budgetDecided:
		return refOf(body.BudgetDecided())
	case ledgerevents.Event_body_Which_podsReported:
		return refOf(body.PodsReported())
	case ledgerevents.Event_body_Which_quotaReserved:
		return refOf(body.QuotaReserved())
	case ledgerevents.Event_body_Which_admitted:
		return refOf(body.Admitted())
	case ledgerevents.Event_body_Which_pendingReasonChanged:
		return refOf(body.PendingReasonChanged())
	case ledgerevents.Event_body_Which_evictionStarted:
		return refOf(body.EvictionStarted())
	case ledgerevents.Event_body_Which_quotaReleased:
		return refOf(body.QuotaReleased())
	case ledgerevents.Event_body_Which_requeued:
		return refOf(body.Requeued())
	case ledgerevents.Event_body_Which_rejected:
		return refOf(body.Rejected())
	case ledgerevents.Event_body_Which_deactivated:
		return refOf(body.Deactivated())
	case ledgerevents.Event_body_Which_preempted:
		return refOf(body.Preempted())
	case ledgerevents.Event_body_Which_drainDeadlinePassed:
		return refOf(body.DrainDeadlinePassed())
	case ledgerevents.Event_body_Which_revocationRequested:
		r, err := body.RevocationRequested()
		if err != nil || r.Target().Which() != ledgerevents.RevocationRequested_target_Which_workload {
			return "", "", err
		}
		ref, err := r.Target().Workload()
		if err != nil {
			return "", "", err
		}
		namespace, err := ref.Namespace()
		if err != nil {
			return "", "", err
		}
		name, err := ref.Name()
		return namespace, name, err
	}
	return "", "", nil
}

package jobs

import (
	"context"
	"sync"
	"sync/atomic"

	"k8s.io/utils/lru"

	"admission-ledger/bridge/internal/ledger"
)

// StateReader reads workloads' states from the ledger (*ledger.Client).
type StateReader interface {
	WorkloadStates(ctx context.Context, names []string) (map[string]*ledger.WorkloadState, uint64, error)
}

// cacheEntriesMax bounds the cache: past it, the entry read least recently goes (and is read
// again on demand). The reads it saves are of workloads reconciled again and again without a
// change (polled while admitted); thousands that ended hold memory and save nothing: in Kueue's
// scalability benchmark (15,000 Workloads), a cache of every one held 24 MB of the bridge's heap.
const cacheEntriesMax = 4096

// CachedLedger is the Ledger the reconcilers are given when the ledger is watched. It keeps
// each workload's state as last read (Ledger.workloadStates, one workload per read, never the
// read model of all; a workload the ledger does not hold is not kept) and reads it again only
// when it may have changed: after the watch pushed an event about that workload, after a write
// of the bridge's own that named it in an input or a decision (its outcome carries the
// decisions: the bridge reads its own writes at once, others' as the watch brings them), and
// whenever the watch is not running (every read goes to the ledger). A write whose workloads
// are not known (an import, a decision that could not be read) holds every entry back until
// the watch has passed its last sequence; a failed or retried one drops every entry. A
// reconcile costs one map lookup, or one read of one workload, however many workloads the
// ledger holds.
type CachedLedger struct {
	Ledger
	states StateReader

	mu         sync.Mutex
	live       bool              // the watch runs: every change is seen
	generation uint64            // bumped when every entry is dropped
	entries    *lru.Cache        // cachedState by ledger.Key, at most cacheEntriesMax
	watched    uint64            // the last sequence the watch pushed
	written    uint64            // the last sequence a write of ours of unknown workloads appended
	inflight   map[string]int    // reads under way, by key
	changed    map[string]uint64 // the latest event about a key read under way
	reads      atomic.Uint64     // reads the reconcilers asked for
	served     atomic.Uint64     // of them, answered from the cache
}

type cachedState struct {
	state *ledger.WorkloadState // nil: the ledger held no workload of that name
	head  uint64                // the ledger's head it was read at
}

// NewCachedLedger wraps l, which reads the states; the cache is off until SetLive(true).
func NewCachedLedger(l interface {
	Ledger
	StateReader
}) *CachedLedger {
	return &CachedLedger{Ledger: l, states: l, entries: lru.New(cacheEntriesMax),
		inflight: map[string]int{}, changed: map[string]uint64{}}
}

// Invalidate drops every entry.
func (c *CachedLedger) Invalidate() {
	c.mu.Lock()
	c.dropAllLocked()
	c.mu.Unlock()
}

func (c *CachedLedger) dropAllLocked() {
	c.generation++
	c.entries.Clear()
}

// Changed drops what the cache holds of the workloads the watch's events are about.
func (c *CachedLedger) Changed(events []ledger.WatchedEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range events {
		c.watched = max(c.watched, e.Sequence)
		if e.Name != "" {
			c.changedLocked(ledger.Key(e.Namespace, e.Name), e.Sequence)
		}
	}
}

// changedLocked: workload key changed at sequence; its entry, if read before, goes, and a read
// of it under way is not kept.
func (c *CachedLedger) changedLocked(key string, sequence uint64) {
	if entry, ok := c.entry(key); ok && entry.head < sequence {
		c.entries.Remove(key)
	}
	if c.inflight[key] > 0 && c.changed[key] < sequence {
		c.changed[key] = sequence
	}
}

// entry: the cache's entry of key, if any.
func (c *CachedLedger) entry(key string) (cachedState, bool) {
	value, ok := c.entries.Get(key)
	if !ok {
		return cachedState{}, false
	}
	return value.(cachedState), true
}

// SetLive: true while the watch runs (from its start on, every change is pushed), false when it
// is lost (changes may go unseen: every read goes to the ledger).
func (c *CachedLedger) SetLive(live bool) {
	c.mu.Lock()
	c.live = live
	c.watched = 0
	c.dropAllLocked()
	c.mu.Unlock()
}

// Live: the watch runs, so every change of the ledger reaches the reconcilers as an event.
func (c *CachedLedger) Live() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live
}

// Reads returns how many reads of a workload the reconciles asked for, and how many of them
// the cache answered.
func (c *CachedLedger) Reads() (uint64, uint64) { return c.reads.Load(), c.served.Load() }

// WorkloadState answers from the cache when it may, else reads the one workload.
func (c *CachedLedger) WorkloadState(ctx context.Context, namespace, name string) (*ledger.WorkloadState, error) {
	key := ledger.Key(namespace, name)
	c.reads.Add(1)
	c.mu.Lock()
	// An entry is current up to its head and, as the watch drops it on any later event about it,
	// up to what the watch pushed: answered when that covers the writes of ours.
	if entry, ok := c.entry(key); ok && c.live && max(entry.head, c.watched) >= c.written {
		c.mu.Unlock()
		c.served.Add(1)
		return entry.state, nil
	}
	generation := c.generation
	c.inflight[key]++
	c.mu.Unlock()
	states, head, err := c.states.WorkloadStates(ctx, []string{key})
	c.mu.Lock()
	defer c.mu.Unlock()
	// A change pushed while the read was under way may be newer than what it read.
	fresh := c.live && c.generation == generation && c.changed[key] <= head
	if c.inflight[key]--; c.inflight[key] == 0 {
		delete(c.inflight, key)
		delete(c.changed, key)
	}
	if err != nil {
		return nil, err
	}
	// A workload the ledger does not hold is not kept: the submission that brings it names it
	// in no decision the bridge can count on.
	if fresh && states[key] != nil {
		c.entries.Add(key, cachedState{state: states[key], head: head})
	}
	return states[key], nil
}

// RecordManifest writes, then drops the entries of the workloads its decisions are about
// (wrote). The inputs of an apply (definitions) name no workload, those of a submission one the
// ledger did not hold (not kept); an import's are not known.
func (c *CachedLedger) RecordManifest(ctx context.Context, requestID, mode, manifest string) (ledger.Outcome, error) {
	outcome, err := c.Ledger.RecordManifest(ctx, requestID, mode, manifest)
	c.wrote(outcome, err, nil, mode == "apply" || mode == "submit")
	return outcome, err
}

// Record writes, then drops the entries of the workloads its inputs and decisions are about
// (wrote).
func (c *CachedLedger) Record(ctx context.Context, requestID string, inputs [][]byte) (ledger.Outcome, error) {
	outcome, err := c.Ledger.Record(ctx, requestID, inputs)
	keys, known := inputWorkloads(inputs)
	c.wrote(outcome, err, keys, known)
	return outcome, err
}

// inputWorkloads: the workloads the inputs are about, and whether every input could be read.
func inputWorkloads(inputs [][]byte) ([]string, bool) {
	keys := make([]string, 0, len(inputs))
	for _, input := range inputs {
		event, err := ledger.DecodeWatched(0, input)
		if err != nil {
			return nil, false
		}
		if event.Name != "" {
			keys = append(keys, ledger.Key(event.Namespace, event.Name))
		}
	}
	return keys, true
}

// wrote: after a write of ours, the entries of the workloads it named (inputs, when
// inputsKnown, and its decisions) are read again. A write whose workloads are not known holds
// every entry read before it back until the watch has passed its last sequence; a failed write
// (it may have been appended), a retry's answer (the original's decisions are not in it) or an
// outcome without its last sequence drops every entry.
func (c *CachedLedger) wrote(outcome ledger.Outcome, err error, inputs []string, inputsKnown bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil || outcome.Retried || outcome.Last == 0 {
		c.dropAllLocked()
		return
	}
	if !inputsKnown || !outcome.DecidedKnown {
		c.written = max(c.written, outcome.Last)
		return
	}
	for _, key := range inputs {
		c.changedLocked(key, outcome.Last)
	}
	for _, key := range outcome.Decided {
		c.changedLocked(key, outcome.Last)
	}
}

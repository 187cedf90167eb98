package jobs

import (
	"context"
	"strconv"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"

	"admission-ledger/bridge/internal/ledger"
)

// statesLedger: a ledger of workload states at a head the test moves, counting the reads of
// states; during calls (duringRead) runs inside the next read, as a watch push would arrive.
type statesLedger struct {
	workloadsLedger
	states     map[string]*ledger.WorkloadState
	head       uint64
	reads      int
	duringRead func()
}

func (l *statesLedger) WorkloadStates(_ context.Context, names []string) (map[string]*ledger.WorkloadState, uint64, error) {
	l.reads++
	if f := l.duringRead; f != nil {
		l.duringRead = nil
		f()
	}
	out := map[string]*ledger.WorkloadState{}
	for _, n := range names {
		if s, ok := l.states[n]; ok {
			out[n] = s
		}
	}
	return out, l.head, nil
}

func (l *statesLedger) set(name string, phase ledger.Phase, head uint64) {
	l.states["ml/"+name] = &ledger.WorkloadState{Namespace: "ml", Name: name, Phase: phase}
	l.head = head
}

// phaseOf reads workload ml/name through the cache; the test fails when it is not there.
func phaseOf(t *testing.T, c *CachedLedger, name string) ledger.Phase {
	t.Helper()
	s, err := c.WorkloadState(context.Background(), "ml", name)
	if err != nil || s == nil {
		t.Fatalf("%s: %v %v", name, s, err)
	}
	return s.Phase
}

// The cache answers a workload's repeated reads once the watch runs, reads it again after an
// event about it (and only it), after a write of the bridge's own, and when the watch is lost;
// a change pushed while a read is under way keeps that read out of the cache.
func TestCachedLedgerReadsAWorkloadAgainOnlyWhenItMayHaveChanged(t *testing.T) {
	ctx := context.Background()
	l := &statesLedger{states: map[string]*ledger.WorkloadState{}}
	c := NewCachedLedger(l)
	phase := func(name string) ledger.Phase { return phaseOf(t, c, name) }
	l.set("a", ledger.PhasePending, 10)
	l.set("b", ledger.PhasePending, 11)
	phase("a")
	phase("a")
	if l.reads != 2 {
		t.Fatalf("not live: %d reads, want 2 (every read goes to the ledger)", l.reads)
	}
	c.SetLive(true)
	phase("a")
	phase("b")
	phase("a")
	phase("b")
	if l.reads != 4 {
		t.Fatalf("live: %d reads, want 4", l.reads)
	}
	// An event about a, older than what was read: nothing to read again.
	c.Changed([]ledger.WatchedEvent{{Sequence: 10, Namespace: "ml", Name: "a"}})
	phase("a")
	l.set("a", ledger.PhaseAdmitted, 12)
	c.Changed([]ledger.WatchedEvent{{Sequence: 12, Namespace: "ml", Name: "a"}, {Sequence: 12}})
	if got := phase("a"); got != ledger.PhaseAdmitted || l.reads != 5 {
		t.Fatalf("after a's event: %v, %d reads", got, l.reads)
	}
	phase("b")
	if l.reads != 5 {
		t.Fatalf("b was read again after an event about a: %d reads", l.reads)
	}
	// A workload the ledger does not hold is not kept: its submission may name it in no event.
	if s, _ := c.WorkloadState(ctx, "ml", "c"); s != nil {
		t.Fatalf("c: %v", s)
	}
	l.set("c", ledger.PhasePending, 13)
	phase("c")
	if l.reads != 7 {
		t.Fatalf("absent c: %d reads, want 7", l.reads)
	}
	// A write of our own that does not say how far it appended drops every entry.
	if _, err := c.RecordManifest(ctx, "id", "submit", "x"); err != nil {
		t.Fatal(err)
	}
	phase("a")
	phase("b")
	if l.reads != 9 {
		t.Fatalf("after our write: %d reads, want 9", l.reads)
	}
	// b changes at 14 while it is being read at head 13: that read is not kept.
	c.Changed([]ledger.WatchedEvent{{Sequence: 14, Namespace: "ml", Name: "b"}})
	l.duringRead = func() {
		c.Changed([]ledger.WatchedEvent{{Sequence: 14, Namespace: "ml", Name: "b"}})
	}
	phase("b")
	phase("b")
	if l.reads != 11 {
		t.Fatalf("a read raced by a change was kept: %d reads, want 11", l.reads)
	}
	// The watch is lost: every read goes to the ledger.
	c.SetLive(false)
	phase("a")
	phase("a")
	if l.reads != 13 {
		t.Fatalf("watch lost: %d reads, want 13", l.reads)
	}
	if reads, served := c.Reads(); reads != 17 || served != 4 {
		t.Fatalf("Reads() = %d, %d", reads, served)
	}
}

// The cache holds at most cacheEntriesMax workloads: one more pushes out the one read least
// recently, not every entry, and not none.
func TestCachedLedgerKeepsTheWorkloadsReadMostRecently(t *testing.T) {
	l := &statesLedger{states: map[string]*ledger.WorkloadState{}}
	c := NewCachedLedger(l)
	c.SetLive(true)
	name := func(i int) string { return "w" + strconv.Itoa(i) }
	for i := 0; i <= cacheEntriesMax; i++ {
		l.set(name(i), ledger.PhasePending, 1)
	}
	for i := 0; i < cacheEntriesMax; i++ {
		phaseOf(t, c, name(i))
	}
	phaseOf(t, c, name(0)) // read again: the most recent now; w1 is the least recent
	phaseOf(t, c, name(cacheEntriesMax))
	before := l.reads
	phaseOf(t, c, name(0))
	phaseOf(t, c, name(2))
	if l.reads != before {
		t.Fatalf("an entry read recently was pushed out: %d reads, want %d", l.reads, before)
	}
	phaseOf(t, c, name(1))
	if l.reads != before+1 {
		t.Fatalf("the least recent entry stayed: %d reads, want %d", l.reads, before+1)
	}
}

// A reconcile that waits for a change is not repeated on a timer while the watch runs (every
// change comes as an event); without the watch it is, every PollInterval.
func TestAWaitingReconcileIsPolledOnlyWithoutTheWatch(t *testing.T) {
	c := NewCachedLedger(&statesLedger{states: map[string]*ledger.WorkloadState{}})
	if got := pollAfter(c); got.RequeueAfter != PollInterval {
		t.Fatalf("watch not running: %+v, want a requeue after %v", got, PollInterval)
	}
	c.SetLive(true)
	if got := pollAfter(c); got != (ctrl.Result{}) {
		t.Fatalf("watch running: %+v, want no requeue", got)
	}
	c.SetLive(false)
	if got := pollAfter(c); got.RequeueAfter != PollInterval {
		t.Fatalf("watch lost: %+v, want a requeue after %v", got, PollInterval)
	}
	if got := pollAfter(&statesLedger{}); got.RequeueAfter != PollInterval {
		t.Fatalf("an uncached ledger: %+v, want a requeue after %v", got, PollInterval)
	}
}

// A write of our own that says how far it appended keeps the entries: each is answered again
// once the watch has passed that sequence (an event about it before then drops it), and read
// again only until then.
func TestCachedLedgerKeepsEntriesAcrossAWriteTheWatchHasPassed(t *testing.T) {
	ctx := context.Background()
	l, c, read := cachedABC(t)
	states := l.statesLedger
	// Our write appends 11 and 12 (a decision about b).
	l.last = 12
	if _, err := c.RecordManifest(ctx, "id", "submit", "x"); err != nil {
		t.Fatal(err)
	}
	states.set("b", ledger.PhaseAdmitted, 12)
	// Before the watch passed 12 an entry read at 10 is not answered.
	read("c")
	if states.reads != 4 {
		t.Fatalf("c was answered from before our write: %d reads, want 4", states.reads)
	}
	c.Changed([]ledger.WatchedEvent{{Sequence: 11, Namespace: "ml", Name: "x"},
		{Sequence: 12, Namespace: "ml", Name: "b"}})
	read("a")
	if states.reads != 4 {
		t.Fatalf("a, untouched by our write, was read again: %d reads, want 4", states.reads)
	}
	if got := read("b"); got != ledger.PhaseAdmitted {
		t.Fatalf("b answered as %v, from before the event about it", got)
	}
	read("b")
	read("c")
	if states.reads != 5 {
		t.Fatalf("after the watch passed our write: %d reads, want 5 (b once)", states.reads)
	}
}

// namingWrites: a statesLedger whose writes append through last and say which workloads their
// decisions are about (decided; known false: not known, as an outcome that only says how far
// it appended).
type namingWrites struct {
	*statesLedger
	last    uint64
	decided []string
	known   bool
}

func (l *namingWrites) outcome() ledger.Outcome {
	return ledger.Outcome{Sequences: []uint64{l.last}, Unchanged: []bool{false}, Last: l.last,
		Decided: l.decided, DecidedKnown: l.known}
}

func (l *namingWrites) RecordManifest(context.Context, string, string, string) (ledger.Outcome, error) {
	return l.outcome(), nil
}

func (l *namingWrites) Record(context.Context, string, [][]byte) (ledger.Outcome, error) {
	return l.outcome(), nil
}

// cachedABC: a live cache over a namingWrites ledger holding pending workloads a, b and c at
// head 10, each read once (3 reads), and a reader of a workload's phase through the cache.
func cachedABC(t *testing.T) (*namingWrites, *CachedLedger, func(string) ledger.Phase) {
	l := &namingWrites{statesLedger: &statesLedger{states: map[string]*ledger.WorkloadState{}}}
	c := NewCachedLedger(l)
	c.SetLive(true)
	read := func(name string) ledger.Phase { return phaseOf(t, c, name) }
	for _, name := range []string{"a", "b", "c"} {
		l.set(name, ledger.PhasePending, 10)
		read(name)
	}
	return l, c, read
}

// A write of our own whose workloads are known (its inputs read, its decisions in its outcome)
// drops their entries at once and keeps the others, without waiting for the watch to pass it;
// an import's (its inputs not known) or one with a decision not read holds every entry back
// until the watch has passed it.
func TestCachedLedgerReadsTheWorkloadsOfItsOwnWritesAgainAtOnce(t *testing.T) {
	ctx := context.Background()
	l, c, read := cachedABC(t)
	states := l.statesLedger
	// Our report about a appends 11; its decision at 12 admits b.
	finished, err := WorkloadFinishedEvent("ml", "a", "uid-a", "")
	if err != nil {
		t.Fatal(err)
	}
	l.last, l.decided, l.known = 12, []string{"ml/b"}, true
	if _, err := c.Record(ctx, "id", [][]byte{finished}); err != nil {
		t.Fatal(err)
	}
	states.set("a", ledger.PhaseFinished, 12)
	states.set("b", ledger.PhaseAdmitted, 12)
	if got := read("a"); got != ledger.PhaseFinished {
		t.Fatalf("a, named by our input, answered as %v", got)
	}
	if got := read("b"); got != ledger.PhaseAdmitted {
		t.Fatalf("b, named by our decision, answered as %v", got)
	}
	read("c")
	read("a")
	if states.reads != 5 {
		t.Fatalf("after our write: %d reads, want 5 (a and b once, c from the cache)", states.reads)
	}
	// A definition whose decisions are all known: only those workloads again.
	l.last, l.decided = 13, []string{"ml/c"}
	if _, err := c.RecordManifest(ctx, "id2", "apply", "x"); err != nil {
		t.Fatal(err)
	}
	read("a")
	read("c")
	if states.reads != 6 {
		t.Fatalf("after our definition: %d reads, want 6 (c once)", states.reads)
	}
	// An import: its workloads are not known, so until the watch passes 14 nothing is answered.
	l.last, l.decided = 14, nil
	if _, err := c.RecordManifest(ctx, "id3", "import", "x"); err != nil {
		t.Fatal(err)
	}
	read("a")
	c.Changed([]ledger.WatchedEvent{{Sequence: 14}})
	read("a")
	read("b")
	if states.reads != 7 {
		t.Fatalf("around an import: %d reads, want 7 (a once, before the watch passed it)", states.reads)
	}
	// A decision that could not be read: the same.
	l.last, l.known = 15, false
	if _, err := c.Record(ctx, "id4", [][]byte{finished}); err != nil {
		t.Fatal(err)
	}
	read("c")
	if states.reads != 8 {
		t.Fatalf("after a write with an unread decision: %d reads, want 8", states.reads)
	}
}

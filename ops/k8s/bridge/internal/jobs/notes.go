package jobs

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
)

// notePacer spends the notes' budget (noteWrites) by reservation: a note over the budget gets
// the next free slot of the budget, and its reconcile is requeued for that instant, when the
// note is written. A backlog of N notes costs about N reconciles, one at each slot; asking the
// budget again every few seconds instead cost N/2 reconciles a second, each with a read of the
// ledger (a third of the bridge's CPU, and most of admitd's, with thousands of Workloads pending
// in Kueue's benchmark).
type notePacer struct {
	mu    sync.Mutex
	slots map[types.NamespacedName]noteSlot
	// taken counts reservations since the last sweep of slots long past (objects gone before
	// their slot leave theirs behind).
	taken int
}

type noteSlot struct {
	at          time.Time
	reservation *rate.Reservation
}

// noteSlotsSweepEvery: reservations between two sweeps of the slots left a minute behind.
const noteSlotsSweepEvery = 1024

var pacedNotes = &notePacer{slots: map[types.NamespacedName]noteSlot{}}

// take: the wait before key's note may be written (0: now). The first call for a note over the
// budget reserves the budget's next free slot; later calls before it answer the time left and
// reserve nothing; a call at or after it takes it. A budget that never allows a write (its
// burst is 0) answers NoteRetry each time.
func (p *notePacer) take(limiter *rate.Limiter, key types.NamespacedName, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if slot, ok := p.slots[key]; ok {
		if now.Before(slot.at) {
			return slot.at.Sub(now)
		}
		delete(p.slots, key)
		return 0
	}
	r := limiter.ReserveN(now, 1)
	if !r.OK() {
		return NoteRetry
	}
	wait := r.DelayFrom(now)
	if wait <= 0 {
		return 0
	}
	p.slots[key] = noteSlot{at: now.Add(wait), reservation: r}
	if p.taken++; p.taken >= noteSlotsSweepEvery {
		p.taken = 0
		for k, slot := range p.slots {
			if slot.at.Before(now.Add(-time.Minute)) {
				delete(p.slots, k)
			}
		}
	}
	return wait
}

// drop gives key's slot back, if it has one: its note is not to be written (the workload's
// status changed to something other than a note, or is shown already).
func (p *notePacer) drop(key types.NamespacedName, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if slot, ok := p.slots[key]; ok {
		slot.reservation.CancelAt(now)
		delete(p.slots, key)
	}
}

// waiting: key's note holds a slot (its reconcile comes then, and reads what is newest then).
func (p *notePacer) waiting(key types.NamespacedName) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.slots[key]
	return ok
}

// pending: the notes holding a slot (for tests).
func (p *notePacer) pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.slots)
}

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
//
// A note is written at its slot only while the API client has room to spare for it (room):
// the client's rate limit on Workload writes (Kueue's 50 a second) is what bounds admissions
// under load, and a note written then would delay an admission. Without room the note takes
// the next free slot, at the end of the line: however many wait, notes cost the budget's rate
// of reconciles.
type notePacer struct {
	mu    sync.Mutex
	slots map[types.NamespacedName]noteSlot
	// room (nil: always): whether the API client has room for a note now, taking it if so.
	room func(now time.Time) bool
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

var pacedNotes = &notePacer{slots: map[types.NamespacedName]noteSlot{}, room: workloadWrites.noteRoom}

// apiRoom mirrors the API client's rate limit on Workload writes (a token bucket of the same
// rate and burst, SetWorkloadWriteRate): the ledger's decisions spend its tokens as their
// writes go out (they are never held back: the client's own limit paces them), and a note is
// written only while at least half the burst is left, that is while decisions leave the
// client room to spare.
type apiRoom struct {
	mu      sync.Mutex
	limiter *rate.Limiter
}

// workloadWrites: the bridge's Workload status writes, as the client's limit sees them.
var workloadWrites = &apiRoom{limiter: rate.NewLimiter(50, 100)}

// SetWorkloadWriteRate: the API client's rate limit (--kube-api-qps, --kube-api-burst).
func SetWorkloadWriteRate(qps float64, burst int) {
	workloadWrites.mu.Lock()
	defer workloadWrites.mu.Unlock()
	workloadWrites.limiter = rate.NewLimiter(rate.Limit(qps), burst)
}

func (a *apiRoom) current() *rate.Limiter {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.limiter
}

// spend: a decision's write goes out (a token if there is one; the client waits otherwise).
func (a *apiRoom) spend(now time.Time) {
	a.current().AllowN(now, 1)
}

// noteRoom: at least half the burst is left; if so the note's write takes a token.
func (a *apiRoom) noteRoom(now time.Time) bool {
	l := a.current()
	if l.TokensAt(now) < float64(l.Burst())/2 {
		return false
	}
	return l.AllowN(now, 1)
}

// take: the wait before key's note may be written (0: now). The first call for a note over the
// budget reserves the budget's next free slot; later calls before it answer the time left and
// reserve nothing; a call at or after it takes it, when the API client has room (otherwise
// the note takes the next free slot). A budget that never allows a write (its burst is 0)
// answers NoteRetry each time.
func (p *notePacer) take(limiter *rate.Limiter, key types.NamespacedName, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if slot, ok := p.slots[key]; ok {
		if now.Before(slot.at) {
			return slot.at.Sub(now)
		}
		delete(p.slots, key)
		if p.roomAt(now) {
			return 0
		}
	}
	r := limiter.ReserveN(now, 1)
	if !r.OK() {
		return NoteRetry
	}
	wait := r.DelayFrom(now)
	if wait <= 0 {
		if p.roomAt(now) {
			return 0
		}
		// A slot of the budget, not of the client: the next one is a token's time ahead (a
		// budget that never refills has none: NoteRetry).
		wait = NoteRetry
		if limit := limiter.Limit(); limit > 0 && limit != rate.Inf {
			wait = time.Duration(float64(time.Second) / float64(limit))
		}
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

func (p *notePacer) roomAt(now time.Time) bool {
	return p.room == nil || p.room(now)
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

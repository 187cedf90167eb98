package jobs

import (
	"fmt"
	"testing"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
)

// A backlog of notes over the budget gets one slot each, spaced by the budget's rate, in the
// order they asked; asking again before the slot answers the time left and reserves nothing
// (the reconcile is not repeated at a fixed interval), and the note is written at its slot.
func TestNotesOverTheBudgetGetOneSlotEach(t *testing.T) {
	p := &notePacer{slots: map[types.NamespacedName]noteSlot{}}
	limiter := rate.NewLimiter(10, 2)
	now := time.Unix(1000, 0)
	key := func(i int) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: fmt.Sprint(i)} }
	waits := make([]time.Duration, 100)
	for i := range waits {
		waits[i] = p.take(limiter, key(i), now)
	}
	if waits[0] != 0 || waits[1] != 0 {
		t.Fatalf("the burst's two notes wait %v and %v, want 0", waits[0], waits[1])
	}
	for i := 2; i < len(waits); i++ {
		want := time.Duration(i-1) * 100 * time.Millisecond
		if d := waits[i] - want; d < -time.Millisecond || d > time.Millisecond {
			t.Fatalf("note %d waits %v, want its own slot %v", i, waits[i], want)
		}
	}
	if got := p.pending(); got != 98 {
		t.Fatalf("%d slots held, want 98", got)
	}
	// Asked again half a second on: the time left, no new reservation.
	later := now.Add(500 * time.Millisecond)
	if got := p.take(limiter, key(50), later); got != waits[50]-500*time.Millisecond {
		t.Fatalf("note 50 asked again: waits %v, want %v", got, waits[50]-500*time.Millisecond)
	}
	if got := p.pending(); got != 98 {
		t.Fatalf("asking again reserved: %d slots, want 98", got)
	}
	// At its slot the note is written, and its slot is gone.
	if got := p.take(limiter, key(50), now.Add(waits[50])); got != 0 || p.pending() != 97 {
		t.Fatalf("note 50 at its slot: waits %v, %d slots left", got, p.pending())
	}
}

// A note that is not to be written any more gives its slot back: the next note over the budget
// gets an earlier slot than it would have.
func TestADroppedNoteGivesItsSlotBack(t *testing.T) {
	p := &notePacer{slots: map[types.NamespacedName]noteSlot{}}
	limiter := rate.NewLimiter(10, 1)
	now := time.Unix(1000, 0)
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	b := types.NamespacedName{Namespace: "ns", Name: "b"}
	c := types.NamespacedName{Namespace: "ns", Name: "c"}
	if p.take(limiter, a, now) != 0 {
		t.Fatal("the first note waits")
	}
	if got := p.take(limiter, b, now); got != 100*time.Millisecond {
		t.Fatalf("b waits %v, want 100ms", got)
	}
	p.drop(b, now)
	if got := p.take(limiter, c, now); got != 100*time.Millisecond {
		t.Fatalf("c after b's slot was given back waits %v, want b's 100ms", got)
	}
	if p.pending() != 1 {
		t.Fatalf("%d slots held, want 1 (c's)", p.pending())
	}
}

// A budget that allows no write at all defers every note by NoteRetry and holds no slot.
func TestABudgetOfNothingDefersByNoteRetry(t *testing.T) {
	p := &notePacer{slots: map[types.NamespacedName]noteSlot{}}
	key := types.NamespacedName{Namespace: "ns", Name: "a"}
	if got := p.take(rate.NewLimiter(0, 0), key, time.Unix(1000, 0)); got != NoteRetry || p.pending() != 0 {
		t.Fatalf("waits %v with %d slots, want NoteRetry and none", got, p.pending())
	}
}

// A note due at its slot waits while the API client has no room to spare (decisions' writes
// use it): it takes the next free slot of the budget, at the end of the line, and is written
// at a slot where the client has room.
func TestANoteWaitsForRoomInTheAPIClient(t *testing.T) {
	room := false
	p := &notePacer{slots: map[types.NamespacedName]noteSlot{}, room: func(time.Time) bool { return room }}
	limiter := rate.NewLimiter(10, 1)
	now := time.Unix(1000, 0)
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	b := types.NamespacedName{Namespace: "ns", Name: "b"}
	if got := p.take(limiter, a, now); got != 100*time.Millisecond {
		t.Fatalf("a note within the budget but without room waits %v, want the next slot, 100ms", got)
	}
	if got := p.take(limiter, b, now); got != 100*time.Millisecond {
		t.Fatalf("b waits %v, want the budget's next slot, 100ms", got)
	}
	// a's slot comes, still no room: the next free slot of the budget, after b's (200ms).
	at := now.Add(100 * time.Millisecond)
	if got := p.take(limiter, a, at); got != 100*time.Millisecond {
		t.Fatalf("a at its slot without room waits %v, want 100ms (the slot after b's)", got)
	}
	room = true
	if got := p.take(limiter, b, now.Add(200*time.Millisecond)); got != 0 {
		t.Fatalf("b at its slot with room waits %v", got)
	}
	if p.pending() != 1 {
		t.Fatalf("%d slots held, want 1 (a's)", p.pending())
	}
}

// The room a note needs is half the client's burst: decisions spending the client's tokens
// leave none for notes until the bucket refills.
func TestNotesNeedHalfTheClientsBurst(t *testing.T) {
	a := &apiRoom{limiter: rate.NewLimiter(50, 100)}
	now := time.Unix(1000, 0)
	a.limiter.AllowN(now, 0) // the bucket is full at now
	for i := 0; i < 50; i++ {
		a.spend(now)
	}
	if !a.noteRoom(now) {
		t.Fatal("half the burst left and no room for a note")
	}
	a.spend(now)
	if a.noteRoom(now) {
		t.Fatal("less than half the burst left and room for a note")
	}
	if !a.noteRoom(now.Add(time.Second)) {
		t.Fatal("no room for a note after a second of refill")
	}
}

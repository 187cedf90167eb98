package jobs

import (
	"context"
	"sync"
	"sync/atomic"

	"admission-ledger/bridge/internal/ledger"
)

// CachedLedger is the Ledger the reconciler is given when the ledger is watched: the reconciles
// that run while the ledger has not changed share one read of its workloads (`get workloads -o
// json`, the whole read model) instead of one read each. A read is reused only while the watch
// runs and no event was pushed, and no write of the bridge's own answered, since it was made
// (Invalidate; each write invalidates it too). Everything else goes to the ledger as it is.
type CachedLedger struct {
	Ledger

	mu         sync.Mutex
	generation uint64 // bumped by each invalidation
	live       bool   // the watch runs: invalidations are seen
	text       string
	valid      bool

	reads, served atomic.Uint64 // workloads reads made, and answered from the cache
}

// NewCachedLedger wraps l; the cache is off until SetLive(true).
func NewCachedLedger(l Ledger) *CachedLedger { return &CachedLedger{Ledger: l} }

// Invalidate drops the cached read (the ledger changed).
func (c *CachedLedger) Invalidate() {
	c.mu.Lock()
	c.generation++
	c.valid = false
	c.mu.Unlock()
}

// SetLive: true while the watch runs (from its start on, every change is pushed), false when it
// is lost (changes may go unseen: every read goes to the ledger).
func (c *CachedLedger) SetLive(live bool) {
	c.mu.Lock()
	c.live = live
	c.generation++
	c.valid = false
	c.mu.Unlock()
}

// Reads returns how many reads of the workloads the reconciles asked for, and how many of them
// the cache answered.
func (c *CachedLedger) Reads() (uint64, uint64) { return c.reads.Load(), c.served.Load() }

// Get answers `get workloads -o json` from the cache when it may.
func (c *CachedLedger) Get(ctx context.Context, kind, format string) (string, error) {
	if kind != "workloads" || format != "json" {
		return c.Ledger.Get(ctx, kind, format)
	}
	c.reads.Add(1)
	c.mu.Lock()
	if c.live && c.valid {
		text := c.text
		c.mu.Unlock()
		c.served.Add(1)
		return text, nil
	}
	generation := c.generation
	c.mu.Unlock()
	text, err := c.Ledger.Get(ctx, kind, format)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	if c.live && c.generation == generation {
		c.text, c.valid = text, true
	}
	c.mu.Unlock()
	return text, nil
}

// RecordManifest writes, then invalidates the cache.
func (c *CachedLedger) RecordManifest(ctx context.Context, requestID, mode, manifest string) (ledger.Outcome, error) {
	defer c.Invalidate()
	return c.Ledger.RecordManifest(ctx, requestID, mode, manifest)
}

// Record writes, then invalidates the cache.
func (c *CachedLedger) Record(ctx context.Context, requestID string, inputs [][]byte) (ledger.Outcome, error) {
	defer c.Invalidate()
	return c.Ledger.Record(ctx, requestID, inputs)
}

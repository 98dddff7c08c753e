package daemon

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
)

// startupGCPercent is the garbage collector's target while the initial
// lists stream in. Each object arrives whole (a 2 KB last-applied
// annotation is common) and is garbage once stripped: the default target
// of 100 lets that garbage grow the heap to twice what the index keeps, and
// a memory limit must then allow a peak that the process never needs again.
// At 50 the peak at 1,000,000 objects was still 388 MiB against a steady
// 248 MiB (bench/results-million.md); at 25 the heap stays within a quarter
// of what it keeps, for more collections of a heap that is still small
// while the API server, not the daemon, sets the pace of the lists.
const startupGCPercent = 25

// startupGCLimit ends the lower target even when a kind never syncs (its
// CRD is served by nobody): the start-up is over by then either way.
const startupGCLimit = 2 * time.Minute

// steadyHeadroom is the garbage the heap may hold between two collections
// once the start-up is over, unless that is less than startupGCPercent of
// the live heap. The process's own target (100 by default) lets the heap
// grow to twice what it keeps: nothing for a daemon with no objects, whose
// live heap is a few MiB, but at a million objects the index alone is some
// 190 MiB, and the first decisions over it would grow the heap towards
// 380 MiB that a memory limit must then allow. A decision's garbage grows
// far less than the index does with the objects, so a bounded
// headroom costs collections only where the live heap is large: each
// collection marks the live heap, and at 25 % there are at most four times
// as many as at the default.
const steadyHeadroom = 8 << 20

// steadyGCPercent is the collector's target for a live heap of live bytes,
// given the process's own target base: base while the live heap is small,
// then whatever keeps the headroom at steadyHeadroom, and never below
// startupGCPercent. A base at or below that, or off (negative), is kept.
func steadyGCPercent(base int, live uint64) int {
	if base <= startupGCPercent || live <= steadyHeadroom {
		return base
	}
	p := uint64(base) * steadyHeadroom / live
	return max(int(p), startupGCPercent) //nolint:gosec // p < base
}

// gcPacer sets the collector's target after every collection, from the
// live heap that collection found (see steadyGCPercent). A collection is
// seen by the finalizer of an object allocated for it, which the
// collector runs once it has found the object unreachable: after the
// collection that follows its allocation.
type gcPacer struct {
	base int
	// set replaces debug.SetGCPercent in tests; live reads the live heap.
	set  func(int) int
	live func() uint64

	mu      sync.Mutex
	stopped bool
	last    int
}

// gcSentinel carries a pointer, so that it is not one of the tiny
// allocations that share a block, whose finalizers may wait for the
// block's other objects.
type gcSentinel struct{ p *gcPacer }

// start sets the target for the live heap now and paces it from then on.
func (p *gcPacer) start() {
	if p.adjust() {
		p.arm()
	}
}

func (p *gcPacer) arm() { runtime.SetFinalizer(&gcSentinel{p: p}, (*gcSentinel).collected) }

func (s *gcSentinel) collected() {
	if s.p.adjust() {
		s.p.arm()
	}
}

// adjust sets the target for the live heap now, if it changed, and
// reports whether the pacing goes on.
func (p *gcPacer) adjust() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	live := p.live()
	if t := steadyGCPercent(p.base, live); t != p.last {
		p.set(t)
		p.last = t
		logrus.WithFields(logrus.Fields{"percent": t, "liveHeapBytes": live}).Debug("garbage collector target")
	}
	return true
}

// stop ends the pacing and sets the process's own target back.
func (p *gcPacer) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stopped {
		p.stopped = true
		p.set(p.base)
	}
}

// liveHeap is the heap the latest collection marked live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// lowerGC sets the garbage collector's target to startupGCPercent, unless
// it is already lower or collection is off (GOGC). It returns two
// functions: restore, which ends the start-up and paces the collector
// from then on (gcPacer), and stop, which sets the process's own target
// back for good. Each may be called any number of times; only the first
// call of each acts, and restore does nothing after stop.
func lowerGC() (restore, stop func()) {
	prev := debug.SetGCPercent(startupGCPercent)
	if prev < 0 || prev <= startupGCPercent {
		debug.SetGCPercent(prev)
		return func() {}, func() {}
	}
	p := &gcPacer{base: prev, set: debug.SetGCPercent, live: liveHeap, last: startupGCPercent}
	var once sync.Once
	return func() { once.Do(p.start) }, p.stop
}

// startupGC holds the collector at startupGCPercent while the mapped
// objects' initial state comes in, and paces it from the live heap once
// every kind has synced or startupGCLimit has passed, whichever is first.
// It is the daemon's, not the caches': the target is the whole process's.
type startupGC struct {
	synced func() bool
	// lower is lowerGC, and after runs f once d has passed
	// (time.AfterFunc): both replaced in tests, since the target is the
	// whole test binary's.
	lower   func() (restore, stop func())
	after   func(d time.Duration, f func())
	restore func()
	over    atomic.Bool
}

func newStartupGC(synced func() bool) *startupGC {
	return &startupGC{synced: synced, restore: func() {}, lower: lowerGC,
		after: func(d time.Duration, f func()) { time.AfterFunc(d, f) }}
}

// start lowers the target until the start-up is over, and sets the
// process's own back for good when ctx ends. Call it before the caches
// start, so that no change comes before.
func (g *startupGC) start(ctx context.Context) {
	restore, stop := g.lower()
	g.restore = restore
	context.AfterFunc(ctx, stop)
	g.after(startupGCLimit, g.end)
}

// changed ends the start-up once every kind has synced; the caches call it
// on every change, and once the start-up is over it asks nothing.
func (g *startupGC) changed() {
	if g.over.Load() || !g.synced() {
		return
	}
	g.end()
}

// end ends the start-up's target, at once, and marks it over.
func (g *startupGC) end() {
	if g.over.CompareAndSwap(false, true) {
		g.restore()
	}
}

package mapped

import (
	"runtime/debug"
	"sync"
	"time"
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

// lowerGC sets the garbage collector's target to startupGCPercent, unless
// it is already lower or collection is off (GOGC), and returns the
// function that sets it back; that function may be called any number of
// times, and only the first call acts.
func lowerGC() (restore func()) {
	prev := debug.SetGCPercent(startupGCPercent)
	if prev < 0 || prev <= startupGCPercent {
		debug.SetGCPercent(prev)
		return func() {}
	}
	var once sync.Once
	return func() { once.Do(func() { debug.SetGCPercent(prev) }) }
}

// endStartupGC sets the collector's target back once every kind has
// synced; it is called on every change until then.
func (t *Tracker) endStartupGC() {
	if t.gcRestored.Load() || !t.Synced() {
		return
	}
	t.stopStartupGC()
}

// stopStartupGC sets the collector's target back, at once, and marks it
// done, so that no later change asks whether every kind has synced.
func (t *Tracker) stopStartupGC() {
	if t.gcRestored.CompareAndSwap(false, true) {
		t.restoreGC()
	}
}

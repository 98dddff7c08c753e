package daemon

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLowerGCDuringStartup(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)

	restore, stop := lowerGC()
	assert.Equal(t, startupGCPercent, debug.SetGCPercent(startupGCPercent), "the start-up target is in force")
	stop()
	assert.Equal(t, 100, debug.SetGCPercent(100), "stop sets the process's own target back")
	restore()
	assert.Equal(t, 100, debug.SetGCPercent(100), "restore after stop does nothing")

	debug.SetGCPercent(20)
	restore, stop = lowerGC()
	assert.Equal(t, 20, debug.SetGCPercent(20), "a lower GOGC is left as it is")
	restore()
	stop()
	assert.Equal(t, 20, debug.SetGCPercent(20))

	debug.SetGCPercent(-1)
	lowerGC()
	assert.Equal(t, -1, debug.SetGCPercent(-1), "GOGC=off is left as it is")
}

func TestSteadyGCPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		base int
		live uint64
		want int
	}{
		{100, 0, 100},
		{100, 5 * mib, 100},         // no objects: the process's own target
		{100, 8 * mib, 100},         // the headroom is the base's own
		{100, 16 * mib, 50},         // 8 MiB of headroom
		{100, 25 * mib, 32},         // about 100,000 objects
		{100, 190 * mib, 25},        // a million: never below the start-up's target
		{200, 32 * mib, 50},         // GOGC=200 doubles what each step allows
		{25, 190 * mib, 25},         // a target already that low is kept
		{10, 190 * mib, 10},         //
		{-1, 190 * mib, -1},         // GOGC=off
		{1 << 30, 1 << 40, 1 << 13}, // no overflow at absurd values
	} {
		assert.Equal(t, c.want, steadyGCPercent(c.base, c.live), "base %d, live %d MiB", c.base, c.live/mib)
	}
}

// The pacer follows the live heap after each collection and hands the
// process's own target back when stopped.
func TestGCPacerFollowsTheLiveHeap(t *testing.T) {
	set := make(chan int, 16)
	var live uint64 = 4 << 20
	liveCh := make(chan uint64, 1)
	p := &gcPacer{base: 100, last: startupGCPercent,
		set: func(v int) int { set <- v; return 0 },
		live: func() uint64 {
			select {
			case live = <-liveCh:
			default:
			}
			return live
		}}
	p.start()
	require.Equal(t, 100, <-set, "a small heap gets the process's own target at once")

	liveCh <- 64 << 20
	got := waitForSet(t, set)
	assert.Equal(t, 25, got, "a collection that found a large live heap lowers the target")

	p.stop()
	assert.Equal(t, 100, waitForSet(t, set), "stop hands the target back")
	runtime.GC()
	runtime.GC()
	select {
	case v := <-set:
		t.Fatalf("the target was set to %d after stop", v)
	case <-time.After(100 * time.Millisecond):
	}
}

// waitForSet collects garbage until the pacer sets a target; the
// finalizer that runs it waits for a collection.
func waitForSet(t *testing.T, set <-chan int) int {
	t.Helper()
	for range 100 {
		runtime.GC()
		select {
		case v := <-set:
			return v
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatal("the pacer set no target")
	return 0
}

// fakeStartupGC is a startupGC that counts its restores and leaves the
// process's target alone; limit is what its time limit would call.
func fakeStartupGC(synced func() bool) (g *startupGC, restores *int, limit *func()) {
	restores, limit = new(int), new(func())
	g = newStartupGC(synced)
	g.lower = func() (func(), func()) { return func() { *restores++ }, func() {} }
	g.after = func(_ time.Duration, f func()) { *limit = f }
	return g, restores, limit
}

// The time limit ends the lower target for good: a kind that never syncs
// must not leave every later change asking whether all kinds have synced.
func TestStartupGCTimeLimitEndsIt(t *testing.T) {
	asked := 0
	g, restores, limit := fakeStartupGC(func() bool { asked++; return false })
	g.start(t.Context())
	g.changed()
	assert.Zero(t, *restores, "an unsynced kind keeps the start-up target")
	require.NotNil(t, *limit, "the limit is set at start")

	(*limit)()
	assert.Equal(t, 1, *restores)
	g.changed()
	(*limit)()
	assert.Equal(t, 1, *restores, "the target is set back once")
	assert.Equal(t, 1, asked, "once over, no change asks whether every kind has synced")
}

// Once every kind has synced, the next change ends the start-up.
func TestStartupGCEndsWhenSynced(t *testing.T) {
	synced := false
	g, restores, _ := fakeStartupGC(func() bool { return synced })
	g.start(t.Context())
	g.changed()
	assert.Zero(t, *restores)
	synced = true
	g.changed()
	g.changed()
	assert.Equal(t, 1, *restores)
}

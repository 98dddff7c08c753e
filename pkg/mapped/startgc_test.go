package mapped

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLowerGCDuringStartup(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)

	restore := lowerGC()
	assert.Equal(t, startupGCPercent, debug.SetGCPercent(startupGCPercent), "the start-up target is in force")
	restore()
	assert.Equal(t, 100, debug.SetGCPercent(100), "restore sets the target back")
	debug.SetGCPercent(70)
	restore()
	assert.Equal(t, 70, debug.SetGCPercent(70), "only the first restore acts")

	debug.SetGCPercent(20)
	restore = lowerGC()
	assert.Equal(t, 20, debug.SetGCPercent(20), "a lower GOGC is left as it is")
	restore()
	assert.Equal(t, 20, debug.SetGCPercent(20))

	debug.SetGCPercent(-1)
	lowerGC()
	assert.Equal(t, -1, debug.SetGCPercent(-1), "GOGC=off is left as it is")
}

// The time limit ends the lower target for good: a kind that never syncs
// must not leave every later change asking whether all kinds have synced.
func TestStartupGCTimeLimitEndsIt(t *testing.T) {
	restores := 0
	tr := &Tracker{restoreGC: func() { restores++ }, kinds: []*kind{{pending: true}}}
	tr.endStartupGC()
	assert.Zero(t, restores, "an unsynced kind keeps the start-up target")

	tr.stopStartupGC() // what the timer calls
	assert.Equal(t, 1, restores)
	assert.True(t, tr.gcRestored.Load(), "the limit marks the start-up as over")
	tr.endStartupGC()
	tr.stopStartupGC()
	assert.Equal(t, 1, restores, "the target is set back once")
}

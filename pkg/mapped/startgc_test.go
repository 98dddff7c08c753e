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

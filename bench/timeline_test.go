package main

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTimelineOfReadsLogAndAudit(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	log := filepath.Join(dir, "daemon.log")
	require.NoError(t, os.WriteFile(log, []byte(
		`{"level":"debug","msg":"reconcile timeline","start":"2026-12-02T05:59:59.900000000Z","steps":"events=+1.000"}`+"\n"+
			`not json`+"\n"+
			`{"level":"debug","msg":"reconcile timeline","start":"2026-12-02T06:00:00.004000000Z","steps":"parsed=+0.100 decided=+2.000 first-write=+2.100 last-answer=+200.000 done=+200.200"}`+"\n"+
			`{"level":"debug","msg":"reconcile timeline","start":"2026-12-02T06:00:00.220000000Z","steps":"events=+1.500 reported=+3.000"}`+"\n"+
			`{"level":"debug","msg":"reconcile timeline","start":"2026-12-02T06:00:09.000000000Z","steps":"events=+1.000"}`+"\n"), 0o600))
	audit := filepath.Join(dir, "audit.log")
	ev := func(user, verb, resource, received, answered string) string {
		return `{"auditID":"` + received + resource + `","stage":"ResponseComplete","verb":"` + verb + `","user":{"username":"` + user +
			`"},"objectRef":{"resource":"` + resource + `"},"requestReceivedTimestamp":"2026-12-02T06:00:00.` + received +
			`Z","stageTimestamp":"2026-12-02T06:00:00.` + answered + `Z"}` + "\n"
	}
	require.NoError(t, os.WriteFile(audit, []byte(
		ev("daemon", "create", "deployments", "008000", "030000")+
			ev("someone", "create", "deployments", "001000", "300000")+
			ev("daemon", "create", "deployments", "009000", "205000")+
			ev("daemon", "create", "events", "222000", "223000")+
			ev("daemon", "update", "configmaps", "224000", "226000")), 0o600))

	last := t0.Add(210 * time.Millisecond)
	run, reconciles, err := timelineOf(log, audit, "daemon", t0, last, last.Add(time.Second))
	require.NoError(t, err)
	ms := func(f float64) time.Duration { return time.Duration(math.Round(f * float64(time.Millisecond))) }
	assert.Equal(t, timelineRun{
		"reconcile": ms(4), "parsed": ms(4.1), "decided": ms(6), "first-write": ms(6.1), "last-answer": ms(204), "done": ms(204.2),
		"events": ms(221.5), "audit-first": ms(8), "audit-last": ms(205), "audit-events": ms(222), "audit-status": ms(224),
		"watch-last": ms(210),
	}, run, "the first reconcile after the patch is the change's; a later one's Events count, one before the patch does not")
	assert.Equal(t, 1, reconciles, "one reconcile started before the last watch event")
}

// The ideal controller's log holds its collections' trace too, which the
// runtime writes in pieces: a timeline line can follow one.
func TestTimelineLineAfterATracePiece(t *testing.T) {
	l, ok := timelineLineOf([]byte(`gc 7 @12.345s 0%: {"msg":"reconcile timeline","start":"2026-12-02T06:00:00Z","steps":"first-write=+1.000"}`))
	require.True(t, ok)
	assert.Equal(t, timelineLine{Msg: "reconcile timeline", Start: "2026-12-02T06:00:00Z", Steps: "first-write=+1.000"}, l)
	_, ok = timelineLineOf([]byte(`gc 7 @12.345s 0%: 0.1+1+0.01 ms clock`))
	assert.False(t, ok)
	_, ok = timelineLineOf([]byte(`level=info msg="no {"reconcile timeline"} here"`))
	assert.False(t, ok, "a line that merely mentions the message")
}

func TestParseTimelineRejectsBadSteps(t *testing.T) {
	_, err := parseTimeline(timelineLine{Start: "2026-12-02T06:00:00Z", Steps: "parsed+1"})
	require.Error(t, err)
	_, err = parseTimeline(timelineLine{Start: "yesterday", Steps: ""})
	assert.Error(t, err)
}

func TestCPUTimeCountsEveryThread(t *testing.T) {
	before, err := cpuTime(os.Getpid())
	require.NoError(t, err)
	// Busy work on more than one goroutine, so more than one thread runs.
	done := make(chan struct{})
	for range 2 {
		go func() {
			defer func() { done <- struct{}{} }()
			x := 0
			for i := range 20_000_000 {
				x += i % 7
			}
			_ = x
		}()
	}
	<-done
	<-done
	after, err := cpuTime(os.Getpid())
	require.NoError(t, err)
	assert.Greater(t, after, before, "the busy goroutines' CPU time is counted")
	_, err = cpuTime(-1)
	assert.Error(t, err, "a process that does not exist has no CPU time")
}

package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gcHelperEnv makes the test binary, started again, a process that forces
// four collections and exits (TestCollectionsOfATracedProcess). The
// runtime writes a collection's trace line as its cycle ends
// (gcMarkTermination in runtime/mgc.go), which may be after runtime.GC has
// returned but is always before the next cycle starts: the last line may
// be lost to the exit, the three before it are not.
const gcHelperEnv = "SHARDKEEPER_BENCH_GC_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(gcHelperEnv) != "" {
		for range 4 {
			runtime.GC()
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestGCTraceEnv(t *testing.T) {
	assert.Equal(t, []string{"HOME=/root", "GODEBUG=gctrace=1"}, gcTraceEnv([]string{"HOME=/root"}))
	assert.Equal(t, []string{"GODEBUG=madvdontneed=1,gctrace=1"}, gcTraceEnv([]string{"GODEBUG=madvdontneed=1"}))
	assert.Equal(t, []string{"GODEBUG=gctrace=1"}, gcTraceEnv([]string{"GODEBUG="}))
	// The last entry is the one a process sees.
	assert.Equal(t, []string{"GODEBUG=a=1", "GODEBUG=b=1,gctrace=1"}, gcTraceEnv([]string{"GODEBUG=a=1", "GODEBUG=b=1"}))
	in := []string{"GODEBUG=a=1"}
	gcTraceEnv(in)
	assert.Equal(t, []string{"GODEBUG=a=1"}, in, "the caller's environment is left as it was")
}

func TestParseGCTrace(t *testing.T) {
	// Lines as the Go runtime writes them, among a controller's own.
	log := strings.Join([]string{
		`time="2026-12-04T15:44:52Z" level=info msg="shardkeeper started"`,
		`gc 1 @0.012s 3%: 0.064+2.1+0.056 ms clock, 0.12+0.64/0.16/1.7+0.11 ms cpu, 3->4->1 MB, 4 MB goal, 0 MB stacks, 0 MB globals, 2 P`,
		`{"msg":"reconcile timeline","steps":""}`,
		`gc 2 @29.820s 0%: 1.0+17+0.009 ms clock, 2.1+0.12/4.5/0+0.018 ms cpu, 4->4->2 MB, 5 MB goal, 0 MB stacks, 0 MB globals, 2 P (forced)`,
	}, "\n")
	started := time.Date(2026, 12, 4, 15, 44, 52, 0, time.UTC)
	cycles, err := parseGCTrace(strings.NewReader(log), started)
	require.NoError(t, err)
	require.Len(t, cycles, 2)
	assert.Equal(t, []int{1, 2}, []int{cycles[0].n, cycles[1].n})
	assert.Equal(t, started.Add(12*time.Millisecond), cycles[0].start)
	assert.InDelta(t, 2.73, cycles[0].cpu.Seconds()*1000, 1e-6, "0.12+0.64+0.16+1.7+0.11 ms")
	assert.Equal(t, started.Add(29820*time.Millisecond), cycles[1].start)
	assert.InDelta(t, 6.738, cycles[1].cpu.Seconds()*1000, 1e-6)

	_, err = parseGCTrace(strings.NewReader(`gc 3 @1.2.3s 0%: 1+1+1 ms clock, 1+1/1/1+1 ms cpu, 1->1->1 MB`), started)
	assert.Error(t, err, "a trace line whose time does not parse")
}

func TestCollectionsIn(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 16, 0, 0, 0, time.UTC)
	cycles := []gcCycle{
		{n: 4, start: t0.Add(-time.Millisecond), cpu: 5 * time.Millisecond},
		{n: 5, start: t0, cpu: 7 * time.Millisecond},
		{n: 6, start: t0.Add(100 * time.Millisecond), cpu: 11 * time.Millisecond},
		{n: 7, start: t0.Add(101 * time.Millisecond), cpu: 13 * time.Millisecond},
	}
	got, err := collectionsIn(cycles, t0, t0.Add(100*time.Millisecond))
	require.NoError(t, err)
	assert.Equal(t, gcShare{Count: 2, CPU: 18 * time.Millisecond}, got)
	got, err = collectionsIn(cycles, t0.Add(time.Second), t0.Add(2*time.Second))
	require.NoError(t, err)
	assert.Equal(t, gcShare{}, got)
	got, err = collectionsIn([]gcCycle{{n: 1, start: t0}}, t0.Add(-time.Hour), t0.Add(-time.Minute))
	require.NoError(t, err, "the first collection, after the window: none is missing before it")
	assert.Equal(t, gcShare{}, got)

	// The line of collection 6 was lost among other output.
	lost := []gcCycle{cycles[0], cycles[1], cycles[3]}
	_, err = collectionsIn(lost, t0, t0.Add(100*time.Millisecond))
	require.ErrorIs(t, err, errTraceLineLost)
	_, err = collectionsIn(lost, t0.Add(-time.Hour), t0.Add(-time.Minute))
	require.ErrorIs(t, err, errTraceLineLost, "collections 1 to 3, before the first logged, may have been in the window")
	got, err = collectionsIn(lost, t0.Add(time.Second), t0.Add(2*time.Second))
	require.NoError(t, err, "a lost line before the window does not matter")
	assert.Equal(t, gcShare{}, got)
}

// The trace's format is the runtime's own: a process of this Go, run with
// gcTraceEnv, logs collections that parse.
func TestCollectionsOfATracedProcess(t *testing.T) {
	p, err := startProcEnv("helper", filepath.Join(t.TempDir(), "helper.log"),
		append(gcTraceEnv(os.Environ()), gcHelperEnv+"=1"), os.Args[0])
	require.NoError(t, err)
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		p.stop()
		t.Fatal("the helper did not exit")
	}
	require.Zero(t, p.cmd.ProcessState.ExitCode())
	gc, err := p.collections(p.started, time.Now())
	require.NoError(t, err)
	assert.GreaterOrEqual(t, gc.Count, 3, "its forced collections")
	assert.Positive(t, gc.CPU)
	before, err := p.collections(p.started.Add(-time.Hour), p.started.Add(-time.Minute))
	require.NoError(t, err)
	assert.Equal(t, gcShare{}, before)
}

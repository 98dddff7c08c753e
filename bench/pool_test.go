package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// steps are runs of a change: took[i] and cpu[i] (either may be nil).
func steps(took, cpu []time.Duration) []step {
	out := make([]step, max(len(took), len(cpu)))
	for i := range out {
		if i < len(took) {
			out[i].Took = took[i]
		}
		if i < len(cpu) {
			out[i].CPU = cpu[i]
		}
	}
	return out
}

func durations(unit time.Duration, ns ...int) []time.Duration {
	return project(ns, func(n int) time.Duration { return time.Duration(n) * unit })
}

// convRun is a run of 20 shards of 4 sources, the change up as given and
// the change down as up: the daemon's and the ideal controller's times
// (the ideal controller's CPU is half its time), the daemon's and the
// informer reference's CPU (none: a run made before it).
func convRun(date string, daemon, ideal, daemonCPU, informerCPU []time.Duration) *results {
	idealCPU := project(ideal, func(d time.Duration) time.Duration { return d / 2 })
	c := &convergence{Shards: 20,
		DaemonUp: steps(daemon, daemonCPU), IdealUp: steps(ideal, idealCPU), InformerUp: steps(nil, informerCPU),
		DaemonDown: steps(daemon, daemonCPU), IdealDown: steps(ideal, idealCPU), InformerDown: steps(nil, informerCPU)}
	return &results{Settings: settings{Sources: 4}, Convergence: []*convergence{c},
		Machine: [][2]string{{"shardkeeper", "abc1234"}, {"date", date}}}
}

func TestPoolKeepsEachRunsPairs(t *testing.T) {
	a := convRun("2026-01-01", durations(ms, 100, 104, 108), durations(ms, 100, 100, 100), durations(ms, 50, 60, 70), durations(ms, 40, 50, 60))
	// b stopped after the ideal controller's third change, before the
	// daemon's: its third ideal run has no pair. It ran before the
	// informer reference.
	b := convRun("2026-01-02", durations(ms, 112, 116), durations(ms, 90, 95, 99), durations(ms, 55, 65), nil)
	// c measured 100 shards too.
	c := convRun("2026-01-03", durations(ms, 120), durations(ms, 110), durations(ms, 80), durations(ms, 70))
	c.Convergence = append(c.Convergence, &convergence{Shards: 100,
		DaemonUp: steps(durations(sec, 1), durations(ms, 300)), IdealUp: steps(durations(sec, 2), durations(ms, 200)),
		DaemonDown: steps(durations(sec, 3), durations(ms, 600)), IdealDown: steps(durations(sec, 4), durations(ms, 400))})

	p, err := pool([]string{"a.json", "b.json", "c.json"}, []*results{a, b, c})
	require.NoError(t, err)
	assert.Equal(t, 4, p.Sources)
	require.Len(t, p.Runs, 3)
	assert.Equal(t, pooledRun{Path: "b.json", Daemon: "abc1234", Date: "2026-01-02", Runs: []string{"2 at 20 shards"}}, p.Runs[1])
	assert.Equal(t, []string{"1 at 20 shards", "1 at 100 shards"}, p.Runs[2].Runs)

	require.Len(t, p.Directions, 4, "20 and 100 shards, up and down")
	up := p.Directions[0]
	assert.Equal(t, []any{20, true}, []any{up.Shards, up.Up})
	assert.Equal(t, durations(ms, 100, 104, 108, 112, 116, 120), up.Took.Daemon)
	assert.Equal(t, durations(ms, 100, 100, 100, 90, 95, 110), up.Took.Ref, "b's third ideal run, unpaired, left out")
	assert.Equal(t, []int{3, 2, 1}, up.Took.PerRun)
	assert.Equal(t, "6 (3 + 2 + 1)", up.Took.Pairs())
	assert.Equal(t, durations(ms, 50, 60, 70, 80), up.CPU.Daemon, "b has no informer reference to pair")
	assert.Equal(t, durations(ms, 40, 50, 60, 70), up.CPU.Ref)
	assert.Equal(t, "4 (3 + 0 + 1)", up.CPU.Pairs())
	assert.Equal(t, durations(ms, 50, 60, 70, 55, 65, 80), up.IdealCPU.Daemon)
	assert.Equal(t, durations(ms/2, 100, 100, 100, 90, 95, 110), up.IdealCPU.Ref, "the ideal controller pairs with every run")
	assert.Equal(t, "6 (3 + 2 + 1)", up.IdealCPU.Pairs())
	assert.False(t, p.Directions[1].Up)
	assert.Equal(t, durations(ms, 100, 104, 108, 112, 116, 120), p.Directions[1].Took.Daemon)

	hundred := p.Directions[3]
	assert.Equal(t, []any{100, false}, []any{hundred.Shards, hundred.Up})
	assert.Equal(t, durations(sec, 3), hundred.Took.Daemon)
	assert.Equal(t, durations(sec, 4), hundred.Took.Ref)
	assert.Equal(t, []int{0, 0, 1}, hundred.Took.PerRun, "only c measured 100 shards")
	assert.Equal(t, []int{0, 0, 1}, hundred.IdealCPU.PerRun)
	assert.Equal(t, durations(ms, 600), hundred.IdealCPU.Daemon)
	assert.Equal(t, durations(ms, 400), hundred.IdealCPU.Ref)
	assert.Equal(t, "0 (0 + 0 + 0)", hundred.CPU.Pairs(), "c had no informer reference at 100 shards")
}

func TestPoolRefusesWhatCannotBePooled(t *testing.T) {
	run := func() *results {
		return convRun("d", durations(ms, 100, 100, 100), durations(ms, 100, 100, 100), nil, nil)
	}
	_, err := pool([]string{"a.json"}, []*results{run()})
	require.ErrorContains(t, err, "two results.json or more")

	other := run()
	other.Settings.Sources = 5
	_, err = pool([]string{"a.json", "b.json"}, []*results{run(), other})
	require.ErrorContains(t, err, "b.json: 5")

	once := run()
	once.Began = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	_, err = pool([]string{"a.json", "b.json", "a-copy.json"}, []*results{once, run(), once})
	require.ErrorContains(t, err, "a.json and a-copy.json are the same run")

	million := run()
	million.Convergence = nil
	_, err = pool([]string{"a.json", "m.json"}, []*results{run(), million})
	require.ErrorContains(t, err, "m.json: no convergence runs")

	// A reference whose CPU is missing would pair the daemon's with zero:
	// an infinite ratio, not an unknown one.
	noCPU := run()
	noCPU.Convergence[0].IdealDown[1].CPU = 0
	_, err = pool([]string{"a.json", "n.json"}, []*results{run(), noCPU})
	require.ErrorContains(t, err, "n.json: the ideal controller's CPU was not recorded in a change of 20 shards")
	noCPU = convRun("d", durations(ms, 100), durations(ms, 100), durations(ms, 50), durations(ms, 40))
	noCPU.Convergence[0].InformerUp[0].CPU = 0
	_, err = pool([]string{"a.json", "n.json"}, []*results{run(), noCPU})
	require.ErrorContains(t, err, "n.json: the informer reference's CPU was not recorded")
}

// pooledRows are the rows of the pooled table of a report.
func pooledRows(t *testing.T, report string) map[string][]string {
	t.Helper()
	_, section, ok := strings.Cut(report, "## Convergence, pooled over")
	require.True(t, ok, "a pooled section")
	_, table, ok := strings.Cut(section, "\n| figure")
	require.True(t, ok, "a pooled table")
	table, _, _ = strings.Cut("| figure"+table, "\n\n")
	out := map[string][]string{}
	for _, cells := range tableRows(table) {
		out[cells[0]] = cells
	}
	return out
}

// Two runs that each land on their own side of the target: pooled, the
// median of all their pairs reads it.
func TestPooledRowsReadTheTargetsOverEveryRun(t *testing.T) {
	a := convRun("2026-01-01", durations(ms, 100, 104, 108), durations(ms, 100, 100, 100), durations(ms, 50, 50, 50), durations(ms, 40, 40, 40))
	b := convRun("2026-01-02", durations(ms, 112, 116, 120), durations(ms, 100, 100, 100), durations(ms, 50, 50, 50), durations(ms, 45, 45, 45))
	b.Args = []string{"--last"}
	dir := t.TempDir()
	var paths []string
	for i, r := range []*results{a, b} {
		paths = append(paths, filepath.Join(dir, []string{"a.json", "b.json"}[i]))
		require.NoError(t, writeData(r, paths[i]))
	}
	r, err := poolFiles(paths)
	require.NoError(t, err)
	assert.Equal(t, []string{"--last"}, r.Args, "the page is the last run's")
	out := filepath.Join(dir, "results.md")
	require.NoError(t, writeReport(r, out))
	md, err := os.ReadFile(out)
	require.NoError(t, err)
	report := string(md)

	assert.Contains(t, report, "## Convergence, pooled over 2 runs")
	assert.Contains(t, report, "`go run ./bench --pool "+paths[0]+","+paths[1]+"`")
	assert.Contains(t, report, "- `"+paths[1]+"`: shardkeeper abc1234, 2026-01-02; 3 at 20 shards.")
	got := pooledRows(t, report)
	// b alone: 116 ms against 100, missed; pooled: 110 against 100, met.
	up := got["convergence 0→20 shards: 80 Deployments created, 6 (3 + 3)"]
	require.NotNil(t, up, report)
	assert.Equal(t, []string{"0.110 s (0.100–0.120)", "0.100 s (ideal controller)"}, up[1:3])
	assert.Equal(t, ratioCI(durations(ms, 100, 104, 108, 112, 116, 120), durations(ms, 100, 100, 100, 100, 100, 100)), up[3])
	assert.True(t, strings.HasPrefix(up[3], "1.10x ("), up[3])
	assert.Equal(t, []string{"≤ 1.1x the ideal controller", "met"}, up[4:])
	assert.Equal(t, "**missed**", rows(t, b)["convergence 0→20 shards: 80 Deployments created (median of 3)"][5], "b alone")
	// CPU: 50 ms against 40 and 45: 1.18x pooled.
	cpu := got["CPU of that change, beside the informer reference, 6 (3 + 3)"]
	require.NotNil(t, cpu)
	assert.Equal(t, []string{"50.00 ms", "42.50 ms (40.00–45.00) (informer reference)"}, cpu[1:3])
	assert.True(t, strings.HasPrefix(cpu[3], "1.18x ("), cpu[3])
	assert.Equal(t, "met", cpu[5])
	// Beside the ideal controller, 50 ms against 50: recorded, no target.
	ideal := got["CPU of that change, beside the ideal controller, 6 (3 + 3)"]
	require.NotNil(t, ideal, report)
	assert.Equal(t, "50.00 ms (ideal controller)", ideal[2])
	assert.True(t, strings.HasPrefix(ideal[3], "1.00x ("), ideal[3])
	assert.Equal(t, []string{"(recorded)", "—"}, ideal[4:])
	assert.Contains(t, report, "Every pooled target was met.")

	// b's daemon a little slower: 111 ms against 100, missed.
	b.Convergence[0].DaemonUp[0].Took = 114 * ms
	p, err := pool(paths, []*results{a, b})
	require.NoError(t, err)
	b.Pool = p
	report = renderString(t, "report", b)
	up = pooledRows(t, report)["convergence 0→20 shards: 80 Deployments created, 6 (3 + 3)"]
	require.NotNil(t, up)
	assert.Equal(t, []string{"1.11x", "**missed**"}, []string{strings.Fields(up[3])[0], up[5]})
	assert.Contains(t, report, "**Pooled targets missed: 1 of 4**")

	// A report not pooled has no such section.
	assert.NotContains(t, renderString(t, "report", a), "pooled")
}

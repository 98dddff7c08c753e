package main

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/results.md from the template")

const (
	ms  = time.Millisecond
	sec = time.Second
	MiB = int64(1 << 20)
)

// handMade is a small run made by hand: every part measured, at 20 shards
// and at 0 and 1,000 objects, with a few runs each.
func handMade() *results {
	// Every run changes 20 shards of 4 sources: 80 Deployments.
	const n = 80
	rw := func(events int) runWrites {
		all := calls{{"create", "deployments"}: n, {"delete", "deployments"}: n}
		if events > 0 {
			all[callKey{"patch", "events"}] = events
		}
		return runWrites{Created: n, Deleted: n, Needed: n, All: all}
	}
	return &results{
		Began: time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC), Ended: time.Date(2026, 1, 2, 4, 30, 5, 0, time.UTC),
		Args: []string{"--bin-dir", "bin"},
		Settings: settings{DaemonQPS: 50, DaemonBurst: 300, Sources: 4, ObjectNamespaces: 10, ScaleShards: 100,
			Settle: 5 * sec, LatencyRuns: 3, Writers: 24, WriteQPS: 1000, PlaceNS: "bench-place", PlaceRefNS: "bench-place-ref", RefWriters: 8},
		Machine: [][2]string{{"nproc", "2"}},
		Convergence: []*convergence{{
			Shards:  20,
			FloorUp: []time.Duration{270 * ms, 280 * ms, 300 * ms}, FloorDown: []time.Duration{110 * ms, 120 * ms, 130 * ms},
			FloorUpResp: []time.Duration{250 * ms, 260 * ms, 270 * ms}, FloorDownResp: []time.Duration{100 * ms, 100 * ms, 110 * ms},
			IdealUp: []step{{Took: 260 * ms, CPU: 40 * ms, After: 2 * ms, GC: &gcShare{1, 12 * ms}}, {Took: 250 * ms, CPU: 50 * ms, After: 1 * ms, GC: &gcShare{1, 20 * ms}},
				{Took: 300 * ms, CPU: 40 * ms, After: 3 * ms, GC: &gcShare{2, 15 * ms}}},
			IdealDown: []step{{Took: 120 * ms, CPU: 20 * ms}, {Took: 125 * ms, CPU: 20 * ms}, {Took: 130 * ms, CPU: 30 * ms}},
			InformerUp: []step{{Took: 255 * ms, CPU: 40 * ms, After: 2 * ms, GC: &gcShare{1, 11 * ms}}, {Took: 262 * ms, CPU: 38 * ms, After: 3 * ms, GC: &gcShare{1, 13 * ms}},
				{Took: 280 * ms, CPU: 42 * ms, After: 2 * ms, GC: &gcShare{1, 16 * ms}}},
			InformerDown: []step{{Took: 118 * ms, CPU: 19 * ms}, {Took: 121 * ms, CPU: 18 * ms}, {Took: 127 * ms, CPU: 25 * ms}},
			DaemonUp: []step{{Took: 240 * ms, CPU: 44 * ms, After: 90 * ms, GC: &gcShare{1, 14 * ms}}, {Took: 250 * ms, CPU: 52 * ms, After: 110 * ms, GC: &gcShare{2, 30 * ms}},
				{Took: 270 * ms, CPU: 45 * ms, After: 100 * ms, GC: &gcShare{1, 10 * ms}}},
			DaemonDown:     []step{{Took: 120 * ms, CPU: 22 * ms}, {Took: 118 * ms, CPU: 21 * ms}, {Took: 125 * ms, CPU: 30 * ms}},
			DaemonWrites:   writeRuns{rw(40), rw(40), rw(38)},
			IdealWrites:    writeRuns{rw(0), rw(0), rw(0)},
			InformerWrites: writeRuns{rw(0), rw(0), rw(0)},
		}},
		Placement: &placementResult{Objects: 1000, Shards: 4, Settings: "namespaces: [bench-place]\n" + burstPacing, QPS: 50, Burst: 300, Quiet: 10 * sec, Runs: []*placementRun{{
			Created: 3 * sec, Labelled: 15 * sec, CreateRate: 333, Loads: map[string]int{"p00": 250, "p01": 250, "p02": 250, "p03": 250},
			MappedWrites: calls{{"patch", "gitrepos"}: 1000}, Codes: map[int]int{200: 1000},
			Writes:     calls{{"patch", "gitrepos"}: 1000, {"update", "configmaps"}: 7},
			Moves:      map[string]float64{"Assign/moved": 1000},
			RefCreated: 3 * sec, RefLabelled: 14 * sec, RefCreateRate: 330, RefLoads: map[string]int{"p00": 250, "p01": 250, "p02": 250, "p03": 250},
			RefPatches: 1000,
		}}, Bursts: &placementBurst{Objects: 1000, Settings: "namespaces: [bench-place]\nmaxMoves: 200\ninterval: 2s\ncooldown: 0s", Threshold: 25,
			Stamped: []*burstRun{
				{Born: 1000, BornLoads: map[string]int{"p00": 520, "p01": 480}, Created: 2 * sec, Labelled: 1900 * ms, Spread: 9 * sec, CreateRate: 500,
					Loads: map[string]int{"p00": 250, "p01": 240, "p02": 255, "p03": 255}, Moves: map[string]float64{"Rebalance/moved": 480}},
				{Born: 1000, BornLoads: map[string]int{"p00": 1000}, Created: 2100 * ms, Labelled: 2 * sec, Spread: 11 * sec, CreateRate: 476,
					Loads: map[string]int{"p00": 250, "p01": 250, "p02": 250, "p03": 250}, Moves: map[string]float64{"Rebalance/moved": 500}},
			},
			Unstamped: []*burstRun{
				{Created: 2 * sec, Labelled: 16 * sec, Spread: 16 * sec, CreateRate: 500,
					Loads: map[string]int{"p00": 250, "p01": 250, "p02": 250, "p03": 250}, Moves: map[string]float64{"Assign/moved": 1000}},
				{Created: 2 * sec, Labelled: 15 * sec, Spread: 15 * sec, CreateRate: 500,
					Loads: map[string]int{"p00": 250, "p01": 250, "p02": 250, "p03": 250}, Moves: map[string]float64{"Assign/moved": 1000}},
			},
		}},
		Levels: []*level{
			{Objects: 0, Ready: []time.Duration{290 * ms, 270 * ms}, Counted: []time.Duration{300 * ms, 280 * ms},
				Mem: []memory{{46 * MiB, 46 * MiB}, {48 * MiB, 48 * MiB}}, Heap: []float64{17 << 20, 18 << 20},
				MemSteady: memory{53 * MiB, 53 * MiB}, HeapSteady: 18 << 20, SteadyAfter: 68 * sec,
				RefSynced: []time.Duration{170 * ms, 150 * ms}, RefMem: []memory{{25 * MiB, 25 * MiB}, {25 * MiB, 25 * MiB}},
				RefSteady: memory{25 * MiB, 25 * MiB}, RefSteadyAfter: 125 * sec,
				AddMean: []time.Duration{15 * ms, 17 * ms, 14 * ms}, RemoveMean: []time.Duration{20 * ms, 22 * ms, 21 * ms},
				AddN: []int{11, 11, 12}, RemoveN: []int{2, 2, 3}},
			{Objects: 1000, Ready: []time.Duration{400 * ms, 390 * ms}, Counted: []time.Duration{900 * ms, 880 * ms},
				Mem: []memory{{49 * MiB, 50 * MiB}, {50 * MiB, 52 * MiB}}, Heap: []float64{19 << 20, 20 << 20},
				StartCalls: calls{{"list", "gitrepos ?limit=100&resourceVersion=0"}: 1, {"get", "configmaps"}: 1},
				MemSteady:  memory{55 * MiB, 55 * MiB}, HeapSteady: 19 << 20, SteadyAfter: 70 * sec,
				RefListed: []time.Duration{600 * ms, 640 * ms}, RefSynced: []time.Duration{370 * ms, 250 * ms}, RefMem: []memory{{600 * MiB, 610 * MiB}, {620 * MiB, 630 * MiB}},
				APIListCPU: []time.Duration{900 * ms, 950 * ms}, APIStartCPU: []time.Duration{1100 * ms, 1000 * ms}, StartCPU: []time.Duration{700 * ms, 650 * ms},
				APIListGCs: []int{0, 1}, APIStartGCs: []int{0, 0},
				RefSteady: memory{615 * MiB, 630 * MiB}, RefSteadyAfter: 124 * sec,
				AddMean: []time.Duration{24 * ms, 22 * ms, 23 * ms}, RemoveMean: []time.Duration{28 * ms, 27 * ms, 29 * ms},
				AddN: []int{10, 11, 10}, RemoveN: []int{2, 2, 2}},
		},
		WriteRates: []writeRate{{0, 1000, 717}},
		Idle: &idle{Window: 5 * time.Minute, Objects: 1000, Shards: 100, Audit: calls{{"watch", "configmaps"}: 1},
			APIByResource: map[string]float64{"PUT leases": 29}, APILabels: []string{"code", "verb"}},
		Profile:   &burstProfile{Shards: 20, Bursts: 25, Seconds: 30, Top: "flat flat% sum% cum cum%"},
		Rewatches: 2,
		Timelines: []*burstTimeline{{Shards: 20, DaemonArgs: []string{"--log-level", "debug"},
			DaemonUp:         []timelineRun{{"reconcile": 4 * ms, "decided": 7 * ms, "first-write": 7 * ms, "watch-last": 250 * ms}},
			IdealUp:          []timelineRun{{"reconcile": 4 * ms, "first-write": 5 * ms, "watch-last": 260 * ms}},
			DaemonDown:       []timelineRun{{"reconcile": 5 * ms, "first-write": 12 * ms, "watch-last": 120 * ms}},
			IdealDown:        []timelineRun{{"reconcile": 4 * ms, "first-write": 4 * ms, "watch-last": 125 * ms}},
			DaemonReconciles: []int{3, 2}}},
		Notes: []string{"a note"},
	}
}

func renderString(t *testing.T, name string, r *results) string {
	t.Helper()
	var sb strings.Builder
	require.NoError(t, render(&sb, name, r))
	return sb.String()
}

// rows are the summary's rows: figure → the row's cells (the last row of
// that figure).
func rows(t *testing.T, r *results) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, cells := range tableRows(renderString(t, "summary", r)) {
		out[cells[0]] = cells
	}
	return out
}

// rowsNamed are every row of the summary whose figure is name, in order:
// the rows that follow each convergence row share their names.
func rowsNamed(t *testing.T, r *results, name string) [][]string {
	t.Helper()
	var out [][]string
	for _, cells := range tableRows(renderString(t, "summary", r)) {
		if cells[0] == name {
			out = append(out, cells)
		}
	}
	return out
}

// tableRows are the cells of the rows of the Markdown table that md
// starts with, after its header.
func tableRows(md string) [][]string {
	var out [][]string
	for _, l := range strings.Split(md, "\n")[2:] {
		if cells := strings.Split(strings.TrimSuffix(strings.TrimPrefix(l, "| "), " |"), " | "); len(cells) > 1 {
			out = append(out, cells)
		}
	}
	return out
}

func TestReportMatchesGolden(t *testing.T) {
	got := renderString(t, "report", handMade())
	golden := filepath.Join("testdata", "results.md")
	if *update {
		require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	assert.Equal(t, string(want), got, "go test ./bench -run Golden -update rewrites it")
}

func TestReportRendersAgainFromItsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.json")
	require.NoError(t, writeData(handMade(), path))
	r, err := readResults(path)
	require.NoError(t, err)
	assert.Equal(t, renderString(t, "report", handMade()), renderString(t, "report", r))
}

// millionMade is a million-object run made by hand, as `make
// bench-million` saves it.
func millionMade() *results {
	m := handMade()
	m.Settings.Million = true
	m.Convergence, m.Placement, m.Timelines, m.Profile = nil, nil, nil, nil
	m.Levels[1].Objects = 1_000_000
	m.Machine = append(m.Machine, [2]string{"shardkeeper", "abc1234"}, [2]string{"date", "2026-01-01T00:00:00Z"})
	return m
}

func TestReportRepeatsTheMillionRunBesideIt(t *testing.T) {
	dir := t.TempDir()
	report := func(r *results, name string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		require.NoError(t, writeReport(r, path))
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		return string(b)
	}

	assert.NotContains(t, report(handMade(), "results.md"), "## A million objects", "no million-object run saved")

	require.NoError(t, writeData(millionMade(), filepath.Join(dir, millionData)))
	got := report(handMade(), "results.md")
	_, section, found := strings.Cut(got, "## A million objects")
	require.True(t, found, "the million-object run's section")
	assert.Contains(t, section, "shardkeeper abc1234, 2026-01-01T00:00:00Z")
	assert.Contains(t, section, "| start-up to every object counted, beside a bare paged metadata LIST of them, 1,000,000 objects (median of 2) |")
	assert.NotContains(t, section, "convergence 0→20", "the million-object run measured no convergence")
	assert.Less(t, strings.Index(got, "## A million objects"), strings.Index(got, "## How it is measured"), "it follows the summary")

	assert.NotContains(t, report(millionMade(), "results-million.md"), "## A million objects", "the million-object report does not repeat itself")

	require.NoError(t, os.WriteFile(filepath.Join(dir, millionData), []byte("{"), 0o644))
	require.ErrorContains(t, writeReport(handMade(), filepath.Join(dir, "results.md")), "the million-object run beside the report")
}

func TestFiguresCountTheRunsMade(t *testing.T) {
	r := handMade()
	// A part stopped after two windows of the largest count.
	r.Levels[1].AddMean = r.Levels[1].AddMean[:2]
	got := rows(t, r)
	assert.Contains(t, got, "convergence 0→20 shards: 80 Deployments created (median of 3)")
	assert.Contains(t, got, "mean reconcile across a patch adding a shard, 1,000 objects (median of 2)")
	assert.Contains(t, got, "RSS with 1,000 mapped objects (median of 2)")
	assert.Contains(t, got, "placement: 1,000 new objects labelled over 4 shards (1 run)")
	assert.Contains(t, got, "placement burst: first create to the spread within the threshold (25 objects) (median of 2)")
}

// The CPU after a change is shown where it was measured, and only there
// (results of earlier runs have none).
func TestAftermathRows(t *testing.T) {
	summary := renderString(t, "summary", handMade())
	assert.Equal(t, 1, strings.Count(summary, "CPU in the 5 s after"), "the change down measured none")
	got := rows(t, handMade())
	assert.Equal(t, []string{"CPU in the 5 s after that change (median of 3)", "100.00 ms (90.00–110.00)",
		"2.00 ms (2.00–3.00) (informer reference); 2.00 ms (1.00–3.00) (ideal controller)", "—", "(recorded)", "—"}, got["CPU in the 5 s after that change (median of 3)"])
}

const collectionsRow = "of it, the garbage collections started in that change: how many, and their time as the runtime counts it (not CPU: see the method) (median of 3)"

// The collections of a change are shown where they were traced, and only
// there (results of earlier runs have none), beside its CPU: nothing is
// taken from it, as the runtime's time for them is not the process's CPU.
func TestCollectionRows(t *testing.T) {
	summary := renderString(t, "summary", handMade())
	assert.Equal(t, 1, strings.Count(summary, "of it, the garbage collections"), "the change down traced none")
	assert.NotContains(t, summary, "the rest", "no CPU less the collections")
	got := rows(t, handMade())
	assert.Equal(t, []string{collectionsRow, "1 (1–2); 14.00 ms (10.00–30.00)",
		"1; 13.00 ms (11.00–16.00) (informer reference); 1 (1–2); 15.00 ms (12.00–20.00) (ideal controller)", "—", "(recorded)", "—"},
		got[collectionsRow])
	report := renderString(t, "report", handMade())
	assert.Contains(t, report, "collection trace on")
	assert.Contains(t, report, "not taken out of it")

	// The informer reference untraced: the ideal controller's alone.
	r := handMade()
	for i := range r.Convergence[0].InformerUp {
		r.Convergence[0].InformerUp[i].GC = nil
	}
	assert.Equal(t, "1 (1–2); 15.00 ms (12.00–20.00) (ideal controller)", rows(t, r)[collectionsRow][2])

	// A run made before the trace: no rows, and the method says nothing of it.
	r = handMade()
	for _, s := range [][]step{r.Convergence[0].DaemonUp, r.Convergence[0].IdealUp, r.Convergence[0].InformerUp} {
		for i := range s {
			s[i].GC = nil
		}
	}
	assert.NotContains(t, renderString(t, "report", r), "garbage collections started")
	assert.NotContains(t, renderString(t, "report", r), "collection trace on")
}

// The CPU target is read beside the informer reference; the ideal
// controller's CPU is recorded beside it.
func TestCPURows(t *testing.T) {
	const informerRow, idealRow = "CPU of that change, beside the informer reference (median of 3)", "CPU of that change, beside the ideal controller (median of 3)"
	r := handMade()
	informer := rowsNamed(t, r, informerRow)
	require.Len(t, informer, 2, "up and down")
	// Up: daemon 44, 52, 45 ms; informer reference 40, 38, 42 ms.
	assert.Equal(t, []string{"45.00 ms (44.00–52.00)", "40.00 ms (38.00–42.00) (informer reference)"}, informer[0][1:3])
	assert.True(t, strings.HasPrefix(informer[0][3], "1.12x ("), informer[0][3])
	assert.Equal(t, []string{"≤ 1.2x the informer reference", "met"}, informer[0][4:])
	// Down: daemon 22, 21, 30 ms; informer reference 19, 18, 25 ms.
	assert.Equal(t, []string{"22.00 ms (21.00–30.00)", "19.00 ms (18.00–25.00) (informer reference)"}, informer[1][1:3])
	assert.True(t, strings.HasPrefix(informer[1][3], "1.16x ("), informer[1][3])
	ideal := rowsNamed(t, r, idealRow)
	require.Len(t, ideal, 2)
	assert.Equal(t, []string{"40.00 ms (40.00–50.00) (ideal controller)", "(recorded)", "—"}, []string{ideal[0][2], ideal[0][4], ideal[0][5]})

	// Up, 45 ms against 37 ms: 1.22x.
	for i := range r.Convergence[0].InformerUp {
		r.Convergence[0].InformerUp[i].CPU = 37 * ms
	}
	informer = rowsNamed(t, r, informerRow)
	assert.Equal(t, []string{"**missed**", "met"}, []string{informer[0][5], informer[1][5]})

	// A run made before the informer reference: the ideal controller's row
	// alone, with no target, and no column of it in the details.
	r = handMade()
	r.Convergence[0].InformerUp, r.Convergence[0].InformerDown, r.Convergence[0].InformerWrites = nil, nil, nil
	assert.Empty(t, rowsNamed(t, r, informerRow))
	assert.Equal(t, "(recorded)", rows(t, r)[idealRow][4])
	report := renderString(t, "report", r)
	assert.NotContains(t, report, "**informer reference**")
	assert.NotContains(t, report, "(informer reference)")
	assert.NotContains(t, report, "  ", "no gap where the informer reference's text was")
	assert.Contains(t, report, "of the daemon and of the ideal controller are read from the audit log")
	assert.Contains(t, report, "| shards | direction | floor | floor's last response | ideal controller | its CPU | shardkeeper | its CPU |")
}

func TestBurstRows(t *testing.T) {
	r := handMade()
	got := rows(t, r)
	born := got["placement burst: 1,000 GitRepos created at once, share born with a shard label (stamping policy) (median of 2)"]
	require.NotNil(t, born)
	assert.Equal(t, []string{"100.0 %", "0.0 % (no policy: the daemon labels them after)", "every object, every run", "met"},
		[]string{born[1], born[2], born[4], born[5]})
	spread := got["placement burst: first create to the spread within the threshold (25 objects) (median of 2)"]
	require.NotNil(t, spread)
	assert.Equal(t, []string{"10.000 s (9.000–11.000)", "15.500 s (15.000–16.000) (no policy)", "0.65x"}, spread[1:4])
	labelled := got["placement burst: first create to every object labelled (median of 2)"]
	require.NotNil(t, labelled)
	assert.Equal(t, "1.950 s (1.900–2.000)", labelled[1])
	relabelled := got["placement burst: objects relabelled after their create (placement's moves) (median of 2)"]
	require.NotNil(t, relabelled)
	assert.Equal(t, []string{"490 (480–500)", "1,000 (no policy: each one assigned)", "0.49x"}, relabelled[1:4])

	// One object of the second run missed the policy (it fails open).
	r.Placement.Bursts.Stamped[1].Born = 999
	born = rows(t, r)["placement burst: 1,000 GitRepos created at once, share born with a shard label (stamping policy) (median of 2)"]
	assert.Equal(t, []string{"99.9 % (99.9–100.0)", "**missed**"}, []string{born[1], born[5]})

	// Bursts not measured: no rows.
	r.Placement.Bursts = nil
	for k := range rows(t, r) {
		assert.NotContains(t, k, "placement burst")
	}
}

func TestMissedTargetsAreReported(t *testing.T) {
	r := handMade()
	report := renderString(t, "report", r)
	assert.Contains(t, report, "Every target measured in this run was met.")
	assert.NotContains(t, report, "**missed**")

	// The daemon takes twice the ideal controller's time, and writes one
	// Deployment too many in one run.
	for i := range r.Convergence[0].DaemonUp {
		r.Convergence[0].DaemonUp[i].Took = 2 * r.Convergence[0].IdealUp[i].Took
	}
	r.Convergence[0].DaemonWrites[1].Created++
	got := rows(t, r)
	up := got["convergence 0→20 shards: 80 Deployments created (median of 3)"]
	assert.Equal(t, []string{"0.520 s (0.500–0.600)", "2.00x (2.00–2.00)", "**missed**"}, []string{up[1], up[3], up[5]})
	writes := got["writes at 20 shards: Deployment creates/deletes/failed writes"]
	assert.Equal(t, []string{"80/80/0 ×2, 81/80/0 ×1", "**missed**"}, []string{writes[1], writes[5]})
	report = renderString(t, "report", r)
	assert.Contains(t, report, "**Targets missed: 2 of 17**")
	assert.NotContains(t, report, "Every target measured in this run was met.")
}

func TestRSSTargetOnlyAtTheLargestCount(t *testing.T) {
	r := handMade()
	r.Levels[1].Mem = []memory{{60 * MiB, 60 * MiB}}
	got := rows(t, r)
	assert.Equal(t, []string{"< 0.1x the reference", "met"}, got["RSS with 1,000 mapped objects (1 run)"][4:])
	assert.Equal(t, []string{"—", "—"}, got["RSS with 0 mapped objects (median of 2)"][4:])

	r.Levels[1].Mem = []memory{{70 * MiB, 70 * MiB}}
	assert.Equal(t, "**missed**", rows(t, r)["RSS with 1,000 mapped objects (1 run)"][5], "70 MiB is more than a tenth of 615 MiB")
}

func TestReportOfAPartialRun(t *testing.T) {
	report := renderString(t, "report", &results{Skipped: []string{"convergence (--skip-convergence)"}})
	assert.Contains(t, report, "- skipped: convergence (--skip-convergence)")
	assert.NotContains(t, report, "Every target measured", "no target was measured")

	r := handMade()
	// The scale part stopped at 1,000 objects before the reference ran.
	r.Levels[1].RefMem, r.Levels[1].RefSynced = nil, nil
	r.Placement.Runs = nil
	got := rows(t, r)
	assert.Equal(t, []string{"—", "—"}, got["RSS with 0 mapped objects (median of 2)"][4:], "0 objects is the largest count beside the reference, and no target")
	assert.NotContains(t, got, "RSS growth, 0 → 1,000 objects")
	assert.NotContains(t, got, "placement: 1,000 new objects labelled over 4 shards (1 run)")
	assert.Equal(t, []string{"0.395 s (0.390–0.400)", "—", "—"}, got["start-up to /readyz 200, 1,000 objects (median of 2)"][1:4])
}

func TestStat(t *testing.T) {
	assert.Equal(t, "—", stat("s", []time.Duration{}))
	assert.Equal(t, "0.250 s", stat("s", []time.Duration{250 * ms}))
	assert.Equal(t, "0.250 s", stat("s", []time.Duration{250 * ms, 250 * ms}), "no spread when every run agrees")
	assert.Equal(t, "0.255 s (0.250–0.260)", stat("s", []time.Duration{260 * ms, 250 * ms}), "an even count's median is the mean of the middle two")
	assert.Equal(t, "10,500 (1,000–20,000)", stat("n", []int{20000, 1000, 10500}))
	assert.Equal(t, "1.5 MiB", format("MiB", 3*MiB/2))
	assert.Equal(t, "99.9 %", format("%", 0.9995), "a share short of all is never shown as 100 %")
	assert.Equal(t, "28.9 %", format("%", 0.289))
	assert.Equal(t, "100.0 %", format("%", 1.0))
	assert.Equal(t, "—", ratio(1.0, []int{}))
	assert.Equal(t, "2.00x", ratio([]int{3, 4, 5}, 2))
}

func TestCallKeysRoundTripThroughJSON(t *testing.T) {
	k := callKey{"watchlist", "gitrepos ?sendInitialEvents=true"}
	b, err := k.MarshalText()
	require.NoError(t, err)
	var got callKey
	require.NoError(t, got.UnmarshalText(b))
	assert.Equal(t, k, got)
	assert.Error(t, got.UnmarshalText([]byte("nospace")))
}

func TestRatioCIShowsTheSpreadOfPairedRuns(t *testing.T) {
	steady := []float64{100, 101, 99, 100, 102, 98, 100}
	assert.Equal(t, "1.00x (1.00–1.00)", ratioCI(steady, steady), "identical paired runs: no spread")
	noisy := []float64{60, 150, 90, 200, 70, 180, 100}
	got := ratioCI(noisy, steady)
	interval, ok := strings.CutPrefix(got, "1.00x (")
	require.True(t, ok, got)
	l, h, ok := strings.Cut(strings.TrimSuffix(interval, ")"), "–")
	require.True(t, ok, got)
	lo, err := strconv.ParseFloat(l, 64)
	require.NoError(t, err)
	hi, err := strconv.ParseFloat(h, 64)
	require.NoError(t, err)
	assert.Less(t, lo, 0.8, "noisy runs: a wide interval")
	assert.Greater(t, hi, 1.4)
	assert.Equal(t, "1.00x", ratioCI([]float64{1, 2}, []float64{1, 2}), "too few runs for an interval")
	assert.Equal(t, "1.50x", ratioCI([]float64{3, 3, 3}, []float64{2, 2}), "unpaired runs: the ratio alone")
}

func TestMillionRowsHaveTheirOwnTargets(t *testing.T) {
	r := &results{Settings: settings{Million: true},
		Levels: []*level{
			{Objects: 0, Ready: []time.Duration{300 * ms}, Counted: []time.Duration{310 * ms},
				Mem: []memory{{46 * MiB, 46 * MiB}}, MemSteady: memory{50 * MiB, 50 * MiB}, RefListed: []time.Duration{100 * ms}},
			{Objects: 1_000_000, Ready: []time.Duration{2 * sec}, Counted: []time.Duration{40 * sec},
				Mem: []memory{{260 * MiB, 310 * MiB}}, MemSteady: memory{240 * MiB, 240 * MiB}, RefListed: []time.Duration{30 * sec}},
		}}
	got := rows(t, r)
	assert.Equal(t, "met", got["RSS with 1,000,000 mapped objects, 5 s after counted (1 run)"][5])
	assert.Equal(t, "**missed**", got["peak RSS (highest VmHWM of the runs), 1,000,000 mapped objects"][5], "310 MiB is over 300 MiB")
	assert.Equal(t, "met", got["steady RSS with 1,000,000 mapped objects (after a GC, 1 run)"][5])
	perObject := got["steady RSS per mapped object, 0 → 1,000,000 objects"]
	assert.Equal(t, []string{"199 B", "met"}, []string{perObject[1], perObject[5]})
	startUp := got["start-up to every object counted, beside a bare paged metadata LIST of them, 1,000,000 objects (1 run)"]
	assert.Equal(t, []string{"40.000 s", "30.000 s (bare LIST)", "1.33x", "met"}, []string{startUp[1], startUp[2], startUp[3], startUp[5]})
}

package main

import (
	"cmp"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// resultsTemplate renders results.md from the measured data. The figures,
// their references and their targets are stated there, beside the text
// that says how they are measured, so that one file holds what the report
// claims.
//
//go:embed results.md.tmpl
var resultsTemplate string

// settings are the benchmark's settings that the report's method text
// quotes; they are saved with the data so that the data alone renders the
// report.
type settings struct {
	DaemonQPS, DaemonBurst int
	DaemonArgs             []string
	Sources                int // Deployments per shard
	ObjectNamespaces       int
	ScaleShards            int
	Settle                 time.Duration
	LatencyRuns            int
	Writers, WriteQPS      int
	PlaceNS, PlaceRefNS    string
	RefWriters             int
	// Million: the million-object mode (--million), whose objects carry no
	// last-applied annotation and which runs no full-informer reference.
	Million bool
}

// render writes the template name ("report", or "summary" for its table
// alone) of the results r to w.
func render(w io.Writer, name string, r *results) error {
	// met counts the targets checked and missed so far, so that the text
	// after the summary table can say whether the run met them all without
	// a second statement of every target.
	checked, missed := 0, 0
	t, err := template.New("results").Funcs(template.FuncMap{
		"median": median, "num": num, "add1": func(i int) int { return i + 1 }, "lo": lo, "hi": hi, "stat": stat, "f": format, "ratio": ratio, "runs": runsOf,
		"mul": func(a, b any) float64 { return num(a) * num(b) },
		"sub": func(a, b any) float64 { return num(a) - num(b) },
		"div": func(a, b any) float64 { return num(a) / num(b) },
		"met": func(ok bool) string {
			if checked++; ok {
				return "met"
			}
			missed++
			return "**missed**"
		},
		"checked": func() int { return checked },
		"minus":   func(a, b int) int { return a - b },
		"missed":  func() int { return missed },
		"took":    func(s []step) []time.Duration { return project(s, func(s step) time.Duration { return s.Took }) },
		"cpu":     func(s []step) []time.Duration { return project(s, func(s step) time.Duration { return s.CPU }) },
		// after is the aftermath's CPU of the runs that measured it.
		"after": func(s []step) []time.Duration {
			var out []time.Duration
			for _, st := range s {
				if st.After > 0 {
					out = append(out, st.After)
				}
			}
			return out
		},
		// traced are the runs whose collections were read (gctrace.go).
		"gcCount": func(s []step) []int { return project(traced(s), func(s step) int { return s.GC.Count }) },
		"gcCPU": func(s []step) []time.Duration {
			return project(traced(s), func(s step) time.Duration { return s.GC.CPU })
		},
		"rss":     func(m []memory) []int64 { return project(m, func(m memory) int64 { return m.RSS }) },
		"hwm":     func(m []memory) []int64 { return project(m, func(m memory) int64 { return m.HWM }) },
		"join":    strings.Join,
		"counts":  counts,
		"last":    func(s []string) string { return s[len(s)-1] },
		"list":    list,
		"at":      at,
		"ratioCI": ratioCI,
	}).Parse(resultsTemplate)
	if err != nil {
		return fmt.Errorf("parsing the results template: %w", err)
	}
	if err := t.ExecuteTemplate(w, name, r); err != nil {
		return fmt.Errorf("rendering the results: %w", err)
	}
	return nil
}

// MachineValue is the value of the row k of the machine table, or "—".
func (r *results) MachineValue(k string) string {
	for _, kv := range r.Machine {
		if kv[0] == k {
			return kv[1]
		}
	}
	return "—"
}

// writeData writes r to path as JSON.
func writeData(r *results, path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the results: %w", err)
	}
	return os.WriteFile(path, append(data, '\n'), 0o644) //nolint:gosec // results to publish, as readable as the tree they are committed to
}

// millionData is the name of the million-object mode's data, which `make
// bench-million` writes beside the full report.
const millionData = "results-million.json"

// writeReport writes the report rendered from r to path. The report of a
// run that is not the million-object mode repeats the summary of the last
// million-object run saved beside it, so that results.md holds every
// figure measured, with where each comes from.
func writeReport(r *results, path string) error {
	if !r.Settings.Million {
		m, err := readResults(filepath.Join(filepath.Dir(path), millionData))
		switch {
		case err == nil:
			// A copy, so that the caller's results stay as measured.
			withMillion := *r
			withMillion.MillionRun = m
			r = &withMillion
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("the million-object run beside the report: %w", err)
		}
	}
	var md strings.Builder
	if err := render(&md, "report", r); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(md.String()), 0o644) //nolint:gosec // results to publish, as readable as the tree they are committed to
}

// readResults reads what writeData wrote to path.
func readResults(path string) (*results, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &results{}
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// GCTraced reports whether the run read the controllers' collections in
// its changes: runs made before the bench traced them did not.
func (r *results) GCTraced() bool {
	for _, c := range r.Convergence {
		for _, s := range [][]step{c.DaemonUp, c.DaemonDown, c.IdealUp, c.IdealDown, c.InformerUp, c.InformerDown} {
			if len(traced(s)) > 0 {
				return true
			}
		}
	}
	return false
}

// Informed reports whether the run measured the informer reference: runs
// made before it did not.
func (r *results) Informed() bool {
	for _, c := range r.Convergence {
		if len(c.InformerUp)+len(c.InformerDown) > 0 {
			return true
		}
	}
	return false
}

// traced are the steps whose collections were read: none of a run made
// before the bench traced them.
func traced(s []step) []step {
	var out []step
	for _, st := range s {
		if st.GC != nil {
			out = append(out, st)
		}
	}
	return out
}

func project[T, V any](in []T, f func(T) V) []V {
	out := make([]V, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

// floats reads a slice of any numeric type (durations in nanoseconds,
// memory in bytes) as float64s.
func floats(xs any) []float64 {
	v := reflect.ValueOf(xs)
	if v.Kind() != reflect.Slice {
		return []float64{num(xs)}
	}
	out := make([]float64, v.Len())
	for i := range out {
		out[i] = num(v.Index(i).Interface())
	}
	return out
}

// num is a number as a float64, or the median of a slice of them.
func num(x any) float64 {
	v := reflect.ValueOf(x)
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return float64(v.Uint())
	case reflect.Float32, reflect.Float64:
		return v.Float()
	case reflect.Slice:
		return median(x)
	}
	return math.NaN()
}

func median(xs any) float64 {
	s := floats(xs)
	if len(s) == 0 {
		return 0
	}
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func lo(xs any) float64 { return slices.Min(append(floats(xs), math.Inf(1))) }
func hi(xs any) float64 { return slices.Max(append(floats(xs), math.Inf(-1))) }

// runsOf names, after a figure, how many runs its median is of: the runs
// made, not the runs asked for, as a part that stopped early made fewer.
func runsOf(xs any) string {
	if n := len(floats(xs)); n != 1 {
		return fmt.Sprintf(" (median of %d)", n)
	}
	return " (1 run)"
}

// stat is the median of the runs xs with their spread: "0.243 s
// (0.128–0.572)".
func stat(unit string, xs any) string {
	s := floats(xs)
	switch len(s) {
	case 0:
		return "—"
	case 1:
		return format(unit, s[0])
	}
	n, u := formatNum(unit, median(s))
	l, _ := formatNum(unit, lo(s))
	h, _ := formatNum(unit, hi(s))
	if l == h {
		return n + u
	}
	return fmt.Sprintf("%s%s (%s–%s)", n, u, l, h)
}

// format writes the number x (durations in nanoseconds, memory in bytes)
// in unit: s, ms, MiB, B, n (a count), .3 (a plain ratio) or % (a share).
func format(unit string, x any) string {
	n, u := formatNum(unit, num(x))
	return n + u
}

func formatNum(unit string, x float64) (string, string) {
	switch unit {
	case "s":
		return fmt.Sprintf("%.3f", x/1e9), " s"
	case "ms":
		return fmt.Sprintf("%.2f", x/1e6), " ms"
	case "MiB":
		return fmt.Sprintf("%.1f", x/(1<<20)), " MiB"
	case "B":
		return fmt.Sprintf("%.0f", x), " B"
	case ".3":
		return fmt.Sprintf("%.3f", x), ""
	case "%":
		// Rounded down, so that 100 % means every one.
		return fmt.Sprintf("%.1f", math.Floor(1000*x+1e-9)/10), " %"
	}
	return thousands(int64(math.Round(x))), ""
}

func thousands(n int64) string {
	if n < 0 {
		return "-" + thousands(-n)
	}
	if n < 1000 {
		return strconv.FormatInt(n, 10)
	}
	return fmt.Sprintf("%s,%03d", thousands(n/1000), n%1000)
}

// ratio is a over b, each a number or the median of runs.
func ratio(a, b any) string {
	if num(b) == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2fx", num(a)/num(b))
}

// bootstrapResamples is how many resamples ratioCI draws; its generator
// has a fixed seed, so that the same data render the same report.
const bootstrapResamples = 10000

// ratioCI is the ratio of the medians of a and b (runs, paired by index as
// the runs alternate) with its 95 % bootstrap interval: the runs' pairs
// are drawn again with replacement, and the interval holds the middle 95 %
// of the resampled ratios. "0.97x (0.88–1.08)". Unpaired or too few runs
// give the ratio alone.
func ratioCI(a, b any) string {
	x, y := floats(a), floats(b)
	r := ratio(x, y)
	if len(x) != len(y) || len(x) < 3 || r == "—" {
		return r
	}
	rng := rand.New(rand.NewPCG(1, 2)) //nolint:gosec // a reproducible resampling, not a secret
	ratios := make([]float64, 0, bootstrapResamples)
	sx, sy := make([]float64, len(x)), make([]float64, len(y))
	for range bootstrapResamples {
		for i := range x {
			j := rng.IntN(len(x))
			sx[i], sy[i] = x[j], y[j]
		}
		if m := median(sy); m > 0 {
			ratios = append(ratios, median(sx)/m)
		}
	}
	sort.Float64s(ratios)
	lo, hi := ratios[int(0.025*float64(len(ratios)))], ratios[int(0.975*float64(len(ratios)-1))]
	return fmt.Sprintf("%s (%.2f–%.2f)", r, lo, hi)
}

// counts is one count a run, in the order of the runs.
func counts(n []int) string {
	out := make([]string, len(n))
	for i, v := range n {
		out[i] = strconv.Itoa(v)
	}
	return strings.Join(out, ", ")
}

// list writes a map as "key: value, ...", in the order of its keys.
func list(m any) string {
	v := reflect.ValueOf(m)
	keys := v.MapKeys()
	slices.SortFunc(keys, func(a, b reflect.Value) int {
		if a.CanInt() {
			return cmp.Compare(a.Int(), b.Int())
		}
		return strings.Compare(a.String(), b.String())
	})
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%v: %v", k, v.MapIndex(k)))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// direction is one way of a convergence change; Informer is empty in runs
// made before the informer reference.
type direction struct {
	Up                      bool
	Daemon, Ideal, Informer []step
	Floor, FloorResp        []time.Duration
}

// Directions are the change up, then the change down.
func (c *convergence) Directions() []direction {
	return []direction{
		{true, c.DaemonUp, c.IdealUp, c.InformerUp, c.FloorUp, c.FloorUpResp},
		{false, c.DaemonDown, c.IdealDown, c.InformerDown, c.FloorDown, c.FloorDownResp},
	}
}

// writeRuns are the writes of every run of a controller.
type writeRuns []runWrites

// String tallies the runs' Deployment creates/deletes/failed writes:
// "80/80/0 ×14, 80/81/1 ×1".
func (ws writeRuns) String() string {
	var seen []string
	n := map[string]int{}
	for _, w := range ws {
		k := fmt.Sprintf("%d/%d/%d", w.Created, w.Deleted, w.Failed)
		if n[k]++; n[k] == 1 {
			seen = append(seen, k)
		}
	}
	return strings.Join(project(seen, func(k string) string { return fmt.Sprintf("%s ×%d", k, n[k]) }), ", ")
}

// Exact is whether every run wrote exactly what it needed.
func (ws writeRuns) Exact() bool {
	return len(ws) > 0 && !slices.ContainsFunc(ws, func(w runWrites) bool { return !w.exact() })
}

// PerRun lists every kind of write with its median per run and spread.
func (ws writeRuns) PerRun() string {
	var keys []callKey
	for _, w := range ws {
		for k := range w.All {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.SortFunc(keys, func(a, b callKey) int {
		return cmp.Or(strings.Compare(a.verb, b.verb), strings.Compare(a.resource, b.resource))
	})
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%s %s: %s", k.verb, k.resource, stat("n", project(ws, func(w runWrites) int { return w.All[k] }))))
	}
	return strings.Join(out, ", ")
}

// picks are the levels the summary compares: the one without mapped
// objects, the largest one measured beside the reference, the smallest and
// the largest one with mapped objects whose decision latency was measured,
// and the largest one whose start-up was. Each is nil when the run has none.
type picks struct{ Zero, Top, LatencyBase, LatencyTop, StartUp *level }

// Picks finds the levels the summary compares.
func (r *results) Picks() picks {
	var p picks
	for _, lv := range r.Levels {
		if lv.Objects == 0 && len(lv.Mem) > 0 {
			p.Zero = lv
		}
		if len(lv.Mem) > 0 && len(lv.RefMem) > 0 {
			p.Top = lv
		}
		if lv.Objects > 0 && len(lv.AddMean) > 0 {
			p.LatencyBase = cmp.Or(p.LatencyBase, lv)
			p.LatencyTop = lv
		}
		if len(lv.Ready) > 0 {
			p.StartUp = lv
		}
	}
	return p
}

// IDs are the placement part's shards.
func (p *placementResult) IDs() []string { return placementIDs(p.Shards) }

// Bound is the least time the daemon's client limits allow for labelling
// the objects, one patch each.
func (p *placementResult) Bound() time.Duration {
	return time.Duration(float64(max(p.Objects-p.Burst, 0)) / float64(p.QPS) * float64(time.Second))
}

// placementSeries are the placement figures of every run, and whether
// every run wrote one patch per object.
type placementSeries struct {
	Labelled, RefLabelled []time.Duration
	Writes, RefPatches    []int
	Balance, RefBalance   []float64
	ExactWrites           bool
}

// Series gathers the placement figures of every run.
func (p *placementResult) Series() placementSeries {
	s := placementSeries{ExactWrites: len(p.Runs) > 0}
	for _, r := range p.Runs {
		s.Labelled, s.RefLabelled = append(s.Labelled, r.Labelled), append(s.RefLabelled, r.RefLabelled)
		s.Writes, s.RefPatches = append(s.Writes, r.MappedWrites.Writes()), append(s.RefPatches, r.RefPatches)
		s.Balance, s.RefBalance = append(s.Balance, balance(r.Loads, p.IDs())), append(s.RefBalance, balance(r.RefLoads, p.IDs()))
		s.ExactWrites = s.ExactWrites && r.MappedWrites.Writes() == p.Objects
	}
	return s
}

// Spread writes the fewest and most objects on a shard of loads, and the
// most over the mean.
func (p *placementResult) Spread(loads map[string]int) string {
	n := project(p.IDs(), func(id string) int { return loads[id] })
	return fmt.Sprintf("%s–%s (%.3f)", format("n", lo(n)), format("n", hi(n)), balance(loads, p.IDs()))
}

// OtherWrites are the daemon's writes of a run to anything but the mapped
// kinds.
func (r *placementRun) OtherWrites() calls {
	return r.Writes.filter(func(k callKey) bool { return !isMappedKind(k.resource) })
}

// Command bench measures shardkeeper on a local control plane (the e2e
// cluster package: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok) and writes the figures, each beside a reference
// measured in the same run, to a Markdown file:
//
//   - convergence: from the ConfigMap patch that adds (removes) shards to the
//     watch event of the last shard Deployment created (deleted), beside the
//     ideal controller (bench/ideal) and a bare client-go program writing
//     as many Deployments in parallel, and the CPU of the change beside the
//     informer reference (bench/ideal --informer);
//   - memory: the daemon's RSS with 0 to 100,000 mapped objects, beside a
//     process that caches the same objects with full dynamic informers;
//   - decision latency: the mean reconcile duration across one ConfigMap
//     patch, at each object count;
//   - quiet when idle: the daemon's writes and LISTs in an idle window, as
//     the API server's audit log records them;
//   - start-up: from process start to /readyz, and to every object counted;
//   - placement: with --allow-placement, from the first create of 10,000
//     unlabelled objects to the watch event of the last one labelled over
//     16 shards, the daemon's writes to the mapped kinds (one patch per
//     object) and the balance reached, beside a bare client-go labeller
//     with the daemon's client limits; and, with the daemon run with
//     --stamp, a burst of objects created at once with the chart's
//     MutatingAdmissionPolicy installed: the share born with a shard label
//     and the time until the spread is within the threshold, beside the
//     same burst without the policy.
//
// The data goes to results.json, beside the Markdown file, which is rendered
// from it with the template results.md.tmpl; --render renders it again from
// a results.json, without measuring, and --pool from several, with their
// convergence runs pooled.
//
// Run it with `make bench`, or `go run ./bench --bin-dir bin --out bench/results.md`.
// Smaller runs for development: --shards=20 --objects=1000,10000 --idle=30s --runs=1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type bench struct {
	env        *env
	daemonBin  string
	refBin     string
	idealBin   string
	daemonArgs []string

	shards      []int
	scaleShards int
	objects     []int
	runs        int
	convRuns    runList
	latencyRuns int
	idle        time.Duration
	settle      time.Duration
	writers     int
	writeQPS    int

	placementObjects int
	placementShards  int
	placementRuns    int
	// placementBurst is the objects of a burst, created at once, with the
	// chart's stamping policy and without it (0: no bursts).
	placementBurst int
	// binDir is --bin-dir, absolute; chart the chart the stamping policy
	// is rendered from.
	binDir, chart string

	// profileSeconds is the length of the CPU profile of the daemon's
	// bursts (0: none).
	profileSeconds int
	// million is the million-object mode (--million): lean objects, no
	// full-informer reference.
	million bool
	// timelineRuns is the number of changes up and down per shard count
	// whose timelines are laid out (see runTimelines).
	timelineRuns int

	res results
}

// results are what a run measured, as results.json holds them (durations
// in nanoseconds, memory in bytes), and what results.md is rendered from.
type results struct {
	Began, Ended time.Time
	Args         []string
	Settings     settings
	Machine      [][2]string
	Convergence  []*convergence
	Levels       []*level
	WriteRates   []writeRate
	Idle         *idle
	Placement    *placementResult
	Profile      *burstProfile
	Timelines    []*burstTimeline
	Rewatches    int64 // measurement watches the API server closed, resumed
	Notes        []string
	Failures     []string
	Skipped      []string
	// MillionRun is the last million-object run (results-million.json
	// beside the report), whose summary the full report repeats; it is
	// read when the report is written, never saved with the data.
	MillionRun *results `json:"-"`
	// Pool is the convergence of this run and others, pooled (--pool);
	// never saved with the data, as it is not this run's.
	Pool *pooled `json:"-"`
}

// writeRate is the rate at which the mapped objects from From to To were
// created.
type writeRate struct {
	From, To int
	Rate     float64
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// notef records something the results must mention.
func (b *bench) notef(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	b.logf("NOTE: %s", msg)
	b.res.Notes = append(b.res.Notes, msg)
}

// runList is a count of runs per shard count, in the order the shard
// counts are measured; unlike intList it keeps its order.
type runList []int

func (l *runList) String() string { return (*intList)(l).String() }

func (l *runList) Set(v string) error {
	*l = nil
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("%q is not a number of runs (at least 1)", f)
		}
		*l = append(*l, n)
	}
	return nil
}

// of returns the runs of the i-th shard count.
func (l runList) of(i int) int { return l[min(i, len(l)-1)] }

type intList []int

func (l *intList) String() string {
	var s []string
	for _, n := range *l {
		s = append(s, strconv.Itoa(n))
	}
	return strings.Join(s, ",")
}

func (l *intList) Set(v string) error {
	*l = nil
	for f := range strings.SplitSeq(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return fmt.Errorf("%q is not a count", f)
		}
		*l = append(*l, n)
	}
	sort.Ints(*l)
	return nil
}

type strList []string

func (l *strList) String() string     { return strings.Join(*l, " ") }
func (l *strList) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// options are the command's flags that say what to run and where, not how
// to measure.
type options struct {
	binDir, daemonBin, out, rerender     string
	pool                                 []string
	keep, skipConv, skipScale, skipPlace bool
}

// parseFlags parses the command line into b's settings and the options.
func (b *bench) parseFlags() (options, error) {
	var (
		o           options
		daemonExtra strList
	)
	flag.StringVar(&o.binDir, "bin-dir", "bin", "directory of the control-plane binaries and bin/shardkeeper")
	flag.StringVar(&o.daemonBin, "daemon-bin", "", "the shardkeeper binary to measure (default: shardkeeper in --bin-dir)")
	flag.StringVar(&o.out, "out", "bench/results.md", "where to write the results (the data goes beside it, as .json)")
	flag.StringVar(&o.rerender, "render", "", "render --out from this results.json and measure nothing")
	flag.Func("pool", "render --out from the last of these results.json (two or more, comma-separated), with the convergence of all of them pooled, and measure nothing", func(v string) error {
		o.pool = slices.DeleteFunc(strings.Split(v, ","), func(p string) bool { return strings.TrimSpace(p) == "" })
		if len(o.pool) < 2 {
			return errors.New("name two results.json or more, comma-separated")
		}
		return nil
	})
	flag.BoolVar(&o.keep, "keep", false, "keep the control plane's work directory (logs, audit log) after the run")
	flag.BoolVar(&o.skipConv, "skip-convergence", false, "skip the convergence measurements")
	flag.BoolVar(&o.skipScale, "skip-scale", false, "skip the memory, decision latency, idle and start-up measurements")
	flag.BoolVar(&o.skipPlace, "skip-placement", false, "skip the placement measurements")
	flag.Var((*intList)(&b.shards), "shards", "shard counts for convergence, comma-separated")
	flag.Var((*intList)(&b.objects), "objects", "mapped object counts for memory, decision latency and start-up (0 is always measured), comma-separated")
	flag.IntVar(&b.scaleShards, "scale-shards", 100, "shards the mapped objects are spread over")
	flag.IntVar(&b.runs, "runs", 3, "runs per figure of memory and start-up; the median is reported")
	// A single run's convergence moves by more than the 10% target from one
	// run to the next on a 2-core machine, and a decision-latency window by
	// more than the 50% one: their medians need more runs than memory's do.
	// A run of 20 shards takes about 1.5 minutes, one of 100 about 7.5, so
	// the small count, the noisier, gets the most runs.
	b.convRuns = runList{15, 7}
	flag.Var(&b.convRuns, "convergence-runs", "alternating runs of the floor, the ideal controller and the daemon, per shard count in ascending order (the last applies to any further count), comma-separated; the median is reported")
	flag.IntVar(&b.latencyRuns, "latency-runs", 5, "windows of decision latency (a shard added, then removed) per object count, on the last run's daemon; the median is reported")
	flag.DurationVar(&b.idle, "idle", 5*time.Minute, "length of the idle window (0 skips it)")
	flag.DurationVar(&b.settle, "settle", 5*time.Second, "wait after a process is ready before its RSS is read")
	flag.IntVar(&b.writers, "writers", 24, "concurrent writers creating the mapped objects")
	flag.IntVar(&b.writeQPS, "write-qps", 1000, "client QPS (and burst) of the object writers")
	flag.IntVar(&b.placementObjects, "placement-objects", 10000, "new unlabelled objects placement labels, per run")
	flag.IntVar(&b.placementShards, "placement-shards", 16, "shards placement spreads the objects over")
	flag.IntVar(&b.placementRuns, "placement-runs", 1, "runs of the placement part (a run takes about 8 minutes at 10,000 objects; --runs does not apply)")
	flag.IntVar(&b.placementBurst, "placement-burst", 1000, "new unlabelled objects created at once, per placement run, with the chart's stamping policy and without it (0 skips the bursts)")
	flag.StringVar(&b.chart, "chart", "charts/shardkeeper", "the chart the stamping policy is rendered from, with the helm of --bin-dir")
	flag.IntVar(&b.timelineRuns, "timeline-runs", 3, "changes up and down per shard count, of the ideal controller and of a daemon logging at debug level, whose timelines are laid out after the measured runs (0 skips them)")
	flag.IntVar(&b.profileSeconds, "profile-seconds", 30, "seconds of the daemon's CPU profile across bursts of the smallest shard count, after its measured runs (0 skips it)")
	flag.BoolVar(&b.million, "million", false, "the million-object mode: memory, start-up beside the bare LIST, decision latency and the idle window at 1,000,000 mapped objects without the last-applied annotation, one run, no full-informer reference (about 9 GiB at that count); with --skip-convergence --skip-placement it is `make bench-million`")
	flag.Var(&daemonExtra, "daemon-arg", "an extra argument for the daemon, repeatable (the figures are meant for its defaults)")
	flag.Parse()
	b.daemonArgs = daemonExtra
	if b.runs < 1 || len(b.convRuns) == 0 || b.latencyRuns < 1 || b.timelineRuns < 0 || b.scaleShards < 1 || b.writers < 1 || b.placementObjects < 1 || b.placementShards < 1 || b.placementRuns < 1 || b.placementBurst < 0 {
		return o, errors.New("--runs, --convergence-runs, --latency-runs, --scale-shards, --writers, --placement-objects, --placement-shards and --placement-runs must be at least 1, --placement-burst and --timeline-runs at least 0")
	}
	b.objects = dropZero(b.objects)
	if b.million {
		b.objects, b.runs = intList{millionObjects}, 1
	}
	return o, nil
}

// millionObjects is the object count of --million: a Rancher with 10,000
// downstream clusters and 100 bundles each holds that many
// BundleDeployments.
const millionObjects = 1_000_000

func run() error {
	b := &bench{shards: intList{20, 100}, objects: intList{1000, 10000, 100000}}
	o, err := b.parseFlags()
	if err != nil {
		return err
	}
	if o.rerender != "" || o.pool != nil {
		return renderOnly(o)
	}
	b.res.Began = time.Now()
	b.res.Args = os.Args[1:]
	b.res.Settings = settings{DaemonQPS: daemonQPS, DaemonBurst: daemonBurst, DaemonArgs: b.daemonArgs, Sources: len(sources()),
		ObjectNamespaces: objNSs, ScaleShards: b.scaleShards, Settle: b.settle, LatencyRuns: b.latencyRuns,
		Writers: b.writers, WriteQPS: b.writeQPS, PlaceNS: placeNS, PlaceRefNS: placeRefNS, RefWriters: refWriters, Million: b.million}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	absBin, err := b.locateDaemon(o)
	if err != nil {
		return err
	}
	b.binDir = absBin
	tmp, err := os.MkdirTemp("", "shardkeeper-bench-")
	if err != nil {
		return err
	}
	if !o.keep {
		defer os.RemoveAll(tmp)
	}
	if err := b.buildReferences(ctx, tmp); err != nil {
		return err
	}
	b.res.Machine = machine(ctx, absBin, b.daemonBin)
	if err := b.startControlPlane(ctx, absBin, tmp, o.keep); err != nil {
		return err
	}
	defer b.env.stop()
	b.runParts(ctx, o)
	b.res.Ended = time.Now()
	b.res.Rewatches = b.env.rewatches
	if err := b.write(o.out); err != nil {
		return err
	}
	return ctx.Err()
}

// renderOnly writes the report of --render, or of --pool, and measures
// nothing.
func renderOnly(o options) error {
	var (
		r   *results
		err error
	)
	switch {
	case o.rerender != "" && o.pool != nil:
		return errors.New("--render and --pool: one or the other")
	case o.rerender != "":
		r, err = readResults(o.rerender)
	default:
		r, err = poolFiles(o.pool)
	}
	if err != nil {
		return err
	}
	return writeReport(r, o.out)
}

// locateDaemon sets the daemon binary the options name, and returns the
// absolute path of --bin-dir.
func (b *bench) locateDaemon(o options) (string, error) {
	absBin, err := filepath.Abs(o.binDir)
	if err != nil {
		return "", err
	}
	b.daemonBin = filepath.Join(absBin, "shardkeeper")
	if o.daemonBin != "" {
		if b.daemonBin, err = filepath.Abs(o.daemonBin); err != nil {
			return "", err
		}
	}
	if _, err := os.Stat(b.daemonBin); err != nil {
		return "", fmt.Errorf("%w: build it with `make build`", err)
	}
	return absBin, nil
}

// startControlPlane starts the control plane from binDir in workDir, as
// b.env, and sets it up for the parts; on error it leaves none running.
func (b *bench) startControlPlane(ctx context.Context, binDir, workDir string, keep bool) error {
	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	e, err := startEnv(startCtx, binDir, workDir, b.logf)
	cancel()
	if err != nil {
		return err
	}
	if keep {
		b.logf("work directory (kept): %s", e.workDir)
	}
	if v, err := e.kube.Discovery().ServerVersion(); err == nil {
		b.res.Machine = append(b.res.Machine, [2]string{"kube-apiserver", v.GitVersion})
	}
	if err := e.setup(ctx); err != nil {
		e.stop()
		return fmt.Errorf("setting up: %w", err)
	}
	b.env = e
	return nil
}

// buildReferences builds the reference programs bench/ref and bench/ideal
// into dir.
func (b *bench) buildReferences(ctx context.Context, dir string) error {
	b.refBin, b.idealBin = filepath.Join(dir, "ref"), filepath.Join(dir, "ideal")
	for _, ref := range []struct{ bin, pkg string }{{b.refBin, "bench/ref"}, {b.idealBin, "bench/ideal"}} {
		b.logf("building the reference %s", ref.pkg)
		out, err := exec.CommandContext(ctx, "go", "build", "-o", ref.bin, "github.com/shardkeeper/shardkeeper/"+ref.pkg).CombinedOutput() //nolint:gosec // the benchmark's own packages, built into its work directory
		if err != nil {
			return fmt.Errorf("building %s: %w\n%s", ref.pkg, err, out)
		}
	}
	return nil
}

// runParts runs the parts the options do not skip, and records each
// part's failure; an interrupted run skips the parts after the one it
// stopped.
func (b *bench) runParts(ctx context.Context, o options) {
	parts := []struct {
		name, skipped string
		skip          bool
		run           func(context.Context) error
	}{
		{"convergence", "convergence (--skip-convergence)", o.skipConv, b.runConvergence},
		{"placement", "placement (--skip-placement)", o.skipPlace, b.runPlacement},
		{"scale", "memory, decision latency, idle window and start-up (--skip-scale)", o.skipScale, b.runScale},
	}
	for i, part := range parts {
		if part.skip {
			b.res.Skipped = append(b.res.Skipped, part.skipped)
			continue
		}
		if i > 0 && ctx.Err() != nil {
			continue
		}
		if err := part.run(ctx); err != nil {
			b.res.Failures = append(b.res.Failures, part.name+": "+err.Error())
			b.logf("%s failed: %v", part.name, err)
		}
	}
}

// write prints the summary and writes the data and the report to out.
func (b *bench) write(out string) error {
	if err := render(os.Stdout, "summary", &b.res); err != nil {
		return err
	}
	if err := writeData(&b.res, strings.TrimSuffix(out, ".md")+".json"); err != nil {
		return err
	}
	if err := writeReport(&b.res, out); err != nil {
		return err
	}
	b.logf("wrote %s; the run took %s", out, b.res.Ended.Sub(b.res.Began).Round(time.Second))
	return nil
}

func dropZero(l []int) []int {
	var out []int
	for _, n := range l {
		if n > 0 && (len(out) == 0 || out[len(out)-1] != n) {
			out = append(out, n)
		}
	}
	return out
}

// machine describes the machine and the software measured.
func machine(ctx context.Context, binDir, daemonBin string) [][2]string {
	var out [][2]string
	add := func(k, v string) { out = append(out, [2]string{k, strings.TrimSpace(v)}) }
	if b, err := exec.CommandContext(ctx, "nproc").Output(); err == nil {
		add("nproc", string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for l := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				f := strings.Fields(v)
				if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					add("memory", fmt.Sprintf("%.1f GiB (MemTotal %s kB)", float64(kb)/(1<<20), f[0]))
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for l := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				add("CPU", v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		add("kernel", string(b))
	}
	if b, err := exec.CommandContext(ctx, "go", "version").Output(); err == nil {
		add("Go", string(b))
	}
	if b, err := exec.CommandContext(ctx, daemonBin, "--version").Output(); err == nil {
		add("shardkeeper", string(b))
	}
	if b, err := exec.CommandContext(ctx, filepath.Join(binDir, "etcd"), "--version").Output(); err == nil { //nolint:gosec // the control plane's etcd, from --bin-dir
		add("etcd", strings.SplitN(string(b), "\n", 2)[0])
	}
	add("date", time.Now().UTC().Format(time.RFC3339))
	return out
}

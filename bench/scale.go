package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// createObjects creates the mapped objects [from, to) with b.writers
// concurrent writers and returns the rate achieved.
func (b *bench) createObjects(ctx context.Context, from, to int) (float64, error) {
	if to <= from {
		return 0, nil
	}
	dyn, err := dynamic.NewForConfig(b.env.config(float32(b.writeQPS), b.writeQPS))
	if err != nil {
		return 0, err
	}
	done := atomic.Int64{}
	began := time.Now()
	stopProgress := make(chan struct{})
	go func() {
		t := time.NewTicker(15 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stopProgress:
				return
			case <-t.C:
				n := done.Load()
				b.logf("objects: %d of %d created (%.0f/s)", int(n)+from, to, float64(n)/time.Since(began).Seconds())
			}
		}
	}()
	firstErr := b.inParallel(ctx, from, to, func(i int) error {
		k := memoryKinds[i%len(memoryKinds)]
		j := i / len(memoryKinds)
		ns := fmt.Sprintf("%s%d", objNSBase, j%objNSs)
		obj := testfixture.Object(k.gvr, ns, fmt.Sprintf("obj-%07d", i), k.label, fmt.Sprintf("s%03d", j%b.scaleShards))
		if b.million {
			// As a controller makes them (a BundleDeployment is Fleet's):
			// no last-applied annotation, which at this count would also
			// hold the API server's watch cache at gigabytes.
			obj.SetAnnotations(nil)
		}
		if err := createRetried(ctx, dyn, k.gvr, obj); err != nil {
			return err
		}
		done.Add(1)
		return nil
	})
	close(stopProgress)
	if firstErr != nil {
		return 0, firstErr
	}
	rate := float64(to-from) / time.Since(began).Seconds()
	b.logf("objects: %d created in %s (%.0f/s)", to-from, time.Since(began).Round(time.Second), rate)
	return rate, nil
}

// inParallel calls do(i) for each i in [from, to), handed out in
// increasing order to b.writers goroutines, until ctx ends or do fails; it returns do's first
// error, or ctx's cause if ctx ended first.
func (b *bench) inParallel(ctx context.Context, from, to int, do func(i int) error) error {
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	for range b.writers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= to || ctx.Err() != nil {
					return
				}
				if err := do(i); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return firstErr
}

// createRetried creates obj, a gvr in its namespace, trying up to 30 times
// with a growing pause (the API server may be busy with the writers' load)
// until ctx ends; an object that already exists counts as created.
func createRetried(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error {
	client := dyn.Resource(gvr).Namespace(obj.GetNamespace())
	var err error
	for attempt := range 30 {
		_, err = client.Create(ctx, obj, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		if ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 100 * time.Millisecond)
	}
	return fmt.Errorf("creating %s %s/%s: %w", gvr.Resource, obj.GetNamespace(), obj.GetName(), err)
}

// settledMemory waits b.settle after p is ready, then reads its memory; on
// error it stops p.
func (b *bench) settledMemory(p *proc) (memory, error) {
	time.Sleep(b.settle)
	mem, err := readMemory(p.pid())
	if err != nil {
		p.stop()
	}
	return mem, err
}

// level is what was measured with a number of mapped objects present.
type level struct {
	Objects int
	// shardkeeper, one entry per run
	Ready, Counted []time.Duration
	Mem            []memory
	Heap           []float64 // go_memstats_heap_inuse_bytes
	StartCalls     calls     // the first run's requests from start to counted
	// steady: the last run's process, after a garbage collection that
	// followed the reading above, once its RSS stopped moving; at 0 objects
	// and the largest count only
	MemSteady   memory
	HeapSteady  float64
	SteadyAfter time.Duration // from counted
	// RefListed: a bare paged metadata LIST of the same objects (bench/ref
	// --list), from its process start to its last page, one entry per run
	RefListed []time.Duration
	// The API server's CPU during each bare LIST and during each of the
	// daemon's start-ups to every object counted, and the daemon's own
	// CPU by then, one entry per run: where a start-up's time went.
	APIListCPU, APIStartCPU, StartCPU []time.Duration
	// The API server's garbage collections during each bare LIST and each
	// start-up (its go_gc_duration_seconds_count), one entry per run: a
	// collection slows its handlers while it marks, and tells a slow run
	// apart from a slow daemon.
	APIListGCs, APIStartGCs []int
	// reference, one entry per run
	RefSynced      []time.Duration
	RefMem         []memory
	RefSteady      memory
	RefSteadyAfter time.Duration // from synced
	// decision latency: mean reconcile duration and reconciles per window
	AddMean, RemoveMean []time.Duration
	AddN, RemoveN       []int
}

// runScale sets b.scaleShards shards, then at every object count measures
// start-up and memory of the daemon and of the reference, and the decision
// latency; at the largest count it also watches an idle window.
func (b *bench) runScale(ctx context.Context) error {
	base := shardIDs(b.scaleShards)
	if err := b.createShards(ctx, base); err != nil {
		return err
	}
	if err := b.env.settle(ctx, 15*time.Minute); err != nil {
		b.notef("scale: %d shards did not settle: %v", b.scaleShards, err)
	}

	levels := append([]int{0}, b.objects...)
	have := 0
	top := levels[len(levels)-1]
	for _, n := range levels {
		rate, err := b.createObjects(ctx, have, n)
		if err != nil {
			return err
		}
		if n > have {
			b.res.WriteRates = append(b.res.WriteRates, writeRate{From: have, To: n, Rate: rate})
		}
		have = n
		lv := &level{Objects: n}
		b.res.Levels = append(b.res.Levels, lv)
		time.Sleep(5 * time.Second) // the API server's own follow-up (watch caches, GC graph)

		steady := n == 0 || n == top
		if err := b.daemonLevel(ctx, base, lv, steady, n == top && b.idle > 0); err != nil {
			return err
		}
		if err := b.referenceLevel(ctx, lv, steady); err != nil {
			return err
		}
	}
	return nil
}

// createShards starts a daemon, gives it the shards ids, and stops it once
// it reports every one of them Active.
func (b *bench) createShards(ctx context.Context, ids []string) error {
	d, err := b.env.startDaemon(ctx, b.daemonBin, b.daemonArgs)
	if err != nil {
		return err
	}
	defer d.stop()
	if _, err := d.waitReady(ctx, 2*time.Minute); err != nil {
		return err
	}
	if err := b.env.setShards(ctx, cmName, ids); err != nil {
		return err
	}
	return poll(ctx, 10*time.Minute, "shard Deployments created", func() error {
		m, err := scrape(ctx, d.metrics)
		if err != nil {
			return err
		}
		if n := m.sum("shardkeeper_shards", map[string]string{"state": "Active"}); int(n) != len(ids) {
			return fmt.Errorf("%v shards active", n)
		}
		return nil
	})
}

// daemonLevel measures the daemon at lv's object count: start-up, each
// beside a bare LIST run just before it, and memory over b.runs processes,
// then, on the last one, the decision latency, the idle window if idle,
// and the steady memory if steady.
func (b *bench) daemonLevel(ctx context.Context, base []string, lv *level, steady, idle bool) error {
	var kept *daemon
	var keptCounted time.Time
	var keptGC float64
	for r := range b.runs {
		// The LIST that start-up is measured against runs just before
		// each start-up, not minutes apart from all of them: the same
		// LIST took from 2.3 to 6.4 s within one run, as the machine's
		// pace moved, and a reference read at another time than its
		// figure moves the ratio with it. Each begins from a quiet
		// control plane, so that neither pays for the other's aftermath.
		api, err := b.env.cluster.PID("kube-apiserver")
		if err != nil {
			return err
		}
		if err := b.listRun(ctx, lv, r, api); err != nil {
			return err
		}
		d, counted, m, err := b.startRun(ctx, lv, r, api)
		if err != nil {
			return err
		}
		if r < b.runs-1 {
			d.stop()
		} else {
			kept, keptCounted, keptGC = d, counted, m.sum("go_gc_duration_seconds_count", nil)
		}
	}
	defer kept.stop()
	if err := b.decision(ctx, kept, base, lv); err != nil {
		return err
	}
	if idle {
		if err := b.idleWindow(ctx, kept); err != nil {
			return err
		}
	}
	if steady {
		return b.steadyDaemon(ctx, kept, keptCounted, keptGC, lv)
	}
	return nil
}

// listRun is the r-th bare LIST at lv's object count, from a quiet
// control plane, with the API server's (the process api) CPU and
// collections during it.
func (b *bench) listRun(ctx context.Context, lv *level, r, api int) error {
	if err := b.quiet(ctx, "the bare LIST"); err != nil {
		return err
	}
	mark, err := b.markAPI(ctx, api)
	if err != nil {
		return err
	}
	listed, err := b.bareList(lv.Objects, r)
	if err != nil {
		return err
	}
	cpu, gcs, err := b.sinceAPI(ctx, mark)
	if err != nil {
		return err
	}
	lv.RefListed = append(lv.RefListed, listed)
	lv.APIListCPU = append(lv.APIListCPU, cpu)
	lv.APIListGCs = append(lv.APIListGCs, gcs)
	return nil
}

// startRun is daemonRun from a quiet control plane.
func (b *bench) startRun(ctx context.Context, lv *level, r, api int) (*daemon, time.Time, samples, error) {
	if err := b.quiet(ctx, "the start-up"); err != nil {
		return nil, time.Time{}, nil, err
	}
	mark, err := b.markAPI(ctx, api)
	if err != nil {
		return nil, time.Time{}, nil, err
	}
	return b.daemonRun(ctx, lv, r, mark)
}

// apiMark is the API server's CPU time and collections at the start of a
// measurement.
type apiMark struct {
	pid int
	cpu time.Duration
	gcs int
}

// markAPI reads the API server's (the process pid) collections, then its
// CPU time: the scrape of its metrics is work of the API server's, and
// stays outside the window.
func (b *bench) markAPI(ctx context.Context, pid int) (apiMark, error) {
	gcs, err := b.apiServerGCs(ctx)
	if err != nil {
		return apiMark{}, err
	}
	cpu, err := cpuTime(pid)
	if err != nil {
		return apiMark{}, err
	}
	return apiMark{pid: pid, cpu: cpu, gcs: gcs}, nil
}

// sinceAPI is the API server's CPU time and collections since mark, its
// CPU read first, for the reason markAPI gives.
func (b *bench) sinceAPI(ctx context.Context, mark apiMark) (time.Duration, int, error) {
	cpu, err := cpuTime(mark.pid)
	if err != nil {
		return 0, 0, err
	}
	gcs, err := b.apiServerGCs(ctx)
	if err != nil {
		return 0, 0, err
	}
	return cpu - mark.cpu, gcs - mark.gcs, nil
}

// apiServerGCs is the API server's go_gc_duration_seconds_count.
func (b *bench) apiServerGCs(ctx context.Context) (int, error) {
	c, err := rest.HTTPClientFor(b.env.cfg)
	if err != nil {
		return 0, err
	}
	m, err := scrapeWith(ctx, c, b.env.host+"/metrics", b.env.token)
	if err != nil {
		return 0, fmt.Errorf("the API server's collections: %w", err)
	}
	for _, s := range m {
		if s.name == "go_gc_duration_seconds_count" {
			return int(s.value), nil
		}
	}
	return 0, errors.New("the API server's metrics hold no go_gc_duration_seconds_count")
}

// daemonRun is the r-th run of the daemon at lv's object count: it starts
// one, records its start-up, its CPU and the API server's CPU and
// collections (since mark, taken as the daemon started) to every object
// counted, and its memory in lv, and returns it still running, with when
// it counted every object and its metrics then.
func (b *bench) daemonRun(ctx context.Context, lv *level, r int, mark apiMark) (*daemon, time.Time, samples, error) {
	d, err := b.env.startDaemon(ctx, b.daemonBin, b.daemonArgs)
	if err != nil {
		return nil, time.Time{}, nil, err
	}
	ready, err := d.waitReady(ctx, 5*time.Minute)
	if err != nil {
		d.stop()
		return nil, time.Time{}, nil, err
	}
	counted, err := d.waitCounted(ctx, lv.Objects, 10*time.Minute)
	if err != nil {
		d.stop()
		return nil, time.Time{}, nil, err
	}
	own, err := cpuTime(d.pid())
	if err != nil {
		d.stop()
		return nil, time.Time{}, nil, err
	}
	apiCPU, apiGCs, err := b.sinceAPI(ctx, mark)
	if err != nil {
		d.stop()
		return nil, time.Time{}, nil, err
	}
	lv.APIStartCPU = append(lv.APIStartCPU, apiCPU)
	lv.APIStartGCs = append(lv.APIStartGCs, apiGCs)
	lv.StartCPU = append(lv.StartCPU, own)
	lv.Ready = append(lv.Ready, ready.Sub(d.started))
	lv.Counted = append(lv.Counted, counted.Sub(d.started))
	mem, err := b.settledMemory(d.proc)
	if err != nil {
		return nil, time.Time{}, nil, err
	}
	lv.Mem = append(lv.Mem, mem)
	m, err := scrape(ctx, d.metrics)
	if err != nil {
		d.stop()
		return nil, time.Time{}, nil, err
	}
	lv.Heap = append(lv.Heap, m.sum("go_memstats_heap_inuse_bytes", nil))
	if r == 0 {
		if c, err := readAuditQ(b.env.auditLog, DaemonUser, d.started, counted, true); err == nil {
			lv.StartCalls = c
		}
	}
	b.logf("objects %d run %d: ready %s, counted %s, RSS %s (peak %s)", lv.Objects, r+1,
		lv.Ready[r].Round(time.Millisecond), lv.Counted[r].Round(time.Millisecond), mib(mem.RSS), mib(mem.HWM))
	return d, counted, m, nil
}

// referenceLevel measures the full-informer reference at lv's object
// count (none in the million-object mode): start-up and memory over b.runs
// processes, and the steady memory of the last one if steady. The bare
// LIST runs in daemonLevel, beside each start-up.
func (b *bench) referenceLevel(ctx context.Context, lv *level, steady bool) error {
	n := lv.Objects
	if b.million {
		// The full dynamic informer would hold about 9 GiB here: the bare
		// LIST is the reference.
		return nil
	}
	for r := range b.runs {
		if err := b.quiet(ctx, "the reference"); err != nil {
			return err
		}
		p, err := startProc("ref", fmt.Sprintf("%s/ref-%d-%d.log", b.env.workDir, n, r), b.refBin, "--kubeconfig", b.env.adminKubeconfig)
		if err != nil {
			return err
		}
		if err := p.waitLine("synced", 15*time.Minute); err != nil {
			p.stop()
			return err
		}
		lv.RefSynced = append(lv.RefSynced, time.Since(p.started))
		synced := time.Now()
		mem, err := b.settledMemory(p)
		if err != nil {
			return err
		}
		lv.RefMem = append(lv.RefMem, mem)
		if steady && r == b.runs-1 {
			if err := b.steadyReference(ctx, p, synced, lv); err != nil {
				p.stop()
				return err
			}
		}
		p.stop()
		b.logf("objects %d run %d: reference synced %s, RSS %s (peak %s)", n, r+1, lv.RefSynced[r].Round(time.Millisecond), mib(mem.RSS), mib(mem.HWM))
	}
	return nil
}

// bareList runs the start-up reference, a bare paged metadata LIST of the
// n objects (bench/ref --list), and returns the time from its process
// start to its last page.
func (b *bench) bareList(n, r int) (time.Duration, error) {
	p, err := startProc("list", fmt.Sprintf("%s/list-%d-%d.log", b.env.workDir, n, r), b.refBin,
		"--kubeconfig", b.env.adminKubeconfig, "--list", "--page-size", "500")
	if err != nil {
		return 0, err
	}
	defer p.stop()
	if err := p.waitLine("listed", 15*time.Minute); err != nil {
		return 0, err
	}
	took := time.Since(p.started)
	b.logf("objects %d run %d: bare metadata LIST %s", n, r+1, took.Round(time.Millisecond))
	return took, nil
}

// steadyReference waits until the reference p has completed a garbage
// collection since now and its RSS has stopped moving, and records its
// memory then, and how long after it synced.
func (b *bench) steadyReference(ctx context.Context, p *proc, synced time.Time, lv *level) error {
	// A Go process that has never collected (its heap never passed the
	// first goal) is not forced to; it has nothing to give back either.
	gc0 := p.gcCount()
	if err := poll(ctx, 4*time.Minute, "a garbage collection in the reference", func() error {
		if gc0 == 0 {
			return nil
		}
		if p.gcCount() <= gc0 {
			return fmt.Errorf("%d collections", p.gcCount())
		}
		return nil
	}); err != nil {
		b.notef("objects %d: %v", lv.Objects, err)
	}
	var err error
	lv.RefSteady, err = waitStableRSS(p.pid(), time.Minute)
	lv.RefSteadyAfter = time.Since(synced)
	if err != nil {
		return err
	}
	b.logf("objects %d: reference steady RSS %s, %s after synced", lv.Objects, mib(lv.RefSteady.RSS), lv.RefSteadyAfter.Round(time.Second))
	return nil
}

// steadyAfter is how long after counting every object the steady memory
// is read at the earliest: past the daemon's start-up garbage collector
// target (pkg/mapped, restored once every kind has synced) and past the
// collection that an idle Go process forces every two minutes, so that
// every run reads the same state, not wherever its collection cycle is.
const steadyAfter = 2*time.Minute + 10*time.Second

// steadyDaemon waits until steadyAfter has passed since counted and the
// daemon has completed a garbage collection since then (an idle Go process
// collects at least every two minutes), and its RSS has stopped moving,
// and records its memory then.
func (b *bench) steadyDaemon(ctx context.Context, d *daemon, counted time.Time, gc0 float64, lv *level) error {
	if wait := time.Until(counted.Add(steadyAfter)); wait > 0 {
		b.logf("objects %d: waiting %s for the steady memory", lv.Objects, wait.Round(time.Second))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		if m, err := scrape(ctx, d.metrics); err == nil {
			gc0 = m.sum("go_gc_duration_seconds_count", nil)
		}
	}
	if err := poll(ctx, 4*time.Minute, "a garbage collection in shardkeeper", func() error {
		if gc0 == 0 {
			return nil
		}
		m, err := scrape(ctx, d.metrics)
		if err != nil {
			return err
		}
		if n := m.sum("go_gc_duration_seconds_count", nil); n <= gc0 {
			return fmt.Errorf("%v collections", n)
		}
		return nil
	}); err != nil {
		b.notef("objects %d: %v", lv.Objects, err)
	}
	mem, err := waitStableRSS(d.pid(), time.Minute)
	if err != nil {
		return err
	}
	lv.MemSteady, lv.SteadyAfter = mem, time.Since(counted)
	if m, err := scrape(ctx, d.metrics); err == nil {
		lv.HeapSteady = m.sum("go_memstats_heap_inuse_bytes", nil)
	}
	b.logf("objects %d: shardkeeper steady RSS %s, %s after counted", lv.Objects, mib(mem.RSS), lv.SteadyAfter.Round(time.Second))
	return nil
}

// decision adds one shard, waits until its Deployments are rolled out and
// the daemon has stopped reconciling, and reads the mean reconcile duration
// over that window from the histogram; then removes the shard the same way.
func (b *bench) decision(ctx context.Context, d *daemon, base []string, lv *level) error {
	window := func(from, to []string) (time.Duration, int, error) {
		before, err := scrape(ctx, d.metrics)
		if err != nil {
			return 0, 0, err
		}
		if _, err := b.env.controllerStep(ctx, cmName, d.pid(), clones, from, to, 0); err != nil {
			return 0, 0, err
		}
		if err := b.env.settle(ctx, 5*time.Minute); err != nil {
			b.notef("decision latency at %d objects: %v", lv.Objects, err)
		}
		after, err := b.quietReconciles(ctx, d, 3*time.Second, time.Minute)
		if err != nil {
			return 0, 0, err
		}
		n := after.sum("shardkeeper_reconcile_duration_seconds_count", nil) - before.sum("shardkeeper_reconcile_duration_seconds_count", nil)
		s := after.sum("shardkeeper_reconcile_duration_seconds_sum", nil) - before.sum("shardkeeper_reconcile_duration_seconds_sum", nil)
		if n <= 0 {
			return 0, 0, fmt.Errorf("no reconcile at %d objects", lv.Objects)
		}
		return time.Duration(s / n * float64(time.Second)), int(n), nil
	}
	for r := range b.latencyRuns {
		extra := append(append([]string{}, base...), fmt.Sprintf("x%d", r))
		mean, n, err := window(base, extra)
		if err != nil {
			return err
		}
		lv.AddMean, lv.AddN = append(lv.AddMean, mean), append(lv.AddN, n)
		mean2, n2, err := window(extra, base)
		if err != nil {
			return err
		}
		lv.RemoveMean, lv.RemoveN = append(lv.RemoveMean, mean2), append(lv.RemoveN, n2)
		b.logf("objects %d run %d: reconcile mean %s over %d (add a shard), %s over %d (remove it)", lv.Objects, r+1, mean, n, mean2, n2)
	}
	return nil
}

// quietReconciles waits until the reconcile count has not changed for
// quiet, and returns the metrics then.
func (b *bench) quietReconciles(ctx context.Context, d *daemon, quiet, timeout time.Duration) (samples, error) {
	return b.quietMetric(ctx, d, "shardkeeper_reconcile_duration_seconds_count", "reconciling", quiet, timeout)
}

// quietMetric waits until the daemon's metric has not changed for quiet,
// and returns the metrics then; doing names what the daemon kept doing.
func (b *bench) quietMetric(ctx context.Context, d *daemon, metric, doing string, quiet, timeout time.Duration) (samples, error) {
	deadline := time.Now().Add(timeout)
	last, err := scrape(ctx, d.metrics)
	if err != nil {
		return nil, err
	}
	since := time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
		m, err := scrape(ctx, d.metrics)
		if err != nil {
			return nil, err
		}
		if m.sum(metric, nil) != last.sum(metric, nil) {
			last, since = m, time.Now()
			continue
		}
		if time.Since(since) >= quiet {
			return m, nil
		}
	}
	return nil, fmt.Errorf("shardkeeper kept %s for %s", doing, timeout)
}

// idle is what the idle window showed.
type idle struct {
	Window          time.Duration
	Objects, Shards int
	Audit           calls
	DaemonWrites    float64 // shardkeeper_api_writes_total
	Reconciles      float64
	// apiserver_request_total, every client
	APIWritesDaemonRes, APIListsDaemonRes float64
	APIByResource                         map[string]float64
	APILabels                             []string
}

// daemonResources are the resources the daemon reads or writes.
var daemonResources = map[string]bool{"deployments": true, "configmaps": true, "events": true,
	"gitrepos": true, "helmops": true, "helmreleases": true, "customresourcedefinitions": true}

// idleWindow waits until the namespaces have settled and the daemon d has
// stopped reconciling, and then counts, over b.idle in which the benchmark
// sends the API server nothing, the daemon's requests (the audit log), its
// writes and reconciles (its metrics) and every client's requests (the API
// server's metrics).
func (b *bench) idleWindow(ctx context.Context, d *daemon) error {
	if err := b.env.settle(ctx, 5*time.Minute); err != nil {
		b.notef("idle window: %v", err)
	}
	if _, err := b.quietReconciles(ctx, d, 10*time.Second, 2*time.Minute); err != nil {
		return err
	}
	apiClient, err := rest.HTTPClientFor(b.env.cfg)
	if err != nil {
		return err
	}
	api0, err := scrapeWith(ctx, apiClient, b.env.host+"/metrics", b.env.token)
	if err != nil {
		return err
	}
	d0, err := scrape(ctx, d.metrics)
	if err != nil {
		return err
	}
	t0 := time.Now()
	b.logf("idle window: %s from %s, the benchmark sends the API server nothing", b.idle, t0.Format(time.TimeOnly))
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(b.idle):
	}
	t1 := time.Now()
	d1, err := scrape(ctx, d.metrics)
	if err != nil {
		return err
	}
	api1, err := scrapeWith(ctx, apiClient, b.env.host+"/metrics", b.env.token)
	if err != nil {
		return err
	}
	time.Sleep(time.Second) // the audit log is written as requests complete
	c, err := readAudit(b.env.auditLog, t0, t1)
	if err != nil {
		return err
	}
	res := &idle{Window: t1.Sub(t0), Objects: b.res.Levels[len(b.res.Levels)-1].Objects, Shards: b.scaleShards, Audit: c,
		DaemonWrites: d1.sum("shardkeeper_api_writes_total", nil) - d0.sum("shardkeeper_api_writes_total", nil),
		Reconciles:   d1.sum("shardkeeper_reconcile_duration_seconds_count", nil) - d0.sum("shardkeeper_reconcile_duration_seconds_count", nil),
	}
	res.countAPIRequests(api0, api1)
	b.res.Idle = res
	b.logf("idle window: audit %s; shardkeeper_api_writes_total +%v; reconciles +%v", c, res.DaemonWrites, res.Reconciles)
	return nil
}

// countAPIRequests sets the API server's requests of the window from its
// apiserver_request_total before and after: by verb and resource, the
// labels the metric has, and the writes and lists of the resources the
// daemon uses.
func (w *idle) countAPIRequests(before, after samples) {
	labelSet := map[string]bool{}
	delta := map[string]float64{}
	for _, s := range after {
		if s.name != "apiserver_request_total" {
			continue
		}
		for k := range s.labels {
			labelSet[k] = true
		}
		delta[key(s.labels)] += s.value
	}
	for _, s := range before {
		if s.name == "apiserver_request_total" {
			delta[key(s.labels)] -= s.value
		}
	}
	w.APIByResource = map[string]float64{}
	for k, v := range delta {
		if v == 0 {
			continue
		}
		verb, res, _ := strings.Cut(k, " ")
		w.APIByResource[k] = v
		if daemonResources[strings.SplitN(res, "/", 2)[0]] {
			switch verb {
			case "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY":
				w.APIWritesDaemonRes += v
			case "LIST":
				w.APIListsDaemonRes += v
			}
		}
	}
	w.APILabels = slices.Sorted(maps.Keys(labelSet))
}

func key(l map[string]string) string {
	r := l["resource"]
	if l["subresource"] != "" {
		r += "/" + l["subresource"]
	}
	return l["verb"] + " " + r
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

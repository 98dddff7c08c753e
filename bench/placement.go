package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"sigs.k8s.io/yaml"

	"github.com/shardkeeper/shardkeeper/pkg/placement"
	"github.com/shardkeeper/shardkeeper/pkg/source"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// The placement part's namespaces: the daemon places the objects of the
// first (its placement scope names it alone); the reference labels those of
// the second. The scale part's objects live elsewhere (objNSBase), and the
// placement part deletes every object it made before it ends, so the
// daemon's counts there are not touched.
const (
	placeNS    = "bench-place"
	placeRefNS = "bench-place-ref"
)

// The daemon's default client limits (--kube-api-qps, --kube-api-burst),
// which the reference uses too unless --daemon-arg sets others.
const (
	daemonQPS   = 50
	daemonBurst = 300
)

// refWriters is the reference's parallel writers: the mover's own bound
// on relabels in flight.
const refWriters = 8

// placementKinds are the mapped kinds placement labels, with their shard
// labels; objects take them in turn. GitRepos alone: the part times
// placement's writes against a labeller that sends one patch per object,
// and GitRepos are the kind placement spreads object by object with one
// patch each. Flux's kinds are placed by namespace (the HelmReleases of
// one namespace move as one unit, to one shard), and a HelmRelease's or a
// HelmOp's move reads the object first, for the labels it writes into its
// spec (source.MappedKind.SpecLabels).
var placementKinds = []struct {
	gvr   schema.GroupVersionResource
	label string
}{
	{testfixture.GitRepos, source.FleetShardRefLabel},
}

// placementSetting is the placement setting of the part's runs and of its
// bursts: a scope of placeNS alone, with the bursts' pacing (burstPacing),
// 100 moves a second, twice the client's QPS, so that the client's rate
// limiter bounds the daemon as it does the reference. The defaults pace
// the assignment of objects that the unsharded controllers serve, as the
// part's are, at 50 per 30 s.
func placementSetting() string { return "namespaces: [" + placeNS + "]\n" + burstPacing }

// placementIDs returns the IDs of n placement shards: p00, p01, ...
func placementIDs(n int) []string {
	width := max(2, len(strconv.Itoa(n-1)))
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("p%0*d", width, i)
	}
	return out
}

// placementRun is one run of the daemon and one of the reference.
type placementRun struct {
	// shardkeeper: from the first create to the last create's response,
	// and to the watch event of the last object to get a shard label
	Created, Labelled time.Duration
	CreateRate        float64
	Loads             map[string]int // objects per shard label
	// its requests from the first create to the end of the quiet window
	// after the last label (audit log): writes to the mapped kinds, their
	// response codes, and every write
	MappedWrites calls
	Codes        map[int]int
	Writes       calls
	Moves        map[string]float64 // shardkeeper_placement_moves_total, by "reason/result"
	// the reference, timed the same way
	RefCreated, RefLabelled time.Duration
	RefCreateRate           float64
	RefLoads                map[string]int
	RefPatches, RefConflict int
}

// placementResult is the placement part: its settings and every run.
type placementResult struct {
	Objects, Shards int
	// Settings is the placement setting of the runs.
	Settings string
	QPS      float32
	Burst    int
	Quiet    time.Duration
	Runs     []*placementRun
	// Bursts are the bursts with and without the stamping policy; nil when
	// not measured.
	Bursts *placementBurst `json:",omitempty"`
}

// Flow writes Settings on one line, as a YAML flow mapping.
func (p *placementResult) Flow() string { return flow(p.Settings) }

// flow writes a placement setting of one key a line as a YAML flow
// mapping, on one line.
func flow(settings string) string {
	return "{" + strings.Join(strings.Split(strings.TrimSpace(settings), "\n"), ", ") + "}"
}

// balance returns the largest load over the mean load of ids.
func balance(loads map[string]int, ids []string) float64 {
	total, most := 0, 0
	for _, id := range ids {
		total += loads[id]
		most = max(most, loads[id])
	}
	if total == 0 {
		return 0
	}
	return float64(most) / (float64(total) / float64(len(ids)))
}

// clientLimits returns the daemon's client QPS and burst: its defaults, or
// what --daemon-arg set.
func clientLimits(args []string) (float32, int) {
	qps, burst := float32(daemonQPS), daemonBurst
	for i, a := range args {
		for _, name := range []string{"--kube-api-qps", "--kube-api-burst"} {
			v, ok := strings.CutPrefix(a, name+"=")
			if !ok && a == name && i+1 < len(args) {
				v, ok = args[i+1], true
			}
			if !ok {
				continue
			}
			if name == "--kube-api-qps" {
				if f, err := strconv.ParseFloat(v, 32); err == nil {
					qps = float32(f)
				}
			} else if n, err := strconv.Atoi(v); err == nil {
				burst = n
			}
		}
	}
	return qps, burst
}

// runPlacement starts a daemon with --allow-placement, gives it
// b.placementShards shards and a placement scope of placeNS alone, waits
// until every shard is ready (placement puts objects on ready shards only),
// and then, b.placementRuns times, has the reference and the daemon each
// label b.placementObjects new objects. It leaves no object, shard or
// placement setting behind.
func (b *bench) runPlacement(ctx context.Context) (err error) {
	ids := placementIDs(b.placementShards)
	qps, burst := clientLimits(b.daemonArgs)
	pr := &placementResult{Objects: b.placementObjects, Shards: len(ids), Settings: placementSetting(),
		QPS: qps, Burst: burst, Quiet: 10 * time.Second}
	b.res.Placement = pr
	if err := b.env.createNamespaces(ctx, placeNS, placeRefNS); err != nil {
		return err
	}
	d, err := b.env.startDaemon(ctx, b.daemonBin, append(slices.Clone(b.daemonArgs), "--allow-placement"))
	if err != nil {
		return err
	}
	defer func() {
		if cerr := b.placementCleanup(ctx, d, ids); cerr != nil {
			err = errors.Join(err, fmt.Errorf("cleaning up: %w", cerr))
		}
	}()
	base, err := b.placementShardsReady(ctx, d, ids)
	if err != nil {
		return err
	}
	for r := range b.placementRuns {
		run := &placementRun{}
		if err := b.placementReference(ctx, ids, r, run); err != nil {
			return fmt.Errorf("reference, run %d: %w", r+1, err)
		}
		if err := b.clearPlacement(ctx, d, placeRefNS, base); err != nil {
			return err
		}
		if err := b.placementDaemon(ctx, d, ids, r, run); err != nil {
			return fmt.Errorf("shardkeeper, run %d: %w", r+1, err)
		}
		if err := b.clearPlacement(ctx, d, placeNS, base); err != nil {
			return err
		}
		pr.Runs = append(pr.Runs, run)
	}
	if b.placementBurst > 0 {
		// d is the daemon the cleanup stops: the bursts' own from here.
		nd, berr := b.runBursts(ctx, d, ids, base)
		if nd != nil {
			d = nd
		}
		if berr != nil {
			return fmt.Errorf("bursts: %w", berr)
		}
	}
	return nil
}

// placementShardsReady waits until the daemon d is ready and its caches
// have synced, gives it the shards ids with a placement scope of placeNS
// alone, and waits until every shard is ready and the daemon has stopped
// reconciling. It returns the mapped objects the daemon counted before the
// placement part made any.
func (b *bench) placementShardsReady(ctx context.Context, d *daemon, ids []string) (float64, error) {
	if _, err := d.waitReady(ctx, 2*time.Minute); err != nil {
		return 0, err
	}
	var base float64
	if err := poll(ctx, 2*time.Minute, "shardkeeper's caches synced", func() error {
		m, err := scrape(ctx, d.metrics)
		if err != nil {
			return err
		}
		if !m.has("shardkeeper_shards") {
			return errors.New("no shard counts yet")
		}
		base = m.sum("shardkeeper_mapped_objects", nil)
		return nil
	}); err != nil {
		return 0, err
	}
	b.logf("placement: %d shards, scope namespaces [%s]", len(ids), placeNS)
	if err := b.env.setPlacement(ctx, ids, b.res.Placement.Settings); err != nil {
		return 0, err
	}
	if err := b.env.waitShardsReady(ctx, ids, 10*time.Minute); err != nil {
		return 0, err
	}
	if err := b.env.settle(ctx, 10*time.Minute); err != nil {
		b.notef("placement: %d shards did not settle: %v", len(ids), err)
	}
	if _, err := b.quietReconciles(ctx, d, 3*time.Second, 2*time.Minute); err != nil {
		return 0, err
	}
	return base, nil
}

// placementDaemon creates the objects in placeNS and times the daemon's
// labelling of them; then waits until placement has moved nothing for
// pr.Quiet and reads the daemon's requests over the whole window from the
// audit log.
func (b *bench) placementDaemon(ctx context.Context, d *daemon, ids []string, r int, run *placementRun) error {
	pr := b.res.Placement
	m0, err := scrape(ctx, d.metrics)
	if err != nil {
		return err
	}
	p, err := b.placeObjects(ctx, placeNS, fmt.Sprintf("r%d", r), nil)
	if err != nil {
		return err
	}
	t0, loads := p.t0, p.loads
	run.Created, run.Labelled, run.Loads = p.created.Sub(t0), p.labelled.Sub(t0), loads
	run.CreateRate = float64(pr.Objects) / run.Created.Seconds()
	m1, err := b.quietMoves(ctx, d, pr.Quiet, 5*time.Minute)
	if err != nil {
		return err
	}
	t1 := time.Now()
	run.Moves = movesBetween(m0, m1)
	time.Sleep(time.Second) // the audit log is written as requests complete
	c, err := readAudit(b.env.auditLog, t0, t1)
	if err != nil {
		return err
	}
	run.Writes = c.filter(func(k callKey) bool { return isWrite(k.verb) })
	run.MappedWrites = run.Writes.filter(func(k callKey) bool { return isMappedKind(k.resource) })
	if run.Codes, err = mappedWriteCodes(b.env.auditLog, t0, t1); err != nil {
		return err
	}
	b.logf("placement run %d: shardkeeper labelled %d objects in %s (created in %s, %.0f/s); writes to the mapped kinds %s (responses %v); balance %.3f; moves %v",
		r+1, pr.Objects, run.Labelled.Round(time.Millisecond), run.Created.Round(time.Millisecond), run.CreateRate, run.MappedWrites, run.Codes, balance(loads, ids), run.Moves)
	if n := run.MappedWrites.Writes(); n != pr.Objects {
		b.notef("placement run %d: shardkeeper wrote %d times to the mapped kinds for %d objects (%s; responses %v; moves %v)", r+1, n, pr.Objects, run.MappedWrites, run.Codes, run.Moves)
	}
	for shard := range loads {
		if !slices.Contains(ids, shard) {
			b.notef("placement run %d: %d objects labelled %q, which is not a placement shard", r+1, loads[shard], shard)
		}
	}
	return nil
}

// placementReference runs the reference on placeRefNS, timed as the daemon
// is: a bare client-go labeller in this process, with the daemon's client
// limits, its own metadata watch on both kinds, and refWriters writers that
// patch every object that arrives without a shard label (the next shard in
// turn, the same annotations as placement's, the resourceVersion the watch
// delivered as precondition).
func (b *bench) placementReference(ctx context.Context, ids []string, r int, run *placementRun) error {
	pr := b.res.Placement
	cfg := b.env.config(pr.QPS, pr.Burst)
	cfg.Timeout = 0
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	w, err := watchMapped(ctx, md, placeRefNS, 4*pr.Objects+1024)
	if err != nil {
		return err
	}
	defer w.stop()
	todo := make(chan mevent, pr.Objects+1024)
	go unlabelledAdds(ctx, w, todo, cancel)
	l := &refLabeller{md: md, ids: ids}
	var wg sync.WaitGroup
	for range refWriters {
		wg.Go(func() { l.label(ctx, todo, cancel) })
	}
	p, err := b.placeObjects(ctx, placeRefNS, fmt.Sprintf("r%d", r), cancel)
	cancel(nil)
	wg.Wait()
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			return cause
		}
		return err
	}
	run.RefCreated, run.RefLabelled, run.RefLoads = p.created.Sub(p.t0), p.labelled.Sub(p.t0), p.loads
	run.RefCreateRate = float64(pr.Objects) / run.RefCreated.Seconds()
	run.RefPatches, run.RefConflict = int(l.patches.Load()), int(l.conflicts.Load())
	b.logf("placement run %d: reference labelled %d objects in %s (created in %s, %.0f/s); %d patches, %d conflicts; balance %.3f",
		r+1, pr.Objects, run.RefLabelled.Round(time.Millisecond), run.RefCreated.Round(time.Millisecond), run.RefCreateRate, run.RefPatches, run.RefConflict, balance(p.loads, ids))
	return nil
}

// unlabelledAdds hands the reference's writers, through todo, every object
// that w sees arrive without a shard label, until ctx ends; it closes todo
// then. A failed watch cancels ctx with its error.
func unlabelledAdds(ctx context.Context, w *mwatch, todo chan<- mevent, cancel context.CancelCauseFunc) {
	defer close(todo)
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-w.events:
			if ev.err != nil {
				cancel(ev.err)
				return
			}
			if ev.typ == watch.Added && !ev.labelled {
				todo <- ev
			}
		}
	}
}

// refLabeller is the reference's labelling, shared by its writers: the
// shards it deals out in turn and the patches it has sent.
type refLabeller struct {
	md  metadata.Interface
	ids []string
	// next is the turn of the next object; patches and conflicts count
	// the patches sent and those refused for a stale resourceVersion.
	next, patches, conflicts atomic.Int64
}

// label patches each object of todo with the next shard in turn, until
// todo closes or ctx ends; a patch that fails for any reason but a
// conflict cancels ctx with its error.
func (l *refLabeller) label(ctx context.Context, todo <-chan mevent, cancel context.CancelCauseFunc) {
	for ev := range todo {
		shard := l.ids[int(l.next.Add(1)-1)%len(l.ids)]
		body, _ := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": ev.rv,
			"labels":          map[string]string{ev.label: shard},
			"annotations": map[string]string{
				placement.AssignedShardAnnotation: shard,
				placement.AssignedAtAnnotation:    time.Now().UTC().Format(time.RFC3339),
			},
		}})
		_, err := l.md.Resource(ev.gvr).Namespace(placeRefNS).Patch(ctx, ev.name, types.MergePatchType, body, metav1.PatchOptions{})
		l.patches.Add(1)
		switch {
		case err == nil:
		case apierrors.IsConflict(err):
			l.conflicts.Add(1)
		case ctx.Err() != nil:
			return
		default:
			cancel(fmt.Errorf("patching %s %s/%s: %w", ev.gvr.Resource, placeRefNS, ev.name, err))
			return
		}
	}
}

// placed is what placeObjects timed: the first create, the last create's
// response and the watch event that brought the last shard label; and the
// objects per shard label.
type placed struct {
	t0, created, labelled time.Time
	loads                 map[string]int
}

// placeObjects starts a watch on the mapped kinds of ns, creates
// b.placementObjects objects there without a shard label (placementKinds
// in turn, as testfixture.Object makes them) with b.writers writers
// at b.writeQPS, and waits until every one carries a shard label. It
// returns the time of the first create, of the last create's response and
// of the watch event that brought the last label, with the label each
// object ended with. abort, if not nil, is called when the creates fail.
func (b *bench) placeObjects(ctx context.Context, ns, prefix string, abort context.CancelCauseFunc) (placed, error) {
	n := b.placementObjects
	wcfg := b.env.config(1000, 2000)
	wcfg.Timeout = 0
	md, err := metadata.NewForConfig(wcfg)
	if err != nil {
		return placed{}, err
	}
	w, err := watchMapped(ctx, md, ns, 4*n+1024)
	if err != nil {
		return placed{}, err
	}
	defer w.stop()
	want := map[string]bool{}
	for i := range n {
		want[placementKinds[i%len(placementKinds)].gvr.Resource+"/"+fmt.Sprintf("%s-%06d", prefix, i)] = true
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan error, 1)
	var p placed
	p.t0 = time.Now()
	go func() {
		err := b.createUnlabelled(ctx, ns, prefix, n)
		p.created = time.Now()
		if err != nil {
			cancel(err)
			if abort != nil {
				abort(err)
			}
		}
		done <- err
	}()
	timeout := 5*time.Minute + time.Duration(2*float64(n)/float64(b.res.Placement.QPS)*float64(time.Second))
	labelled, labels, err := w.waitLabelled(ctx, want, timeout)
	if err != nil {
		cancel(err)
	}
	if cerr := <-done; cerr != nil && err == nil {
		err = cerr
	}
	b.env.rewatches += w.rewatches.Load()
	if err != nil {
		return placed{}, err
	}
	p.labelled, p.loads = labelled, map[string]int{}
	for _, shard := range labels {
		p.loads[shard]++
	}
	return p, nil
}

// createUnlabelled creates n objects prefix-000000, ... in ns, of
// placementKinds in turn, each testfixture.Object without its shard label,
// with b.writers concurrent writers at b.writeQPS (as the scale part's).
func (b *bench) createUnlabelled(ctx context.Context, ns, prefix string, n int) error {
	dyn, err := dynamic.NewForConfig(b.env.config(float32(b.writeQPS), b.writeQPS))
	if err != nil {
		return err
	}
	return b.inParallel(ctx, 0, n, func(i int) error {
		k := placementKinds[i%len(placementKinds)]
		obj := testfixture.Object(k.gvr, ns, fmt.Sprintf("%s-%06d", prefix, i), k.label, "")
		obj.SetLabels(nil)
		return createRetried(ctx, dyn, k.gvr, obj)
	})
}

// clearPlacement deletes the mapped objects of ns, waits until both kinds
// list none there and the daemon counts base mapped objects again, and
// then until it has not reconciled for 3 s.
func (b *bench) clearPlacement(ctx context.Context, d *daemon, ns string, base float64) error {
	cfg := b.env.config(1000, 2000)
	cfg.Timeout = 10 * time.Minute
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	began := time.Now()
	for _, k := range placementKinds {
		if err := dyn.Resource(k.gvr).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the %s of %s: %w", k.gvr.Resource, ns, err)
		}
	}
	if err := poll(ctx, 10*time.Minute, "the objects of "+ns+" deleted", func() error {
		for _, k := range placementKinds {
			l, err := dyn.Resource(k.gvr).Namespace(ns).List(ctx, metav1.ListOptions{Limit: 1})
			if err != nil {
				return err
			}
			if len(l.Items) > 0 {
				return fmt.Errorf("%s left", k.gvr.Resource)
			}
		}
		if d == nil {
			return nil
		}
		m, err := scrape(ctx, d.metrics)
		if err != nil {
			return err
		}
		if got := m.sum("shardkeeper_mapped_objects", nil); got != base {
			return fmt.Errorf("shardkeeper counts %v mapped objects, %v before", got, base)
		}
		return nil
	}); err != nil {
		return err
	}
	b.logf("placement: the objects of %s deleted in %s", ns, time.Since(began).Round(time.Second))
	if d == nil {
		return nil
	}
	_, err = b.quietReconciles(ctx, d, 3*time.Second, 2*time.Minute)
	return err
}

// placementCleanup deletes the placement objects, sets the ConfigMap back
// to no shards and no placement, waits for the placement shards'
// Deployments to go, stops the daemon, and deletes the namespaces.
func (b *bench) placementCleanup(ctx context.Context, d *daemon, ids []string) error {
	defer d.stop()
	var errs []error
	for _, ns := range []string{placeNS, placeRefNS} {
		errs = append(errs, b.clearPlacement(ctx, nil, ns, 0))
	}
	body, _ := json.Marshal(map[string]any{"data": map[string]any{"shards": "[]", "placement": nil}})
	if _, err := b.env.kube.CoreV1().ConfigMaps(fleetNS).Patch(ctx, cmName, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		return errors.Join(append(errs, err)...)
	}
	want := clones(ids)
	errs = append(errs, poll(ctx, 10*time.Minute, "the placement shards' Deployments deleted", func() error {
		for _, ns := range []string{fleetNS, fluxNS} {
			l, err := b.env.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for _, dep := range l.Items {
				if want[ns+"/"+dep.Name] {
					return fmt.Errorf("%s/%s left", ns, dep.Name)
				}
			}
		}
		return nil
	}))
	d.stop()
	errs = append(errs, b.env.deleteStampRecords(ctx))
	if err := b.env.settle(ctx, 10*time.Minute); err != nil {
		b.notef("placement: after removing the shards: %v", err)
	}
	for _, ns := range []string{placeNS, placeRefNS} {
		if err := b.env.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// setPlacement patches the shard ConfigMap's shards and placement keys,
// as `kubectl patch --type merge`.
func (e *env) setPlacement(ctx context.Context, ids []string, placement string) error {
	b, _ := json.Marshal(map[string]any{"data": map[string]string{"shards": strings.Join(ids, ","), "placement": placement}})
	_, err := e.kube.CoreV1().ConfigMaps(fleetNS).Patch(ctx, cmName, types.MergePatchType, b, metav1.PatchOptions{})
	return err
}

// waitShardsReady waits until the daemon's status ConfigMap reports every
// shard of ids Active with all its Deployments ready: the reconcile that
// writes that report is the one that hands placement its targets.
func (e *env) waitShardsReady(ctx context.Context, ids []string, timeout time.Duration) error {
	return poll(ctx, timeout, "placement shards ready", func() error {
		cm, err := e.kube.CoreV1().ConfigMaps(fleetNS).Get(ctx, cmName+"-status", metav1.GetOptions{})
		if err != nil {
			return err
		}
		var shards []struct {
			ID             string `json:"id"`
			State          string `json:"state"`
			Ready, Desired int
		}
		if err := yaml.Unmarshal([]byte(cm.Data["status"]), &shards); err != nil {
			return err
		}
		ready := map[string]bool{}
		for _, s := range shards {
			ready[s.ID] = s.State == "Active" && s.Desired > 0 && s.Ready == s.Desired
		}
		for _, id := range ids {
			if !ready[id] {
				return fmt.Errorf("shard %s not ready", id)
			}
		}
		return nil
	})
}

// movesBetween returns the growth of shardkeeper_placement_moves_total
// from m0 to m1, by "reason/result", without the series that did not grow.
func movesBetween(m0, m1 samples) map[string]float64 {
	out := map[string]float64{}
	for _, s := range m1 {
		if s.name == "shardkeeper_placement_moves_total" {
			out[s.labels["reason"]+"/"+s.labels["result"]] += s.value
		}
	}
	for _, s := range m0 {
		if s.name == "shardkeeper_placement_moves_total" {
			k := s.labels["reason"] + "/" + s.labels["result"]
			if out[k] -= s.value; out[k] == 0 {
				delete(out, k)
			}
		}
	}
	return out
}

// quietMoves waits until shardkeeper_placement_moves_total has not changed
// for quiet, and returns the metrics then.
func (b *bench) quietMoves(ctx context.Context, d *daemon, quiet, timeout time.Duration) (samples, error) {
	return b.quietMetric(ctx, d, "shardkeeper_placement_moves_total", "moving objects", quiet, timeout)
}

func isMappedKind(resource string) bool {
	r, _, _ := strings.Cut(resource, "/")
	return r == "gitrepos" || r == "helmreleases" || r == "helmops"
}

// mappedWriteCodes counts the response codes of the daemon user's writes
// to the mapped kinds received in [from, to], from the audit log.
func mappedWriteCodes(path string, from, to time.Time) (map[int]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[int]int{}
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			auditEvent
			ResponseStatus *struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("audit log %s: %w", path, err)
		}
		if ev.User.Username != DaemonUser || ev.ObjectRef == nil || !isWrite(ev.Verb) || !isMappedKind(ev.ObjectRef.Resource) ||
			ev.Stage != "ResponseComplete" || seen[ev.AuditID] {
			continue
		}
		if ev.RequestReceivedTimestamp.Before(from) || ev.RequestReceivedTimestamp.After(to) {
			continue
		}
		seen[ev.AuditID] = true
		code := 0
		if ev.ResponseStatus != nil {
			code = ev.ResponseStatus.Code
		}
		out[code]++
	}
	return out, sc.Err()
}

// mwatch watches the metadata of the mapped kinds in one namespace, from
// their current resourceVersion, and timestamps each event as it arrives;
// like dwatch, it resumes a watch the API server closed.
type mwatch struct {
	cancel    context.CancelFunc
	events    chan mevent
	rewatches atomic.Int64
}

type mevent struct {
	typ             watch.EventType
	gvr             schema.GroupVersionResource
	label           string // the kind's shard label
	name, rv, shard string
	labelled        bool
	at              time.Time
	err             error
}

func watchMapped(ctx context.Context, md metadata.Interface, ns string, buffer int) (*mwatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &mwatch{cancel: cancel, events: make(chan mevent, buffer)}
	send := func(ev mevent) bool {
		select {
		case w.events <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for _, k := range placementKinds {
		client := md.Resource(k.gvr).Namespace(ns)
		t := watchTarget{what: k.gvr.Resource + " in " + ns, watch: client.Watch, list: listVersion(client.List)}
		handle := func(ev watch.Event, at time.Time) (string, error) {
			o, ok := ev.Object.(*metav1.PartialObjectMetadata)
			if !ok {
				return "", fmt.Errorf("%v event %T", ev.Type, ev.Object)
			}
			if ev.Type == watch.Bookmark {
				return o.ResourceVersion, nil
			}
			shard, labelled := o.Labels[k.label]
			if !send(mevent{typ: ev.Type, gvr: k.gvr, label: k.label, name: o.Name, rv: o.ResourceVersion, shard: shard, labelled: labelled, at: at}) {
				return "", context.Cause(ctx)
			}
			return o.ResourceVersion, nil
		}
		fail := func(err error, at time.Time) { send(mevent{err: err, at: at}) }
		if err := resumableWatch(ctx, t, &w.rewatches, handle, fail); err != nil {
			cancel()
			return nil, err
		}
	}
	return w, nil
}

// waitLabelled waits until every object of want ("resource/name") has
// arrived with a shard label, and returns the arrival time of the last one
// and the label of each.
func (w *mwatch) waitLabelled(ctx context.Context, want map[string]bool, timeout time.Duration) (time.Time, map[string]string, error) {
	labels := map[string]string{}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var last time.Time
	for len(labels) < len(want) {
		select {
		case ev := <-w.events:
			if ev.err != nil {
				return time.Time{}, nil, ev.err
			}
			k := ev.gvr.Resource + "/" + ev.name
			if ev.typ == watch.Deleted || !ev.labelled || !want[k] {
				continue
			}
			if _, ok := labels[k]; !ok {
				last = ev.at
			}
			labels[k] = ev.shard
		case <-ctx.Done():
			return time.Time{}, nil, context.Cause(ctx)
		case <-timer.C:
			return time.Time{}, nil, fmt.Errorf("%d of %d objects without a shard label after %s", len(want)-len(labels), len(want), timeout)
		}
	}
	return last, labels, nil
}

func (w *mwatch) stop() { w.cancel() }

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/shardkeeper/shardkeeper/bench/clone"
)

// shardIDs returns n shard IDs: s000, s001, ...
func shardIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("s%03d", i)
	}
	return out
}

// clones returns "namespace/name" of every shard Deployment the daemon
// makes for ids: one per source, named <source>-shard-<id> (Fleet's) or
// <source>-<id> (Flux's).
func clones(ids []string) map[string]bool {
	out := map[string]bool{}
	for _, id := range ids {
		for _, s := range sources() {
			sep := "-shard-"
			if s.Namespace == fluxNS {
				sep = "-"
			}
			out[s.Namespace+"/"+s.Name+sep+id] = true
		}
	}
	return out
}

func keys(ds []*appsv1.Deployment) map[string]bool {
	out := map[string]bool{}
	for _, d := range ds {
		out[d.Namespace+"/"+d.Name] = true
	}
	return out
}

// dwatch watches the Deployments of the source namespaces, from their
// current resourceVersion, and timestamps each event as it arrives. The API
// server closes a watch whose client falls behind (as a reflector does, the
// watch is then resumed from the last resourceVersion seen); rewatches
// counts those resumptions.
type dwatch struct {
	cancel    context.CancelFunc
	events    chan devent
	rewatches atomic.Int64
}

type devent struct {
	typ watch.EventType
	key string
	at  time.Time
	err error
}

func watchDeployments(ctx context.Context, kube kubernetes.Interface) (*dwatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &dwatch{cancel: cancel, events: make(chan devent, 1<<16)}
	for _, ns := range []string{fleetNS, fluxNS} {
		client := kube.AppsV1().Deployments(ns)
		t := watchTarget{what: ns, watch: client.Watch, list: listVersion(client.List)}
		handle := func(ev watch.Event, at time.Time) (string, error) {
			d, ok := ev.Object.(*appsv1.Deployment)
			switch {
			case ev.Type == watch.Bookmark && !ok:
				return "", nil
			case !ok:
				return "", fmt.Errorf("%v event %T", ev.Type, ev.Object)
			case ev.Type != watch.Bookmark:
				w.events <- devent{typ: ev.Type, key: d.Namespace + "/" + d.Name, at: at}
			}
			return d.ResourceVersion, nil
		}
		fail := func(err error, at time.Time) { w.events <- devent{err: err, at: at} }
		if err := resumableWatch(ctx, t, &w.rewatches, handle, fail); err != nil {
			cancel()
			return nil, err
		}
	}
	return w, nil
}

// waitAll waits until an event of type typ has arrived for every key of
// want, and returns the arrival time of the last one.
func (w *dwatch) waitAll(want map[string]bool, typ watch.EventType, timeout time.Duration) (time.Time, error) {
	left := map[string]bool{}
	for k := range want {
		left[k] = true
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var last time.Time
	for len(left) > 0 {
		select {
		case ev := <-w.events:
			if ev.err != nil {
				return time.Time{}, ev.err
			}
			if ev.typ == typ && left[ev.key] {
				delete(left, ev.key)
				last = ev.at
			}
		case <-timer.C:
			return time.Time{}, fmt.Errorf("%d of %d Deployments without a %s event after %s", len(left), len(want), typ, timeout)
		}
	}
	return last, nil
}

func (w *dwatch) stop() { w.cancel() }

// setShards patches the shards of the ConfigMap name as `kubectl patch
// --type merge`.
func (e *env) setShards(ctx context.Context, name string, ids []string) error {
	v := "[]"
	if len(ids) > 0 {
		v = strings.Join(ids, ",")
	}
	b, _ := json.Marshal(map[string]any{"data": map[string]string{"shards": v}})
	_, err := e.kube.CoreV1().ConfigMaps(fleetNS).Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{})
	return err
}

// step is one measured change of a shard list: from just before the patch
// of the ConfigMap to the watch event of the last Deployment created (or
// deleted), and the CPU time the controller spent meanwhile.
type step struct {
	Took, CPU time.Duration
	// After is the CPU time the controller spent from that watch event to
	// aftermath later: what the change still cost once it was made (a
	// controller's status, Events, and the reconciles its watches bring);
	// zero when not measured.
	After time.Duration `json:",omitempty"`
	// GC is what the controller's collections that started within the
	// change cost (see gctrace.go); nil when not traced.
	GC *gcShare `json:",omitempty"`
	// at is just before the patch: where a timeline starts.
	at time.Time
}

// aftermath is how long after a measured change the controller's CPU is
// read again: past the daemon's paced status writes (one a second) and its
// batched reconciles (half a second), while the new Pods become Ready.
const aftermath = 5 * time.Second

// controllerStep patches the ConfigMap cm from the shards from to the
// shards to, and measures until every Deployment that names(ids) returns for
// the shards added (removed) has its ADDED (DELETED) event; pid is the
// controller's process, for its CPU time. With after > 0 it then waits
// until after has passed since that event and measures the CPU of that
// time too (step.After).
func (e *env) controllerStep(ctx context.Context, cm string, pid int, names func([]string) map[string]bool, from, to []string, after time.Duration) (step, error) {
	added, removed := diff(from, to)
	want, typ := names(added), watch.Added
	if len(removed) > 0 {
		want, typ = names(removed), watch.Deleted
	}
	w, err := watchDeployments(ctx, e.watchKube)
	if err != nil {
		return step{}, err
	}
	defer w.stop()
	cpu0, err := cpuTime(pid)
	if err != nil {
		return step{}, err
	}
	t0 := time.Now()
	if err := e.setShards(ctx, cm, to); err != nil {
		return step{}, err
	}
	t1, err := w.waitAll(want, typ, 3*time.Minute)
	e.rewatches += w.rewatches.Load()
	if err != nil {
		return step{}, err
	}
	cpu1, err := cpuTime(pid)
	if err != nil {
		return step{}, err
	}
	st := step{Took: t1.Sub(t0), CPU: cpu1 - cpu0, at: t0}
	if after <= 0 {
		return st, nil
	}
	select {
	case <-ctx.Done():
		return step{}, ctx.Err()
	case <-time.After(time.Until(t1.Add(after))):
	}
	cpu2, err := cpuTime(pid)
	if err != nil {
		return step{}, err
	}
	st.After = cpu2 - cpu1
	return st, nil
}

// idealNames are the ideal controller's Deployments for ids.
func idealNames(ids []string) map[string]bool {
	return keys(clone.Deployments(sources(), clone.IdealPrefix, ids))
}

// informerNames are the informer reference's Deployments for ids.
func informerNames(ids []string) map[string]bool {
	return keys(clone.Deployments(sources(), clone.InformerPrefix, ids))
}

func diff(from, to []string) (added, removed []string) {
	in := map[string]bool{}
	for _, id := range from {
		in[id] = true
	}
	out := map[string]bool{}
	for _, id := range to {
		out[id] = true
		if !in[id] {
			added = append(added, id)
		}
	}
	for _, id := range from {
		if !out[id] {
			removed = append(removed, id)
		}
	}
	return added, removed
}

// floorStep creates (or deletes) the floor's Deployments for ids, all at
// once, one goroutine each, with a client whose rate limit never waits, and
// returns the time from the first request to the watch event of the last
// Deployment, and to the last response.
func (e *env) floorStep(ctx context.Context, ids []string, create bool) (time.Duration, time.Duration, error) {
	ds := clone.Deployments(sources(), clone.FloorPrefix, ids)
	cfg := rest.CopyConfig(e.floorCfg)
	cfg.QPS, cfg.Burst = 1e6, 1e6
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, 0, err
	}
	w, err := watchDeployments(ctx, e.watchKube)
	if err != nil {
		return 0, 0, err
	}
	defer w.stop()
	gate := make(chan struct{})
	errs := make([]error, len(ds))
	var wg sync.WaitGroup
	policy := metav1.DeletePropagationBackground
	for i, d := range ds {
		wg.Go(func() {
			<-gate
			if create {
				_, errs[i] = client.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{})
			} else {
				errs[i] = client.AppsV1().Deployments(d.Namespace).Delete(ctx, d.Name, metav1.DeleteOptions{PropagationPolicy: &policy})
			}
		})
	}
	typ := watch.Added
	if !create {
		typ = watch.Deleted
	}
	t0 := time.Now()
	close(gate)
	wg.Wait()
	returned := time.Since(t0)
	if err := errors.Join(errs...); err != nil {
		return 0, 0, err
	}
	t1, err := w.waitAll(keys(ds), typ, 3*time.Minute)
	e.rewatches += w.rewatches.Load()
	if err != nil {
		return 0, 0, err
	}
	return t1.Sub(t0), returned, nil
}

// convergence is one shard count's series of runs: the floor, the ideal
// controller, the informer reference and the daemon, each up and down.
// Runs made before the informer reference have none of its figures.
type convergence struct {
	Shards                     int
	FloorUp, FloorDown         []time.Duration
	FloorUpResp, FloorDownResp []time.Duration // the floor's last response
	IdealUp, IdealDown         []step
	InformerUp, InformerDown   []step `json:",omitempty"`
	DaemonUp, DaemonDown       []step
	// DaemonWrites, IdealWrites and InformerWrites are the writes of each
	// run, up and down, of the daemon, the ideal controller and the
	// informer reference (audit log), beside what the change needs.
	DaemonWrites, IdealWrites writeRuns
	InformerWrites            writeRuns `json:",omitempty"`
}

// runWrites are a controller's Deployment creates and deletes in one run, the
// writes it sent that failed (any resource), and the creates (and deletes)
// that the run needs.
type runWrites struct {
	Created, Deleted, Failed, Needed int
	All                              calls
}

func (w runWrites) exact() bool {
	return w.Created == w.Needed && w.Deleted == w.Needed && w.Failed == 0
}

// runConvergence alternates the floor, the ideal controller, the informer
// reference and the daemon, runs times for each shard count, and waits for
// the namespaces to settle between steps.
func (b *bench) runConvergence(ctx context.Context) error {
	// --profiling only opens the endpoint: nothing is profiled until the
	// measured runs are over.
	traced := gcTraceEnv(os.Environ())
	d, err := b.env.startCountedDaemon(ctx, b.daemonBin, append(slices.Clone(b.daemonArgs), "--profiling"), traced)
	if err != nil {
		return err
	}
	defer d.stop()
	ideal, err := b.env.startIdeal(ctx, b.idealBin, traced)
	if err != nil {
		return err
	}
	defer ideal.stop()
	informer, err := b.env.startInformer(ctx, b.idealBin, traced)
	if err != nil {
		return err
	}
	defer informer.stop()
	settle := func(what string) {
		if err := b.env.settle(ctx, 10*time.Minute); err != nil {
			b.notef("convergence: after %s: %v", what, err)
		}
	}
	for i, n := range b.shards {
		ids := shardIDs(n)
		c := &convergence{Shards: n}
		b.res.Convergence = append(b.res.Convergence, c)
		for r := range b.convRuns.of(i) {
			if err := b.floorRun(ctx, c, ids, r, settle); err != nil {
				return err
			}
			for _, ctl := range []convController{
				{"the ideal controller", idealCM, IdealUser, ideal, idealNames, &c.IdealUp, &c.IdealDown, &c.IdealWrites},
				{"the informer reference", informerCM, InformerUser, informer, informerNames, &c.InformerUp, &c.InformerDown, &c.InformerWrites},
				{"shardkeeper", cmName, DaemonUser, d.proc, clones, &c.DaemonUp, &c.DaemonDown, &c.DaemonWrites},
			} {
				if err := b.controllerRun(ctx, ctl, ids, r, settle); err != nil {
					return err
				}
			}
		}
		if i == 0 && b.profileSeconds > 0 {
			if err := b.profileBursts(ctx, d, ids); err != nil {
				b.notef("convergence: the CPU profile of %d shards: %v", n, err)
			}
			settle("the profile")
		}
	}
	if b.timelineRuns == 0 {
		return nil
	}
	// One daemon at a time follows the ConfigMap.
	d.stop()
	if err := b.runTimelines(ctx, ideal, settle); err != nil {
		b.notef("convergence: the burst timelines: %v", err)
	}
	return nil
}

// startCountedDaemon starts a daemon with extra arguments and the
// environment environ (nil: the benchmark's own), and waits until it is
// ready and has counted the mapped objects (none); on error it stops it.
func (e *env) startCountedDaemon(ctx context.Context, bin string, extra, environ []string) (*daemon, error) {
	d, err := e.startDaemonEnv(ctx, bin, extra, environ)
	if err != nil {
		return nil, err
	}
	if _, err := d.waitReady(ctx, 2*time.Minute); err != nil {
		d.stop()
		return nil, err
	}
	if _, err := d.waitCounted(ctx, 0, 2*time.Minute); err != nil {
		d.stop()
		return nil, err
	}
	return d, nil
}

// convController is a controller that convergence measures beside the
// floor: the ConfigMap it follows, its audited user, its process (started
// with gcTraceEnv), the Deployments it makes for a shard list, and where
// its figures go.
type convController struct {
	name, cm, user string
	proc           *proc
	names          func([]string) map[string]bool
	up, down       *[]step
	writes         *writeRuns
}

// controllerRun is one run of ctl, up and down, with its writes over both.
func (b *bench) controllerRun(ctx context.Context, ctl convController, ids []string, r int, settle func(string)) error {
	since := time.Now()
	for _, st := range []struct {
		dir      string
		from, to []string
		out      *[]step
	}{{"up", nil, ids, ctl.up}, {"down", ids, nil, ctl.down}} {
		res, err := b.env.controllerStep(ctx, ctl.cm, ctl.proc.pid(), ctl.names, st.from, st.to, aftermath)
		if err != nil {
			return fmt.Errorf("%s, %d shards %s: %w", ctl.name, len(ids), st.dir, err)
		}
		// Read after the aftermath: a collection that started within the
		// change has ended, and logged itself, by then.
		gc, err := ctl.proc.collections(res.at, res.at.Add(res.Took))
		switch {
		case errors.Is(err, errTraceLineLost):
			// The run's other figures stand; its collections are left out.
			b.notef("convergence %d shards run %d: %s %s: %v", len(ids), r+1, ctl.name, st.dir, err)
		case err != nil:
			return err
		default:
			res.GC = &gc
		}
		*st.out = append(*st.out, res)
		collections := "unread"
		if res.GC != nil {
			collections = fmt.Sprintf("%d, %s", res.GC.Count, res.GC.CPU)
		}
		b.logf("convergence %d shards run %d: %s %s %s (CPU %s; collections started in it: %s; %s in the %s after)",
			len(ids), r+1, ctl.name, st.dir, res.Took, res.CPU, collections, res.After, aftermath)
		settle(ctl.name + " " + st.dir)
	}
	w, err := controllerWrites(b.env.auditLog, ctl.user, since, time.Now(), len(clones(ids)))
	if err != nil {
		return err
	}
	*ctl.writes = append(*ctl.writes, w)
	b.logf("convergence %d shards run %d: %s's writes: %s", len(ids), r+1, ctl.name, w.All)
	return nil
}

// floorRun is one run of the floor, up and down.
func (b *bench) floorRun(ctx context.Context, c *convergence, ids []string, r int, settle func(string)) error {
	for _, f := range []struct {
		dir      string
		up       bool
		dt, resp *[]time.Duration
	}{
		{"up", true, &c.FloorUp, &c.FloorUpResp},
		{"down", false, &c.FloorDown, &c.FloorDownResp},
	} {
		dt, resp, err := b.env.floorStep(ctx, ids, f.up)
		if err != nil {
			return fmt.Errorf("floor, %d shards %s: %w", len(ids), f.dir, err)
		}
		*f.dt, *f.resp = append(*f.dt, dt), append(*f.resp, resp)
		b.logf("convergence %d shards run %d: floor %s %s (last response %s)", len(ids), r+1, f.dir, dt, resp)
		settle("the floor's " + f.dir)
	}
	return nil
}

// controllerWrites reads the writes of user in [from, to] from the audit
// log.
func controllerWrites(auditLog, user string, from, to time.Time, needed int) (runWrites, error) {
	all, err := readAuditQ(auditLog, user, from, to, false)
	if err != nil {
		return runWrites{}, err
	}
	all = all.filter(func(k callKey) bool { return isWrite(k.verb) })
	return runWrites{
		Created: all[callKey{"create", "deployments"}],
		Deleted: all[callKey{"delete", "deployments"}],
		Failed:  all.count(func(k callKey) bool { return strings.Contains(k.resource, failedMark) }),
		Needed:  needed,
		All:     all,
	}, nil
}

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"

	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
	"github.com/shardkeeper/shardkeeper/pkg/stamp"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// burstKind is the kind of the bursts' objects: GitRepos, which placement
// spreads object by object. Flux's kinds are placed by namespace (every
// HelmRelease of a namespace on one shard), so a burst of them in one
// namespace lands on one shard with the policy or without, and its spread
// is never within the threshold.
var burstKind = placementKinds[0]

// burstPacing is the placement setting of the bursts beside their scope.
// The defaults pace assignments (while the unsharded controllers serve the
// unlabelled objects) and rebalances at 50 moves per 30 s, so that a burst
// of 1,000 would take ten minutes to spread either way; this pacing lets
// both settle within the client's rate limit, and the threshold stays the
// default, which is what "within the threshold" is measured against.
const burstPacing = "maxMoves: 200\ninterval: 2s\ncooldown: 0s"

// stampPolicyAPI is what `helm template --api-versions` needs to render the
// stamping policy, as Helm reads it off a 1.36+ API server.
const stampPolicyAPI = "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"

// policyResources are the kinds the chart's stamping template renders.
var policyResources = map[string]schema.GroupVersionResource{
	"MutatingAdmissionPolicy":        {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingadmissionpolicies"},
	"MutatingAdmissionPolicyBinding": {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingadmissionpolicybindings"},
}

// placementBurst is the bursts of the placement part: new objects created
// all at once, with the chart's stamping policy installed and, as the
// reference, without it, on the same daemon (run with --stamp).
type placementBurst struct {
	Objects int
	// Settings is the placement setting in force, Threshold the spread
	// (most minus fewest objects on a shard) placement leaves alone.
	Settings  string
	Threshold int
	// Stamped are the runs with the policy, Unstamped those without, in
	// pairs.
	Stamped, Unstamped []*burstRun
}

// Flow writes Settings on one line, as a YAML flow mapping.
func (p *placementBurst) Flow() string { return flow(p.Settings) }

// burstRun is one burst, timed from just before its first create.
type burstRun struct {
	// Born counts the objects whose create response carried a shard label,
	// BornLoads them by that label.
	Born      int
	BornLoads map[string]int `json:",omitempty"`
	// Created is to the last create's response; Labelled to the watch event
	// that brought the last object its label (its ADDED event when it was
	// born with one); Spread to the first watch event after which every
	// object had a label and the spread was within the threshold.
	Created, Labelled, Spread time.Duration
	CreateRate                float64
	// Loads are the objects per shard label once placement has moved
	// nothing for the part's quiet window; Moves the daemon's
	// shardkeeper_placement_moves_total over the burst, by
	// "reason/result".
	Loads map[string]int
	Moves map[string]float64
}

// burstSeries are the burst figures of every run, with and without the
// policy (Ref), and whether every object of every run with it was born
// labelled.
type burstSeries struct {
	Born, RefBorn         []float64 // shares
	Spread, RefSpread     []time.Duration
	Labelled, RefLabelled []time.Duration
	// Relabelled, RefRelabelled are the objects placement relabelled
	// after their create (its moves that succeeded).
	Relabelled, RefRelabelled []int
	AllBorn                   bool
}

// relabelled sums the moves that succeeded.
func (r *burstRun) relabelled() int {
	n := 0.0
	for k, v := range r.Moves {
		if strings.HasSuffix(k, "/moved") {
			n += v
		}
	}
	return int(n)
}

// Series gathers the burst figures of every run.
func (p *placementBurst) Series() burstSeries {
	s := burstSeries{AllBorn: len(p.Stamped) > 0}
	for _, r := range p.Stamped {
		s.Born = append(s.Born, float64(r.Born)/float64(p.Objects))
		s.Spread, s.Labelled = append(s.Spread, r.Spread), append(s.Labelled, r.Labelled)
		s.Relabelled = append(s.Relabelled, r.relabelled())
		s.AllBorn = s.AllBorn && r.Born == p.Objects
	}
	for _, r := range p.Unstamped {
		s.RefBorn = append(s.RefBorn, float64(r.Born)/float64(p.Objects))
		s.RefSpread, s.RefLabelled = append(s.RefSpread, r.Spread), append(s.RefLabelled, r.Labelled)
		s.RefRelabelled = append(s.RefRelabelled, r.relabelled())
	}
	return s
}

// spreadTracker follows the shard label of each object of a burst, as the
// watch delivers them, and says when every one has a label and the spread
// over ids is within threshold.
type spreadTracker struct {
	want      map[string]bool
	ids       []string
	threshold int
	shard     map[string]string
	loads     map[string]int
}

func newSpreadTracker(want map[string]bool, ids []string, threshold int) *spreadTracker {
	return &spreadTracker{want: want, ids: ids, threshold: threshold, shard: map[string]string{}, loads: map[string]int{}}
}

// observe records that the object k now has the shard label shard ("":
// none, or deleted).
func (t *spreadTracker) observe(k, shard string) {
	if !t.want[k] {
		return
	}
	if old, ok := t.shard[k]; ok {
		if t.loads[old]--; t.loads[old] == 0 {
			delete(t.loads, old)
		}
		delete(t.shard, k)
	}
	if shard != "" {
		t.shard[k] = shard
		t.loads[shard]++
	}
}

// labelled reports whether every object has a shard label.
func (t *spreadTracker) labelled() bool { return len(t.shard) == len(t.want) }

// within reports whether every object has a shard label and the most
// minus the fewest objects on a shard of ids is at most the threshold, as
// balance's rebalance measures it. An object on a shard that is not among
// ids never is.
func (t *spreadTracker) within() bool {
	if !t.labelled() {
		return false
	}
	lo, hi, on := -1, 0, 0
	for _, id := range t.ids {
		n := t.loads[id]
		on += n
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	return on == len(t.want) && hi-lo <= t.threshold
}

// burstThreshold is the threshold of the setting, as a load, for n objects
// over shards.
func burstThreshold(setting string, n, shards int) (int, error) {
	p, err := shardconfig.ParsePlacement(setting)
	if err != nil {
		return 0, fmt.Errorf("the bursts' placement setting: %w", err)
	}
	return p.ThresholdFor(float64(n) / float64(shards)), nil
}

// runBursts restarts the daemon with --stamp, gives it the bursts' pacing,
// and then, b.placementRuns times, creates a burst of b.placementBurst
// objects without the stamping policy, and one with it. It returns the
// daemon now running, for the part's cleanup: after the bursts, one
// without --stamp.
func (b *bench) runBursts(ctx context.Context, d *daemon, ids []string, base float64) (*daemon, error) {
	n := b.placementBurst
	setting := placementSetting()
	threshold, err := burstThreshold(setting, n, len(ids))
	if err != nil {
		return d, err
	}
	pb := &placementBurst{Objects: n, Settings: setting, Threshold: threshold}
	b.res.Placement.Bursts = pb
	policy, err := b.renderStampPolicy(ctx)
	if err != nil {
		return d, err
	}
	d.stop()
	d, err = b.env.startDaemon(ctx, b.daemonBin, append(slices.Clone(b.daemonArgs), "--allow-placement", "--stamp"))
	if err != nil {
		return nil, err
	}
	if err := b.burstDaemonReady(ctx, d, ids, setting, base); err != nil {
		return d, err
	}
	for r := range b.placementRuns {
		without, err := b.burst(ctx, d, ids, threshold, fmt.Sprintf("b%d-", r))
		if err != nil {
			return d, fmt.Errorf("without the policy, run %d: %w", r+1, err)
		}
		if err := b.clearPlacement(ctx, d, placeNS, base); err != nil {
			return d, err
		}
		if err := b.installPolicy(ctx, policy); err != nil {
			return d, err
		}
		with, err := b.burst(ctx, d, ids, threshold, fmt.Sprintf("s%d-", r))
		err = errors.Join(err, b.clearPlacement(ctx, d, placeNS, base), b.removePolicy(ctx, policy))
		if err != nil {
			return d, fmt.Errorf("with the policy, run %d: %w", r+1, err)
		}
		pb.Unstamped, pb.Stamped = append(pb.Unstamped, without), append(pb.Stamped, with)
	}
	// With the policy gone, a daemon with --stamp deletes no shard: it
	// waits for the policy to apply the shards' withdrawal, as it cannot
	// tell a policy removed from one failing. Whoever removes the policy
	// turns stamping off (the chart does both with placement.stamp.enabled),
	// so the cleanup's daemon runs without it.
	d.stop()
	return b.env.startDaemon(ctx, b.daemonBin, append(slices.Clone(b.daemonArgs), "--allow-placement"))
}

// burstDaemonReady waits until the daemon d is ready and counts the base
// mapped objects, sets the bursts' placement setting and waits until the
// shards ids are ready and the daemon has stopped reconciling.
func (b *bench) burstDaemonReady(ctx context.Context, d *daemon, ids []string, setting string, base float64) error {
	if _, err := d.waitReady(ctx, 2*time.Minute); err != nil {
		return err
	}
	if err := poll(ctx, 2*time.Minute, "shardkeeper --stamp's caches synced", func() error {
		m, err := scrape(ctx, d.metrics)
		if err != nil {
			return err
		}
		if got := m.sum("shardkeeper_mapped_objects", nil); !m.has("shardkeeper_shards") || got != base {
			return fmt.Errorf("counts %v mapped objects, %v before", got, base)
		}
		return nil
	}); err != nil {
		return err
	}
	b.logf("placement bursts: %d objects, setting %q", b.placementBurst, setting)
	if err := b.env.setPlacement(ctx, ids, setting); err != nil {
		return err
	}
	if err := b.env.waitShardsReady(ctx, ids, 10*time.Minute); err != nil {
		return err
	}
	_, err := b.quietReconciles(ctx, d, 3*time.Second, 2*time.Minute)
	return err
}

// renderStampPolicy renders the chart's stamping policies and their
// bindings, as `helm template` with the daemon's namespace, ConfigMap and
// presets, and placement on.
func (b *bench) renderStampPolicy(ctx context.Context) ([]*unstructured.Unstructured, error) {
	helm, err := b.helm()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, helm, "template", "shardkeeper", b.chart, "--namespace", fleetNS,
		"--set", "configMap.name="+cmName, "--set", "placement.enabled=true", "--set", "presets.flux.enabled=true",
		"--show-only", "templates/stamppolicy.yaml", "--api-versions", stampPolicyAPI)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("rendering the stamping policy with %s: %w\n%s", helm, err, stderr.Bytes())
	}
	objs, err := decodeObjects(out)
	if err != nil {
		return nil, fmt.Errorf("the stamping policy as rendered: %w", err)
	}
	if len(objs) == 0 {
		return nil, errors.New("the chart rendered no stamping policy")
	}
	for _, o := range objs {
		if _, ok := policyResources[o.GetKind()]; !ok {
			return nil, fmt.Errorf("the stamping template rendered a %s", o.GetKind())
		}
	}
	return objs, nil
}

// helm returns the Helm to render the chart with: the one in --bin-dir
// (`make helm`), or else the one on PATH.
func (b *bench) helm() (string, error) {
	p, err := exec.LookPath(b.binDir + "/helm")
	if err == nil {
		return p, nil
	}
	if p, err := exec.LookPath("helm"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("no helm in %s nor on PATH (`make helm` builds it): %w", b.binDir, err)
}

// decodeObjects decodes a stream of YAML documents, skipping empty ones.
func decodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	dec := k8syaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

// installPolicy creates the stamping policy objects and waits until the
// API server stamps a new object of each placed kind (a dry run).
func (b *bench) installPolicy(ctx context.Context, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		if _, err := b.env.dyn.Resource(policyResources[o.GetKind()]).Create(ctx, o.DeepCopy(), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return b.waitStamping(ctx, true)
}

// removePolicy deletes the stamping policy objects and waits until the
// API server no longer stamps.
func (b *bench) removePolicy(ctx context.Context, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		err := b.env.dyn.Resource(policyResources[o.GetKind()]).Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return b.waitStamping(ctx, false)
}

// waitStamping waits until a dry-run create of an unlabelled object of
// each placed kind in placeNS comes back with a shard label (on) or
// without one (!on): the API server has loaded (dropped) the policy, and
// the daemon has published a shard.
func (b *bench) waitStamping(ctx context.Context, on bool) error {
	what := "new objects stamped"
	if !on {
		what = "new objects no longer stamped"
	}
	return poll(ctx, 2*time.Minute, what, func() error {
		for _, k := range placementKinds {
			obj := testfixture.Object(k.gvr, placeNS, "stamp-probe", k.label, "")
			obj.SetLabels(nil)
			out, err := b.env.dyn.Resource(k.gvr).Namespace(placeNS).Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err != nil {
				return err
			}
			if _, stamped := out.GetLabels()[k.label]; stamped != on {
				return fmt.Errorf("%s: labels %v", k.gvr.Resource, out.GetLabels())
			}
		}
		return nil
	})
}

// burst creates b.placementBurst unlabelled objects of burstKind in
// placeNS, with b.writers writers at b.writeQPS,
// while a metadata watch started before the first create follows their
// labels; it returns once every object is labelled and the spread is within
// threshold, and placement has then moved nothing for the part's quiet
// window.
func (b *bench) burst(ctx context.Context, d *daemon, ids []string, threshold int, prefix string) (*burstRun, error) {
	n := b.placementBurst
	m0, err := scrape(ctx, d.metrics)
	if err != nil {
		return nil, err
	}
	wcfg := b.env.config(1000, 2000)
	wcfg.Timeout = 0
	md, err := metadata.NewForConfig(wcfg)
	if err != nil {
		return nil, err
	}
	w, err := watchMapped(ctx, md, placeNS, 4*n+1024)
	if err != nil {
		return nil, err
	}
	defer w.stop()
	defer func() { b.env.rewatches += w.rewatches.Load() }()
	want := map[string]bool{}
	for i := range n {
		want[burstKind.gvr.Resource+"/"+fmt.Sprintf("%s%06d", prefix, i)] = true
	}
	t := newSpreadTracker(want, ids, threshold)
	run, err := b.timeBurst(ctx, w, t, prefix)
	if err != nil {
		return nil, err
	}
	m1, err := b.quietMoves(ctx, d, b.res.Placement.Quiet, 5*time.Minute)
	if err != nil {
		return nil, err
	}
	run.Moves = movesBetween(m0, m1)
	drain(w, t)
	run.Loads = maps.Clone(t.loads)
	b.logf("placement burst %s: %d objects created in %s (%.0f/s), %d born labelled (%v); all labelled at %s, spread within %d at %s; moves %v; loads %s",
		prefix, n, run.Created.Round(time.Millisecond), run.CreateRate, run.Born, run.BornLoads, run.Labelled.Round(time.Millisecond), threshold,
		run.Spread.Round(time.Millisecond), run.Moves, b.res.Placement.Spread(run.Loads))
	for shard, c := range run.Loads {
		if !slices.Contains(ids, shard) {
			b.notef("placement burst %s: %d objects labelled %q, which is not a placement shard", prefix, c, shard)
		}
	}
	return run, nil
}

// timeBurst creates the burst's objects, following their labels with t
// from the events of w, and returns once the spread is within the
// threshold and every create has returned.
func (b *bench) timeBurst(ctx context.Context, w *mwatch, t *spreadTracker, prefix string) (*burstRun, error) {
	n := len(t.want)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	run := &burstRun{}
	var born bornCount
	done := make(chan error, 1)
	t0 := time.Now()
	go func() {
		err := b.createBurst(ctx, prefix, n, &born)
		run.Created = time.Since(t0)
		if err != nil {
			cancel(err)
		}
		done <- err
	}()
	timeout := 5*time.Minute + time.Duration(2*float64(n)/float64(b.res.Placement.QPS)*float64(time.Second))
	err := follow(ctx, w, t, t0, run, timeout)
	if err != nil {
		cancel(err)
	}
	// The creates' own error, when there is one, is the cause of the rest.
	if cerr := <-done; cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, err
	}
	run.Born, run.BornLoads = born.total()
	run.CreateRate = float64(n) / run.Created.Seconds()
	return run, nil
}

// follow feeds t the events of w until every object of t has a label and
// their spread is within t's threshold, and sets run's Labelled and Spread
// to the arrival of the events that made each true, after t0.
func follow(ctx context.Context, w *mwatch, t *spreadTracker, t0 time.Time, run *burstRun, timeout time.Duration) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case ev := <-w.events:
			if ev.err != nil {
				return ev.err
			}
			t.observe(ev.gvr.Resource+"/"+ev.name, shardOf(ev))
			if run.Labelled == 0 && t.labelled() {
				run.Labelled = ev.at.Sub(t0)
			}
			if t.within() {
				run.Spread = ev.at.Sub(t0)
				return nil
			}
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-timer.C:
			return fmt.Errorf("%d of %d objects labelled, loads %v, not within %d after %s", len(t.shard), len(t.want), t.loads, t.threshold, timeout)
		}
	}
}

// drain feeds t the events w holds already.
func drain(w *mwatch, t *spreadTracker) {
	for {
		select {
		case ev := <-w.events:
			if ev.err == nil {
				t.observe(ev.gvr.Resource+"/"+ev.name, shardOf(ev))
			}
		default:
			return
		}
	}
}

// shardOf is the shard label an event leaves its object with: "" when it
// has none, or is deleted.
func shardOf(ev mevent) string {
	if ev.typ == watch.Deleted || !ev.labelled {
		return ""
	}
	return ev.shard
}

// createBurst creates n unlabelled burstKind objects prefix000000, ... in placeNS
// with b.writers writers at b.writeQPS, counting in born, by shard, those
// whose create response carries their kind's shard label.
func (b *bench) createBurst(ctx context.Context, prefix string, n int, born *bornCount) error {
	dyn, err := dynamic.NewForConfig(b.env.config(float32(b.writeQPS), b.writeQPS))
	if err != nil {
		return err
	}
	return b.inParallel(ctx, 0, n, func(i int) error {
		k := burstKind
		obj := testfixture.Object(k.gvr, placeNS, fmt.Sprintf("%s%06d", prefix, i), k.label, "")
		obj.SetLabels(nil)
		out, err := dyn.Resource(k.gvr).Namespace(placeNS).Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			// A create the API server refused is not retried: its object
			// would be created later than the burst, and could be born
			// on another shard than at the time of the burst.
			return fmt.Errorf("creating %s %s/%s: %w", k.gvr.Resource, placeNS, obj.GetName(), err)
		}
		if shard, ok := out.GetLabels()[k.label]; ok {
			born.add(shard)
		}
		return nil
	})
}

// bornCount counts the objects born labelled, by shard, for concurrent
// writers.
type bornCount struct {
	mu    sync.Mutex
	loads map[string]int
}

func (c *bornCount) add(shard string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loads == nil {
		c.loads = map[string]int{}
	}
	c.loads[shard]++
}

// total returns the objects counted, and them by shard.
func (c *bornCount) total() (int, map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.loads {
		n += v
	}
	return n, maps.Clone(c.loads)
}

// deleteStampRecords deletes the stamp ConfigMap the daemon published.
func (e *env) deleteStampRecords(ctx context.Context) error {
	err := e.kube.CoreV1().ConfigMaps(fleetNS).Delete(ctx, stamp.Name(cmName), metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

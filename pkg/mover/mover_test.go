package mover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/record"

	"github.com/shardkeeper/shardkeeper/pkg/balance"
	"github.com/shardkeeper/shardkeeper/pkg/metrics"
	"github.com/shardkeeper/shardkeeper/pkg/placement"
	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
	"github.com/shardkeeper/shardkeeper/pkg/source"
)

func TestInput(t *testing.T) {
	p, err := shardconfig.ParsePlacement("namespaces: [apps]\nthreshold: 50%\ncooldown: 1m")
	require.NoError(t, err)
	placedAt := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	objs := []placement.Object{
		{Kind: "gitrepos", Namespace: "apps", Name: "new", Weight: 1},
		{Kind: "gitrepos", Namespace: "apps", Name: "placed", Shard: "a", Labelled: true, AssignedShard: "a", AssignedAt: placedAt, Weight: 3},
		{Kind: "helmreleases", Namespace: "apps", Name: "pinned", Shard: "a", Labelled: true, Weight: 2},
		{Kind: "helmreleases", Namespace: "other", Name: "outside", Weight: 1},
		// Heavy, so that counting the draining shard as a target would
		// change the threshold.
		{Kind: "gitrepos", Namespace: "apps", Name: "on-drained", Shard: "b", Labelled: true, AssignedShard: "b", Weight: 9},
		// Derived: neither an object to place nor load.
		{Kind: "bundles", Namespace: "apps", Name: "placed-app", Shard: "a", Labelled: true, Derived: true, Weight: 4},
		{Kind: "gitrepos", Namespace: "apps", Name: "empty-label", Shard: "", Labelled: true, Labels: labels.Set{"x": "y"}, Weight: 1},
		// Placed on a shard that is gone since; d is listed, not a target.
		{Kind: "gitrepos", Namespace: "apps", Name: "orphan", Shard: "gone", Labelled: true, AssignedShard: "gone", Weight: 1},
		{Kind: "gitrepos", Namespace: "apps", Name: "starting", Shard: "d", Labelled: true, AssignedShard: "d", Weight: 1},
	}
	now := placedAt.Add(time.Hour)
	st := placement.State{Placement: p, Targets: []string{"a", "b", "c"}, Draining: []string{"b"}, Shards: []string{"a", "b", "c", "d"}}
	in, index := input(st, objs, now, 7, false, map[string]bool{"gitrepos apps/new": true})
	assert.Equal(t, 7, in.MaxMoves)
	assert.Equal(t, time.Minute, in.Cooldown)
	assert.Equal(t, now, in.Now)
	byKey := map[string]balance.Object{}
	for _, o := range in.Objects {
		byKey[o.Key] = o
	}
	require.Len(t, byKey, 8)
	assert.Equal(t, balance.Object{Key: "gitrepos apps/new", Movable: true, Weight: 1, Paced: true}, byKey["gitrepos apps/new"],
		"bumped as it is assigned")
	assert.False(t, byKey["gitrepos apps/empty-label"].Paced, "served by nobody, starts no work")
	assert.Equal(t, []string{"b", "gone"}, in.Draining, "what placement put on a gone shard leaves it")
	assert.Equal(t, balance.Object{Key: "gitrepos apps/placed", Shard: "a", Movable: true, Weight: 3, MovedAt: placedAt}, byKey["gitrepos apps/placed"])
	assert.False(t, byKey["helmreleases apps/pinned"].Movable, "labelled by a person")
	assert.False(t, byKey["helmreleases other/outside"].Movable, "out of scope")
	assert.Empty(t, byKey["gitrepos apps/empty-label"].Shard)
	assert.Equal(t, "placed", index["gitrepos apps/placed"].Name)
	// Load on the targets a and c (b drains, the Bundle counts for
	// nothing): 3 + 2, plus 2 unlabelled movable objects (new,
	// empty-label) to come = 7 over 2 targets; half of a mean of 3.5 rounds
	// up to 2.
	assert.Equal(t, 2, in.Threshold)
}

func TestPatch(t *testing.T) {
	now := time.Date(2026, 11, 29, 20, 0, 0, 0, time.FixedZone("x", 3600))
	body, err := movePatch(placement.Object{Namespace: "apps", Name: "r", ResourceVersion: "42"}, "fleet.cattle.io/shard-ref", "shard-1", now)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(body, &got))
	assert.Equal(t, map[string]any{"metadata": map[string]any{
		"resourceVersion": "42",
		"labels":          map[string]any{"fleet.cattle.io/shard-ref": "shard-1"},
		"annotations": map[string]any{
			placement.AssignedShardAnnotation: "shard-1",
			placement.AssignedAtAnnotation:    "2026-11-29T19:00:00Z",
		},
	}}, got, "the label, placement's record, and the resourceVersion as precondition; nothing else")
}

func TestMovedMessage(t *testing.T) {
	res := result{
		moved:     map[balance.Reason]int{balance.Assign: 3, balance.Drain: 2},
		to:        map[string]int{"shard-1": 4, "shard-0": 1},
		from:      map[string]int{"shard-2": 2},
		conflicts: 1,
	}
	assert.Equal(t, "placement moved 5 objects (3 assigned, 2 drained) to shard-0: 1, shard-1: 4; drained from shard-2: 2; "+
		"1 changed since they were read and are decided again", movedMessage(res))

	res = result{moved: map[balance.Reason]int{balance.Failover: 2}, to: map[string]int{"shard-0": 2}, down: map[string]int{"shard-1": 2}}
	assert.Equal(t, "placement moved 2 objects (2 failed over) to shard-0: 2; failed over from shard-1: 2, which is down", movedMessage(res))
}

func TestSetWakesOnlyOnChange(t *testing.T) {
	on, err := shardconfig.ParsePlacement("selector: team=a")
	require.NoError(t, err)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1"}}
	p := New(nil, nil, nil, nil, nil)
	woken := func() bool {
		select {
		case <-p.wake:
			return true
		default:
			return false
		}
	}
	st := placement.State{ConfigMap: cm, Placement: on, Targets: []string{"a", "b"}}
	p.Set(st)
	assert.True(t, woken())
	same, err := shardconfig.ParsePlacement("selector: team=a")
	require.NoError(t, err)
	p.Set(placement.State{ConfigMap: cm.DeepCopy(), Placement: same, Targets: []string{"a", "b"}})
	assert.False(t, woken(), "a reconcile that changed nothing does not run a round")
	for name, next := range map[string]placement.State{
		"targets":      {ConfigMap: cm, Placement: on, Targets: []string{"a"}},
		"draining":     {ConfigMap: cm, Placement: on, Targets: []string{"a", "b"}, Draining: []string{"c"}},
		"failing over": {ConfigMap: cm, Placement: on, Targets: []string{"a", "b"}, FailingOver: []string{"c"}},
		"settings":     {ConfigMap: cm, Targets: []string{"a", "b"}},
		"shards":       {ConfigMap: cm, Placement: on, Targets: []string{"a", "b"}, Shards: []string{"a", "b", "c"}},
		"served":       {ConfigMap: cm, Placement: on, Targets: []string{"a", "b"}, Served: true},
		"configmap":    {ConfigMap: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "2"}}, Placement: on, Targets: []string{"a", "b"}},
	} {
		p.Set(st)
		woken()
		p.Set(next)
		assert.True(t, woken(), name)
	}
	p.Wake()
	assert.True(t, woken(), "a change of the objects always wakes it")
}

func TestBumpPatch(t *testing.T) {
	now := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	o := placement.Object{Namespace: "apps", Name: "r", ResourceVersion: "42"}
	body, err := bumpPatch(o, "fleet.cattle.io/shard-ref", "shard-1", now, "spec.forceSyncGeneration", 4)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(body, &got))
	assert.Equal(t, map[string]any{"forceSyncGeneration": float64(4)}, got["spec"])
	plain, err := movePatch(o, "fleet.cattle.io/shard-ref", "shard-1", now)
	require.NoError(t, err)
	var want map[string]any
	require.NoError(t, json.Unmarshal(plain, &want))
	assert.Equal(t, want["metadata"], got["metadata"], "the label and the bump go in one write")
}

func TestReadRefusesAChangedObject(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "gitrepos"}
	repo := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "GitRepo",
		"metadata": map[string]any{"name": "r", "namespace": "apps", "resourceVersion": "42"},
		"spec":     map[string]any{"forceSyncGeneration": int64(3)},
	}}
	fresh := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "GitRepo",
		"metadata": map[string]any{"name": "fresh", "namespace": "apps", "resourceVersion": "7"},
	}}
	reader := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr: "GitRepoList"}, repo, fresh)
	kind := source.MappedKind{Resource: gvr, Label: source.FleetShardRefLabel, BumpOnMove: "spec.forceSyncGeneration"}
	p := New(nil, reader, []source.MappedKind{kind}, nil, nil)
	spec := func(o placement.Object) any {
		t.Helper()
		body, err := p.body(context.Background(), o, kind, "s", t0, true)
		require.NoError(t, err)
		var got map[string]any
		require.NoError(t, json.Unmarshal(body, &got))
		return got["spec"]
	}

	assert.Equal(t, map[string]any{"forceSyncGeneration": float64(4)}, spec(placement.Object{Namespace: "apps", Name: "r", ResourceVersion: "42"}))
	assert.Equal(t, map[string]any{"forceSyncGeneration": float64(1)}, spec(placement.Object{Namespace: "apps", Name: "fresh", ResourceVersion: "7"}),
		"an unset field counts as 0")
	_, err := p.body(context.Background(), placement.Object{Namespace: "apps", Name: "r", ResourceVersion: "41"}, kind, "s", t0, true)
	assert.True(t, apierrors.IsConflict(err), "an object changed since the decision is decided again: %v", err)
}

func TestDerivedKindsAreNeverMoved(t *testing.T) {
	bundles := source.MappedKind{Resource: schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "bundles"}, Derived: true}
	p := New(nil, nil, []source.MappedKind{bundles}, nil, nil)
	assert.Empty(t, p.kinds)
	in, _ := input(placement.State{Targets: []string{"a"}}, []placement.Object{{Kind: "bundles", Namespace: "n", Name: "b", Shard: "a", Labelled: true, Derived: true, Weight: 1}}, time.Now(), 10, false, nil)
	assert.Empty(t, in.Objects, "a Bundle is no load of its own")
}

func TestOwners(t *testing.T) {
	objs := []placement.Object{
		{Kind: "gitrepos", Namespace: "apps", Name: "with-bundles"},
		{Kind: "gitrepos", Namespace: "apps", Name: "fresh"},
		{Kind: "bundles", Namespace: "apps", Name: "with-bundles-app", Derived: true, Labels: labels.Set{"fleet.cattle.io/repo-name": "with-bundles"}},
		{Kind: "bundledeployments", Namespace: "cluster-1", Name: "x", Derived: true, Labels: labels.Set{"fleet.cattle.io/repo-name": "fresh"}},
	}
	got := owners(objs, map[string]string{"bundles": "fleet.cattle.io/repo-name"})
	assert.Equal(t, map[string]bool{"apps/with-bundles": true}, got,
		"a GitRepo with Bundles is applied again on a move; a fresh one has nothing to carry along")
}

// The tests below run whole rounds against fakeCluster, which stands for
// the mapped caches, the metadata client and the dynamic client at once: a
// patch it accepts shows in the cache of the next round, as it would once
// the watch delivered it.

func fleetGVR(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: resource}
}

// fleetKinds are the Fleet preset's mapped kinds.
var fleetKinds = []source.MappedKind{
	{Resource: fleetGVR("gitrepos"), Label: source.FleetShardRefLabel, BumpOnMove: "spec.forceSyncGeneration"},
	{Resource: fleetGVR("helmops"), Label: source.FleetShardRefLabel},
	{Resource: fleetGVR("bundles"), Label: source.FleetShardRefLabel, Derived: true, OwnerLabel: "fleet.cattle.io/repo-name"},
	{Resource: fleetGVR("bundledeployments"), Label: source.FleetShardRefLabel, Derived: true},
}

// patchCall is one write the mover sent.
type patchCall struct {
	resource        schema.GroupVersionResource
	namespace, name string
	pt              types.PatchType
	body            map[string]any
	// wasLabelled is whether the object had a shard label before: a patch
	// of an unlabelled object is an assignment, any other a paced move.
	wasLabelled bool
}

// ref names the patched object as placement.Object.Ref does.
func (c patchCall) ref() string { return c.resource.Resource + " " + c.namespace + "/" + c.name }

// shard is the label value the patch sets.
func (c patchCall) shard() string {
	l, _ := c.body["metadata"].(map[string]any)["labels"].(map[string]any)
	s, _ := l[source.FleetShardRefLabel].(string)
	return s
}

type fakeCluster struct {
	mu     sync.Mutex
	synced bool
	// objs are the cached objects, by Ref.
	objs map[string]placement.Object
	// full are the whole objects the reader returns, by Ref.
	full map[string]*unstructured.Unstructured
	// lagging, when set, is what All shows: caches that have not seen the
	// patches made since.
	lagging map[string]placement.Object
	// fail makes the patches of these objects (by name) fail.
	fail map[string]error
	// beforePatch, when set, is called with the shard of every patch as it
	// arrives, before the cluster applies it.
	beforePatch func(shard string)
	patches     []patchCall
	gets        []string
	reads       int
}

func newFakeCluster(objs ...placement.Object) *fakeCluster {
	c := &fakeCluster{synced: true, objs: map[string]placement.Object{}, full: map[string]*unstructured.Unstructured{}, fail: map[string]error{}}
	c.add(objs...)
	return c
}

func (c *fakeCluster) add(objs ...placement.Object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range objs {
		if o.Weight == 0 {
			o.Weight = 1
		}
		c.objs[o.Ref()] = o
	}
}

func (c *fakeCluster) Synced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.synced
}

func (c *fakeCluster) All() []placement.Object {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	cached := c.objs
	if c.lagging != nil {
		cached = c.lagging
	}
	out := make([]placement.Object, 0, len(cached))
	for _, o := range cached {
		out = append(out, o)
	}
	return out
}

// lag freezes what All shows at the objects as they are now; catchUp ends it.
func (c *fakeCluster) lag() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lagging = maps.Clone(c.objs)
}

func (c *fakeCluster) catchUp() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lagging = nil
}

// Patch records the write and, unless told to fail, applies it to the
// cache like the API server would: refused (409) when the resourceVersion
// precondition no longer holds.
func (c *fakeCluster) Patch(_ context.Context, resource schema.GroupVersionResource, namespace, name string, pt types.PatchType, body []byte) (string, error) {
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		return "", err
	}
	call := patchCall{resource: resource, namespace: namespace, name: name, pt: pt, body: m}
	if c.beforePatch != nil {
		c.beforePatch(call.shard())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	key := resource.Resource + " " + namespace + "/" + name
	o, ok := c.objs[key]
	call.wasLabelled = o.Labelled
	c.patches = append(c.patches, call)
	if err := c.fail[name]; err != nil {
		return "", err
	}
	if !ok {
		return "", apierrors.NewNotFound(resource.GroupResource(), name)
	}
	meta, _ := m["metadata"].(map[string]any)
	if meta["resourceVersion"] != o.ResourceVersion {
		return "", apierrors.NewConflict(resource.GroupResource(), name, errors.New("resourceVersion precondition"))
	}
	for _, v := range meta["labels"].(map[string]any) {
		o.Shard, o.Labelled = v.(string), true
	}
	ann := meta["annotations"].(map[string]any)
	o.AssignedShard = ann[placement.AssignedShardAnnotation].(string)
	o.AssignedAt, _ = time.Parse(time.RFC3339, ann[placement.AssignedAtAnnotation].(string))
	rv, _ := strconv.Atoi(o.ResourceVersion)
	o.ResourceVersion = strconv.Itoa(rv + 1)
	c.objs[key] = o
	return o.ResourceVersion, nil
}

func (c *fakeCluster) Get(_ context.Context, resource schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := resource.Resource + " " + namespace + "/" + name
	c.gets = append(c.gets, key)
	if u, ok := c.full[key]; ok {
		return u.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(resource.GroupResource(), name)
}

// takePatches returns the patches sent since the last call, by Ref. A
// round writes an object at most once.
func (c *fakeCluster) takePatches(t *testing.T) map[string]patchCall {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]patchCall{}
	for _, p := range c.patches {
		assert.NotContains(t, out, p.ref(), "patched twice in one round")
		out[p.ref()] = p
	}
	c.patches = nil
	return out
}

// testMover returns a Mover over c whose clock reads *clock.
func testMover(c *fakeCluster, rec record.EventRecorder, clock *time.Time) *Mover {
	p := newMover(c, c, fleetKinds, c, rec)
	p.now = func() time.Time { return *clock }
	return p
}

// events drains the Events recorded so far.
func events(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func parsePlacement(t *testing.T, value string) shardconfig.Placement {
	t.Helper()
	p, err := shardconfig.ParsePlacement(value)
	require.NoError(t, err)
	return p
}

var (
	shardCM = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "cattle-fleet-system", Name: "shardkeeper", ResourceVersion: "1"}}
	t0      = time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
)

func gitrepo(name, shard string) placement.Object {
	return placement.Object{Kind: "gitrepos", Namespace: "apps", Name: name, ResourceVersion: "10",
		Shard: shard, Labelled: shard != "", AssignedShard: shard}
}

func TestRoundRelabelsThePlannedMoves(t *testing.T) {
	c := newFakeCluster(
		gitrepo("new-1", ""),
		placement.Object{Kind: "gitrepos", Namespace: "apps", Name: "new-2", ResourceVersion: "20"},
		placement.Object{Kind: "helmops", Namespace: "apps", Name: "leaving", ResourceVersion: "31", Shard: "c", Labelled: true, AssignedShard: "c"},
		placement.Object{Kind: "gitrepos", Namespace: "apps", Name: "pinned", ResourceVersion: "5", Shard: "a", Labelled: true},
		placement.Object{Kind: "gitrepos", Namespace: "other", Name: "outside", ResourceVersion: "6"},
	)
	rec := record.NewFakeRecorder(10)
	clock := t0
	p := testMover(c, rec, &clock)
	st := placement.State{ConfigMap: shardCM, Placement: parsePlacement(t, "namespaces: [apps]"), Targets: []string{"a", "b"}, Draining: []string{"c"}}
	p.Set(st)

	in, _ := input(st, c.All(), clock, st.Placement.MaxMoves, true, nil)
	planned := map[string]string{}
	for _, m := range balance.Moves(in) {
		planned[m.Key] = m.To
	}
	p.round(context.Background())

	patches := c.takePatches(t)
	got := map[string]string{}
	for ref, call := range patches {
		got[ref] = call.shard()
	}
	// a holds the pinned object, so new-1 goes to b, new-2 to a, and the
	// drained HelmOp to b; pinned and out-of-scope objects stay.
	want := map[string]string{"gitrepos apps/new-1": "b", "gitrepos apps/new-2": "a", "helmops apps/leaving": "b"}
	assert.Equal(t, want, planned, "the plan this test expects")
	assert.Equal(t, want, got, "exactly the planned moves are written")

	rvs := map[string]string{"gitrepos apps/new-1": "10", "gitrepos apps/new-2": "20", "helmops apps/leaving": "31"}
	for ref, call := range patches {
		kind := strings.Fields(ref)[0]
		assert.Equal(t, fleetGVR(kind), call.resource, ref)
		assert.Equal(t, types.MergePatchType, call.pt, ref)
		assert.Equal(t, map[string]any{"metadata": map[string]any{
			"resourceVersion": rvs[ref],
			"labels":          map[string]any{source.FleetShardRefLabel: want[ref]},
			"annotations": map[string]any{
				placement.AssignedShardAnnotation: want[ref],
				placement.AssignedAtAnnotation:    "2026-11-29T20:00:00Z",
			},
		}}, call.body, "%s: the label, placement's record and the resourceVersion precondition, nothing else", ref)
	}
	assert.Equal(t, []string{"Normal ObjectsMoved placement moved 3 objects (2 assigned, 1 drained) to a: 1, b: 2; drained from c: 1"},
		events(rec), "one Event sums up the round")
}

func TestRoundPacesDrainsButNotAssignments(t *testing.T) {
	var objs []placement.Object
	for i := range 7 {
		objs = append(objs, gitrepo("old-"+strconv.Itoa(i), "c"))
	}
	c := newFakeCluster(append(objs, gitrepo("new-0", ""), gitrepo("new-1", ""))...)
	rec := record.NewFakeRecorder(100)
	clock := t0
	p := testMover(c, rec, &clock)
	// A threshold no spread reaches keeps rebalance out: every paced move
	// here is a drain.
	pl := parsePlacement(t, "maxMoves: 3\ninterval: 30s\nthreshold: 1000")
	shards := []string{"a", "b", "c"}
	p.Set(placement.State{ConfigMap: shardCM, Placement: pl, Targets: []string{"a", "b"}, Shards: shards})

	type counted struct{ assigned, paced int }
	step := func(at time.Duration) (counted, time.Duration) {
		clock = t0.Add(at)
		next := p.round(context.Background())
		var n counted
		for _, call := range c.takePatches(t) {
			if call.wasLabelled {
				n.paced++
			} else {
				n.assigned++
			}
		}
		return n, next
	}

	// c is neither a target nor draining yet: only the new objects move,
	// and they take nothing from the budget.
	n, _ := step(0)
	assert.Equal(t, counted{assigned: 2}, n, "t0")
	p.Set(placement.State{ConfigMap: shardCM, Placement: pl, Targets: []string{"a", "b"}, Draining: []string{"c"}, Shards: shards})
	n, next := step(time.Second)
	assert.Equal(t, counted{paced: 3}, n, "t0+1s: the whole budget, the assignments of t0 notwithstanding")
	assert.Equal(t, 29*time.Second, next, "the next round is due when the window opens again")
	c.add(gitrepo("new-2", ""))
	n, _ = step(2 * time.Second)
	assert.Equal(t, counted{assigned: 1}, n, "t0+2s: the budget is spent, yet a new object is assigned")
	n, _ = step(29 * time.Second)
	assert.Equal(t, counted{}, n, "t0+29s: still the first window")
	n, _ = step(30 * time.Second)
	assert.Equal(t, counted{paced: 3}, n, "t0+30s: a new window")
	n, _ = step(45 * time.Second)
	assert.Equal(t, counted{}, n, "t0+45s")
	n, _ = step(60 * time.Second)
	assert.Equal(t, counted{paced: 1}, n, "t0+60s: the last one")
	for ref, o := range c.objs {
		assert.NotEqual(t, "c", o.Shard, ref)
	}
}

// assignWithFailures returns a Mover set to assign three new GitRepos to a:
// "fine" and the ones named in fail, whose patches fail with their errors.
func assignWithFailures(t *testing.T, fail map[string]error) (*fakeCluster, *record.FakeRecorder, *time.Time, *Mover) {
	t.Helper()
	c := newFakeCluster(gitrepo("fine", ""))
	for name, err := range fail {
		c.add(gitrepo(name, ""))
		c.fail[name] = err
	}
	rec := record.NewFakeRecorder(10)
	clock := t0
	p := testMover(c, rec, &clock)
	p.Set(placement.State{ConfigMap: shardCM, Placement: parsePlacement(t, ""), Targets: []string{"a"}})
	return c, rec, &clock, p
}

// assignments returns how many assignments ended in result (moved,
// conflict, error) since it was called.
func assignments(result string) func() float64 {
	counter := metrics.PlacementMoves.WithLabelValues(string(balance.Assign), result)
	before := testutil.ToFloat64(counter)
	return func() float64 { return testutil.ToFloat64(counter) - before }
}

func TestRoundConflictsAreDecidedAgain(t *testing.T) {
	c, rec, clock, p := assignWithFailures(t, map[string]error{
		"changed": apierrors.NewConflict(fleetGVR("gitrepos").GroupResource(), "changed", errors.New("the object has been modified")),
		"gone":    apierrors.NewNotFound(fleetGVR("gitrepos").GroupResource(), "gone"),
	})
	conflicts, errs := assignments("conflict"), assignments("error")

	next := p.round(context.Background())
	assert.Len(t, c.takePatches(t), 3)
	assert.Equal(t, retryAfter, next, "the caches have caught up by then")
	assert.Equal(t, []string{"Normal ObjectsMoved placement moved 1 objects (1 assigned) to a: 1; " +
		"2 changed since they were read and are decided again"}, events(rec), "a conflict is no failure")
	assert.InDelta(t, 2.0, conflicts(), 0)
	assert.InDelta(t, 0.0, errs(), 0)

	delete(c.fail, "changed")
	*clock = clock.Add(retryAfter)
	p.round(context.Background())
	assert.Contains(t, c.takePatches(t), "gitrepos apps/changed", "the next round decides again from the cache")
}

func TestRoundErrorsAreReportedOnce(t *testing.T) {
	_, rec, _, p := assignWithFailures(t, map[string]error{
		"forbidden": apierrors.NewForbidden(fleetGVR("gitrepos").GroupResource(), "forbidden", errors.New("no patch")),
		"broken":    errors.New("connection reset"),
	})
	errs, moved := assignments("error"), assignments("moved")

	next := p.round(context.Background())
	assert.Equal(t, retryAfter, next)
	got := events(rec)
	require.Len(t, got, 2, "%q", got)
	assert.Equal(t, "Normal ObjectsMoved placement moved 1 objects (1 assigned) to a: 1", got[0])
	assert.True(t, strings.HasPrefix(got[1], "Warning PlacementFailed 2 objects could not be relabelled; retrying: "), got[1])
	assert.Contains(t, got[1], "apps/forbidden")
	assert.Contains(t, got[1], "connection reset")
	assert.InDelta(t, 2.0, errs(), 0)
	assert.InDelta(t, 1.0, moved(), 0)
}

func TestRoundBumpsGitReposWithBundles(t *testing.T) {
	c := newFakeCluster(
		gitrepo("with-bundles", "c"),
		gitrepo("fresh", "c"),
		placement.Object{Kind: "bundles", Namespace: "apps", Name: "with-bundles-app", ResourceVersion: "3", Shard: "c", Labelled: true,
			Derived: true, Labels: labels.Set{"fleet.cattle.io/repo-name": "with-bundles"}},
	)
	for _, name := range []string{"with-bundles", "fresh"} {
		c.full["gitrepos apps/"+name] = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "GitRepo",
			"metadata": map[string]any{"name": name, "namespace": "apps", "resourceVersion": "10"},
			"spec":     map[string]any{"forceSyncGeneration": int64(3)},
		}}
	}
	rec := record.NewFakeRecorder(10)
	clock := t0
	p := testMover(c, rec, &clock)
	p.Set(placement.State{ConfigMap: shardCM, Placement: parsePlacement(t, ""), Targets: []string{"a", "b"}, Draining: []string{"c"}})

	p.round(context.Background())
	patches := c.takePatches(t)
	require.Contains(t, patches, "gitrepos apps/with-bundles")
	require.Contains(t, patches, "gitrepos apps/fresh")
	assert.Equal(t, []string{"gitrepos apps/with-bundles"}, c.gets, "only a GitRepo with Bundles is read")
	with := patches["gitrepos apps/with-bundles"]
	assert.Equal(t, map[string]any{"forceSyncGeneration": float64(4)}, with.body["spec"], "the bump goes in the same write as the label")
	assert.Equal(t, "10", with.body["metadata"].(map[string]any)["resourceVersion"])
	assert.NotContains(t, patches["gitrepos apps/fresh"].body, "spec", "a GitRepo without Bundles has nothing to carry along")
}

func TestRoundNeverPatchesDerivedKinds(t *testing.T) {
	c := newFakeCluster(
		gitrepo("repo", "c"),
		// Placed by placement once, so not pinned, on the draining shard.
		placement.Object{Kind: "bundles", Namespace: "apps", Name: "repo-app", ResourceVersion: "3", Shard: "c", Labelled: true, AssignedShard: "c",
			Derived: true, Labels: labels.Set{"fleet.cattle.io/repo-name": "repo"}},
		placement.Object{Kind: "bundles", Namespace: "apps", Name: "unlabelled", ResourceVersion: "4", Derived: true},
		placement.Object{Kind: "bundledeployments", Namespace: "cluster-1", Name: "repo-app", ResourceVersion: "5", Shard: "c", Labelled: true, AssignedShard: "c", Derived: true},
	)
	c.full["gitrepos apps/repo"] = &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "repo", "namespace": "apps", "resourceVersion": "10"},
	}}
	rec := record.NewFakeRecorder(10)
	clock := t0
	p := testMover(c, rec, &clock)
	// One move per interval: a Bundle that took part in the plan would take
	// it (its key sorts first) and leave the GitRepo on the draining shard.
	p.Set(placement.State{ConfigMap: shardCM, Placement: parsePlacement(t, "maxMoves: 1"), Targets: []string{"a", "b"}, Draining: []string{"c"}})

	p.round(context.Background())
	refs := slices.Sorted(maps.Keys(c.takePatches(t)))
	assert.Equal(t, []string{"gitrepos apps/repo"}, refs, "Bundles follow their GitRepo; placement never writes them")
}

// Even a move that names a derived object, which no plan makes, is not
// written: the mover has no client for derived kinds.
func TestApplyNeverWritesDerivedKinds(t *testing.T) {
	bundle := placement.Object{Kind: "bundles", Namespace: "apps", Name: "repo-app", ResourceVersion: "3", Shard: "c", Labelled: true, Derived: true}
	c := newFakeCluster(bundle)
	clock := t0
	p := testMover(c, record.NewFakeRecorder(10), &clock)
	res := p.apply(context.Background(), []balance.Move{{Key: bundle.Ref(), From: "c", To: "a", Reason: balance.Drain}},
		map[string]placement.Object{bundle.Ref(): bundle}, nil, t0)
	assert.Zero(t, res.total(), "nothing moved")
	assert.Empty(t, c.takePatches(t))
}

func TestRoundDoesNothingUnlessEnabledAndSynced(t *testing.T) {
	disabled := parsePlacement(t, "")
	disabled.Enabled = false
	for name, tc := range map[string]struct {
		st       placement.State
		unsynced bool
		next     time.Duration
	}{
		"disabled":     {st: placement.State{ConfigMap: shardCM, Placement: disabled, Targets: []string{"a"}, Draining: []string{"c"}}, next: time.Hour},
		"not synced":   {st: placement.State{ConfigMap: shardCM, Placement: parsePlacement(t, ""), Targets: []string{"a"}, Draining: []string{"c"}}, unsynced: true, next: retryAfter},
		"no configmap": {st: placement.State{Placement: parsePlacement(t, ""), Targets: []string{"a"}, Draining: []string{"c"}}, next: retryAfter},
	} {
		t.Run(name, func(t *testing.T) {
			c := newFakeCluster(gitrepo("new", ""), gitrepo("leaving", "c"))
			c.synced = !tc.unsynced
			rec := record.NewFakeRecorder(10)
			clock := t0
			p := testMover(c, rec, &clock)
			p.Set(tc.st)
			assert.Equal(t, tc.next, p.round(context.Background()))
			assert.Empty(t, c.takePatches(t))
			assert.Empty(t, c.gets)
			assert.Zero(t, c.reads, "the caches are not even listed")
			assert.Empty(t, events(rec))
		})
	}
}

// A round right after another, on mapped caches that have not seen its
// relabels, patches nothing: without the wait it would count the objects
// on the shards they left and relabel them again (a conflict each, at
// best). Once the caches show them, the next round finds nothing to do.
func TestRoundWaitsForItsRelabels(t *testing.T) {
	c := newFakeCluster(gitrepo("new-1", ""), gitrepo("new-2", ""), gitrepo("new-3", ""))
	clock := t0
	p := testMover(c, record.NewFakeRecorder(10), &clock)
	p.Set(placement.State{ConfigMap: shardCM, Placement: parsePlacement(t, "namespaces: [apps]"), Targets: []string{"a", "b"}})

	c.lag()
	p.round(context.Background())
	require.Len(t, c.takePatches(t), 3)
	clock = clock.Add(time.Second)
	p.round(context.Background())
	assert.Empty(t, c.takePatches(t), "nothing is sent again while the caches lag")

	c.catchUp()
	p.round(context.Background())
	assert.Empty(t, c.takePatches(t), "nor once they show the relabels")
	assert.Zero(t, p.writes.Len())
}

// newGitRepos returns n unlabelled GitRepos, "repo-0000" on.
func newGitRepos(n int) []placement.Object {
	out := make([]placement.Object, 0, n)
	for i := range n {
		out = append(out, gitrepo(fmt.Sprintf("repo-%04d", i), ""))
	}
	return out
}

// The shard set withdraws a shard before it asks the API server whether the
// shard is empty and deletes it. A round that is writing meanwhile must not
// label anything onto it once the withdrawal has returned: the API server
// would not have shown that object, and it would be stranded.
func TestRoundNeverWritesOntoAShardWithdrawnMidRound(t *testing.T) {
	for name, withdraw := range map[string]func(*Mover){
		// Before the shard set asks the API server.
		"restrict": func(p *Mover) { assert.NoError(t, p.Restrict(context.Background(), []string{"a"}, false)) },
		// After a reconcile.
		"set": func(p *Mover) {
			p.Set(placement.State{ConfigMap: shardCM, Placement: parsePlacement(t, ""), Targets: []string{"a"}, Shards: []string{"a"}})
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := newFakeCluster(newGitRepos(300)...)
			clock := t0
			p := testMover(c, record.NewFakeRecorder(10), &clock)
			p.Set(placement.State{ConfigMap: shardCM, Placement: parsePlacement(t, ""), Targets: []string{"a", "b"}, Shards: []string{"a", "b"}})

			var started, withdrawn atomic.Bool
			var after, ontoWithdrawn atomic.Int32
			done := make(chan struct{})
			c.beforePatch = func(shard string) {
				if withdrawn.Load() {
					after.Add(1)
					if shard == "b" {
						ontoWithdrawn.Add(1)
					}
				}
				if started.CompareAndSwap(false, true) {
					// b leaves while this first write is in flight.
					go func() {
						withdraw(p)
						withdrawn.Store(true)
						close(done)
					}()
					select {
					case <-done:
					case <-time.After(100 * time.Millisecond):
					}
				}
			}
			p.round(context.Background())
			<-done

			require.Positive(t, after.Load(), "the round went on writing after the withdrawal")
			assert.Zero(t, ontoWithdrawn.Load(), "writes onto b that started after b was withdrawn")

			c.beforePatch = nil
			clock = clock.Add(retryAfter)
			p.round(context.Background())
			for ref, o := range c.objs {
				assert.True(t, o.Labelled, "%s: the next round places what the withdrawal left", ref)
			}
		})
	}
}

// An object that placement put on a shard that has gone since (neither
// listed nor running) is reconciled by nobody: placement moves it on as it
// would drain it. An object a person labelled with an unknown ID is pinned
// and stays, for the operator to see.
func TestRoundDrainsWhatPlacementPutOnAGoneShard(t *testing.T) {
	c := newFakeCluster(
		gitrepo("orphan", "gone"),
		placement.Object{Kind: "gitrepos", Namespace: "apps", Name: "typo", ResourceVersion: "3", Shard: "shrad-1", Labelled: true},
	)
	rec := record.NewFakeRecorder(10)
	clock := t0
	p := testMover(c, rec, &clock)
	p.Set(placement.State{ConfigMap: shardCM, Placement: parsePlacement(t, ""), Targets: []string{"a"}})

	p.round(context.Background())

	patches := c.takePatches(t)
	require.Equal(t, []string{"gitrepos apps/orphan"}, slices.Sorted(maps.Keys(patches)), "the orphan moves, the typo stays")
	assert.Equal(t, "a", patches["gitrepos apps/orphan"].shard())
	assert.Equal(t, []string{"Normal ObjectsMoved placement moved 1 objects (1 drained) to a: 1; drained from gone: 1"}, events(rec))
}

// Turning placement on over an estate of GitRepos that already have
// Bundles: every assignment bumps forceSyncGeneration, which starts a git
// Job, so the assignments are paced like moves rather than all at once.
func TestRoundPacesAssignmentsThatStartGitJobs(t *testing.T) {
	repos := newGitRepos(1000)
	c := newFakeCluster(repos...)
	for _, r := range repos {
		c.add(placement.Object{Kind: "bundles", Namespace: "apps", Name: r.Name + "-app", ResourceVersion: "3", Derived: true,
			Labels: labels.Set{"fleet.cattle.io/repo-name": r.Name}})
		c.full[r.Ref()] = &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": r.Name, "namespace": "apps", "resourceVersion": r.ResourceVersion},
			"spec":     map[string]any{"forceSyncGeneration": int64(1)},
		}}
	}
	clock := t0
	p := testMover(c, record.NewFakeRecorder(100), &clock)
	p.Set(placement.State{ConfigMap: shardCM, Placement: parsePlacement(t, "maxMoves: 50\ninterval: 30s"), Targets: []string{"a", "b"}})

	written := 0
	for _, at := range []time.Duration{0, time.Second, 29 * time.Second, 30 * time.Second, 31 * time.Second} {
		clock = t0.Add(at)
		p.round(context.Background())
		patches := c.takePatches(t)
		written += len(patches)
		for ref, call := range patches {
			assert.Contains(t, call.body, "spec", "%s: bumped as it is assigned", ref)
		}
		assert.LessOrEqual(t, written, 50*(int(at/(30*time.Second))+1), "written by t0+%s", at)
	}
	assert.Equal(t, 100, written, "two windows of 50")
}

// While the unsharded controllers run, they serve the objects that have no
// shard label: assigning those can wait, and is paced after the drains.
func TestRoundPacesAssignmentsWhileTheUnshardedControllersServe(t *testing.T) {
	c := newFakeCluster(append(newGitRepos(4), gitrepo("leaving", "c"))...)
	clock := t0
	p := testMover(c, record.NewFakeRecorder(10), &clock)
	st := placement.State{ConfigMap: shardCM, Placement: parsePlacement(t, "maxMoves: 3\ninterval: 30s"), Targets: []string{"a", "b"},
		Draining: []string{"c"}, Shards: []string{"a", "b", "c"}, Served: true}
	p.Set(st)

	next := p.round(context.Background())
	patches := c.takePatches(t)
	assert.Len(t, patches, 3, "the budget")
	assert.Contains(t, patches, "gitrepos apps/leaving", "the drain first")
	assert.Equal(t, 30*time.Second, next, "the rest waits for the next window")

	clock = t0.Add(30 * time.Second)
	p.round(context.Background())
	assert.Len(t, c.takePatches(t), 2, "the rest")

	// Without them, nothing serves a new object: it is assigned at once.
	st.Served = false
	p.Set(st)
	c.add(newGitRepos(8)[4:]...)
	clock = t0.Add(31 * time.Second)
	p.round(context.Background())
	assert.Len(t, c.takePatches(t), 4, "the budget is spent, yet every new object is assigned")
}

// A shard failed over for its GitRepos only (gitjob is down, helmops runs)
// keeps its HelmOps.
func TestRoundFailsOverOnlyTheKindsThatLeave(t *testing.T) {
	c := newFakeCluster(
		placement.Object{Kind: "gitrepos", Namespace: "apps", Name: "repo", ResourceVersion: "1", Shard: "c", Labelled: true, AssignedShard: "c"},
		placement.Object{Kind: "helmops", Namespace: "apps", Name: "chart", ResourceVersion: "2", Shard: "c", Labelled: true, AssignedShard: "c"},
	)
	rec := record.NewFakeRecorder(10)
	clock := t0
	p := testMover(c, rec, &clock)
	p.Set(placement.State{ConfigMap: shardCM, Placement: parsePlacement(t, "namespaces: [apps]"), Targets: []string{"a", "b"},
		FailingOver: []string{"c"}, FailingKinds: map[string][]string{"c": {"gitrepos"}}, Shards: []string{"a", "b", "c"}})
	p.round(context.Background())

	patches := c.takePatches(t)
	assert.Contains(t, patches, "gitrepos apps/repo")
	assert.NotContains(t, patches, "helmops apps/chart", "helmops on c still runs")
}

package mover

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"

	"github.com/shardkeeper/shardkeeper/pkg/balance"
	"github.com/shardkeeper/shardkeeper/pkg/placement"
	"github.com/shardkeeper/shardkeeper/pkg/source"
)

const fluxKey = source.FluxShardKeyLabel

// fluxKinds are two of the Flux preset's kinds, as pkg/source sets them.
var fluxKinds = []source.MappedKind{
	{Resource: schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "gitrepositories"},
		Label: fluxKey, GroupByNamespace: true},
	{Resource: schema.GroupVersionResource{Group: "helm.toolkit.fluxcd.io", Version: "v2", Resource: "helmreleases"},
		Label: fluxKey, GroupByNamespace: true, SpecLabels: "spec.chart.metadata.labels"},
}

// fluxObject is a Flux object that placement put on shard ("" for none).
func fluxObject(kind, namespace, name, shard string) placement.Object {
	return placement.Object{Kind: kind, Namespace: namespace, Name: name, ResourceVersion: "10",
		Shard: shard, Labelled: shard != "", AssignedShard: shard, Grouped: true, Weight: 1}
}

// release returns a HelmRelease as the reader returns it, with spec.
func release(namespace, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
		"metadata": map[string]any{"name": name, "namespace": namespace, "resourceVersion": "10"},
		"spec":     spec,
	}}
}

// labelOf returns the value the patch sets for the Flux shard label.
func labelOf(c patchCall) string {
	meta, _ := c.body["metadata"].(map[string]any)
	l, _ := meta["labels"].(map[string]any)
	s, _ := l[fluxKey].(string)
	return s
}

func TestFullPatchSpecLabels(t *testing.T) {
	hr := fluxKinds[1]
	o := placement.Object{Namespace: "team-a", Name: "app", ResourceVersion: "10"}
	specOf := func(kind source.MappedKind, full *unstructured.Unstructured, bump bool) any {
		t.Helper()
		body, err := fullPatch(o, kind, "b", t0, full, bump)
		require.NoError(t, err)
		var got map[string]any
		require.NoError(t, json.Unmarshal(body, &got))
		plain, err := movePatch(o, kind.Label, "b", t0)
		require.NoError(t, err)
		var want map[string]any
		require.NoError(t, json.Unmarshal(plain, &want))
		assert.Equal(t, want["metadata"], got["metadata"], "the metadata as for any move, in the same write")
		return got["spec"]
	}

	chart := map[string]any{"chart": map[string]any{"spec": map[string]any{"chart": "podinfo"}}}
	assert.Equal(t, map[string]any{"chart": map[string]any{"metadata": map[string]any{"labels": map[string]any{fluxKey: "b"}}}},
		specOf(hr, release("team-a", "app", chart), false), "the chart template gets the shard label, its metadata created")

	labelled := map[string]any{"chart": map[string]any{"metadata": map[string]any{"labels": map[string]any{"team": "a", fluxKey: "a"}}}}
	assert.Equal(t, map[string]any{"chart": map[string]any{"metadata": map[string]any{"labels": map[string]any{fluxKey: "b"}}}},
		specOf(hr, release("team-a", "app", labelled), false), "a merge patch: the other labels stay")

	ref := map[string]any{"chartRef": map[string]any{"kind": "OCIRepository", "name": "podinfo"}}
	assert.Nil(t, specOf(hr, release("team-a", "app", ref), false), "a chartRef HelmRelease must not get spec.chart")

	helmops := source.MappedKind{Resource: fleetGVR("helmops"), Label: source.FleetShardRefLabel, SpecLabels: "spec.labels"}
	op := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"helm": map[string]any{"chart": "x"}}}}
	assert.Equal(t, map[string]any{"labels": map[string]any{source.FleetShardRefLabel: "b"}}, specOf(helmops, op, false),
		"a HelmOp's spec.labels is created when it has none")

	both := hr
	both.BumpOnMove = "spec.forceSyncGeneration"
	full := release("team-a", "app", map[string]any{"chart": map[string]any{}, "forceSyncGeneration": int64(2)})
	assert.Equal(t, map[string]any{"forceSyncGeneration": float64(3),
		"chart": map[string]any{"metadata": map[string]any{"labels": map[string]any{fluxKey: "b"}}}},
		specOf(both, full, true))
}

func TestRoundMovesAGroupInOneRound(t *testing.T) {
	c := newFakeCluster(
		fluxObject("gitrepositories", "team-a", "src", "c"),
		fluxObject("helmreleases", "team-a", "app", "c"),
		fluxObject("helmreleases", "team-a", "ref", "c"),
		fluxObject("helmreleases", "team-b", "app", "c"),
		fluxObject("gitrepositories", "team-b", "src", "c"),
	)
	c.full["helmreleases team-a/app"] = release("team-a", "app", map[string]any{"chart": map[string]any{"spec": map[string]any{"chart": "podinfo"}}})
	c.full["helmreleases team-a/ref"] = release("team-a", "ref", map[string]any{"chartRef": map[string]any{"name": "podinfo"}})
	c.full["helmreleases team-b/app"] = release("team-b", "app", map[string]any{"chart": map[string]any{}})
	rec := record.NewFakeRecorder(10)
	clock := t0
	p := newMover(c, c, fluxKinds, c, rec)
	p.now = func() time.Time { return clock }
	p.Set(placement.State{ConfigMap: shardCM, Placement: parsePlacement(t, "maxMoves: 3"), Targets: []string{"a", "b"}, Draining: []string{"c"}})

	p.round(context.Background())
	patches := c.takePatches(t)
	require.Len(t, patches, 3, "team-a, the heavier group, moves whole; team-b does not fit what is left of the budget")
	to := labelOf(patches["gitrepositories team-a/src"])
	for ref, call := range patches {
		assert.Equal(t, to, labelOf(call), "%s moves with its namespace", ref)
	}
	assert.Equal(t, map[string]any{"chart": map[string]any{"metadata": map[string]any{"labels": map[string]any{fluxKey: to}}}},
		patches["helmreleases team-a/app"].body["spec"], "its chart is built by the source shard it moves to")
	assert.NotContains(t, patches["helmreleases team-a/ref"].body, "spec")
	assert.NotContains(t, patches["gitrepositories team-a/src"].body, "spec")

	clock = clock.Add(time.Minute)
	p.round(context.Background())
	patches = c.takePatches(t)
	require.Len(t, patches, 2, "the next window moves team-b")
	assert.Equal(t, labelOf(patches["gitrepositories team-b/src"]), labelOf(patches["helmreleases team-b/app"]))
	assert.NotEqual(t, to, labelOf(patches["helmreleases team-b/app"]), "to the lighter shard")
}

func TestRoundMovesAGroupBiggerThanTheBudgetAlone(t *testing.T) {
	c := newFakeCluster(
		fluxObject("gitrepositories", "big", "0", "c"),
		fluxObject("gitrepositories", "big", "1", "c"),
		fluxObject("gitrepositories", "big", "2", "c"),
		fluxObject("gitrepositories", "small-0", "x", "c"),
		fluxObject("gitrepositories", "small-1", "x", "c"),
		fluxObject("gitrepositories", "small-2", "x", "c"),
	)
	rec := record.NewFakeRecorder(10)
	clock := t0
	p := newMover(c, c, fluxKinds, c, rec)
	p.now = func() time.Time { return clock }
	p.Set(placement.State{ConfigMap: shardCM, Placement: parsePlacement(t, "maxMoves: 2\ninterval: 30s"), Targets: []string{"a", "b"}, Draining: []string{"c"}})

	p.round(context.Background())
	assert.Len(t, c.takePatches(t), 3, "the group moves alone in a fresh window")
	clock = clock.Add(30 * time.Second)
	p.round(context.Background())
	assert.Len(t, c.takePatches(t), 1, "it went 1 over the window's 2, which the next window pays")
	clock = clock.Add(30 * time.Second)
	p.round(context.Background())
	assert.Len(t, c.takePatches(t), 2)
}

func TestRoundFollowsAPinAndReportsConflicts(t *testing.T) {
	pinned := fluxObject("helmreleases", "team-a", "pinned", "b")
	pinned.AssignedShard = ""
	c := newFakeCluster(fluxObject("gitrepositories", "team-a", "src", "a"), pinned)
	c.full["helmreleases team-a/pinned"] = release("team-a", "pinned", map[string]any{"chart": map[string]any{}})
	rec := record.NewFakeRecorder(10)
	clock := t0
	p := newMover(c, c, fluxKinds, c, rec)
	p.now = func() time.Time { return clock }
	p.Set(placement.State{ConfigMap: shardCM, Placement: parsePlacement(t, ""), Targets: []string{"a", "b"}})

	p.round(context.Background())
	patches := c.takePatches(t)
	require.Len(t, patches, 1)
	assert.Equal(t, "b", labelOf(patches["gitrepositories team-a/src"]), "the namespace lives where its pin says")
	assert.Equal(t, []string{"Normal ObjectsMoved placement moved 1 objects (1 moved to their group's shard) to b: 1; " +
		"namespace team-a is pinned to shard b by helmreleases team-a/pinned"}, events(rec))

	other := fluxObject("gitrepositories", "team-a", "other", "a")
	other.AssignedShard = ""
	c.add(other, fluxObject("helmreleases", "team-a", "new", ""))
	clock = clock.Add(time.Minute)
	p.round(context.Background())
	assert.Empty(t, c.takePatches(t), "pinned to two shards: nothing of the namespace moves")
	assert.Equal(t, []string{"Warning PinConflict namespace team-a is pinned to more than one shard " +
		"(a by gitrepositories team-a/other; b by helmreleases team-a/pinned): its objects are placed together, " +
		"so none of them is moved until the labels agree"}, events(rec))
	clock = clock.Add(time.Minute)
	p.round(context.Background())
	assert.Empty(t, events(rec), "reported once, not every round")
}

func TestInputFailsOverWholeGroups(t *testing.T) {
	st := placement.State{Placement: parsePlacement(t, ""), Targets: []string{"a", "c"}, FailingOver: []string{"c"},
		FailingKinds: map[string][]string{"c": {"helmreleases"}}, Shards: []string{"a", "c"}}
	objs := []placement.Object{
		fluxObject("gitrepositories", "team-a", "src", "c"),
		fluxObject("helmreleases", "team-a", "app", "c"),
		fluxObject("gitrepositories", "team-b", "src", "c"),
		// Fleet's kinds are not grouped: a GitRepo whose controller runs
		// stays, whatever else leaves.
		{Kind: "gitrepos", Namespace: "team-a", Name: "fleet", Shard: "c", Labelled: true, AssignedShard: "c", Weight: 1},
	}
	in, _ := input(st, objs, t0, 10, true, nil)
	movable := map[string]bool{}
	for _, o := range in.Objects {
		movable[o.Key] = o.Movable
	}
	assert.Equal(t, map[string]bool{
		"gitrepositories team-a/src": true, "helmreleases team-a/app": true,
		"gitrepositories team-b/src": false, "gitrepos team-a/fleet": false,
	}, movable, "a group leaves whole when the controller of any of its objects is down")
	assert.True(t, in.FreshWindow)
	moves := balance.Moves(in)
	assert.Len(t, moves, 2)
	for _, m := range moves {
		assert.Equal(t, "a", m.To)
		assert.Equal(t, balance.Failover, m.Reason)
	}
}

func TestInputGroupsByNamespace(t *testing.T) {
	deleting := fluxObject("helmreleases", "team-a", "gone", "a")
	deleting.Deleting = true
	objs := []placement.Object{fluxObject("helmreleases", "team-a", "app", "a"), deleting,
		{Kind: "gitrepos", Namespace: "team-a", Name: "fleet", Weight: 1}}
	in, _ := input(placement.State{Placement: parsePlacement(t, ""), Targets: []string{"a"}}, objs, t0, 1, false, nil)
	groups := map[string]string{}
	for _, o := range in.Objects {
		groups[o.Key] = o.Group
	}
	assert.Equal(t, map[string]string{"helmreleases team-a/app": "namespace.team-a", "helmreleases team-a/gone": "", "gitrepos team-a/fleet": ""}, groups,
		"an object being deleted holds nothing; a kind not grouped is placed on its own")
}

func TestCarried(t *testing.T) {
	for name, tc := range map[string]struct {
		spent, maxMoves int
		elapsed         time.Duration
		want            int
	}{
		"within the window":       {spent: 40, maxMoves: 50, elapsed: 30 * time.Second, want: 0},
		"over by 70":              {spent: 120, maxMoves: 50, elapsed: 30 * time.Second, want: 70},
		"over, two windows since": {spent: 120, maxMoves: 50, elapsed: 61 * time.Second, want: 20},
		"long idle":               {spent: 120, maxMoves: 50, elapsed: time.Hour, want: 0},
		"first round":             {spent: 0, maxMoves: 50, elapsed: time.Duration(1 << 62), want: 0},
		"no paced moves":          {spent: 5, maxMoves: 0, elapsed: 30 * time.Second, want: 0},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, carried(tc.spent, tc.maxMoves, tc.elapsed, 30*time.Second))
		})
	}
}

func TestInputGroupsBySetting(t *testing.T) {
	tenant := func(ns, name, value string) placement.Object {
		o := placement.Object{Kind: "gitrepos", Namespace: ns, Name: name, Weight: 1}
		if value != "" {
			o.Labels = labels.Set{"example.com/tenant": value}
		}
		return o
	}
	objs := []placement.Object{tenant("apps", "a", "acme"), tenant("web", "b", "acme"), tenant("web", "c", ""), tenant("apps", "d", "")}
	groupsOf := func(settings string) map[string]string {
		in, _ := input(placement.State{Placement: parsePlacement(t, settings), Targets: []string{"a"}}, objs, t0, 1, false, nil)
		out := map[string]string{}
		for _, o := range in.Objects {
			out[o.Key] = o.Group
		}
		return out
	}
	assert.Equal(t, map[string]string{"gitrepos apps/a": "", "gitrepos web/b": "", "gitrepos web/c": "", "gitrepos apps/d": ""},
		groupsOf(""), "without the setting, GitRepos are placed one by one")
	assert.Equal(t, map[string]string{"gitrepos apps/a": "namespace.apps", "gitrepos web/b": "namespace.web", "gitrepos web/c": "namespace.web", "gitrepos apps/d": "namespace.apps"},
		groupsOf("groupBy: namespace"))
	assert.Equal(t, map[string]string{"gitrepos apps/a": "label.apps.acme", "gitrepos web/b": "label.web.acme", "gitrepos web/c": "", "gitrepos apps/d": ""},
		groupsOf("groupBy: label\ngroupLabel: example.com/tenant"), "one group per namespace and value; no label, on its own")
}

// tenantRepo is a GitRepo labelled example.com/tenant=acme in namespace ns:
// placed by placement on shard, or, with pin, labelled by hand onto it.
func tenantRepo(ns, name, shard string, pin bool) placement.Object {
	o := placement.Object{Kind: "gitrepos", Namespace: ns, Name: name, ResourceVersion: "10",
		Shard: shard, Labelled: shard != "", AssignedShard: shard, Weight: 1, Labels: labels.Set{"example.com/tenant": "acme"}}
	if pin {
		o.AssignedShard = ""
	}
	return o
}

// TestRoundAForeignPinNeitherFreezesNorSteersAGroup: a tenant who may
// write only its own namespace gives its objects another tenant's group
// label and pins them. It may choose where its own objects go, never where
// the other tenant's do.
func TestRoundAForeignPinNeitherFreezesNorSteersAGroup(t *testing.T) {
	byTenant := "groupBy: label\ngroupLabel: example.com/tenant"
	round := func(t *testing.T, st placement.State, objs ...placement.Object) map[string]string {
		t.Helper()
		c := newFakeCluster(objs...)
		clock := t0
		p := testMover(c, record.NewFakeRecorder(10), &clock)
		st.ConfigMap, st.Placement = shardCM, parsePlacement(t, byTenant)
		p.Set(st)
		p.round(context.Background())
		got := map[string]string{}
		for ref, call := range c.takePatches(t) {
			got[ref] = call.shard()
		}
		return got
	}
	acme := []placement.Object{tenantRepo("acme", "app-1", "c", false), tenantRepo("acme", "app-2", "c", false)}

	for name, st := range map[string]placement.State{
		"draining":    {Targets: []string{"a", "b"}, Draining: []string{"c"}, Shards: []string{"a", "b", "c"}},
		"failed over": {Targets: []string{"a", "b", "c"}, FailingOver: []string{"c"}, FailingKinds: map[string][]string{"c": {"gitrepos"}}, Shards: []string{"a", "b", "c"}},
	} {
		t.Run("two foreign pins on different shards do not hold a group on a shard that is "+name, func(t *testing.T) {
			got := round(t, st, append(slices.Clone(acme),
				tenantRepo("mallory", "x", "a", true), tenantRepo("mallory", "y", "b", true))...)
			require.Contains(t, got, "gitrepos acme/app-1", "acme's objects leave c")
			assert.Equal(t, got["gitrepos acme/app-1"], got["gitrepos acme/app-2"], "together")
			assert.NotContains(t, got, "gitrepos mallory/x", "a pin is never moved")
			assert.NotContains(t, got, "gitrepos mallory/y", "a pin is never moved")
		})
	}

	t.Run("a foreign pin does not choose the group's shard", func(t *testing.T) {
		onA := []placement.Object{tenantRepo("acme", "app-1", "a", false), tenantRepo("acme", "app-2", "a", false)}
		got := round(t, placement.State{Targets: []string{"a", "b"}, Shards: []string{"a", "b"}},
			append(onA, tenantRepo("mallory", "x", "b", true))...)
		assert.Empty(t, got, "acme stays on a")
	})

	t.Run("a foreign object with a forged placement record does not pull the group", func(t *testing.T) {
		onA := []placement.Object{tenantRepo("acme", "app-1", "a", false), tenantRepo("acme", "app-2", "a", false)}
		heavy := tenantRepo("mallory", "x", "b", false)
		heavy.Weight = 100
		got := round(t, placement.State{Targets: []string{"a", "b"}, Shards: []string{"a", "b"}}, append(onA, heavy)...)
		assert.Empty(t, got, "acme stays on a, however much mallory's object weighs")
	})

	t.Run("a pin in the group's own namespace still steers it", func(t *testing.T) {
		onA := []placement.Object{tenantRepo("acme", "app-1", "a", false), tenantRepo("acme", "app-2", "a", false)}
		got := round(t, placement.State{Targets: []string{"a", "b"}, Shards: []string{"a", "b"}},
			append(onA, tenantRepo("acme", "pinned", "b", true))...)
		assert.Equal(t, map[string]string{"gitrepos acme/app-1": "b", "gitrepos acme/app-2": "b"}, got)
	})
}

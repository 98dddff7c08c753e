package plan

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/shardkeeper/shardkeeper/pkg/placement"
	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
	"github.com/shardkeeper/shardkeeper/pkg/status"
)

// decidePlaced decides with placement on; drain is the drain annotation.
func (w *world) decidePlaced(shards, placement, drain string) (Plan, error) {
	cfg, err := shardconfig.Parse(map[string]string{shardconfig.ShardsKey: shards, shardconfig.PlacementKey: placement}, nil,
		map[string]string{shardconfig.DrainAnnotation: drain})
	require.NoError(w.t, err)
	return Decide(Input{Config: cfg, Sources: w.sources, Deployments: w.deps, Mapped: w.mapped,
		ConfigMap: types.NamespacedName{Namespace: ns, Name: "shardkeeper"}})
}

// rollOut makes every Deployment ready at its replica count, as the
// Deployment controller would.
func (w *world) rollOut() {
	for _, d := range w.deps {
		n := int32(1)
		if d.Spec.Replicas != nil {
			n = *d.Spec.Replicas
		}
		d.Status.ObservedGeneration = d.Generation
		d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.AvailableReplicas = n, n, n
	}
}

func byID(p Plan) map[string]status.ShardStatus {
	out := map[string]status.ShardStatus{}
	for _, s := range p.Shards {
		out[s.ID] = s
	}
	return out
}

func TestPlacementTargetsAreReadyListedShards(t *testing.T) {
	w := newWorld(t)
	p, err := w.decidePlaced("a,b", "", "")
	require.NoError(t, err)
	assert.Empty(t, p.Targets, "no shard has rolled out yet")
	w.converge(p)
	w.rollOut()
	w.deps[ns+"/gitjob-shard-b"].Status.AvailableReplicas = 0
	p, err = w.decidePlaced("a,b", "", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, p.Targets, "b is not Available")

	p, err = w.decide("a,b", "")
	require.NoError(t, err)
	assert.Empty(t, p.Targets, "placement off")
}

// A shard scaled to no replicas (replicas: 0 in the ConfigMap) has rolled
// out, but none of its controllers runs: placement puts nothing on it, its
// objects stay, and its status says so.
func TestPausedShardReceivesNothing(t *testing.T) {
	w := newWorld(t)
	const shards = "- a\n- id: b\n  replicas: 0\n"
	p, err := w.decidePlaced(shards, "", "")
	require.NoError(t, err)
	w.converge(p)
	w.rollOut()
	w.mapped.Objects["b"] = map[string][]string{"gitrepos": {"apps/one"}}
	w.mapped.Placed = map[string]bool{"apps/one": true}

	p, err = w.decidePlaced(shards, "", "")
	require.NoError(t, err)
	assert.Empty(t, p.Actions)
	assert.Equal(t, []string{"a"}, p.Targets, "b runs no controller")
	assert.Empty(t, p.Draining)
	b := byID(p)["b"]
	assert.Equal(t, status.StateActive, b.State)
	assert.Equal(t, 2, b.Ready, "rolled out, at no replica")
	assert.Equal(t, "shard b is paused: fleet-controller-shard-b, gitjob-shard-b have no Available replica (scaled to 0 replicas), "+
		"so it receives no new objects; the objects mapped to it stay (1 gitrepos)", b.Message)
	assert.Empty(t, byID(p)["a"].Message)

	// Without placement the status still says so.
	cfg := w.config(shards, "")
	p, err = Decide(Input{Config: cfg, Sources: w.sources, Deployments: w.deps, Mapped: w.mapped})
	require.NoError(t, err)
	assert.Equal(t, "shard b is paused: fleet-controller-shard-b, gitjob-shard-b have no Available replica (scaled to 0 replicas); "+
		"the objects mapped to it stay (1 gitrepos)", byID(p)["b"].Message)

	// Every shard paused: nothing receives.
	const none = "- id: a\n  replicas: 0\n- id: b\n  replicas: 0\n"
	p, err = w.decidePlaced(none, "", "")
	require.NoError(t, err)
	w.converge(p)
	w.rollOut()
	p, err = w.decidePlaced(none, "", "")
	require.NoError(t, err)
	assert.Empty(t, p.Targets)
	assert.Equal(t, "shard a is paused: fleet-controller-shard-a, gitjob-shard-a have no Available replica (scaled to 0 replicas), "+
		"so it receives no new objects", byID(p)["a"].Message)
}

// One copy at no replica is enough to keep a shard from receiving: the
// objects that need that controller would be served by nobody there. A
// source scaled to 0 is another matter: its controller is off everywhere,
// so no shard serves its kinds less than another, and the others are
// still placed.
func TestShardWithACopyAtNoReplicaReceivesNothing(t *testing.T) {
	// A source scaled to 0 replicas: its copy on every shard is too.
	w := newWorld(t)
	for _, s := range w.sources {
		if s.Source.Name == "gitjob" {
			s.Live.Spec.Replicas = new(int32)
		}
	}
	p, err := w.decidePlaced("a,b", "", "")
	require.NoError(t, err)
	w.converge(p)
	w.rollOut()
	p, err = w.decidePlaced("a,b", "", "")
	require.NoError(t, err)
	assert.Empty(t, p.Actions)
	assert.Equal(t, []string{"a", "b"}, p.Targets, "gitjob is off everywhere: no shard is worse for it")
	assert.Empty(t, byID(p)["b"].Message)

	// One copy scaled down by hand: its shard receives nothing until the
	// copy is put back and runs.
	w = newWorld(t)
	p, err = w.decidePlaced("a,b", "", "")
	require.NoError(t, err)
	w.converge(p)
	w.rollOut()
	d := w.deps[ns+"/gitjob-shard-b"]
	d.Spec.Replicas = new(int32)
	d.Generation++
	w.rollOut()
	p, err = w.decidePlaced("a,b", "", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"gitjob-shard-b"}, kinds(p)[Update], "scaled back")
	assert.Equal(t, []string{"a"}, p.Targets)
}

// With failover on, a paused shard is a shard whose controllers are down:
// once it has been so for failoverAfter, its objects move away.
func TestPausedShardFailsOver(t *testing.T) {
	w := newWorld(t)
	const shards, place = "- a\n- id: b\n  replicas: 0\n", "failoverAfter: 1m"
	w.converge(w.decideAt(shards, place, t0, Availability{}))
	w.rollOut()
	w.mapped.Objects["b"] = map[string][]string{"gitrepos": {"apps/one"}}

	p := w.decideAt(shards, place, t0, Availability{})
	assert.Equal(t, []string{"a"}, p.Targets)
	assert.Empty(t, p.FailingOver)
	assert.Equal(t, "shard b is paused: fleet-controller-shard-b, gitjob-shard-b have no Available replica (scaled to 0 replicas), "+
		"so it receives no new objects; the objects mapped to it stay (1 gitrepos) until failover moves them, "+
		"once it has had no Available replica for 1m0s", byID(p)["b"].Message)

	p = w.decideAt(shards, place, t0.Add(time.Minute), p.Availability)
	assert.Equal(t, []string{"b"}, p.FailingOver)
	assert.Equal(t, status.StateFailedOver, byID(p)["b"].State)
}

func TestPlacementDrainsARemovedShard(t *testing.T) {
	w := newWorld(t)
	p, _ := w.decidePlaced("a,b", "", "")
	w.converge(p)
	w.rollOut()
	w.mapped.Objects["b"] = map[string][]string{"gitrepos": {"x/1", "x/2"}}
	w.mapped.Placed = map[string]bool{"x/1": true, "x/2": true}

	p, err := w.decidePlaced("a", "", "")
	require.NoError(t, err)
	assert.Empty(t, kinds(p)[Delete], "a draining shard is kept")
	assert.Equal(t, []string{"b"}, p.Draining)
	assert.Equal(t, []string{"a"}, p.Targets)
	b := byID(p)["b"]
	assert.Equal(t, status.StateDraining, b.State)
	assert.Contains(t, b.Message, "2 objects left")

	// One object was relabelled by a person: it pins the shard.
	delete(w.mapped.Placed, "x/2")
	p, err = w.decidePlaced("a", "", "")
	require.NoError(t, err)
	b = byID(p)["b"]
	assert.Equal(t, status.StateBlocked, b.State)
	assert.Contains(t, b.Message, "1 objects on it are pinned")
	assert.Contains(t, b.Message, "gitrepos x/2")
	assert.NotContains(t, b.Message, "x/1")
	assert.Equal(t, []string{"b"}, p.Draining, "the movable objects still leave")

	// Out of scope counts as pinned too.
	w.mapped.Placed["x/2"] = true
	p, err = w.decidePlaced("a", "namespaces: [y]", "")
	require.NoError(t, err)
	assert.Equal(t, status.StateBlocked, byID(p)["b"].State)

	// With nowhere to go, the drain waits and says so.
	p, err = w.decidePlaced("[]", "", "")
	require.NoError(t, err)
	assert.Equal(t, status.StateDraining, byID(p)["b"].State)
	assert.Contains(t, byID(p)["b"].Message, "no listed shard is Available")
	assert.Equal(t, []string{"fleet-controller-shard-a", "gitjob-shard-a"}, kinds(p)[Delete], "a is empty and goes; b is kept")

	// Empty: deleted.
	delete(w.mapped.Objects, "b")
	p, err = w.decidePlaced("a", "", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"fleet-controller-shard-b", "gitjob-shard-b"}, kinds(p)[Delete])
}

func TestDrainAnnotationKeepsTheListedShard(t *testing.T) {
	w := newWorld(t)
	p, _ := w.decidePlaced("a,b", "", "")
	w.converge(p)
	w.rollOut()
	w.mapped.Objects["b"] = map[string][]string{"helmreleases": {"x/1"}}
	w.mapped.Placed = map[string]bool{"x/1": true}

	p, err := w.decidePlaced("a,b", "", "b")
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, p.Targets, "a draining shard receives nothing")
	assert.Equal(t, []string{"b"}, p.Draining)
	assert.Equal(t, status.StateDraining, byID(p)["b"].State)
	assert.Contains(t, byID(p)["b"].Message, "until it is removed from the list")

	delete(w.mapped.Objects, "b")
	p, err = w.decidePlaced("a,b", "", "b")
	require.NoError(t, err)
	assert.Equal(t, status.StateDrained, byID(p)["b"].State)
	assert.Empty(t, p.Actions, "a drained shard that is still listed stays")
}

func TestAutoShards(t *testing.T) {
	w := newWorld(t)
	for i := range 250 {
		w.mapped.Unlabelled = append(w.mapped.Unlabelled, fmt.Sprintf("x/%d", i))
	}
	p, err := w.decidePlaced("auto", "objectsPerShard: 100\nmaxShards: 4", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"shard-0", "shard-1", "shard-2"}, ids(p))
	w.converge(p)

	// 20% more objects than 3 shards hold is needed to grow.
	w.mapped.Unlabelled = w.mapped.Unlabelled[:200]
	for i := range 150 {
		w.mapped.Unlabelled = append(w.mapped.Unlabelled, fmt.Sprintf("y/%d", i))
	}
	p, err = w.decidePlaced("auto", "objectsPerShard: 100\nmaxShards: 4", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"shard-0", "shard-1", "shard-2"}, ids(p), "350 is under 120%% of 300")
	for i := range 50 {
		w.mapped.Unlabelled = append(w.mapped.Unlabelled, fmt.Sprintf("z/%d", i))
	}
	p, err = w.decidePlaced("auto", "objectsPerShard: 100\nmaxShards: 4", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"shard-0", "shard-1", "shard-2", "shard-3"}, ids(p), "400 is over 120%% of 300")

	// Shrinking goes through the drain: the dropped shard keeps its
	// Deployments while objects are on it.
	w.converge(p)
	w.rollOut()
	w.mapped.Unlabelled = nil
	w.mapped.Objects["shard-3"] = map[string][]string{"gitrepos": {"x/1"}}
	w.mapped.Placed = map[string]bool{"x/1": true}
	p, err = w.decidePlaced("auto", "objectsPerShard: 100\nmaxShards: 4", "")
	require.NoError(t, err)
	assert.Equal(t, status.StateDraining, byID(p)["shard-3"].State)
	assert.Equal(t, []string{"shard-0"}, p.Targets)
	assert.Contains(t, kinds(p)[Delete], "gitjob-shard-shard-1", "empty shards go at once")
	assert.NotContains(t, kinds(p)[Delete], "gitjob-shard-shard-3")

	// Before the caches have synced nothing is resized.
	w.mapped.Unsynced = true
	p, err = w.decidePlaced("auto", "objectsPerShard: 100\nmaxShards: 4", "")
	require.NoError(t, err)
	assert.Empty(t, p.Actions)
	assert.Len(t, ids(p), 4)
}

func ids(p Plan) []string {
	var out []string
	for _, s := range p.Shards {
		out = append(out, s.ID)
	}
	return out
}

func TestMovable(t *testing.T) {
	on, err := shardconfig.ParsePlacement("namespaces: [a]")
	require.NoError(t, err)
	placed := placement.Object{Namespace: "a", Shard: "s", Labelled: true, AssignedShard: "s"}
	assert.True(t, Movable(on, placed))
	assert.True(t, Movable(on, placement.Object{Namespace: "a"}), "unlabelled")
	assert.False(t, Movable(on, placement.Object{Namespace: "a", Shard: "s", Labelled: true}), "labelled by a person")
	assert.False(t, Movable(on, placement.Object{Namespace: "b"}), "out of scope")
	deleting := placed
	deleting.Deleting = true
	assert.False(t, Movable(on, deleting))
	assert.False(t, Movable(shardconfig.Placement{}, placed), "placement off")
}

func TestUnlabelledServed(t *testing.T) {
	w := newWorld(t)
	assert.False(t, UnlabelledServed(w.sources), "no replica available yet")
	w.rollOut()
	assert.True(t, UnlabelledServed(w.sources), "fleet-controller and gitjob run; helmops is not installed")
	w.deps[ns+"/gitjob"].Status.AvailableReplicas = 0
	assert.False(t, UnlabelledServed(w.sources), "nothing runs GitRepos without a shard label")
	assert.False(t, UnlabelledServed(nil))
}

func TestPlanShardIDs(t *testing.T) {
	w := newWorld(t)
	p, err := w.decide("b,a", "")
	require.NoError(t, err)
	w.converge(p)
	p, err = w.decide("a", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, p.ShardIDs(), "b is removed, being empty")
	w.mapped.Objects["c"] = map[string][]string{"gitrepos": {"apps/x"}}
	p, err = w.decide("a", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, p.ShardIDs(), "an ID only objects carry is no shard")
}

// objectList is a Mapped over fixed objects, as the caches list them.
type objectList []placement.Object

func (l objectList) Synced() bool                 { return true }
func (l objectList) Failing() []string            { return nil }
func (l objectList) Counts(string) map[string]int { return nil }
func (l objectList) Sample(string, int) []string  { return nil }
func (l objectList) Shards() []string             { return nil }
func (l objectList) All() []placement.Object      { return l }
func (l objectList) MappedTo(shard string) []placement.Object {
	var out []placement.Object
	for _, o := range l {
		if o.Labelled && o.Shard == shard {
			out = append(out, o)
		}
	}
	return out
}

func fluxObject(ns, name, shard string, pinned bool) placement.Object {
	o := placement.Object{Kind: "helmreleases", Namespace: ns, Name: name, Shard: shard, Labelled: shard != "", Grouped: true, Weight: 1}
	if !pinned {
		o.AssignedShard = shard
	}
	return o
}

func TestGroupHolds(t *testing.T) {
	p, err := shardconfig.ParsePlacement("selector: team=a")
	require.NoError(t, err)
	outside := fluxObject("team-a", "outside", "a", false)
	inScope := func(o placement.Object) placement.Object { o.Labels = map[string]string{"team": "a"}; return o }
	deleting := inScope(fluxObject("team-a", "deleting", "c", true))
	deleting.Deleting = true
	objs := []placement.Object{
		inScope(fluxObject("team-a", "pinned", "b", true)), outside, deleting,
		inScope(fluxObject("team-a", "placed", "a", false)),
		inScope(fluxObject("team-b", "placed", "a", false)),
		{Kind: "gitrepos", Namespace: "team-c", Name: "fleet", Shard: "a", Labelled: true, Weight: 1},
	}
	holds := GroupHolds(p, objs)
	require.Equal(t, []string{"namespace.team-a"}, slices.Collect(maps.Keys(holds)), "a deleting object holds nothing; a kind not grouped has no group")
	assert.Equal(t, []string{"a", "b"}, HoldShards(holds["namespace.team-a"]))
	assert.Equal(t, "namespace team-a is pinned to more than one shard (a by helmreleases team-a/outside (outside placement's scope); "+
		"b by helmreleases team-a/pinned): its objects are placed together, so none of them is moved until the labels agree",
		HoldMessage("namespace team-a", holds["namespace.team-a"]))
	assert.Equal(t, "namespace team-a is pinned to shard b by helmreleases team-a/pinned", HoldMessage("namespace team-a", holds["namespace.team-a"][1:]))
}

func TestPinnedCountsTheObjectsAPinHolds(t *testing.T) {
	p, err := shardconfig.ParsePlacement("")
	require.NoError(t, err)
	m := objectList{
		fluxObject("team-a", "pinned", "c", true),
		fluxObject("team-a", "placed", "c", false),
		fluxObject("team-b", "placed", "c", false),
		fluxObject("team-c", "pinned", "a", true),
		fluxObject("team-c", "placed", "c", false),
	}
	n, sample := pinned(p, m, "c", 5)
	assert.Equal(t, 2, n, "team-a is pinned to c; team-b may leave, and so may team-c's object, to its pin")
	assert.Equal(t, []string{"helmreleases team-a/pinned",
		"helmreleases team-a/placed (namespace team-a is pinned to shard c by helmreleases team-a/pinned)"}, sample)
	n, sample = pinned(p, m, "c", 1)
	assert.Equal(t, 2, n)
	assert.Equal(t, []string{"helmreleases team-a/pinned"}, sample, "a sample of n")
}

// The admission policy fails open: an object may be born on a shard just
// deleted. Placement labelled it, so placement takes it back onto a
// listed shard; one labelled by hand with an unknown ID is left to the
// operator, warned about as before.
func TestObjectsBornOnADeletedShardAreDrained(t *testing.T) {
	w := newWorld(t)
	p, _ := w.decidePlaced("a", "", "")
	w.converge(p)
	w.rollOut()
	w.mapped.Objects["gone"] = map[string][]string{"helmreleases": {"x/born", "x/typo"}}
	w.mapped.Placed = map[string]bool{"x/born": true}

	p, err := w.decidePlaced("a", "", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"gone"}, p.Draining, "placement moves the objects it labelled off a shard that is gone")
	require.Len(t, p.Unknown, 1, "and they are counted and warned about until they have left")
	assert.Equal(t, 2, p.Unknown[0].Count)

	p, err = w.decide("a", "")
	require.NoError(t, err)
	assert.Empty(t, p.Draining, "placement off: nothing moves")
	assert.Len(t, p.Unknown, 1)
}

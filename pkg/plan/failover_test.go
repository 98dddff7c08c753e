package plan

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/shardkeeper/shardkeeper/pkg/render"
	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
	"github.com/shardkeeper/shardkeeper/pkg/status"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// decideAt decides with placement on at now, from what was seen before.
func (w *world) decideAt(shards, placement string, now time.Time, seen Availability) Plan {
	w.t.Helper()
	cfg, err := shardconfig.Parse(map[string]string{shardconfig.ShardsKey: shards, shardconfig.PlacementKey: placement}, nil, nil)
	require.NoError(w.t, err)
	p, err := Decide(Input{Config: cfg, Sources: w.sources, Deployments: w.deps, Services: w.svcs, Mapped: w.mapped,
		ConfigMap: types.NamespacedName{Namespace: ns, Name: "shardkeeper"}, Now: now, Availability: seen})
	require.NoError(w.t, err)
	return p
}

// setAvailable gives every Deployment of shard id one Available replica,
// or none.
func (w *world) setAvailable(id string, up bool) {
	for _, d := range w.deps {
		if d.Labels[render.ShardLabel] == id {
			d.Status.AvailableReplicas = 0
			if up {
				d.Status.AvailableReplicas = 1
			}
		}
	}
}

// failoverWorld is shards a, b, c, d rolled out, with failover after a minute.
func failoverWorld(t *testing.T) (*world, string) {
	t.Helper()
	w := newWorld(t)
	const placement = "failoverAfter: 1m"
	w.converge(w.decideAt("a,b,c,d", placement, t0, Availability{}))
	w.rollOut()
	return w, placement
}

func TestFailoverWaitsAFullFailoverAfterOfItsOwn(t *testing.T) {
	w, place := failoverWorld(t)
	w.setAvailable("b", false)
	w.mapped.Objects["b"] = map[string][]string{"gitrepos": {"apps/one", "apps/two"}}

	p := w.decideAt("a,b,c,d", place, t0, Availability{})
	assert.Empty(t, p.FailingOver, "first seen down just now")
	assert.Equal(t, time.Minute, p.RecheckAfter, "decide again when the minute is up")
	assert.NotContains(t, p.Targets, "b")

	p = w.decideAt("a,b,c,d", place, t0.Add(59*time.Second), p.Availability)
	assert.Empty(t, p.FailingOver)
	assert.Equal(t, time.Second, p.RecheckAfter)

	p = w.decideAt("a,b,c,d", place, t0.Add(time.Minute), p.Availability)
	assert.Equal(t, []string{"b"}, p.FailingOver)
	assert.Equal(t, status.StateFailedOver, byID(p)["b"].State)
	assert.Contains(t, byID(p)["b"].Message, "fleet-controller-shard-b, gitjob-shard-b have had no Available replica since 2026-11-30T12:00:00Z")
	assert.Contains(t, byID(p)["b"].Message, "0 of 2 have left, 2 are still mapped to it")

	// Two of its objects leave: the count of those that left follows.
	w.mapped.Objects["b"]["gitrepos"] = w.mapped.Objects["b"]["gitrepos"][:0]
	p = w.decideAt("a,b,c,d", place, t0.Add(90*time.Second), p.Availability)
	assert.Contains(t, byID(p)["b"].Message, "2 of 2 have left, 0 are still mapped to it")
	assert.Equal(t, []string{"a", "c", "d"}, p.Targets)
	assert.Empty(t, p.Actions, "the shard's Deployments are left as they are")

	// A new process knows nothing of the past: it waits a minute again.
	p = w.decideAt("a,b,c,d", place, t0.Add(time.Hour), Availability{})
	assert.Empty(t, p.FailingOver)
}

// setCopyOfBAvailable gives shard b's copy of source one Available
// replica, or none.
func (w *world) setCopyOfBAvailable(source string, up bool) {
	d := w.deps[ns+"/"+source+"-shard-b"]
	require.NotNil(w.t, d, "%s-shard-b", source)
	d.Status.AvailableReplicas = 0
	if up {
		d.Status.AvailableReplicas = 1
	}
}

// A shard's controllers serve different kinds: when gitjob is down its
// GitRepos are served by nobody, although fleet-controller and helmops run.
// Only the kinds that need the controller that is down leave the shard.
func TestFailoverIsPerController(t *testing.T) {
	w := newWorld(t)
	for i, s := range w.sources {
		if s.Source.Name == "helmops" {
			w.sources[i].Live = testfixture.HelmOpsController(ns)
			w.deps[ns+"/helmops"] = w.sources[i].Live
		}
	}
	const place = "failoverAfter: 1m"
	w.converge(w.decideAt("a,b,c,d", place, t0, Availability{}))
	w.rollOut()
	w.mapped.Objects["b"] = map[string][]string{"gitrepos": {"apps/one", "apps/two"}, "helmops": {"apps/chart"}}
	w.setCopyOfBAvailable("gitjob", false)

	p := w.decideAt("a,b,c,d", place, t0, Availability{})
	assert.Empty(t, p.FailingOver, "first seen down just now")
	assert.NotContains(t, p.Targets, "b")

	p = w.decideAt("a,b,c,d", place, t0.Add(time.Minute), p.Availability)
	assert.Equal(t, []string{"b"}, p.FailingOver)
	assert.Equal(t, status.StateFailedOver, byID(p)["b"].State)
	assert.Contains(t, byID(p)["b"].Message, "gitjob-shard-b has had no Available replica since 2026-11-30T12:00:00Z")
	assert.Contains(t, byID(p)["b"].Message, "its gitrepos move to the other shards, paced: 0 of 2 have left, 2 are still mapped to it")

	// fleet-controller going down as well takes the HelmOps with it: no
	// Bundle of theirs reaches a cluster without it.
	w.setCopyOfBAvailable("fleet-controller", false)
	p = w.decideAt("a,b,c,d", place, t0.Add(3*time.Minute), p.Availability)
	assert.Equal(t, map[string][]string{"b": {"gitrepos"}}, p.FailingKinds, "fleet-controller first seen down just now")
	p = w.decideAt("a,b,c,d", place, t0.Add(4*time.Minute), p.Availability)
	assert.Equal(t, map[string][]string{"b": {"gitrepos", "helmops"}}, p.FailingKinds)

	// gitjob comes back while helmops goes down: the HelmOps move, the
	// GitRepos stay.
	w.setCopyOfBAvailable("gitjob", true)
	w.setCopyOfBAvailable("fleet-controller", true)
	w.setCopyOfBAvailable("helmops", false)
	p = w.decideAt("a,b,c,d", place, t0.Add(5*time.Minute), p.Availability)
	assert.Empty(t, p.FailingOver, "helmops first seen down just now")
	p = w.decideAt("a,b,c,d", place, t0.Add(6*time.Minute), p.Availability)
	assert.Equal(t, map[string][]string{"b": {"helmops"}}, p.FailingKinds)
	assert.Contains(t, byID(p)["b"].Message, "its helmops move to the other shards")
}

func TestFailoverComesBackGradually(t *testing.T) {
	w, place := failoverWorld(t)
	w.setAvailable("b", false)
	p := w.decideAt("a,b,c,d", place, t0, Availability{})
	p = w.decideAt("a,b,c,d", place, t0.Add(2*time.Minute), p.Availability)
	require.Equal(t, []string{"b"}, p.FailingOver)

	w.setAvailable("b", true)
	back := t0.Add(3 * time.Minute)
	p = w.decideAt("a,b,c,d", place, back, p.Availability)
	assert.Empty(t, p.FailingOver)
	assert.Equal(t, status.StateActive, byID(p)["b"].State)
	assert.Contains(t, byID(p)["b"].Message, "back after a failover")
	assert.NotContains(t, p.Targets, "b", "not yet up for a minute")
	assert.Equal(t, time.Minute, p.RecheckAfter)

	p = w.decideAt("a,b,c,d", place, back.Add(time.Minute), p.Availability)
	assert.Contains(t, p.Targets, "b", "up for a minute: rebalance brings objects back")
	assert.Empty(t, byID(p)["b"].Message)
	assert.Zero(t, p.RecheckAfter)
}

// A shard that is unavailable for less than failoverAfter (a rollout) is
// never failed over, and does not count as returning afterwards.
func TestFailoverIgnoresShortOutages(t *testing.T) {
	w, place := failoverWorld(t)
	w.setAvailable("b", false)
	p := w.decideAt("a,b,c,d", place, t0, Availability{})
	w.setAvailable("b", true)
	p = w.decideAt("a,b,c,d", place, t0.Add(30*time.Second), p.Availability)
	assert.Empty(t, p.FailingOver)
	assert.Contains(t, p.Targets, "b")
	assert.Empty(t, p.Availability.unavailable)
	assert.Empty(t, p.Availability.returned)
}

func TestFailoverBlastRadius(t *testing.T) {
	w, place := failoverWorld(t)
	for _, id := range []string{"a", "b", "c"} {
		w.setAvailable(id, false)
	}
	p := w.decideAt("a,b,c,d", place, t0, Availability{})
	p = w.decideAt("a,b,c,d", place, t0.Add(time.Minute), p.Availability)
	assert.Empty(t, p.FailingOver, "3 of 4 down is more than the default 50%")
	assert.Contains(t, p.FailoverWithheld, "3 of 4 listed shards have no Available replica")
	assert.Equal(t, status.StateActive, byID(p)["a"].State)
	assert.Contains(t, byID(p)["a"].Message, "is not failed over")

	w.setAvailable("c", true)
	p = w.decideAt("a,b,c,d", place, t0.Add(2*time.Minute), p.Availability)
	assert.Equal(t, []string{"a", "b"}, p.FailingOver, "2 of 4 is within 50%")
	assert.Empty(t, p.FailoverWithheld)

	p = w.decideAt("a,b,c,d", "failoverAfter: 1m\nfailoverMaxDown: 1", t0.Add(3*time.Minute), p.Availability)
	assert.Empty(t, p.FailingOver, "a count bounds it too")
}

// In an outage of many shards, the first to pass failoverAfter does not
// move its objects onto the next ones to go: the bound counts every shard
// without an Available replica.
func TestFailoverCountsShardsOnTheirWayDown(t *testing.T) {
	w, place := failoverWorld(t)
	w.setAvailable("a", false)
	p := w.decideAt("a,b,c,d", place, t0, Availability{})
	w.setAvailable("b", false)
	w.setAvailable("c", false)
	p = w.decideAt("a,b,c,d", place, t0.Add(50*time.Second), p.Availability)
	p = w.decideAt("a,b,c,d", place, t0.Add(time.Minute), p.Availability)
	assert.Empty(t, p.FailingOver, "only a is down yet, but b and c have no Available replica either")
	assert.Contains(t, p.FailoverWithheld, "3 of 4 listed shards have no Available replica")
}

func TestFailoverLeavesDrainingShardsAndNeedsTheSetting(t *testing.T) {
	w, place := failoverWorld(t)
	w.setAvailable("b", false)
	p := w.decideAt("a,b,c,d", place, t0, Availability{})
	later := p.Availability

	p = w.decideAt("a,b,c,d", "", t0.Add(time.Hour), later)
	assert.Empty(t, p.FailingOver, "no failoverAfter: no failover")
	assert.Empty(t, p.Availability.unavailable, "and nothing remembered")

	cfg, err := shardconfig.Parse(map[string]string{shardconfig.ShardsKey: "a,b,c,d", shardconfig.PlacementKey: place}, nil,
		map[string]string{shardconfig.DrainAnnotation: "b"})
	require.NoError(t, err)
	p, err = Decide(Input{Config: cfg, Sources: w.sources, Deployments: w.deps, Mapped: w.mapped,
		ConfigMap: types.NamespacedName{Namespace: ns, Name: "shardkeeper"}, Now: t0.Add(time.Hour), Availability: later})
	require.NoError(t, err)
	assert.Empty(t, p.FailingOver, "a draining shard is leaving already")
	assert.Equal(t, []string{"b"}, p.Draining)
}

// FuzzFailover drives random outages through a sequence of decisions and
// checks the invariants: nothing fails over before failoverAfter of this
// process's own observation, never more shards than the bound, never a
// draining one, and a shard that fails over is never a target.
func FuzzFailover(f *testing.F) {
	f.Add(uint64(1), uint8(4), uint8(2))
	f.Add(uint64(7), uint8(6), uint8(1))
	f.Add(uint64(42), uint8(3), uint8(3))
	f.Fuzz(func(t *testing.T, seed uint64, n, maxDown uint8) {
		n = n%6 + 1
		maxDown = maxDown%4 + 1
		rng := rand.New(rand.NewPCG(seed, seed))
		w := newWorld(t)
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("s%d", i)
		}
		shards := fmt.Sprint(ids)
		shards = shards[1 : len(shards)-1]
		place := fmt.Sprintf("failoverAfter: 1m\nfailoverMaxDown: %d", maxDown)
		w.converge(w.decideAt(shards, place, t0, Availability{}))
		w.rollOut()
		seen, now := Availability{}, t0
		for range 30 {
			now = now.Add(time.Duration(rng.IntN(90)) * time.Second)
			for _, id := range ids {
				if rng.IntN(4) == 0 {
					w.setAvailable(id, rng.IntN(2) == 0)
				}
			}
			p := w.decideAt(shards, place, now, seen)
			if now.Sub(t0) < time.Minute {
				require.Empty(t, p.FailingOver, "failover within failoverAfter of the start")
			}
			require.LessOrEqual(t, len(p.FailingOver), int(maxDown))
			for _, id := range p.FailingOver {
				require.NotContains(t, p.Targets, id)
				require.NotContains(t, p.Draining, id)
				since, ok := p.Availability.unavailable[ns+"/gitjob-shard-"+id]
				require.True(t, ok, "with nothing mapped, a shard fails over only when every copy is down")
				require.GreaterOrEqual(t, now.Sub(since), time.Minute)
			}
			seen = p.Availability
		}
	})
}

// While a copy is renamed, the copy of the earlier name serves the shard
// until the current one is Available: the shard is down only once neither
// has an Available replica.
func TestFailoverCountsTheEarlierCopyDuringARename(t *testing.T) {
	w, old := fluxWorldWithLegacy(t, "a", true)
	const place = "failoverAfter: 1m"
	w.converge(w.decideAt("a,b,c,d", place, t0, Availability{}))
	w.rollOut()
	cur := w.deps["flux-system/helm-controller-a"]
	require.NotNil(t, cur)
	cur.Status.AvailableReplicas = 0 // say, its new image cannot be pulled
	w.mapped.Objects["a"] = map[string][]string{"helmreleases": {"apps/one", "apps/two"}}

	p := w.decideAt("a,b,c,d", place, t0, Availability{})
	require.Empty(t, kinds(p)[Delete], "the earlier copy stays until the current one is Available")
	p = w.decideAt("a,b,c,d", place, t0.Add(time.Hour), p.Availability)
	assert.Empty(t, p.FailingOver, "helm-controller-shard-a serves the HelmReleases")
	assert.Empty(t, p.FailoverWithheld)
	assert.Equal(t, status.StateActive, byID(p)["a"].State)
	assert.NotContains(t, byID(p)["a"].Message, "down")

	// The earlier copy goes down too: the shard is down from then on.
	old.Status.AvailableReplicas = 0
	p = w.decideAt("a,b,c,d", place, t0.Add(2*time.Hour), p.Availability)
	assert.Empty(t, p.FailingOver, "first seen down just now")
	p = w.decideAt("a,b,c,d", place, t0.Add(2*time.Hour+time.Minute), p.Availability)
	assert.Equal(t, []string{"a"}, p.FailingOver)
	assert.Contains(t, byID(p)["a"].Message, "helm-controller-a, helm-controller-shard-a have had no Available replica since 2026-11-30T14:00:00Z")
}

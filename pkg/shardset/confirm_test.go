package shardset

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/shardkeeper/shardkeeper/pkg/placement"
	"github.com/shardkeeper/shardkeeper/pkg/status"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// removalEnv is a fleet env whose shards a and b exist, every write of
// their creation seen, and no request recorded yet. Its clock moves on a
// minute at every reading, so that no status write is held back by the
// pacing.
func removalEnv(t *testing.T) *env {
	t.Helper()
	e := fleetEnv(t)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	e.c.now = func() time.Time { now = now.Add(time.Minute); return now }
	for range 2 { // the second shows the writes and emits their Events
		_, err := e.c.onConfigMap(shardCM.String(), shardConfigMapObject("a,b", ""))
		require.NoError(t, err)
	}
	e.events()
	e.deployments.reset()
	e.services.reset()
	e.configMaps.enqueues = nil
	return e
}

func TestRemovalWaitsForWhatTheAPIServerShows(t *testing.T) {
	e := removalEnv(t)
	e.mapped.Ahead = map[string]string{"b": "gitrepos team/payments"}

	_, err := e.c.onConfigMap(shardCM.String(), shardConfigMapObject("a", ""))

	require.NoError(t, err)
	assert.Equal(t, [][]string{{"b"}}, e.mapped.Asked)
	assert.Empty(t, e.deployments.requests(), "no Deployment of b is deleted")
	assert.Empty(t, e.services.requests(), "no Service of b is deleted")
	assert.Contains(t, e.configMaps.enqueues, enqueued{Key: shardCM.String(), After: liveRecheck},
		"decided again even if no watch event comes")
	st := status.Decode(e.statusMaps.objects[statusKey].Data)
	require.Len(t, st.Shards, 2)
	assert.Equal(t, status.StateWaiting, st.Shards[1].State)
	assert.Contains(t, st.Shards[1].Message, "gitrepos team/payments")

	// The caches show it now: Blocked, and still nothing is deleted.
	e.mapped.Ahead = nil
	e.mapped.Objects["b"] = map[string][]string{"gitrepos": {"team/payments"}}
	_, err = e.c.onConfigMap(shardCM.String(), shardConfigMapObject("a", ""))
	require.NoError(t, err)
	assert.Len(t, e.mapped.Asked, 1, "the caches' count blocks the removal: nothing to ask")
	assert.Empty(t, e.deployments.requests())
	assert.Contains(t, e.events()[0], "Warning ShardDeletionBlocked shard b was removed")

	// Gone at the API server and from the caches: deleted, once asked.
	delete(e.mapped.Objects, "b")
	_, err = e.c.onConfigMap(shardCM.String(), shardConfigMapObject("a", ""))
	require.NoError(t, err)
	assert.Equal(t, [][]string{{"b"}, {"b"}}, e.mapped.Asked)
	assert.Len(t, e.deployments.requests(), 2, "both Deployments of b are deleted")
}

func TestRemovalDeletesNothingWhenTheAPIServerCannotSay(t *testing.T) {
	e := removalEnv(t)
	e.mapped.LiveErr = errors.New("connection refused")

	_, err := e.c.onConfigMap(shardCM.String(), shardConfigMapObject("a", ""))

	require.ErrorContains(t, err, "before deleting them: connection refused")
	assert.Empty(t, e.deployments.requests())
	assert.Empty(t, e.services.requests())
}

func TestForcedRemovalDoesNotAsk(t *testing.T) {
	e := removalEnv(t)
	e.mapped.LiveErr = errors.New("connection refused")

	_, err := e.c.onConfigMap(shardCM.String(), shardConfigMapObject("a", "b"))

	require.NoError(t, err)
	assert.Empty(t, e.mapped.Asked, "the operator forced it: nothing to confirm")
	assert.Len(t, e.deployments.requests(), 2)
}

// placementGate stands for the mover: it records the targets the shard set
// narrowed placement to, and how often the API server had been asked by
// then.
type placementGate struct {
	mapped      *testfixture.MappedTable
	restricted  [][]string
	askedBefore []int
}

func (g *placementGate) Set(placement.State) {}

func (g *placementGate) Restrict(_ context.Context, targets []string, _ bool) error {
	g.restricted = append(g.restricted, targets)
	g.askedBefore = append(g.askedBefore, len(g.mapped.Asked))
	return nil
}

// A relabel onto a removed shard that lands after the API server was asked
// would strand its object: placement stops writing onto the shard first.
func TestRemovalWithdrawsTheShardFromPlacementFirst(t *testing.T) {
	e := removalEnv(t)
	gate := &placementGate{mapped: e.mapped}
	e.c.opts.Mover = gate

	_, err := e.c.onConfigMap(shardCM.String(), shardConfigMapObject("a", ""))

	require.NoError(t, err)
	require.Equal(t, [][]string{{"b"}}, e.mapped.Asked)
	require.NotEmpty(t, gate.restricted, "placement is narrowed before b is removed")
	assert.Equal(t, 0, gate.askedBefore[0], "before the API server is asked")
	assert.NotContains(t, gate.restricted[0], "b")
}

// A kind that cannot be listed keeps the caches unsynced for as long as it
// lasts: the status is written anyway, so that it says why nothing is
// removed.
func TestOnChangeReportsAKindThatCannotBeListed(t *testing.T) {
	e := removalEnv(t)
	e.mapped.Unsynced = true
	e.mapped.FailingKinds = []string{"helmops: discovering fleet.cattle.io/v1alpha1: the server is currently unable to handle the request"}

	_, err := e.c.onConfigMap(shardCM.String(), shardConfigMapObject("a", ""))

	require.NoError(t, err)
	assert.Empty(t, e.deployments.requests(), "no Deployment of b is deleted")
	st := status.Decode(e.statusMaps.objects[statusKey].Data)
	require.Len(t, st.Shards, 2)
	assert.Equal(t, status.StateWaiting, st.Shards[1].State)
	assert.Contains(t, st.Shards[1].Message, "these kinds cannot be listed: helmops")
}

// silentAPIServer is a mappedObjects whose API server never answers a LIST.
type silentAPIServer struct{ *testfixture.MappedTable }

func (silentAPIServer) Live(ctx context.Context, _ []string) (map[string]string, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(5 * time.Second):
		return nil, errors.New("the LIST outlived the daemon's context")
	}
}

func TestShutdownEndsTheReadBeforeARemoval(t *testing.T) {
	e := removalEnv(t)
	e.c.mapped = silentAPIServer{e.mapped}
	ctx, cancel := context.WithCancel(t.Context())
	e.c.ctx = ctx
	cancel()

	start := time.Now()
	_, err := e.c.onConfigMap(shardCM.String(), shardConfigMapObject("a", ""))

	require.ErrorIs(t, err, context.Canceled)
	assert.Less(t, time.Since(start), time.Second, "shutdown does not wait for the API server")
	assert.Empty(t, e.deployments.requests())
}

// kube-controller-manager writes a new Deployment's status for seconds:
// a removal in that time finds the resourceVersion moved on, and deletes
// again on the API server's copy, as long as that is still the same
// managed object, labelled as the decision saw it.
func TestRemovalDeletesAgainWhenOnlyTheResourceVersionMoved(t *testing.T) {
	e := removalEnv(t)
	statusUpdate := func(d *appsv1.Deployment) { d.Status.AvailableReplicas = 1 }
	e.deployments.touch(testNS+"/fleet-controller-shard-b", statusUpdate)
	e.deployments.touch(testNS+"/gitjob-shard-b", func(d *appsv1.Deployment) {
		d.Labels = maps.Clone(d.Labels)
		d.Labels["team"] = "took-it-over"
	})

	_, err := e.c.onConfigMap(shardCM.String(), shardConfigMapObject("a", ""))

	require.Error(t, err, "the relabelled one is decided again")
	assert.True(t, apierrors.IsConflict(err), "%v", err)
	assert.Equal(t, []string{
		"delete " + testNS + "/fleet-controller-shard-b", "delete " + testNS + "/fleet-controller-shard-b",
		"delete " + testNS + "/gitjob-shard-b",
		"get " + testNS + "/fleet-controller-shard-b", "get " + testNS + "/gitjob-shard-b",
	}, e.deployments.summary())
	e.deployments.catchUp()
	_, present := e.deployments.objects[testNS+"/fleet-controller-shard-b"]
	assert.False(t, present, "deleted on its second attempt")
	relabelled, kept := e.deployments.objects[testNS+"/gitjob-shard-b"]
	require.True(t, kept, "a change of its labels may have made it someone else's: not deleted on stale grounds")
	assert.Equal(t, "took-it-over", relabelled.Labels["team"])
}

// stampGate stands for a mover whose withdrawal from the stamp is not in
// force: the write failed, or the API server's policy still applies the
// records from before it.
type stampGate struct {
	err      error
	restrict int
}

func (g *stampGate) Set(placement.State) {}

func (g *stampGate) Restrict(_ context.Context, _ []string, confirm bool) error {
	g.restrict++
	if confirm {
		return g.err
	}
	return nil
}

// A shard whose withdrawal from the stamp is not in force may still get
// new objects at their create: it is not deleted, and its message says
// why. Once the withdrawal is in force, it goes.
func TestRemovalWaitsUntilTheStampNoLongerNamesTheShard(t *testing.T) {
	for name, forced := range map[string]string{"guarded": "", "forced": "b"} {
		t.Run(name, func(t *testing.T) {
			e := removalEnv(t)
			gate := &stampGate{err: errors.New("the admission policy still applies the stamp ConfigMap of resourceVersion 7")}
			e.c.opts.Mover = gate

			_, err := e.c.onConfigMap(shardCM.String(), shardConfigMapObject("a", forced))

			require.NoError(t, err)
			assert.Empty(t, e.deployments.requests(), "no Deployment of b is deleted while new objects may be stamped onto it")
			assert.Empty(t, e.mapped.Asked, "the API server is asked for b's objects only once none can be born on it")
			st := status.Decode(e.statusMaps.objects[statusKey].Data)
			require.Len(t, st.Shards, 2)
			assert.Equal(t, status.StateWaiting, st.Shards[1].State)
			assert.Contains(t, st.Shards[1].Message, "resourceVersion 7")
			assert.Contains(t, e.configMaps.enqueues, enqueued{Key: shardCM.String(), After: stampRecheck})

			_, err = e.c.onConfigMap(shardCM.String(), shardConfigMapObject("a", forced))
			require.NoError(t, err)
			assert.Contains(t, e.configMaps.enqueues, enqueued{Key: shardCM.String(), After: 2 * stampRecheck}, "the second wait is longer")

			gate.err = nil
			_, err = e.c.onConfigMap(shardCM.String(), shardConfigMapObject("a", forced))
			require.NoError(t, err)
			assert.Len(t, e.deployments.requests(), 2, "both Deployments of b are deleted")
			assert.Equal(t, stampWaits{}, e.c.stampWaits, "a wait that ended starts again from the shortest")
		})
	}
}

// A removal that waits for the stamp is checked again sooner at first,
// then less often: a missing policy waits for an operator, and each check
// is a dry-run create.
func TestStampWaitsBackOffToAMinute(t *testing.T) {
	var w stampWaits
	var got []time.Duration
	var news []bool
	for _, why := range []string{"a", "a", "a", "a", "a", "a", "a", "b", "b"} {
		after, n := w.wait(why)
		got = append(got, after)
		news = append(news, n)
	}
	s := time.Second
	assert.Equal(t, []time.Duration{2 * s, 4 * s, 8 * s, 16 * s, 32 * s, time.Minute, time.Minute, time.Minute, time.Minute}, got)
	assert.Equal(t, []bool{true, false, false, false, false, false, false, true, false}, news, "logged at info when it starts and when its reason changes")
}

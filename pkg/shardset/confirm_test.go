package shardset

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardkeeper/shardkeeper/pkg/status"
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

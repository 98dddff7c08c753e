package shardset

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardkeeper/shardkeeper/pkg/status"
)

const statusKey = testNS + "/shardkeeper-status"

func shardStatus(id, state string, ready int) status.ShardStatus {
	return status.ShardStatus{ID: id, State: state, Ready: ready, Desired: 2, Message: "shard " + id + " is " + state}
}

func encode(t *testing.T, st status.Status) map[string]string {
	t.Helper()
	data, err := status.Encode(st)
	require.NoError(t, err)
	return data
}

func TestStatusWritesArePaced(t *testing.T) {
	e := newEnv(t, Options{}, nil, nil)
	cm := shardConfigMapObject("a", "")
	pending := status.Status{Shards: []status.ShardStatus{shardStatus("a", status.StatePending, 0)}}
	active := status.Status{Shards: []status.ShardStatus{shardStatus("a", status.StateActive, 2)}}

	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	e.c.now = func() time.Time { return now }
	require.NoError(t, e.c.report(cm, pending))
	assert.Equal(t, []string{"create " + statusKey}, e.statusMaps.writes())
	assert.Empty(t, e.configMaps.enqueues)

	// 300ms later the status changes: it is not written, but the shard
	// ConfigMap is enqueued for when the interval has passed.
	now = now.Add(300 * time.Millisecond)
	require.NoError(t, e.c.report(cm, active))
	assert.Equal(t, []string{"create " + statusKey}, e.statusMaps.writes(), "a second write within statusInterval")
	require.Len(t, e.configMaps.enqueues, 1)
	q := e.configMaps.enqueues[0]
	assert.Equal(t, shardCM.String(), q.Key)
	assert.Equal(t, statusInterval-300*time.Millisecond, q.After, "the remaining wait, not the whole interval")
	assert.Equal(t, encode(t, pending), e.statusMaps.objects[statusKey].Data)

	// The enqueued reconcile, once the interval has passed, writes it.
	now = now.Add(q.After)
	require.NoError(t, e.c.report(cm, active))
	assert.Equal(t, []string{"create " + statusKey, "update " + statusKey}, e.statusMaps.writes())
	assert.Equal(t, encode(t, active), e.statusMaps.objects[statusKey].Data)
	assert.Len(t, e.configMaps.enqueues, 1)
}

func TestUnchangedStatusIsNotRewritten(t *testing.T) {
	e := newEnv(t, Options{}, nil, nil)
	st := status.Status{Shards: []status.ShardStatus{shardStatus("a", status.StateActive, 2)}}

	require.NoError(t, e.c.report(shardConfigMapObject("a", ""), st))
	e.c.lastStatusWrite = e.c.now().Add(-time.Hour) // pacing is not why
	require.NoError(t, e.c.report(shardConfigMapObject("a", ""), st))

	assert.Equal(t, []string{"create " + statusKey}, e.statusMaps.writes())
	assert.Empty(t, e.configMaps.enqueues)
}

func TestRestartedControllerNeitherRewritesNorRepeatsEvents(t *testing.T) {
	e := newEnv(t, Options{}, nil, nil)
	cm := shardConfigMapObject("a", "")
	blocked := status.Status{Shards: []status.ShardStatus{
		shardStatus("a", status.StateActive, 2),
		shardStatus("b", status.StateBlocked, 2),
	}}
	require.NoError(t, e.c.report(cm, blocked))
	require.Equal(t, []string{"Warning ShardDeletionBlocked shard b is Blocked"}, e.events())
	require.Equal(t, []string{"create " + statusKey}, e.statusMaps.writes())

	// A new process reads the status ConfigMap and finds it current.
	restarted := e.restart(Options{})
	require.NoError(t, restarted.report(cm, blocked))
	assert.Equal(t, []string{"create " + statusKey}, e.statusMaps.writes(), "an unchanged status is rewritten after a restart")
	assert.Empty(t, e.events(), "an Event is repeated after a restart")
	assert.Contains(t, e.statusMaps.calls, "get "+statusKey)

	// What changes afterwards is news, and only that.
	conflict := status.Status{Shards: append(blocked.Shards[:2:2], shardStatus("c", status.StateConflict, 0))}
	restarted.lastStatusWrite = time.Time{}
	require.NoError(t, restarted.report(cm, conflict))
	assert.Equal(t, []string{"Warning ShardConflict shard c is Conflict"}, e.events())
	assert.Equal(t, []string{"create " + statusKey, "update " + statusKey}, e.statusMaps.writes())
}

func TestRejectedConfigKeepsTheShardReport(t *testing.T) {
	e := newEnv(t, Options{}, nil, nil)
	cm := shardConfigMapObject("a", "")
	ok := status.Status{Shards: []status.ShardStatus{shardStatus("a", status.StateActive, 2)}}
	require.NoError(t, e.c.report(cm, ok))

	e.c.lastStatusWrite = time.Time{}
	require.NoError(t, e.c.report(cm, status.Status{Error: "shards: bad"}))
	want := ok
	want.Error = "shards: bad"
	assert.Equal(t, encode(t, want), e.statusMaps.objects[statusKey].Data)
	assert.Equal(t, []string{"Warning InvalidShardConfig The shard list was rejected and nothing was changed: shards: bad"}, e.events())
}

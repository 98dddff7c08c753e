package shardset

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/record"

	"github.com/shardkeeper/shardkeeper/pkg/metrics"
	"github.com/shardkeeper/shardkeeper/pkg/status"
)

const statusKey = testNS + "/shardkeeper-status"

func shardStatus(id, state string, ready int) status.ShardStatus {
	return status.ShardStatus{ID: id, State: state, Ready: ready, Desired: 2, Message: "shard " + id + " is " + state}
}

// reportErr is the error of a report, whether it asked for a requeue or not.
func reportErr(_ requeue, err error) error { return err }

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
	again, err := e.c.report(cm, pending)
	require.NoError(t, err)
	assert.Equal(t, []string{"create " + statusKey}, e.statusMaps.writes())
	assert.False(t, again.wanted())

	// 300ms later the status changes: it is not written, but the reconcile
	// asks to run again when the interval has passed.
	now = now.Add(300 * time.Millisecond)
	again, err = e.c.report(cm, active)
	require.NoError(t, err)
	assert.Equal(t, []string{"create " + statusKey}, e.statusMaps.writes(), "a second write within statusInterval")
	assert.Equal(t, requeue{after: statusInterval - 300*time.Millisecond, reason: reasonStatusPaced}, again,
		"the remaining wait, not the whole interval")
	assert.Equal(t, encode(t, pending), e.statusMaps.objects[statusKey].Data)

	// The requeued reconcile, once the interval has passed, writes it.
	now = now.Add(again.after)
	again, err = e.c.report(cm, active)
	require.NoError(t, err)
	assert.Equal(t, []string{"create " + statusKey, "update " + statusKey}, e.statusMaps.writes())
	assert.Equal(t, encode(t, active), e.statusMaps.objects[statusKey].Data)
	assert.False(t, again.wanted())
}

func TestUnchangedStatusIsNotRewritten(t *testing.T) {
	e := newEnv(t, Options{}, nil, nil)
	st := status.Status{Shards: []status.ShardStatus{shardStatus("a", status.StateActive, 2)}}

	require.NoError(t, reportErr(e.c.report(shardConfigMapObject("a", ""), st)))
	e.c.lastStatusWrite = e.c.now().Add(-time.Hour) // pacing is not why
	again, err := e.c.report(shardConfigMapObject("a", ""), st)
	require.NoError(t, err)

	assert.Equal(t, []string{"create " + statusKey}, e.statusMaps.writes())
	assert.False(t, again.wanted(), "nothing to write, nothing to wait for")
}

func TestRestartedControllerNeitherRewritesNorRepeatsEvents(t *testing.T) {
	e := newEnv(t, Options{}, nil, nil)
	cm := shardConfigMapObject("a", "")
	blocked := status.Status{Shards: []status.ShardStatus{
		shardStatus("a", status.StateActive, 2),
		shardStatus("b", status.StateBlocked, 2),
	}}
	require.NoError(t, reportErr(e.c.report(cm, blocked)))
	require.Equal(t, []string{"Warning ShardDeletionBlocked shard b is Blocked"}, e.events())
	require.Equal(t, []string{"create " + statusKey}, e.statusMaps.writes())

	// A new process reads the status ConfigMap and finds it current.
	restarted := e.restart(Options{})
	require.NoError(t, reportErr(restarted.report(cm, blocked)))
	assert.Equal(t, []string{"create " + statusKey}, e.statusMaps.writes(), "an unchanged status is rewritten after a restart")
	assert.Empty(t, e.events(), "an Event is repeated after a restart")
	assert.Contains(t, e.statusMaps.calls, "get "+statusKey)

	// What changes afterwards is news, and only that.
	conflict := status.Status{Shards: append(blocked.Shards[:2:2], shardStatus("c", status.StateConflict, 0))}
	restarted.lastStatusWrite = time.Time{}
	require.NoError(t, reportErr(restarted.report(cm, conflict)))
	assert.Equal(t, []string{"Warning ShardConflict shard c is Conflict"}, e.events())
	assert.Equal(t, []string{"create " + statusKey, "update " + statusKey}, e.statusMaps.writes())
}

func TestRejectedConfigKeepsTheShardReport(t *testing.T) {
	e := newEnv(t, Options{}, nil, nil)
	cm := shardConfigMapObject("a", "")
	ok := status.Status{Shards: []status.ShardStatus{shardStatus("a", status.StateActive, 2)}}
	require.NoError(t, reportErr(e.c.report(cm, ok)))

	e.c.lastStatusWrite = time.Time{}
	require.NoError(t, reportErr(e.c.report(cm, status.Status{Error: "shards: bad"})))
	want := ok
	want.Error = "shards: bad"
	assert.Equal(t, encode(t, want), e.statusMaps.objects[statusKey].Data)
	assert.Equal(t, []string{"Warning InvalidShardConfig The shard list was rejected and nothing was changed: shards: bad"}, e.events())
}

// The Events of a change are emitted once, also when the status write that
// follows them fails and is retried.
func TestFailedStatusWriteDoesNotRepeatEvents(t *testing.T) {
	e := newEnv(t, Options{}, nil, nil)
	cm := shardConfigMapObject("a", "")
	require.NoError(t, reportErr(e.c.report(cm, status.Status{Shards: []status.ShardStatus{shardStatus("a", status.StateActive, 2)}})))
	blocked := status.Status{Shards: []status.ShardStatus{
		shardStatus("a", status.StateActive, 2),
		shardStatus("b", status.StateBlocked, 2),
	}}

	// Another writer changes the status ConfigMap: the update conflicts.
	e.statusMaps.objects[statusKey].ResourceVersion = "999"
	e.c.lastStatusWrite = time.Time{}
	require.Error(t, reportErr(e.c.report(cm, blocked)))
	assert.Equal(t, []string{"Warning ShardDeletionBlocked shard b is Blocked"}, e.events())

	// The retry writes the status, and emits nothing again.
	require.NoError(t, reportErr(e.c.report(cm, blocked)))
	assert.Empty(t, e.events(), "an Event is repeated after a failed status write")
	assert.Equal(t, encode(t, blocked), e.statusMaps.objects[statusKey].Data)
}

// The writers' lock is never held while the status is read or written: a
// slow API server would otherwise stall every parallel write.
func TestStatusRequestsHoldNoLockOfTheWriters(t *testing.T) {
	e := newEnv(t, Options{}, nil, nil)
	var waited bool
	e.statusMaps.onGet = func() {
		done := make(chan struct{})
		go func() {
			e.c.announceLater("Normal", "Test", "during the status GET")
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(time.Second):
			waited = true
		}
	}

	require.NoError(t, reportErr(e.c.report(shardConfigMapObject("a", ""), status.Status{})))

	assert.False(t, waited, "a writer waited for the status GET")
}

// Anyone who may label an object can name any number of shard IDs: the
// status and the Events name the largest few, as the metrics do, and count
// the rest, so the status stays far below the 1 MiB an object may hold.
func TestUnknownShardIDsAreBounded(t *testing.T) {
	e := fleetEnv(t)
	const n = 10000
	// Room for an Event per ID, so that a flood fails the test rather
	// than blocking it.
	e.recorder = record.NewFakeRecorder(2 * n)
	e.c.recorder = e.recorder
	for i := range n {
		e.mapped.Objects[fmt.Sprintf("typo-%05d", i)] = map[string][]string{"gitrepos": {fmt.Sprintf("team/repo-%05d", i)}}
	}
	e.mapped.Objects["typo-most"] = map[string][]string{"gitrepos": {"team/x", "team/y"}}
	for range 2 { // the second shows the writes and reports
		_, err := e.c.onConfigMap(shardCM.String(), shardConfigMapObject("a", ""))
		require.NoError(t, err)
	}

	data := e.statusMaps.objects[statusKey].Data
	size := 0
	for k, v := range data {
		size += len(k) + len(v)
	}
	assert.Less(t, size, 16<<10, "status size in bytes")
	w := status.Decode(data).Warnings
	require.Len(t, w.UnknownShards, metrics.MaxUnknownShards)
	assert.Equal(t, "typo-most", w.UnknownShards[0].ID, "the largest first")
	assert.Equal(t, n+1-metrics.MaxUnknownShards, w.MoreUnknownShards)
	assert.Equal(t, n+2-(metrics.MaxUnknownShards+1), w.MoreUnknownObjects)
	var unknownEvents []string
	for _, ev := range e.events() {
		if strings.HasPrefix(ev, "Warning "+status.ReasonUnknownShard+" ") {
			unknownEvents = append(unknownEvents, ev)
		}
	}
	require.Len(t, unknownEvents, metrics.MaxUnknownShards+1, "one Event per named ID, and one for the rest")
	assert.Contains(t, unknownEvents[metrics.MaxUnknownShards], fmt.Sprintf("and %d more shard IDs", n+1-metrics.MaxUnknownShards))
}

// A shard whose writes keep failing is not reported healthy: its state
// says so with the error, in one Event however often the write is retried,
// and it is Active again once the write goes through.
func TestShardWhoseWritesFailIsNotActive(t *testing.T) {
	e := fleetEnv(t)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	e.c.now = func() time.Time { now = now.Add(time.Minute); return now }
	svc := testNS + "/monitoring-fleet-controller-shard-a"
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "monitoring-fleet-controller-shard-a",
		field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), "monitoring-fleet-controller-shard-a", "must be no more than 63 characters")})
	e.services.failOn("create", svc, invalid)
	cm := shardConfigMapObject("a", "")

	// The first pass creates the rest; the next ones, once the caches show
	// it, retry the Service and report.
	for range 3 {
		_, err := e.c.onConfigMap(shardCM.String(), cm)
		require.ErrorIs(t, err, invalid)
	}
	st := status.Decode(e.statusMaps.objects[statusKey].Data)
	require.Len(t, st.Shards, 1)
	assert.Equal(t, status.StateWriteFailing, st.Shards[0].State)
	assert.Contains(t, st.Shards[0].Message, "create Service "+svc)
	assert.Contains(t, st.Shards[0].Message, "must be no more than 63 characters")
	var failed []string
	for _, ev := range e.events() {
		if strings.HasPrefix(ev, "Warning "+status.ReasonShardWriteFailed+" ") {
			failed = append(failed, ev)
		}
	}
	assert.Len(t, failed, 1, "one Event, not one per retry")

	// The write goes through: the shard is Active again.
	e.services.failOn("create", svc, nil)
	for range 2 {
		_, err := e.c.onConfigMap(shardCM.String(), cm)
		require.NoError(t, err)
	}
	st = status.Decode(e.statusMaps.objects[statusKey].Data)
	assert.Equal(t, status.StateActive, st.Shards[0].State)
	assert.Empty(t, st.Shards[0].Message)
	assert.NotContains(t, strings.Join(e.events(), "\n"), status.ReasonShardWriteFailed)
}

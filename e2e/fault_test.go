//go:build e2e

package e2e

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestControlPlaneFaults restarts the API server and pauses etcd while the
// daemon works: it reconnects and converges without a restart of its own,
// and deletes nothing on the way.
func TestControlPlaneFaults(t *testing.T) {
	s := newScenario(t, "faults", true)
	s.object(gitRepos, "repo", fleetLabel, "keep")
	s.createConfigMap("keep,a")
	s.start()
	s.waitShards("keep", "a")
	started, err := s.daemon.metric("process_start_time_seconds")
	require.NoError(t, err)
	require.Positive(t, started, "the daemon exports its start time")

	var deleted deletions
	deleted.watch(s)

	// The shard "keep" is removed while the API server is down and back.
	s.setShards("keep,a,b")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, env.RestartAPIServer(ctx))
	deleted.watch(s) // the old watches ended with the API server
	s.setShards("a,b")
	s.waitShards("keep", "a", "b")
	s.waitState("keep", "Blocked")

	// etcd stops answering in the middle of a change.
	s.setShards("a,b,c")
	require.NoError(t, env.Signal("etcd", syscall.SIGSTOP))
	time.Sleep(5 * time.Second)
	require.NoError(t, env.Signal("etcd", syscall.SIGCONT))
	s.waitShards("keep", "a", "b", "c")

	// The same process as before the faults, its controllers running:
	// without leader election it starts them once, so it did not start
	// them again either.
	require.False(t, s.daemon.exited(), "the daemon exited")
	now, err := s.daemon.metric("process_start_time_seconds")
	require.NoError(t, err)
	assert.InDelta(t, started, now, 0, "the daemon did not restart")
	leads, err := s.daemon.leads()
	require.NoError(t, err)
	assert.True(t, leads, "its controllers run")
	assert.Empty(t, deleted.list(), "nothing was deleted on the way")
}

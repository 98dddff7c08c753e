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

	assert.Equal(t, 1, s.daemon.logCount("controllers started"), "the daemon did not restart")
	assert.Empty(t, deleted.list(), "nothing was deleted on the way")
}

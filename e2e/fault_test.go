//go:build e2e

package e2e

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
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

	var mu sync.Mutex
	var deleted []string
	watchDeletions := func() {
		for _, ns := range []string{s.fleetNS, s.fluxNS} {
			w, err := kube.AppsV1().Deployments(ns).Watch(s.ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=shardkeeper"})
			require.NoError(t, err)
			t.Cleanup(w.Stop)
			go func() {
				for ev := range w.ResultChan() {
					if d, ok := ev.Object.(*appsv1.Deployment); ok && ev.Type == watch.Deleted {
						mu.Lock()
						deleted = append(deleted, d.Name)
						mu.Unlock()
					}
				}
			}()
		}
	}
	watchDeletions()

	// The shard "keep" is removed while the API server is down and back.
	s.setShards("keep,a,b")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, env.RestartAPIServer(ctx))
	watchDeletions() // the old watches ended with the API server
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
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, deleted, "nothing was deleted on the way")
}

//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardkeeper/shardkeeper/pkg/status"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// TestManyShardsAtOnce adds 30 shards in one patch: every Deployment is
// created, and every shard gets its own ShardCreated Event (client-go's
// default Event rate limit would drop most of them).
func TestManyShardsAtOnce(t *testing.T) {
	s := newScenario(t, "many", true)
	s.createConfigMap("[]")
	s.start()
	var ids []string
	for i := range 30 {
		ids = append(ids, fmt.Sprintf("m%d", i))
	}
	s.setShards(strings.Join(ids, ","))
	s.waitShards(ids...)
	eventually(t, time.Minute, "a ShardCreated Event per shard", func() error {
		if n := len(s.events(status.ReasonShardCreated)); n != len(ids) {
			return fmt.Errorf("%d Events", n)
		}
		return nil
	})
	s.setShards("[]")
	s.waitShards()
	eventually(t, time.Minute, "a ShardDeleted Event per shard", func() error {
		if n := len(s.events(status.ReasonShardDeleted)); n != len(ids) {
			return fmt.Errorf("%d Events", n)
		}
		return nil
	})
}

// TestEveryWriteOnce makes the daemon decide again right after its own
// writes, before its caches can have seen them: its watches reach it 300 ms
// late (slowWatches), and each change of the shard list comes with a burst
// of edits of the ConfigMap's annotations, each a reconcile. It sends every
// create and every delete once, and none fails (an AlreadyExists, a
// NotFound or a conflict would be a write sent on a stale cache).
func TestEveryWriteOnce(t *testing.T) {
	s := newScenario(t, "burst", true)
	s.createConfigMap("[]")
	s.slowWatches(300 * time.Millisecond)
	s.start()
	var ids []string
	for i := range 20 {
		ids = append(ids, fmt.Sprintf("b%d", i))
	}
	burst := func(shards string) {
		s.setShards(shards)
		for i := range 10 {
			s.patch(fmt.Sprintf(`{"metadata":{"annotations":{"e2e.shardkeeper.io/burst":"%d"}}}`, i))
		}
	}
	const rounds = 3
	deployments := len(clones(ids...))
	services := len(ids) * len(testfixture.FleetMetricsServices(s.fleetNS))
	for range rounds {
		burst(strings.Join(ids, ","))
		s.waitManaged(deployments, services)
		// Rolled out, so that kube-controller-manager no longer changes
		// their status: a delete carries the resourceVersion the decision
		// saw, and one that meets a newer status is refused on purpose.
		s.waitShards(ids...)
		s.waitRolledOut()
		burst("[]")
		s.waitManaged(0, 0)
	}

	for _, w := range []struct {
		resource, verb string
		want           int
	}{
		{"deployments", "create", rounds * deployments},
		{"deployments", "delete", rounds * deployments},
		{"services", "create", rounds * services},
		{"services", "delete", rounds * services},
	} {
		n, err := s.daemon.metric(fmt.Sprintf(`shardkeeper_api_writes_total{resource=%q,verb=%q}`, w.resource, w.verb))
		require.NoError(t, err)
		assert.InDelta(t, w.want, n, 0, "%s %s: each one once", w.verb, w.resource)
	}
	failed, err := s.daemon.metricSum("shardkeeper_api_write_errors_total")
	require.NoError(t, err)
	assert.Zero(t, failed, "no write failed")
	reconcileErrors, err := s.daemon.metricSum("shardkeeper_reconcile_errors_total")
	require.NoError(t, err)
	assert.Zero(t, reconcileErrors)
	waits, err := s.daemon.metric("shardkeeper_reconcile_cache_waits_total")
	require.NoError(t, err)
	t.Logf("reconciles that waited for the caches: %v", waits)
	assert.Positive(t, waits, "the bursts made reconciles meet caches behind their writes")
}

// waitManaged waits until the scenario holds exactly the given numbers of
// shard Deployments and Services of the daemon's.
func (s *scenario) waitManaged(deployments, services int) {
	s.t.Helper()
	managed := metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=shardkeeper"}
	eventually(s.t, 90*time.Second, fmt.Sprintf("%d shard Deployments and %d Services", deployments, services), func() error {
		var d, svc int
		for _, ns := range []string{s.fleetNS, s.fluxNS} {
			deps, err := kube.AppsV1().Deployments(ns).List(s.ctx, managed)
			if err != nil {
				return err
			}
			svcs, err := kube.CoreV1().Services(ns).List(s.ctx, managed)
			if err != nil {
				return err
			}
			d += len(deps.Items)
			svc += len(svcs.Items)
		}
		if d != deployments || svc != services {
			return fmt.Errorf("%d and %d", d, svc)
		}
		return nil
	})
}

// waitRolledOut waits until every Deployment of the scenario has finished
// its rollout: after that, its status stays as it is.
func (s *scenario) waitRolledOut() {
	s.t.Helper()
	eventually(s.t, 90*time.Second, "every rollout finished", func() error {
		for name, d := range s.deployments() {
			done := d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == d.Status.Replicas
			for _, c := range d.Status.Conditions {
				if c.Type == appsv1.DeploymentProgressing {
					done = done && c.Reason == "NewReplicaSetAvailable"
				}
			}
			if !done {
				return fmt.Errorf("%s is still rolling out", name)
			}
		}
		return nil
	})
}

//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardkeeper/shardkeeper/pkg/render"
	"github.com/shardkeeper/shardkeeper/pkg/status"
)

// nowhere is a node selector that no node of the test cluster meets.
const nowhere = "{shardkeeper.io/test-pool: nowhere}"

// shardsWithout lists ids as YAML, the ones in down with a node selector
// that no node meets.
func shardsWithout(ids []string, down ...string) string {
	var b strings.Builder
	for _, id := range ids {
		if slices.Contains(down, id) {
			fmt.Fprintf(&b, "- id: %s\n  nodeSelector: %s\n", id, nowhere)
		} else {
			fmt.Fprintf(&b, "- %s\n", id)
		}
	}
	return b.String()
}

// takeDown makes the shard's controllers unavailable: once its Deployments
// carry the node selector no node meets, their older ReplicaSets, whose
// pods still run (a rolling update keeps them until the new ones are
// ready), are deleted, so that no pod of the shard can run.
func (s *scenario) takeDown(id string) {
	s.t.Helper()
	sel := metav1.ListOptions{LabelSelector: render.ShardLabel + "=" + id}
	eventually(s.t, time.Minute, "shard "+id+"'s Deployments updated", func() error {
		deps, err := kube.AppsV1().Deployments("").List(s.ctx, sel)
		if err != nil {
			return err
		}
		if len(deps.Items) == 0 {
			return fmt.Errorf("no Deployments")
		}
		for _, d := range deps.Items {
			if d.Spec.Template.Spec.NodeSelector["shardkeeper.io/test-pool"] != "nowhere" || d.Status.ObservedGeneration != d.Generation {
				return fmt.Errorf("%s not rolled to the new node selector yet", d.Name)
			}
		}
		return nil
	})
	for _, ns := range []string{s.fleetNS, s.fluxNS} {
		list, err := kube.AppsV1().ReplicaSets(ns).List(s.ctx, metav1.ListOptions{})
		require.NoError(s.t, err)
		for _, rs := range list.Items {
			owned := len(rs.OwnerReferences) > 0 && strings.HasSuffix(rs.OwnerReferences[0].Name, "-shard-"+id)
			if owned && rs.Spec.Template.Spec.NodeSelector["shardkeeper.io/test-pool"] != "nowhere" {
				require.NoError(s.t, kube.AppsV1().ReplicaSets(ns).Delete(s.ctx, rs.Name, metav1.DeleteOptions{}))
			}
		}
	}
}

// TestPlacementFailover: a shard whose controllers are down loses its
// objects to the others once failoverAfter has passed, paced; back up, it
// gets load again by rebalance, once it has been up for failoverAfter;
// with most shards down at once, nothing moves and a Warning says why.
func TestPlacementFailover(t *testing.T) {
	s := newScenario(t, "down", true)
	require.NoError(t, installCRD(s.ctx, helmReleases))
	s.removeObjectsAtEnd(t)
	ids := []string{"f1", "f2", "f3"}
	settings := fmt.Sprintf("namespaces: [%s]\ninterval: 2s\ncooldown: 0s\nthreshold: 2\nmaxMoves: 2\nfailoverAfter: 10s", s.fleetNS)
	s.createConfigMap("f1,f2,f3")
	s.start("--allow-placement")
	s.setPlacement("f1,f2,f3", settings)
	s.waitShards(ids...)
	s.unlabelled(gitRepos, "repo", 30)
	eventually(t, time.Minute, "30 objects placed", func() error {
		if loads, _ := s.loads(); loads["f1"]+loads["f2"]+loads["f3"] != 30 {
			return fmt.Errorf("loads %v", loads)
		}
		return nil
	})
	s.waitBalanced(2, ids...)

	t.Run("a shard that is down fails over, across a restart", func(t *testing.T) {
		s.t = t
		before, _ := s.loads()
		deployments := s.deployments()
		s.setPlacement(shardsWithout(ids, "f2"), settings)
		s.takeDown("f2")
		s.waitState("f2", status.StateFailedOver)
		s.waitEvent("ShardUnavailable", "shard f2 is down")

		// Restart in the middle: the new process has seen nothing yet,
		// so it moves nothing for failoverAfter, then carries on.
		eventually(t, time.Minute, "the failover under way", func() error {
			if loads, _ := s.loads(); loads["f2"] >= before["f2"] {
				return fmt.Errorf("loads %v", loads)
			}
			return nil
		})
		s.daemon.kill()
		time.Sleep(time.Second) // a patch the daemon sent just before lands first
		left, _ := s.loads()
		require.Positive(t, left["f2"], "the failover is paced: it cannot have finished in one round")
		s.daemon.start()
		holds(t, 8*time.Second, "nothing failed over within failoverAfter of the restart", func() error {
			if loads, _ := s.loads(); loads["f2"] != left["f2"] {
				return fmt.Errorf("loads %v, f2 had %d at the restart", loads, left["f2"])
			}
			return nil
		})

		loads := s.waitBalanced(2, "f1", "f3")
		assert.Equal(t, 30, loads["f1"]+loads["f3"])
		moved, largest := s.moved()
		assert.Positive(t, moved["failed"], "the ObjectsMoved Events say failed over: %v", moved)
		assert.LessOrEqual(t, largest, 2, "no round moves more than maxMoves")
		v, err := s.daemon.metric(`shardkeeper_placement_moves_total{reason="Failover",result="moved"}`)
		require.NoError(t, err)
		assert.Equal(t, float64(left["f2"]), v, "the new process moved what was left")
		for name, d := range s.deployments() {
			if assert.Contains(t, deployments, name) {
				assert.Equal(t, deployments[name].UID, d.UID, "%s was replaced", name)
			}
		}
		assert.Len(t, s.deployments(), len(deployments), "the shard's Deployments are left in place")
	})

	t.Run("back up, it gets load again by rebalance", func(t *testing.T) {
		s.t = t
		m0, _ := s.moved()
		s.setPlacement("f1,f2,f3", settings)
		s.waitEvent("ShardRecovered", "shard f2 is available again")
		loads := s.waitBalanced(2, ids...)
		assert.GreaterOrEqual(t, loads["f2"], 8)
		moved, _ := s.moved()
		assert.Greater(t, moved["rebalanced"], m0["rebalanced"], "the load came back by rebalance: %v", moved)
	})

	t.Run("with most shards down, nothing moves", func(t *testing.T) {
		s.t = t
		before, _ := s.loads()
		s.setPlacement(shardsWithout(ids, "f1", "f2"), settings)
		s.takeDown("f1")
		s.takeDown("f2")
		s.waitEvent("FailoverWithheld", "2 of 3 listed shards have no Available replica")
		holds(t, 15*time.Second, "no object moves", func() error {
			if now, _ := s.loads(); fmt.Sprint(now) != fmt.Sprint(before) {
				return fmt.Errorf("loads %v, were %v", now, before)
			}
			return nil
		})
		assert.NotEqual(t, status.StateFailedOver, s.shardState("f1"))
	})
}

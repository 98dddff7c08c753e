//go:build e2e

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/shardkeeper/shardkeeper/pkg/placement"
	"github.com/shardkeeper/shardkeeper/pkg/render"
	"github.com/shardkeeper/shardkeeper/pkg/status"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// placementKinds are the kinds placement spreads in these tests, with their
// shard labels.
var placementKinds = map[schema.GroupVersionResource]string{gitRepos: fleetLabel, helmReleases: fluxLabel}

// unlabelled creates n objects of gvr without a shard label.
func (s *scenario) unlabelled(gvr schema.GroupVersionResource, prefix string, n int) {
	s.t.Helper()
	for i := range n {
		obj := testfixture.Object(gvr, s.fleetNS, fmt.Sprintf("%s-%03d", prefix, i), "x", "")
		obj.SetLabels(map[string]string{"team": "a"})
		_, err := dyn.Resource(gvr).Namespace(s.fleetNS).Create(s.ctx, obj, metav1.CreateOptions{})
		require.NoError(s.t, err)
	}
}

// loads counts the scenario's mapped objects per shard label ("" for none),
// and reports those labelled by a person (no placement record).
func (s *scenario) loads() (map[string]int, map[string]string) {
	s.t.Helper()
	out, byHand := map[string]int{}, map[string]string{}
	for gvr, label := range placementKinds {
		list, err := dyn.Resource(gvr).Namespace(s.fleetNS).List(s.ctx, metav1.ListOptions{})
		require.NoError(s.t, err)
		for _, o := range list.Items {
			shard := o.GetLabels()[label]
			out[shard]++
			if shard != "" && o.GetAnnotations()[placement.AssignedShardAnnotation] != shard {
				byHand[gvr.Resource+" "+o.GetName()] = shard
			}
		}
	}
	return out, byHand
}

// waitBalanced waits until every labelled object is on one of ids and the
// loads differ by at most spread.
func (s *scenario) waitBalanced(spread int, ids ...string) map[string]int {
	s.t.Helper()
	var loads map[string]int
	eventually(s.t, 2*time.Minute, fmt.Sprintf("objects balanced over %v", ids), func() error {
		loads, _ = s.loads()
		lo, hi := -1, 0
		for shard, n := range loads {
			if shard != "" && !slices.Contains(ids, shard) {
				return fmt.Errorf("%d objects on %q: %v", n, shard, loads)
			}
		}
		for _, id := range ids {
			n := loads[id]
			if lo < 0 || n < lo {
				lo = n
			}
			hi = max(hi, n)
		}
		if hi-lo > spread {
			return fmt.Errorf("spread %d: %v", hi-lo, loads)
		}
		return nil
	})
	return loads
}

var movedRe = regexp.MustCompile(`placement moved (\d+) objects \(([^)]*)\)`)

// moved sums the ObjectsMoved Events by reason ("assigned", "drained",
// "rebalanced"), and returns the largest count of paced moves in one Event.
func (s *scenario) moved() (map[string]int, int) {
	s.t.Helper()
	out, largest := map[string]int{}, 0
	list, err := kube.CoreV1().Events(s.fleetNS).List(s.ctx, metav1.ListOptions{})
	require.NoError(s.t, err)
	for _, e := range list.Items {
		if e.InvolvedObject.Name != s.cmName || e.Reason != status.ReasonObjectsMoved {
			continue
		}
		match := movedRe.FindStringSubmatch(e.Message)
		require.NotNil(s.t, match, e.Message)
		paced := 0
		for _, part := range regexp.MustCompile(`(\d+) (\w+)`).FindAllStringSubmatch(match[2], -1) {
			n, _ := strconv.Atoi(part[1])
			// Identical rounds are one Event with a count.
			out[part[2]] += n * int(max(e.Count, 1))
			if part[2] != "assigned" {
				paced += n
			}
		}
		largest = max(largest, paced)
	}
	return out, largest
}

// pin sets an object's shard label by hand, as a person would (placement's
// record of it is gone).
func (s *scenario) pin(gvr schema.GroupVersionResource, name, label, shard string) {
	s.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q},"annotations":{%q:null}}}`, label, shard, placement.AssignedShardAnnotation)
	_, err := dyn.Resource(gvr).Namespace(s.fleetNS).Patch(s.ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(s.t, err)
}

// removeObjectsAtEnd deletes the scenario's mapped objects when the test
// ends: the daemons of later scenarios count objects cluster-wide.
func (s *scenario) removeObjectsAtEnd(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		for gvr := range placementKinds {
			err := dyn.Resource(gvr).Namespace(s.fleetNS).DeleteCollection(s.ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
			if err != nil && !apierrors.IsNotFound(err) { // a CRD this run never installed
				t.Errorf("deleting %s: %v", gvr.Resource, err)
			}
		}
	})
}

func (s *scenario) setPlacement(shards, placement string) {
	s.t.Helper()
	b, _ := json.Marshal(map[string]any{"data": map[string]string{"shards": shards, "placement": placement}})
	s.patch(string(b))
}

// TestPlacement: 300 GitRepos and HelmReleases without a shard label are
// spread over 3 shards; a 4th shard gets its share by a paced rebalance; a
// removed shard is drained, then deleted; objects labelled by hand stay
// where they are and block a removal with an Event naming them.
func TestPlacement(t *testing.T) {
	s := newScenario(t, "place", true)
	require.NoError(t, installCRD(s.ctx, helmReleases))
	s.removeObjectsAtEnd(t)
	const maxMoves = 10
	settings := fmt.Sprintf("namespaces: [%s]\nselector: team=a\nmaxMoves: %d\ninterval: 2s\ncooldown: 0s\nthreshold: 4", s.fleetNS, maxMoves)

	s.createConfigMap("p1,p2,p3")
	s.start("--allow-placement")
	s.setPlacement("p1,p2,p3", settings)
	s.waitShards("p1", "p2", "p3")
	// Out of scope: another team's object is never labelled.
	outside := testfixture.Object(gitRepos, s.fleetNS, "other-team", "x", "")
	outside.SetLabels(map[string]string{"team": "b"})
	_, err := dyn.Resource(gitRepos).Namespace(s.fleetNS).Create(s.ctx, outside, metav1.CreateOptions{})
	require.NoError(t, err)

	// GitRepos only: Flux's objects are placed a namespace at a time
	// (TestRealFluxControllers), and these tests count single objects.
	s.unlabelled(gitRepos, "repo", 300)

	t.Run("new objects are spread over the shards", func(t *testing.T) {
		s.t = t
		var loads map[string]int
		// The unsharded controllers serve unlabelled objects here, so the
		// assignments are paced: 300 at maxMoves per 2s take a minute.
		eventually(t, 4*time.Minute, "300 objects assigned", func() error {
			loads, _ = s.loads()
			if loads["p1"]+loads["p2"]+loads["p3"] != 300 {
				return fmt.Errorf("loads %v", loads)
			}
			return nil
		})
		assert.Equal(t, 1, loads[""], "the object out of scope keeps no label")
		for _, id := range []string{"p1", "p2", "p3"} {
			assert.Equal(t, 100, loads[id], "unit weights over 3 shards: exactly even, %v", loads)
		}
		moved, _ := s.moved()
		assert.Equal(t, 300, moved["assigned"], "one relabel per object")
		patches, err := s.daemon.metric(`shardkeeper_placement_moves_total{reason="Assign",result="moved"}`)
		require.NoError(t, err)
		assert.InDelta(t, 300, patches, 0)
	})

	t.Run("a new shard gets its share, paced", func(t *testing.T) {
		s.t = t
		s.setPlacement("p1,p2,p3,p4", settings)
		s.waitShards("p1", "p2", "p3", "p4")
		loads := s.waitBalanced(4, "p1", "p2", "p3", "p4")
		assert.GreaterOrEqual(t, loads["p4"], 71)
		moved, largest := s.moved()
		assert.LessOrEqual(t, moved["rebalanced"], 83, "at most 1.1x the 75 objects the new shard should take")
		assert.LessOrEqual(t, largest, maxMoves, "no round moves more than maxMoves")
		assert.Greater(t, len(s.events(status.ReasonObjectsMoved)), 2, "the rebalance took several paced rounds")
	})

	t.Run("a removed shard is drained, then deleted", func(t *testing.T) {
		s.t = t
		s.setPlacement("p1,p3,p4", settings)
		s.waitEvent(status.ReasonShardDraining, "shard p2 is draining")
		s.waitShards("p1", "p3", "p4")
		s.waitEvent(status.ReasonShardDeleted, "p2")
		loads := s.waitBalanced(4, "p1", "p3", "p4")
		assert.Zero(t, loads["p2"])
		moved, largest := s.moved()
		assert.GreaterOrEqual(t, moved["drained"], 75)
		assert.LessOrEqual(t, largest, maxMoves)
	})

	t.Run("objects labelled by hand stay and block the drain", func(t *testing.T) {
		s.t = t
		s.pin(gitRepos, "repo-000", fleetLabel, "p4")
		_, byHand := s.loads()
		require.Equal(t, map[string]string{"gitrepos repo-000": "p4"}, byHand)
		s.setPlacement("p1,p3", settings)
		s.waitState("p4", status.StateBlocked)
		s.waitEvent(status.ReasonShardDeletionBlocked, "gitrepos "+s.fleetNS+"/repo-000")
		eventually(t, 2*time.Minute, "every movable object left p4", func() error {
			if loads, _ := s.loads(); loads["p4"] != 1 {
				return fmt.Errorf("loads %v", loads)
			}
			return nil
		})
		holds(t, 3*time.Second, "p4 kept while the pinned object is on it", func() error {
			if _, ok := s.deployments()["gitjob-shard-p4"]; !ok {
				return errors.New("p4 deleted")
			}
			if loads, _ := s.loads(); loads["p4"] != 1 {
				return fmt.Errorf("pinned object moved: %v", loads)
			}
			return nil
		})
		// Relabelled by hand to a listed shard, it stops blocking.
		s.pin(gitRepos, "repo-000", fleetLabel, "p1")
		s.waitShards("p1", "p3")
	})
}

// TestPlacementAuto: "shards: auto" grows the shard list with the objects
// and shrinks it through the drain when they go.
func TestPlacementAuto(t *testing.T) {
	s := newScenario(t, "auto", true)
	require.NoError(t, installCRD(s.ctx, helmReleases))
	s.removeObjectsAtEnd(t)
	settings := fmt.Sprintf("namespaces: [%s]\nobjectsPerShard: 20\nminShards: 1\nmaxShards: 5\ninterval: 1s\nmaxMoves: 50\ncooldown: 0s", s.fleetNS)
	s.createConfigMap("[]")
	s.start("--allow-placement")
	s.setPlacement("auto", settings)

	s.unlabelled(gitRepos, "repo", 40)
	s.waitShards("shard-0", "shard-1")
	s.waitBalanced(2, "shard-0", "shard-1")

	// 50 objects are under 120% of what 2 shards hold (48 is the line):
	// 58 is over it.
	s.unlabelled(gitRepos, "later", 18)
	s.waitShards("shard-0", "shard-1", "shard-2")
	s.waitBalanced(4, "shard-0", "shard-1", "shard-2")

	// Down to 10 objects: under 60% of 3 shards, so back to 1 shard, the
	// others drained first.
	for i := range 40 {
		require.NoError(t, dyn.Resource(gitRepos).Namespace(s.fleetNS).Delete(s.ctx, fmt.Sprintf("repo-%03d", i), metav1.DeleteOptions{}))
	}
	loads := map[string]int{}
	eventually(t, 2*time.Minute, "back to one shard", func() error {
		loads, _ = s.loads()
		deps := s.deployments()
		for _, id := range []string{"shard-1", "shard-2"} {
			if _, ok := deps["gitjob-shard-"+id]; ok {
				return fmt.Errorf("%s still runs; loads %v", id, loads)
			}
		}
		return nil
	})
	assert.Equal(t, map[string]int{"shard-0": 18}, loads, "every remaining object drained onto shard-0 before the others went")
	assert.NotEmpty(t, s.events(status.ReasonShardDraining))
	assert.Equal(t, []string{"shard-0"}, slices.Sorted(maps.Keys(loads)))
}

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
	// Only this scenario's namespaces: other tests leave shards of the
	// same IDs in theirs.
	sel := metav1.ListOptions{LabelSelector: render.ShardLabel + "=" + id}
	eventually(s.t, time.Minute, "shard "+id+"'s Deployments updated", func() error {
		var deps []appsv1.Deployment
		for _, ns := range []string{s.fleetNS, s.fluxNS} {
			list, err := kube.AppsV1().Deployments(ns).List(s.ctx, sel)
			if err != nil {
				return err
			}
			deps = append(deps, list.Items...)
		}
		if len(deps) == 0 {
			return errors.New("no Deployments")
		}
		for _, d := range deps {
			if d.Spec.Template.Spec.NodeSelector["shardkeeper.io/test-pool"] != "nowhere" || d.Status.ObservedGeneration != d.Generation {
				return fmt.Errorf("%s/%s not rolled to the new node selector yet", d.Namespace, d.Name)
			}
		}
		return nil
	})
	for _, ns := range []string{s.fleetNS, s.fluxNS} {
		list, err := kube.AppsV1().ReplicaSets(ns).List(s.ctx, metav1.ListOptions{})
		require.NoError(s.t, err)
		for _, rs := range list.Items {
			owned := len(rs.OwnerReferences) > 0 && strings.HasSuffix(rs.OwnerReferences[0].Name, "-"+id)
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
	// Paced, as the unsharded controllers run: 30 at 2 per 2s.
	eventually(t, 2*time.Minute, "30 objects placed", func() error {
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
		eventually(t, 2*time.Minute, "the failover under way", func() error {
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
		assert.InDelta(t, left["f2"], v, 0, "the new process moved what was left")
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

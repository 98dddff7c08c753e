//go:build e2e

package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardkeeper/shardkeeper/pkg/status"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// crashSeeds are the storms `make test` runs, fixed so that a run is
// repeatable; SHARDKEEPER_CRASH_SEEDS (comma-separated) replays others, and
// `make soak` passes random ones.
func crashSeeds(t *testing.T) []uint64 {
	t.Helper()
	if v := os.Getenv("SHARDKEEPER_CRASH_SEEDS"); v != "" {
		var out []uint64
		for f := range strings.SplitSeq(v, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
			require.NoError(t, err)
			out = append(out, n)
		}
		return out
	}
	return []uint64{1, 2}
}

// TestCrashDuringEditStorm kills the daemon with SIGKILL at random moments
// of a storm of shard list edits, restarts it, and checks the invariants:
// the shard Deployments converge to exactly the expected set, a shard with
// mapped objects is never deleted without force (every deletion is watched,
// not only the end state), and the unmanaged Deployment is never touched.
func TestCrashDuringEditStorm(t *testing.T) {
	for i, seed := range crashSeeds(t) {
		t.Run(fmt.Sprintf("seed=%d", seed), crashStorm(fmt.Sprintf("crash%d", i), seed))
	}
}

// crashStorm is the subtest of one seed: a storm of shard list edits in the
// scenario name, the daemon killed at the moments the seed picks.
func crashStorm(name string, seed uint64) func(t *testing.T) {
	return func(t *testing.T) {
		t.Logf("replay with SHARDKEEPER_CRASH_SEEDS=%d", seed)
		rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
		s := newScenario(t, name, true)
		guarded := []string{"g1", "g2"}
		free := []string{"u1", "u2", "u3", "u4"}
		for _, g := range guarded {
			s.object(gitRepos, "repo-"+g, fleetLabel, g)
		}
		foreign := testfixture.Gitjob(s.fleetNS)
		foreign.Name = "gitjob-shard-u4"
		foreign.Spec.Template.Spec.ServiceAccountName = ""
		foreignCreated, err := kube.AppsV1().Deployments(s.fleetNS).Create(s.ctx, foreign, metav1.CreateOptions{})
		require.NoError(t, err)

		// Every deletion of a managed Deployment, as it happens.
		var deleted deletions
		deleted.watch(s)

		s.createConfigMap("[]")
		s.start()
		alive := true
		listed := map[string]bool{}
		for step := range 30 {
			var ids, dropped []string
			next := map[string]bool{}
			for _, id := range append(append([]string(nil), guarded...), free...) {
				if rng.IntN(2) == 0 {
					ids = append(ids, id)
					next[id] = true
				} else if listed[id] && !slices.Contains(guarded, id) {
					dropped = append(dropped, id)
				}
			}
			listed = next
			list := strings.Join(ids, ",")
			if list == "" {
				list = "[]"
			}
			if len(dropped) > 0 && rng.IntN(3) == 0 {
				// A forced removal of a shard without mapped objects: the force
				// must not widen to the guarded ones.
				s.patch(fmt.Sprintf(`{"data":{"shards":%q},"metadata":{"annotations":{"shardkeeper.io/force-delete":%q}}}`, list, dropped[0]))
			} else {
				s.setShards(list)
			}
			switch {
			case alive && rng.IntN(3) == 0:
				time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
				s.daemon.kill()
				alive = false
			case !alive:
				s.daemon.start()
				alive = true
			}
			t.Logf("step %d: shards %s, daemon alive %v", step, list, alive)
			time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		}
		if !alive {
			s.daemon.start()
		}

		// The final list; the force annotation may name a shard that is gone by
		// now, which is rejected until removed, so clear it.
		final := []string{"u1", "g1"}
		s.patch(`{"data":{"shards":"u1,g1"},"metadata":{"annotations":{"shardkeeper.io/force-delete":null}}}`)
		eventually(t, 2*time.Minute, "converged", func() error {
			if e := s.status().Error; e != "" {
				return fmt.Errorf("status error: %s", e)
			}
			got := map[string]bool{}
			for name, d := range s.deployments() {
				if d.Labels["app.kubernetes.io/managed-by"] == "shardkeeper" && d.DeletionTimestamp == nil {
					got[name] = true
				}
			}
			want := map[string]bool{}
			for _, n := range clones(final...) {
				want[n] = true
			}
			// g2 is kept, Blocked, if it was ever created.
			if got["gitjob-shard-g2"] || got["fleet-controller-shard-g2"] {
				for _, n := range clones("g2") {
					want[n] = true
				}
			}
			for n := range want {
				if !got[n] {
					return fmt.Errorf("%s missing", n)
				}
			}
			for n := range got {
				if !want[n] {
					return fmt.Errorf("%s should not exist", n)
				}
			}
			return nil
		})
		if s.deployments()["gitjob-shard-g2"] != nil {
			s.waitState("g2", status.StateBlocked)
		}

		for _, name := range deleted.list() {
			for _, g := range guarded {
				assert.False(t, strings.HasSuffix(name, "-"+g), "%s was deleted although %s has mapped objects and was never forced", name, g)
			}
		}
		got := s.deployments()["gitjob-shard-u4"]
		require.NotNil(t, got, "the unmanaged Deployment survives")
		assert.Equal(t, foreignCreated.UID, got.UID)
		assert.Equal(t, foreignCreated.Generation, got.Generation, "the unmanaged Deployment's spec was never written")
	}
}

//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/shardkeeper/shardkeeper/pkg/status"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

const (
	fleetLabel = "fleet.cattle.io/shard-ref"
	fluxLabel  = "sharding.fluxcd.io/key"
)

// TestUserStory walks an operator's session: add shards, map objects to
// them, remove a shard that still has work, relabel, force, make mistakes,
// restart the daemon and delete the ConfigMap.
func TestUserStory(t *testing.T) {
	s := newScenario(t, "story", true)
	s.createConfigMap("s1")
	s.start()

	s.waitShards("s1")
	s.waitEvent(status.ReasonShardCreated, "shard s1 created")
	s.waitState("s1", status.StateActive)
	eventually(t, time.Minute, "daemon ready", s.daemon.ready)
	created, err := s.daemon.metric(`shardkeeper_api_writes_total{resource="deployments",verb="create"}`)
	require.NoError(t, err)
	assert.InDelta(t, 4, created, 0, "one create per shard Deployment, no more")

	d := s.deployments()["fleet-controller-shard-s1"]
	assert.Len(t, d.Spec.Template.Spec.Containers, 1)
	assert.Contains(t, d.Spec.Template.Spec.Containers[0].Args, "--shard-id=s1")
	assert.Equal(t, "s1", d.Spec.Template.Labels["fleet.cattle.io/shard-id"])
	assert.Contains(t, s.deployments()["helm-controller-s1"].Spec.Template.Spec.Containers[0].Args,
		"--watch-label-selector=sharding.fluxcd.io/key=s1")

	t.Run("add shards with a patch", func(t *testing.T) {
		s.t = t
		s.setShards("s1,s2,s3")
		s.waitShards("s1", "s2", "s3")
		eventually(t, time.Minute, "status shows 4/4 ready", func() error {
			for _, sh := range s.status().Shards {
				if sh.Ready != 4 || sh.Desired != 4 {
					return fmt.Errorf("shard %s: %d/%d", sh.ID, sh.Ready, sh.Desired)
				}
			}
			return nil
		})
	})

	t.Run("removal of a shard with mapped objects is blocked", func(t *testing.T) {
		s.t = t
		s.object(gitRepos, "repo1", fleetLabel, "s2")
		s.object(gitRepos, "repo2", fleetLabel, "s2")
		s.object(helmOps, "op1", fleetLabel, "s3")
		// A GitRepo being deleted still needs its shard's controller.
		s.object(gitRepos, "dying", fleetLabel, "s3", "fleet.cattle.io/gitrepo-finalizer")
		require.NoError(t, dyn.Resource(gitRepos).Namespace(s.fleetNS).Delete(s.ctx, "dying", metav1.DeleteOptions{}))
		// HelmReleases' CRD arrives while the daemon runs.
		require.NoError(t, installCRD(s.ctx, helmReleases))
		s.object(helmReleases, "hr1", fluxLabel, "s2")

		before := s.deployments()
		s.setShards("s1")
		s.waitState("s2", status.StateBlocked)
		s.waitState("s3", status.StateBlocked)
		s.waitEvent(status.ReasonShardDeletionBlocked, "2 gitrepos, 1 helmreleases are still mapped")
		s.waitEvent(status.ReasonShardDeletionBlocked, "shard s3")
		holds(t, 3*time.Second, "blocked shards keep their Deployments", func() error {
			now := s.deployments()
			for _, n := range clones("s2", "s3") {
				if now[n] == nil || now[n].UID != before[n].UID || now[n].DeletionTimestamp != nil {
					return fmt.Errorf("%s was deleted", n)
				}
			}
			return nil
		})
		var s2 status.ShardStatus
		for _, sh := range s.status().Shards {
			if sh.ID == "s2" {
				s2 = sh
			}
		}
		assert.Equal(t, map[string]int{"gitrepos": 2, "helmreleases": 1}, s2.Mapped)
		assert.Contains(t, s2.Message, "shardkeeper.io/force-delete=s2")

		out, err := exec.CommandContext(t.Context(), os.Getenv("SHARDKEEPER_BINARY"), "status", "--kubeconfig", env.KubeconfigPath(), "-n", s.fleetNS).CombinedOutput()
		require.NoError(t, err, string(out))
		assert.Regexp(t, `(?m)^s2\s+Blocked\s+4/4\s+gitrepos=2,helmreleases=1$`, string(out))
		assert.Regexp(t, `(?m)^s1\s+Active\s+4/4\s+<none>$`, string(out))
	})

	t.Run("relabelling the last object completes the deletion", func(t *testing.T) {
		s.t = t
		s.relabel(gitRepos, "repo1", fleetLabel, "s1")
		s.relabel(gitRepos, "repo2", fleetLabel, "s1")
		holds(t, 2*time.Second, "s2 is kept while a HelmRelease is mapped", func() error {
			if s.deployments()["gitjob-shard-s2"] == nil {
				return errors.New("deleted too early")
			}
			return nil
		})
		s.relabel(helmReleases, "hr1", fluxLabel, "s1")
		s.waitShards("s1", "s3")
		s.waitEvent(status.ReasonShardDeleted, "shard s2 deleted")
	})

	t.Run("force deletes and is consumed", func(t *testing.T) {
		s.t = t
		s.patch(`{"metadata":{"annotations":{"shardkeeper.io/force-delete":"s3"}}}`)
		s.waitShards("s1")
		s.waitEvent(status.ReasonShardForceDeleted, "1 gitrepos, 1 helmops")
		eventually(t, 30*time.Second, "force annotation removed", func() error {
			cm, err := kube.CoreV1().ConfigMaps(s.fleetNS).Get(s.ctx, s.cmName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if v, ok := cm.Annotations["shardkeeper.io/force-delete"]; ok {
				return fmt.Errorf("still %q", v)
			}
			return nil
		})
		// The objects left behind are reported as unknown.
		s.waitEvent(status.ReasonUnknownShard, `shard ID "s3"`)
	})

	t.Run("bad edits change nothing", func(t *testing.T) {
		s.t = t
		before := s.snapshot()
		for _, bad := range []string{"S1,s2", "s1,s1", "- id: s1\n  image: evil\n", ""} {
			s.setShards(bad)
			s.waitEvent(status.ReasonInvalidShardConfig, "")
			eventually(t, 30*time.Second, "status error for "+bad, func() error {
				if s.status().Error == "" {
					return errors.New("no error in status")
				}
				return nil
			})
		}
		s.patch(`{"data":{"shards":null}}`)
		s.waitEvent(status.ReasonInvalidShardConfig, `no "shards" key`)
		after := s.snapshot()
		for k, rv := range before {
			if strings.HasPrefix(k, "deployment/") {
				assert.Equal(t, rv, after[k], "%s changed", k)
			}
		}
		s.setShards("s1")
		eventually(t, 30*time.Second, "error cleared", func() error {
			if e := s.status().Error; e != "" {
				return fmt.Errorf("%s", e)
			}
			return nil
		})
	})

	t.Run("an unmanaged Deployment with a shard's name is never touched", func(t *testing.T) {
		s.t = t
		foreign := testfixture.Gitjob(s.fleetNS)
		foreign.Name = "gitjob-shard-s4"
		foreign.Spec.Template.Spec.ServiceAccountName = ""
		created, err := kube.AppsV1().Deployments(s.fleetNS).Create(s.ctx, foreign, metav1.CreateOptions{})
		require.NoError(t, err)
		s.setShards("s1,s4")
		s.waitEvent(status.ReasonShardConflict, "gitjob-shard-s4")
		s.waitState("s4", status.StateConflict)
		eventually(t, time.Minute, "other s4 clones created", func() error {
			if s.deployments()["fleet-controller-shard-s4"] == nil {
				return errors.New("missing")
			}
			return nil
		})
		s.setShards("s1")
		eventually(t, time.Minute, "s4 clones removed", func() error {
			if s.deployments()["fleet-controller-shard-s4"] != nil {
				return errors.New("still there")
			}
			return nil
		})
		got := s.deployments()["gitjob-shard-s4"]
		require.NotNil(t, got, "the unmanaged Deployment must survive")
		assert.Equal(t, created.UID, got.UID)
		assert.Equal(t, created.Generation, got.Generation)
		assert.NotContains(t, got.Labels, "shardkeeper.io/shard")
		require.NoError(t, kube.AppsV1().Deployments(s.fleetNS).Delete(s.ctx, "gitjob-shard-s4", metav1.DeleteOptions{}))
	})

	t.Run("a source upgrade rolls out to every shard", func(t *testing.T) {
		s.t = t
		patch := `{"spec":{"template":{"spec":{"containers":[{"name":"fleet-controller","image":"registry.k8s.io/pause:3.9"}]}}}}`
		_, err := kube.AppsV1().Deployments(s.fleetNS).Patch(s.ctx, "fleet-controller", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		require.NoError(t, err)
		eventually(t, time.Minute, "clone image follows the source", func() error {
			img := s.deployments()["fleet-controller-shard-s1"].Spec.Template.Spec.Containers[0].Image
			if img != "registry.k8s.io/pause:3.9" {
				return fmt.Errorf("image %s", img)
			}
			return nil
		})
	})

	t.Run("a hand edit is restored", func(t *testing.T) {
		s.t = t
		_, err := kube.AppsV1().Deployments(s.fleetNS).Patch(s.ctx, "gitjob-shard-s1", types.MergePatchType, []byte(`{"spec":{"replicas":3}}`), metav1.PatchOptions{})
		require.NoError(t, err)
		eventually(t, time.Minute, "replicas restored", func() error {
			if r := *s.deployments()["gitjob-shard-s1"].Spec.Replicas; r != 1 {
				return fmt.Errorf("replicas %d", r)
			}
			return nil
		})
		s.waitEvent(status.ReasonShardRestored, "gitjob-shard-s1 of shard s1 was changed by hand")
		require.NoError(t, kube.AppsV1().Deployments(s.fluxNS).Delete(s.ctx, "helm-controller-s1", metav1.DeleteOptions{}))
		s.waitEvent(status.ReasonShardRestored, "helm-controller-s1 of shard s1 was missing")
		s.waitShards("s1")
	})

	t.Run("a restarted daemon makes no writes", func(t *testing.T) {
		s.t = t
		s.waitShards("s1")
		s.waitQuiet()
		s.daemon.stop()
		before := s.snapshot()
		s.daemon.start()
		eventually(t, time.Minute, "restarted daemon ready", s.daemon.ready)
		time.Sleep(3 * time.Second)
		assert.Equal(t, before, s.snapshot(), "no Deployment, ConfigMap or Event was written")
	})

	t.Run("deleting the ConfigMap deletes nothing", func(t *testing.T) {
		s.t = t
		require.NoError(t, kube.CoreV1().ConfigMaps(s.fleetNS).Delete(s.ctx, s.cmName, metav1.DeleteOptions{}))
		holds(t, 5*time.Second, "shard s1 keeps running", func() error {
			for _, n := range clones("s1") {
				if d := s.deployments()[n]; d == nil || d.DeletionTimestamp != nil {
					return fmt.Errorf("%s deleted", n)
				}
			}
			return nil
		})
	})
}

// TestSourceNotShardAware: while Flux's main helm-controller would also
// reconcile the sharded HelmReleases, no copy of it is created; once its
// installer adds the exclusion selector, the copy appears without a restart.
func TestSourceNotShardAware(t *testing.T) {
	s := newScenario(t, "unaware", false)
	s.createConfigMap("u1")
	s.start()
	s.waitEvent(status.ReasonSourceNotShardAware, s.fluxNS+"/helm-controller")
	eventually(t, time.Minute, "status warning and state", func() error {
		if len(s.status().Warnings.NotShardAware) != 1 {
			return errors.New("no warning in status")
		}
		if st := s.shardState("u1"); st != status.StatePending {
			return fmt.Errorf("state %q", st)
		}
		return nil
	})
	holds(t, 3*time.Second, "no copy beside a controller that watches everything", func() error {
		got := s.deployments()
		if got["helm-controller-u1"] != nil {
			return errors.New("helm-controller-u1 created")
		}
		if got["fleet-controller-shard-u1"] == nil {
			return errors.New("the other sources' copies are created as usual")
		}
		return nil
	})

	// What a kustomize patch of the Flux installation adds.
	addSelector := `[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--watch-label-selector=!sharding.fluxcd.io/key"}]`
	_, err := kube.AppsV1().Deployments(s.fluxNS).Patch(s.ctx, "helm-controller", types.JSONPatchType, []byte(addSelector), metav1.PatchOptions{})
	require.NoError(t, err)
	s.waitShards("u1")
	s.waitState("u1", status.StateActive)
	eventually(t, time.Minute, "warning gone", func() error {
		if n := len(s.status().Warnings.NotShardAware); n != 0 {
			return fmt.Errorf("%d warnings", n)
		}
		return nil
	})

	// An upgrade drops the patch: the copy is left as it is, and the
	// warning is back.
	copyImage := s.deployments()["helm-controller-u1"].Spec.Template.Spec.Containers[0].Image
	_, err = kube.AppsV1().Deployments(s.fluxNS).Patch(s.ctx, "helm-controller", types.JSONPatchType,
		[]byte(`[{"op":"remove","path":"/spec/template/spec/containers/0/args/5"},{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"registry.k8s.io/pause:3.9"}]`), metav1.PatchOptions{})
	require.NoError(t, err)
	eventually(t, time.Minute, "warning back", func() error {
		if len(s.status().Warnings.NotShardAware) != 1 {
			return errors.New("no warning in status")
		}
		return nil
	})
	holds(t, 3*time.Second, "the existing copy is left as it is", func() error {
		d := s.deployments()["helm-controller-u1"]
		if d == nil || d.Spec.Template.Spec.Containers[0].Image != copyImage {
			return errors.New("the copy was changed or deleted")
		}
		return nil
	})
}

//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/shardkeeper/shardkeeper/pkg/status"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// These scenarios hold shardkeeper to what Fleet's and Flux's own charts and
// controllers do; each failed before shardkeeper followed them.

func (s *scenario) service(name string) *corev1.Service {
	s.t.Helper()
	svc, err := kube.CoreV1().Services(s.fleetNS).Get(s.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(s.t, err)
	return svc
}

// selectedPods returns the names of the Deployments owning the pods that
// svc selects, as `fleet dump` finds them.
func (s *scenario) selectedPods(svc *corev1.Service) []string {
	s.t.Helper()
	pods, err := kube.CoreV1().Pods(s.fleetNS).List(s.ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(svc.Spec.Selector).String()})
	require.NoError(s.t, err)
	var out []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		// The pod-template-hash suffixes of the ReplicaSet and the pod.
		name := p.Name[:strings.LastIndex(p.Name, "-")]
		out = append(out, name[:strings.LastIndex(name, "-")])
	}
	slices.Sort(out)
	return out
}

// TestShardMetricsServices: each shard gets Fleet's per-shard metrics
// Services, as Fleet's chart renders them, and they follow the Deployments'
// rules.
func TestShardMetricsServices(t *testing.T) {
	s := newScenario(t, "svc", true)
	s.removeObjectsAtEnd(t)
	// Someone else's Service holds the name of s2's gitjob Service.
	foreign := testfixture.FleetMetricsServices(s.fleetNS)[1].DeepCopy()
	foreign.Name = "monitoring-gitjob-shard-s2"
	foreign.Labels = map[string]string{"app": "gitjob"}
	foreign, err := kube.CoreV1().Services(s.fleetNS).Create(s.ctx, foreign, metav1.CreateOptions{})
	require.NoError(t, err)

	s.createConfigMap("s1,s2")
	s.start()
	s.waitShards("s1", "s2")

	eventually(t, time.Minute, "shard Services", func() error {
		for _, n := range []string{"monitoring-fleet-controller-shard-s1", "monitoring-gitjob-shard-s1", "monitoring-fleet-controller-shard-s2"} {
			if s.service(n) == nil {
				return fmt.Errorf("%s missing", n)
			}
		}
		return nil
	})
	svc := s.service("monitoring-fleet-controller-shard-s1")
	assert.Equal(t, map[string]string{"app": "fleet-controller", "fleet.cattle.io/shard-id": "s1"}, svc.Spec.Selector)
	assert.Equal(t, "shardkeeper", svc.Labels["app.kubernetes.io/managed-by"])
	assert.Equal(t, "fleet-controller", svc.Labels["app"])
	require.Len(t, svc.Spec.Ports, 1)
	assert.Equal(t, int32(8080), svc.Spec.Ports[0].Port)
	assert.Equal(t, "metrics", svc.Spec.Ports[0].Name)
	assert.Equal(t, corev1.ServiceTypeClusterIP, svc.Spec.Type)
	eventually(t, time.Minute, "each Service selects exactly its own pod", func() error {
		for name, want := range map[string]string{
			"monitoring-fleet-controller-shard-s1": "fleet-controller-shard-s1",
			"monitoring-gitjob-shard-s2":           "",
			"monitoring-gitjob-shard-s1":           "gitjob-shard-s1",
			"monitoring-fleet-controller":          "fleet-controller",
			"monitoring-gitjob":                    "gitjob",
		} {
			if want == "" {
				continue
			}
			if got := s.selectedPods(s.service(name)); !slices.Equal(got, []string{want}) {
				return fmt.Errorf("%s selects the pods of %v, want only %s", name, got, want)
			}
		}
		return nil
	})

	t.Run("a Service it does not manage is a conflict and never touched", func(t *testing.T) {
		s.t = t
		s.waitState("s2", status.StateConflict)
		s.waitEvent(status.ReasonShardConflict, "Service "+s.fleetNS+"/monitoring-gitjob-shard-s2")
		now := s.service("monitoring-gitjob-shard-s2")
		assert.Equal(t, foreign.ResourceVersion, now.ResourceVersion)
	})

	t.Run("a Service deleted by hand is restored", func(t *testing.T) {
		s.t = t
		require.NoError(t, kube.CoreV1().Services(s.fleetNS).Delete(s.ctx, "monitoring-gitjob-shard-s1", metav1.DeleteOptions{}))
		s.waitEvent(status.ReasonShardRestored, "Service "+s.fleetNS+"/monitoring-gitjob-shard-s1")
		eventually(t, time.Minute, "restored", func() error {
			if s.service("monitoring-gitjob-shard-s1") == nil {
				return errors.New("missing")
			}
			return nil
		})
	})

	t.Run("a change of the source Service rolls out to every copy", func(t *testing.T) {
		s.t = t
		_, err := kube.CoreV1().Services(s.fleetNS).Patch(s.ctx, "monitoring-fleet-controller", types.JSONPatchType,
			[]byte(`[{"op":"replace","path":"/spec/ports/0/port","value":9090}]`), metav1.PatchOptions{})
		require.NoError(t, err)
		eventually(t, time.Minute, "copies follow", func() error {
			for _, id := range []string{"s1", "s2"} {
				if p := s.service("monitoring-fleet-controller-shard-" + id).Spec.Ports[0].Port; p != 9090 {
					return fmt.Errorf("shard %s: port %d", id, p)
				}
			}
			return nil
		})
	})

	t.Run("kept while blocked, deleted with the shard", func(t *testing.T) {
		s.t = t
		s.object(gitRepos, "svc-repo", fleetLabel, "s1")
		s.setShards("s2")
		s.waitState("s1", status.StateBlocked)
		holds(t, 3*time.Second, "a blocked shard keeps its Services", func() error {
			if s.service("monitoring-gitjob-shard-s1") == nil {
				return errors.New("deleted")
			}
			return nil
		})
		s.relabel(gitRepos, "svc-repo", fleetLabel, "s2")
		eventually(t, time.Minute, "Services deleted with the shard", func() error {
			for _, n := range []string{"monitoring-fleet-controller-shard-s1", "monitoring-gitjob-shard-s1"} {
				if s.service(n) != nil {
					return fmt.Errorf("%s still exists", n)
				}
			}
			return nil
		})
		assert.NotNil(t, s.service("monitoring-gitjob-shard-s2"), "the foreign Service stays")
	})
}

// TestGitJobPlacementMismatch: Fleet's gitjob gives each git Job the
// tolerations and node selector of the unsharded fleet-controller, so a
// shard's own tolerations never reach its git Jobs. shardkeeper says so.
func TestGitJobPlacementMismatch(t *testing.T) {
	s := newScenario(t, "jobplace", true)
	s.createConfigMap("- id: gpu\n  nodeSelector: {type: kwok}\n  tolerations: [{key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}]\n")
	s.start()
	s.waitShards("gpu")
	s.waitEvent(status.ReasonGitJobPlacementMismatch, "dedicated=gpu:NoSchedule")
	eventually(t, time.Minute, "the mismatch in the status", func() error {
		for _, sh := range s.status().Shards {
			if sh.ID == "gpu" && strings.Contains(sh.JobPlacement, "tolerations and nodeSelector") {
				return nil
			}
		}
		return fmt.Errorf("status %+v", s.status().Shards)
	})

	// Fleet's chart value `tolerations` reaches the unsharded fleet-controller.
	_, err := kube.AppsV1().Deployments(s.fleetNS).Patch(s.ctx, "fleet-controller", types.JSONPatchType,
		[]byte(`[{"op":"add","path":"/spec/template/spec/tolerations/-","value":{"key":"dedicated","operator":"Equal","value":"gpu","effect":"NoSchedule"}}]`), metav1.PatchOptions{})
	require.NoError(t, err)
	eventually(t, time.Minute, "the mismatch is gone", func() error {
		for _, sh := range s.status().Shards {
			if sh.ID == "gpu" && sh.JobPlacement != "" {
				return fmt.Errorf("still: %s", sh.JobPlacement)
			}
		}
		return nil
	})
}

// TestBundlesGuardTheShard: a GitRepo moved by hand leaves its Bundles and
// BundleDeployments on the old shard until it is applied again; their
// finalizers need the old shard's fleet-controller, so it is kept.
func TestBundlesGuardTheShard(t *testing.T) {
	s := newScenario(t, "bundles", true)
	require.NoError(t, installCRD(s.ctx, testfixture.Bundles))
	require.NoError(t, installCRD(s.ctx, testfixture.BundleDeployments))
	s.createConfigMap("b1,b2")
	s.start()
	s.waitShards("b1", "b2")

	s.object(gitRepos, "repo", fleetLabel, "b2")
	s.object(testfixture.Bundles, "repo-app", fleetLabel, "b1")
	s.object(testfixture.BundleDeployments, "repo-app", fleetLabel, "b1")
	// Later scenarios' daemons count objects cluster-wide.
	t.Cleanup(func() {
		for _, gvr := range []schema.GroupVersionResource{gitRepos, testfixture.Bundles, testfixture.BundleDeployments} {
			if err := dyn.Resource(gvr).Namespace(s.fleetNS).DeleteCollection(s.ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
				t.Errorf("deleting %s: %v", gvr.Resource, err)
			}
		}
	})
	s.setShards("b2")
	s.waitState("b1", status.StateBlocked)
	s.waitEvent(status.ReasonShardDeletionBlocked, "1 bundledeployments, 1 bundles")
	s.waitEvent(status.ReasonShardDeletionBlocked, "forceSyncGeneration")

	// fleet apply relabels the Bundle; fleet-controller its BundleDeployment.
	s.relabel(testfixture.Bundles, "repo-app", fleetLabel, "b2")
	holds(t, 3*time.Second, "a BundleDeployment alone still keeps the shard", func() error {
		if s.deployments()["fleet-controller-shard-b1"] == nil {
			return errors.New("shard b1 deleted")
		}
		return nil
	})
	s.relabel(testfixture.BundleDeployments, "repo-app", fleetLabel, "b2")
	s.waitShards("b2")
	s.waitEvent(status.ReasonShardDeleted, "shard b1 deleted")
}

// TestPlacementMoveReappliesGitRepo: when placement moves a GitRepo that
// has Bundles, it bumps spec.forceSyncGeneration in the same write, so that
// the new shard's gitjob runs `fleet apply` and the Bundles follow. A
// GitRepo with nothing to carry along is only relabelled.
func TestPlacementMoveReappliesGitRepo(t *testing.T) {
	s := newScenario(t, "bump", true)
	require.NoError(t, installCRD(s.ctx, testfixture.Bundles))
	s.removeObjectsAtEnd(t)
	t.Cleanup(func() {
		if err := dyn.Resource(testfixture.Bundles).Namespace(s.fleetNS).DeleteCollection(s.ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Errorf("deleting bundles: %v", err)
		}
	})
	for _, name := range []string{"repo", "fresh"} {
		repo := testfixture.Object(gitRepos, s.fleetNS, name, "x", "")
		repo.SetLabels(map[string]string{"team": "a"})
		require.NoError(t, unstructured.SetNestedField(repo.Object, int64(3), "spec", "forceSyncGeneration"))
		_, err := dyn.Resource(gitRepos).Namespace(s.fleetNS).Create(s.ctx, repo, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	// What the unsharded gitjob's first `fleet apply` made of "repo".
	bundle := testfixture.Object(testfixture.Bundles, s.fleetNS, "repo-app", "x", "")
	bundle.SetLabels(map[string]string{"fleet.cattle.io/repo-name": "repo"})
	_, err := dyn.Resource(testfixture.Bundles).Namespace(s.fleetNS).Create(s.ctx, bundle, metav1.CreateOptions{})
	require.NoError(t, err)

	s.createConfigMap("p1")
	s.start("--allow-placement")
	s.setPlacement("p1", fmt.Sprintf("namespaces: [%s]\ninterval: 1s\ncooldown: 0s", s.fleetNS))
	s.waitShards("p1")
	generation := func(name string) (string, int64) {
		o, err := dyn.Resource(gitRepos).Namespace(s.fleetNS).Get(s.ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		v, _, _ := unstructured.NestedInt64(o.Object, "spec", "forceSyncGeneration")
		return o.GetLabels()[fleetLabel], v
	}
	eventually(t, time.Minute, "assigned, and bumped where it has Bundles", func() error {
		if shard, v := generation("repo"); shard != "p1" || v != 4 {
			return fmt.Errorf("repo: shard %q, forceSyncGeneration %d", shard, v)
		}
		if shard, v := generation("fresh"); shard != "p1" || v != 3 {
			return fmt.Errorf("fresh: shard %q, forceSyncGeneration %d", shard, v)
		}
		return nil
	})

	// A drain moves it on, and bumps it again.
	s.setPlacement("p2", fmt.Sprintf("namespaces: [%s]\ninterval: 1s\ncooldown: 0s", s.fleetNS))
	eventually(t, 2*time.Minute, "drained and bumped", func() error {
		if shard, v := generation("repo"); shard != "p2" || v != 5 {
			return fmt.Errorf("shard %q, forceSyncGeneration %d", shard, v)
		}
		return nil
	})
	s.waitShards("p2")
}

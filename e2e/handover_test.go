//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/shardkeeper/shardkeeper/pkg/status"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// TestHandOverAndPlacement hands over a shard Deployment made by Fleet's
// static chart values (shared selector) and sets per-shard placement.
func TestHandOverAndPlacement(t *testing.T) {
	s := newScenario(t, "handover", true)
	// As Fleet's chart renders a static shard: the source's shared selector.
	old := testfixture.FleetController(s.fleetNS)
	old.Name = "fleet-controller-shard-h1"
	old.Labels["app.kubernetes.io/managed-by"] = "shardkeeper"
	old.Spec.Template.Labels["fleet.cattle.io/shard-id"] = "h1"
	delete(old.Spec.Template.Labels, "fleet.cattle.io/shard-default")
	created, err := kube.AppsV1().Deployments(s.fleetNS).Create(s.ctx, old, metav1.CreateOptions{})
	require.NoError(t, err)

	s.createConfigMap("- id: h1\n  replicas: 2\n  nodeSelector: {type: kwok}\n")
	s.start()
	eventually(t, time.Minute, "handed-over Deployment updated in place, with Fleet's selector kept", func() error {
		d := s.deployments()["fleet-controller-shard-h1"]
		if d == nil {
			return errors.New("missing")
		}
		if d.UID != created.UID {
			return errors.New("replaced: it must never be missing")
		}
		if d.Spec.Template.Labels["shardkeeper.io/shard"] != "h1" {
			return fmt.Errorf("not updated yet: pod labels %v", d.Spec.Template.Labels)
		}
		if !maps.Equal(d.Spec.Selector.MatchLabels, created.Spec.Selector.MatchLabels) {
			return fmt.Errorf("selector %v", d.Spec.Selector.MatchLabels)
		}
		return nil
	})
	s.waitShards("h1")
	for _, name := range clones("h1") {
		d := s.deployments()[name]
		assert.Equal(t, int32(2), *d.Spec.Replicas, name)
		assert.Equal(t, "kwok", d.Spec.Template.Spec.NodeSelector["type"], name)
	}
	assert.Contains(t, s.deployments()["gitjob-shard-h1"].Spec.Template.Spec.Containers[0].Args, `--shard-node-selector={"type":"kwok"}`)

	// The shard copies' pods above were admitted under the Pod Security
	// level their sources meet: "baseline" for Fleet's, "restricted" for
	// Flux's. A pod that breaks the level is not.
	bad := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "root"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: testfixture.Image}}},
	}
	privileged := bad.DeepCopy()
	privileged.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	for _, c := range []struct {
		namespace string
		pod       *corev1.Pod
	}{{s.fluxNS, bad}, {s.fleetNS, privileged}} {
		_, err = kube.CoreV1().Pods(c.namespace).Create(s.ctx, c.pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		assert.ErrorContains(t, err, "violates PodSecurity", "pod %s in %s", c.pod.Name, c.namespace)
	}
}

// TestHandOverFromFleetChart installs a Fleet-shaped chart with static
// shards, hands them over to shardkeeper as docs/handover.md says, and upgrades
// the chart without them: no shard Deployment or Service is ever missing.
func TestHandOverFromFleetChart(t *testing.T) {
	s := newScenario(t, "fleetchart", true)
	// The chart installs Fleet's controllers itself.
	for _, name := range []string{"fleet-controller", "gitjob", "helmops"} {
		require.NoError(t, kube.AppsV1().Deployments(s.fleetNS).Delete(s.ctx, name, metav1.DeleteOptions{}))
	}
	for _, svc := range testfixture.FleetMetricsServices(s.fleetNS) {
		require.NoError(t, kube.CoreV1().Services(s.fleetNS).Delete(s.ctx, svc.Name, metav1.DeleteOptions{}))
	}
	eventually(t, time.Minute, "fixtures gone", func() error {
		if d := s.deployments()["fleet-controller"]; d != nil {
			return errors.New("still there")
		}
		return nil
	})
	helm(t, "install", "fleet", fleetChartDir, "--namespace", s.fleetNS, "--wait", "--timeout", "2m",
		"--set", "shards[0].id=h1", "--set", "shards[0].nodeSelector.type=kwok", "--set", "shards[1].id=h2")

	ids := []string{"h1", "h2"}
	var objs []string // "deployment/name", "service/name"
	for _, id := range ids {
		for _, n := range []string{"fleet-controller", "gitjob", "helmops"} {
			objs = append(objs, "deployment/"+n+"-shard-"+id)
		}
		for _, n := range []string{"monitoring-fleet-controller", "monitoring-gitjob"} {
			objs = append(objs, "service/"+n+"-shard-"+id)
		}
	}
	uids := map[string]types.UID{}
	for _, o := range objs {
		uids[o] = s.uid(o)
		require.NotEmpty(t, uids[o], "%s rendered by the chart", o)
	}
	gone := s.recordDeletions()

	// 1. List the shards: Conflict, nothing touched.
	s.createConfigMap("h1,h2")
	s.start()
	for _, id := range ids {
		s.waitState(id, status.StateConflict)
	}

	// 2. Keep them in Helm, and hand them to shardkeeper.
	for _, o := range objs {
		kind, name, _ := strings.Cut(o, "/")
		patch := []byte(`{"metadata":{"annotations":{"helm.sh/resource-policy":"keep"},"labels":{"app.kubernetes.io/managed-by":"shardkeeper"}}}`)
		var err error
		if kind == "deployment" {
			_, err = kube.AppsV1().Deployments(s.fleetNS).Patch(s.ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		} else {
			_, err = kube.CoreV1().Services(s.fleetNS).Patch(s.ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		}
		require.NoError(t, err)
	}

	// 3. shardkeeper updates them in place.
	for _, id := range ids {
		s.waitState(id, status.StateActive)
	}
	s.waitShards(ids...)
	eventually(t, time.Minute, "updated in place", func() error {
		for _, id := range ids {
			if l := s.deployments()["gitjob-shard-"+id].Spec.Template.Labels["shardkeeper.io/shard"]; l != id {
				return fmt.Errorf("gitjob-shard-%s pod labels not updated", id)
			}
			if svc := s.service("monitoring-gitjob-shard-" + id); svc.Labels["shardkeeper.io/shard"] != id {
				return fmt.Errorf("monitoring-gitjob-shard-%s not updated", id)
			}
		}
		return nil
	})

	// 4. Fleet's values without the shards.
	helm(t, "upgrade", "fleet", fleetChartDir, "--namespace", s.fleetNS, "--reset-values", "--wait", "--timeout", "2m")
	manifest := string(helm(t, "get", "manifest", "fleet", "--namespace", s.fleetNS))
	assert.NotContains(t, manifest, "-shard-h1", "the release no longer has the shards")

	holds(t, 5*time.Second, "the handed-over objects stay", func() error {
		for _, o := range objs {
			if uid := s.uid(o); uid != uids[o] {
				return fmt.Errorf("%s: uid %q, was %q", o, uid, uids[o])
			}
		}
		return nil
	})
	s.waitShards(ids...)
	assert.Empty(t, gone(), "no shard Deployment or Service was deleted at any moment")
	assert.NotNil(t, s.deployments()["fleet-controller"], "the unsharded controller stays with Fleet's release")
}

// uid returns the UID of "deployment/name" or "service/name" in the fleet
// namespace, or "" when it does not exist.
func (s *scenario) uid(obj string) types.UID {
	s.t.Helper()
	kind, name, _ := strings.Cut(obj, "/")
	var err error
	var m metav1.Object
	if kind == "deployment" {
		m, err = kube.AppsV1().Deployments(s.fleetNS).Get(s.ctx, name, metav1.GetOptions{})
	} else {
		m, err = kube.CoreV1().Services(s.fleetNS).Get(s.ctx, name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return ""
	}
	require.NoError(s.t, err)
	return m.GetUID()
}

// recordDeletions watches the fleet namespace's Deployments and Services
// and returns a function that lists the "kind/name" of every one deleted
// whose name has "-shard-".
func (s *scenario) recordDeletions() func() []string {
	s.t.Helper()
	var mu sync.Mutex
	var out []string
	record := func(w watch.Interface, kind string) {
		s.t.Cleanup(w.Stop)
		go func() {
			for ev := range w.ResultChan() {
				if m, ok := ev.Object.(metav1.Object); ok && ev.Type == watch.Deleted && strings.Contains(m.GetName(), "-shard-") {
					mu.Lock()
					out = append(out, kind+"/"+m.GetName())
					mu.Unlock()
				}
			}
		}()
	}
	dw, err := kube.AppsV1().Deployments(s.fleetNS).Watch(s.ctx, metav1.ListOptions{})
	require.NoError(s.t, err)
	record(dw, "deployment")
	sw, err := kube.CoreV1().Services(s.fleetNS).Watch(s.ctx, metav1.ListOptions{})
	require.NoError(s.t, err)
	record(sw, "service")
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(out)
	}
}

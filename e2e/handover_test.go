//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardkeeper/shardkeeper/pkg/fixture"
)

// TestHandOverAndPlacement hands over a shard Deployment made by Fleet's
// static chart values (shared selector) and sets per-shard placement.
func TestHandOverAndPlacement(t *testing.T) {
	s := newScenario(t, "handover", true)
	// As Fleet's chart renders a static shard: the source's shared selector.
	old := fixture.FleetController(s.fleetNS)
	old.Name = "fleet-controller-shard-h1"
	old.Spec.Template.Spec.ServiceAccountName = ""
	old.Labels["app.kubernetes.io/managed-by"] = "shardkeeper"
	old.Spec.Template.Labels["fleet.cattle.io/shard-id"] = "h1"
	delete(old.Spec.Template.Labels, "fleet.cattle.io/shard-default")
	created, err := kube.AppsV1().Deployments(s.fleetNS).Create(s.ctx, old, metav1.CreateOptions{})
	require.NoError(t, err)

	s.createConfigMap("- id: h1\n  replicas: 2\n  nodeSelector: {type: kwok}\n")
	s.start()
	eventually(t, time.Minute, "handed-over Deployment replaced with its own selector", func() error {
		d := s.deployments()["fleet-controller-shard-h1"]
		if d == nil {
			return fmt.Errorf("missing")
		}
		if d.UID == created.UID {
			return fmt.Errorf("not replaced yet")
		}
		if d.Spec.Selector.MatchLabels["shardkeeper.io/shard"] != "h1" {
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

	// The shard copies' pods above were admitted under Pod Security
	// "restricted"; a pod that breaks it is not.
	bad := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "root"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: fixture.Image}}},
	}
	_, err = kube.CoreV1().Pods(s.fleetNS).Create(s.ctx, bad, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	assert.ErrorContains(t, err, "violates PodSecurity")
}

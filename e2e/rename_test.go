//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/leaderelection"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/shardkeeper/shardkeeper/pkg/status"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// earlierHelmCopy is shard id's copy of helm-controller as the releases
// before Flux's naming made it: "helm-controller-shard-<id>", selected by
// shardkeeper's controller and shard labels, watching the shard's label.
func earlierHelmCopy(ns, id string) *appsv1.Deployment {
	d := testfixture.HelmController(ns, true)
	d.Name = "helm-controller-shard-" + id
	own := map[string]string{"shardkeeper.io/controller": "helm-controller", "shardkeeper.io/shard": id}
	d.Labels = map[string]string{"app.kubernetes.io/managed-by": "shardkeeper"}
	for k, v := range own {
		d.Labels[k] = v
		d.Spec.Template.Labels[k] = v
	}
	d.Annotations = map[string]string{"shardkeeper.io/source": ns + "/helm-controller"}
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: own}
	c := &d.Spec.Template.Spec.Containers[0]
	c.Args = slices.DeleteFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, fluxSelectorFlag+"=") })
	c.Args = append(c.Args, fluxSelectorFlag+"=sharding.fluxcd.io/key="+id)
	return d
}

// TestRenamedCopyTakesOverWithoutAGap upgrades from a release that named
// helm-controller's copies "helm-controller-shard-<id>": the copy of the
// current name, "helm-controller-<id>", is created and Available before the
// earlier one is deleted, so the shard always has an Available
// helm-controller. Both watch the same selector, from which helm-controller
// derives its leader-election Lease (fluxcd/pkg runtime/leaderelection,
// called by helm-controller's main.go): while both run, only the one that
// holds the Lease acts.
func TestRenamedCopyTakesOverWithoutAGap(t *testing.T) {
	s := newScenario(t, "rename", true)
	const id = "s1"
	earlier, current := "helm-controller-shard-"+id, "helm-controller-"+id
	_, err := kube.AppsV1().Deployments(s.fluxNS).Create(s.ctx, earlierHelmCopy(s.fluxNS, id), metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, time.Minute, earlier+" Available", func() error {
		return notAvailable(s.deployments()[earlier])
	})

	// Every change of either Deployment, in order: at each, one of them
	// must be Available.
	w, err := kube.AppsV1().Deployments(s.fluxNS).Watch(s.ctx, metav1.ListOptions{})
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	var gaps []string
	deletedWhile := ""
	go func() {
		available := map[string]bool{earlier: true}
		for ev := range w.ResultChan() {
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok || (d.Name != earlier && d.Name != current) {
				continue
			}
			available[d.Name] = ev.Type != watch.Deleted && notAvailable(d) == nil
			mu.Lock()
			if ev.Type == watch.Deleted && d.Name == earlier {
				deletedWhile = map[bool]string{true: "available", false: "unavailable"}[available[current]]
			}
			if !available[earlier] && !available[current] {
				gaps = append(gaps, string(ev.Type)+" "+d.Name)
			}
			mu.Unlock()
		}
	}()

	s.createConfigMap(id)
	s.start()
	s.waitShards(id)
	eventually(t, time.Minute, earlier+" deleted", func() error {
		if _, ok := s.deployments()[earlier]; ok {
			return errors.New(earlier + " still exists")
		}
		return nil
	})
	s.waitEvent(status.ReasonShardRenamed, earlier)
	mu.Lock()
	assert.Empty(t, gaps, "events after which shard %s had no Available helm-controller", id)
	assert.Equal(t, "available", deletedWhile, "%s was deleted while %s was", earlier, current)
	mu.Unlock()

	// The Lease: the one helm-controller computes from its selector.
	lease := func(d *appsv1.Deployment) string {
		for _, a := range d.Spec.Template.Spec.Containers[0].Args {
			if sel, ok := strings.CutPrefix(a, fluxSelectorFlag+"="); ok {
				return leaderelection.GenerateID("helm-controller-leader-election", sel)
			}
		}
		return ""
	}
	got := s.deployments()[current]
	require.NotNil(t, got)
	assert.Equal(t, lease(earlierHelmCopy(s.fluxNS, id)), lease(got), "the renamed copy contends for the earlier copy's Lease")
	assert.NotEqual(t, lease(testfixture.HelmController(s.fluxNS, true)), lease(got), "and not for the main controller's")
}

// notAvailable says why d (nil when missing) has no Available replica of
// its current generation, nil when it has.
func notAvailable(d *appsv1.Deployment) error {
	switch {
	case d == nil:
		return errors.New("missing")
	case d.Status.AvailableReplicas < 1 || d.Status.ObservedGeneration < d.Generation:
		return fmt.Errorf("%s has no Available replica of generation %d", d.Name, d.Generation)
	}
	return nil
}

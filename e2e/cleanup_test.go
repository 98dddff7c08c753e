//go:build e2e

package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestScenarioCleanup runs a scenario to its end and checks that it leaves
// nothing behind: its namespaces are gone, and with them the Services whose
// cluster IPs come from the control plane's small range, which every
// scenario of a run shares. An object held by a finalizer that no
// controller here removes must not keep a namespace alive either.
func TestScenarioCleanup(t *testing.T) {
	var namespaces []string
	t.Run("scenario", func(t *testing.T) {
		s := newScenario(t, "cleanup", true)
		namespaces = []string{s.fleetNS, s.fluxNS}
		s.object(gitRepos, "held", fleetLabel, "a", "fleet.cattle.io/gitrepo-finalizer")
		s.createConfigMap("a")
		s.start()
		s.waitShards("a")
	})
	require.Len(t, namespaces, 2)
	ctx := context.Background()
	for _, ns := range namespaces {
		svcs, err := kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		var names []string
		for _, svc := range svcs.Items {
			names = append(names, svc.Name)
		}
		assert.Empty(t, names, "Services left in %s after its scenario", ns)
		_, err = kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "namespace %s is gone after its scenario, got %v", ns, err)
	}
}

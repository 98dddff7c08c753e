//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/shardkeeper/shardkeeper/pkg/source"
	"github.com/shardkeeper/shardkeeper/pkg/status"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// TestCrossShardReferenceWarning: a HelmRelease on shard s1 whose chart
// template carries no shard label has its HelmChart built by another
// source-controller. The daemon warns once, with an Event on the shard
// ConfigMap and an entry in the status, read from the release's spec as
// the API server serves it; labelling the chart template clears the entry.
func TestCrossShardReferenceWarning(t *testing.T) {
	s := newScenario(t, "crossref", true)
	require.NoError(t, installCRD(s.ctx, helmReleases))
	s.createConfigMap("s1")
	s.start()
	s.waitShards("s1")

	hr := testfixture.Object(helmReleases, s.fleetNS, "podinfo", source.FluxShardKeyLabel, "s1")
	hr.Object["spec"] = map[string]any{"interval": "5m", "chart": map[string]any{"spec": map[string]any{
		"chart": "podinfo", "sourceRef": map[string]any{"kind": "HelmRepository", "name": "podinfo"},
	}}}
	_, err := dyn.Resource(helmReleases).Namespace(s.fleetNS).Create(s.ctx, hr, metav1.CreateOptions{})
	require.NoError(t, err)

	named := "helmreleases " + s.fleetNS + "/podinfo"
	s.waitEvent(status.ReasonCrossShardReference, named)
	eventually(t, time.Minute, "the status names the release", func() error {
		c := s.status().Warnings.CrossShard
		if c == nil || c.Count != 1 || len(c.Objects) != 1 {
			return fmt.Errorf("cross-shard warning %+v", c)
		}
		return nil
	})

	patch := fmt.Sprintf(`{"spec":{"chart":{"metadata":{"labels":{%q:"s1"}}}}}`, source.FluxShardKeyLabel)
	_, err = dyn.Resource(helmReleases).Namespace(s.fleetNS).Patch(s.ctx, "podinfo", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
	eventually(t, time.Minute, "the status clears the warning", func() error {
		if c := s.status().Warnings.CrossShard; c != nil {
			return fmt.Errorf("cross-shard warning %+v", c)
		}
		return nil
	})
	require.Len(t, s.events(status.ReasonCrossShardReference), 1, "one Event, for the transition only")
	if s.daemon.exited() {
		t.Fatal(errors.New("the daemon exited"))
	}
}

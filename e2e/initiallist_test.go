//go:build e2e

package e2e

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardkeeper/shardkeeper/pkg/source"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// TestInitialStateEitherWay: the objects that exist before the daemon
// starts are counted, and a HelmRelease's spec read, whether their initial
// state is listed in pages (the default on this API server, 1.34 or
// later) or streamed by a watch with sendInitialEvents (before 1.34), or
// read by client-go's own clients and reflector (--mapped-reader=stock);
// and so is an object made after the start.
func TestInitialStateEitherWay(t *testing.T) {
	for mode, tc := range map[string]struct{ arg, logged string }{
		"pages":  {"--initial-list=pages", "the mapped objects' initial state is listed in pages of 500"},
		"stream": {"--initial-list=stream", "the mapped objects' initial state is streamed"},
		"stock":  {"--mapped-reader=stock", "the mapped objects are read by client-go's own clients and reflector"},
	} {
		t.Run(mode, func(t *testing.T) {
			s := newScenario(t, "initial-"+mode, true)
			require.NoError(t, installCRD(s.ctx, helmReleases))
			// A shard of this test's own: the daemon counts every
			// namespace's objects.
			shard := "initial-" + mode
			s.createConfigMap(shard)
			for i := range 3 {
				s.object(gitRepos, fmt.Sprintf("repo%d", i), fleetLabel, shard)
			}
			s.object(helmReleases, "plain", fluxLabel, shard)
			// Its chart template has no shard label: a cross-shard
			// reference, seen only in the spec.
			hr := testfixture.Object(helmReleases, s.fleetNS, "podinfo", source.FluxShardKeyLabel, shard)
			hr.Object["spec"] = map[string]any{"interval": "5m", "chart": map[string]any{"spec": map[string]any{
				"chart": "podinfo", "sourceRef": map[string]any{"kind": "HelmRepository", "name": "podinfo"},
			}}}
			_, err := dyn.Resource(helmReleases).Namespace(s.fleetNS).Create(s.ctx, hr, metav1.CreateOptions{})
			require.NoError(t, err)
			// A HelmChart's spec.chart is its chart's name, where a
			// HelmRelease's is a template: read either way.
			require.NoError(t, installCRD(s.ctx, fluxHelmCharts))
			hc := testfixture.Object(fluxHelmCharts, s.fleetNS, "podinfo-chart", source.FluxShardKeyLabel, shard)
			hc.Object["spec"] = map[string]any{"chart": "podinfo", "interval": "5m",
				"sourceRef": map[string]any{"kind": "HelmRepository", "name": "podinfo"}}
			_, err = dyn.Resource(fluxHelmCharts).Namespace(s.fleetNS).Create(s.ctx, hc, metav1.CreateOptions{})
			require.NoError(t, err)

			s.start(tc.arg)
			s.waitShards(shard)
			counted := func(what string, want map[string]int) {
				t.Helper()
				eventually(t, time.Minute, what, func() error {
					for _, sh := range s.status().Shards {
						if sh.ID == shard && maps.Equal(sh.Mapped, want) {
							return nil
						}
					}
					return fmt.Errorf("shards %+v", s.status().Shards)
				})
			}
			counted("the status counts the objects made before the start", map[string]int{"gitrepos": 3, "helmreleases": 2, "helmcharts": 1})
			s.object(gitRepos, "after", fleetLabel, shard)
			counted("the status counts an object made after the start", map[string]int{"gitrepos": 4, "helmreleases": 2, "helmcharts": 1})
			named := "helmreleases " + s.fleetNS + "/podinfo"
			eventually(t, time.Minute, "the status names the release", func() error {
				c := s.status().Warnings.CrossShard
				if c != nil && slices.ContainsFunc(c.Objects, func(o string) bool { return strings.HasPrefix(o, named+":") }) {
					return nil
				}
				return fmt.Errorf("cross-shard warning %+v", c)
			})
			log, err := os.ReadFile(s.daemon.log)
			require.NoError(t, err)
			require.Contains(t, string(log), tc.logged, "the daemon says how it read them")
		})
	}
}

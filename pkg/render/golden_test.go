package render_test

import (
	"bytes"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/shardkeeper/shardkeeper/pkg/render"
	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
	"github.com/shardkeeper/shardkeeper/pkg/source"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture/golden"
)

// goldenShards are the shard entries of the ConfigMap that the golden
// files render, as a user writes them in data.shards: the plain shard, and
// one with each per-shard setting that shardconfig accepts.
var goldenShards = []struct{ name, entry string }{
	{"plain", "- shard1"},
	{"node-selector", "- {id: shard1, nodeSelector: {pool: eu}}"},
	{"tolerations", "- {id: shard1, tolerations: [{key: dedicated, operator: Equal, value: eu, effect: NoSchedule}]}"},
	{"resources", "- {id: shard1, resources: {requests: {cpu: 200m, memory: 256Mi}, limits: {memory: 1Gi}}}"},
	{"replicas", "- {id: shard1, replicas: 3}"},
}

// TestGolden renders each preset's sources, as their upstream installers
// deploy them, for each shard of goldenShards, and compares the shard's
// objects with testdata/golden/<preset>-<source>-<case>.yaml.
func TestGolden(t *testing.T) {
	const fleetNS, fluxNS = "cattle-fleet-system", "flux-system"
	deployments := map[string]*appsv1.Deployment{}
	for _, d := range []*appsv1.Deployment{
		testfixture.FleetController(fleetNS), testfixture.Gitjob(fleetNS), testfixture.HelmOpsController(fleetNS),
		testfixture.SourceController(fluxNS, true), testfixture.KustomizeController(fluxNS, true), testfixture.HelmController(fluxNS, true),
	} {
		deployments[d.Namespace+"/"+d.Name] = d
	}
	services := map[string]*corev1.Service{}
	for _, s := range append(testfixture.FleetMetricsServices(fleetNS), testfixture.SourceControllerService(fluxNS)) {
		services[s.Namespace+"/"+s.Name] = s
	}

	installers := map[string]string{source.PresetFleet: "Fleet's chart installs it", "flux": "`flux install` and Flux's sharding guide make it"}
	for _, preset := range []string{source.PresetFleet, "flux"} {
		set, err := source.Build(source.Options{Presets: []string{preset}, FleetNamespace: fleetNS, FluxNamespace: fluxNS})
		if err != nil {
			t.Fatalf("preset %s: %v", preset, err)
		}
		for _, src := range set.Sources {
			if deployments[src.Key()] == nil {
				// Flux's image controllers and source-watcher: no fixture,
				// and no copy unless they are installed.
				continue
			}
			for _, c := range goldenShards {
				name := fmt.Sprintf("%s-%s-%s.yaml", preset, src.Name, c.name)
				t.Run(name, func(t *testing.T) {
					shards, err := shardconfig.ParseShards(c.entry)
					if err != nil {
						t.Fatalf("parsing %q: %v", c.entry, err)
					}
					got, err := renderShard(src, deployments[src.Key()], services[src.ServiceKey()], shards[0])
					if err != nil {
						t.Fatal(err)
					}
					header := fmt.Sprintf("# The copy of %s for the shard entry\n#   %s\n"+
						"# in data.shards, rendered from the source as %s (pkg/testfixture).\n"+
						"# go test ./pkg/render -update rewrites this file.\n", src.Key(), c.entry, installers[preset])
					golden.Assert(t, name, append([]byte(header), got...))
				})
			}
		}
	}
}

// renderShard returns the YAML documents of the shard's Deployment and, if
// the source has a metrics Service, of its copy.
func renderShard(src source.Source, live *appsv1.Deployment, liveService *corev1.Service, shard shardconfig.Shard) ([]byte, error) {
	d, err := render.Render(src, live, shard)
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", src.Key(), err)
	}
	objects := []any{d}
	if liveService != nil {
		svc, serviceErr := render.RenderService(src, liveService, shard)
		if serviceErr != nil {
			return nil, fmt.Errorf("rendering %s: %w", src.ServiceKey(), serviceErr)
		}
		objects = append(objects, svc)
	}
	docs := make([][]byte, 0, len(objects))
	for _, o := range objects {
		b, encodeErr := yaml.Marshal(o)
		if encodeErr != nil {
			return nil, fmt.Errorf("encoding the copy of %s: %w", src.Key(), encodeErr)
		}
		docs = append(docs, b)
	}
	return bytes.Join(docs, []byte("---\n")), nil
}

package source

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuildPresets(t *testing.T) {
	set, err := Build(Options{Presets: []string{"fleet", "flux"}, FleetNamespace: "fleet-ns", FluxNamespace: "flux-ns"})
	require.NoError(t, err)
	var names []string
	for _, s := range set.Sources {
		names = append(names, s.Key())
	}
	assert.Equal(t, []string{"fleet-ns/fleet-controller", "fleet-ns/gitjob", "fleet-ns/helmops",
		"flux-ns/source-controller", "flux-ns/kustomize-controller", "flux-ns/helm-controller",
		"flux-ns/image-reflector-controller", "flux-ns/image-automation-controller", "flux-ns/source-watcher"}, names)
	assert.Equal(t, []string{"fleet-ns", "flux-ns"}, set.Namespaces())
	var mapped []string
	for _, m := range set.Mapped {
		mapped = append(mapped, m.CRDName()+"="+m.Label)
	}
	assert.Equal(t, []string{
		"gitrepos.fleet.cattle.io=fleet.cattle.io/shard-ref",
		"helmops.fleet.cattle.io=fleet.cattle.io/shard-ref",
		"bundles.fleet.cattle.io=fleet.cattle.io/shard-ref",
		"bundledeployments.fleet.cattle.io=fleet.cattle.io/shard-ref",
		"gitrepositories.source.toolkit.fluxcd.io=sharding.fluxcd.io/key",
		"ocirepositories.source.toolkit.fluxcd.io=sharding.fluxcd.io/key",
		"helmrepositories.source.toolkit.fluxcd.io=sharding.fluxcd.io/key",
		"helmcharts.source.toolkit.fluxcd.io=sharding.fluxcd.io/key",
		"buckets.source.toolkit.fluxcd.io=sharding.fluxcd.io/key",
		"kustomizations.kustomize.toolkit.fluxcd.io=sharding.fluxcd.io/key",
		"helmreleases.helm.toolkit.fluxcd.io=sharding.fluxcd.io/key",
		"imagerepositories.image.toolkit.fluxcd.io=sharding.fluxcd.io/key",
		"imagepolicies.image.toolkit.fluxcd.io=sharding.fluxcd.io/key",
		"imageupdateautomations.image.toolkit.fluxcd.io=sharding.fluxcd.io/key",
		"artifactgenerators.source.extensions.fluxcd.io=sharding.fluxcd.io/key",
	}, mapped)
	for _, m := range set.Mapped {
		derived := m.Resource.Resource == "bundles" || m.Resource.Resource == "bundledeployments"
		assert.Equal(t, derived, m.Derived, "%s is guarded, never placed", m.Name())
		assert.Equal(t, m.Label == FluxShardKeyLabel, m.GroupByNamespace, "%s: Flux's kinds are placed by namespace", m.Name())
	}
	byName := map[string]Source{}
	for _, s := range set.Sources {
		byName[s.Name] = s
	}
	assert.Equal(t, "monitoring-fleet-controller", byName["fleet-controller"].MetricsService)
	assert.Equal(t, "monitoring-gitjob-shard-a", byName["gitjob"].ServiceCloneName("a"))
	assert.Equal(t, "fleet-controller", byName["gitjob"].JobPlacementFrom)
	assert.Empty(t, byName["helm-controller"].MetricsService, "Flux installs no Service for helm-controller")
	assert.Equal(t, "source-controller-a", byName["source-controller"].ServiceCloneName("a"))
	assert.Equal(t, "helm-controller-a", byName["helm-controller"].CloneName("a"))
	assert.Equal(t, "helm-controller-shard-a", byName["helm-controller"].LegacyCloneName("a"))
	assert.Equal(t, "kustomize-controller-shard-a", byName["kustomize-controller"].LegacyCloneName("a"), "earlier releases cloned it as a --source")
	assert.Equal(t, "--watch-label-selector=!sharding.fluxcd.io/key", byName["kustomize-controller"].RequiredArg)
	assert.Equal(t, []string{"fleet-ns", "flux-ns"}, set.ServiceNamespaces())
}

func TestFluxShardKey(t *testing.T) {
	set, err := Build(Options{Presets: []string{"flux"}, FluxNamespace: "flux-system", FluxShardKey: "example.com/shard"})
	require.NoError(t, err)
	for _, s := range set.Sources {
		assert.Equal(t, []string{"--watch-label-selector=example.com/shard={shard}"}, s.Args, s.Name)
		assert.Equal(t, "--watch-label-selector=!example.com/shard", s.RequiredArg, s.Name)
	}
	for _, m := range set.Mapped {
		assert.Equal(t, "example.com/shard", m.Label, m.Name())
	}
	_, err = Build(Options{Presets: []string{"flux"}, FluxShardKey: "not a key"})
	assert.ErrorContains(t, err, `flux shard key "not a key"`)
}

func TestBuildCustom(t *testing.T) {
	set, err := Build(Options{
		Custom: []string{"apps/ctrl:manager=--shard={shard}"},
		Mapped: []string{"widgets.v1.example.com=example.com/shard"},
	})
	require.NoError(t, err)
	require.Len(t, set.Sources, 1)
	s := set.Sources[0]
	assert.Equal(t, Source{Namespace: "apps", Name: "ctrl", Container: "manager", Args: []string{"--shard={shard}"}}, s)
	assert.Equal(t, "ctrl-shard-x", s.CloneName("x"))
	require.Len(t, set.Mapped, 1)
	assert.Equal(t, "widgets", set.Mapped[0].Name())
	assert.Equal(t, "v1", set.Mapped[0].Resource.Version)

	set, err = Build(Options{
		Custom:          []string{"apps/ctrl:manager=--shard={shard}"},
		MetricsServices: []string{"apps/ctrl=ctrl-metrics"},
		RequiredArgs:    []string{"apps/ctrl=--selector=!shard"},
	})
	require.NoError(t, err)
	assert.Equal(t, "ctrl-metrics", set.Sources[0].MetricsService)
	assert.Equal(t, "apps/ctrl-metrics", set.Sources[0].ServiceKey())
	assert.Equal(t, "--selector=!shard", set.Sources[0].RequiredArg)
	assert.Equal(t, []string{"apps"}, set.ServiceNamespaces())
}

func TestBuildRejects(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"no source", Options{}, "no source controllers"},
		{"unknown preset", Options{Presets: []string{"argo"}}, "unknown preset"},
		{"twice", Options{Presets: []string{"fleet", "fleet"}}, "named twice"},
		{"custom without template", Options{Custom: []string{"ns/name"}}, "NAMESPACE/NAME"},
		{"custom without placeholder", Options{Custom: []string{"ns/name=--shard=x"}}, "{shard}"},
		{"custom not a flag", Options{Custom: []string{"ns/name=shard={shard}"}}, "{shard}"},
		{"custom bad name", Options{Custom: []string{"ns/Bad_Name=--s={shard}"}}, "name"},
		{"mapped bad form", Options{Presets: []string{"fleet"}, Mapped: []string{"gitrepos=label"}}, "RESOURCE.VERSION.GROUP"},
		{"mapped bad label", Options{Presets: []string{"fleet"}, Mapped: []string{"a.v1.b.io=bad label"}}, "label"},
		{"mapped twice", Options{Presets: []string{"fleet"}, Mapped: []string{"a.v1.b.io=x", "a.v1.c.io=y"}}, "named twice"},
		{"service of no source", Options{Presets: []string{"fleet"}, MetricsServices: []string{"x/y=svc"}}, "no source x/y"},
		{"service without name", Options{Presets: []string{"fleet"}, MetricsServices: []string{"cattle-fleet-system/gitjob="}}, "NAMESPACE/NAME=VALUE"},
		{"service bad name", Options{Presets: []string{"fleet"}, FleetNamespace: "f", MetricsServices: []string{"f/gitjob=Bad_Svc"}}, "Service name"},
		{"required arg not a flag", Options{Presets: []string{"flux"}, FluxNamespace: "f", RequiredArgs: []string{"f/helm-controller=selector"}}, "must start with -"},
		{"copies' names overlap", Options{Custom: []string{"ns/a=--s={shard}", "ns/a-shard-b=--s={shard}"}},
			`the copies of sources ns/a and ns/a-shard-b could have the same name: Deployment ns/a-shard-b-shard-1 would be the copy of ns/a for shard "b-shard-1" and of ns/a-shard-b for shard "1"`},
		{"copies' names overlap, shorter", Options{Custom: []string{"ns/a-shard=--s={shard}", "ns/a=--s={shard}"}},
			`Deployment ns/a-shard-shard-1 would be the copy of ns/a for shard "shard-1" and of ns/a-shard for shard "1"`},
		{"Service copies' names overlap", Options{Custom: []string{"ns/x=--s={shard}", "ns/y=--s={shard}"}, MetricsServices: []string{"ns/x=m", "ns/y=m-shard-2"}},
			`Service ns/m-shard-2-shard-1 would be the copy of ns/m for shard "2-shard-1" and of ns/m-shard-2 for shard "1"`},
		{"Service shared", Options{Custom: []string{"ns/x=--s={shard}", "ns/y=--s={shard}"}, MetricsServices: []string{"ns/x=m", "ns/y=m"}},
			`sources ns/x and ns/y have the same metrics Service ns/m`},
		{"no room for an ID", Options{Custom: []string{"ns/x=--s={shard}"}, MetricsServices: []string{"ns/x=" + strings.Repeat("m", 56)}},
			`source ns/x leaves no room for a shard ID: Service ` + strings.Repeat("m", 56) + `-shard-<id> must fit in 63 characters`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(tt.opts)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

func TestBuildAllowsOverlapInOtherNamespaces(t *testing.T) {
	_, err := Build(Options{Custom: []string{"ns1/a=--s={shard}", "ns2/a-shard-b=--s={shard}"},
		MetricsServices: []string{"ns1/a=m", "ns2/a-shard-b=m"}})
	assert.NoError(t, err)
}

func TestIDLimit(t *testing.T) {
	build := func(o Options) Set {
		t.Helper()
		set, err := Build(o)
		require.NoError(t, err)
		return set
	}
	tests := []struct {
		name string
		set  Set
		want IDLimit
	}{
		{"fleet", build(Options{Presets: []string{"fleet"}, FleetNamespace: "cattle-fleet-system"}),
			IDLimit{maxLen: 29, name: "Service monitoring-fleet-controller-shard-<id>", nameMaxLen: 63}},
		{"fleet and flux", build(Options{Presets: []string{"flux", "fleet"}}),
			IDLimit{maxLen: 29, name: "Service monitoring-fleet-controller-shard-<id>", nameMaxLen: 63}},
		{"flux: the longest controller's pod label", build(Options{Presets: []string{"flux"}}),
			IDLimit{maxLen: 35, name: "pod label app=image-automation-controller-<id>", nameMaxLen: 63}},
		{"the ID is a label value", build(Options{Custom: []string{"ns/c=--s={shard}"}}),
			IDLimit{maxLen: 63, name: "label value <id>", nameMaxLen: 63}},
		{"a metrics Service", build(Options{Presets: []string{"flux"}, FluxNamespace: "f", Custom: []string{"f/kc=--s={shard}"},
			MetricsServices: []string{"f/kc=kustomize-controller-metrics-service"}}),
			IDLimit{maxLen: 20, name: "Service kustomize-controller-metrics-service-shard-<id>", nameMaxLen: 63}},
		{"a pod label", Set{Sources: []Source{{Name: "c", PodLabels: map[string]string{"x": "pool-{shard}-of-{shard}"}}}},
			IDLimit{maxLen: 27, name: "pod label x=pool-<id>-of-<id>", nameMaxLen: 63}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.set.IDLimit()
			assert.Equal(t, tt.want, got)
			require.NoError(t, got.Check(strings.Repeat("a", got.maxLen)))
			assert.ErrorContains(t, got.Check(strings.Repeat("a", got.maxLen+1)), "at most")
		})
	}
}

// v0.1.0's README and chart suggested sharding kustomize-controller beside
// the flux preset, whose only controller was helm-controller then. The
// flux preset clones it now: the same command line still starts, the
// preset's definition is used, and the warnings say what to remove.
func TestBuildTakesTheV010FluxCommandLine(t *testing.T) {
	set, err := Build(Options{
		Presets:         []string{"flux"},
		FluxNamespace:   "flux-system",
		Custom:          []string{"flux-system/kustomize-controller:manager=--watch-label-selector=sharding.fluxcd.io/key={shard}"},
		RequiredArgs:    []string{"flux-system/kustomize-controller=--watch-label-selector=!sharding.fluxcd.io/key"},
		MetricsServices: []string{"flux-system/kustomize-controller=kustomize-controller-metrics"},
	})
	require.NoError(t, err)
	preset, err := Build(Options{Presets: []string{"flux"}, FluxNamespace: "flux-system"})
	require.NoError(t, err)
	require.Len(t, set.Sources, len(preset.Sources), "the duplicate is dropped")
	for i, s := range set.Sources {
		want := preset.Sources[i]
		if s.Name == "kustomize-controller" {
			want.MetricsService = "kustomize-controller-metrics"
		}
		assert.Equal(t, want, s, "the preset's definition of %s wins", s.Name)
	}
	kc := set.Sources[1]
	require.Equal(t, "kustomize-controller", kc.Name)
	assert.Equal(t, "kustomize-controller-a", kc.CloneName("a"))
	assert.Equal(t, "kustomize-controller-shard-a", kc.LegacyCloneName("a"), "the copies v0.1.0 made are renamed")
	assert.Equal(t, "kustomize-controller-metrics-a", kc.ServiceCloneName("a"))
	assert.Equal(t, []string{
		`--source "flux-system/kustomize-controller:manager=--watch-label-selector=sharding.fluxcd.io/key={shard}" is ignored: ` +
			`preset flux clones flux-system/kustomize-controller already (container manager, --watch-label-selector=sharding.fluxcd.io/key={shard}); remove it`,
		`--source-required-arg "flux-system/kustomize-controller=--watch-label-selector=!sharding.fluxcd.io/key" repeats what preset flux sets; remove it`,
	}, set.Warnings)

	set, err = Build(Options{Presets: []string{"flux"}, FluxNamespace: "flux-system",
		MetricsServices: []string{"flux-system/source-controller=source-controller"}})
	require.NoError(t, err)
	assert.Equal(t, []string{`--source-metrics-service "flux-system/source-controller=source-controller" repeats what preset flux sets; remove it`}, set.Warnings)

	// Two --source of one controller that no preset clones are still refused.
	_, err = Build(Options{Custom: []string{"ns/a=--s={shard}", "ns/a=--t={shard}"}})
	assert.ErrorContains(t, err, "source ns/a is named twice")
}

// Every Flux controller's copies were named "<controller>-shard-<id>" by
// earlier releases, with --source: each is renamed as helm-controller's.
func TestFluxSourcesKnowTheirEarlierNames(t *testing.T) {
	set, err := Build(Options{Presets: []string{"flux"}, FluxNamespace: "flux-system"})
	require.NoError(t, err)
	for _, s := range set.Sources {
		assert.Equal(t, s.Name+"-shard-x", s.LegacyCloneName("x"), s.Name)
	}
	set, err = Build(Options{Presets: []string{"fleet"}})
	require.NoError(t, err)
	for _, s := range set.Sources {
		assert.Empty(t, s.LegacyCloneName("x"), "%s: Fleet's names never changed", s.Name)
	}
}

// Listing a preset's kind in --mapped-kind (to keep it guarded beside
// kinds of one's own) keeps what the preset knows of it: Bundles stay
// derived, GitRepos are bumped on a move, HelmOps and HelmReleases carry
// their spec labels, Flux's kinds are placed by namespace.
func TestMappedKindKeepsThePresetsMeaning(t *testing.T) {
	presetKinds := func(o Options) map[string]MappedKind {
		set, err := Build(o)
		require.NoError(t, err)
		out := map[string]MappedKind{}
		for _, m := range set.Mapped {
			out[m.CRDName()] = m
		}
		return out
	}
	fleet := presetKinds(Options{Presets: []string{"fleet"}})
	flux := presetKinds(Options{Presets: []string{"flux"}})
	fluxKey := presetKinds(Options{Presets: []string{"flux"}, FluxShardKey: "example.com/shard"})

	set, err := Build(Options{Presets: []string{"fleet", "flux"}, Mapped: []string{
		"gitrepos.v1alpha1.fleet.cattle.io=fleet.cattle.io/shard-ref",
		"helmops.v1alpha1.fleet.cattle.io=fleet.cattle.io/shard-ref",
		"bundles.v1alpha1.fleet.cattle.io=fleet.cattle.io/shard-ref",
		"bundledeployments.v1alpha1.fleet.cattle.io=fleet.cattle.io/shard-ref",
		"helmcharts.v1.source.toolkit.fluxcd.io=sharding.fluxcd.io/key",
		"helmreleases.v2.helm.toolkit.fluxcd.io=sharding.fluxcd.io/key",
		"kustomizations.v1.kustomize.toolkit.fluxcd.io=sharding.fluxcd.io/key",
		"widgets.v1.example.com=example.com/shard",
	}})
	require.NoError(t, err)
	require.Len(t, set.Mapped, 8)
	for _, m := range set.Mapped[:4] {
		assert.Equal(t, fleet[m.CRDName()], m, m.Name())
	}
	for _, m := range set.Mapped[4:7] {
		assert.Equal(t, flux[m.CRDName()], m, m.Name())
	}
	assert.True(t, set.Mapped[2].Derived, "Bundles are never placed")
	assert.Equal(t, "spec.forceSyncGeneration", set.Mapped[0].BumpOnMove)
	assert.Equal(t, "spec.labels", set.Mapped[1].SpecLabels)
	assert.Equal(t, "helm.toolkit.fluxcd.io/name", set.Mapped[4].OwnerLabel)
	assert.Equal(t, "spec.chart.metadata.labels", set.Mapped[5].SpecLabels)
	assert.True(t, set.Mapped[6].GroupByNamespace)
	assert.Equal(t, MappedKind{Resource: set.Mapped[7].Resource, Label: "example.com/shard"}, set.Mapped[7], "a kind no preset knows")
	assert.Empty(t, set.Warnings)

	// The version listed is kept; Flux's kinds follow its shard key.
	set, err = Build(Options{Presets: []string{"flux"}, FluxShardKey: "example.com/shard", Mapped: []string{
		"helmreleases.v2beta2.helm.toolkit.fluxcd.io=example.com/shard",
	}})
	require.NoError(t, err)
	want := fluxKey["helmreleases.helm.toolkit.fluxcd.io"]
	want.Resource.Version = "v2beta2"
	assert.Equal(t, []MappedKind{want}, set.Mapped)

	// Another label than the preset's, whose copies select by its own:
	// the objects would be guarded by a label no shard reads.
	_, err = Build(Options{Presets: []string{"flux"}, Mapped: []string{"kustomizations.v1.kustomize.toolkit.fluxcd.io=example.com/shard"}})
	require.EqualError(t, err, `--mapped-kind "kustomizations.v1.kustomize.toolkit.fluxcd.io=example.com/shard": `+
		`preset flux maps kustomizations.kustomize.toolkit.fluxcd.io by the label sharding.fluxcd.io/key, which its shards' controllers select by: `+
		`list it with that label, or set --flux-shard-key`)
	_, err = Build(Options{Presets: []string{"fleet"}, Mapped: []string{"bundles.v1alpha1.fleet.cattle.io=example.com/shard"}})
	require.ErrorContains(t, err, `preset fleet maps bundles.fleet.cattle.io by the label fleet.cattle.io/shard-ref`)

	// Without the preset, another label is a kind of one's own controllers.
	set, err = Build(Options{Custom: []string{"flux-system/kc=--watch-label-selector=example.com/shard={shard}"},
		Mapped: []string{"kustomizations.v1.kustomize.toolkit.fluxcd.io=example.com/shard"}})
	require.NoError(t, err)
	assert.Equal(t, MappedKind{Resource: set.Mapped[0].Resource, Label: "example.com/shard"}, set.Mapped[0])
	assert.Equal(t, []string{`--mapped-kind "kustomizations.v1.kustomize.toolkit.fluxcd.io=example.com/shard": ` +
		`preset flux maps kustomizations.kustomize.toolkit.fluxcd.io by the label sharding.fluxcd.io/key; ` +
		`by example.com/shard it is taken as a kind of its own, without what the preset knows of it`}, set.Warnings)
	// ... and with the preset's label, it means what the preset means.
	set, err = Build(Options{Custom: []string{"ns/c=--s={shard}"}, Mapped: []string{"bundles.v1alpha1.fleet.cattle.io=fleet.cattle.io/shard-ref"}})
	require.NoError(t, err)
	assert.True(t, set.Mapped[0].Derived)
}

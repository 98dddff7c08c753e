package source

import (
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
	assert.Equal(t, []string{"fleet-ns/fleet-controller", "fleet-ns/gitjob", "fleet-ns/helmops", "flux-ns/helm-controller"}, names)
	assert.Equal(t, []string{"fleet-ns", "flux-ns"}, set.Namespaces())
	var mapped []string
	for _, m := range set.Mapped {
		mapped = append(mapped, m.CRDName()+"="+m.Label)
	}
	assert.Equal(t, []string{
		"gitrepos.fleet.cattle.io=fleet.cattle.io/shard-ref",
		"helmops.fleet.cattle.io=fleet.cattle.io/shard-ref",
		"helmreleases.helm.toolkit.fluxcd.io=sharding.fluxcd.io/key",
	}, mapped)
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(tt.opts)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

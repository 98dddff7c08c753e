package mapped

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/shardkeeper/shardkeeper/pkg/crossref"
	"github.com/shardkeeper/shardkeeper/pkg/source"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
	"github.com/shardkeeper/shardkeeper/pkg/wire"
)

const fluxKey = "sharding.fluxcd.io/key"

var (
	releases = source.MappedKind{Resource: schema.GroupVersionResource{Group: fluxHelmGroup, Version: "v2", Resource: "helmreleases"},
		Label: fluxKey, SpecLabels: "spec.chart.metadata.labels"}
	charts  = source.MappedKind{Resource: schema.GroupVersionResource{Group: fluxSourceGroup, Version: "v1", Resource: "helmcharts"}, Label: fluxKey}
	repos   = source.MappedKind{Resource: schema.GroupVersionResource{Group: fluxSourceGroup, Version: "v1", Resource: "helmrepositories"}, Label: fluxKey}
	helmOps = source.MappedKind{Resource: schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "helmops"},
		Label: source.FleetShardRefLabel, SpecLabels: "spec.labels"}
)

// helmRelease is a HelmRelease as the API server serves it.
var helmRelease = testfixture.HelmReleaseJSON

func decode(t *testing.T, data string) *wire.SpecObject {
	t.Helper()
	obj, gvk, err := wire.SpecCodec.Decode([]byte(data), nil, nil)
	require.NoError(t, err)
	o, ok := obj.(*wire.SpecObject)
	require.True(t, ok, "decoded as %T", obj)
	assert.Equal(t, o.Kind, gvk.Kind)
	return o
}

func TestSpecIndex(t *testing.T) {
	changes := 0
	s := newSpecIndex(releases, newShardIndex("helmreleases", fluxKey, false, func() { changes++ }))
	strip := func(o *wire.SpecObject) any {
		st, err := s.strip(o)
		require.NoError(t, err)
		return st
	}
	require.NoError(t, s.Replace([]any{
		strip(decode(t, helmRelease("ok", "s1", "s1"))),
		strip(decode(t, helmRelease("bare", "s1", ""))),
		strip(decode(t, `{"kind":"HelmRelease","metadata":{"name":"ref","namespace":"apps","labels":{"sharding.fluxcd.io/key":"s1"}},"spec":{"chartRef":{"kind":"OCIRepository","name":"oci"}}}`)),
		strip(decode(t, `{"kind":"HelmRelease","metadata":{"name":"none","namespace":"apps"},"spec":{}}`)),
	}, "1"))
	assert.Equal(t, 1, changes)
	assert.Equal(t, 3, s.count("s1"), "the metadata index counts as it does from the metadata watch")
	assert.Equal(t, uint16(3), s.byKey["apps/ok"].weight)

	got := map[string]crossref.Object{}
	for _, o := range s.objects(nil) {
		got[o.Namespace+"/"+o.Name] = o
	}
	assert.NotContains(t, got, "apps/none", "an object that derives nothing and refers to nothing is not kept")
	assert.Equal(t, crossref.Object{Kind: "helmreleases", Label: fluxKey, Namespace: "apps", Name: "bare", Shard: crossref.On("s1", true),
		Derived: &crossref.Derived{Path: "spec.chart.metadata.labels", Shard: crossref.Shard{}},
		Ref:     &crossref.Ref{Field: "spec.chart.spec.sourceRef", Kind: "HelmRepository", Namespace: "flux-system", Name: "repo", From: crossref.Shard{}}},
		got["apps/bare"], "the chart is built where its labels say, and looks for its repository there")
	assert.Equal(t, &crossref.Ref{Field: "spec.chartRef", Kind: "OCIRepository", Namespace: "apps", Name: "oci", From: crossref.On("s1", true)},
		got["apps/ref"].Ref, "a chartRef is resolved by the release's own shard, in its namespace by default")

	// A change of the spec alone is a change.
	require.NoError(t, s.Update(decode(t, helmRelease("bare", "s1", "s1"))))
	assert.Equal(t, 2, changes)
	require.NoError(t, s.Update(decode(t, helmRelease("bare", "s1", "s1"))))
	assert.Equal(t, 2, changes, "nor is an unchanged object")

	require.NoError(t, s.Delete(decode(t, helmRelease("bare", "s1", "s1"))))
	assert.Len(t, s.objects(nil), 2)
	assert.Equal(t, 2, s.count("s1"))
	assert.Equal(t, 3, changes)
	assert.Error(t, s.Add("not an object"))
}

func TestSpecIndexOfOtherKinds(t *testing.T) {
	ops := newSpecIndex(helmOps, newShardIndex("helmops", source.FleetShardRefLabel, false, func() {}))
	require.NoError(t, ops.Add(decode(t, `{"kind":"HelmOp","metadata":{"name":"op","namespace":"fleet-default","labels":{"fleet.cattle.io/shard-ref":"s1"}},"spec":{"labels":{"env":"prod"}}}`)))
	require.Len(t, ops.objects(nil), 1)
	assert.Equal(t, &crossref.Derived{Path: "spec.labels", Shard: crossref.Shard{}}, ops.objects(nil)[0].Derived, "a HelmOp always makes its Bundle")

	cs := newSpecIndex(charts, newShardIndex("helmcharts", fluxKey, false, func() {}))
	require.NoError(t, cs.Add(decode(t, `{"kind":"HelmChart","metadata":{"name":"c","namespace":"apps","labels":{"sharding.fluxcd.io/key":"s1"}},"spec":{"sourceRef":{"kind":"GitRepository","name":"git"}}}`)))
	require.NoError(t, cs.Add(decode(t, `{"kind":"HelmChart","metadata":{"name":"apps-web","namespace":"apps","labels":{"helm.toolkit.fluxcd.io/name":"web"}},"spec":{"sourceRef":{"kind":"HelmRepository","name":"repo"}}}`)))
	objs := cs.objects(nil)
	require.Len(t, objs, 1, "a HelmChart made from a HelmRelease is answered for by the release")
	assert.Equal(t, &crossref.Ref{Field: "spec.sourceRef", Kind: "GitRepository", Namespace: "apps", Name: "git", From: crossref.On("s1", true)}, objs[0].Ref)

	assert.False(t, readsSpec(repos), "a repository refers to nothing")
	assert.True(t, readsSpec(releases))
	assert.True(t, readsSpec(charts))
	assert.True(t, readsSpec(helmOps))
}

func TestTrackerCrossShard(t *testing.T) {
	tr := New(nil, nil, []source.MappedKind{releases, repos}, func() {})
	rel, repo := tr.kinds[0], tr.kinds[1]
	rel.index = newShardIndex("helmreleases", fluxKey, false, func() {})
	rel.specs = newSpecIndex(releases, rel.index)
	repo.index = newShardIndex("helmrepositories", fluxKey, false, func() {})
	assert.Empty(t, tr.CrossShard())

	require.NoError(t, rel.specs.Add(decode(t, helmRelease("web", "s1", "s1"))))
	assert.Empty(t, tr.CrossShard(), "the repository is not cached: no finding")

	labelled := func(shard string) runtime.Object {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "flux-system", Name: "repo", Labels: map[string]string{fluxKey: shard}}}
	}
	require.NoError(t, repo.index.Add(labelled("s1")))
	assert.Empty(t, tr.CrossShard())
	require.NoError(t, repo.index.Update(labelled("s2")))
	crossed := tr.CrossShard()
	require.Len(t, crossed, 1)
	assert.Equal(t, "helmreleases apps/web", crossed[0].Object)
	assert.Contains(t, crossed[0].Reasons[0], `HelmRepository flux-system/repo is on shard "s2"`)
}

func TestSpecIndexSharesEntries(t *testing.T) {
	s := newSpecIndex(releases, newShardIndex("helmreleases", fluxKey, false, func() {}))
	require.NoError(t, s.Add(decode(t, helmRelease("a", "s1", "s1"))))
	require.NoError(t, s.Add(decode(t, helmRelease("b", "s1", "s1"))))
	assert.Same(t, s.entries["apps/a"], s.entries["apps/b"], "releases that refer alike share one entry")
	assert.Len(t, s.shared, 1)

	require.NoError(t, s.Update(decode(t, helmRelease("b", "s1", ""))))
	assert.Len(t, s.shared, 2)
	require.NoError(t, s.Delete(decode(t, helmRelease("a", "s1", "s1"))))
	assert.Len(t, s.shared, 1, "an entry no object holds is forgotten")
	assert.Equal(t, 1, s.entries["apps/b"].refs)

	require.NoError(t, s.Replace([]any{decode(t, helmRelease("c", "s2", "s2"))}, "2"))
	assert.Len(t, s.entries, 1)
	assert.Len(t, s.shared, 1, "a relist starts the shared entries afresh")
	assert.Equal(t, 1, s.entries["apps/c"].refs)
}

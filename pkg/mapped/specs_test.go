package mapped

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/shardkeeper/shardkeeper/pkg/crossref"
	"github.com/shardkeeper/shardkeeper/pkg/source"
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

// helmRelease is a HelmRelease as the API server serves it, with what a
// live one carries besides the fields read: managed fields, a last-applied
// annotation, values and status.
func helmRelease(name, shard, chartShard string) string {
	chartLabels := ""
	if chartShard != "" {
		chartLabels = fmt.Sprintf(`"metadata":{"labels":{"team":"a",%q:%q}},`, fluxKey, chartShard)
	}
	return fmt.Sprintf(`{"apiVersion":"helm.toolkit.fluxcd.io/v2","kind":"HelmRelease",
"metadata":{"name":%q,"namespace":"apps","resourceVersion":"42","uid":"u","generation":3,
 "labels":{%q:%q,"app":"x"},
 "annotations":{"kubectl.kubernetes.io/last-applied-configuration":%q,"shardkeeper.io/assigned-shard":%q,"shardkeeper.io/weight":"3"},
 "finalizers":["finalizers.fluxcd.io"],
 "managedFields":[{"manager":"helm-controller","operation":"Update","apiVersion":"helm.toolkit.fluxcd.io/v2","fieldsType":"FieldsV1","fieldsV1":{"f:status":{"f:conditions":{}}}}]},
"spec":{"interval":"5m","chart":{%s"spec":{"chart":"podinfo","version":"6.x","sourceRef":{"kind":"HelmRepository","name":"repo","namespace":"flux-system"}}},
 "values":{"replicaCount":2,"resources":{"limits":{"memory":"256Mi"}},"ingress":{"enabled":true,"hosts":[{"host":"a.example"}]}}},
"status":{"conditions":[{"type":"Ready","status":"True","reason":"InstallSucceeded","message":"ok","lastTransitionTime":"2026-01-01T00:00:00Z"}],
 "history":[{"chartName":"podinfo","chartVersion":"6.9.0","status":"deployed","version":1}]}}`,
		name, fluxKey, shard, strings.Repeat("x", 2048), shard, chartLabels)
}

func decode(t *testing.T, data string) *specObject {
	t.Helper()
	obj, gvk, err := specCodec{}.Decode([]byte(data), nil, nil)
	require.NoError(t, err)
	o, ok := obj.(*specObject)
	require.True(t, ok, "decoded as %T", obj)
	assert.Equal(t, o.Kind, gvk.Kind)
	return o
}

func TestSpecCodecKeepsOnlyWhatIsRead(t *testing.T) {
	o := decode(t, helmRelease("web", "s3", "s2"))
	assert.Equal(t, metav1.ObjectMeta{Name: "web", Namespace: "apps", ResourceVersion: "42",
		Labels:      map[string]string{fluxKey: "s3", "app": "x"},
		Annotations: map[string]string{AssignedShardAnnotation: "s3", weightAnnotation: "3"}}, o.ObjectMeta,
		"the metadata the index reads, and no other annotation")
	require.NotNil(t, o.Spec.Chart)
	assert.Equal(t, map[string]string{"team": "a", fluxKey: "s2"}, o.Spec.Chart.Metadata.Labels)
	assert.Equal(t, sourceRef{Kind: "HelmRepository", Name: "repo", Namespace: "flux-system"}, o.Spec.Chart.Spec.SourceRef)

	list, _, err := specCodec{}.Decode([]byte(`{"kind":"HelmReleaseList","apiVersion":"helm.toolkit.fluxcd.io/v2","metadata":{"resourceVersion":"7"},"items":[`+
		helmRelease("a", "s1", "")+`]}`), nil, nil)
	require.NoError(t, err)
	l, ok := list.(*specObjectList)
	require.True(t, ok)
	assert.Equal(t, "7", l.ResourceVersion)
	require.Len(t, l.Items, 1)
	assert.Equal(t, "a", l.Items[0].Name, "list items are filled too")

	st, _, err := specCodec{}.Decode([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","code":410}`), nil, nil)
	require.NoError(t, err)
	assert.Equal(t, metav1.StatusReasonExpired, st.(*metav1.Status).Reason)

	var ev metav1.WatchEvent
	_, _, err = specCodec{}.Decode([]byte(`{"type":"ADDED","object":`+helmRelease("a", "s1", "")+`}`), nil, &ev)
	require.NoError(t, err)
	assert.Equal(t, "ADDED", ev.Type)

	bookmark := decode(t, `{"kind":"HelmRelease","apiVersion":"helm.toolkit.fluxcd.io/v2","metadata":{"resourceVersion":"9","annotations":{"k8s.io/initial-events-end":"true"}}}`)
	assert.Equal(t, "true", bookmark.Annotations[metav1.InitialEventsAnnotationKey], "the bookmark that ends a streamed list is seen")

	require.Error(t, specCodec{}.Encode(o, nil), "the client only reads")
	assert.Equal(t, o, o.DeepCopyObject())
}

func TestSpecIndex(t *testing.T) {
	changes := 0
	s := newSpecIndex(releases, newShardIndex("helmreleases", fluxKey, false, func() { changes++ }))
	strip := func(o *specObject) any {
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

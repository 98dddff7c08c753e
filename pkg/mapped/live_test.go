package mapped

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/shardkeeper/shardkeeper/pkg/source"
)

var (
	liveGitRepos = source.MappedKind{Resource: schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "gitrepos"},
		Label: "fleet.cattle.io/shard-ref"}
	liveHelmOps = source.MappedKind{Resource: schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "helmops"},
		Label: "fleet.cattle.io/shard-ref"}
	liveReleases = source.MappedKind{Resource: schema.GroupVersionResource{Group: "helm.toolkit.fluxcd.io", Version: "v2", Resource: "helmreleases"},
		Label: "sharding.fluxcd.io/key"}
)

func liveObject(kind source.MappedKind, kindName, ns, name string, labels map[string]string) *metav1.PartialObjectMetadata {
	gv := kind.Resource.GroupVersion()
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: gv.String(), Kind: kindName},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
	}
}

// liveTracker is a Tracker whose kinds run (their caches exist, empty)
// except those in absent, over a fake metadata client holding objs.
func liveTracker(t *testing.T, kinds []source.MappedKind, absent map[string]bool, objs ...runtime.Object) (*Tracker, *metadatafake.FakeMetadataClient) {
	t.Helper()
	scheme := metadatafake.NewTestScheme()
	require.NoError(t, metav1.AddMetaToScheme(scheme))
	client := metadatafake.NewSimpleMetadataClient(scheme, objs...)
	tr := New(client, nil, kinds, func() {})
	for _, k := range tr.kinds {
		if !absent[k.spec.Name()] {
			k.index = newShardIndex(k.spec.Name(), k.spec.Label, k.spec.Derived, func() {})
		}
	}
	return tr, client
}

func TestLive(t *testing.T) {
	tr, client := liveTracker(t, []source.MappedKind{liveGitRepos, liveHelmOps, liveReleases}, map[string]bool{"helmops": true},
		liveObject(liveGitRepos, "GitRepo", "team", "payments", map[string]string{"fleet.cattle.io/shard-ref": "two"}),
		liveObject(liveGitRepos, "GitRepo", "team", "other", map[string]string{"fleet.cattle.io/shard-ref": "one"}),
		liveObject(liveGitRepos, "GitRepo", "team", "keyed", map[string]string{"sharding.fluxcd.io/key": "three"}),
		liveObject(liveHelmOps, "HelmOp", "team", "op", map[string]string{"fleet.cattle.io/shard-ref": "three"}),
		liveObject(liveReleases, "HelmRelease", "apps", "nginx", map[string]string{"sharding.fluxcd.io/key": "three"}),
	)

	got, err := tr.Live(context.Background(), []string{"two", "three", "four"})

	require.NoError(t, err)
	assert.Equal(t, map[string]string{"two": "gitrepos team/payments", "three": "helmreleases apps/nginx"}, got,
		"each kind is asked for its own label; a kind whose CRD is absent is not asked")
	var asked []string
	for _, a := range client.Actions() {
		l := a.(clienttesting.ListAction)
		asked = append(asked, l.GetResource().Resource+" ?"+l.GetListRestrictions().Labels.String())
		assert.Empty(t, l.GetNamespace(), "every namespace")
	}
	assert.ElementsMatch(t, []string{
		"gitrepos ?fleet.cattle.io/shard-ref in (four,three,two)",
		"helmreleases ?sharding.fluxcd.io/key in (four,three,two)",
	}, asked)

	got, err = tr.Live(context.Background(), nil)
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.Len(t, client.Actions(), 2, "no shard, no request")
}

func TestLiveError(t *testing.T) {
	tr, client := liveTracker(t, []source.MappedKind{liveGitRepos, liveReleases}, nil)
	client.PrependReactor("list", "helmreleases", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})

	got, err := tr.Live(context.Background(), []string{"two"})

	require.ErrorContains(t, err, "listing helmreleases on shards [two]: connection refused")
	assert.Nil(t, got, "no answer is an answer: a caller that deletes on an empty one would delete on a failure")
}

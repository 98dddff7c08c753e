package wire

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardkeeper/shardkeeper/pkg/placement"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

func decode(t *testing.T, data string) *SpecObject {
	t.Helper()
	obj, gvk, err := specCodec{}.Decode([]byte(data), nil, nil)
	require.NoError(t, err)
	o, ok := obj.(*SpecObject)
	require.True(t, ok, "decoded as %T", obj)
	assert.Equal(t, o.Kind, gvk.Kind)
	return o
}

func TestSpecCodecKeepsOnlyWhatIsRead(t *testing.T) {
	o := decode(t, testfixture.HelmReleaseJSON("web", "s3", "s2"))
	assert.Equal(t, metav1.ObjectMeta{Name: "web", Namespace: "apps", ResourceVersion: "42",
		Labels:      map[string]string{"sharding.fluxcd.io/key": "s3", "app": "x"},
		Annotations: map[string]string{placement.AssignedShardAnnotation: "s3", placement.WeightAnnotation: "3"}}, o.ObjectMeta,
		"the metadata the index reads, and no other annotation")
	require.NotNil(t, o.Spec.Chart)
	assert.Equal(t, map[string]string{"team": "a", "sharding.fluxcd.io/key": "s2"}, o.Spec.Chart.Metadata.Labels)
	assert.Equal(t, SourceRef{Kind: "HelmRepository", Name: "repo", Namespace: "flux-system"}, o.Spec.Chart.Spec.SourceRef)

	list, _, err := specCodec{}.Decode([]byte(`{"kind":"HelmReleaseList","apiVersion":"helm.toolkit.fluxcd.io/v2","metadata":{"resourceVersion":"7"},"items":[`+
		testfixture.HelmReleaseJSON("a", "s1", "")+`]}`), nil, nil)
	require.NoError(t, err)
	l, ok := list.(*specList)
	require.True(t, ok)
	assert.Equal(t, "7", l.ResourceVersion)
	require.Len(t, l.Items, 1)
	assert.Equal(t, "a", l.Items[0].Name, "list items are filled too")

	st, _, err := specCodec{}.Decode([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","code":410}`), nil, nil)
	require.NoError(t, err)
	assert.Equal(t, metav1.StatusReasonExpired, st.(*metav1.Status).Reason)

	var ev metav1.WatchEvent
	_, _, err = specCodec{}.Decode([]byte(`{"type":"ADDED","object":`+testfixture.HelmReleaseJSON("a", "s1", "")+`}`), nil, &ev)
	require.NoError(t, err)
	assert.Equal(t, "ADDED", ev.Type)

	bookmark := decode(t, `{"kind":"HelmRelease","apiVersion":"helm.toolkit.fluxcd.io/v2","metadata":{"resourceVersion":"9","annotations":{"k8s.io/initial-events-end":"true"}}}`)
	assert.Equal(t, "true", bookmark.Annotations[metav1.InitialEventsAnnotationKey], "the bookmark that ends a streamed list is seen")

	require.Error(t, specCodec{}.Encode(o, nil), "the client only reads")
	assert.Equal(t, o, o.DeepCopyObject())
}

// helmRelease is a HelmRelease as the API server serves it.
var helmRelease = testfixture.HelmReleaseJSON

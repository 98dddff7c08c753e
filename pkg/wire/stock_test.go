package wire

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
)

// The stock path keeps of an object exactly what the skimmer keeps: the
// two are compared, so that --mapped-reader=stock decides the same.
func TestStockKeepsWhatTheSkimmerKeeps(t *testing.T) {
	for name, data := range map[string]string{
		"live release":    helmRelease("web", "s1", "s2"),
		"no chart labels": helmRelease("web", "s1", ""),
		"being deleted":   `{"apiVersion":"helm.toolkit.fluxcd.io/v2","kind":"HelmRelease","metadata":{"name":"a","namespace":"n","resourceVersion":"3","deletionTimestamp":"2026-02-03T04:05:06Z","annotations":{"shardkeeper.io/assigned-at":"2026-01-01T00:00:00Z","other":"x"}},"spec":{"chartRef":{"kind":"OCIRepository","name":"o","namespace":"src"}}}`,
		"a HelmOp":        `{"apiVersion":"fleet.cattle.io/v1alpha1","kind":"HelmOp","metadata":{"name":"op","namespace":"fleet-default","labels":{"fleet.cattle.io/shard-ref":"s2"}},"spec":{"labels":{"team":"b"}}}`,
		"a HelmChart":     `{"apiVersion":"source.toolkit.fluxcd.io/v1","kind":"HelmChart","metadata":{"name":"c","namespace":"apps"},"spec":{"chart":"podinfo","sourceRef":{"kind":"GitRepository","name":"git"}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			skimmed := decode(t, data)
			u := &unstructured.Unstructured{}
			require.NoError(t, json.Unmarshal([]byte(data), &u.Object))
			stock, err := specFromUnstructured(u)
			require.NoError(t, err)
			assert.Equal(t, skimmed, stock)
		})
	}
}

func TestStockListAndEvents(t *testing.T) {
	u := unstructured.Unstructured{}
	require.NoError(t, json.Unmarshal([]byte(helmRelease("a", "s1", "")), &u.Object))
	list := &unstructured.UnstructuredList{Items: []unstructured.Unstructured{u}}
	list.SetResourceVersion("7")
	list.SetContinue("next")
	got, err := specListFromUnstructured(list)
	require.NoError(t, err)
	l, ok := got.(*specList)
	require.True(t, ok, "a %T", got)
	assert.Equal(t, "7", l.ResourceVersion)
	assert.Equal(t, "next", l.Continue)
	require.Len(t, l.Items, 1)
	assert.Equal(t, "s1", l.Items[0].Labels["sharding.fluxcd.io/key"])

	ev, keep := specEvent(watch.Event{Type: watch.Added, Object: &u})
	assert.True(t, keep)
	o, ok := ev.Object.(*SpecObject)
	require.True(t, ok, "the event's object is a %T", ev.Object)
	assert.Equal(t, "a", o.Name)
}

// An object the stock path cannot convert ends the watch with an error,
// which the reflector reports and restarts from; passed through, it would
// be dropped as an unexpected type and its older version kept.
func TestStockWatchEndsOnAnObjectItCannotConvert(t *testing.T) {
	u := unstructured.Unstructured{}
	require.NoError(t, json.Unmarshal([]byte(`{"apiVersion":"helm.toolkit.fluxcd.io/v2","kind":"HelmRelease","metadata":{"name":"a","namespace":"n"},"spec":{"chartRef":"not an object"}}`), &u.Object))
	ev, keep := specEvent(watch.Event{Type: watch.Modified, Object: &u})
	assert.True(t, keep)
	require.Equal(t, watch.Error, ev.Type)
	err := apierrors.FromObject(ev.Object)
	assert.True(t, apierrors.IsInternalError(err), "an internal error, not %v", err)
	require.ErrorContains(t, err, "HelmRelease n/a")

	status := metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonExpired}
	ev, _ = specEvent(watch.Event{Type: watch.Error, Object: &status})
	assert.Same(t, &status, ev.Object, "the API server's own error goes through")
}

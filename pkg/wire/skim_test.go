package wire

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sjson "sigs.k8s.io/json"
)

// reflective decodes data as the struct tags of SpecObject say, the
// reference that skim must agree with.
func reflective(t *testing.T, data string) *SpecObject {
	t.Helper()
	o := &SpecObject{}
	require.NoError(t, sjson.UnmarshalCaseSensitivePreserveInts([]byte(data), o))
	o.fill()
	return o
}

func TestSkimAgreesWithReflectiveDecoding(t *testing.T) {
	for name, data := range map[string]string{
		"live release":    helmRelease("web", "s1", "s2"),
		"no chart labels": helmRelease("web", "s1", ""),
		"escapes": `{"kind":"HelmRelease","metadata":{"name":"a\"b\\","namespace":"n\u00e9",` +
			`"labels":{"sharding.fluxcd.io/key":"s\u0031","k\\":"v\"}"},` +
			`"annotations":{"x":"]}\"{[","shardkeeper.io/weight":"2","shardkeeper.io/assigned-at":"2026-01-01T00:00:00Z"}},` +
			`"spec":{"values":{"a":["}",{"b":"\\\""}],"n":-1.5e3,"t":true,"f":false,"z":null},"chartRef":{"kind":"OCIRepository","name":"o"}}}`,
		"nulls and white space": "{ \"kind\" : \"HelmRelease\" ,\n \"metadata\" : { \"name\" : \"a\" , \"labels\" : null , \"annotations\" : null ," +
			" \"deletionTimestamp\" : \"2026-02-03T04:05:06Z\" } ,\t\"spec\" : { \"chart\" : null , \"sourceRef\" : null , \"labels\" : { } } }",
		"chart without metadata": `{"kind":"HelmRelease","metadata":{"name":"a"},"spec":{"chart":{"spec":{"sourceRef":{"kind":"GitRepository","name":"g","namespace":"x"}}}}}`,
		"chart metadata null":    `{"kind":"HelmRelease","metadata":{"name":"a"},"spec":{"chart":{"metadata":null,"spec":{"chart":"c"}}}}`,
		"helmchart":              `{"kind":"HelmChart","metadata":{"name":"c"},"spec":{"chart":"podinfo","sourceRef":{"kind":"HelmRepository","name":"r"}}}`,
		"helmop":                 `{"kind":"HelmOp","metadata":{"name":"op"},"spec":{"labels":{"fleet.cattle.io/shard-ref":"s1"},"helm":{"chart":"c"}}}`,
		"empty":                  `{}`,
	} {
		t.Run(name, func(t *testing.T) {
			got := &SpecObject{}
			require.NoError(t, skimObject([]byte(data), got))
			assert.Equal(t, reflective(t, data), got)
		})
	}
}

func TestSkimRejectsMalformedJSON(t *testing.T) {
	for _, data := range []string{
		``, `[]`, `{"kind":"HelmRelease"`, `{"kind":"HelmRelease",}`, `{"kind" "x"}`, `{"metadata":{"name":"a}}`,
		`{"spec":{"values":{"a":[1,2}}`, `{"metadata":{"labels":{"a":"b"]}}`,
	} {
		assert.Error(t, skimObject([]byte(data), &SpecObject{}), "%q", data)
	}
}

func TestSkimEventAndList(t *testing.T) {
	obj := helmRelease("web", "s1", "s1")
	var ev metav1.WatchEvent
	data := []byte(`{"type":"MODIFIED","object":` + obj + ` }`)
	require.NoError(t, skimEvent(data, &ev))
	assert.Equal(t, "MODIFIED", ev.Type)
	assert.JSONEq(t, obj, string(ev.Object.Raw))
	data[len(data)-5] = 'X'
	assert.JSONEq(t, obj, string(ev.Object.Raw), "the raw object is a copy: the stream decoder reuses its buffer")

	var l specList
	require.NoError(t, skimList([]byte(`{"kind":"HelmReleaseList","metadata":{"resourceVersion":"5","continue":"c"},"items":[`+obj+`,`+obj+`]}`), &l))
	assert.Equal(t, metav1.ListMeta{ResourceVersion: "5", Continue: "c"}, l.ListMeta)
	require.Len(t, l.Items, 2)
	assert.Equal(t, reflective(t, obj), &l.Items[1])

	kind, err := skimKind([]byte(`{"apiVersion":"v1","metadata":{"kind":"no"},"kind":"Status"}`))
	require.NoError(t, err)
	assert.Equal(t, "Status", kind, "only the top-level kind counts")
}

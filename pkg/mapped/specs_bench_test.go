package mapped

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/json"

	"github.com/shardkeeper/shardkeeper/pkg/wire"
)

// The cost per object of what the watch of a mapped kind decodes and
// keeps, for `go test -bench Decode ./pkg/mapped/`: the metadata-only watch
// (protobuf PartialObjectMetadata), the spec watch (JSON into wire.SpecObject),
// and, for scale, a dynamic informer's unstructured decoding. "bench" is
// the benchmark's object (bench/: a label, a 2 KB last-applied
// annotation, an empty spec); "live" a HelmRelease as helmRelease renders
// it, with values, status and managed fields.

func benchObject() string {
	return `{"apiVersion":"helm.toolkit.fluxcd.io/v2","kind":"HelmRelease","metadata":{"name":"obj-000001","namespace":"bench-objs-1",` +
		`"resourceVersion":"1234","uid":"5b1c1c2e-0000-0000-0000-000000000000","generation":1,"creationTimestamp":"2026-01-01T00:00:00Z",` +
		`"labels":{"sharding.fluxcd.io/key":"s001"},"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"` + strings.Repeat("x", 2048) + `"},` +
		`"managedFields":[{"manager":"bench","operation":"Update","apiVersion":"helm.toolkit.fluxcd.io/v2","time":"2026-01-01T00:00:00Z",` +
		`"fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}},` +
		`"f:labels":{".":{},"f:sharding.fluxcd.io/key":{}}},"f:spec":{}}}]},"spec":{}}`
}

// asProtobufMetadata is data's metadata as the API server sends it to the
// metadata client.
func asProtobufMetadata(b *testing.B, data string) ([]byte, k8sruntime.Serializer) {
	b.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(b, json.Unmarshal([]byte(data), &u.Object))
	pom := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"}}
	require.NoError(b, k8sruntime.DefaultUnstructuredConverter.FromUnstructured(u.Object["metadata"].(map[string]any), &pom.ObjectMeta))
	scheme := k8sruntime.NewScheme()
	require.NoError(b, metav1.AddMetaToScheme(scheme))
	s := protobuf.NewSerializer(scheme, scheme)
	var buf bytes.Buffer
	require.NoError(b, s.Encode(pom, &buf))
	return buf.Bytes(), s
}

func benchmarkMetadata(b *testing.B, data string) {
	b.Helper()
	raw, s := asProtobufMetadata(b, data)
	index := newShardIndex("helmreleases", fluxKey, false, func() {})
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		obj, _, err := s.Decode(raw, nil, &metav1.PartialObjectMetadata{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := index.strip(obj); err != nil {
			b.Fatal(err)
		}
	}
}

func benchmarkSpec(b *testing.B, data string) {
	b.Helper()
	raw := []byte(data)
	s := newSpecIndex(releases, newShardIndex("helmreleases", fluxKey, false, func() {}))
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		obj, _, err := wire.SpecCodec.Decode(raw, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.strip(obj); err != nil {
			b.Fatal(err)
		}
	}
}

// benchmarkSpecEvent decodes data as a watch event brings it: the event
// first, then its object.
func benchmarkSpecEvent(b *testing.B, data string) {
	b.Helper()
	raw := []byte(`{"type":"ADDED","object":` + data + `}`)
	s := newSpecIndex(releases, newShardIndex("helmreleases", fluxKey, false, func() {}))
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	var ev metav1.WatchEvent
	for b.Loop() {
		if _, _, err := wire.SpecCodec.Decode(raw, nil, &ev); err != nil {
			b.Fatal(err)
		}
		obj, _, err := wire.SpecCodec.Decode(ev.Object.Raw, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.strip(obj); err != nil {
			b.Fatal(err)
		}
	}
}

func benchmarkUnstructured(b *testing.B, data string) {
	b.Helper()
	raw := []byte(data)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := unstructured.UnstructuredJSONScheme.Decode(raw, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeMetadataBench(b *testing.B)     { benchmarkMetadata(b, benchObject()) }
func BenchmarkDecodeSpecBench(b *testing.B)         { benchmarkSpec(b, benchObject()) }
func BenchmarkDecodeSpecEventBench(b *testing.B)    { benchmarkSpecEvent(b, benchObject()) }
func BenchmarkDecodeUnstructuredBench(b *testing.B) { benchmarkUnstructured(b, benchObject()) }
func BenchmarkDecodeMetadataLive(b *testing.B)      { benchmarkMetadata(b, helmRelease("web", "s1", "s1")) }
func BenchmarkDecodeSpecLive(b *testing.B)          { benchmarkSpec(b, helmRelease("web", "s1", "s1")) }
func BenchmarkDecodeSpecEventLive(b *testing.B) {
	benchmarkSpecEvent(b, helmRelease("web", "s1", "s1"))
}
func BenchmarkDecodeUnstructuredLive(b *testing.B) {
	benchmarkUnstructured(b, helmRelease("web", "s1", "s1"))
}

// benchmarkRetained reports the heap that an index keeps per object of n
// live HelmReleases (each in its own name, as in a cluster), through the
// metadata-only index (spec false) or the spec index.
func benchmarkRetained(b *testing.B, spec bool) {
	b.Helper()
	const n = 10000
	for b.Loop() {
		index := newShardIndex("helmreleases", fluxKey, false, func() {})
		specs := newSpecIndex(releases, index)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range n {
			o, _, err := wire.SpecCodec.Decode([]byte(helmRelease(fmt.Sprintf("release-%05d", i), "s1", "s1")), nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			if spec {
				err = specs.Update(o)
			} else {
				err = index.Update(o.(*wire.SpecObject).Partial())
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/object")
		runtime.KeepAlive(specs)
	}
}

func BenchmarkRetainedMetadata(b *testing.B) { benchmarkRetained(b, false) }
func BenchmarkRetainedSpec(b *testing.B)     { benchmarkRetained(b, true) }

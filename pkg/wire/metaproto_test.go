package wire

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"github.com/shardkeeper/shardkeeper/pkg/placement"
)

// standardProtobuf is the protobuf serializer of client-go's metadata
// client: what the API server's answers are encoded and decoded with.
func standardProtobuf(tb testing.TB) runtime.SerializerInfo {
	tb.Helper()
	info, ok := runtime.SerializerInfoForMediaType(metainternalversionscheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	require.True(tb, ok)
	return info
}

var partialGVK = metav1.SchemeGroupVersion.WithKind("PartialObjectMetadata")

// fullObject has every metadata field an object may carry, kept or not.
func fullObject(name string) *metav1.PartialObjectMetadata {
	deleted := metav1.NewTime(time.Unix(1767225600, 123456789))
	grace := int64(30)
	controller := true
	return &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: partialGVK.GroupVersion().String(), Kind: partialGVK.Kind},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, GenerateName: "obj-", Namespace: "fleet-default", UID: types.UID("5f0c-" + name),
			ResourceVersion: "123456", Generation: 7,
			CreationTimestamp: metav1.NewTime(time.Unix(1767225000, 0)), DeletionTimestamp: &deleted, DeletionGracePeriodSeconds: &grace,
			Labels: map[string]string{"fleet.cattle.io/shard-ref": "s007", "app": "web", "team": ""},
			Annotations: map[string]string{
				"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 2048),
				placement.AssignedShardAnnotation:                  "s007",
				placement.AssignedAtAnnotation:                     "2026-12-01T10:00:00Z",
				placement.WeightAnnotation:                         "3",
				"example.com/other":                                "dropped",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "o", UID: "u", Controller: &controller}},
			Finalizers:      []string{"fleet.cattle.io/gitrepo-finalizer"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply,
				APIVersion: "fleet.cattle.io/v1alpha1", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{}}`)}},
		},
	}
}

// kept is what the skimmer must keep of o: what the standard decoder
// reads, less the fields and annotations the index does not read.
func kept(o *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	out := &metav1.PartialObjectMetadata{TypeMeta: o.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: o.Name, Namespace: o.Namespace, ResourceVersion: o.ResourceVersion, DeletionTimestamp: o.DeletionTimestamp, Labels: o.Labels}}
	for k, v := range o.Annotations {
		if keptAnnotation([]byte(k)) {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	return out
}

func encode(tb testing.TB, o runtime.Object) []byte {
	tb.Helper()
	var buf bytes.Buffer
	require.NoError(tb, standardProtobuf(tb).Serializer.Encode(o, &buf))
	return buf.Bytes()
}

// The skimmer keeps exactly what the index reads of what the standard
// decoder decodes, from the same bytes.
func TestSkimmedObjectIsTheStandardOneLessWhatIsNotRead(t *testing.T) {
	bookmark := &metav1.PartialObjectMetadata{TypeMeta: fullObject("").TypeMeta, ObjectMeta: metav1.ObjectMeta{
		ResourceVersion: "99", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	bare := &metav1.PartialObjectMetadata{TypeMeta: fullObject("").TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: "bare"}}
	standard := standardProtobuf(t).Serializer
	codec := metaCodec{standard: standard}
	for _, o := range []*metav1.PartialObjectMetadata{fullObject("full"), bookmark, bare} {
		data := encode(t, o)
		want, _, err := standard.Decode(data, nil, nil)
		require.NoError(t, err)

		got, gvk, err := codec.Decode(data, nil, nil)
		require.NoError(t, err, o.Name)
		assert.Equal(t, kept(want.(*metav1.PartialObjectMetadata)), got, o.Name)
		assert.Equal(t, partialGVK, *gvk)

		into := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "stale", UID: "stale"}}
		got, _, err = codec.Decode(data, nil, into)
		require.NoError(t, err)
		assert.Same(t, into, got, "decoded into the object given")
		assert.Equal(t, kept(want.(*metav1.PartialObjectMetadata)), got, "nothing of what into held is left")
	}
	assert.NotContains(t, kept(fullObject("x")).Annotations, "example.com/other", "the test's own filter drops what is not read")
}

func TestSkimmedList(t *testing.T) {
	remaining := int64(1234)
	list := &metav1.PartialObjectMetadataList{
		TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadataList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "555", Continue: "token", RemainingItemCount: &remaining},
		Items:    []metav1.PartialObjectMetadata{*fullObject("a"), *fullObject("b")},
	}
	for i := range list.Items {
		list.Items[i].TypeMeta = metav1.TypeMeta{}
	}
	data := encode(t, list)
	standard := standardProtobuf(t).Serializer
	wantObj, _, err := standard.Decode(data, nil, nil)
	require.NoError(t, err)
	want := wantObj.(*metav1.PartialObjectMetadataList)
	for i := range want.Items {
		want.Items[i] = *kept(&want.Items[i])
	}

	got, _, err := metaCodec{standard: standard}.Decode(data, nil, &metav1.PartialObjectMetadataList{})
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Len(t, got.(*metav1.PartialObjectMetadataList).Items, 2)
}

// What the skimmer does not read goes to the standard decoder: an error
// is a Status.
func TestSkimmerHandsOtherKindsToTheStandardDecoder(t *testing.T) {
	status := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure,
		Reason: metav1.StatusReasonExpired, Code: http.StatusGone, Message: "too old resource version"}
	got, _, err := metaCodec{standard: standardProtobuf(t).Serializer}.Decode(encode(t, status), nil, nil)
	require.NoError(t, err)
	require.IsType(t, &metav1.Status{}, got)
	assert.Equal(t, metav1.StatusReasonExpired, got.(*metav1.Status).Reason)
}

// A malformed message is an error, never a panic and never an object
// made of the bytes that were there.
func TestSkimmerRejectsMalformedMessages(t *testing.T) {
	codec := metaCodec{standard: standardProtobuf(t).Serializer}
	data := encode(t, fullObject("full"))
	errs := 0
	for n := len(protoMagic); n < len(data); n++ {
		if _, _, err := codec.Decode(data[:n], nil, nil); err != nil {
			errs++
		}
	}
	assert.Greater(t, errs, (len(data)-len(protoMagic))*9/10, "almost every truncation is malformed")

	// A name sent as a varint.
	meta := protowire.AppendTag(nil, pbMetaName, protowire.VarintType)
	meta = protowire.AppendVarint(meta, 5)
	partial := protowire.AppendTag(nil, pbPartialMetadata, protowire.BytesType)
	partial = protowire.AppendBytes(partial, meta)
	tm := protowire.AppendTag(nil, pbTypeMetaAPIVersion, protowire.BytesType)
	tm = protowire.AppendString(tm, "meta.k8s.io/v1")
	tm = protowire.AppendTag(tm, pbTypeMetaKind, protowire.BytesType)
	tm = protowire.AppendString(tm, "PartialObjectMetadata")
	env := protowire.AppendTag(append([]byte(nil), protoMagic...), pbUnknownTypeMeta, protowire.BytesType)
	env = protowire.AppendBytes(env, tm)
	env = protowire.AppendTag(env, pbUnknownRaw, protowire.BytesType)
	env = protowire.AppendBytes(env, partial)
	_, _, err := codec.Decode(env, nil, nil)
	assert.ErrorContains(t, err, "wire type")
}

// watchServer answers a watch of GitRepos with events, as the API server
// does for a metadata client: protobuf frames, each a WatchEvent whose
// object is an encoded PartialObjectMetadata (or a Status).
func watchServer(t *testing.T, events []metav1.WatchEvent) *httptest.Server {
	t.Helper()
	stream := standardProtobuf(t).StreamSerializer
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadata;") || r.URL.Query().Get("watch") != "true" {
			http.Error(w, "unexpected request "+r.URL.String(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf;stream=watch")
		fw := stream.NewFrameWriter(w)
		for i := range events {
			if err := stream.Encode(&events[i], fw); err != nil {
				t.Error(err)
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// The whole path of a watch: the request the list-watch sends, the
// serializer's negotiation, the frames and the skimmed objects.
func TestMetadataWatchIsSkimmed(t *testing.T) {
	objects := []runtime.Object{fullObject("one"), fullObject("two"),
		&metav1.PartialObjectMetadata{TypeMeta: fullObject("").TypeMeta, ObjectMeta: metav1.ObjectMeta{
			ResourceVersion: "99", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}},
		&metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure, Reason: metav1.StatusReasonExpired, Code: 410}}
	types := []watch.EventType{watch.Added, watch.Deleted, watch.Bookmark, watch.Error}
	events := make([]metav1.WatchEvent, len(objects))
	for i, o := range objects {
		events[i] = metav1.WatchEvent{Type: string(types[i]), Object: runtime.RawExtension{Raw: encode(t, o)}}
	}
	srv := watchServer(t, events)
	standard := standardProtobuf(t).Serializer

	client, err := metaClientFor(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	lw := metaListWatch(client, schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "gitrepos"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	defer w.Stop()

	for i, o := range objects {
		e, ok := <-w.ResultChan()
		require.True(t, ok, "event %d", i)
		assert.Equal(t, types[i], e.Type)
		if _, isPartial := o.(*metav1.PartialObjectMetadata); isPartial {
			decoded, _, err := standard.Decode(events[i].Object.Raw, nil, nil)
			require.NoError(t, err)
			want := kept(decoded.(*metav1.PartialObjectMetadata))
			want.TypeMeta = metav1.TypeMeta{} // the client's decoder clears it
			assert.Equal(t, want, e.Object, "event %d", i)
			continue
		}
		require.IsType(t, &metav1.Status{}, e.Object, "event %d", i)
		assert.Equal(t, metav1.StatusReasonExpired, e.Object.(*metav1.Status).Reason)
	}
}

// BenchmarkDecodeMetadata compares the standard decoder with the skimmer
// on an object with a 2 KB last-applied annotation and managed fields.
func BenchmarkDecodeMetadata(b *testing.B) {
	data := encode(b, fullObject("bench"))
	standard := standardProtobuf(b).Serializer
	for _, c := range []struct {
		name string
		dec  runtime.Decoder
	}{{"standard", standard}, {"skimmed", metaCodec{standard: standard}}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := c.dec.Decode(data, nil, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

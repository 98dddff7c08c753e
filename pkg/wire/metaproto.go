package wire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"

	"google.golang.org/protobuf/encoding/protowire"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/shardkeeper/shardkeeper/pkg/placement"
)

// The metadata-only kinds are read as protobuf PartialObjectMetadata, as
// client-go's metadata client reads them, but decoded by a skimmer that
// keeps only what the index reads (see keptAnnotation) and steps over the
// rest of each object without allocating it: the last-applied annotation
// (2 KB is common), managed fields, owner references. At start-up every
// object of a kind arrives this way, and the standard decoder's copies of
// those fields were most of the daemon's garbage.

// Field numbers of the messages read here, from k8s.io/apimachinery's
// pkg/apis/meta/v1/generated.proto and pkg/runtime/generated.proto.
const (
	pbUnknownTypeMeta        protowire.Number = 1 // runtime.Unknown
	pbUnknownRaw             protowire.Number = 2
	pbUnknownContentEncoding protowire.Number = 3
	pbTypeMetaAPIVersion     protowire.Number = 1 // runtime.TypeMeta
	pbTypeMetaKind           protowire.Number = 2
	pbWatchEventType         protowire.Number = 1 // metav1.WatchEvent
	pbWatchEventObject       protowire.Number = 2
	pbRawExtensionRaw        protowire.Number = 1 // runtime.RawExtension
	pbPartialMetadata        protowire.Number = 1 // metav1.PartialObjectMetadata
	pbListMetadata           protowire.Number = 1 // metav1.PartialObjectMetadataList
	pbListItems              protowire.Number = 2
	pbListMetaRV             protowire.Number = 2 // metav1.ListMeta
	pbListMetaContinue       protowire.Number = 3
	pbListMetaRemaining      protowire.Number = 4
	pbMetaName               protowire.Number = 1 // metav1.ObjectMeta
	pbMetaNamespace          protowire.Number = 3
	pbMetaResourceVersion    protowire.Number = 6
	pbMetaDeletionTimestamp  protowire.Number = 9
	pbMetaLabels             protowire.Number = 11
	pbMetaAnnotations        protowire.Number = 12
	pbMapKey                 protowire.Number = 1 // a map entry
	pbMapValue               protowire.Number = 2
	pbTimeSeconds            protowire.Number = 1 // metav1.Time
)

// protoMagic starts every object the API server encodes as protobuf
// (k8s.io/apimachinery/pkg/runtime/serializer/protobuf).
var protoMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// skimmedVersion is the only version of the metadata kinds skimmed.
var skimmedVersion = metav1.SchemeGroupVersion.String()

// errNotSkimmed sends a message to the standard decoder.
var errNotSkimmed = errors.New("not a message the skimmer reads")

// keptAnnotation reports whether the index or the reflector reads the
// annotation k: the ones that placement writes, and the bookmark that ends
// a streamed list.
func keptAnnotation(k []byte) bool {
	switch string(k) { // no allocation: the compiler compares the bytes
	case placement.AssignedShardAnnotation, placement.AssignedAtAnnotation, placement.WeightAnnotation, metav1.InitialEventsAnnotationKey:
		return true
	}
	return false
}

// field is one field of a message: its number, and for a length-delimited
// one its bytes, for a varint its value.
type field struct {
	num   protowire.Number
	bytes []byte
	value uint64
	typ   protowire.Type
}

// eachField calls f with each field of the message b, in order; fixed-width
// and group fields are stepped over, as none of the messages read here has
// one that is kept.
func eachField(b []byte, f func(field) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		fl := field{num: num, typ: typ}
		switch typ {
		case protowire.BytesType:
			fl.bytes, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			fl.value, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if typ != protowire.BytesType && typ != protowire.VarintType {
			continue
		}
		if err := f(fl); err != nil {
			return err
		}
	}
	return nil
}

// str is a length-delimited field as a string; a field of another wire
// type is malformed.
func (f field) str() (string, error) {
	if f.typ != protowire.BytesType {
		return "", fmt.Errorf("field %d: wire type %d, not bytes", f.num, f.typ)
	}
	return string(f.bytes), nil
}

// message is a length-delimited field's bytes, for an embedded message.
func (f field) message() ([]byte, error) {
	if f.typ != protowire.BytesType {
		return nil, fmt.Errorf("field %d: wire type %d, not a message", f.num, f.typ)
	}
	return f.bytes, nil
}

// unwrap reads the envelope of a protobuf-encoded object: its TypeMeta and
// its raw message. An encoded (compressed) body is not skimmed.
func unwrap(data []byte) (metav1.TypeMeta, []byte, error) {
	var tm metav1.TypeMeta
	var raw []byte
	rest, ok := bytes.CutPrefix(data, protoMagic)
	if !ok {
		return tm, nil, errNotSkimmed
	}
	err := eachField(rest, func(f field) error {
		var err error
		switch f.num {
		case pbUnknownTypeMeta:
			var b []byte
			if b, err = f.message(); err == nil {
				err = eachField(b, func(f field) error {
					var err error
					switch f.num {
					case pbTypeMetaAPIVersion:
						tm.APIVersion, err = f.str()
					case pbTypeMetaKind:
						tm.Kind, err = f.str()
					}
					return err
				})
			}
		case pbUnknownRaw:
			raw, err = f.message()
		case pbUnknownContentEncoding:
			if len(f.bytes) > 0 {
				err = errNotSkimmed
			}
		}
		return err
	})
	return tm, raw, err
}

// skimObjectMeta reads into m the metadata the index reads: name,
// namespace, resourceVersion, deletion timestamp, labels and the kept
// annotations.
func skimObjectMeta(b []byte, m *metav1.ObjectMeta) error {
	return eachField(b, func(f field) error {
		var err error
		switch f.num {
		case pbMetaName:
			m.Name, err = f.str()
		case pbMetaNamespace:
			m.Namespace, err = f.str()
		case pbMetaResourceVersion:
			m.ResourceVersion, err = f.str()
		case pbMetaDeletionTimestamp:
			m.DeletionTimestamp, err = skimTime(f)
		case pbMetaLabels:
			if m.Labels == nil {
				m.Labels = map[string]string{}
			}
			err = skimMapEntry(f, m.Labels, nil)
		case pbMetaAnnotations:
			err = skimMapEntry(f, nil, func(k []byte) map[string]string {
				if !keptAnnotation(k) {
					return nil
				}
				if m.Annotations == nil {
					m.Annotations = map[string]string{}
				}
				return m.Annotations
			})
		}
		return err
	})
}

// skimMapEntry reads a map entry into into, or into what to returns for
// its key (nil: not kept).
func skimMapEntry(f field, into map[string]string, to func(k []byte) map[string]string) error {
	b, err := f.message()
	if err != nil {
		return err
	}
	var k, v []byte
	if err := eachField(b, func(f field) error {
		var err error
		switch f.num {
		case pbMapKey:
			k, err = f.message()
		case pbMapValue:
			v, err = f.message()
		}
		return err
	}); err != nil {
		return err
	}
	if to != nil {
		into = to(k)
	}
	if into != nil {
		into[string(k)] = string(v)
	}
	return nil
}

// skimTime reads a metav1.Time as its Unmarshal does: an empty message
// (how the zero time and the epoch are both encoded) is the zero time,
// and the nanoseconds are dropped, as JSON has none.
func skimTime(f field) (*metav1.Time, error) {
	b, err := f.message()
	if err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return &metav1.Time{}, nil
	}
	var secs int64
	if err := eachField(b, func(f field) error {
		if f.num == pbTimeSeconds {
			secs = int64(f.value) //nolint:gosec // protobuf's int64 is a varint of its two's complement
		}
		return nil
	}); err != nil {
		return nil, err
	}
	t := metav1.Unix(secs, 0)
	return &t, nil
}

// skimPartial reads a PartialObjectMetadata message.
func skimPartial(b []byte, o *metav1.PartialObjectMetadata) error {
	return eachField(b, func(f field) error {
		if f.num != pbPartialMetadata {
			return nil
		}
		m, err := f.message()
		if err != nil {
			return err
		}
		return skimObjectMeta(m, &o.ObjectMeta)
	})
}

// skimPartialList reads a PartialObjectMetadataList message.
func skimPartialList(b []byte, l *metav1.PartialObjectMetadataList) error {
	return eachField(b, func(f field) error {
		switch f.num {
		case pbListMetadata:
			m, err := f.message()
			if err != nil {
				return err
			}
			return eachField(m, func(f field) error {
				var err error
				switch f.num {
				case pbListMetaRV:
					l.ResourceVersion, err = f.str()
				case pbListMetaContinue:
					l.Continue, err = f.str()
				case pbListMetaRemaining:
					n := int64(f.value) //nolint:gosec // as in skimTime
					l.RemainingItemCount = &n
				}
				return err
			})
		case pbListItems:
			m, err := f.message()
			if err != nil {
				return err
			}
			l.Items = append(l.Items, metav1.PartialObjectMetadata{})
			return skimPartial(m, &l.Items[len(l.Items)-1])
		}
		return nil
	})
}

// metaCodec decodes protobuf PartialObjectMetadata and
// PartialObjectMetadataList by skimming them; anything else (a Status)
// goes to the standard decoder. It encodes nothing: its client only reads.
type metaCodec struct{ standard runtime.Serializer }

// Decode implements runtime.Decoder.
func (c metaCodec) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	tm, raw, err := unwrap(data)
	if err != nil {
		return c.standard.Decode(data, defaults, into)
	}
	var out runtime.Object
	switch o := skimTarget(tm, into).(type) {
	case *metav1.PartialObjectMetadata:
		*o = metav1.PartialObjectMetadata{TypeMeta: tm}
		err = skimPartial(raw, o)
		out = o
	case *metav1.PartialObjectMetadataList:
		*o = metav1.PartialObjectMetadataList{TypeMeta: tm}
		err = skimPartialList(raw, o)
		out = o
	default:
		return c.standard.Decode(data, defaults, into)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("decoding %s: %w", tm.Kind, err)
	}
	gvk := tm.GroupVersionKind()
	return out, &gvk, nil
}

// skimTarget is what an object of kind tm is skimmed into: into, or a new
// object if into is nil; nil if the kind is not skimmed or into is of
// another type. Only meta.k8s.io/v1 is skimmed: the standard decoder
// decodes another version, or none, into another type or refuses it.
func skimTarget(tm metav1.TypeMeta, into runtime.Object) runtime.Object {
	if tm.APIVersion != skimmedVersion {
		return nil
	}
	switch tm.Kind {
	case "PartialObjectMetadata":
		if o, ok := into.(*metav1.PartialObjectMetadata); ok {
			return o
		}
		if into == nil {
			return &metav1.PartialObjectMetadata{}
		}
	case "PartialObjectMetadataList":
		if l, ok := into.(*metav1.PartialObjectMetadataList); ok {
			return l
		}
		if into == nil {
			return &metav1.PartialObjectMetadataList{}
		}
	}
	return nil
}

// Encode implements runtime.Encoder.
func (c metaCodec) Encode(runtime.Object, io.Writer) error { return errReadOnly }

// Identifier implements runtime.Encoder.
func (metaCodec) Identifier() runtime.Identifier { return "shardkeeper-metadata-protobuf" }

// metaEventCodec decodes the frames of a protobuf watch: each a
// WatchEvent without the envelope. The event's object is not copied: the
// watch decoder decodes it before it reads the next frame into the same
// buffer, and nothing else holds the event.
type metaEventCodec struct{ standard runtime.Serializer }

// Decode implements runtime.Decoder.
func (c metaEventCodec) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	e, ok := into.(*metav1.WatchEvent)
	if !ok {
		return c.standard.Decode(data, defaults, into)
	}
	*e = metav1.WatchEvent{}
	err := eachField(data, func(f field) error {
		var err error
		switch f.num {
		case pbWatchEventType:
			e.Type, err = f.str()
		case pbWatchEventObject:
			var b []byte
			if b, err = f.message(); err == nil {
				err = eachField(b, func(f field) error {
					var err error
					if f.num == pbRawExtensionRaw {
						e.Object.Raw, err = f.message()
					}
					return err
				})
			}
		}
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("decoding a watch event: %w", err)
	}
	return e, nil, nil
}

// Encode implements runtime.Encoder.
func (c metaEventCodec) Encode(runtime.Object, io.Writer) error { return errReadOnly }

// Identifier implements runtime.Encoder.
func (metaEventCodec) Identifier() runtime.Identifier { return "shardkeeper-metadata-protobuf-watch" }

// metaSerializer is client-go's metadata client's serializer with the
// protobuf decoders replaced by the skimmers.
type metaSerializer struct{ runtime.NegotiatedSerializer }

// SupportedMediaTypes implements runtime.NegotiatedSerializer.
func (s metaSerializer) SupportedMediaTypes() []runtime.SerializerInfo {
	infos := s.NegotiatedSerializer.SupportedMediaTypes()
	out := make([]runtime.SerializerInfo, 0, len(infos))
	for _, info := range infos {
		if info.MediaType == runtime.ContentTypeProtobuf {
			info.Serializer = metaCodec{standard: info.Serializer}
			if info.StreamSerializer != nil {
				stream := *info.StreamSerializer
				stream.Serializer = metaEventCodec{standard: stream.Serializer}
				info.StreamSerializer = &stream
			}
		}
		out = append(out, info)
	}
	return out
}

// The Accept headers of client-go's metadata client.
const (
	acceptPartial     = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
	acceptPartialList = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
)

// metaClientFor returns a client that reads objects as the metadata client
// does, through metaSerializer.
func metaClientFor(cfg *rest.Config) (*rest.RESTClient, error) {
	c := metadata.ConfigFor(cfg)
	c.NegotiatedSerializer = metaSerializer{metainternalversionscheme.Codecs.WithoutConversion()}
	client, err := rest.UnversionedRESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("metadata client: %w", err)
	}
	return client, nil
}

// metaListWatch lists and watches gvr's objects' metadata, skimmed.
func metaListWatch(client rest.Interface, gvr schema.GroupVersionResource) *cache.ListWatch {
	base := path.Join("/apis", gvr.Group, gvr.Version, gvr.Resource)
	if gvr.Group == "" {
		base = path.Join("/api", gvr.Version, gvr.Resource)
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			list := &metav1.PartialObjectMetadataList{}
			req := client.Get().AbsPath(base).SetHeader("Accept", acceptPartialList).VersionedParams(&o, metav1.ParameterCodec)
			err := readList(ctx, req, func(body []byte) error { return decodeMetaList(body, list) })
			if err != nil {
				return nil, fmt.Errorf("listing %s: %w", gvr.Resource, err)
			}
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.Watch = true
			return client.Get().AbsPath(base).SetHeader("Accept", acceptPartial).
				VersionedParams(&o, metav1.ParameterCodec).Watch(ctx)
		},
	}
}

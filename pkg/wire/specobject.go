package wire

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	sjson "sigs.k8s.io/json"

	"github.com/shardkeeper/shardkeeper/pkg/placement"
)

// SpecObject is what is decoded of an object whose decisions read its spec:
// the metadata that the metadata-only watch would bring, and the few spec
// fields that carry shard labels and references. Custom resources are
// served as whole JSON objects only; decoding them into this type, rather
// than into unstructured maps, skips every other field (values, status,
// managed fields) without keeping any of it.
type SpecObject struct {
	metav1.TypeMeta `json:",inline"`
	// ObjectMeta is filled from Metadata once decoded, for the reflector
	// and the index.
	metav1.ObjectMeta `json:"-"`
	Metadata          SpecMeta   `json:"metadata"`
	Spec              SpecFields `json:"spec"`
}

// SpecMeta is the metadata that the index reads.
type SpecMeta struct {
	Name              string            `json:"name"`
	Namespace         string            `json:"namespace"`
	ResourceVersion   string            `json:"resourceVersion"`
	Labels            map[string]string `json:"labels"`
	Annotations       MetaAnnotations   `json:"annotations"`
	DeletionTimestamp *metav1.Time      `json:"deletionTimestamp"`
}

// MetaAnnotations are the annotations that the index and the reflector
// read; the others (a last-applied configuration, most of an object's
// metadata) are skipped as they are decoded.
type MetaAnnotations struct {
	AssignedShard *string `json:"shardkeeper.io/assigned-shard"`
	AssignedAt    *string `json:"shardkeeper.io/assigned-at"`
	Weight        *string `json:"shardkeeper.io/weight"`
	// InitialEventsEnd marks the bookmark that ends a streamed list.
	InitialEventsEnd *string `json:"k8s.io/initial-events-end"`
}

func (a MetaAnnotations) asMap() map[string]string {
	out := map[string]string{}
	for k, v := range map[string]*string{placement.AssignedShardAnnotation: a.AssignedShard, placement.AssignedAtAnnotation: a.AssignedAt,
		placement.WeightAnnotation: a.Weight, metav1.InitialEventsAnnotationKey: a.InitialEventsEnd} {
		if v != nil {
			out[k] = *v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// SpecFields are the spec fields of every kind that has them: a
// HelmRelease's chart template and chartRef, a HelmChart's sourceRef, a
// HelmOp's labels.
type SpecFields struct {
	Chart     *ChartTemplate    `json:"chart"`
	ChartRef  *SourceRef        `json:"chartRef"`
	SourceRef *SourceRef        `json:"sourceRef"`
	Labels    map[string]string `json:"labels"`
}

// ChartTemplate is a HelmRelease's spec.chart.
type ChartTemplate struct {
	Metadata *struct {
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		SourceRef SourceRef `json:"sourceRef"`
	} `json:"spec"`
}

// UnmarshalJSON implements json.Unmarshaler. A HelmChart's spec.chart is
// not a template but the name of its chart, which nothing reads: it must
// not make every HelmChart unreadable, and is read as an empty template.
func (c *ChartTemplate) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return nil
	}
	type template ChartTemplate // without this method
	return sjson.UnmarshalCaseSensitivePreserveInts(b, (*template)(c))
}

// SourceRef is a Flux cross-object reference; Namespace is empty in a
// HelmChart's, which is always its own namespace's.
type SourceRef struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

// specList is a list response.
type specList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []SpecObject `json:"items"`
}

// fill sets ObjectMeta from Metadata.
func (o *SpecObject) fill() {
	m := o.Metadata
	o.ObjectMeta = metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, ResourceVersion: m.ResourceVersion,
		Labels: m.Labels, Annotations: m.Annotations.asMap(), DeletionTimestamp: m.DeletionTimestamp}
}

// Partial is the object as the metadata-only watch would bring it.
func (o *SpecObject) Partial() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: o.TypeMeta, ObjectMeta: o.ObjectMeta}
}

// DeepCopyObject implements runtime.Object.
func (o *SpecObject) DeepCopyObject() runtime.Object {
	c := *o
	meta := o.ObjectMeta
	c.ObjectMeta = *meta.DeepCopy()
	c.Metadata.Labels = maps.Clone(o.Metadata.Labels)
	c.Spec.Labels = maps.Clone(o.Spec.Labels)
	if o.Spec.Chart != nil {
		chart := *o.Spec.Chart
		if chart.Metadata != nil {
			md := *chart.Metadata
			md.Labels = maps.Clone(md.Labels)
			chart.Metadata = &md
		}
		c.Spec.Chart = &chart
	}
	if o.Spec.ChartRef != nil {
		ref := *o.Spec.ChartRef
		c.Spec.ChartRef = &ref
	}
	if o.Spec.SourceRef != nil {
		ref := *o.Spec.SourceRef
		c.Spec.SourceRef = &ref
	}
	return &c
}

// DeepCopyObject implements runtime.Object.
func (l *specList) DeepCopyObject() runtime.Object {
	c := *l
	c.Items = make([]SpecObject, len(l.Items))
	for i := range l.Items {
		c.Items[i] = *l.Items[i].DeepCopyObject().(*SpecObject)
	}
	return &c
}

// SpecCodec decodes the API server's JSON as the spec client does: an
// object into *SpecObject, and lists, watch events and Statuses. The index's
// tests and benchmarks decode through it.
var SpecCodec runtime.Decoder = specCodec{}

// specCodec decodes the API server's JSON into SpecObject, specList,
// or whatever type it is asked for (a watch event, a Status). It encodes
// nothing: its client only reads.
type specCodec struct{}

var errReadOnly = errors.New("the spec client only reads")

// Decode implements runtime.Decoder. Objects, lists and watch events are
// skimmed (see skim); anything else, a Status, is decoded whole.
func (specCodec) Decode(data []byte, _ *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if into == nil {
		kind, err := skimKind(data)
		if err != nil {
			return nil, nil, fmt.Errorf("decoding the kind: %w", err)
		}
		switch {
		case kind == "Status":
			into = &metav1.Status{}
		case strings.HasSuffix(kind, "List"):
			into = &specList{}
		default:
			into = &SpecObject{}
		}
	}
	var err error
	switch o := into.(type) {
	case *SpecObject:
		err = skimObject(data, o)
	case *specList:
		err = skimList(data, o)
	case *metav1.WatchEvent:
		err = skimEvent(data, o)
	default:
		err = sjson.UnmarshalCaseSensitivePreserveInts(data, into)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("decoding %T: %w", into, err)
	}
	gvk := into.GetObjectKind().GroupVersionKind()
	return into, &gvk, nil
}

// Encode implements runtime.Encoder.
func (specCodec) Encode(runtime.Object, io.Writer) error { return errReadOnly }

// Identifier implements runtime.Encoder.
func (specCodec) Identifier() runtime.Identifier { return "shardkeeper-spec-json" }

// specSerializer negotiates JSON only, decoded by specCodec.
type specSerializer struct{}

// SupportedMediaTypes implements runtime.NegotiatedSerializer.
func (specSerializer) SupportedMediaTypes() []runtime.SerializerInfo {
	return []runtime.SerializerInfo{{
		MediaType: runtime.ContentTypeJSON, MediaTypeType: "application", MediaTypeSubType: "json",
		EncodesAsText: true, Serializer: specCodec{},
		StreamSerializer: &runtime.StreamSerializerInfo{EncodesAsText: true, Serializer: specCodec{}, Framer: skimFramer{}},
	}}
}

// EncoderForVersion implements runtime.NegotiatedSerializer.
func (specSerializer) EncoderForVersion(e runtime.Encoder, _ runtime.GroupVersioner) runtime.Encoder {
	return e
}

// DecoderToVersion implements runtime.NegotiatedSerializer.
func (specSerializer) DecoderToVersion(d runtime.Decoder, _ runtime.GroupVersioner) runtime.Decoder {
	return d
}

// specClientFor returns a client that reads objects as SpecObject.
func specClientFor(cfg *rest.Config) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeJSON
	c.NegotiatedSerializer = specSerializer{}
	client, err := rest.UnversionedRESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("spec client: %w", err)
	}
	return client, nil
}

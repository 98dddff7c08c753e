package mapped

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
)

// specObject is what is decoded of an object whose decisions read its spec:
// the metadata that the metadata-only watch would bring, and the few spec
// fields that carry shard labels and references. Custom resources are
// served as whole JSON objects only; decoding them into this type, rather
// than into unstructured maps, skips every other field (values, status,
// managed fields) without keeping any of it.
type specObject struct {
	metav1.TypeMeta `json:",inline"`
	// ObjectMeta is filled from Metadata once decoded, for the reflector
	// and the index.
	metav1.ObjectMeta `json:"-"`
	Metadata          specMeta   `json:"metadata"`
	Spec              specFields `json:"spec"`
}

// specMeta is the metadata that the index reads.
type specMeta struct {
	Name              string            `json:"name"`
	Namespace         string            `json:"namespace"`
	ResourceVersion   string            `json:"resourceVersion"`
	Labels            map[string]string `json:"labels"`
	Annotations       metaAnnotations   `json:"annotations"`
	DeletionTimestamp *metav1.Time      `json:"deletionTimestamp"`
}

// metaAnnotations are the annotations that the index and the reflector
// read; the others (a last-applied configuration, most of an object's
// metadata) are skipped as they are decoded.
type metaAnnotations struct {
	AssignedShard *string `json:"shardkeeper.io/assigned-shard"`
	AssignedAt    *string `json:"shardkeeper.io/assigned-at"`
	Weight        *string `json:"shardkeeper.io/weight"`
	// InitialEventsEnd marks the bookmark that ends a streamed list.
	InitialEventsEnd *string `json:"k8s.io/initial-events-end"`
}

func (a metaAnnotations) asMap() map[string]string {
	out := map[string]string{}
	for k, v := range map[string]*string{AssignedShardAnnotation: a.AssignedShard, AssignedAtAnnotation: a.AssignedAt,
		weightAnnotation: a.Weight, metav1.InitialEventsAnnotationKey: a.InitialEventsEnd} {
		if v != nil {
			out[k] = *v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// specFields are the spec fields of every kind that has them: a
// HelmRelease's chart template and chartRef, a HelmChart's sourceRef, a
// HelmOp's labels.
type specFields struct {
	Chart     *chartTemplate    `json:"chart"`
	ChartRef  *sourceRef        `json:"chartRef"`
	SourceRef *sourceRef        `json:"sourceRef"`
	Labels    map[string]string `json:"labels"`
}

// chartTemplate is a HelmRelease's spec.chart.
type chartTemplate struct {
	Metadata *struct {
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		SourceRef sourceRef `json:"sourceRef"`
	} `json:"spec"`
}

// UnmarshalJSON implements json.Unmarshaler. A HelmChart's spec.chart is
// not a template but the name of its chart, which nothing reads: it must
// not make every HelmChart unreadable, and is read as an empty template.
func (c *chartTemplate) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return nil
	}
	type template chartTemplate // without this method
	return sjson.UnmarshalCaseSensitivePreserveInts(b, (*template)(c))
}

// sourceRef is a Flux cross-object reference; Namespace is empty in a
// HelmChart's, which is always its own namespace's.
type sourceRef struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

// specObjectList is a list response.
type specObjectList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []specObject `json:"items"`
}

// fill sets ObjectMeta from Metadata.
func (o *specObject) fill() {
	m := o.Metadata
	o.ObjectMeta = metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, ResourceVersion: m.ResourceVersion,
		Labels: m.Labels, Annotations: m.Annotations.asMap(), DeletionTimestamp: m.DeletionTimestamp}
}

// partial is the object as the metadata-only watch would bring it.
func (o *specObject) partial() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: o.TypeMeta, ObjectMeta: o.ObjectMeta}
}

// DeepCopyObject implements runtime.Object.
func (o *specObject) DeepCopyObject() runtime.Object {
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
func (l *specObjectList) DeepCopyObject() runtime.Object {
	c := *l
	c.Items = make([]specObject, len(l.Items))
	for i := range l.Items {
		c.Items[i] = *l.Items[i].DeepCopyObject().(*specObject)
	}
	return &c
}

// specCodec decodes the API server's JSON into specObject, specObjectList,
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
			into = &specObjectList{}
		default:
			into = &specObject{}
		}
	}
	var err error
	switch o := into.(type) {
	case *specObject:
		err = skimObject(data, o)
	case *specObjectList:
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

// specClientFor returns a client that reads objects as specObject.
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

package wire

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	sjson "sigs.k8s.io/json"

	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// A page of 500 objects is about a megabyte. client-go's Do reads each
// response into a new slice grown by appending, which the runtime zeroes
// and the collector must then make up for: in a profile of a start-up at
// 100,000 objects that reading was 44 % of the daemon's CPU (zeroing
// alone 26 %, and most of the rest assists of the collector, whose
// target is low while the lists arrive). The list's body is read into a
// buffer used again by the next page instead: nothing decoded from it
// keeps a reference to it, as the skimmers and the standard decoders copy
// what they keep.
var listBodies = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBody is the largest buffer kept for the next list: an API
// server that ignores the page size (one that serves the list from its
// cache whole) sends every object in one body, and that is not kept.
const maxPooledBody = 16 << 20

// readList sends req, a list, and hands its response's body to decode; the
// body is valid only until decode returns. A response other than a 2xx is
// the error client-go's Do returns for it (a *StatusError where the body
// is a Status), so the reflector sees an expired continue as before.
func readList(ctx context.Context, req *rest.Request, decode func([]byte) error) error {
	body, err := req.Stream(ctx)
	if err != nil {
		return err
	}
	defer body.Close()
	buf, ok := listBodies.Get().(*bytes.Buffer)
	if !ok {
		buf = new(bytes.Buffer)
	}
	buf.Reset()
	defer func() {
		if buf.Cap() <= maxPooledBody {
			listBodies.Put(buf)
		}
	}()
	if _, err := buf.ReadFrom(body); err != nil {
		return fmt.Errorf("reading the list: %w", err)
	}
	return decode(buf.Bytes())
}

// metaListCodec skims a protobuf PartialObjectMetadataList, as the
// metadata client's negotiated decoder does.
var metaListCodec = sync.OnceValue(func() runtime.Decoder {
	info, ok := runtime.SerializerInfoForMediaType(metainternalversionscheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		// The metadata scheme registers protobuf; without it, anything
		// not skimmed is refused rather than decoded by nothing.
		return metaCodec{standard: runtime.NoopDecoder{}}
	}
	return metaCodec{standard: info.Serializer}
})

// decodeMetaList decodes a metadata list's body: protobuf, skimmed, or
// JSON, the other type acceptPartialList allows. The body's content type
// is not at hand (Stream returns the body alone); protobuf's magic prefix
// tells them apart, as it cannot begin JSON.
func decodeMetaList(data []byte, list *metav1.PartialObjectMetadataList) error {
	if bytes.HasPrefix(data, protoMagic) {
		if _, _, err := metaListCodec().Decode(data, nil, list); err != nil {
			return fmt.Errorf("decoding the list: %w", err)
		}
		return nil
	}
	if err := sjson.UnmarshalCaseSensitivePreserveInts(data, list); err != nil {
		return fmt.Errorf("decoding the list: %w", err)
	}
	return nil
}

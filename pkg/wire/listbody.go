package wire

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"

	sjson "sigs.k8s.io/json"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
// tells them apart, as it cannot begin JSON. A body that is not a list is
// refused as the metadata client refuses it (see listOnly).
func decodeMetaList(data []byte, list *metav1.PartialObjectMetadataList) error {
	if bytes.HasPrefix(data, protoMagic) {
		out, _, err := metaListCodec().Decode(data, nil, nil)
		if err != nil {
			return fmt.Errorf("decoding the list: %w", err)
		}
		switch o := out.(type) {
		case *metav1.PartialObjectMetadataList:
			*list = *o
			return nil
		case *metav1.Status:
			return statusError(o)
		default:
			return fmt.Errorf("decoding the list: the body is a %T, not a list", out)
		}
	}
	if err := sjson.UnmarshalCaseSensitivePreserveInts(data, list); err != nil {
		return fmt.Errorf("decoding the list: %w", err)
	}
	return listOnly(data, list.Kind)
}

// listOnly refuses a JSON list response that is not a list, by its kind.
// The list is read with Stream, which returns a 2xx body as it is, where
// client-go's Do makes a Status in it the request's error
// (rest.Request.transformResponse) and the metadata and dynamic clients
// refuse anything else that is not a list. Decoded as a list, it would be
// an empty one, and the reflector would empty the cache of that kind: the
// counts would show none of its objects.
func listOnly(data []byte, kind string) error {
	if kind == "Status" {
		var st metav1.Status
		if err := sjson.UnmarshalCaseSensitivePreserveInts(data, &st); err != nil {
			return fmt.Errorf("decoding the Status the list request returned: %w", err)
		}
		return statusError(&st)
	}
	if !strings.HasSuffix(kind, "List") {
		return fmt.Errorf("decoding the list: the body is a %q, not a list", kind)
	}
	return nil
}

// statusError is the error of a Status a list request returned with a 2xx
// code: its own for a failure, as client-go makes it, and one that says so
// otherwise (client-go would hand the Status on as an empty list).
func statusError(st *metav1.Status) error {
	if st.Status != metav1.StatusSuccess {
		return apierrors.FromObject(st)
	}
	return fmt.Errorf("decoding the list: the body is a %s Status, not a list", st.Status)
}

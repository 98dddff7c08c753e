package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	sjson "sigs.k8s.io/json"
)

// The wire code is checked against apimachinery's own decoders, on the
// same bytes. Each target reads the first byte of its input as a mode.
// Built: the rest of the input decides an object (or list, or watch event)
// of a mapped kind, which apimachinery encodes; this is what an API server
// sends, so the skimmer must read it, and read exactly what the standard
// decoder reads of every field the daemon reads. Raw: the rest of the
// input is the encoded message itself. Where the standard decoder reads it,
// the skimmer must read the same or refuse it; where the standard decoder
// refuses it, the skimmer must only not panic. A refusal is logged with
// the start of its input; those the fuzzing has met are explained at
// agree.

// choices hands out a fuzz input's bytes as the decisions that build an
// object. Once they run out, every decision takes its first option and no
// rare one is taken, so that any input builds something, and soon.
type choices struct {
	b []byte
	// odd is set when what was built is not what an API server serves: a
	// repeated key, a value of the wrong type. Both decoders must still
	// agree on it, but the skimmer may refuse it.
	odd bool
}

func (c *choices) byte() byte {
	if len(c.b) == 0 {
		return 0
	}
	v := c.b[0]
	c.b = c.b[1:]
	return v
}

// intn returns a number below n, which is at most 1<<16.
func (c *choices) intn(n int) int {
	if n <= 1 {
		return 0
	}
	v := int(c.byte())
	if n > 256 {
		v = v<<8 | int(c.byte())
	}
	return v % n
}

// rare is true about once in n.
func (c *choices) rare(n int) bool { return c.intn(n) == n-1 }

func (c *choices) pick(words ...string) string { return words[c.intn(len(words))] }

// take returns the next n bytes, or what is left of them.
func (c *choices) take(n int) []byte {
	n = min(n, len(c.b))
	v := c.b[:n:n]
	c.b = c.b[n:]
	return v
}

func (c *choices) uint64() uint64 {
	var v uint64
	for _, b := range c.take(8) {
		v = v<<8 | uint64(b)
	}
	return v
}

// str returns a string for a field: empty, one of words (what the daemon
// looks for), any bytes at all, or now and then a huge value.
func (c *choices) str(words ...string) string {
	switch v := c.byte(); {
	case v < 48:
		return ""
	case v < 160 && len(words) > 0:
		return words[int(v)%len(words)]
	case v < 176 && len(words) > 0:
		return words[int(v)%len(words)] + string(c.take(c.intn(8)))
	case v == 255:
		return c.huge()
	default:
		return string(c.take(c.intn(40)))
	}
}

// huge returns a value of up to 96 KB: past the skimming framer's read
// size, and past any buffer a decoder starts with.
func (c *choices) huge() string {
	piece := c.take(1 + c.intn(8))
	if len(piece) == 0 {
		piece = []byte("x")
	}
	return strings.Repeat(string(piece), 1+(1+c.intn(1<<16))*3/2/len(piece))
}

// What the daemon reads, for the fuzzer to start from: the kept
// annotations with near misses, and the shard labels of the presets.
var (
	fuzzNames       = []string{"web", "podinfo", "fleet-local", "flux-system", "a/b", "é"}
	fuzzLabelKeys   = []string{"fleet.cattle.io/shard-ref", "sharding.fluxcd.io/key", "helm.toolkit.fluxcd.io/name", "app"}
	fuzzAnnotations = []string{"shardkeeper.io/assigned-shard", "shardkeeper.io/assigned-at", "shardkeeper.io/weight",
		metav1.InitialEventsAnnotationKey, "kubectl.kubernetes.io/last-applied-configuration", "shardkeeper.io/Weight", "shardkeeper.io/weight "}
	fuzzValues = []string{"s1", "shard-007", "2026-01-01T00:00:00Z", "3", "true"}
)

// ---------------------------------------------------------------------
// Protobuf: metaCodec, metaEventCodec and decodeMetaList against the
// protobuf serializer of client-go's metadata client.

// FuzzMetaProtobuf checks the protobuf skimmer against apimachinery's
// protobuf serializer: objects (decoded into nothing, a new object, or one
// left over from an earlier decoding), lists (also through decodeMetaList)
// and watch events, whose objects are checked in turn.
func FuzzMetaProtobuf(f *testing.F) {
	info := standardProtobuf(f)
	std, stream := info.Serializer, info.StreamSerializer.Serializer
	for _, seed := range metaSeeds(f, stream) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkMetaInput(t, std, stream, data) })
}

// checkMetaInput is FuzzMetaProtobuf's check of one input.
func checkMetaInput(t *testing.T, std, stream runtime.Serializer, data []byte) {
	t.Helper()
	c := &choices{b: data}
	mode := c.byte()
	raw := mode&0x80 != 0
	into := c.intn(3)
	switch (mode & 0x7f) % 3 {
	case 0:
		msg := append(bytes.Clone(protoMagic), c.b...)
		if !raw {
			msg = c.scramble(encode(t, c.partial()), pbObjectShape)
		}
		checkMetaObject(t, std, msg, partialInto[into], !raw)
	case 1:
		msg := append(bytes.Clone(protoMagic), c.b...)
		if !raw {
			msg = c.scramble(encode(t, c.partialList()), pbListEnvelopeShape)
		}
		checkMetaObject(t, std, msg, listInto[into], !raw)
		checkDecodeMetaList(t, std, msg, !raw)
	default:
		frame := c.b
		if !raw {
			frame = c.scramble(c.metaEvent(t, stream), pbEventShape)
		}
		checkMetaEvent(t, std, stream, frame, !raw)
	}
}

// metaSeeds are built inputs, and raw ones that begin as the API server's
// messages.
func metaSeeds(tb testing.TB, stream runtime.Serializer) [][]byte {
	tb.Helper()
	list := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadataList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "7", Continue: "next"}, Items: []metav1.PartialObjectMetadata{*fullObject("a"), *fullObject("b")}}
	var event bytes.Buffer
	require.NoError(tb, stream.Encode(&metav1.WatchEvent{Type: "ADDED", Object: runtime.RawExtension{Raw: encode(tb, fullObject("e"))}}, &event))
	seeds := [][]byte{
		{0}, {1}, {2}, {0, 2}, {1, 1},
		[]byte("\x00\x01\xa0web\xff\xc0\x30\x02\x03\xff\x10\x20\x30\xa1\xa2\xa3\xa4\xa5\xa6\xa7\xa8\x03\x03\x03\x03"),
		[]byte("\x02\x00\xb0\xa0\xa1\xa2\xb3\x01\x02\x03\xff\xff\xff\x03\x03\x03\x03\x03\x03\x03\x03\x03\x03\x03"),
		[]byte("\x01\x02\x04\xa0\xa0\xa0\x03\xa5\xa1\x02\xa2\xa2\xa2\xa2\x03\x03\x03\x03\x03\x03\x03\x03\x03"),
		append([]byte{0x80, 0}, encode(tb, fullObject("o"))[len(protoMagic):]...),
		append([]byte{0x80, 2}, encode(tb, fullObject("o"))[len(protoMagic):]...),
		append([]byte{0x81, 1}, encode(tb, list)[len(protoMagic):]...),
		append([]byte{0x82, 0}, event.Bytes()...),
	}
	return seeds
}

// partial is an object as the metadata client lists it.
func (c *choices) partial() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: c.partialTypeMeta("PartialObjectMetadata"), ObjectMeta: c.objectMeta()}
}

// partialTypeMeta is mostly what the API server sends; the other versions
// the standard decoder decodes into another type or refuses, and the
// skimmer hands to it.
func (c *choices) partialTypeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: c.pick("meta.k8s.io/v1", "meta.k8s.io/v1", "meta.k8s.io/v1", "meta.k8s.io/v1beta1", "v1", ""), Kind: kind}
}

func (c *choices) partialList() *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{TypeMeta: c.partialTypeMeta("PartialObjectMetadataList"),
		ListMeta: metav1.ListMeta{ResourceVersion: c.str("1", "42"), Continue: c.str("token")}}
	if c.intn(2) == 1 {
		n := int64(c.uint64())
		l.RemainingItemCount = &n
	}
	n := c.intn(4)
	if c.rare(16) {
		n = c.intn(64)
	}
	for range n {
		l.Items = append(l.Items, metav1.PartialObjectMetadata{ObjectMeta: c.objectMeta()})
	}
	return l
}

// objectMeta is metadata with what the skimmer reads and, half the time,
// everything it steps over.
func (c *choices) objectMeta() metav1.ObjectMeta {
	m := metav1.ObjectMeta{
		Name: c.str(fuzzNames...), Namespace: c.str(fuzzNames...), ResourceVersion: c.str("1", "42", "18446744073709551615"),
		DeletionTimestamp: c.protoTime(), Labels: c.strMap(fuzzLabelKeys, fuzzValues), Annotations: c.strMap(fuzzAnnotations, fuzzValues),
	}
	if c.intn(2) == 0 {
		return m
	}
	m.GenerateName, m.UID, m.Generation = c.str(), types.UID(c.str()), int64(c.intn(1<<16))
	if t := c.protoTime(); t != nil {
		m.CreationTimestamp = *t
	}
	grace := int64(c.intn(256))
	m.DeletionGracePeriodSeconds = &grace
	for range c.intn(3) {
		m.Finalizers = append(m.Finalizers, c.str("finalizers.fluxcd.io"))
	}
	for range c.intn(3) {
		controller := c.intn(2) == 1
		m.OwnerReferences = append(m.OwnerReferences, metav1.OwnerReference{APIVersion: c.str(), Kind: c.str(), Name: c.str(), UID: types.UID(c.str()), Controller: &controller})
	}
	if c.intn(2) == 1 {
		m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: c.str(), Operation: metav1.ManagedFieldsOperationApply,
			APIVersion: c.str(), FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(c.str(`{"f:metadata":{}}`))}}
	}
	return m
}

// strMap returns a map of a few entries, now and then of many.
func (c *choices) strMap(keys, values []string) map[string]string {
	n := c.intn(4)
	if c.rare(16) {
		n = c.intn(400)
	}
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	for range n {
		m[c.str(keys...)] = c.str(values...)
	}
	return m
}

// protoTime returns a time as protobuf carries it: none; the zero time and
// the epoch, both an empty message; or any second.
func (c *choices) protoTime() *metav1.Time {
	switch c.intn(5) {
	case 0:
		return nil
	case 1:
		return &metav1.Time{}
	case 2:
		t := metav1.Unix(0, 0)
		return &t
	}
	t := metav1.Unix(int64(c.uint64()), int64(c.intn(1<<16)))
	return &t
}

// metaEvent is a watch event as the API server frames it for a metadata
// client: its object an encoded PartialObjectMetadata, or a Status.
func (c *choices) metaEvent(t *testing.T, stream runtime.Serializer) []byte {
	t.Helper()
	typ := c.pick("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR")
	if c.rare(8) {
		typ = c.str()
	}
	var obj runtime.Object = c.partial()
	if typ == "ERROR" {
		obj = &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure,
			Reason: metav1.StatusReasonExpired, Code: 410, Message: c.str()}
	}
	var buf bytes.Buffer
	require.NoError(t, stream.Encode(&metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: encode(t, obj)}}, &buf))
	return buf.Bytes()
}

// pbShape is what scramble knows of a message: which of its
// length-delimited fields hold strings (any bytes are another valid value)
// and which hold messages that it scrambles in turn. Its other
// length-delimited fields are messages, which it copies as they are.
type pbShape struct {
	strings  map[protowire.Number]bool
	messages map[protowire.Number]*pbShape
	// magic: the message is an encoded object, after protoMagic.
	magic bool
}

func strFields(nums ...protowire.Number) map[protowire.Number]bool {
	m := map[protowire.Number]bool{}
	for _, n := range nums {
		m[n] = true
	}
	return m
}

// The messages read here, as generated.proto declares them.
var (
	pbTimeShape  = &pbShape{}
	pbEntryShape = &pbShape{strings: strFields(pbMapKey, pbMapValue)}
	pbMetaShape  = &pbShape{strings: strFields(pbMetaName, 2, pbMetaNamespace, 4, 5, pbMetaResourceVersion, 14),
		messages: map[protowire.Number]*pbShape{8: pbTimeShape, pbMetaDeletionTimestamp: pbTimeShape, pbMetaLabels: pbEntryShape, pbMetaAnnotations: pbEntryShape}}
	pbPartialShape = &pbShape{messages: map[protowire.Number]*pbShape{pbPartialMetadata: pbMetaShape}}
	pbListShape    = &pbShape{messages: map[protowire.Number]*pbShape{
		pbListMetadata: {strings: strFields(1, pbListMetaRV, pbListMetaContinue)}, pbListItems: pbPartialShape}}
	pbObjectShape       = envelopeShape(pbPartialShape)
	pbListEnvelopeShape = envelopeShape(pbListShape)
	pbEventShape        = &pbShape{strings: strFields(pbWatchEventType), messages: map[protowire.Number]*pbShape{
		pbWatchEventObject: {messages: map[protowire.Number]*pbShape{pbRawExtensionRaw: pbObjectShape}}}}
)

func envelopeShape(raw *pbShape) *pbShape {
	return &pbShape{magic: true, strings: strFields(4), messages: map[protowire.Number]*pbShape{
		pbUnknownTypeMeta: {strings: strFields(pbTypeMetaAPIVersion, pbTypeMetaKind)}, pbUnknownRaw: raw}}
}

// pbField is one field of an encoded message: its value as encoded after
// the tag.
type pbField struct {
	num protowire.Number
	typ protowire.Type
	val []byte
}

// scramble rewrites msg, of the given shape, into another valid encoding
// that an encoder could have written or a proxy relayed: its fields in
// another order, some of them repeated with another value (the decoders
// must agree on which one counts), fields of later versions of the message.
func (c *choices) scramble(msg []byte, shape *pbShape) []byte {
	if shape.magic {
		body, ok := bytes.CutPrefix(msg, protoMagic)
		if !ok {
			return msg
		}
		plain := *shape
		plain.magic = false
		return append(bytes.Clone(protoMagic), c.scramble(body, &plain)...)
	}
	var fields []pbField
	for b := msg; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return msg
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return msg
		}
		fields = append(fields, pbField{num: num, typ: typ, val: b[n : n+m]})
		b = b[n+m:]
	}
	for i, f := range fields {
		if sub := shape.messages[f.num]; sub != nil && f.typ == protowire.BytesType {
			inner, _ := protowire.ConsumeBytes(f.val)
			fields[i].val = protowire.AppendBytes(nil, c.scramble(inner, sub))
		}
	}
	if len(fields) > 0 && c.rare(3) {
		for range 1 + c.intn(3) {
			f := fields[c.intn(len(fields))]
			f.val = c.another(f, shape)
			fields = slices.Insert(fields, c.intn(len(fields)+1), f)
		}
	}
	if c.rare(4) {
		for range 1 + c.intn(2) {
			fields = slices.Insert(fields, c.intn(len(fields)+1), c.unknownField())
		}
	}
	if c.rare(3) {
		for i := len(fields) - 1; i > 0; i-- {
			j := c.intn(i + 1)
			fields[i], fields[j] = fields[j], fields[i]
		}
	}
	out := make([]byte, 0, len(msg)+16)
	for _, f := range fields {
		out = protowire.AppendTag(out, f.num, f.typ)
		out = append(out, f.val...)
	}
	return out
}

// another returns another valid value for a field like f.
func (c *choices) another(f pbField, shape *pbShape) []byte {
	switch {
	case f.typ == protowire.VarintType:
		return protowire.AppendVarint(nil, c.uint64())
	case f.typ != protowire.BytesType:
		return f.val
	case shape.strings[f.num]:
		return protowire.AppendBytes(nil, []byte(c.str(fuzzValues...)))
	case shape.messages[f.num] != nil && c.intn(2) == 0:
		// Every field of these messages is optional: none is a valid one.
		return protowire.AppendBytes(nil, nil)
	}
	return f.val
}

// unknownField is a field that no message read here declares, of any wire
// type, as a later version of a message may carry.
func (c *choices) unknownField() pbField {
	num := protowire.Number(18 + c.intn(2000))
	switch c.intn(5) {
	case 0:
		return pbField{num, protowire.VarintType, protowire.AppendVarint(nil, c.uint64())}
	case 1:
		return pbField{num, protowire.Fixed32Type, protowire.AppendFixed32(nil, uint32(c.uint64()))}
	case 2:
		return pbField{num, protowire.Fixed64Type, protowire.AppendFixed64(nil, c.uint64())}
	case 3:
		return pbField{num, protowire.BytesType, protowire.AppendBytes(nil, []byte(c.str()))}
	}
	group := protowire.AppendTag(nil, 1, protowire.VarintType)
	group = protowire.AppendVarint(group, c.uint64())
	return pbField{num, protowire.StartGroupType, protowire.AppendTag(group, num, protowire.EndGroupType)}
}

// What an object is decoded into: nothing (a watch event's object), a new
// object (a list), or one left over from an earlier decoding, of which
// nothing may show through.
var (
	partialInto = [...]func() runtime.Object{
		func() runtime.Object { return nil },
		func() runtime.Object { return &metav1.PartialObjectMetadata{} },
		func() runtime.Object { return stalePartial() },
	}
	listInto = [...]func() runtime.Object{
		func() runtime.Object { return nil },
		func() runtime.Object { return &metav1.PartialObjectMetadataList{} },
		func() runtime.Object {
			remaining := int64(5)
			return &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{Kind: "Stale"},
				ListMeta: metav1.ListMeta{ResourceVersion: "1", Continue: "stale", RemainingItemCount: &remaining},
				Items:    []metav1.PartialObjectMetadata{*stalePartial()}}
		},
	}
)

func stalePartial() *metav1.PartialObjectMetadata {
	gone := metav1.Unix(1, 0)
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "stale/v1", Kind: "Stale"},
		ObjectMeta: metav1.ObjectMeta{Name: "stale", Namespace: "stale", ResourceVersion: "1", DeletionTimestamp: &gone,
			Labels: map[string]string{"stale": ""}, Annotations: map[string]string{"shardkeeper.io/weight": "9"}}}
}

// The protobuf skimmer parses with protowire, which keeps to the wire
// format; apimachinery's generated code reads some malformed messages all
// the same. The skimmer refuses them: none comes from an encoder.
func TestSkimmerRefusesWhatOnlyGeneratedCodeReads(t *testing.T) {
	std := standardProtobuf(t).Serializer
	tag := func(num protowire.Number, typ protowire.Type) []byte { return protowire.AppendTag(nil, num, typ) }
	entry := append(tag(pbMapKey, protowire.VarintType), 3, 'a', 'b', 'c')
	for name, meta := range map[string][]byte{
		// The generated code keeps the field number's low 32 bits: 1, the name.
		"a field number past protobuf's": append(protowire.AppendVarint(nil, (1<<32+1)<<3|uint64(protowire.BytesType)), 3, 'w', 'e', 'b'),
		"a varint past 64 bits":          append(tag(7, protowire.VarintType), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f),
		"a group ended by another field": append(tag(20, protowire.StartGroupType), tag(21, protowire.EndGroupType)...),
		// The generated code reads a length whatever the key's wire type.
		"a label's key sent as a varint": protowire.AppendBytes(tag(pbMetaLabels, protowire.BytesType), entry),
	} {
		partial := protowire.AppendBytes(tag(pbPartialMetadata, protowire.BytesType), meta)
		tm := protowire.AppendString(tag(pbTypeMetaAPIVersion, protowire.BytesType), "meta.k8s.io/v1")
		tm = protowire.AppendString(protowire.AppendTag(tm, pbTypeMetaKind, protowire.BytesType), "PartialObjectMetadata")
		data := protowire.AppendBytes(protowire.AppendTag(bytes.Clone(protoMagic), pbUnknownTypeMeta, protowire.BytesType), tm)
		data = protowire.AppendBytes(protowire.AppendTag(data, pbUnknownRaw, protowire.BytesType), partial)

		_, _, err := std.Decode(data, nil, nil)
		require.NoError(t, err, "%s: the standard decoder reads it", name)
		_, _, err = metaCodec{standard: std}.Decode(data, nil, nil)
		assert.Error(t, err, "%s: the skimmer refuses it", name)
	}
}

// checkMetaObject decodes data with the standard decoder and with the
// skimmer, each into what into returns.
func checkMetaObject(t *testing.T, std runtime.Serializer, data []byte, into func() runtime.Object, strict bool) {
	t.Helper()
	want, wantGVK, wantErr := std.Decode(data, nil, into())
	got, gotGVK, gotErr := metaCodec{standard: std}.Decode(data, nil, into())
	if !agree(t, "an object", data, wantErr, gotErr, strict) {
		return
	}
	sameMeta(t, want, got)
	assert.Equal(t, *wantGVK, *gotGVK, "the kind returned")
}

// checkDecodeMetaList checks decodeMetaList against what the metadata
// client's List does with the body: decode it as whatever it is, make a
// failed Status the error, and refuse anything but a v1 list.
func checkDecodeMetaList(t *testing.T, std runtime.Serializer, data []byte, strict bool) {
	t.Helper()
	out, _, wantErr := std.Decode(data, nil, nil)
	want, isList := out.(*metav1.PartialObjectMetadataList)
	if st, ok := out.(*metav1.Status); ok && wantErr == nil && st.Status != metav1.StatusSuccess {
		wantErr = apierrors.FromObject(st)
	} else if wantErr == nil && !isList {
		wantErr = fmt.Errorf("a %T, not a list", out)
	}
	got := &metav1.PartialObjectMetadataList{}
	gotErr := decodeMetaList(data, got)
	if !agree(t, "a list", data, wantErr, gotErr, strict) {
		return
	}
	sameMeta(t, want, got)
}

// checkMetaEvent decodes frame, a protobuf watch frame, with the standard
// stream decoder and with metaEventCodec, then the event's object.
func checkMetaEvent(t *testing.T, std, stream runtime.Serializer, frame []byte, strict bool) {
	t.Helper()
	var want metav1.WatchEvent
	_, _, wantErr := stream.Decode(frame, nil, &want)
	got := metav1.WatchEvent{Type: "stale", Object: runtime.RawExtension{Raw: []byte("stale")}}
	_, _, gotErr := metaEventCodec{standard: stream}.Decode(frame, nil, &got)
	if !agree(t, "a watch event", frame, wantErr, gotErr, strict) {
		return
	}
	assert.Equal(t, want, got, "the watch event")
	checkMetaObject(t, std, want.Object.Raw, partialInto[0], strict)
}

// sameMeta compares, of two decoded objects, what the index reads: of a
// PartialObjectMetadata the fields kept (see kept), of a list those and
// its resourceVersion, continue and remaining count. Anything else the
// skimmer hands to the standard decoder, and it must be the same.
func sameMeta(t *testing.T, want, got runtime.Object) {
	t.Helper()
	if assert.ObjectsAreEqual(want, got) {
		// Handed to the standard decoder, or nothing dropped.
		return
	}
	switch w := want.(type) {
	case *metav1.PartialObjectMetadata:
		g, ok := got.(*metav1.PartialObjectMetadata)
		if !assert.True(t, ok, "decoded as %T", got) {
			return
		}
		assert.Equal(t, kept(w), g, "the object")
	case *metav1.PartialObjectMetadataList:
		g, ok := got.(*metav1.PartialObjectMetadataList)
		if !assert.True(t, ok, "decoded as %T", got) {
			return
		}
		assert.Equal(t, w.TypeMeta, g.TypeMeta, "the list's kind")
		assert.Equal(t, metav1.ListMeta{ResourceVersion: w.ResourceVersion, Continue: w.Continue, RemainingItemCount: w.RemainingItemCount},
			g.ListMeta, "the list's metadata")
		var items []metav1.PartialObjectMetadata
		for i := range w.Items {
			items = append(items, *kept(&w.Items[i]))
		}
		assert.Equal(t, items, g.Items, "the list's items")
	default:
		assert.Equal(t, want, got)
	}
}

// agree reports whether both decoders read data, so that what they read is
// compared. A skimmer that refuses what the standard decoder reads fails
// the test where the data is what an API server sends (strict), and is
// logged otherwise. The refusals met are of malformed input that the
// standard decoders let through: protobuf that the generated code reads
// more loosely than the wire format allows (see
// TestSkimmerRefusesWhatOnlyGeneratedCodeReads), and a JSON watch stream
// whose value is not an object, which the stock framer hands on as a
// frame for the event decoder to refuse.
func agree(t *testing.T, what string, data []byte, wantErr, gotErr error, strict bool) bool {
	t.Helper()
	switch {
	case wantErr != nil:
		return false
	case gotErr == nil:
		return true
	case strict:
		t.Errorf("the skimmer refused %s that apimachinery made and reads: %v\n%q", what, gotErr, data)
	default:
		t.Logf("the skimmer refused %s that apimachinery reads: %v\n%q", what, gotErr, data[:min(len(data), 512)])
	}
	return false
}

// ---------------------------------------------------------------------
// JSON: skimObject, skimList, skimEvent and specCodec against apimachinery's
// JSON serializer decoding into the same types (sigs.k8s.io/json, as
// case-sensitive as the skimmer), and against its unstructured decoding.

// standardJSON is the JSON serializer of client-go's metadata client.
func standardJSON(tb testing.TB) runtime.Serializer {
	tb.Helper()
	info, ok := runtime.SerializerInfoForMediaType(metainternalversionscheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	require.True(tb, ok)
	return info.Serializer
}

// FuzzSpecJSON checks the JSON skimmer against apimachinery's JSON
// decoding: objects of every mapped kind (through skimObject and specCodec,
// and the paths read against unstructured decoding), lists, and watch
// events, whose objects are checked in turn.
func FuzzSpecJSON(f *testing.F) {
	std := standardJSON(f)
	for _, seed := range specSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkSpecInput(t, std, data) })
}

// checkSpecInput is FuzzSpecJSON's check of one input.
func checkSpecInput(t *testing.T, std runtime.Serializer, data []byte) {
	t.Helper()
	c := &choices{b: data}
	mode := c.byte()
	raw := mode&0x80 != 0
	doc := c.b
	switch (mode & 0x7f) % 3 {
	case 0:
		if !raw {
			doc = c.encodeJSON(t, c.jobject(c.kind()))
		}
		strict := !raw && !c.odd
		if want := checkSpecObject(t, std, doc, strict); want != nil && strict {
			checkSpecPaths(t, doc, want)
		}
		checkSpecCodec(t, std, doc, strict)
	case 1:
		if !raw {
			doc = c.encodeJSON(t, c.jlist())
		}
		checkSpecList(t, std, doc, !raw && !c.odd)
		checkSpecCodec(t, std, doc, !raw && !c.odd)
	default:
		if !raw {
			doc = c.encodeJSON(t, c.jevent())
		}
		checkSpecEvent(t, std, doc, !raw && !c.odd)
	}
}

func specSeeds() [][]byte {
	release := helmRelease("web", "s1", "s2")
	chart := `{"apiVersion":"source.toolkit.fluxcd.io/v1","kind":"HelmChart","metadata":{"name":"apps-web","namespace":"apps",` +
		`"labels":{"helm.toolkit.fluxcd.io/name":"web"}},"spec":{"chart":"podinfo","sourceRef":{"kind":"HelmRepository","name":"repo"}}}`
	escapes := `{"kind":"HelmRelease","metadata":{"name":"a\"b\\","namespace":"n\u00e9","labels":{"sharding.fluxcd.io/key":"s\u0031"},` +
		`"annotations":{"x":"]}\"{[","shardkeeper.io\/weight":"2","shardkeeper.io/assigned-at":"2026-01-01T00:00:00Z"},"deletionTimestamp":"2026-02-03T04:05:06+01:00"},` +
		`"spec":{"values":{"a":["}",{"b":"\\\""}],"n":-1.5e3,"t":true,"z":null},"chartRef":{"kind":"OCIRepository","name":"o"}}}`
	return [][]byte{
		{0}, {1}, {2}, {0, 1}, {0, 4}, {0, 6},
		[]byte("\x00\x01\x05\x02\x03\xa0web\xa1\xa2\xa3\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16"),
		[]byte("\x01\x02\x04\x01\x02\x03\xa5\xa6\xa7\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11"),
		[]byte("\x02\x03\x03\x02\x01\xb1\xb2\xb3\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12"),
		append([]byte{0x80}, release...),
		append([]byte{0x80}, chart...),
		append([]byte{0x80}, escapes...),
		append([]byte{0x81}, `{"apiVersion":"helm.toolkit.fluxcd.io/v2","kind":"HelmReleaseList","metadata":{"resourceVersion":"5","continue":"c"},"items":[`+
			release+`,`+escapes+`]}`...),
		append([]byte{0x82}, `{"type":"MODIFIED","object":`+release+`}`...),
		append([]byte{0x82}, `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","code":410}}`...),
	}
}

// jsonObj is a JSON object as it is written: its keys in order, repeats
// included. A value is nil, a string, a bool, a json.Number, a jsonObj or
// an []any.
type jsonObj []jsonField

type jsonField struct {
	key string
	val any
}

// mappedKinds are the kinds that pkg/source maps, as their objects name
// themselves.
var mappedKinds = [][2]string{
	{"fleet.cattle.io/v1alpha1", "GitRepo"}, {"fleet.cattle.io/v1alpha1", "HelmOp"},
	{"fleet.cattle.io/v1alpha1", "Bundle"}, {"fleet.cattle.io/v1alpha1", "BundleDeployment"},
	{"source.toolkit.fluxcd.io/v1", "GitRepository"}, {"source.toolkit.fluxcd.io/v1", "OCIRepository"},
	{"source.toolkit.fluxcd.io/v1", "HelmRepository"}, {"source.toolkit.fluxcd.io/v1", "HelmChart"},
	{"source.toolkit.fluxcd.io/v1", "Bucket"}, {"kustomize.toolkit.fluxcd.io/v1", "Kustomization"},
	{"helm.toolkit.fluxcd.io/v2", "HelmRelease"}, {"image.toolkit.fluxcd.io/v1", "ImageRepository"},
	{"image.toolkit.fluxcd.io/v1", "ImagePolicy"}, {"image.toolkit.fluxcd.io/v1", "ImageUpdateAutomation"},
	{"source.extensions.fluxcd.io/v1beta1", "ArtifactGenerator"},
}

func (c *choices) kind() [2]string { return mappedKinds[c.intn(len(mappedKinds))] }

// set adds key, and now and then adds it again with another value: both
// decoders read both, in order.
func (c *choices) set(o *jsonObj, key string, val func() any) {
	*o = append(*o, jsonField{key, val()})
	if c.rare(24) {
		*o = append(*o, jsonField{key, val()})
	}
}

// maybe sets key three times in four.
func (c *choices) maybe(o *jsonObj, key string, val func() any) {
	if c.intn(4) != 0 {
		c.set(o, key, val)
	}
}

// readKeys are the keys that the daemon reads somewhere, in lower case:
// apimachinery finds the kind case-insensitively.
var readKeys = map[string]bool{"apiversion": true, "kind": true, "metadata": true, "spec": true, "name": true, "namespace": true,
	"resourceversion": true, "labels": true, "annotations": true, "deletiontimestamp": true, "chart": true, "chartref": true,
	"sourceref": true, "items": true, "continue": true, "remainingitemcount": true, "type": true, "object": true}

// mix adds fields that the daemon does not read, shuffles the fields, and
// notes a key written twice. A field added under a key that the daemon
// reads is odd: it has the wrong type.
func (c *choices) mix(o jsonObj) jsonObj {
	for range c.intn(3) {
		k := c.str("status", "x", "Metadata", "Name", "Items")
		c.odd = c.odd || readKeys[strings.ToLower(k)]
		o = append(o, jsonField{k, c.junk(3)})
	}
	if c.rare(3) {
		for i := len(o) - 1; i > 0; i-- {
			j := c.intn(i + 1)
			o[i], o[j] = o[j], o[i]
		}
	}
	seen := map[string]bool{}
	for _, f := range o {
		c.odd = c.odd || seen[f.key]
		seen[f.key] = true
	}
	return o
}

// junk is any JSON value, with keys and strings that the daemon looks
// for elsewhere, and JSON's delimiters inside strings.
func (c *choices) junk(depth int) any {
	switch c.intn(8) {
	case 0:
		return nil
	case 1:
		return c.intn(2) == 1
	case 2:
		return json.Number(c.pick("0", "-1", "1.5e3", "123456789012345678901234567890", "-0.0", "1E-7"))
	case 3, 4:
		return c.str(`"}]`, `\`, `{"kind":"Status"}`, "name", `\"`)
	case 5:
		var a []any
		for range c.intn(4) * min(depth, 1) {
			a = append(a, c.junk(depth-1))
		}
		return a
	}
	var o jsonObj
	for range c.intn(4) * min(depth, 1) {
		o = append(o, jsonField{c.str("name", "metadata", "spec", "labels", "kind", "sourceRef", "chart", "items", "object", "type"), c.junk(depth - 1)})
	}
	return o
}

// jstr is a string field's value: a string, now and then null, rarely a
// number, which the decoders refuse.
func (c *choices) jstr(words ...string) any {
	switch {
	case c.rare(12):
		return nil
	case c.rare(64):
		c.odd = true
		return json.Number("1")
	}
	return c.str(words...)
}

// apiVersion is an apiVersion field's value; one of more than two parts
// is odd: apimachinery refuses it.
func (c *choices) apiVersion(word string) any {
	v := c.jstr(word)
	if s, ok := v.(string); ok && strings.Count(s, "/") > 1 {
		c.odd = true
	}
	return v
}

// jstrMap is a labels or annotations map; a null value in it reads as "".
func (c *choices) jstrMap(keys, values []string) any {
	if c.rare(12) {
		return nil
	}
	n := c.intn(4)
	if c.rare(16) {
		n = c.intn(400)
	}
	var o jsonObj
	seen := map[string]bool{}
	for range n {
		k := c.str(keys...)
		c.odd = c.odd || seen[k]
		seen[k] = true
		o = append(o, jsonField{k, c.jstr(values...)})
	}
	if o == nil {
		return jsonObj{}
	}
	return o
}

// jtime is a time as the API server writes it (RFC 3339, seconds) or as a
// client may have (fractions, offsets), now and then null or not a time.
func (c *choices) jtime() any {
	switch c.intn(8) {
	case 0:
		return nil
	case 1:
		c.odd = true
		return c.str("2026-01-01", "0000-00-00T00:00:00Z")
	}
	const first, last = -62135596800, 253402300799 // years 1 to 9999
	secs := first + int64(c.uint64()%(last-first+1))
	zone := []*time.Location{time.UTC, time.FixedZone("", 5*3600+1800), time.FixedZone("", -8*3600), time.FixedZone("", 23*3600+59*60)}[c.intn(4)]
	layout := c.pick(time.RFC3339, time.RFC3339, time.RFC3339Nano, "2006-01-02T15:04:05.000Z07:00")
	return time.Unix(secs, int64(c.intn(1<<16))*15259).In(zone).Format(layout)
}

// jobject is an object of kind k as the API server serves it: the
// metadata that all kinds share, and its kind's spec, with a HelmChart's
// and a HelmRelease's spec.chart as different as they are.
func (c *choices) jobject(k [2]string) jsonObj {
	var o jsonObj
	c.maybe(&o, "apiVersion", func() any { return c.apiVersion(k[0]) })
	c.maybe(&o, "kind", func() any { return c.jstr(k[1]) })
	c.maybe(&o, "metadata", c.jmeta)
	c.maybe(&o, "spec", func() any { return c.jspec(k[1]) })
	if c.intn(2) == 1 {
		o = append(o, jsonField{"status", c.junk(3)})
	}
	return c.mix(o)
}

func (c *choices) jmeta() any {
	if c.rare(32) {
		return nil
	}
	var o jsonObj
	c.maybe(&o, "name", func() any { return c.jstr(fuzzNames...) })
	c.maybe(&o, "namespace", func() any { return c.jstr(fuzzNames...) })
	c.maybe(&o, "resourceVersion", func() any { return c.jstr("1", "42") })
	c.maybe(&o, "labels", func() any { return c.jstrMap(fuzzLabelKeys, fuzzValues) })
	c.maybe(&o, "annotations", func() any { return c.jstrMap(fuzzAnnotations, fuzzValues) })
	if c.intn(3) == 0 {
		c.set(&o, "deletionTimestamp", c.jtime)
	}
	if c.intn(2) == 1 {
		o = append(o, jsonField{"uid", c.str()}, jsonField{"generation", json.Number("3")}, jsonField{"creationTimestamp", c.jtime()},
			jsonField{"finalizers", []any{c.str("finalizers.fluxcd.io")}},
			jsonField{"ownerReferences", []any{jsonObj{{"kind", c.str()}, {"name", c.str()}, {"controller", true}}}},
			jsonField{"managedFields", []any{jsonObj{{"manager", c.str()}, {"fieldsV1", c.junk(3)}}}})
	}
	return c.mix(o)
}

func (c *choices) jspec(kind string) any {
	if c.rare(32) {
		return nil
	}
	var o jsonObj
	switch kind {
	case "HelmRelease":
		c.maybe(&o, "chart", c.jchart)
		if c.intn(4) == 0 {
			c.set(&o, "chartRef", c.jref)
		}
		o = append(o, jsonField{"values", c.junk(4)}, jsonField{"interval", "5m"})
	case "HelmChart":
		// A HelmChart's chart is the name of its chart.
		c.maybe(&o, "chart", func() any { return c.jstr("podinfo") })
		c.maybe(&o, "sourceRef", c.jref)
		o = append(o, jsonField{"version", c.str("6.x")})
	case "HelmOp":
		c.maybe(&o, "labels", func() any { return c.jstrMap(fuzzLabelKeys, fuzzValues) })
		o = append(o, jsonField{"helm", jsonObj{{"chart", c.str("podinfo")}, {"values", c.junk(3)}}})
	case "Kustomization", "Bucket", "GitRepository", "OCIRepository":
		c.maybe(&o, "sourceRef", c.jref)
		o = append(o, jsonField{"path", c.str()})
	default:
		o = append(o, jsonField{"paths", []any{c.str()}})
	}
	return c.mix(o)
}

// jchart is a HelmRelease's chart template.
func (c *choices) jchart() any {
	if c.rare(12) {
		return nil
	}
	var o jsonObj
	c.maybe(&o, "metadata", func() any {
		if c.rare(12) {
			return nil
		}
		var m jsonObj
		c.maybe(&m, "labels", func() any { return c.jstrMap(fuzzLabelKeys, fuzzValues) })
		c.maybe(&m, "annotations", func() any { return c.jstrMap(fuzzAnnotations, fuzzValues) })
		return c.mix(m)
	})
	c.maybe(&o, "spec", func() any {
		if c.rare(12) {
			return nil
		}
		var s jsonObj
		c.maybe(&s, "sourceRef", func() any {
			if c.rare(12) {
				return nil
			}
			return c.jrefFields()
		})
		s = append(s, jsonField{"chart", c.str("podinfo")}, jsonField{"version", c.str("6.x")})
		return c.mix(s)
	})
	return c.mix(o)
}

// jref is a reference to a source, or null.
func (c *choices) jref() any {
	if c.rare(8) {
		return nil
	}
	return c.jrefFields()
}

func (c *choices) jrefFields() jsonObj {
	var o jsonObj
	c.maybe(&o, "kind", func() any { return c.jstr("HelmRepository", "GitRepository", "OCIRepository", "Bucket", "HelmChart") })
	c.maybe(&o, "name", func() any { return c.jstr(fuzzNames...) })
	if c.intn(2) == 1 {
		c.set(&o, "namespace", func() any { return c.jstr(fuzzNames...) })
	}
	if c.intn(4) == 0 {
		o = append(o, jsonField{"apiVersion", c.str("source.toolkit.fluxcd.io/v1")})
	}
	return c.mix(o)
}

func (c *choices) jlist() jsonObj {
	k := c.kind()
	var o jsonObj
	c.maybe(&o, "apiVersion", func() any { return c.apiVersion(k[0]) })
	c.maybe(&o, "kind", func() any { return c.jstr(k[1] + "List") })
	c.maybe(&o, "metadata", func() any {
		var m jsonObj
		c.maybe(&m, "resourceVersion", func() any { return c.jstr("1", "42") })
		c.maybe(&m, "continue", func() any { return c.jstr("token") })
		if c.intn(4) == 0 {
			m = append(m, jsonField{"remainingItemCount", json.Number("12")})
		}
		return c.mix(m)
	})
	c.maybe(&o, "items", func() any {
		if c.rare(12) {
			return nil
		}
		items := []any{}
		for range c.intn(4) {
			items = append(items, c.jobject(k))
		}
		return items
	})
	return c.mix(o)
}

// jevent is a watch event: an object, a bookmark, or an error's Status.
func (c *choices) jevent() jsonObj {
	typ := c.pick("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR")
	if c.rare(8) {
		typ = c.str()
	}
	var obj any = c.jobject(c.kind())
	if typ == "ERROR" {
		obj = jsonObj{{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"}, {"reason", "Expired"}, {"code", json.Number("410")}, {"message", c.str()}}
	}
	var o jsonObj
	c.maybe(&o, "type", func() any { return c.jstr(typ) })
	c.maybe(&o, "object", func() any {
		if c.rare(16) {
			return nil
		}
		return obj
	})
	return c.mix(o)
}

// encodeJSON writes v as apimachinery does (unstructured, its keys
// sorted, repeats gone) or as another encoder may: keys in any order and
// repeated, white space between tokens, characters escaped that need not
// be, invalid UTF-8 left as it is.
func (c *choices) encodeJSON(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch c.intn(3) {
	case 0:
		m, ok := toUnstructured(v).(map[string]any)
		require.True(t, ok)
		require.NoError(t, unstructured.UnstructuredJSONScheme.Encode(&unstructured.Unstructured{Object: m}, &buf))
	case 1:
		c.writeJSON(&buf, v, false, false)
	default:
		c.writeJSON(&buf, v, true, true)
	}
	return buf.Bytes()
}

// toUnstructured is v as unstructured holds it; of a repeated key, the last
// value.
func toUnstructured(v any) any {
	switch v := v.(type) {
	case jsonObj:
		m := make(map[string]any, len(v))
		for _, f := range v {
			m[f.key] = toUnstructured(f.val)
		}
		return m
	case []any:
		out := make([]any, len(v))
		for i := range v {
			out[i] = toUnstructured(v[i])
		}
		return out
	}
	return v
}

func (c *choices) writeJSON(buf *bytes.Buffer, v any, spaced, escaped bool) {
	space := func() {
		if spaced {
			for range c.intn(3) {
				buf.WriteByte(" \t\n\r"[c.intn(4)])
			}
		}
	}
	space()
	switch v := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		buf.WriteString(map[bool]string{true: "true", false: "false"}[v])
	case json.Number:
		buf.WriteString(string(v))
	case string:
		c.writeString(buf, v, escaped)
	case jsonObj:
		buf.WriteByte('{')
		for i, f := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			space()
			c.writeString(buf, f.key, escaped)
			space()
			buf.WriteByte(':')
			c.writeJSON(buf, f.val, spaced, escaped)
		}
		space()
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			c.writeJSON(buf, e, spaced, escaped)
		}
		space()
		buf.WriteByte(']')
	}
	space()
}

func (c *choices) writeString(buf *bytes.Buffer, s string, escaped bool) {
	if !escaped {
		b, _ := json.Marshal(s)
		buf.Write(b)
		return
	}
	buf.WriteByte('"')
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			buf.WriteByte(s[i])
		case r == '"' || r == '\\':
			buf.WriteByte('\\')
			buf.WriteByte(s[i])
		case r < 0x20 || c.rare(4):
			for _, u := range utf16.Encode([]rune{r}) {
				fmt.Fprintf(buf, `\u%04x`, u)
			}
		default:
			buf.WriteString(s[i : i+n])
		}
		i += n
	}
	buf.WriteByte('"')
}

// decodeInto decodes data with apimachinery's JSON serializer into the
// object given, and fills what SpecObject derives once decoded.
func decodeInto(std runtime.Serializer, data []byte, into runtime.Object) (runtime.Object, error) {
	out, _, err := std.Decode(data, nil, into)
	if err != nil {
		return nil, err
	}
	switch o := out.(type) {
	case *SpecObject:
		o.fill()
	case *specList:
		for i := range o.Items {
			o.Items[i].fill()
		}
	}
	return out, nil
}

// checkSpecObject compares skimObject with apimachinery's decoding of
// data into SpecObject, and returns the latter when it decoded it.
func checkSpecObject(t *testing.T, std runtime.Serializer, data []byte, strict bool) *SpecObject {
	t.Helper()
	want, wantErr := decodeInto(std, data, &SpecObject{})
	if wantErr != nil && strict {
		t.Errorf("apimachinery refused to decode into SpecObject an object as the API server serves it: %v\n%q", wantErr, data)
	}
	got := &SpecObject{}
	gotErr := skimObject(data, got)
	if !agree(t, "an object", data, wantErr, gotErr, strict) {
		return nil
	}
	assert.Equal(t, want, got, "the object")
	return got
}

// checkSpecPaths compares decoded, what was decoded of data, with what
// apimachinery's unstructured decoding (kubectl's and the dynamic
// client's) finds at the paths that SpecObject names: a path that the
// skimmer and SpecObject's tags agree on, but that is wrong, shows here.
func checkSpecPaths(t *testing.T, data []byte, decoded *SpecObject) {
	t.Helper()
	var u map[string]any
	require.NoError(t, utiljson.Unmarshal(data, &u))
	at := func(path ...string) any {
		v, _, _ := unstructured.NestedFieldNoCopy(u, path...)
		return v
	}
	str := func(path ...string) string {
		s, _ := at(path...).(string)
		return s
	}
	opt := func(path ...string) *string {
		if s, ok := at(path...).(string); ok {
			return &s
		}
		return nil
	}
	strMap := func(path ...string) map[string]string {
		m, ok := at(path...).(map[string]any)
		if !ok {
			return nil
		}
		out := make(map[string]string, len(m))
		for k, v := range m {
			out[k], _ = v.(string)
		}
		return out
	}
	ref := func(path ...string) SourceRef {
		return SourceRef{Kind: str(slices.Concat(path, []string{"kind"})...), Name: str(slices.Concat(path, []string{"name"})...),
			Namespace: str(slices.Concat(path, []string{"namespace"})...)}
	}
	optRef := func(path ...string) *SourceRef {
		if _, ok := at(path...).(map[string]any); !ok {
			return nil
		}
		r := ref(path...)
		return &r
	}
	truth := &SpecObject{TypeMeta: metav1.TypeMeta{APIVersion: str("apiVersion"), Kind: str("kind")}, Metadata: SpecMeta{
		Name: str("metadata", "name"), Namespace: str("metadata", "namespace"), ResourceVersion: str("metadata", "resourceVersion"),
		Labels: strMap("metadata", "labels"), Annotations: MetaAnnotations{
			AssignedShard: opt("metadata", "annotations", "shardkeeper.io/assigned-shard"), AssignedAt: opt("metadata", "annotations", "shardkeeper.io/assigned-at"),
			Weight: opt("metadata", "annotations", "shardkeeper.io/weight"), InitialEventsEnd: opt("metadata", "annotations", metav1.InitialEventsAnnotationKey)}}}
	if ts := opt("metadata", "deletionTimestamp"); ts != nil {
		parsed, err := time.Parse(time.RFC3339, *ts)
		require.NoError(t, err)
		truth.Metadata.DeletionTimestamp = &metav1.Time{Time: parsed.Local()}
	}
	if at("spec", "chart") != nil {
		truth.Spec.Chart = &ChartTemplate{}
		if _, ok := at("spec", "chart", "metadata").(map[string]any); ok {
			truth.Spec.Chart.Metadata = &struct {
				Labels map[string]string `json:"labels"`
			}{Labels: strMap("spec", "chart", "metadata", "labels")}
		}
		truth.Spec.Chart.Spec.SourceRef = ref("spec", "chart", "spec", "sourceRef")
	}
	truth.Spec.ChartRef, truth.Spec.SourceRef, truth.Spec.Labels = optRef("spec", "chartRef"), optRef("spec", "sourceRef"), strMap("spec", "labels")
	truth.fill()
	assert.Equal(t, truth, decoded, "what apimachinery's unstructured decoding finds at the paths read")
}

// checkSpecList compares skimList with apimachinery's decoding of data
// into specList.
func checkSpecList(t *testing.T, std runtime.Serializer, data []byte, strict bool) {
	t.Helper()
	want, wantErr := decodeInto(std, data, &specList{})
	got := &specList{}
	gotErr := skimList(data, got)
	if !agree(t, "a list", data, wantErr, gotErr, strict) {
		return
	}
	assert.Equal(t, want, got, "the list")
}

// checkSpecCodec compares specCodec, decoding into nothing as it does a
// watch event's object, with apimachinery's decoding into the type that
// the object's kind names.
func checkSpecCodec(t *testing.T, std runtime.Serializer, data []byte, strict bool) {
	t.Helper()
	var tm metav1.TypeMeta
	wantErr := sjson.UnmarshalCaseSensitivePreserveInts(data, &tm)
	var want runtime.Object
	if wantErr == nil {
		switch {
		case tm.Kind == "Status":
			want = &metav1.Status{}
		case strings.HasSuffix(tm.Kind, "List"):
			want = &specList{}
		default:
			want = &SpecObject{}
		}
		want, wantErr = decodeInto(std, data, want)
	}
	got, gvk, gotErr := specCodec{}.Decode(data, nil, nil)
	if !agree(t, "an object of any kind", data, wantErr, gotErr, strict) {
		return
	}
	assert.Equal(t, want, got, "the object")
	assert.Equal(t, want.GetObjectKind().GroupVersionKind(), *gvk, "the kind returned")
}

// checkSpecEvent compares specCodec's decoding of a JSON watch event with
// apimachinery's, then the event's object.
func checkSpecEvent(t *testing.T, std runtime.Serializer, data []byte, strict bool) {
	t.Helper()
	want, wantErr := decodeInto(std, data, &metav1.WatchEvent{})
	got, _, gotErr := specCodec{}.Decode(data, nil, &metav1.WatchEvent{})
	if !agree(t, "a watch event", data, wantErr, gotErr, strict) {
		return
	}
	if !assert.Equal(t, want, got, "the watch event") {
		return
	}
	if raw := want.(*metav1.WatchEvent).Object.Raw; raw != nil {
		checkSpecCodec(t, std, raw, strict)
	}
}

// ---------------------------------------------------------------------
// The JSON watch stream: skimFramer against the stock JSON framer.

// FuzzSkimFramer checks skimFramer against apimachinery's JSON framer on
// watch streams read in reads of any size, each frame read with a buffer
// of any size.
func FuzzSkimFramer(f *testing.F) {
	stream, _ := watchStream(3)
	for _, seed := range [][]byte{
		{0}, {0, 1, 2, 3, 4, 5, 6}, {0, 2, 16, 1, 2, 3, 4, 4, 2, 3, 0xa0, 0xa1, 0xa2, 0xff, 1, 2},
		append([]byte{0x80, 0, 1, 2, 3, 4}, stream...),
		append([]byte{0x80, 3, 5, 0, 9, 2}, stream...),
		append([]byte{0x80, 1, 16, 16, 16, 16}, `{"a":"}\"{"} [1] "x" {"b":{}}{"c":[{}]}`...),
	} {
		f.Add(seed)
	}
	f.Fuzz(checkFramerInput)
}

// checkFramerInput is FuzzSkimFramer's check of one input.
func checkFramerInput(t *testing.T, data []byte) {
	c := &choices{b: data}
	raw := c.byte()&0x80 != 0
	size := []int{1, 2, 7, 64, 1 << 10, 64 << 10}[c.intn(6)]
	reads := c.take(4)
	in := c.b
	if !raw {
		in = c.jsonStream(t)
	}
	limit := len(in) + 1
	want, wantErr := readFrames(kjson.Framer.NewFrameReader(&trickle{data: in, sizes: reads}), size, limit)
	got, gotErr := readFrames(skimFramer{}.NewFrameReader(&trickle{data: in, sizes: reads}), size, limit)
	n := min(len(want), len(got))
	if n > 0 {
		assert.Equal(t, want[:n], got[:n], "the frames that both framers found")
	}
	switch {
	case len(got) < len(want) && gotErr == nil:
		t.Errorf("the stream ended after %d frames, not %d", len(got), len(want))
	case len(got) < len(want) || (wantErr == nil && gotErr != nil):
		agree(t, "a watch stream", in, nil, gotErr, !raw)
	case wantErr == nil && len(got) > len(want):
		t.Errorf("%d frames found past the end of the stream: %q", len(got)-len(want), got[len(want):])
	}
	if gotErr == nil {
		// Between frames, the skimming framer steps over white space
		// only: it drops no event.
		assert.Equal(t, stripSpace(in), stripSpace([]byte(strings.Join(got, ""))), "what the frames hold")
	}
}

// jsonStream is a watch stream: events, each as the API server writes
// them or as another encoder may.
func (c *choices) jsonStream(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	for range c.intn(5) {
		buf.Write(c.encodeJSON(t, c.jevent()))
		buf.WriteString(c.pick("\n", "", " \r\n\t", "\n\n"))
	}
	return buf.Bytes()
}

func stripSpace(b []byte) []byte {
	return bytes.Map(func(r rune) rune {
		if strings.ContainsRune(" \t\n\r", r) {
			return -1
		}
		return r
	}, b)
}

// trickle returns data in reads of the sizes given in turn, and the last
// one with io.EOF, as a connection may.
type trickle struct {
	data  []byte
	sizes []byte
	i     int
}

func (r *trickle) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := len(p)
	if len(r.sizes) > 0 {
		n = 1 << (r.sizes[r.i%len(r.sizes)] % 17)
		r.i++
	}
	n = copy(p, r.data[:min(n, len(r.data))])
	r.data = r.data[n:]
	if len(r.data) == 0 {
		return n, io.EOF
	}
	return n, nil
}

func (*trickle) Close() error { return nil }

// readFrames reads r's frames with a buffer of size bytes, growing a frame
// on io.ErrShortBuffer as the stream decoder does; err is how the stream
// ended, nil at io.EOF. More than limit frames is an error.
func readFrames(r io.ReadCloser, size, limit int) ([]string, error) {
	var frames []string
	buf := make([]byte, size)
	for len(frames) <= limit {
		n, err := r.Read(buf)
		frame := bytes.Clone(buf[:n])
		for errors.Is(err, io.ErrShortBuffer) {
			n, err = r.Read(buf)
			frame = append(frame, buf[:n]...)
		}
		if errors.Is(err, io.EOF) {
			return frames, nil
		}
		if err != nil {
			return frames, err
		}
		frames = append(frames, string(frame))
	}
	return frames, errors.New("more frames than the stream has bytes")
}

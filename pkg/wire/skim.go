package wire

import (
	"bytes"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sjson "sigs.k8s.io/json"

	"github.com/shardkeeper/shardkeeper/pkg/placement"
)

// skim reads the few fields of a JSON object that a SpecObject keeps and
// skips the rest without decoding it. A reflective decoder scans every
// byte of a value it does not keep (a 2 KB last-applied annotation, a
// release's values) through its state machine; skim finds the end of a
// string with bytes.IndexByte. The API server's JSON is well formed, but
// skim still rejects what it cannot read rather than guess.
type skim struct {
	data []byte
	i    int
}

var errSyntax = errors.New("malformed JSON")

func (s *skim) fail(what string) error {
	return fmt.Errorf("%w: %s at offset %d", errSyntax, what, s.i)
}

// peek skips white space and returns the next byte, 0 at the end.
func (s *skim) peek() byte {
	for s.i < len(s.data) {
		switch c := s.data[s.i]; c {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return c
		}
	}
	return 0
}

func (s *skim) expect(c byte) error {
	if s.peek() != c {
		return s.fail(fmt.Sprintf("expected %q", c))
	}
	s.i++
	return nil
}

// null consumes a null and reports whether there was one.
func (s *skim) null() bool {
	if s.peek() == 'n' && bytes.HasPrefix(s.data[s.i:], []byte("null")) {
		s.i += 4
		return true
	}
	return false
}

// rawString consumes a string and returns its bytes between the quotes,
// escapes included, and whether it has any.
func (s *skim) rawString() ([]byte, bool, error) {
	if err := s.expect('"'); err != nil {
		return nil, false, err
	}
	start, escaped := s.i, false
	for {
		j := bytes.IndexByte(s.data[s.i:], '"')
		if j < 0 {
			return nil, false, s.fail("unterminated string")
		}
		end := s.i + j
		// The quote ends the string unless an odd number of backslashes
		// precede it.
		n := 0
		for k := end - 1; k >= start && s.data[k] == '\\'; k-- {
			n++
		}
		if n > 0 {
			escaped = true
		}
		s.i = end + 1
		if n%2 == 0 {
			if !escaped {
				escaped = bytes.IndexByte(s.data[start:end], '\\') >= 0
			}
			return s.data[start:end], escaped, nil
		}
	}
}

// str consumes a string (or null, read as "") and returns its value.
func (s *skim) str() (string, error) {
	if s.null() {
		return "", nil
	}
	start := s.i
	raw, escaped, err := s.rawString()
	if err != nil {
		return "", err
	}
	// encoding/json reads each byte of invalid UTF-8 as U+FFFD.
	if !escaped && utf8.Valid(raw) {
		return string(raw), nil
	}
	var v string
	if err := sjson.UnmarshalCaseSensitivePreserveInts(s.data[start:s.i], &v); err != nil {
		return "", fmt.Errorf("decoding string: %w", err)
	}
	return v, nil
}

// strTo consumes a string into *v; null leaves *v as it was, as
// encoding/json leaves a string field.
func (s *skim) strTo(v *string) error {
	if s.null() {
		return nil
	}
	var err error
	*v, err = s.str()
	return err
}

// skip consumes any value.
func (s *skim) skip() error {
	switch c := s.peek(); c {
	case '"':
		_, _, err := s.rawString()
		return err
	case '{', '[':
		return s.skipNested()
	case 0:
		return s.fail("expected a value")
	default:
		// A number, true, false or null: up to the next delimiter.
		for s.i < len(s.data) {
			switch s.data[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return nil
			}
			s.i++
		}
		return nil
	}
}

// skipNested consumes an object or an array, strings inside included.
func (s *skim) skipNested() error {
	depth := 0
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case '"':
			if _, _, err := s.rawString(); err != nil {
				return err
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				s.i++
				return nil
			}
		}
		s.i++
	}
	return s.fail("unterminated object or array")
}

// object consumes an object (or null), calling field with each key; field
// must consume the value.
func (s *skim) object(field func(key string) error) error {
	if s.null() {
		return nil
	}
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		key, err := s.str()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if err := field(key); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return s.fail("expected ',' or '}'")
		}
	}
}

// strMapTo consumes an object of strings into *m, adding to what it
// holds, as encoding/json does when a key is repeated; null makes it nil.
func (s *skim) strMapTo(m *map[string]string) error {
	if s.null() {
		*m = nil
		return nil
	}
	if *m == nil {
		*m = map[string]string{}
	}
	out := *m
	return s.object(func(key string) error {
		v, err := s.str()
		out[key] = v
		return err
	})
}

// optStr consumes a string into a new *string; null leaves it nil.
func (s *skim) optStr() (*string, error) {
	if s.null() {
		return nil, nil
	}
	v, err := s.str()
	return &v, err
}

// skimObject reads data into o, as specCodec's reflective decoding would.
func skimObject(data []byte, o *SpecObject) error {
	s := &skim{data: data}
	return s.specObject(o)
}

func (s *skim) specObject(o *SpecObject) error {
	err := s.object(func(key string) error {
		var err error
		switch key {
		case "apiVersion":
			err = s.strTo(&o.APIVersion)
		case "kind":
			err = s.strTo(&o.Kind)
		case "metadata":
			err = s.meta(&o.Metadata)
		case "spec":
			err = s.spec(&o.Spec)
		default:
			err = s.skip()
		}
		return err
	})
	o.fill()
	return err
}

func (s *skim) meta(m *SpecMeta) error {
	return s.object(func(key string) error {
		var err error
		switch key {
		case "name":
			err = s.strTo(&m.Name)
		case "namespace":
			err = s.strTo(&m.Namespace)
		case "resourceVersion":
			err = s.strTo(&m.ResourceVersion)
		case "labels":
			err = s.strMapTo(&m.Labels)
		case "annotations":
			err = s.annotations(&m.Annotations)
		case "deletionTimestamp":
			m.DeletionTimestamp, err = s.time()
		default:
			err = s.skip()
		}
		return err
	})
}

func (s *skim) annotations(a *MetaAnnotations) error {
	return s.object(func(key string) error {
		var err error
		switch key {
		case placement.AssignedShardAnnotation:
			a.AssignedShard, err = s.optStr()
		case placement.AssignedAtAnnotation:
			a.AssignedAt, err = s.optStr()
		case placement.WeightAnnotation:
			a.Weight, err = s.optStr()
		case metav1.InitialEventsAnnotationKey:
			a.InitialEventsEnd, err = s.optStr()
		default:
			err = s.skip()
		}
		return err
	})
}

func (s *skim) time() (*metav1.Time, error) {
	v, err := s.optStr()
	if err != nil || v == nil {
		return nil, err
	}
	t, err := time.Parse(time.RFC3339, *v)
	if err != nil {
		return nil, fmt.Errorf("decoding a time: %w", err)
	}
	return &metav1.Time{Time: t.Local()}, nil
}

func (s *skim) spec(f *SpecFields) error {
	return s.object(func(key string) error {
		var err error
		switch key {
		case "chart":
			// Into the template already read, if the key is repeated, as
			// encoding/json does; so are the references.
			if s.null() {
				f.Chart = nil
				return nil
			}
			if f.Chart == nil {
				f.Chart = &ChartTemplate{}
			}
			if s.peek() == '"' {
				// A HelmChart's: see ChartTemplate.UnmarshalJSON.
				return s.skip()
			}
			err = s.chart(f.Chart)
		case "chartRef":
			err = s.optRefTo(&f.ChartRef)
		case "sourceRef":
			err = s.optRefTo(&f.SourceRef)
		case "labels":
			err = s.strMapTo(&f.Labels)
		default:
			err = s.skip()
		}
		return err
	})
}

func (s *skim) chart(c *ChartTemplate) error {
	return s.object(func(key string) error {
		switch key {
		case "metadata":
			if s.null() {
				c.Metadata = nil
				return nil
			}
			if c.Metadata == nil {
				c.Metadata = &struct {
					Labels map[string]string `json:"labels"`
				}{}
			}
			return s.object(func(key string) error {
				if key != "labels" {
					return s.skip()
				}
				return s.strMapTo(&c.Metadata.Labels)
			})
		case "spec":
			return s.object(func(key string) error {
				if key != "sourceRef" {
					return s.skip()
				}
				return s.ref(&c.Spec.SourceRef)
			})
		}
		return s.skip()
	})
}

func (s *skim) optRefTo(r **SourceRef) error {
	if s.null() {
		*r = nil
		return nil
	}
	if *r == nil {
		*r = &SourceRef{}
	}
	return s.ref(*r)
}

func (s *skim) ref(r *SourceRef) error {
	return s.object(func(key string) error {
		var err error
		switch key {
		case "kind":
			err = s.strTo(&r.Kind)
		case "name":
			err = s.strTo(&r.Name)
		case "namespace":
			err = s.strTo(&r.Namespace)
		default:
			err = s.skip()
		}
		return err
	})
}

// skimList reads a list response into l.
func skimList(data []byte, l *specList) error {
	s := &skim{data: data}
	return s.object(func(key string) error {
		var err error
		switch key {
		case "apiVersion":
			err = s.strTo(&l.APIVersion)
		case "kind":
			err = s.strTo(&l.Kind)
		case "metadata":
			// The ListMeta is small: the reflective decoder reads it.
			start := s.i
			if err = s.skip(); err == nil {
				err = sjson.UnmarshalCaseSensitivePreserveInts(s.data[start:s.i], &l.ListMeta)
			}
		case "items":
			err = s.items(l)
		default:
			err = s.skip()
		}
		return err
	})
}

// items reads the items as encoding/json reads a slice, should the key be
// repeated: each into the item already at its index, if any (past the
// length, within the capacity, too), the slice then cut at the last one;
// none is a new empty slice, and null none at all.
func (s *skim) items(l *specList) error {
	if s.null() {
		l.Items = nil
		return nil
	}
	if err := s.expect('['); err != nil {
		return err
	}
	if s.peek() == ']' {
		s.i++
		l.Items = []SpecObject{}
		return nil
	}
	for i := 0; ; i++ {
		if i < cap(l.Items) {
			l.Items = l.Items[:max(i+1, len(l.Items))]
		} else {
			l.Items = append(l.Items, SpecObject{})
		}
		if err := s.specObject(&l.Items[i]); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			l.Items = l.Items[:i+1]
			return nil
		default:
			return s.fail("expected ',' or ']'")
		}
	}
}

// skimEvent reads a watch event into e, its object left raw (copied: the
// stream decoder reuses its buffer).
func skimEvent(data []byte, e *metav1.WatchEvent) error {
	s := &skim{data: data}
	return s.object(func(key string) error {
		var err error
		switch key {
		case "type":
			err = s.strTo(&e.Type)
		case "object":
			if s.null() {
				return nil // as RawExtension reads it: no object
			}
			start := s.i
			if err = s.skip(); err == nil {
				e.Object.Raw = append(e.Object.Raw[:0], bytes.TrimSpace(s.data[start:s.i])...)
			}
		default:
			err = s.skip()
		}
		return err
	})
}

// skimKind returns the value of the object's top-level "kind".
func skimKind(data []byte) (string, error) {
	s := &skim{data: data}
	var kind string
	err := s.object(func(key string) error {
		if key != "kind" {
			return s.skip()
		}
		return s.strTo(&kind)
	})
	return kind, err
}

package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
)

// chunked returns data a few bytes per Read, as a slow stream does.
type chunked struct {
	data []byte
	i    int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(c.data), 1+c.i%7)
	c.i++
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

func (*chunked) Close() error { return nil }

// frames reads every frame of r with a buffer of size bytes, growing it on
// io.ErrShortBuffer as the stream decoder does.
func frames(t *testing.T, r io.Reader, size int) []string {
	t.Helper()
	var out []string
	buf := make([]byte, size)
	for {
		n, err := r.Read(buf)
		frame := append([]byte(nil), buf[:n]...)
		for errors.Is(err, io.ErrShortBuffer) {
			n, err = r.Read(buf)
			frame = append(frame, buf[:n]...)
		}
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		out = append(out, string(frame))
	}
}

func watchStream(n int) (string, []string) {
	var events []string
	for i := range n {
		events = append(events, `{"type":"ADDED","object":`+helmRelease(fmt.Sprintf("r%d", i), "s1", "s1")+`}`)
	}
	events = append(events, `{"type":"BOOKMARK","object":{"kind":"HelmRelease","metadata":{"resourceVersion":"9","annotations":{"k8s.io/initial-events-end":"true"}}}}`)
	return strings.Join(events, "\n") + "\n", events
}

func TestSkimFramer(t *testing.T) {
	stream, want := watchStream(20)
	for _, size := range []int{16, 1024, 1 << 20} {
		got := frames(t, skimFramer{}.NewFrameReader(&chunked{data: []byte(stream)}), size)
		assert.Equal(t, want, got, "buffer of %d bytes", size)
	}
	generic := frames(t, kjson.Framer.NewFrameReader(io.NopCloser(strings.NewReader(stream))), 1024)
	assert.Equal(t, generic, frames(t, skimFramer{}.NewFrameReader(io.NopCloser(strings.NewReader(stream))), 1024),
		"the frames are the generic JSON framer's")

	cut := skimFramer{}.NewFrameReader(io.NopCloser(strings.NewReader(stream[:len(stream)/2])))
	var err error
	for err == nil {
		_, err = cut.Read(make([]byte, 1<<20))
	}
	require.ErrorIs(t, err, io.ErrUnexpectedEOF, "a stream cut within an event")
	_, err = skimFramer{}.NewFrameReader(io.NopCloser(strings.NewReader(`"not an object"`))).Read(make([]byte, 64))
	require.ErrorIs(t, err, errSyntax)
	nul := skimFramer{}.NewFrameReader(io.NopCloser(strings.NewReader("{}\x00{}")))
	_, err = nul.Read(make([]byte, 64))
	require.NoError(t, err)
	_, err = nul.Read(make([]byte, 64))
	require.ErrorIs(t, err, errSyntax, "a NUL byte is not the end of what was read")
	w := &bytes.Buffer{}
	assert.Same(t, w, skimFramer{}.NewFrameWriter(w), "events are not written, nor framed")
}

func benchmarkFramer(b *testing.B, newReader func(io.ReadCloser) io.ReadCloser) {
	b.Helper()
	stream, _ := watchStream(200)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	buf := make([]byte, 64<<10)
	for b.Loop() {
		r := newReader(io.NopCloser(strings.NewReader(stream)))
		for {
			if _, err := r.Read(buf); err != nil {
				if !errors.Is(err, io.EOF) {
					b.Fatal(err)
				}
				break
			}
		}
	}
}

// The cost of finding 201 events of a watch stream, per stream.
func BenchmarkFramerGenericJSON(b *testing.B) { benchmarkFramer(b, kjson.Framer.NewFrameReader) }
func BenchmarkFramerSkim(b *testing.B)        { benchmarkFramer(b, skimFramer{}.NewFrameReader) }

package wire

import (
	"errors"
	"io"
)

// skimFramer splits a JSON watch stream into its events with skim. The
// generic JSON framer runs an encoding/json decoder over every byte of
// every event just to find where it ends, which costs several times what
// skimming the event does.
type skimFramer struct{}

// NewFrameReader implements runtime.Framer.
func (skimFramer) NewFrameReader(r io.ReadCloser) io.ReadCloser {
	return &skimFrameReader{r: r}
}

// NewFrameWriter implements runtime.Framer; the client writes no stream.
func (skimFramer) NewFrameWriter(w io.Writer) io.Writer { return w }

// frameReadSize is the least room a read into the buffer gets.
const frameReadSize = 32 << 10

// skimFrameReader returns one JSON object per Read, as a frame reader
// must: when data is too short, as much as fits with io.ErrShortBuffer,
// and the rest on the next Read.
type skimFrameReader struct {
	r io.ReadCloser
	// buf[start:end] has been read and not yet returned.
	buf        []byte
	start, end int
	eof        bool
	remaining  []byte
}

// Read implements io.Reader.
func (f *skimFrameReader) Read(data []byte) (int, error) {
	if len(f.remaining) > 0 {
		n := copy(data, f.remaining)
		f.remaining = f.remaining[n:]
		if len(f.remaining) > 0 {
			return n, io.ErrShortBuffer
		}
		f.remaining = nil
		return n, nil
	}
	frame, err := f.next()
	if err != nil {
		return 0, err
	}
	n := copy(data, frame)
	if n < len(frame) {
		// The buffer is reused: keep a copy of the rest.
		f.remaining = append([]byte(nil), frame[n:]...)
		return n, io.ErrShortBuffer
	}
	return n, nil
}

// next returns the next object, valid until the next call.
func (f *skimFrameReader) next() ([]byte, error) {
	for {
		pending := f.buf[f.start:f.end]
		s := skim{data: pending}
		switch c := s.peek(); c {
		case 0:
			if s.i < len(pending) {
				// A NUL byte, which peek returns as it does the end.
				return nil, s.fail("expected an object")
			}
			f.start = f.end // white space only
		case '{':
			from := s.i
			// An error here is an object that has not fully arrived.
			if s.skipNested() == nil {
				f.start += s.i
				return pending[from:s.i], nil
			}
		default:
			return nil, s.fail("expected an object")
		}
		if f.eof {
			if f.start == f.end {
				return nil, io.EOF
			}
			return nil, io.ErrUnexpectedEOF
		}
		if err := f.fill(); err != nil {
			return nil, err
		}
	}
}

// fill moves what is pending to the front of the buffer and reads more.
func (f *skimFrameReader) fill() error {
	if f.start > 0 {
		f.end = copy(f.buf, f.buf[f.start:f.end])
		f.start = 0
	}
	if len(f.buf)-f.end < frameReadSize {
		grown := make([]byte, max(2*len(f.buf), f.end+frameReadSize))
		copy(grown, f.buf[:f.end])
		f.buf = grown
	}
	n, err := f.r.Read(f.buf[f.end:])
	f.end += n
	if errors.Is(err, io.EOF) {
		f.eof = true
		return nil
	}
	return err
}

// Close implements io.Closer.
func (f *skimFrameReader) Close() error { return f.r.Close() }

package upstream

import (
	"bufio"
	"io"
	"net"
)

// Body is a request body held in memory, in parts sent one after the other (a PD half's
// body is the client's with a tail of bootstrap fields). The transport writes a Body
// larger than its buffer straight from the parts, in one writev after the headers.
//
// An opaque body would be copied instead: net/http's Request.Write hands the writer the
// body inside an io.LimitedReader of its Content-Length, which hides a bytes.Reader's
// WriteTo, so the connection's ReadFrom copies it through a fresh 32 kB buffer, a system
// call each: for a 620 kB prompt, 20 writes and a copy of every byte.
type Body struct {
	parts [][]byte // what is left to read; no part is empty
	held  [2][]byte
}

// NewBody is a Body of parts, which it does not copy: they must not change until the
// request is done.
func NewBody(parts ...[]byte) *Body {
	b := &Body{}
	b.parts = b.held[:0] // the body and its parts in one allocation when there are two at most
	for _, p := range parts {
		if len(p) > 0 {
			b.parts = append(b.parts, p)
		}
	}
	return b
}

// Len is how many bytes are left to read.
func (b *Body) Len() int64 {
	n := 0
	for _, p := range b.parts {
		n += len(p)
	}
	return int64(n)
}

func (b *Body) Read(p []byte) (int, error) {
	if len(b.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, b.parts[0])
	if b.parts[0] = b.parts[0][n:]; len(b.parts[0]) == 0 {
		b.parts = b.parts[1:]
	}
	return n, nil
}

// Close does nothing: the parts are the caller's.
func (b *Body) Close() error { return nil }

// reqWriter is what a request is written to: the connection's buffered writer, which
// takes a Body larger than its free space (see Body) as the headers' flush and one
// writev of the parts.
type reqWriter struct {
	*bufio.Writer
	c *conn
}

// ReadFrom writes the body net/http hands over: a Body of exactly the limit's length from
// its parts, anything else through the buffered writer.
func (w reqWriter) ReadFrom(r io.Reader) (int64, error) {
	lr, ok := r.(*io.LimitedReader)
	if !ok {
		return w.Writer.ReadFrom(r)
	}
	b, ok := lr.R.(*Body)
	if !ok || b.Len() != lr.N {
		return w.Writer.ReadFrom(r)
	}
	n, err := w.body(b)
	lr.N -= n
	return n, err
}

// body writes b's parts: into the buffer after the headers when they fit in it, and
// otherwise as the headers' flush and one writev of the parts.
func (w reqWriter) body(b *Body) (int64, error) {
	if b.Len() <= int64(w.Available()) {
		var n int64
		for _, p := range b.parts {
			m, err := w.Write(p) // fits: only an earlier flush's error comes back
			if n += int64(m); err != nil {
				return n, err
			}
		}
		b.parts = nil
		return n, nil
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	bufs := net.Buffers(b.parts)
	b.parts = nil
	w.c.wrote = true
	return bufs.WriteTo(w.c.Conn)
}

// Package sized holds the reader of an HTTP body of a declared length (Content-Length),
// as net/http's reads one: the last bytes come with io.EOF, and a connection that ends
// before the declared length ends the body in io.ErrUnexpectedEOF. The engine transport
// and the monitor read answers without http.ReadResponse, and read their bodies with it.
package sized

import "io"

// Body reads exactly its declared length from r.
type Body struct {
	r    io.Reader
	left int64
}

// New is the body of n bytes that r holds next.
func New(r io.Reader, n int64) *Body { return &Body{r: r, left: n} }

func (b *Body) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, io.EOF
	}
	n, err := b.r.Read(p[:min(int64(len(p)), b.left)])
	b.left -= int64(n)
	switch {
	case b.left == 0:
		return n, io.EOF
	case err == io.EOF:
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

// Close does nothing: whoever reads the body decides its connection's fate.
func (b *Body) Close() error { return nil }

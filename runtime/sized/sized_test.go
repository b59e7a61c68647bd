package sized

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// A body reads its declared length and no more, the last bytes with io.EOF; a source
// that ends first ends it in io.ErrUnexpectedEOF; read a byte at a time, it is the same.
func TestBody(t *testing.T) {
	for _, tc := range []struct {
		src     string
		n       int64
		want    string
		wantErr error
	}{
		{"hello, and the next answer", 5, "hello", nil},
		{"hel", 5, "hel", io.ErrUnexpectedEOF},
		{"anything", 0, "", nil},
	} {
		for _, src := range []io.Reader{strings.NewReader(tc.src), iotest.OneByteReader(strings.NewReader(tc.src))} {
			b, err := io.ReadAll(New(src, tc.n))
			if string(b) != tc.want || !errors.Is(err, tc.wantErr) {
				t.Errorf("%q, %d bytes: read %q, %v; want %q, %v", tc.src, tc.n, b, err, tc.want, tc.wantErr)
			}
		}
	}
	b := New(strings.NewReader("ab"), 2)
	if n, err := b.Read(make([]byte, 8)); n != 2 || err != io.EOF {
		t.Errorf("the last bytes: %d, %v; want 2 with io.EOF", n, err)
	}
	if err := iotest.TestReader(New(strings.NewReader("0123456789tail"), 10), []byte("0123456789")); err != nil {
		t.Error(err)
	}
}

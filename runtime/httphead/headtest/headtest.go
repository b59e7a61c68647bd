// Package headtest runs the tables and fuzz targets that hold the router's in-place head
// readers (the client server's requests, the engine transport's answers) to net/http's
// readings of the same bytes.
package headtest

import (
	"io"
	"reflect"
	"testing"
)

// Case is one head, with what follows it: whether the in-place reader takes it itself,
// rather than leaving it to net/http.
type Case struct {
	Name, Raw string
	Plain     bool
}

// Run checks each case: plain reports whether the in-place reader takes the bytes, and
// what ours and net/http's readings saw of them must be equal.
func Run[T any](t *testing.T, cases []Case, plain func([]byte) bool, ours, theirs func([]byte) T) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			if got := plain([]byte(tc.Raw)); got != tc.Plain {
				t.Errorf("taken by the in-place reader: %v, want %v", got, tc.Plain)
			}
			Same(t, []byte(tc.Raw), ours, theirs)
		})
	}
}

// Same fails t when ours and net/http's readings of raw differ.
func Same[T any](t *testing.T, raw []byte, ours, theirs func([]byte) T) {
	t.Helper()
	if o, n := ours(raw), theirs(raw); !reflect.DeepEqual(o, n) {
		t.Fatalf("for %q ours read\n%+v\nnet/http's\n%+v", raw, o, n)
	}
}

// Rest is what a reading left to read: its body, the error that ended the body, and what
// followed in the reader.
type Rest struct{ Body, BodyErr, Left string }

// ReadRest reads body to its end, then what is left in r.
func ReadRest(body, r io.Reader) Rest {
	b, err := io.ReadAll(body)
	rest := Rest{Body: string(b)}
	if err != nil {
		rest.BodyErr = err.Error()
	}
	left, _ := io.ReadAll(r)
	rest.Left = string(left)
	return rest
}

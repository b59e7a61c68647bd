package arena

import (
	"bytes"
	"testing"
)

// Slices lent by one Bytes never share bytes, appending past a slice's capacity leaves
// its neighbour alone, and after Release the chunks are lent again.
func TestAllocDoesNotOverlap(t *testing.T) {
	s := Get()
	var lent [][]byte
	for i, n := range []int{10, 3000, minChunk, 1, maxChunk + 5, 700, 0, 64} {
		b := s.Alloc(n)
		if len(b) != 0 || cap(b) != n {
			t.Fatalf("Alloc(%d): len %d cap %d", n, len(b), cap(b))
		}
		b = append(b, bytes.Repeat([]byte{byte('a' + i)}, n)...)
		lent = append(lent, b)
	}
	grown := append(lent[0], 'x') // past its capacity: a new array
	for i, b := range lent {
		if !bytes.Equal(b, bytes.Repeat([]byte{byte('a' + i)}, len(b))) {
			t.Fatalf("slice %d was overwritten", i)
		}
	}
	if &grown[0] == &lent[0][0] {
		t.Fatal("append past the capacity wrote in place")
	}
	s.Release()
	if s.next != 0 || len(s.chunks) == 0 {
		t.Fatalf("after Release: next %d, %d chunks kept", s.next, len(s.chunks))
	}
}

// A pooled Bytes keeps at most maxKept bytes of chunks, however much one request took.
func TestReleaseKeepsAtMostMaxKept(t *testing.T) {
	s := new(Bytes)
	for range 10 {
		s.Alloc(maxChunk)
	}
	s.Release()
	kept := 0
	for _, c := range s.chunks {
		kept += cap(c)
	}
	if kept > maxKept || kept == 0 {
		t.Fatalf("kept %d bytes, bound %d", kept, maxKept)
	}
}

// Poison overwrites what Release takes back; the nil Bytes allocates.
func TestPoisonAndNil(t *testing.T) {
	Poison(true)
	defer Poison(false)
	s := new(Bytes)
	b := append(s.Alloc(5), "hello"...)
	s.Release()
	if string(b) == "hello" {
		t.Fatal("released bytes not poisoned")
	}
	var none *Bytes
	if b := none.Alloc(7); cap(b) != 7 {
		t.Fatalf("nil Bytes: cap %d", cap(b))
	}
	none.Release()
}

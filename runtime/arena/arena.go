// Package arena lends a request the memory of its large temporary texts: the decoded
// strings of a chat body and the chat template's rendered prompt, which a 128k-token
// conversation makes about 1.2 MB of on every turn and drops when its ids are computed.
// Fresh memory of that size costs more than its copy: the collector runs more often, and
// pages the runtime returned to the kernel fault back in (measured in
// docs/benchmarks.md, "Long prompts with a real tokenizer, and end to end"). A Bytes is
// taken from a pool for one request, cut into slices by Alloc, and given back by Release
// once nothing reads what was cut from it.
package arena

import (
	"os"
	"sync"
	"sync/atomic"
)

const (
	// minChunk is the first chunk's size: a short request's few escaped strings fit.
	minChunk = 16 << 10
	// maxChunk bounds how far chunks grow by doubling; a larger Alloc gets a chunk of
	// its own size.
	maxChunk = 4 << 20
	// maxKept is the most a pooled Bytes keeps across requests: a larger request's
	// chunks beyond it go to the collector.
	maxKept = 16 << 20
)

// Bytes lends slices of a few large chunks. It is not safe for concurrent use: a request
// uses its own. The nil *Bytes allocates every slice anew, for callers without one.
type Bytes struct {
	// chunks[:next] are in use, each of length the bytes lent from it; chunks[next:] are
	// empty ones kept from earlier requests.
	chunks [][]byte
	next   int
}

var pool = sync.Pool{New: func() any { return new(Bytes) }}

// off turns arenas off (ROUTER_REQUEST_ARENA=off in the environment): Get returns nil,
// and every slice is allocated as it was before them.
var off = os.Getenv("ROUTER_REQUEST_ARENA") == "off"

// Get returns an empty Bytes from the pool, or nil when arenas are off.
func Get() *Bytes {
	if off {
		return nil
	}
	return pool.Get().(*Bytes)
}

// Alloc returns a slice of length 0 and capacity n. Appending beyond n reallocates, as
// for any slice, and never reaches another slice's bytes.
func (s *Bytes) Alloc(n int) []byte {
	if s == nil || n <= 0 {
		return make([]byte, 0, n)
	}
	if s.next > 0 {
		if c := s.chunks[s.next-1]; cap(c)-len(c) >= n {
			s.chunks[s.next-1] = c[:len(c)+n]
			return c[len(c) : len(c) : len(c)+n]
		}
	}
	if s.next == len(s.chunks) {
		s.chunks = append(s.chunks, nil)
	}
	if cap(s.chunks[s.next]) < n {
		size := minChunk
		if s.next > 0 {
			size = min(2*cap(s.chunks[s.next-1]), maxChunk)
		}
		s.chunks[s.next] = make([]byte, 0, max(size, n))
	}
	c := s.chunks[s.next][:n]
	s.chunks[s.next] = c
	s.next++
	return c[:0:n]
}

// poison makes Release overwrite what was lent (see Poison).
var poison atomic.Bool

// Poison makes every Release overwrite the bytes it takes back, so that a test reading a
// string after its request released it reads garbage instead of what it expects.
func Poison(on bool) { poison.Store(on) }

// Release gives s back to the pool: nothing cut from it may be read afterwards. Chunks
// beyond maxKept bytes are dropped.
func (s *Bytes) Release() {
	if s == nil {
		return
	}
	kept := 0
	for i, c := range s.chunks {
		if i < s.next && poison.Load() {
			for j := range c {
				c[j] = 0xA5
			}
		}
		if kept += cap(c); kept > maxKept {
			clear(s.chunks[i:])
			s.chunks = s.chunks[:i]
			break
		}
		s.chunks[i] = c[:0]
	}
	s.next = 0
	pool.Put(s)
}

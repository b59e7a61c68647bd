package token

import (
	"math/bits"
	"sync"
)

// The ids of a long prompt are megabytes (a 128k-token conversation with Qwen's
// vocabulary is 750k ids, 3 MB), and a fresh slice of that size costs more to zero and
// fault in than copying the cached ids into it. Encoders take their result from IDs and
// the server hands it back with Recycle when the request is over, so a busy router reuses
// a few warm buffers. The pool is a sync.Pool per power of two: the garbage collector
// empties it, so it holds nothing for long.

// minPooledClass is the smallest pooled capacity, 2^14 ids (64 KiB): shorter results are
// cheaper to allocate than to pool.
const minPooledClass = 14

// maxPooledClass is the largest pooled capacity, 2^24 ids (64 MiB); larger results are
// left to the garbage collector.
const maxPooledClass = 24

var idPools [maxPooledClass + 1]sync.Pool // of *[]uint32, class c holding capacities in [2^c, 2^(c+1))

// IDs returns an empty slice with room for at least n ids, reused from an earlier request
// when one was recycled.
func IDs(n int) []uint32 {
	if n <= 1<<minPooledClass {
		return make([]uint32, 0, n)
	}
	c := bits.Len(uint(n - 1)) // 2^c >= n
	if c > maxPooledClass {
		return make([]uint32, 0, n)
	}
	if p, ok := idPools[c].Get().(*[]uint32); ok {
		return (*p)[:0]
	}
	// A whole class's capacity, so that the same prompt's next turn finds it in the pool.
	return make([]uint32, 0, 1<<c)
}

// Recycle hands back the result of an encoder for reuse by IDs. The caller must hold the
// only reference: nothing may read ids afterwards.
func Recycle(ids []uint32) {
	c := bits.Len(uint(cap(ids))) - 1 // 2^c <= cap
	if c < minPooledClass || c > maxPooledClass {
		return
	}
	ids = ids[:0]
	idPools[c].Put(&ids)
}

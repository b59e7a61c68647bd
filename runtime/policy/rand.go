package policy

import (
	"math/rand/v2"
	"sync"
)

// Rand is the randomness a policy draws from. Implementations must be safe for concurrent
// use, since one policy instance serves concurrent requests.
type Rand interface {
	// IntN returns a uniform integer in [0, n); n > 0.
	IntN(n int) int
}

// sharedRand draws from math/rand/v2's process-wide source, which is safe for concurrent
// use without a shared lock.
type sharedRand struct{}

func (sharedRand) IntN(n int) int { return rand.IntN(n) }

// NewSeededRand returns a concurrency-safe Rand whose sequence is fixed by seed, for
// repeatable selections (`router explain --seed`, tests).
func NewSeededRand(seed uint64) Rand {
	return &seededRand{r: rand.New(rand.NewPCG(seed, seed))}
}

type seededRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func (s *seededRand) IntN(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.r.IntN(n)
}

// leastRandomTie returns the index of a least of n elements under compare, which
// compares two by their indices, choosing uniformly among the elements tied for least: a
// fixed tie-break, such as the first by id, would send every request to one engine while
// loads tie (upstream smg#1714). n must not be 0. Indices, not pointers, go to compare:
// a pointer handed to a function value escapes, and with it the caller's stack buffer of
// candidates.
func leastRandomTie(n int, compare func(i, j int) int, rnd Rand) int {
	best, ties := 0, 1
	for i := 1; i < n; i++ {
		switch c := compare(i, best); {
		case c < 0:
			best, ties = i, 1
		case c == 0:
			ties++
		}
	}
	if ties == 1 {
		return best
	}
	// Every element tied with the final best comes at or after it: those before it were
	// greater than some later element.
	nth := rnd.IntN(ties)
	for i := best; ; i++ {
		if compare(i, best) == 0 {
			if nth == 0 {
				return i
			}
			nth--
		}
	}
}

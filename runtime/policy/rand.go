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

package server

import (
	"sort"
	"sync"
)

// recent is a ring of the last decisions.
type recent struct {
	mu   sync.Mutex
	buf  []Decision
	next int
	full bool
}

func newRecent(n int) *recent { return &recent{buf: make([]Decision, n)} }

func (r *recent) add(d *Decision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf[r.next] = *d
	r.next = (r.next + 1) % len(r.buf)
	r.full = r.full || r.next == 0
}

// list returns the decisions newest first, with their engines and reasons.
func (r *recent) list() []Decision {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.next
	if r.full {
		n = len(r.buf)
	}
	out := make([]Decision, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, r.buf[(r.next-i+len(r.buf))%len(r.buf)])
		out[len(out)-1].expand()
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.After(out[j].Time) })
	return out
}

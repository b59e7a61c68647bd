package affinity

import (
	"strconv"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/state/affinity/redistest"
)

// BenchmarkBindings measures a reused binding's cost per pick (Get, then Touch) and a
// first binding's (CompareAndBind), in memory and against a real redis-server on
// loopback.
func BenchmarkBindings(b *testing.B) {
	rs := redistest.Start(b)
	r := NewRemote(planBindings(rs.Addr()), nil)
	b.Cleanup(func() { r.client.Close() })
	for _, tc := range []struct {
		name string
		s    Bindings
	}{
		{"memory", NewStore(time.Minute, nil)},
		{"redis", NewShared(r, NewStore(time.Minute, nil), "session")},
	} {
		tc.s.CompareAndBind(k1, "", "E")
		b.Run(tc.name+"/reuse", func(b *testing.B) {
			for b.Loop() {
				if e, ok := tc.s.Get(k1); !ok || !tc.s.Touch(k1, e) {
					b.Fatal("binding lost")
				}
			}
		})
		b.Run(tc.name+"/first_bind", func(b *testing.B) {
			i := 0
			for b.Loop() {
				k := k1
				k.Value = strconv.Itoa(i)
				i++
				tc.s.CompareAndBind(k, "", "E")
			}
		})
	}
}

// BenchmarkPrefixes measures the shared prefix claims against a real redis-server on
// loopback: a lookup and a claim of a 2048-token prompt (16 checkpoints of 128 tokens)
// and of a 16k-token one (128).
func BenchmarkPrefixes(b *testing.B) {
	rs := redistest.Start(b)
	r := NewRemote(planBindings(rs.Addr()), nil)
	b.Cleanup(func() { r.client.Close() })
	p := NewPrefixes(r, time.Minute)
	for _, n := range []int{16, 128} {
		cps := make([]int64, n)
		for i := range cps {
			cps[i] = int64(i*7919 + n)
		}
		p.Claim("E1", cps)
		b.Run(strconv.Itoa(n)+"/lookup", func(b *testing.B) {
			for b.Loop() {
				if hs, ok := p.Holders(cps); !ok || len(hs[n-1]) != 1 {
					b.Fatal("claims lost")
				}
			}
		})
		b.Run(strconv.Itoa(n)+"/claim", func(b *testing.B) {
			for b.Loop() {
				p.Claim("E1", cps)
			}
		})
	}
}

package hf

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// next finds the leftmost-longest added token, tokens of one, two and three bytes or
// more sharing first bytes among them, as trying every token at every position finds it.
func TestAddedSetLeftmostLongest(t *testing.T) {
	contents := []string{"<", "<a", "<ab", "<abc", "<abd", "<abcd", "ab", "x", "bcd", "<|a|>"}
	toks := make([]addedToken, len(contents))
	for i, c := range contents {
		toks[i] = addedToken{content: c, id: uint32(i)}
	}
	a := newAddedSet(toks)
	one := newAddedSet(toks[len(toks)-1:]) // a single first byte: the IndexByte path
	brute := func(toks []addedToken, s string, from int) (int, int, int) {
		for i := from; i < len(s); i++ {
			best := -1
			for k, t := range toks {
				if strings.HasPrefix(s[i:], t.content) && (best < 0 || len(t.content) > len(toks[best].content)) {
					best = k
				}
			}
			if best >= 0 {
				return i, i + len(toks[best].content), best
			}
		}
		return -1, 0, 0
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 20_000 {
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = "<|abcdx"[rng.IntN(7)]
		}
		s := string(b)
		for from := 0; from <= len(s); from++ {
			for _, set := range []struct {
				a    *addedSet
				toks []addedToken
			}{{a, toks}, {one, toks[len(toks)-1:]}} {
				gs, ge, gk := set.a.next(s, from)
				ws, we, wk := brute(set.toks, s, from)
				if gs != ws || gs >= 0 && (ge != we || gk != wk) {
					t.Fatalf("next(%q, %d) = %d, %d, %d; want %d, %d, %d", s, from, gs, ge, gk, ws, we, wk)
				}
			}
		}
	}
}

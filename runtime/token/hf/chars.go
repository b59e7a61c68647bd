package hf

import (
	"math"
	"unicode/utf8"
)

// charTable holds the characters of two or three UTF-8 bytes that merging may take as
// their token from the start, as when a pre-token is one character, instead of as their
// bytes. A Chinese or Japanese character is three bytes, and merging its bytes into its
// token costs some six lookups in the table of merges (and as many cache misses on text
// never seen before): taking it whole makes the merging of a run of such characters,
// which is one pre-token, about three times shorter.
//
// It is exact for the characters it holds, in a monotone vocabulary, between two
// letters (see premerge). Merging a character c in isolation, from its bytes to its
// token T, does merges up to some rank R. Its left part is every symbol of that merging
// that starts where c starts and ends inside it (its first byte among them), its right
// part every one that ends where c ends and starts inside it. c is held when every merge
// of a left part with a symbol before it, or of a right part with one after it, ranks
// above R, counting only the symbols that can stand before or after c when c's
// neighbours are letters: those that end (or start) with a whole letter, or with a piece
// of one. Then, in a monotone vocabulary, where merges are done in rank order, the
// merges of c's bytes are done, up to R, exactly as in isolation, and nothing merges
// with a part of c: whichever merges at ranks above R follow find T, as they do when c
// is taken as T from the start (every merge that uses T ranks above R, since merges
// that make T rank before merges that use it). TestCharsExact and FuzzCharsExact compare
// merging with and without the table.
type charTable struct {
	// block holds, for each block of 256 characters, its index in ids, 0 for a block
	// of none (the first block of ids is unused); ids, for each character of a block,
	// its token's id + 1, or 0 when it is not held.
	block [256]uint16
	ids   []uint32
}

// get returns the token of r and whether the table holds r.
func (t *charTable) get(r rune) (uint32, bool) {
	if r >= 1<<16 {
		return 0, false
	}
	k := t.block[r>>8]
	if k == 0 {
		return 0, false
	}
	v := t.ids[int(k)<<8|int(r&0xFF)]
	return v - 1, v != 0
}

func (t *charTable) put(r rune, id uint32) {
	k := t.block[r>>8]
	if k == 0 {
		if len(t.ids) == 0 {
			t.ids = make([]uint32, 256) // the unused block 0
		}
		k = uint16(len(t.ids) >> 8)
		t.block[r>>8] = k
		t.ids = append(t.ids, make([]uint32, 256)...)
	}
	t.ids[int(k)<<8|int(r&0xFF)] = id + 1
}

// Flags of a vocabulary entry's bytes, for the symbols that can stand next to a
// character whose neighbours are letters: canEnd, the entry can end just before such a
// character (it ends with a letter, or is at most three continuation bytes, the end of
// one); canStart, the entry can start just after such a character (it starts with a
// letter, or is the incomplete start of a character).
const (
	canEnd = 1 << iota
	canStart
)

// edgeFlags returns b's flags.
func edgeFlags(b []byte) uint8 {
	var f uint8
	if r, n := utf8.DecodeLastRune(b); r != utf8.RuneError || n > 1 {
		if isLetter(r) {
			f |= canEnd
		}
	} else if len(b) <= 3 && !hasStarter(b) {
		f |= canEnd
	}
	switch r, n := utf8.DecodeRune(b); {
	case r != utf8.RuneError || n > 1:
		if isLetter(r) {
			f |= canStart
		}
	case utf8.RuneStart(b[0]) && !utf8.FullRune(b):
		f |= canStart // the incomplete start of a character
	}
	return f
}

// hasStarter reports whether b has a byte that can start a character.
func hasStarter(b []byte) bool {
	for _, c := range b {
		if utf8.RuneStart(c) {
			return true
		}
	}
	return false
}

// newCharTable returns the table of the characters of vocab that premerge may take
// whole, or nil when there are none or the vocabulary is not monotone. It is called once
// the merges are in m, before m.chars is set.
func (m *model) newCharTable(vocab map[string]uint32) *charTable {
	if !m.monotone {
		return nil
	}
	size := 0
	for _, id := range vocab {
		size = max(size, int(id)+1)
	}
	if size > maxID {
		return nil // Load refuses such a vocabulary
	}
	// Each entry's flags, and the characters to look at with their tokens.
	flags := make([]uint8, size)
	var chars []charToken
	var buf []byte
	for tok, id := range vocab {
		var ok bool
		if buf, ok = appendUnByteLevel(buf[:0], tok); !ok || len(buf) == 0 {
			continue
		}
		flags[id] = edgeFlags(buf)
		if r, n := utf8.DecodeRune(buf); n == len(buf) && (n == 2 || n == 3) && r != utf8.RuneError {
			chars = append(chars, charToken{r, id})
		}
	}
	// The lowest rank at which each entry merges with a symbol before it (as the right
	// part) that can end before a letter, and with one after it that can start after one.
	asRight, asLeft := make([]uint32, size), make([]uint32, size)
	for i := range asRight {
		asRight[i], asLeft[i] = math.MaxUint32, math.MaxUint32
	}
	m.merges.each(func(key, val uint64) {
		a, b, rank := uint32(key>>32), uint32(key), uint32(val>>32)
		if flags[a]&canEnd != 0 {
			asRight[b] = min(asRight[b], rank)
		}
		if flags[b]&canStart != 0 {
			asLeft[a] = min(asLeft[a], rank)
		}
	})
	t := new(charTable)
	held := 0
	for _, c := range chars {
		if m.charSafe(c, asRight, asLeft) {
			t.put(c.r, c.id)
			held++
		}
	}
	if held == 0 {
		return nil
	}
	return t
}

// charToken is a character and the id of the vocabulary entry that is its bytes.
type charToken struct {
	r  rune
	id uint32
}

// charSafe reports whether c may be held by the table: merged alone, its bytes become
// its token, and no merge of its left or right part with a neighbour comes before the
// last of those merges (see charTable).
func (m *model) charSafe(c charToken, asRight, asLeft []uint32) bool {
	var b [utf8.UTFMax]byte
	n := utf8.EncodeRune(b[:], c.r)
	type sym struct {
		id         uint32
		start, end int
	}
	var syms [utf8.UTFMax]sym
	for i := range n {
		syms[i] = sym{m.byteID[b[i]], i, i + 1}
	}
	// The left and right parts: the first and last bytes, and at most two merges each.
	left, right := make([]uint32, 1, n), make([]uint32, 1, n)
	left[0], right[0] = syms[0].id, syms[n-1].id
	last := uint32(0) // the rank of the last merge
	for k := n; k > 1; k-- {
		best, bi := uint64(noMerge), -1
		for i := 0; i+1 < k; i++ {
			if v := m.pair(syms[i].id, syms[i+1].id); v < best {
				best, bi = v, i
			}
		}
		if bi < 0 {
			return false // not one token
		}
		s := sym{uint32(best), syms[bi].start, syms[bi+1].end}
		copy(syms[bi+1:k-1], syms[bi+2:k])
		syms[bi] = s
		last = uint32(best >> 32)
		switch {
		case s.start == 0 && s.end < n:
			left = append(left, s.id)
		case s.end == n && s.start > 0:
			right = append(right, s.id)
		}
	}
	if syms[0].id != c.id {
		return false
	}
	for _, s := range left {
		if asRight[s] < last {
			return false
		}
	}
	for _, s := range right {
		if asLeft[s] < last {
			return false
		}
	}
	return true
}

// premerge appends to syms the symbols that merging p starts from: its bytes, but for
// each character the table holds whose neighbours in p are letters or absent, which is
// its token.
func (m *model) premerge(syms []uint32, p string) []uint32 {
	t := m.chars
	if t == nil {
		for i := 0; i < len(p); i++ {
			syms = append(syms, m.byteID[p[i]])
		}
		return syms
	}
	prevLetter := true // nothing before p[0]
	// r, n and letter are the character at p[i:], decoded once: a character's next
	// neighbour is decoded for it, and is the next character.
	var r rune
	n, letter := 0, false
	if len(p) > 0 && p[0] >= utf8.RuneSelf {
		r, n = decodeAt(p, 0)
		letter = isLetter(r)
	}
	for i := 0; i < len(p); {
		if c := p[i]; c < utf8.RuneSelf {
			syms = append(syms, m.byteID[c])
			prevLetter = asciiClass[c] == cLetter
			i++
			if i < len(p) && p[i] >= utf8.RuneSelf {
				r, n = decodeAt(p, i)
				letter = isLetter(r)
			}
			continue
		}
		cr, cn, cletter := r, n, letter
		nextLetter := true // nothing after p
		if j := i + cn; j < len(p) {
			if c := p[j]; c < utf8.RuneSelf {
				nextLetter = asciiClass[c] == cLetter
			} else {
				r, n = decodeAt(p, j)
				letter = isLetter(r)
				nextLetter = letter
			}
		}
		if id, ok := t.get(cr); ok && cn > 1 && prevLetter && nextLetter {
			syms = append(syms, id)
		} else {
			for k := i; k < i+cn; k++ {
				syms = append(syms, m.byteID[p[k]])
			}
		}
		prevLetter = cletter
		i += cn
	}
	return syms
}

package hf

import (
	"math"
	"strings"
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
// that make T rank before merges that use it).
//
// A character for which some of those merges rank below R is held too, with rules, when
// they are few (maxCharRules): the symbols of those merges, as bytes, that must not end
// the text just before it or start the text just after it (ruleText). A symbol stands
// next to c only where the text there is its bytes, so where none of them is, none of
// those merges can be done, and the argument above holds for that occurrence of c. Most
// Chinese
// characters that are not safe everywhere are so for one or two rare neighbours (你
// followed by 除, which Qwen3 merges with 你's last byte first). TestCharsExact,
// TestCharRules and FuzzCharsExact compare merging with and without the table.
type charTable struct {
	// block holds, for each block of 256 characters, its index in ids, 0 for a block
	// of none (the first block of ids is unused); ids, for each character of a block,
	// its token's id + 1, or ruledChar | its index in ruled for a character held with
	// rules, or 0 when it is not held.
	block [256]uint16
	ids   []uint32
	ruled []ruledToken
	// ruleText holds the rules of the characters of ruled, each a byte that says
	// whether it is for the text before the character or after (ruleAfter) and its
	// length, then the string. One string for all keeps them in a few KB.
	ruleText string
}

// ruledToken is the token of a character held with rules, and its rules'
// ruleText[start:end].
type ruledToken struct{ id, start, end uint32 }

const (
	ruledChar = 1 << 31 // an entry of ids that indexes ruled; ids are below maxID
	ruleAfter = 0x80    // the rule's string must not start the text after the character
)

// get returns the token of r, the rules under which the table holds it ("" for none),
// and whether the table holds r.
func (t *charTable) get(r rune) (id uint32, rules string, ok bool) {
	if r >= 1<<16 {
		return 0, "", false
	}
	k := t.block[r>>8]
	if k == 0 {
		return 0, "", false
	}
	v := t.ids[int(k)<<8|int(r&0xFF)]
	if v&ruledChar != 0 {
		rt := t.ruled[v&^ruledChar]
		return rt.id, t.ruleText[rt.start:rt.end], true
	}
	return v - 1, "", v != 0
}

// allows reports whether rules let premerge take the character at p[i:j] whole: no
// rule's string ends p[:i] or starts p[j:], as the rule says.
func allows(rules, p string, i, j int) bool {
	for len(rules) > 0 {
		var s string
		var after bool
		s, after, rules = nextRule(rules)
		if after && strings.HasPrefix(p[j:], s) || !after && strings.HasSuffix(p[:i], s) {
			return false
		}
	}
	return true
}

// nextRule returns the string of the first of rules, whether it is for the text after
// the character, and the rules after it.
func nextRule(rules string) (s string, after bool, rest string) {
	h := rules[0]
	s = rules[1 : 1+h&^ruleAfter]
	return s, h&ruleAfter != 0, rules[1+len(s):]
}

// put sets r's entry of ids to v.
func (t *charTable) put(r rune, v uint32) {
	k := t.block[r>>8]
	if k == 0 {
		if len(t.ids) == 0 {
			t.ids = make([]uint32, 256) // the unused block 0
		}
		k = uint16(len(t.ids) >> 8)
		t.block[r>>8] = k
		t.ids = append(t.ids, make([]uint32, 256)...)
	}
	t.ids[int(k)<<8|int(r&0xFF)] = v
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

// newCharTable returns the table of the characters of the vocabulary that premerge may
// take whole, or nil when there are none or the vocabulary is not monotone. entries are
// the spans in blob of the vocabulary's byte-level entries by id, noSpan for others (see
// setVocab). It is called once the merges are in m, before m.chars is set.
func (m *model) newCharTable(entries []uint64, blob []byte) *charTable {
	if !m.monotone {
		return nil
	}
	bytesOf := func(id uint32) []byte { return blob[entries[id]>>32 : uint32(entries[id])] }
	// Each entry's flags, and the characters to look at with their tokens.
	flags := make([]uint8, len(entries))
	var chars []charToken
	for id, span := range entries {
		if span == noSpan || uint32(span) == uint32(span>>32) {
			continue
		}
		b := bytesOf(uint32(id))
		flags[id] = edgeFlags(b)
		if r, n := utf8.DecodeRune(b); n == len(b) && (n == 2 || n == 3) && r != utf8.RuneError {
			chars = append(chars, charToken{r, uint32(id)})
		}
	}
	// The lowest rank at which each entry merges with a symbol before it (as the right
	// part) that can end before a letter, and with one after it that can start after one.
	asRight, asLeft := make([]uint32, len(entries)), make([]uint32, len(entries))
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
	// The characters safe but for some merges with their neighbours, and for each
	// part, the highest rank below which such a character needs its merges (0: none).
	var ruled []charParts
	needRight, needLeft := make([]uint32, len(entries)), make([]uint32, len(entries))
	for _, c := range chars {
		cp, ok := m.charParts(c)
		if !ok {
			continue
		}
		safe := true
		for _, s := range cp.left.all() {
			if asRight[s] < cp.last {
				safe = false
				needRight[s] = max(needRight[s], cp.last)
			}
		}
		for _, s := range cp.right.all() {
			if asLeft[s] < cp.last {
				safe = false
				needLeft[s] = max(needLeft[s], cp.last)
			}
		}
		if safe {
			t.put(c.r, c.id+1)
		} else {
			ruled = append(ruled, cp)
		}
	}
	// The merges that make those characters unsafe, by part: the maxCharRules+1 of
	// lowest rank, which tell whether a character has more than maxCharRules.
	before, after := map[uint32][]rankedID{}, map[uint32][]rankedID{}
	m.merges.each(func(key, val uint64) {
		a, b, rank := uint32(key>>32), uint32(key), uint32(val>>32)
		if flags[a]&canEnd != 0 && rank < needRight[b] {
			before[b] = keepLowest(before[b], rankedID{a, rank})
		}
		if flags[b]&canStart != 0 && rank < needLeft[a] {
			after[a] = keepLowest(after[a], rankedID{b, rank})
		}
	})
	var text []byte // ruleText
	for _, cp := range ruled {
		start, n := len(text), 0
		add := func(h byte, id uint32) {
			b := bytesOf(id)
			if len(b) >= ruleAfter {
				n = maxCharRules + 1 // a rule's length is seven bits
			}
			text, n = append(append(text, h|byte(len(b))), b...), n+1
		}
		for _, s := range cp.left.all() {
			for _, x := range before[s] {
				if x.rank < cp.last {
					add(0, x.id)
				}
			}
		}
		for _, s := range cp.right.all() {
			for _, y := range after[s] {
				if y.rank < cp.last {
					add(ruleAfter, y.id)
				}
			}
		}
		if n > maxCharRules {
			text = text[:start]
			continue
		}
		t.put(cp.r, ruledChar|uint32(len(t.ruled)))
		t.ruled = append(t.ruled, ruledToken{cp.id, uint32(start), uint32(len(text))})
	}
	t.ruleText = string(text)
	if len(t.ids) == 0 {
		return nil
	}
	return t
}

// maxCharRules bounds the rules of a character the table holds where they allow: each
// costs a comparison with the text around every occurrence.
const maxCharRules = 8

// rankedID is a vocabulary entry and the rank of a merge it takes part in.
type rankedID struct{ id, rank uint32 }

// keepLowest adds x to l, keeping the maxCharRules+1 of lowest rank.
func keepLowest(l []rankedID, x rankedID) []rankedID {
	if len(l) <= maxCharRules {
		return append(l, x)
	}
	hi := 0
	for i := range l {
		if l[i].rank > l[hi].rank {
			hi = i
		}
	}
	if x.rank < l[hi].rank {
		l[hi] = x
	}
	return l
}

// charToken is a character and the id of the vocabulary entry that is its bytes.
type charToken struct {
	r  rune
	id uint32
}

// charParts is what merging a character alone does: it makes its token, the last merge
// at rank last, and its left and right parts are the symbols on the way that start where
// it starts and end inside it, or end where it ends and start inside it (see charTable).
type charParts struct {
	charToken
	last        uint32
	left, right partList
}

// partList is a character's left or right parts: at most one a byte, kept in place to
// spare the 16,000 characters of a vocabulary two allocations each at load.
type partList struct {
	ids [utf8.UTFMax]uint32
	n   int
}

func (l *partList) add(id uint32) { l.ids[l.n] = id; l.n++ }
func (l *partList) all() []uint32 { return l.ids[:l.n] }

// charParts merges c's bytes alone and reports whether they become c's token.
func (m *model) charParts(c charToken) (charParts, bool) {
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
	cp := charParts{charToken: c}
	cp.left.add(syms[0].id)
	cp.right.add(syms[n-1].id)
	for k := n; k > 1; k-- {
		best, bi := uint64(noMerge), -1
		for i := 0; i+1 < k; i++ {
			if v := m.pair(syms[i].id, syms[i+1].id); v < best {
				best, bi = v, i
			}
		}
		if bi < 0 {
			return cp, false // not one token
		}
		s := sym{uint32(best), syms[bi].start, syms[bi+1].end}
		copy(syms[bi+1:k-1], syms[bi+2:k])
		syms[bi] = s
		cp.last = uint32(best >> 32)
		switch {
		case s.start == 0 && s.end < n:
			cp.left.add(s.id)
		case s.end == n && s.start > 0:
			cp.right.add(s.id)
		}
	}
	return cp, syms[0].id == c.id
}

// premerge appends to syms the symbols that merging p starts from: its bytes, but for
// each character the table holds whose neighbours in p are letters or absent, and whose
// rules, if it has any, allow it there, which is its token.
func (m *model) premerge(syms []uint32, p string) []uint32 {
	t := m.chars
	if t == nil {
		for i := 0; i < len(p); i++ {
			syms = append(syms, m.byteID[p[i]])
		}
		return syms
	}
	prevLetter := true // nothing before p[0]
	// r, n and letter are the character at p[at:]: a character's next neighbour is
	// decoded for it, and is the next character.
	var r rune
	at, n, letter := -1, 0, false
	for i := 0; i < len(p); {
		if c := p[i]; c < utf8.RuneSelf {
			syms = append(syms, m.byteID[c])
			prevLetter = asciiClass[c] == cLetter
			i++
			continue
		}
		if at != i {
			r, n = decodeAt(p, i)
			letter = isLetter(r)
		}
		cr, cn, cletter := r, n, letter
		nextLetter := true // nothing after p
		if j := i + cn; j < len(p) {
			if c := p[j]; c < utf8.RuneSelf {
				nextLetter = asciiClass[c] == cLetter
			} else {
				r, n = decodeAt(p, j)
				at, letter = j, isLetter(r)
				nextLetter = letter
			}
		}
		if id, rules, ok := t.get(cr); ok && cn > 1 && prevLetter && nextLetter && (rules == "" || allows(rules, p, i, i+cn)) {
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

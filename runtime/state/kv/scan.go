package kv

import (
	"encoding/binary"
	"math"
)

// scanBatch decodes the batches SGLang and vLLM publish straight from the msgpack bytes,
// without the generic values msgpack.Unmarshal builds: boxing every token id and hash
// in an interface was two thirds of what indexing a block cost (docs/benchmarks.md,
// "KV-event indexing cost"). It reads what decodeMessage's generic path reads and
// gives up (ok false) on anything that path would refuse or that this reader does not
// know: bigram token ids, non-string map keys, a repeated field, an extension type.
// decodeMessage then takes the generic path, so a batch the scanner gives up on is
// decoded, or refused, exactly as before; FuzzScanMatchesGeneric holds the two to the
// same events on every input the scanner reads.
//
// b need not have passed checkPayload: the scanner never allocates to a declared length
// and gives up on what checkPayload refuses (a value cut short, a declared size past the
// end, nesting deeper than maxNesting, bytes after the payload), so the check runs only
// before the generic path; FuzzScanMatchesGeneric holds it to that too.
//
// The events, hashes and token ids are read into sc's arrays when sc is not nil, and sc
// keeps them for the next batch: the events returned are valid until then.
func scanBatch(b []byte, sc *scratch) (events []Event, skipped int, ok bool) {
	s := scanner{b: b}
	if sc != nil {
		s.hashBuf, s.tokenBuf, s.eventBuf = sc.hashes[:0], sc.tokens[:0], sc.events[:0]
		defer sc.keep(&s)
	}
	var n int
	switch {
	case s.array(&n):
		if n < 2 || !s.skip() { // ts
			return nil, 0, false
		}
		events, skipped, ok = s.events()
		for i := 2; ok && i < n; i++ {
			ok = s.skip()
		}
	case s.mapHeader(&n):
		found := false
		for range n {
			key, isStr := s.str()
			switch {
			case !isStr:
				return nil, 0, false
			case string(key) == "events":
				if found {
					return nil, 0, false
				}
				found = true
				if events, skipped, ok = s.events(); !ok {
					return nil, 0, false
				}
			case !s.skip():
				return nil, 0, false
			}
		}
		ok = found
	}
	if !ok || len(s.b) > 0 {
		return nil, 0, false
	}
	return events, skipped, true
}

// scanner reads msgpack values off the front of b. The hashes and token ids of a batch's
// events share two backing arrays, grown as they are read (never to a declared length):
// the index reads them while it applies the batch and keeps none.
type scanner struct {
	b        []byte
	hashBuf  []int64
	tokenBuf []uint32
	eventBuf []Event // the array the batch's events are appended to, empty
}

// scratch is the arrays a subscription's scanner reads its batches into, kept from one
// batch to the next so that a batch allocates nothing once they have grown to fit. The
// events of a batch are applied before the next is read, and the index keeps none of
// their slices.
type scratch struct {
	events []Event
	hashes []int64
	tokens []uint32
}

// maxScratch bounds what a scratch keeps, in elements of each array: a batch larger than
// the publishers' usual ones (SGLang's and vLLM's carry tens of blocks) is read into
// arrays of its own, so one large batch does not pin its memory for good.
const maxScratch = 1 << 14

// keep takes the scanner's arrays for the next batch, each if within maxScratch.
func (sc *scratch) keep(s *scanner) {
	if cap(s.eventBuf) <= maxScratch {
		sc.events = s.eventBuf
	}
	if cap(s.hashBuf) <= maxScratch {
		sc.hashes = s.hashBuf
	}
	if cap(s.tokenBuf) <= maxScratch {
		sc.tokens = s.tokenBuf
	}
}

// events reads the batch's events: nil or an array of events.
func (s *scanner) events() (out []Event, skipped int, ok bool) {
	if s.null() {
		return nil, 0, true
	}
	var n int
	if !s.array(&n) {
		return nil, 0, false
	}
	out = s.eventBuf
	for range n {
		e, known, ok := s.event()
		if !ok {
			return nil, 0, false
		}
		if !known {
			skipped++
			continue
		}
		out = append(out, e)
	}
	if s.eventBuf = out; len(out) == 0 {
		return nil, skipped, true // as without a scratch
	}
	return out, skipped, true
}

// Fields of an event, as bits of what was read.
const (
	fHashes = 1 << iota
	fParent
	fTokens
	fSize
	fLoraID
	fMedium
	fLoraName
	fExtra
	fGroup
	fType
)

// fieldOf maps a positional index, by kind, and a map key to a field bit.
func fieldOf(kind []byte, pos int, name []byte, positional bool) int {
	if positional {
		switch string(kind) {
		case "BlockStored":
			if pos >= 1 && pos <= 9 {
				return 1 << (pos - 1)
			}
		case "BlockRemoved":
			switch pos {
			case 1:
				return fHashes
			case 2:
				return fMedium
			case 3:
				return fGroup
			}
		}
		return 0
	}
	if string(kind) == "BlockRemoved" {
		switch string(name) {
		case fieldHashes:
			return fHashes
		case fieldMedium:
			return fMedium
		case fieldGroup:
			return fGroup
		case fieldType:
			return fType
		}
		return 0
	}
	switch string(name) {
	case fieldHashes:
		return fHashes
	case fieldParent:
		return fParent
	case fieldTokens:
		return fTokens
	case fieldBlockSize:
		return fSize
	case fieldLoraID:
		return fLoraID
	case fieldMedium:
		return fMedium
	case fieldLoraName:
		return fLoraName
	case fieldExtraKeys:
		return fExtra
	case fieldGroup:
		return fGroup
	case fieldType:
		return fType
	}
	return 0
}

// event reads one event; known is false for a kind the router does not index.
func (s *scanner) event() (e Event, known, ok bool) {
	var n int
	positional := s.array(&n)
	if !positional && !s.mapHeader(&n) {
		return Event{}, false, false
	}
	var kind []byte
	start := 0
	if positional {
		var isStr bool
		if n == 0 {
			return Event{}, false, false
		}
		if kind, isStr = s.str(); !isStr {
			return Event{}, false, false
		}
		start = 1
	} else {
		// The type tag may come anywhere in a map: find it first.
		var found bool
		if kind, found = s.mapTag(n); !found {
			return Event{}, false, false
		}
	}
	switch string(kind) {
	case "BlockStored":
		e = Event{Kind: BlockStored, Medium: MediumGPU}
	case "BlockRemoved":
		e = Event{Kind: BlockRemoved, Medium: allMedia}
	case "AllBlocksCleared":
		e = Event{Kind: AllBlocksCleared}
	case "":
		return Event{}, false, false
	}
	var seen int
	hasParent := false
	for i := start; i < n; i++ {
		var name []byte
		if !positional {
			var isStr bool
			if name, isStr = s.str(); !isStr {
				return Event{}, false, false
			}
		}
		f := 0
		if e.Kind == BlockStored || e.Kind == BlockRemoved {
			f = fieldOf(kind, i, name, positional)
		}
		if f != 0 && seen&f != 0 {
			return Event{}, false, false // a repeated map key: the generic map keeps the last
		}
		seen |= f
		var good bool
		switch f {
		case 0, fType:
			good = s.skip()
		case fHashes:
			e.Hashes, good = s.hashes()
		case fParent:
			if s.null() {
				good = true
				break
			}
			e.Parent, good = s.hash()
			hasParent = good
		case fTokens:
			e.Tokens, good = s.tokens()
		case fSize:
			var v int64
			if v, good = s.integer(); good {
				e.BlockSize = int(v)
			} else {
				good = s.skip() // not an integer: no size, as asInt reads it
			}
		case fLoraID, fLoraName:
			if good = s.null(); !good {
				e.Foreign, good = true, s.skip()
			}
		case fExtra:
			var extra bool
			extra, good = s.extraKeys()
			e.Foreign = e.Foreign || extra
		case fMedium:
			if s.null() {
				good = true
				break
			}
			var m []byte
			if m, good = s.str(); good {
				absent := MediumGPU
				if e.Kind == BlockRemoved {
					absent = allMedia
				}
				e.Medium = parseMedium(string(m), absent)
			}
		case fGroup:
			if s.null() {
				good = true
				break
			}
			var g int64
			if g, good = s.integer(); good && g >= 0 {
				e.Groups = 1 << min(g, groupSlots-1)
			} else {
				good = false
			}
		}
		if !good {
			return Event{}, false, false
		}
	}
	switch e.Kind {
	case 0:
		return Event{}, false, true
	case AllBlocksCleared:
		return Event{Kind: AllBlocksCleared}, true, true
	}
	if seen&fHashes == 0 {
		return Event{}, false, false // no block_hashes: the generic path refuses it
	}
	if e.Kind == BlockStored && hasParent {
		e.HasParent = true
		e.ParentMayBeRoot = positional && e.Parent == 0
	}
	return e, true, true
}

// mapTag finds the "type" string among the next n key-value pairs without consuming them.
func (s *scanner) mapTag(n int) ([]byte, bool) {
	peek := scanner{b: s.b}
	var tag []byte
	found := false
	for range n {
		key, isStr := peek.str()
		if !isStr {
			return nil, false
		}
		if string(key) == fieldType {
			if found {
				return nil, false
			}
			if tag, isStr = peek.str(); !isStr {
				return nil, false
			}
			found = true
			continue
		}
		if !peek.skip() {
			return nil, false
		}
	}
	return tag, found && len(tag) > 0
}

// hashes reads block_hashes: an array of hashes, at most maxHashesPerEvent.
func (s *scanner) hashes() ([]int64, bool) {
	var n int
	if !s.array(&n) || n > maxHashesPerEvent {
		return nil, false
	}
	if n == 0 {
		return []int64{}, true
	}
	start := len(s.hashBuf)
	for range n {
		h, ok := s.hash()
		if !ok {
			return nil, false
		}
		s.hashBuf = append(s.hashBuf, h)
	}
	return s.hashBuf[start:len(s.hashBuf):len(s.hashBuf)], true
}

// hash reads a block hash as decodeHash does: an integer, or bytes of which the first 8.
func (s *scanner) hash() (int64, bool) {
	if v, ok := s.integer(); ok {
		return v, true
	}
	b, ok := s.bin()
	if !ok || len(b) < 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(b[:8])), true
}

// tokens reads token_ids: nil, or an array of unsigned 32-bit integers. EAGLE's bigram
// pairs are left to the generic path.
func (s *scanner) tokens() ([]uint32, bool) {
	if s.null() {
		return nil, true
	}
	var n int
	if !s.array(&n) || n > maxTokensPerEvent {
		return nil, false
	}
	if n == 0 {
		return []uint32{}, true
	}
	start := len(s.tokenBuf)
	for range n {
		v, ok := s.integer()
		if !ok || v < 0 || v > math.MaxUint32 {
			return nil, false
		}
		s.tokenBuf = append(s.tokenBuf, uint32(v))
	}
	return s.tokenBuf[start:len(s.tokenBuf):len(s.tokenBuf)], true
}

// extraKeys reads vLLM's extra_keys as anyExtraKey does: whether anything is named.
func (s *scanner) extraKeys() (extra, ok bool) {
	if s.null() {
		return false, true
	}
	var n int
	if !s.array(&n) {
		return true, s.skip()
	}
	for range n {
		if !s.null() {
			extra = true
			if !s.skip() {
				return false, false
			}
		}
	}
	return extra, true
}

// null consumes a nil.
func (s *scanner) null() bool {
	if len(s.b) > 0 && s.b[0] == 0xc0 {
		s.b = s.b[1:]
		return true
	}
	return false
}

// array consumes an array header.
func (s *scanner) array(n *int) bool { return s.container(0x90, 0xdc, 0xdd, n) }

// mapHeader consumes a map header; n is its number of pairs.
func (s *scanner) mapHeader(n *int) bool { return s.container(0x80, 0xde, 0xdf, n) }

// container consumes the header of an array or a map, whose fixed form is fix plus up
// to 15 elements and whose longer forms have the codes with 16- and 32-bit lengths.
func (s *scanner) container(fix, code16, code32 byte, n *int) bool {
	if len(s.b) == 0 {
		return false
	}
	switch c := s.b[0]; {
	case c >= fix && c <= fix|0x0f:
		*n, s.b = int(c&0x0f), s.b[1:]
		return true
	case c == code16:
		return s.length(2, n)
	case c == code32:
		return s.length(4, n)
	}
	return false
}

// length consumes a one-byte code followed by a big-endian length of size bytes.
func (s *scanner) length(size int, n *int) bool {
	if len(s.b) < 1+size {
		return false
	}
	switch size {
	case 1:
		*n = int(s.b[1])
	case 2:
		*n = int(binary.BigEndian.Uint16(s.b[1:]))
	default:
		*n = int(binary.BigEndian.Uint32(s.b[1:]))
	}
	s.b = s.b[1+size:]
	return true
}

// str consumes a string; the slice aliases the payload, so comparing it allocates
// nothing.
func (s *scanner) str() ([]byte, bool) {
	if len(s.b) > 0 && s.b[0] >= 0xa0 && s.b[0] <= 0xbf {
		n := int(s.b[0] & 0x1f)
		s.b = s.b[1:]
		return s.take(n)
	}
	return s.sized(0xd9, 0xda, 0xdb)
}

// bin consumes a byte string; the slice aliases the payload.
func (s *scanner) bin() ([]byte, bool) { return s.sized(0xc4, 0xc5, 0xc6) }

// sized consumes a string or byte string whose code gives an 8-, 16- or 32-bit length.
func (s *scanner) sized(code8, code16, code32 byte) ([]byte, bool) {
	if len(s.b) == 0 {
		return nil, false
	}
	var n int
	var ok bool
	switch s.b[0] {
	case code8:
		ok = s.length(1, &n)
	case code16:
		ok = s.length(2, &n)
	case code32:
		ok = s.length(4, &n)
	}
	if !ok {
		return nil, false
	}
	return s.take(n)
}

// take consumes the next n bytes.
func (s *scanner) take(n int) ([]byte, bool) {
	if n > len(s.b) {
		return nil, false
	}
	v := s.b[:n]
	s.b = s.b[n:]
	return v, true
}

// integer consumes an integer of any width; a uint64 above the int64 range keeps its
// bits, as asInt reads it.
func (s *scanner) integer() (int64, bool) {
	if len(s.b) == 0 {
		return 0, false
	}
	c := s.b[0]
	if c <= 0x7f {
		s.b = s.b[1:]
		return int64(c), true
	}
	if c >= 0xe0 {
		s.b = s.b[1:]
		return int64(int8(c)), true
	}
	var size int
	switch c {
	case 0xcc, 0xd0:
		size = 1
	case 0xcd, 0xd1:
		size = 2
	case 0xce, 0xd2:
		size = 4
	case 0xcf, 0xd3:
		size = 8
	}
	if size == 0 || len(s.b) < 1+size {
		return 0, false
	}
	p := s.b[1 : 1+size]
	s.b = s.b[1+size:]
	var v int64
	switch c {
	case 0xcc:
		v = int64(p[0])
	case 0xcd:
		v = int64(binary.BigEndian.Uint16(p))
	case 0xce:
		v = int64(binary.BigEndian.Uint32(p))
	case 0xcf:
		v = int64(binary.BigEndian.Uint64(p))
	case 0xd0:
		v = int64(int8(p[0]))
	case 0xd1:
		v = int64(int16(binary.BigEndian.Uint16(p)))
	case 0xd2:
		v = int64(int32(binary.BigEndian.Uint32(p)))
	case 0xd3:
		v = int64(binary.BigEndian.Uint64(p))
	}
	return v, true
}

// skipDepth is how deeply a value skip consumes may nest: a skipped value sits within at
// most 4 levels of the batch (its array, the events, an event, vLLM's extra_keys), so the
// scanner reads no payload nesting deeper than checkPayload allows (maxNesting).
const skipDepth = maxNesting - 5

// skip consumes one value of the kinds the publishers write: nil, booleans, integers,
// floats, strings, byte strings, arrays and maps of them, nested at most skipDepth deep.
func (s *scanner) skip() bool { return s.skipWithin(skipDepth) }

// skipWithin is skip for a value whose arrays and maps nest at most depth deep.
func (s *scanner) skipWithin(depth int) bool {
	if len(s.b) == 0 {
		return false
	}
	c := s.b[0]
	var n int
	switch {
	case c == 0xc0 || c == 0xc2 || c == 0xc3:
		s.b = s.b[1:]
		return true
	case c == 0xca || c == 0xcb:
		size := 4
		if c == 0xcb {
			size = 8
		}
		if len(s.b) < 1+size {
			return false
		}
		s.b = s.b[1+size:]
		return true
	case c >= 0xa0 && c <= 0xbf || c == 0xd9 || c == 0xda || c == 0xdb:
		_, ok := s.str()
		return ok
	case c == 0xc4 || c == 0xc5 || c == 0xc6:
		_, ok := s.bin()
		return ok
	case depth > 0 && s.array(&n):
		for range n {
			if !s.skipWithin(depth - 1) {
				return false
			}
		}
		return true
	case depth > 0 && s.mapHeader(&n):
		// String keys only: msgpack.Unmarshal refuses a map mixing string and other keys.
		for range n {
			if _, ok := s.str(); !ok || !s.skipWithin(depth-1) {
				return false
			}
		}
		return true
	}
	_, ok := s.integer()
	return ok
}

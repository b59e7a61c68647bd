package strictjson

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/routerkit/router/runtime/arena"
)

// Kind is the JSON type of a Value.
type Kind uint8

// The JSON types.
const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	Object
)

// Value is one JSON value of a document read by Parse.
type Value struct {
	Kind Kind
	// Bool is a Bool's value.
	Bool bool
	// Str is a String's text, decoded as json.Unmarshal decodes it (invalid UTF-8 and
	// lone surrogates become U+FFFD), or a Number's literal.
	Str string
	// Keys are an Object's keys, decoded, in document order; Elems are its values in the
	// same order, or an Array's elements.
	Keys  []string
	Elems []Value
	// Start and End delimit the value's bytes in the document.
	Start, End int
}

// Get returns the value of an Object's key, or nil.
func (v *Value) Get(key string) *Value {
	for i, k := range v.Keys {
		if k == key {
			return &v.Elems[i]
		}
	}
	return nil
}

// maxDepth is encoding/json's nesting limit; a deeper document is left to it to refuse.
const maxDepth = 10000

// errNotFast is the parser's internal failure: the document is then handed to
// encoding/json and the key checker, whose errors Parse returns.
var errNotFast = errors.New("strictjson: not parsed")

// Parse reads data, one JSON value, in a single pass into a tree of Values, with the
// checks Unmarshal(data, v) makes of syntax and keys: v (a pointer, never written) gives
// the struct fields whose case variants are refused, at any depth; duplicate keys are
// refused everywhere. Its errors are those Unmarshal would return for a document that
// fails the checks (json's syntax error, or a *KeyError), but a type mismatch between
// the tree and v is the caller's to find: it is not an error here.
//
// The tree holds what v's decoder reads: a key that encoding/json ignores (one that names
// no field of a struct, at any depth) is checked, its value validated and its objects'
// keys checked for repeats, but not built, so an ignored field costs no memory however
// large. Values v's type takes as a whole (json.RawMessage, interfaces, self-decoding
// types) are built whole.
//
// Strings without escapes are substrings of data itself, not copied: data must not be
// written again while the tree or any string from it is in use (a request's body, read
// once and forwarded as it is, never is). A 620 kB chat body used to be copied whole
// here, a fresh allocation each request whose pages the kernel faulted in. Start and
// End locate every value in data for callers that forward parts of it as
// json.RawMessage.
func Parse(data []byte, v any) (Value, error) {
	return parse(data, v, sizeAfter, nil)
}

// ParseIn is Parse with the decoded text of strings holding escapes cut from a (see
// package arena) instead of allocated: those strings, like the tree, may be read only
// until a is released.
func ParseIn(data []byte, v any, a *arena.Bytes) (Value, error) {
	return parse(data, v, sizeAfter, a)
}

// sizeAfter is the number of values on a parser's stack from which the document's
// containers are sized (see parser.own): below it, the stack lent by scratches serves;
// beyond it, its growth would cost more than the scan.
const sizeAfter = 1024

// parse is Parse with the stack size from which containers are sized (see parser.own);
// tests lower it to size every container.
func parse(data []byte, v any, sizeAfter int, a *arena.Bytes) (Value, error) {
	sc := scratches.Get().(*scratch)
	p := parser{data: data, src: bytesString(data), vals: sc.vals[:0], keys: sc.keys[:0], others: sc.others[:0], sizeAfter: sizeAfter, arena: a}
	val, err := p.parse(schemaOf(v))
	sc.put(p.vals[:p.high], p.keys[:p.highKeys], p.others[:p.highOthers])
	if err == nil {
		return val, nil
	}
	if !json.Valid(data) {
		var x any
		return Value{}, json.Unmarshal(data, &x)
	}
	if err := check(data, v); err != nil {
		return Value{}, err
	}
	// Not reached for documents encoding/json accepts: the parser follows its grammar.
	return Value{}, errNotFast
}

// KeysMatch reports whether no object key in v is a case variant of a field that v's
// place in a document of schema's type (a pointer) would fill: the check Parse makes of
// a whole document, for a part of one read as another type.
func (v *Value) KeysMatch(schema any) bool {
	n := schemaOf(schema)
	return n == nil || foldFree(v, n)
}

// foldFree reports whether no object key in v is a case variant of a field that n
// expects there.
func foldFree(v *Value, n *node) bool {
	switch v.Kind {
	case Object:
		for i, k := range v.Keys {
			child, _, kerr := fieldOf(n, k)
			if kerr != nil {
				return false
			}
			if child != nil && !foldFree(&v.Elems[i], child) {
				return false
			}
		}
	case Array:
		if n.elem == nil {
			return true
		}
		for i := range v.Elems {
			if !foldFree(&v.Elems[i], n.elem) {
				return false
			}
		}
	}
	return true
}

// parser reads a document by recursive descent. Children of open containers are kept on
// shared stacks and copied out once a container closes, so each container costs one
// allocation of its exact size.
// scratch is a parser's stacks of the values and keys of the objects and arrays it is
// in, lent from scratches: a small document would otherwise grow both from nothing,
// several allocations per request.
type scratch struct {
	vals         []Value
	keys, others []string
}

var scratches = sync.Pool{New: func() any {
	return &scratch{vals: make([]Value, 0, 32), keys: make([]string, 0, 32), others: make([]string, 0, 32)}
}}

// maxScratch is the most values a stack returned to scratches keeps: a huge document's
// stacks are left to the collector.
const maxScratch = 4096

// put returns the stacks as the parser grew them, their used parts cleared of the
// strings they point into.
func (sc *scratch) put(vals []Value, keys, others []string) {
	if cap(vals) > maxScratch || cap(keys) > maxScratch || cap(others) > maxScratch {
		return
	}
	clear(vals)
	clear(keys)
	clear(others)
	sc.vals, sc.keys, sc.others = vals[:0], keys[:0], others[:0]
	scratches.Put(sc)
}

type parser struct {
	data []byte
	src  string // data as a string, without a copy: the backing of strings without escapes
	// arena lends the bytes of strings with escapes; nil allocates them.
	arena *arena.Bytes
	i     int
	depth int
	vals  []Value
	keys  []string
	// others are the keys of open objects that are not built (ignored, or inside an
	// ignored value), kept only to find repeats.
	others []string
	// sizes are the member counts of the document's containers, once sized (see own):
	// when the stack holds more than sizeAfter values.
	sizes     []containerSize
	sized     bool
	sizeAfter int
	// high, highKeys and highOthers are the most vals, keys and others held at once:
	// what holds pointers when the stacks go back to scratches.
	high, highKeys, highOthers int
}

func (p *parser) parse(n *node) (Value, error) {
	p.ws()
	v, err := p.value(n, true)
	if err != nil {
		return Value{}, err
	}
	p.ws()
	if p.i != len(p.data) {
		return Value{}, errNotFast
	}
	return v, nil
}

func (p *parser) ws() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// value reads the value at p.i, read as n. Unless build is set it is only validated,
// with its objects' keys checked for repeats, and its Value is empty.
func (p *parser) value(n *node, build bool) (Value, error) {
	if p.i >= len(p.data) {
		return Value{}, errNotFast
	}
	start := p.i
	switch c := p.data[p.i]; c {
	case '{':
		return p.object(n, build)
	case '[':
		return p.array(n, build)
	case '"':
		if !build {
			return Value{}, p.skipStr()
		}
		s, err := p.str()
		return Value{Kind: String, Str: s, Start: start, End: p.i}, err
	case 't':
		return p.literal("true", Value{Kind: Bool, Bool: true})
	case 'f':
		return p.literal("false", Value{Kind: Bool})
	case 'n':
		return p.literal("null", Value{Kind: Null})
	default:
		if c == '-' || c >= '0' && c <= '9' {
			return p.number()
		}
	}
	return Value{}, errNotFast
}

func (p *parser) literal(word string, v Value) (Value, error) {
	if len(p.src)-p.i < len(word) || p.src[p.i:p.i+len(word)] != word {
		return Value{}, errNotFast
	}
	v.Start = p.i
	p.i += len(word)
	v.End = p.i
	return v, nil
}

// number reads a number with JSON's grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *parser) number() (Value, error) {
	start := p.i
	d := p.data
	if d[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(d) && d[p.i] == '0':
		p.i++
	case p.i < len(d) && d[p.i] >= '1' && d[p.i] <= '9':
		p.digits()
	default:
		return Value{}, errNotFast
	}
	if p.i < len(d) && d[p.i] == '.' {
		p.i++
		if p.digits() == 0 {
			return Value{}, errNotFast
		}
	}
	if p.i < len(d) && (d[p.i] == 'e' || d[p.i] == 'E') {
		p.i++
		if p.i < len(d) && (d[p.i] == '+' || d[p.i] == '-') {
			p.i++
		}
		if p.digits() == 0 {
			return Value{}, errNotFast
		}
	}
	return Value{Kind: Number, Str: p.src[start:p.i], Start: start, End: p.i}, nil
}

func (p *parser) digits() int {
	n := 0
	for p.i < len(p.data) && p.data[p.i] >= '0' && p.data[p.i] <= '9' {
		p.i++
		n++
	}
	return n
}

// strClass classifies a string's bytes: 0 plain ASCII, 1 the quote, backslash or a
// control character (which a JSON string may not hold raw), 2 the start or continuation
// of a multi-byte character.
var strClass = func() (t [256]uint8) {
	for c := range 256 {
		switch {
		case c < 0x20 || c == '"' || c == '\\':
			t[c] = 1
		case c >= utf8.RuneSelf:
			t[c] = 2
		}
	}
	return t
}()

// str reads a string at its opening quote and returns its text.
func (p *parser) str() (string, error) {
	start := p.i + 1
	i, ascii, err := p.scanStr(start)
	if err != nil {
		return "", err
	}
	if p.data[i] == '\\' {
		return p.escaped(start, i, ascii)
	}
	p.i = i + 1
	s := p.src[start:i]
	if ascii || utf8.ValidString(s) {
		return s, nil
	}
	return bytesString(unquote(make([]byte, 0, i-start+8), p.data[start:i])), nil
}

// skipStr reads past a string at its opening quote, checking it as str does without
// decoding it.
func (p *parser) skipStr() error {
	i, _, err := p.scanStr(p.i + 1)
	if err != nil {
		return err
	}
	if p.data[i] == '\\' {
		end := closingQuote(p.data, i)
		if end < 0 || !validEscapes(p.data[i:end]) {
			return errNotFast
		}
		i = end
	}
	p.i = i + 1
	return nil
}

// scanStr finds the first quote or backslash of a string's text from start, and reports
// whether the text before it is ASCII; a raw control character before it is an error.
func (p *parser) scanStr(start int) (int, bool, error) {
	d := p.data
	i := start
	ascii := true
	for {
		// Eight bytes at a time while none is a quote, a backslash or a control
		// character; multi-byte characters are checked once the string ends.
		for i+8 <= len(d) {
			x := binary.LittleEndian.Uint64(d[i:])
			if special8(x) {
				break
			}
			if x&hi8 != 0 {
				ascii = false
			}
			i += 8
		}
		for i < len(d) && strClass[d[i]] == 0 {
			i++
		}
		if i >= len(d) {
			return 0, false, errNotFast
		}
		switch c := d[i]; {
		case c == '"' || c == '\\':
			return i, ascii, nil
		case c < 0x20:
			return 0, false, errNotFast
		default:
			ascii = false
			i++
		}
	}
}

// Byte-parallel tests over eight bytes (Hacker's Delight, "Find first 0-byte").
const (
	lo8 = 0x0101010101010101
	hi8 = 0x8080808080808080
)

// special8 reports whether any byte of x is a quote, a backslash or below 0x20. Bytes of
// 0x80 and above are not special, so the subtractions cannot make a false negative, and
// a false positive only sends the caller to its byte loop.
func special8(x uint64) bool {
	zero := func(v uint64) uint64 { return (v - lo8) & ^v & hi8 }
	return zero(x^(lo8*'"'))|zero(x^(lo8*'\\'))|((x-lo8*0x20)&^x&hi8) != 0
}

// escaped finishes reading a string holding an escape (the first at esc) and returns its
// decoded text; str has checked the text before esc for control characters, and found it
// ASCII when ascii is set. It finds the closing quote first, so that the text is allocated once at
// its size without being zeroed, then decodes and checks the literal in one pass: runs
// between escapes are found with IndexByte and checked eight bytes at a time for raw
// control characters, and for UTF-8 only when they hold multi-byte characters.
func (p *parser) escaped(start, esc int, ascii bool) (string, error) {
	d := p.data
	end := closingQuote(d, esc)
	if end < 0 {
		return "", errNotFast
	}
	b := p.arena.Alloc(end - start)
	s := d[start:end]
	for r := 0; r < len(s); {
		j := bytes.IndexByte(s[r:], '\\')
		if j < 0 {
			j = len(s) - r
		}
		if j > 0 {
			run := s[r : r+j]
			var ctl, multi bool
			if r == 0 { // the text before esc
				multi = !ascii
			} else {
				ctl, multi = runClass(run)
			}
			switch {
			case ctl:
				return "", errNotFast
			case multi && !utf8.Valid(run):
				// Replaced as encoding/json does; the text may outgrow its estimate.
				b = appendValid(b, run)
			default:
				b = append(b, run...)
			}
			r += j
			continue
		}
		if r+1 >= len(s) {
			return "", errNotFast
		}
		switch c := s[r+1]; c {
		case '"', '\\', '/':
			b = append(b, c)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			rr := getu4(s[r:])
			if rr < 0 {
				return "", errNotFast
			}
			r += 6
			if utf16.IsSurrogate(rr) {
				if dec := utf16.DecodeRune(rr, getu4(s[r:])); dec != unicode.ReplacementChar {
					r += 6
					b = utf8.AppendRune(b, dec)
					continue
				}
				rr = unicode.ReplacementChar
			}
			b = utf8.AppendRune(b, rr)
			continue
		default:
			return "", errNotFast
		}
		r += 2
	}
	p.i = end + 1
	return bytesString(b), nil
}

// validEscapes reports whether s, a string's text from its first escape to its closing
// quote, holds only JSON's escapes and no raw control character.
func validEscapes(s []byte) bool {
	for r := 0; r < len(s); r++ {
		switch c := s[r]; {
		case c < 0x20:
			return false
		case c != '\\':
		case r+1 >= len(s):
			return false
		case s[r+1] == 'u':
			if getu4(s[r:]) < 0 {
				return false
			}
			r += 5
		case strings.IndexByte(`"\/bfnrt`, s[r+1]) < 0:
			return false
		default:
			r++
		}
	}
	return true
}

// closingQuote returns the index of the quote that ends the string literal holding the
// escape at esc (the first quote after it that an odd run of backslashes does not
// escape), or -1 when the data ends first.
func closingQuote(d []byte, esc int) int {
	for i := esc; ; {
		q := bytes.IndexByte(d[i:], '"')
		if q < 0 {
			return -1
		}
		q += i
		n := 0
		for k := q - 1; k >= esc && d[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return q
		}
		i = q + 1
	}
}

// runClass reports whether run, which holds no escape, has a raw control character (which
// a JSON string may not hold) and whether it has bytes of multi-byte characters.
func runClass(run []byte) (ctl, multi bool) {
	var acc uint64
	i := 0
	for ; i+8 <= len(run); i += 8 {
		x := binary.LittleEndian.Uint64(run[i:])
		acc |= x
		// A byte below 0x20 sets its high bit here; a false positive can only follow a
		// true one, so the bytes are looked at one by one to be sure.
		if (x-lo8*0x20)&^x&hi8 != 0 {
			for _, c := range run[i : i+8] {
				if c < 0x20 {
					return true, false
				}
			}
		}
	}
	for _, c := range run[i:] {
		if c < 0x20 {
			return true, false
		}
		acc |= uint64(c)
	}
	return false, acc&hi8 != 0
}

// bytesString returns b as a string without copying it: b is never written again.
func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// getu4 decodes \uXXXX from the beginning of s, returning the hex value, or -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	r, err := strconv.ParseUint(string(s[2:6]), 16, 32)
	if err != nil {
		return -1
	}
	return rune(r)
}

// unquote appends to b the text of a valid string literal's contents s, as
// encoding/json decodes it: escapes resolved, a valid surrogate pair joined, a lone
// surrogate and each invalid UTF-8 byte replaced by U+FFFD.
func unquote(b, s []byte) []byte {
	for r := 0; r < len(s); {
		// Copy the run up to the next escape at once when it is valid UTF-8, as it
		// nearly always is.
		if j := bytes.IndexByte(s[r:], '\\'); j != 0 {
			if j < 0 {
				j = len(s) - r
			}
			b = appendValid(b, s[r:r+j])
			r += j
			continue
		}
		switch s[r+1] { // s[r] is a backslash
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			rr := getu4(s[r:])
			r += 6
			if utf16.IsSurrogate(rr) {
				if dec := utf16.DecodeRune(rr, getu4(s[r:])); dec != unicode.ReplacementChar {
					r += 6
					b = utf8.AppendRune(b, dec)
					continue
				}
				rr = unicode.ReplacementChar
			}
			b = utf8.AppendRune(b, rr)
			continue
		default: // " \ /
			b = append(b, s[r+1])
		}
		r += 2
	}
	return b
}

// appendValid appends run, which holds no escape, replacing each byte of invalid UTF-8
// by U+FFFD.
func appendValid(b, run []byte) []byte {
	if utf8.Valid(run) {
		return append(b, run...)
	}
	for r := 0; r < len(run); {
		rr, size := utf8.DecodeRune(run[r:])
		if rr == utf8.RuneError && size == 1 {
			b = utf8.AppendRune(b, unicode.ReplacementChar)
		} else {
			b = append(b, run[r:r+size]...)
		}
		r += size
	}
	return b
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return errNotFast
	}
	return nil
}

func (p *parser) array(n *node, build bool) (Value, error) {
	if err := p.enter(); err != nil {
		return Value{}, err
	}
	start := p.i
	p.i++ // [
	base := len(p.vals)
	defer func() { p.vals = p.vals[:base]; p.depth-- }()
	p.ws()
	if p.i < len(p.data) && p.data[p.i] == ']' {
		p.i++
		return Value{Kind: Array, Start: start, End: p.i}, nil
	}
	var elem *node
	if n != nil {
		elem = n.elem
	}
	var elems []Value // the elements once the array has its own slice
	for {
		p.ws()
		v, err := p.value(elem, build)
		if err != nil {
			return Value{}, err
		}
		if build {
			if elems = p.push(elems, v); elems == nil {
				elems = p.own(base, start)
			}
		}
		p.ws()
		if p.i >= len(p.data) {
			return Value{}, errNotFast
		}
		switch p.data[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			if !build {
				return Value{}, nil
			}
			return Value{Kind: Array, Elems: p.members(elems, base), Start: start, End: p.i}, nil
		default:
			return Value{}, errNotFast
		}
	}
}

// object reads an object read as n. Its keys are checked against n's fields; the values
// of those n ignores are not built.
func (p *parser) object(n *node, build bool) (Value, error) {
	if err := p.enter(); err != nil {
		return Value{}, err
	}
	start := p.i
	p.i++ // {
	base, kbase, obase := len(p.vals), len(p.keys), len(p.others)
	defer func() { p.vals, p.keys, p.others = p.vals[:base], p.keys[:kbase], p.others[:obase]; p.depth-- }()
	p.ws()
	if p.i < len(p.data) && p.data[p.i] == '}' {
		p.i++
		return Value{Kind: Object, Start: start, End: p.i}, nil
	}
	// A struct's object keeps at most its fields on the stacks; any other object gets
	// its own slices once the document's container sizes are known.
	own := build && (n == nil || !n.ignores)
	var (
		set   map[string]struct{}
		keys  []string // the built keys and values once the object has its own slices
		elems []Value
	)
	for {
		p.ws()
		if p.i >= len(p.data) || p.data[p.i] != '"' {
			return Value{}, errNotFast
		}
		key, err := p.str()
		if err != nil {
			return Value{}, err
		}
		child, read, kerr := fieldOf(n, key)
		keep := build && read
		built := keys
		if built == nil {
			built = p.keys[kbase:]
		}
		if kerr != nil || p.repeated(key, built, obase, &set) {
			return Value{}, errNotFast
		}
		switch {
		case keep && keys != nil:
			keys = append(keys, key)
		case keep:
			p.keys = append(p.keys, key)
			p.highKeys = max(p.highKeys, len(p.keys))
		case set == nil:
			p.others = append(p.others, key)
			p.highOthers = max(p.highOthers, len(p.others))
		}
		p.ws()
		if p.i >= len(p.data) || p.data[p.i] != ':' {
			return Value{}, errNotFast
		}
		p.i++
		p.ws()
		v, err := p.value(child, keep)
		if err != nil {
			return Value{}, err
		}
		if keep {
			if elems = p.push(elems, v); elems == nil && own {
				if elems = p.own(base, start); elems != nil {
					keys = make([]string, len(elems), cap(elems))
					copy(keys, p.keys[kbase:])
					p.keys = p.keys[:kbase]
				}
			}
		}
		p.ws()
		if p.i >= len(p.data) {
			return Value{}, errNotFast
		}
		switch p.data[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			if !build {
				return Value{}, nil
			}
			if keys == nil {
				keys = slices.Clone(p.keys[kbase:])
			}
			return Value{Kind: Object, Keys: keys, Elems: p.members(elems, base), Start: start, End: p.i}, nil
		default:
			return Value{}, errNotFast
		}
	}
}

// repeated reports whether key is among the current object's keys: built, those built
// so far, and the others from p.others[obase:] or, once the object has bigObject keys,
// set, which then holds them all and records key.
func (p *parser) repeated(key string, built []string, obase int, set *map[string]struct{}) bool {
	if *set != nil {
		if _, dup := (*set)[key]; dup {
			return true
		}
		(*set)[key] = struct{}{}
		return false
	}
	others := p.others[obase:]
	if slices.Contains(built, key) || slices.Contains(others, key) {
		return true
	}
	if len(built)+len(others) >= bigObject-1 {
		*set = make(map[string]struct{}, 2*bigObject)
		for _, k := range built {
			(*set)[k] = struct{}{}
		}
		for _, k := range others {
			(*set)[k] = struct{}{}
		}
		(*set)[key] = struct{}{}
		p.others = p.others[:obase]
	}
	return false
}

// push adds v to the members of the open container: to elems once the container has its
// own slice, else to the stack, and returns elems.
func (p *parser) push(elems []Value, v Value) []Value {
	if elems != nil {
		if len(elems) == cap(elems) {
			// Sized short, as an invalid document can be: doubling keeps the
			// copies to one more slice.
			elems = slices.Grow(elems, len(elems))
		}
		return append(elems, v)
	}
	p.vals = append(p.vals, v)
	p.high = max(p.high, len(p.vals))
	return nil
}

// own moves the members of the container opened at start from the stack (from base) to a
// slice of its own, of the container's size, once the sizes of the document's containers
// are known, and returns it; nil while they are not. They are found, in one scan of the
// document, the first time the stack holds more than p.sizeAfter values: the stack would
// otherwise grow, copy by copy, to the size of the largest container and be copied out
// of again, several times the memory of the values themselves.
func (p *parser) own(base, start int) []Value {
	if !p.sized {
		if len(p.vals) <= p.sizeAfter || len(p.data) > math.MaxUint32 {
			return nil
		}
		p.sizes, p.sized = containerSizes(p.data), true
	}
	n := len(p.vals) - base
	elems := make([]Value, n, max(n, p.sizeAt(start)))
	copy(elems, p.vals[base:])
	p.vals = p.vals[:base]
	return elems
}

// members returns a closing container's members: elems, or a copy of those on the stack
// from base.
func (p *parser) members(elems []Value, base int) []Value {
	if elems != nil {
		return elems
	}
	return slices.Clone(p.vals[base:])
}

// containerSize is the number of members of the container whose opening bracket is at
// start.
type containerSize struct{ start, n uint32 }

// containerSizes counts the members of the arrays and objects of data that have two or
// more, in one scan that reads strings only to find their ends, and returns the counts in
// document order. Containers of one member are left out: a container's first member is
// already a slice of one. It trusts data (shorter than 4 GiB) to be valid JSON: the parse
// that uses the sizes checks it, and a size wrong for an invalid document is only a wrong
// capacity.
func containerSizes(d []byte) []containerSize {
	z := sizer{d: d}
	for z.i < len(z.d) && z.d[z.i] != '[' && z.d[z.i] != '{' {
		z.i++
	}
	if z.i < len(z.d) {
		z.container(0)
	}
	// Recorded as they close: inner containers before the one holding them.
	slices.SortFunc(z.sizes, func(a, b containerSize) int { return cmp.Compare(a.start, b.start) })
	return z.sizes
}

type sizer struct {
	d     []byte
	i     int
	sizes []containerSize
}

// container counts the members of the container opened at z.i, and of those in it,
// depth levels down, and records them; it returns false at the end of an unfinished
// document, having recorded the members so far: the parse will fail, but not before it
// has read them.
func (z *sizer) container(depth int) bool {
	if depth > maxDepth {
		return false
	}
	start, n, closed := z.i, 0, false
scan:
	for z.i++; z.i < len(z.d); z.i++ {
		switch c := z.d[z.i]; c {
		case ' ', '\t', '\n', '\r':
			continue
		case ']', '}':
			closed = true
			break scan
		case ',':
			n++
			continue
		}
		n = max(n, 1)
		switch z.d[z.i] {
		case '"':
			if z.i = closingQuote(z.d, z.i+1); z.i < 0 {
				break scan
			}
		case '[', '{':
			if !z.container(depth + 1) {
				break scan
			}
		}
	}
	if n >= 2 {
		if len(z.sizes) == cap(z.sizes) {
			z.sizes = slices.Grow(z.sizes, len(z.sizes)+1) // doubling: the copies add up to one more table
		}
		z.sizes = append(z.sizes, containerSize{start: uint32(start), n: uint32(n)})
	}
	return closed
}

// sizeAt is the number of members of the container opened at start, 0 when unknown.
func (p *parser) sizeAt(start int) int {
	i, ok := slices.BinarySearchFunc(p.sizes, uint32(start), func(s containerSize, at uint32) int { return cmp.Compare(s.start, at) })
	if !ok {
		return 0
	}
	return int(p.sizes[i].n)
}

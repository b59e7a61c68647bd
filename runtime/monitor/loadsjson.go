package monitor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// A scanner decoder of /v1/loads. Polling a large fleet parses a report per engine twice
// a second, and encoding/json spent as much CPU on that as the round trip's syscalls
// (docs/benchmarks.md, "Fleet polling"): reflection, and an allocation per pointer
// field. This one reads the few fields the router uses straight from the bytes and
// skips the rest, allocating only the result. It accepts and rejects exactly what
// json.Unmarshal into loadsBody accepts and rejects, with the same values; the fuzz
// target FuzzLoadReports checks that against encoding/json.

// loadsField indexes the integer fields of a rank.
type loadsField int

const (
	fRunning loadsField = iota
	fWaiting
	fWaitingUncached
	fUsed
	fTotal
	fMaxTotal
	fMaxRunning
	fDPRank
	numLoadsFields
)

var loadsFieldNames = [numLoadsFields][]byte{
	[]byte("num_running_reqs"), []byte("num_waiting_reqs"), []byte("num_waiting_uncached_tokens"),
	[]byte("num_used_tokens"), []byte("num_total_tokens"), []byte("max_total_num_tokens"),
	[]byte("max_running_requests"), []byte("dp_rank"),
}

var (
	keyTimestamp = []byte("timestamp")
	keyLoads     = []byte("loads")
)

// loadsRank is one element of "loads": each integer field with whether it was given
// (a JSON null is not given, as it leaves a pointer nil), and the raw timestamp.
type loadsRank struct {
	v         [numLoadsFields]int64
	has       [numLoadsFields]bool
	timestamp []byte
}

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

var errLoadsSyntax = errors.New("invalid JSON")

type loadsScanner struct {
	b     []byte
	i     int
	depth int
}

// decodeLoads decodes a /v1/loads body: the top-level timestamp and the ranks.
func decodeLoads(b []byte) (timestamp []byte, ranks []loadsRank, err error) {
	s := &loadsScanner{b: b}
	s.ws()
	switch s.peek() {
	case '{':
		timestamp, ranks, err = s.body()
	case 'n':
		err = s.literal("null")
	default:
		if err = s.skip(); err == nil {
			err = errors.New("a load report must be a JSON object")
		}
	}
	if err != nil {
		return nil, nil, err
	}
	s.ws()
	if s.i != len(s.b) {
		return nil, nil, s.syntax("after the top-level value")
	}
	return timestamp, ranks, nil
}

func (s *loadsScanner) body() (timestamp []byte, ranks []loadsRank, err error) {
	var typeErr error
	err = s.object(func(key []byte) error {
		switch {
		case bytes.EqualFold(key, keyTimestamp):
			start := s.i
			if err := s.skip(); err != nil {
				return err
			}
			timestamp = s.b[start:s.i]
		case bytes.EqualFold(key, keyLoads):
			var err error
			ranks, err = s.loads(ranks)
			if err != nil && !isTypeErr(err) {
				return err
			}
			typeErr = firstErr(typeErr, err)
		default:
			return s.skip()
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return timestamp, ranks, typeErr
}

// loads reads the "loads" value: an array of rank objects, or null (no ranks). A second
// "loads" key decodes into the ranks of the first, as encoding/json decodes an array
// into the elements of the slice it already holds.
func (s *loadsScanner) loads(prev []loadsRank) ([]loadsRank, error) {
	switch s.peek() {
	case 'n':
		return nil, s.literal("null")
	case '[':
	default:
		if err := s.skip(); err != nil {
			return nil, err
		}
		return nil, typeError("loads must be an array")
	}
	ranks := []loadsRank{}
	var typeErr error
	err := s.array(func() error {
		var r loadsRank
		if i := len(ranks); i < len(prev) {
			r = prev[i]
		}
		switch s.peek() {
		case '{':
			err := s.rank(&r)
			if err != nil && !isTypeErr(err) {
				return err
			}
			typeErr = firstErr(typeErr, err)
		case 'n':
			if err := s.literal("null"); err != nil {
				return err
			}
		default:
			if err := s.skip(); err != nil {
				return err
			}
			typeErr = firstErr(typeErr, typeError("each load must be an object"))
		}
		ranks = append(ranks, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ranks, typeErr
}

func (s *loadsScanner) rank(r *loadsRank) error {
	var typeErr error
	err := s.object(func(key []byte) error {
		if bytes.EqualFold(key, keyTimestamp) {
			start := s.i
			if err := s.skip(); err != nil {
				return err
			}
			r.timestamp = s.b[start:s.i]
			return nil
		}
		f := fieldOf(key)
		if f < numLoadsFields {
			name := loadsFieldNames[f]
			switch c := s.peek(); {
			case c == 'n':
				r.has[f] = false // null leaves a pointer nil, even after an earlier value
				return s.literal("null")
			case c == '-' || (c >= '0' && c <= '9'):
				lit, err := s.number()
				if err != nil {
					return err
				}
				v, perr := strconv.ParseInt(string(lit), 10, 64)
				if perr != nil {
					typeErr = firstErr(typeErr, typeError(fmt.Sprintf("%s must be an integer, not %s", name, lit)))
					return nil
				}
				r.v[f], r.has[f] = v, true
				return nil
			default:
				if err := s.skip(); err != nil {
					return err
				}
				typeErr = firstErr(typeErr, typeError(fmt.Sprintf("%s must be an integer", name)))
				return nil
			}
		}
		return s.skip()
	})
	if err != nil {
		return err
	}
	return typeErr
}

// fieldOf returns the integer field key names, or numLoadsFields for another key. Keys
// match as encoding/json matches them: exactly, else ignoring case.
func fieldOf(key []byte) loadsField {
	for f, name := range loadsFieldNames {
		if string(key) == string(name) {
			return loadsField(f)
		}
	}
	for f, name := range loadsFieldNames {
		if bytes.EqualFold(key, name) {
			return loadsField(f)
		}
	}
	return numLoadsFields
}

// object reads an object, calling field with each key, positioned at its value, which
// field must consume.
func (s *loadsScanner) object(field func(key []byte) error) error {
	return s.members('{', '}', func() error {
		key, err := s.key()
		if err != nil {
			return err
		}
		s.ws()
		if s.peek() != ':' {
			return s.syntax("after an object key")
		}
		s.i++
		s.ws()
		return field(key)
	})
}

// array reads an array, calling elem positioned at each element, which elem consumes.
func (s *loadsScanner) array(elem func() error) error {
	return s.members('[', ']', elem)
}

// members reads an object or array between open and end, calling member at each
// member, which it consumes.
func (s *loadsScanner) members(open, end byte, member func() error) error {
	if err := s.open(open); err != nil {
		return err
	}
	s.ws()
	if s.peek() == end {
		s.i++
		s.depth--
		return nil
	}
	for {
		s.ws()
		if err := member(); err != nil {
			return err
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
		case end:
			s.i++
			s.depth--
			return nil
		default:
			return s.syntax("after a member")
		}
	}
}

func (s *loadsScanner) open(c byte) error {
	if s.peek() != c {
		return s.syntax("")
	}
	s.i++
	s.depth++
	if s.depth > maxDepth {
		return fmt.Errorf("%w: nested deeper than %d", errLoadsSyntax, maxDepth)
	}
	return nil
}

// skip consumes one value of any kind, checking its syntax.
func (s *loadsScanner) skip() error {
	switch c := s.peek(); {
	case c == '{':
		return s.object(func([]byte) error { return s.skip() })
	case c == '[':
		return s.array(s.skip)
	case c == '"':
		_, err := s.str()
		return err
	case c == '-' || (c >= '0' && c <= '9'):
		_, err := s.number()
		return err
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return s.syntax("where a value belongs")
}

// key reads an object key, unescaped.
func (s *loadsScanner) key() ([]byte, error) {
	start := s.i
	raw, err := s.str()
	if err != nil {
		return nil, err
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw, nil
	}
	var k string // escapes are rare in keys: let encoding/json resolve them
	if err := json.Unmarshal(s.b[start:s.i], &k); err != nil {
		return nil, err
	}
	return []byte(k), nil
}

// str reads a string, returning its contents between the quotes, escapes unresolved.
func (s *loadsScanner) str() ([]byte, error) {
	if s.peek() != '"' {
		return nil, s.syntax("where a string belongs")
	}
	s.i++
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], nil
		case c == '\\':
			s.i++
			switch s.peek() {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				s.i++
				for range 4 {
					if !isHex(s.peek()) {
						return nil, s.syntax("in a \\u escape")
					}
					s.i++
				}
			default:
				return nil, s.syntax("in a string escape")
			}
		case c < 0x20:
			return nil, s.syntax("in a string")
		default:
			s.i++
		}
	}
	return nil, s.syntax("in a string")
}

// number reads a number literal in JSON's grammar.
func (s *loadsScanner) number() ([]byte, error) {
	start := s.i
	if s.peek() == '-' {
		s.i++
	}
	switch c := s.peek(); {
	case c == '0':
		s.i++
	case c >= '1' && c <= '9':
		s.digits()
	default:
		return nil, s.syntax("in a number")
	}
	if s.peek() == '.' {
		s.i++
		if !isDigit(s.peek()) {
			return nil, s.syntax("after a decimal point")
		}
		s.digits()
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if c := s.peek(); c == '+' || c == '-' {
			s.i++
		}
		if !isDigit(s.peek()) {
			return nil, s.syntax("in an exponent")
		}
		s.digits()
	}
	return s.b[start:s.i], nil
}

func (s *loadsScanner) digits() {
	for isDigit(s.peek()) {
		s.i++
	}
}

func (s *loadsScanner) literal(word string) error {
	if !bytes.HasPrefix(s.b[s.i:], []byte(word)) {
		return s.syntax("in a literal")
	}
	s.i += len(word)
	return nil
}

func (s *loadsScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next byte, or 0 at the end (never valid where a byte is expected).
func (s *loadsScanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *loadsScanner) syntax(where string) error {
	if s.i >= len(s.b) {
		return fmt.Errorf("%w: unexpected end of input", errLoadsSyntax)
	}
	if where != "" {
		where = " " + where
	}
	return fmt.Errorf("%w: unexpected %q at offset %d%s", errLoadsSyntax, s.b[s.i], s.i, where)
}

// loadsTypeError is a well-formed value of the wrong kind. Like encoding/json, the
// decoder reads on after one, so a syntax error later in the body still wins, and
// reports the first.
type loadsTypeError struct{ msg string }

func (e *loadsTypeError) Error() string { return e.msg }

func typeError(msg string) error { return &loadsTypeError{msg} }

func isTypeErr(err error) bool {
	var te *loadsTypeError
	return errors.As(err, &te)
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

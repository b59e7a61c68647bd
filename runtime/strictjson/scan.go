package strictjson

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// scanner walks a document already known to be valid JSON. It keeps the keys of every
// open object on one shared stack of slices into data (decoded only when escaped), so a
// large body costs no copy of its keys.
type scanner struct {
	data []byte
	i    int
	keys [][]byte
	// path is the way to the current value as an error names it (messages[0].content),
	// and marks the path's length before each of its steps. Both are kept only when where
	// is set: in a second reading of a document the first refused, to say where.
	path  []byte
	marks []int
	where bool
}

// pushKey adds an object's key to the path, when it is kept.
func (s *scanner) pushKey(key []byte) {
	if !s.where {
		return
	}
	s.marks = append(s.marks, len(s.path))
	if len(s.path) > 0 {
		s.path = append(s.path, '.')
	}
	if len(key) > clipAt {
		s.path = append(append(s.path, key[:clipAt]...), "..."...)
		return
	}
	s.path = append(s.path, key...)
}

// pushIndex adds an array index to the path, when it is kept.
func (s *scanner) pushIndex(i int) {
	if s.where {
		s.marks = append(s.marks, len(s.path))
		s.path = strconv.AppendInt(append(s.path, '['), int64(i), 10)
		s.path = append(s.path, ']')
	}
}

// pop removes the path's last step, when it is kept.
func (s *scanner) pop() {
	if s.where {
		s.path = s.path[:s.marks[len(s.marks)-1]]
		s.marks = s.marks[:len(s.marks)-1]
	}
}

// bigObject is the key count from which an object's duplicate check uses a set instead
// of a linear scan.
const bigObject = 32

func (s *scanner) ws() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) value(n *node) error {
	s.ws()
	switch s.data[s.i] {
	case '{':
		return s.object(n)
	case '[':
		return s.array(n)
	case '"':
		s.str()
	default:
		for s.i < len(s.data) && !endsScalar(s.data[s.i]) {
			s.i++
		}
	}
	return nil
}

// endsScalar reports whether c ends a number or literal.
func endsScalar(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', ',', ']', '}':
		return true
	}
	return false
}

// str skips a string starting at its opening quote and returns its raw contents and
// whether they hold an escape.
func (s *scanner) str() ([]byte, bool) {
	start := s.i + 1
	escaped := false
	for s.i = start; s.data[s.i] != '"'; s.i++ {
		if s.data[s.i] == '\\' {
			escaped = true
			s.i++
		}
	}
	raw := s.data[start:s.i]
	s.i++
	return raw, escaped
}

func (s *scanner) object(n *node) error {
	s.i++ // {
	base := len(s.keys)
	defer func() { s.keys = s.keys[:base] }()
	var set map[string]struct{}
	for {
		s.ws()
		if s.data[s.i] == '}' {
			s.i++
			return nil
		}
		raw, escaped := s.str()
		key := raw
		if escaped {
			var k string
			_ = json.Unmarshal(s.data[s.i-len(raw)-2:s.i], &k) // valid JSON: cannot fail
			key = []byte(k)
		}
		if err := s.unique(key, base, &set); err != nil {
			return err
		}
		child, err := n.field(key)
		if err != nil {
			err.Path = string(s.path)
			return err
		}
		s.ws()
		s.i++ // :
		s.pushKey(key)
		if err := s.value(child); err != nil {
			return err
		}
		s.pop()
		s.ws()
		if s.data[s.i] == ',' {
			s.i++
		}
	}
}

// unique records key among the current object's keys (those from base on) and reports a
// repeat.
func (s *scanner) unique(key []byte, base int, set *map[string]struct{}) error {
	dup := false
	if *set != nil {
		// The set lives while the object is read, data is not written meanwhile: its
		// keys can be views of data, not copies.
		_, dup = (*set)[bytesString(key)]
		(*set)[bytesString(key)] = struct{}{}
	} else {
		for _, k := range s.keys[base:] {
			if bytes.Equal(k, key) {
				dup = true
				break
			}
		}
		s.keys = append(s.keys, key)
		if len(s.keys)-base >= bigObject {
			*set = make(map[string]struct{}, 2*bigObject)
			for _, k := range s.keys[base:] {
				(*set)[bytesString(k)] = struct{}{}
			}
		}
	}
	if dup {
		return &KeyError{Path: string(s.path), Key: string(key)}
	}
	return nil
}

func (s *scanner) array(n *node) error {
	s.i++ // [
	var elem *node
	if n != nil {
		elem = n.elem
	}
	for idx := 0; ; idx++ {
		s.ws()
		if s.data[s.i] == ']' {
			s.i++
			return nil
		}
		s.pushIndex(idx)
		if err := s.value(elem); err != nil {
			return err
		}
		s.pop()
		s.ws()
		if s.data[s.i] == ',' {
			s.i++
		}
	}
}

package strictjson

import (
	"bytes"
	"encoding/json"
)

// scanner walks a document already known to be valid JSON. It keeps the keys of every
// open object on one shared stack of slices into data (decoded only when escaped), so a
// large body costs no copy of its keys.
type scanner struct {
	data []byte
	i    int
	keys [][]byte
	path []pathElem
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
			err.Path = pathString(s.path)
			return err
		}
		s.ws()
		s.i++ // :
		s.path = append(s.path, pathElem{key: key})
		if err := s.value(child); err != nil {
			return err
		}
		s.path = s.path[:len(s.path)-1]
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
		return &KeyError{Path: pathString(s.path), Key: string(key)}
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
		s.path = append(s.path, pathElem{index: idx})
		if err := s.value(elem); err != nil {
			return err
		}
		s.path = s.path[:len(s.path)-1]
		s.ws()
		if s.data[s.i] == ',' {
			s.i++
		}
	}
}

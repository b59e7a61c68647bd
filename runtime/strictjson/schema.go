package strictjson

import (
	"encoding/json"
	"reflect"
	"strings"
	"sync"
)

// node is what a Go type expects at one place in a document: the exact field names of a
// struct, or the element of a slice or map. nil expects nothing in particular.
type node struct {
	fields map[string]*node // struct: exact JSON names
	names  []string         // struct: the same names, for the case check
	elem   *node            // slice, array or map element
	// ignores is set for a struct that encoding/json fills, which ignores the keys that
	// are not its fields' names; not for a registered shape, whose type reads its keys
	// itself and may keep the others.
	ignores bool
}

// field returns the node for key's value in an object read as n, or a KeyError without
// its path when key would be matched to a struct field only by case folding.
func (n *node) field(key []byte) (*node, *KeyError) {
	child, _, err := fieldOf(n, key)
	return child, err
}

// fieldOf is node.field for a key of either representation, and reports whether the
// decoder of n reads key's value at all: false when n ignores the key.
func fieldOf[K string | []byte](n *node, key K) (child *node, read bool, err *KeyError) {
	if n == nil {
		return nil, true, nil
	}
	if n.fields == nil {
		return n.elem, true, nil // a map: any key, the element's type
	}
	if child, ok := n.fields[string(key)]; ok {
		return child, true, nil
	}
	for _, name := range n.names {
		if strings.EqualFold(string(key), name) {
			return nil, false, &KeyError{Key: string(key), Field: name}
		}
	}
	return nil, !n.ignores, nil
}

var (
	schemas sync.Map // reflect.Type -> *node
	shapes  sync.Map // reflect.Type -> reflect.Type
)

// RegisterShape declares that T, which decodes itself (json.Unmarshaler), reads the keys
// Shape's fields name, so keys inside a T are checked like Shape's. Register before the
// first decode of a type that contains T.
func RegisterShape[T, Shape any]() {
	shapes.Store(reflect.TypeFor[T](), reflect.TypeFor[Shape]())
}

var rawMessage = reflect.TypeFor[json.RawMessage]()

// promoted reports whether encoding/json reads the fields of struct field f (with JSON
// name name) as the outer struct's: an embedded struct, or pointer to one, without a name
// in its tag.
func promoted(f reflect.StructField, name string) bool {
	if !f.Anonymous || name != "" || f.Tag.Get("json") == "-" {
		return false
	}
	t := f.Type
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct
}

func schemaOf(v any) *node {
	t := reflect.TypeOf(v)
	if n, ok := schemas.Load(t); ok {
		return n.(*node)
	}
	n := build(t, map[seenType]*node{}, false)
	schemas.Store(t, n)
	return n
}

// seenType is a type build has met, and whether inside a registered shape.
type seenType struct {
	t     reflect.Type
	shape bool
}

// build returns t's node; seen breaks recursion through self-referencing types. shape is
// set inside a registered shape.
func build(t reflect.Type, seen map[seenType]*node, shape bool) *node {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil {
		if s, ok := shapes.Load(t); ok {
			t, shape = s.(reflect.Type), true
		}
	}
	if t == nil || t == rawMessage || t.Implements(reflect.TypeFor[json.Unmarshaler]()) ||
		reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return nil
	}
	if n, ok := seen[seenType{t, shape}]; ok {
		return n
	}
	switch t.Kind() {
	case reflect.Struct:
		n := &node{fields: map[string]*node{}, ignores: !shape}
		seen[seenType{t, shape}] = n
		var embedded []*node
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if promoted(f, name) {
				if e := build(f.Type, seen, shape); e != nil && e.fields != nil {
					embedded = append(embedded, e)
				}
				continue
			}
			if !f.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			n.fields[name] = build(f.Type, seen, shape)
			n.names = append(n.names, name)
		}
		// encoding/json fills the fields of an embedded struct as if they were the
		// outer struct's (exported or not), unless the outer struct has the name.
		for _, e := range embedded {
			for _, name := range e.names {
				if _, ok := n.fields[name]; !ok {
					n.fields[name] = e.fields[name]
					n.names = append(n.names, name)
				}
			}
		}
		return n
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil // []byte is a base64 string
		}
		n := &node{}
		seen[seenType{t, shape}] = n
		n.elem = build(t.Elem(), seen, shape)
		return n
	case reflect.Map:
		n := &node{}
		seen[seenType{t, shape}] = n
		n.elem = build(t.Elem(), seen, shape)
		if n.elem == nil {
			return nil
		}
		return n
	}
	return nil
}

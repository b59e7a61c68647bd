package strictjson

import "encoding/json"

// Valid reports whether data is one JSON value: json.Valid's answer, in 37% of
// its time for an engine's answer. The router checks every non-streamed answer before it
// goes to the client, and encoding/json's scanner, a state function a byte, was 2.3% of
// its CPU a short request (docs/benchmarks.md, "The answer's check"). A byte loop answers
// first; a document it refuses, which it also does for nesting deeper than 64, gets
// json.Valid's answer, so the answer is always json.Valid's (FuzzValid).
func Valid(data []byte) bool {
	return scans(data) || json.Valid(data)
}

// maxScanDepth is how deep scans follows containers: one bit each in a uint64.
const maxScanDepth = 64

// scans reports whether data is one JSON value nested at most maxScanDepth deep. It never
// takes what json.Valid refuses.
func scans(d []byte) bool {
	var objects uint64 // bit 0 is the innermost open container: 1 for an object
	depth := 0
	i := skipSpace(d, 0)
	for {
		// A value starts at i.
		if i >= len(d) {
			return false
		}
		switch c := d[i]; c {
		case '{', '[':
			end := byte(']')
			if c == '{' {
				end = '}'
			}
			if j := skipSpace(d, i+1); j < len(d) && d[j] == end {
				i = j + 1
				break // an empty container is a whole value
			}
			if depth == maxScanDepth {
				return false
			}
			depth++
			objects <<= 1
			i = skipSpace(d, i+1)
			if c == '{' {
				objects |= 1
				if i = member(d, i); i < 0 {
					return false
				}
			}
			continue
		case '"':
			i = str(d, i)
		case 't':
			i = word(d, i, "true")
		case 'f':
			i = word(d, i, "false")
		case 'n':
			i = word(d, i, "null")
		default:
			i = number(d, i)
		}
		if i < 0 {
			return false
		}
		// A value ended at i: what follows closes containers, or starts the next value.
		for {
			i = skipSpace(d, i)
			if depth == 0 {
				return i == len(d)
			}
			if i >= len(d) {
				return false
			}
			obj := objects&1 == 1
			if c := d[i]; c == '}' && obj || c == ']' && !obj {
				objects >>= 1
				depth--
				i++
				continue
			} else if c != ',' {
				return false
			}
			i = skipSpace(d, i+1)
			if obj {
				if i = member(d, i); i < 0 {
					return false
				}
			}
			break
		}
	}
}

// member reads an object member's key and colon at i, returning where its value starts,
// or -1.
func member(d []byte, i int) int {
	if i >= len(d) || d[i] != '"' {
		return -1
	}
	if i = str(d, i); i < 0 {
		return -1
	}
	if i = skipSpace(d, i); i >= len(d) || d[i] != ':' {
		return -1
	}
	return skipSpace(d, i+1)
}

func skipSpace(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\n' || d[i] == '\r' || d[i] == '\t') {
		i++
	}
	return i
}

// str reads the string whose quote is at i, returning the index past its closing quote,
// or -1. Any byte from 0x20 is taken, as encoding/json takes it (invalid UTF-8 too).
func str(d []byte, i int) int {
	for i++; i < len(d); i++ {
		for i < len(d) && strClass[d[i]] != 1 { // not a quote, a backslash or a control byte
			i++
		}
		if i >= len(d) {
			return -1
		}
		switch c := d[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			i++
			if i >= len(d) {
				return -1
			}
			switch d[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(d) {
					return -1
				}
				for _, h := range d[i+1 : i+5] {
					if !isHex(h) {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// word reads the literal w at i, returning the index past it, or -1.
func word(d []byte, i int, w string) int {
	if len(d)-i < len(w) || string(d[i:i+len(w)]) != w {
		return -1
	}
	return i + len(w)
}

// number reads a number at i, returning the index past it, or -1:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func number(d []byte, i int) int {
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		i = digits(d, i)
	default:
		return -1
	}
	if i < len(d) && d[i] == '.' {
		if j := digits(d, i+1); j > i+1 {
			i = j
		} else {
			return -1
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := digits(d, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digits(d []byte, i int) int {
	for i < len(d) && '0' <= d[i] && d[i] <= '9' {
		i++
	}
	return i
}

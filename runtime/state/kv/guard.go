package kv

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// maxNesting bounds how deeply a payload's arrays and maps nest; KV-event batches need 4.
const maxNesting = 16

// checkPayload walks a msgpack payload without decoding it and rejects one whose declared
// sizes cannot be true: an array or map claiming more elements, or a string more bytes,
// than the payload has left. The msgpack library allocates what a header declares before
// reading the elements, so a 16-byte message declaring a map of four billion entries
// would otherwise exhaust the router's memory. It also bounds the nesting depth.
func checkPayload(b []byte) error {
	pending := []uint64{1} // elements still to read at each open level; the payload is one value
	for len(pending) > 0 {
		if pending[len(pending)-1] == 0 {
			pending = pending[:len(pending)-1]
			continue
		}
		pending[len(pending)-1]--
		if len(b) == 0 {
			return errors.New("payload ends inside a value")
		}
		c := b[0]
		b = b[1:]
		var skip, elems uint64 // bytes to skip, elements of a container opened here
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3: // fixints, nil, bools
		case c >= 0x80 && c <= 0x8f:
			elems = 2 * uint64(c&0x0f)
		case c >= 0x90 && c <= 0x9f:
			elems = uint64(c & 0x0f)
		case c >= 0xa0 && c <= 0xbf:
			skip = uint64(c & 0x1f)
		default:
			var err error
			if skip, elems, b, err = header(c, b); err != nil {
				return err
			}
		}
		if skip > uint64(len(b)) || elems > uint64(len(b)) {
			return fmt.Errorf("payload declares %d bytes or elements where %d bytes are left", max(skip, elems), len(b))
		}
		b = b[skip:]
		if elems > 0 {
			if len(pending) == maxNesting {
				return fmt.Errorf("payload nests deeper than %d levels", maxNesting)
			}
			pending = append(pending, elems)
		}
	}
	if len(b) > 0 {
		return fmt.Errorf("%d bytes after the payload", len(b))
	}
	return nil
}

// header reads what follows format byte c and returns the bytes to skip and the elements
// to read (a map's entries count twice), and the rest of b.
func header(c byte, b []byte) (skip, elems uint64, rest []byte, err error) {
	var width int // of the length that follows c
	switch c {
	case 0xcc, 0xd0: // uint8, int8
		return 1, 0, b, nil
	case 0xcd, 0xd1, 0xd4: // 16-bit ints; fixext1 (type byte and 1 data byte)
		return 2, 0, b, nil
	case 0xd5: // fixext2
		return 3, 0, b, nil
	case 0xca, 0xce, 0xd2: // float32, 32-bit ints
		return 4, 0, b, nil
	case 0xd6: // fixext4
		return 5, 0, b, nil
	case 0xcb, 0xcf, 0xd3: // float64, 64-bit ints
		return 8, 0, b, nil
	case 0xd7: // fixext8
		return 9, 0, b, nil
	case 0xd8: // fixext16
		return 17, 0, b, nil
	case 0xc4, 0xc7, 0xd9: // bin8, ext8, str8
		width = 1
	case 0xc5, 0xc8, 0xda, 0xdc, 0xde: // bin16, ext16, str16, array16, map16
		width = 2
	case 0xc6, 0xc9, 0xdb, 0xdd, 0xdf: // bin32, ext32, str32, array32, map32
		width = 4
	default:
		return 0, 0, nil, fmt.Errorf("payload has the unused msgpack format byte 0x%02x", c)
	}
	if len(b) < width {
		return 0, 0, nil, errors.New("payload ends inside a length")
	}
	var n uint64
	switch width {
	case 1:
		n = uint64(b[0])
	case 2:
		n = uint64(binary.BigEndian.Uint16(b))
	default:
		n = uint64(binary.BigEndian.Uint32(b))
	}
	b = b[width:]
	switch c {
	case 0xc7, 0xc8, 0xc9: // ext: a type byte, then the data
		return n + 1, 0, b, nil
	case 0xdc, 0xdd:
		return 0, n, b, nil
	case 0xde, 0xdf:
		return 0, 2 * n, b, nil
	}
	return n, 0, b, nil // bin, str
}

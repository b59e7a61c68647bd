package hf

// byteRune is GPT-2's bytes_to_unicode table: the printable character that stands for each
// byte in a byte-level vocabulary. Printable Latin-1 bytes stand for themselves; the other
// 68 bytes (controls, space, 0x7F-0xA0, 0xAD) are shifted to U+0100 upwards in byte order,
// so that every vocabulary entry is a printable string ("Ġ" is the space).
var byteRune = func() (t [256]rune) {
	n := rune(0)
	for b := range 256 {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE {
			t[b] = rune(b)
			continue
		}
		t[b] = 256 + n
		n++
	}
	return t
}()

// runeByte inverts byteRune; it is -1 for a character that stands for no byte.
var runeByte = func() (t [324]int16) {
	for i := range t {
		t[i] = -1
	}
	for b, r := range byteRune {
		t[r] = int16(b)
	}
	return t
}()

// unByteLevel turns a byte-level string back into the bytes it stands for. ok is false
// when a character of s stands for no byte, as in an added token's plain content.
func unByteLevel(s string) (b []byte, ok bool) {
	if b, ok = appendUnByteLevel(make([]byte, 0, len(s)), s); !ok {
		return nil, false
	}
	return b, true
}

// appendUnByteLevel appends the bytes the byte-level string s stands for to dst. ok is
// false, with dst returned as it was, when a character of s stands for no byte, as in an
// added token's plain content.
func appendUnByteLevel(dst []byte, s string) (b []byte, ok bool) {
	b = dst
	for _, r := range s {
		if r >= rune(len(runeByte)) || runeByte[r] < 0 {
			return dst, false
		}
		b = append(b, byte(runeByte[r]))
	}
	return b, true
}

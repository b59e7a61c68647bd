package compiler

import "testing"

func TestTrailingComma(t *testing.T) {
	for _, tc := range []struct {
		src       string
		line, col int
	}{
		{`{"a": [1, 2,]}`, 1, 12},
		{"{\"a\": 1,\n}", 1, 8},
		{`{"a": ",]"}`, 0, 0},   // inside a string
		{`{"a": "\",]"}`, 0, 0}, // after an escaped quote
		{`{"a": [1, 2], "b": 3}`, 0, 0},
	} {
		line, col, ok := trailingComma([]byte(tc.src))
		if ok != (tc.line > 0) || line != tc.line || col != tc.col {
			t.Errorf("trailingComma(%q) = %d:%d %v, want %d:%d", tc.src, line, col, ok, tc.line, tc.col)
		}
	}
}

func TestFriendlier(t *testing.T) {
	for in, want := range map[string]string{
		`conflicting values "32" and int (mismatched types string and int)`:    `expected an integer, got the string "32": remove the quotes`,
		`conflicting values 42 and string (mismatched types int and string)`:   `expected a string, got the integer 42`,
		`conflicting values "yes" and bool (mismatched types string and bool)`: `expected true or false, got the string "yes": remove the quotes`,
		`reference "plain" not found`:                                          `reference "plain" not found: CUE reads an unquoted word as a reference to a field; a string value is quoted: "plain"`,
		`conflicting values "a" and "b"`:                                       `conflicting values "a" and "b"`,
	} {
		if got := friendlier(in); got != want {
			t.Errorf("friendlier(%q) = %q, want %q", in, got, want)
		}
	}
}

package compiler

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// The mistakes a newcomer makes first — a tab in YAML, a trailing comma in JSON, an
// unquoted string in CUE, a number written as a string — get CUE's and the YAML decoder's
// messages, which name the parser's state rather than the fix. These rewrite them into
// what is wrong at that position and what to write instead.

// syntaxError rewrites a file's parse error when it is one of the common mistakes; other
// errors are returned as they are.
func syntaxError(src Source, err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "found character that cannot start any token") || strings.Contains(msg, "found a tab character"):
		if line := tabLine(src.Data); line > 0 {
			return &Error{File: src.Name, Line: line, Col: 1, Msg: "a tab indents this line, and YAML indents with spaces only: replace the tab with spaces"}
		}
	case strings.HasPrefix(msg, "invalid JSON") || strings.Contains(msg, "invalid character"):
		if line, col, ok := trailingComma(src.Data); ok {
			return &Error{File: src.Name, Line: line, Col: col, Msg: "a comma after the last element, which JSON does not allow: remove it"}
		}
	}
	return err
}

// tabLine is the first line (1-based) that starts its indentation with a tab, or 0.
func tabLine(data []byte) int {
	for i, line := range bytes.Split(data, []byte("\n")) {
		indent := line[:len(line)-len(bytes.TrimLeft(line, " \t"))]
		if bytes.ContainsRune(indent, '\t') {
			return i + 1
		}
	}
	return 0
}

// trailingComma finds the first comma followed, past white space, by a closing bracket or
// brace outside strings, and returns its position.
func trailingComma(data []byte) (line, col int, ok bool) {
	inString, escaped := false, false
	comma := -1
	for i, c := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString, comma = true, -1
		case c == ',':
			comma = i
		case c == ']' || c == '}':
			if comma >= 0 {
				line = 1 + bytes.Count(data[:comma], []byte("\n"))
				col = comma - bytes.LastIndexByte(data[:comma], '\n')
				return line, col, true
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		default:
			comma = -1
		}
	}
	return 0, 0, false
}

// mismatch is CUE's message for a value of the wrong type against a type constraint.
var mismatch = regexp.MustCompile(`^conflicting values (.+) and (int|number|float|string|bool) \(mismatched types (\w+) and \w+\)$`)

// notFound is CUE's message for an unquoted word in a .cue file.
var notFound = regexp.MustCompile(`^reference "([^"]+)" not found$`)

// friendlier rewrites CUE's type and reference messages into what the field expects.
func friendlier(msg string) string {
	if m := mismatch.FindStringSubmatch(msg); m != nil {
		want := map[string]string{"int": "an integer", "number": "a number", "float": "a number", "string": "a string", "bool": "true or false"}[m[2]]
		got := map[string]string{"string": "the string ", "int": "the integer ", "float": "the number ", "number": "the number ", "bool": "", "list": "a list ", "struct": "a struct ", "null": ""}[m[3]]
		hint := ""
		if m[2] != "string" && m[3] == "string" {
			hint = ": remove the quotes"
		}
		return fmt.Sprintf("expected %s, got %s%s%s", want, got, m[1], hint)
	}
	if m := notFound.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("%s: CUE reads an unquoted word as a reference to a field; a string value is quoted: \"%s\"", msg, m[1])
	}
	return msg
}

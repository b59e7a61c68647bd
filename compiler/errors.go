package compiler

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"

	"github.com/routerkit/router/cue/schema"
)

// Error is one problem in a configuration, at the position in the user's file that has to
// change. Path is the CUE path of the offending value ("models.llama.buckets.0.id").
type Error struct {
	File      string
	Line, Col int
	Path      string
	Msg       string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		fmt.Fprintf(&b, "%s:%d:%d: ", e.File, e.Line, e.Col)
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in a configuration, sorted by position. The compiler
// reports all it can find in one pass so that a person fixes a file once, not once per
// error.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// errorList collects errors during one compilation.
type errorList struct {
	errs Errors
	// user is the unified user value, used to place errors that CUE positions only in
	// the schema, such as a missing required field.
	user cue.Value
}

// at records a problem at pos for the value at path.
func (l *errorList) at(pos token.Pos, path cue.Path, format string, args ...any) {
	e := &Error{Path: pathString(path), Msg: fmt.Sprintf(format, args...)}
	if pos.IsValid() {
		e.File, e.Line, e.Col = pos.Filename(), pos.Line(), pos.Column()
	}
	l.errs = append(l.errs, e)
}

// add records err from reading file name: positioned CUE errors keep their positions,
// anything else is reported at the start of the file.
func (l *errorList) add(name string, err error) {
	var ce cueerrors.Error
	if errors.As(err, &ce) {
		l.addCUE(err)
		return
	}
	l.errs = append(l.errs, &Error{File: name, Line: 1, Col: 1, Msg: err.Error()})
}

// addCUE converts a CUE evaluation error into positioned errors. Of the positions CUE
// gives, the first one in a user file wins: the schema is never what the user must edit.
func (l *errorList) addCUE(err error) {
	for _, ce := range cueerrors.Errors(err) {
		format, args := ce.Msg()
		e := &Error{Path: strings.Join(ce.Path(), "."), Msg: fmt.Sprintf(format, args...)}
		positions := cueerrors.Positions(ce)
		if i := slices.IndexFunc(positions, isUserPos); i >= 0 {
			positions = positions[i:]
		}
		p := token.NoPos
		if len(positions) > 0 {
			p = positions[0]
		}
		if !isUserPos(p) {
			if up := l.userPos(ce.Path()); up.IsValid() {
				p = up
			}
		}
		if p.IsValid() {
			e.File, e.Line, e.Col = p.Filename(), p.Line(), p.Column()
		}
		// A conflict between two user files names the other place too.
		for _, q := range positions[min(1, len(positions)):] {
			if isUserPos(q) && q.Filename() != p.Filename() {
				e.Msg += fmt.Sprintf(" (also set at %s:%d:%d)", q.Filename(), q.Line(), q.Column())
				break
			}
		}
		l.errs = append(l.errs, e)
	}
}

// userPos is the position of the deepest value along path that the user wrote.
func (l *errorList) userPos(path []string) token.Pos {
	if !l.user.Exists() {
		return token.NoPos
	}
	v, best := l.user, l.user.Pos()
	for _, part := range path {
		sel := cue.Str(part)
		if i, err := strconv.Atoi(part); err == nil && v.IncompleteKind() == cue.ListKind {
			sel = cue.Index(i)
		}
		if v = v.LookupPath(cue.MakePath(sel)); !v.Exists() {
			break
		}
		if v.Pos().IsValid() {
			best = v.Pos()
		}
	}
	return best
}

func isUserPos(p token.Pos) bool {
	return p.IsValid() && p.Filename() != schema.Filename
}

// result sorts and de-duplicates the collected errors; nil when there are none.
func (l *errorList) result() error {
	if len(l.errs) == 0 {
		return nil
	}
	slices.SortStableFunc(l.errs, func(a, b *Error) int {
		if c := strings.Compare(a.File, b.File); c != 0 {
			return c
		}
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return a.Col - b.Col
	})
	l.errs = slices.CompactFunc(l.errs, func(a, b *Error) bool { return *a == *b })
	return l.errs
}

func pathString(p cue.Path) string {
	sels := p.Selectors()
	parts := make([]string, len(sels))
	for i, s := range sels {
		parts[i] = s.String()
	}
	return strings.Join(parts, ".")
}

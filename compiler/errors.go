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
	"github.com/routerkit/router/runtime/suggest"
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
// reports all it can find at each stage so that a person fixes a file once, not once per
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
	// schema is #Config, used to name the fields a closed struct allows.
	schema cue.Value
	// covered counts the leading errors whose paths the schema's errors must not repeat.
	covered int
	// firstFile is where an error that has no position of its own is reported, so every
	// line of output starts with file:line:col.
	firstFile string
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
		if e.Msg == "field not allowed" {
			e.Msg += l.allowedHint(ce.Path())
		}
		if !l.isCovered(e.Path) {
			l.errs = append(l.errs, e)
		}
	}
}

// isCovered reports whether an earlier check already reported path or a value above it.
func (l *errorList) isCovered(path string) bool {
	for _, e := range l.errs[:l.covered] {
		if path == e.Path || strings.HasPrefix(path, e.Path+".") {
			return true
		}
	}
	return false
}

// allowedHint suggests the field a misspelt one was meant to be, or lists the fields the
// struct allows.
func (l *errorList) allowedHint(path []string) string {
	if len(path) == 0 || !l.schema.Exists() {
		return ""
	}
	// Walk the schema along the path: a list element is the list's element constraint,
	// and a name of models is the pattern's value, found by filling the name in.
	parent := l.schema
	for _, part := range path[:len(path)-1] {
		next := parent.LookupPath(cue.MakePath(cue.Str(part)))
		switch {
		case parent.IncompleteKind() == cue.ListKind:
			next = parent.LookupPath(cue.MakePath(cue.AnyIndex))
		case !next.Exists():
			next = parent.FillPath(cue.MakePath(cue.Str(part)), struct{}{}).LookupPath(cue.MakePath(cue.Str(part)))
		}
		parent = next
	}
	it, err := parent.Fields(cue.Optional(true))
	if err != nil {
		return ""
	}
	bad := path[len(path)-1]
	var allowed []string
	for it.Next() {
		if name := it.Selector().Unquoted(); name != bad {
			allowed = append(allowed, name)
		}
	}
	switch best := suggest.Closest(bad, allowed, len(bad)/2+1); {
	case best != "":
		return fmt.Sprintf("; did you mean %q?", best)
	case len(allowed) > 0:
		return "; allowed here: " + strings.Join(allowed, ", ")
	}
	return ""
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
	for _, e := range l.errs {
		e.Msg = friendlier(e.Msg)
	}
	l.errs = slices.CompactFunc(l.errs, func(a, b *Error) bool { return *a == *b })
	l.errs = dropDisjunctionNoise(l.errs)
	for _, e := range l.errs {
		if e.File == "" || e.Line < 1 {
			e.File, e.Line, e.Col = l.firstFile, 1, 1
		}
	}
	return l.errs
}

// dropDisjunctionNoise removes what CUE says about the branches of a failed disjunction
// when a more specific message exists for the same path: the "N errors in empty
// disjunction" header and the conflict with the default branch, which the user never
// wrote.
func dropDisjunctionNoise(errs Errors) Errors {
	specific := map[string]bool{}
	for _, e := range errs {
		if !isBranchNoise(e.Msg) {
			specific[e.Path] = true
		}
	}
	return slices.DeleteFunc(errs, func(e *Error) bool { return specific[e.Path] && isBranchNoise(e.Msg) })
}

func isBranchNoise(msg string) bool {
	return strings.HasSuffix(msg, "errors in empty disjunction:") || strings.HasPrefix(msg, "conflicting values ")
}

func pathString(p cue.Path) string {
	sels := p.Selectors()
	parts := make([]string, len(sels))
	for i, s := range sels {
		parts[i] = s.String()
	}
	return strings.Join(parts, ".")
}

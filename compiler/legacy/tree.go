package legacy

import (
	"fmt"
	"strconv"
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/token"
)

// node is one CUE struct of the generated configuration. Its fields keep the order they
// were set in, and each may say where its value came from, which becomes its comment: an
// operator reading the output can trace every value back to a legacy flag.
type node struct {
	fields []*field
}

// field is one labelled value. A value is a string, int64, float64, bool, []string,
// *node or []*node.
type field struct {
	label string
	value any
	from  string
}

// set appends a field.
func (n *node) set(label string, value any, from string) {
	n.fields = append(n.fields, &field{label: label, value: value, from: from})
}

// child returns the struct under label, adding it if n has none yet.
func (n *node) child(label string) *node {
	for _, f := range n.fields {
		if c, ok := f.value.(*node); ok && f.label == label {
			return c
		}
	}
	c := &node{}
	n.set(label, c, "")
	return c
}

// render formats root as a CUE file, after a header of comment lines.
func render(header []string, root *node) ([]byte, error) {
	var decls []ast.Decl
	if len(header) > 0 {
		cg := &ast.CommentGroup{Doc: true}
		for _, line := range header {
			text := "//"
			if line != "" && !strings.HasPrefix(line, "\t") {
				text += " "
			}
			cg.List = append(cg.List, &ast.Comment{Text: text + line})
		}
		decls = append(decls, cg)
	}
	for _, f := range root.fields {
		decls = append(decls, f.ast())
	}
	out, err := format.Node(&ast.File{Decls: decls})
	if err != nil {
		return nil, fmt.Errorf("formatting the migrated configuration: %w", err)
	}
	return out, nil
}

// ast converts a field. Its provenance is a comment at the end of the line for a scalar,
// and above the field for a struct or list, whose last line is a closing bracket.
func (f *field) ast() *ast.Field {
	af := &ast.Field{Label: ast.NewStringLabel(f.label), Value: expr(f.value)}
	if f.from == "" {
		return af
	}
	cg := &ast.CommentGroup{List: []*ast.Comment{{Text: "// " + f.from}}}
	switch f.value.(type) {
	case *node, []*node:
		cg.Doc = true
	default:
		cg.Line, cg.Position = true, 4
	}
	ast.AddComment(af, cg)
	return af
}

func expr(v any) ast.Expr {
	switch v := v.(type) {
	case string:
		return ast.NewString(v)
	case int64:
		return ast.NewLit(token.INT, strconv.FormatInt(v, 10))
	case float64:
		return ast.NewLit(token.FLOAT, floatLiteral(v))
	case bool:
		return ast.NewBool(v)
	case []string:
		elts := make([]ast.Expr, len(v))
		for i, s := range v {
			elts[i] = ast.NewString(s)
		}
		return ast.NewList(elts...)
	case *node:
		s := &ast.StructLit{}
		for _, f := range v.fields {
			s.Elts = append(s.Elts, f.ast())
		}
		return s
	case []*node:
		elts := make([]ast.Expr, len(v))
		for i, n := range v {
			elts[i] = expr(n)
		}
		return ast.NewList(elts...)
	}
	panic(fmt.Sprintf("internal error: no CUE form for %T", v))
}

// floatLiteral spells f as a CUE float: decimal notation, with a fraction so that CUE
// reads a number, as the flag's value was, rather than an int.
func floatLiteral(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

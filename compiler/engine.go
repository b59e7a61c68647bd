package compiler

import (
	"fmt"
	"slices"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"

	"github.com/routerkit/router/cue/schema"
	"github.com/routerkit/router/runtime/plan"
)

// CompileEngine compiles one engine written in the configuration's engine shape (one item
// of engines:), for an engine added to a running router (POST /admin/engines). It applies
// the schema's rules and defaults, then the cross-checks a configuration gets against the
// running plan: a model the router serves, a role its buckets use, an id and url no other
// engine has, KV-event endpoints that do not collide. The error, when not nil, is an
// Errors whose paths are the engine's own fields.
func CompileEngine(running *plan.Plan, src Source) (e plan.Engine, err error) {
	defer func() {
		if r := recover(); r != nil {
			e, err = plan.Engine{}, fmt.Errorf("the CUE library failed on this engine (%v): check it for malformed syntax", r)
		}
	}()
	ctx := cuecontext.New()
	errs := errorList{firstFile: src.Name}
	v, perr := parse(ctx, src)
	if perr != nil {
		if se, ok := syntaxError(src, perr).(*Error); ok {
			errs.errs = append(errs.errs, se)
		} else {
			errs.add(src.Name, perr)
		}
		return plan.Engine{}, errs.result()
	}
	errs.user = v
	root := ctx.CompileBytes(schema.Source, cue.Filename(schema.Filename))
	errs.schema = root.LookupPath(cue.MakePath(cue.Def("#Engine")))
	u := v.Unify(errs.schema)
	if err := u.Validate(cue.Concrete(true)); err != nil {
		errs.addCUE(err)
		return plan.Engine{}, errs.result()
	}
	if err := u.Decode(&e); err != nil {
		errs.addCUE(err)
		return plan.Engine{}, errs.result()
	}
	// What the checks report of the plan with the engine appended and not of the running
	// plan alone is about the engine.
	baseline := map[string]bool{}
	for _, ce := range crossCheck(ctx, running) {
		baseline[ce.Path+"\x00"+ce.Msg] = true
	}
	p := *running
	p.Engines = append(slices.Clone(running.Engines), e)
	prefix := fmt.Sprintf("engines.%d.", len(running.Engines))
	for _, ce := range crossCheck(ctx, &p) {
		if baseline[ce.Path+"\x00"+ce.Msg] {
			continue
		}
		if path, own := strings.CutPrefix(ce.Path, prefix); own {
			ce.Path = path
		}
		ce.File, ce.Line, ce.Col = "", 0, 0
		errs.errs = append(errs.errs, ce)
	}
	if err := errs.result(); err != nil {
		return plan.Engine{}, err
	}
	return e, nil
}

// crossCheck runs the configuration's cross-reference checks on a plan, without
// positions.
func crossCheck(ctx *cue.Context, p *plan.Plan) Errors {
	l := errorList{user: ctx.CompileString("{}")}
	check(p, l.user, &l)
	return l.errs
}

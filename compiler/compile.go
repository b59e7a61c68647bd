// Package compiler turns user configuration files (CUE, YAML or JSON) into a runtime
// plan. It unifies the files with the embedded schema, validates them concretely, runs the
// cross-reference checks CUE cannot express, and decodes the result into runtime/plan
// structs with every default filled in.
//
// It is the only package that imports CUE: the request path works on the plan alone.
package compiler

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/encoding/json"
	"cuelang.org/go/encoding/yaml"

	"github.com/routerkit/router/cue/schema"
	"github.com/routerkit/router/runtime/plan"
)

// Source is one configuration file's name and content.
type Source struct {
	Name string
	Data []byte
}

// Compile reads the named files and compiles them into a plan. Several files unify into
// one configuration. The error, when not nil, is an Errors listing every problem found, or
// a plain error when a file cannot be read.
func Compile(files []string) (*plan.Plan, error) {
	srcs := make([]Source, len(files))
	for i, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("reading config: %w", err)
		}
		srcs[i] = Source{Name: name, Data: data}
	}
	return CompileSources(srcs)
}

// CompileSources compiles in-memory files; the extension of each name selects its format.
func CompileSources(srcs []Source) (p *plan.Plan, err error) {
	// The CUE library has panicked on malformed input (found by FuzzCompile: its YAML
	// decoder indexes past a line table). A config, however broken, gets an error.
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("the CUE library failed on this configuration (%v): check the files for malformed syntax; this is a bug in cuelang.org/go worth reporting", r)
		}
	}()
	ctx := cuecontext.New()
	if len(srcs) == 0 {
		return nil, fmt.Errorf("no configuration file given")
	}
	errs := errorList{firstFile: srcs[0].Name}
	var user cue.Value
	for i, src := range srcs {
		v, err := parse(ctx, src)
		if err != nil {
			if e, ok := syntaxError(src, err).(*Error); ok {
				errs.errs = append(errs.errs, e)
				continue
			}
			errs.add(src.Name, err)
			continue
		}
		if i == 0 {
			user = v
		} else {
			user = user.Unify(v)
		}
	}
	if err := errs.result(); err != nil {
		return nil, err
	}
	errs.user = user
	if err := user.Err(); err != nil {
		errs.addCUE(err)
		return nil, errs.result()
	}
	if k := user.IncompleteKind(); k != cue.StructKind && k != cue.TopKind { // an empty file is _
		errs.errs = append(errs.errs, &Error{File: srcs[0].Name, Line: 1, Col: 1, Msg: fmt.Sprintf(
			"a configuration is a mapping at its top level (listen, engines, models, ...), not a %v (a YAML file with several documents is a list)", k)})
		return nil, errs.result()
	}

	// Dropped options, misplaced tuning and out-of-range numbers are reported on the
	// user's own value, in their own words: the schema would only call them "not allowed"
	// or fail to decode them. Schema errors at or below the paths already reported are
	// left out, so each problem is said once.
	precheck(user, &errs)
	errs.covered = len(errs.errs)
	errs.schema = configSchema(ctx)
	v := user.Unify(errs.schema)
	if err := v.Validate(cue.Concrete(true)); err != nil {
		errs.addCUE(err)
	}
	if err := errs.result(); err != nil {
		return nil, err
	}
	var f file
	if err := v.Decode(&f); err != nil {
		errs.addCUE(err)
		return nil, errs.result()
	}
	p = f.plan()
	check(p, user, &errs)
	(&checker{p: p, user: user, errs: &errs}).checkGateway(f.Auth)
	if err := errs.result(); err != nil {
		return nil, err
	}
	return p, nil
}

// file mirrors the configuration's top level as written: models keyed by name.
type file struct {
	Listen            string                `json:"listen"`
	AdminToken        string                `json:"admin_token"`
	Health            plan.Health           `json:"health"`
	ShutdownGraceSecs int                   `json:"shutdown_grace_secs"`
	ShutdownDelaySecs int                   `json:"shutdown_delay_secs"`
	Readiness         string                `json:"readiness"`
	Engines           []plan.Engine         `json:"engines"`
	EnginesFromDNS    []plan.DNSSource      `json:"engines_from_dns"`
	Models            map[string]plan.Model `json:"models"`
	Timeouts          plan.Timeouts         `json:"timeouts"`
	Limits            plan.ServerLimits     `json:"limits"`
	Breaker           plan.Breaker          `json:"breaker"`
	Retries           plan.Retries          `json:"retries"`
	Headers           plan.HeaderPolicy     `json:"headers"`
	State             plan.StateLimits      `json:"state"`
	Queue             plan.Queue            `json:"queue"`
	RateLimit         *plan.RateLimit       `json:"rate_limit"`
	Bindings          *plan.Bindings        `json:"bindings"`
	EngineTransport   plan.EngineTransport  `json:"engine_transport"`
	ClientTransport   plan.ClientTransport  `json:"client_transport"`
	Tracing           *plan.Tracing         `json:"tracing"`
	RequestID         plan.RequestID        `json:"request_id"`
	Debug             plan.Debug            `json:"debug"`
	Auth              *authKeys             `json:"auth"`
	TLS               *plan.TLS             `json:"tls"`
	EngineTLS         *plan.EngineTLS       `json:"engine_tls"`
	Metrics           *plan.MetricsListener `json:"metrics"`
}

func (f *file) plan() *plan.Plan {
	p := &plan.Plan{Listen: f.Listen, AdminToken: f.AdminToken, Health: f.Health,
		ShutdownGraceSecs: f.ShutdownGraceSecs, ShutdownDelaySecs: f.ShutdownDelaySecs, Readiness: f.Readiness, Engines: f.Engines,
		Timeouts: f.Timeouts, Limits: f.Limits, Breaker: f.Breaker, Retries: f.Retries,
		Headers: f.Headers, State: f.State, Bindings: f.Bindings, EngineTransport: f.EngineTransport, ClientTransport: f.ClientTransport,
		Tracing: f.Tracing, RequestID: f.RequestID, Debug: f.Debug,
		Queue: f.Queue, RateLimit: f.RateLimit,
		Auth: f.Auth.plan(), TLS: f.TLS, EngineTLS: f.EngineTLS, Metrics: f.Metrics}
	if p.RateLimit != nil && p.RateLimit.Burst == 0 {
		p.RateLimit.Burst = p.Limits.MaxConcurrentRequests
	}
	if p.Engines == nil {
		p.Engines = []plan.Engine{}
	}
	for _, s := range f.EnginesFromDNS {
		s.Engine.Model, s.Engine.Role = s.Model, s.Role
		if s.ID == "" {
			s.ID = defaultSourceID(s)
		}
		p.EnginesFromDNS = append(p.EnginesFromDNS, s)
	}
	names := make([]string, 0, len(f.Models))
	for name := range f.Models {
		names = append(names, name)
	}
	sort.Strings(names)
	p.Models = make([]plan.Model, 0, len(names))
	for _, name := range names {
		m := f.Models[name]
		m.Name = name
		if m.Buckets == nil {
			m.Buckets = []plan.Bucket{}
		}
		p.Models = append(p.Models, m)
	}
	return p
}

// parse builds one user file. Each file is self-contained: files combine by unification,
// not by references across files.
func parse(ctx *cue.Context, src Source) (cue.Value, error) {
	switch ext := filepath.Ext(src.Name); ext {
	case ".cue":
		f, err := parser.ParseFile(src.Name, src.Data, parser.ParseComments)
		if err != nil {
			return cue.Value{}, err
		}
		return buildFile(ctx, f)
	case ".yaml", ".yml":
		f, err := yaml.Extract(src.Name, src.Data)
		if err != nil {
			return cue.Value{}, err
		}
		return buildFile(ctx, f)
	case ".json":
		expr, err := json.Extract(src.Name, src.Data)
		if err != nil {
			return cue.Value{}, err
		}
		v := ctx.BuildExpr(expr)
		return v, v.Err()
	default:
		return cue.Value{}, fmt.Errorf("unsupported config format %q: name the file .cue, .yaml, .yml or .json", ext)
	}
}

func buildFile(ctx *cue.Context, f *ast.File) (cue.Value, error) {
	v := ctx.BuildFile(f)
	return v, v.Err()
}

// configSchema returns #Config compiled in ctx. A broken embedded schema is a programming
// error, not a user error.
func configSchema(ctx *cue.Context) cue.Value {
	v := ctx.CompileBytes(schema.Source, cue.Filename(schema.Filename))
	if err := v.Err(); err != nil {
		panic(fmt.Sprintf("internal error: invalid embedded schema: %v", err))
	}
	return v.LookupPath(cue.MakePath(cue.Def("#Config")))
}

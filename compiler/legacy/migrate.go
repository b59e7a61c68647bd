// Package legacy migrates an sgl-router command line, and its --bucket-config file, into a
// router configuration in CUE.
//
// It reads the classic router's and SMG's command lines (dialect.go, smg.go, gateway.go)
// and the experimental sgl-router's grouped CLI (reference/sglang-router.md §1.3), the
// latter with one addition: a migration cannot ask workers for their role, so prefill/decode
// workers are given as in the classic router's PD mode, --prefill URL [BOOTSTRAP_PORT|none]
// and --decode URL, and plain workers with --worker-urls. Every flag keeps its meaning,
// default, unit and validation; a command line sgl-router refused is refused here. A flag
// the target design dropped, a flag migrate does not know and a setting the configuration
// cannot express are errors: nothing is silently dropped or approximated.
//
// The result is formatted by CUE's formatter, carries a comment on every value naming the
// flag it came from, and is compiled before it is returned, so a migration never yields a
// configuration that `router validate` would refuse.
package legacy

import (
	"fmt"
	"os"
	"strings"
	"unicode"

	"github.com/routerkit/router/compiler"
	"github.com/routerkit/router/runtime/plan"
)

// Input is what to migrate.
type Input struct {
	// Args is the legacy command line without the program name.
	Args []string
	// BucketConfig is the path of a legacy bucket file; it may be given in Args instead.
	BucketConfig string
	// Pairs are PREFILL_BUCKET=DECODE_BUCKET associations of the bucket file's buckets.
	Pairs []string
	// EngineMaxRunningRequests and EngineMaxKVTokens are the engines' limits (SGLang's
	// max_running_requests and max_total_num_tokens), which sgl-router read from their
	// load reports to check capacity before power_of_two, session_aware, cache_aware and
	// decode picks. A configuration's admission caps are absolute, so they can only be
	// given; nil leaves that part of the check out, and the header says so.
	EngineMaxRunningRequests *int64
	EngineMaxKVTokens        *int64
	// EnginesPublishKVEvents says every engine publishes KV events, so cache_aware keeps
	// the local prefix index they feed. Without it cache_aware gets the approximate index
	// learned from the router's dispatches, as sgl-router's radix tree was: a command line
	// does not say whether engines publish events, and an event-fed index without events
	// stays empty.
	EnginesPublishKVEvents bool
	// From is the sgl-router whose command line Args is; DialectAuto detects it.
	From Dialect
	// ModelID names the served model when the command line does not (the classic router
	// has no --model-id) or to rename it.
	ModelID string
}

// rules checks migrate's own inputs against the parsed command line.
func (in Input) rules(c *cli) Errors {
	var p Errors
	if strings.ContainsFunc(in.BucketConfig, unicode.IsControl) {
		p.addf("--bucket-config %q: the path contains a control character, which the migrated configuration's comments cannot quote: rename the file", in.BucketConfig)
	}
	if v, bad := controlIn(in.Pairs); bad {
		p.addf("--pair %q contains a control character, which the migrated configuration's comments cannot quote: remove it", v)
	}
	if c.dialect == DialectClassic {
		p.check(in.EngineMaxRunningRequests == nil && in.EngineMaxKVTokens == nil,
			"--engine-max-running-requests and --engine-max-kv-tokens keep the experimental sgl-router's capacity check, which the classic router did not make: remove them")
	}
	p.check(!in.EnginesPublishKVEvents || c.usesCacheAware(),
		"--engines-publish-kv-events chooses the prefix index of --policy cache_aware, and the command line has --policy %s: remove it", c.policyType())
	for _, f := range []struct {
		flag string
		n    *int64
	}{{"--engine-max-running-requests", in.EngineMaxRunningRequests}, {"--engine-max-kv-tokens", in.EngineMaxKVTokens}} {
		if f.n == nil {
			continue
		}
		p.check(*f.n > 0, "%s must be greater than 0: it is an admission cap", f.flag)
		p.check(c.pdMode() || capacityChecked(c.policyType()),
			"%s: sgl-router checked engine capacity only before power_of_two, session_aware, cache_aware and decode picks, and --policy %s on plain workers made none, so there is no check to keep: remove it",
			f.flag, c.policyType())
	}
	return p
}

// Errors is every reason an input cannot be migrated. Migrate reports all it finds in one
// pass over each stage (flags, then their combinations, then the bucket file), so that a
// command line is fixed in few rounds.
type Errors []error

func (es Errors) Error() string {
	if len(es) == 1 {
		return es[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems:", len(es))
	for _, e := range es {
		b.WriteString("\n  ")
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap gives errors.As and errors.Is each problem, such as an *AmbiguousFlagError.
func (es Errors) Unwrap() []error { return es }

// addf adds a problem.
func (es *Errors) addf(format string, args ...any) {
	*es = append(*es, fmt.Errorf(format, args...))
}

// check adds a problem when ok is false. Its arguments are evaluated either way, so they
// must not dereference what ok guards.
func (es *Errors) check(ok bool, format string, args ...any) {
	if !ok {
		es.addf(format, args...)
	}
}

// Migrate translates in into CUE source and the plan it compiles to. The error is Errors
// when the input cannot be migrated, and a plain error when the bucket file cannot be read
// or, which would be a bug, the generated configuration does not compile.
func Migrate(in Input) ([]byte, *plan.Plan, error) {
	src, err := translate(in)
	if err != nil {
		return nil, nil, err
	}
	p, err := compiler.CompileSources([]compiler.Source{{Name: "migrated.cue", Data: src}})
	if err != nil {
		return nil, nil, fmt.Errorf("internal error: the migrated configuration does not compile:\n%v\n%s", err, src)
	}
	return src, p, nil
}

// translate is Migrate before the compile: the configuration's CUE source.
func translate(in Input) ([]byte, error) {
	if in.From != DialectAuto && in.From != DialectClassic && in.From != DialectExperimental {
		return nil, Errors{errNoDialect}
	}
	if coLaunch(in.Args) {
		return nil, Errors{errCoLaunch}
	}
	named, args, program, abbrev := splitProgram(in.Args)
	c := &cli{}
	c.dialect, c.dialectFrom = detect(in.From, named, args)
	c.program = program
	c.kvEvents = in.EnginesPublishKVEvents
	if errs := parse(args, c.flags(), abbrev); len(errs) > 0 {
		return nil, errs
	}
	var errs Errors
	c.resolveModel(in, &errs)
	c.hardeningRules(&errs)
	c.smgRules(&errs)
	c.healthRules(&errs)
	c.gatewayRules(&errs)
	c.discoveryRules(&errs)
	if errs = append(append(append(errs, c.legacyRules()...), c.targetRules()...), in.rules(c)...); len(errs) > 0 {
		return nil, errs
	}
	t := newTranslator(in, c)
	buckets, bucketsFrom, err := t.buckets(in)
	if err != nil {
		return nil, err
	}
	// The configuration first: translating it collects notes the header lists.
	root := t.config(buckets, bucketsFrom)
	return render(header(t), root)
}

// buckets translates the bucket file, wherever it was named, or makes sgl-router's single
// implicit bucket when there is none.
func (t *translator) buckets(in Input) ([]*node, string, error) {
	path := in.BucketConfig
	if t.c.bucketConfig != nil {
		if path != "" {
			return nil, "", Errors{fmt.Errorf("--bucket-config is given to migrate and in the sgl-router command line: give it once")}
		}
		path = *t.c.bucketConfig
	}
	pairs, errs := parsePairs(in.Pairs)
	if path == "" {
		errs.check(len(pairs) == 0, "--pair joins the buckets of a bucket file, and there is no --bucket-config")
		if len(errs) > 0 {
			return nil, "", errs
		}
		return []*node{t.implicitBucket()}, "no --bucket-config: sgl-router routes with one bucket of every worker", nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("reading bucket config: %w", err)
	}
	f, err := parseBucketFile(path, data)
	if err != nil {
		return nil, "", Errors{err}
	}
	if errs = append(errs, f.legacyRules()...); len(errs) > 0 {
		return nil, "", errs
	}
	if errs = f.targetRules(); len(errs) > 0 {
		return nil, "", errs
	}
	t.file = f
	buckets, errs := t.fileBuckets(f, pairs)
	if len(errs) > 0 {
		return nil, "", errs
	}
	return buckets, "--bucket-config " + path, nil
}

package legacy

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/routerkit/router/compiler"
)

// arity is how many values a legacy flag takes, following sgl-router's clap definitions.
type arity int

const (
	switchFlag    arity = iota // --stable-pair
	oneValue                   // --policy VALUE, or --policy=VALUE
	someValues                 // --worker-urls URL...: one or more, up to the next flag
	commaList                  // --filter a,b: one value split on commas
	prefillValues              // --prefill URL [BOOTSTRAP_PORT|none]
)

// flagSpec describes one legacy flag: how to read it and what becomes of it. Exactly one
// of set, dropped, unsupported and refuse says what happens to its values.
type flagSpec struct {
	name  string
	arity arity
	// aliases are other spellings of the flag (clap's alias, argparse's second option
	// string), read as name.
	aliases []string
	// repeat allows the flag more than once; its values accumulate, as clap's Vec options do.
	repeat bool
	// set stores the flag's values in the parsed command line, or says why they are invalid.
	set setter
	// dropped marks an option the target design removed.
	dropped *compiler.Dropped
	// unsupported names what the flag configures, which the router configuration has no
	// setting for.
	unsupported string
	// refuse says why a flag sgl-router accepted cannot be migrated, and what to do
	// instead, when that takes more than naming what it configures.
	refuse func(flag string, values []string) string
}

// setter stores the values of one occurrence of flag.
type setter func(flag string, values []string) error

// parse reads args against specs. It reports every problem it finds rather than stopping
// at the first, so that one edit fixes a command line. abbrev reads a unique prefix of a
// flag as the flag, as Python's argparse does (allow_abbrev); clap does not.
func parse(args []string, specs []flagSpec, abbrev bool) Errors {
	var errs Errors
	for _, arg := range args {
		if !utf8.ValidString(arg) {
			errs.addf("argument %q is not valid UTF-8, which sgl-router refuses", arg)
		}
	}
	if len(errs) > 0 {
		return errs
	}
	seen := map[string]bool{}
	for i := 0; i < len(args); {
		arg := args[i]
		i++
		if !strings.HasPrefix(arg, "--") || arg == "--" {
			errs.addf("unexpected argument %q: sgl-router takes only --flags", arg)
			continue
		}
		given, inline, hasInline := strings.Cut(arg, "=")
		spec, err := lookup(specs, given, abbrev)
		if err != nil {
			errs = append(errs, err)
			for i < len(args) && !isFlag(args[i]) {
				i++ // its values, whatever they are
			}
			continue
		}
		name := spec.name
		if seen[name] && !spec.repeat {
			errs.addf("%s is given more than once: sgl-router accepts it once", name)
		}
		seen[name] = true
		values, next, err := takeValues(spec, args, i, inline, hasInline)
		i = next
		switch {
		case spec.dropped != nil:
			errs.addf("%s", spec.dropped.Message(name, flagVocabulary))
		case spec.unsupported != "":
			errs.addf("%s cannot be migrated: the router configuration has no setting for %s; remove it from the command line (its value is not carried over)", name, spec.unsupported)
		case err != nil:
			errs = append(errs, err)
		case spec.refuse != nil:
			errs.addf("%s", spec.refuse(name, values))
		default:
			if v, bad := controlIn(values); bad {
				errs.addf("%s %q contains a control character, which the migrated configuration's comments cannot quote: remove it", name, v)
				continue
			}
			if err := spec.set(name, values); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// names lists the spellings of a flag: its name, then its aliases.
func (s flagSpec) names() []string {
	return append([]string{s.name}, s.aliases...)
}

// lookup finds the flag given names: by its name or an alias, else, with abbrev, by a
// unique prefix of them, as argparse reads "--pol" as "--policy". Without abbrev a prefix
// is an error that names the flag, since clap refused it too.
func lookup(specs []flagSpec, given string, abbrev bool) (flagSpec, error) {
	var all []string
	byName := map[string]flagSpec{}
	for _, s := range specs {
		for _, n := range s.names() {
			byName[n] = s
			all = append(all, n)
		}
	}
	if s, ok := byName[given]; ok {
		return s, nil
	}
	var prefixed []string
	seen := map[string]bool{}
	for _, n := range all {
		if strings.HasPrefix(n, given) && !seen[byName[n].name] {
			seen[byName[n].name] = true
			prefixed = append(prefixed, n)
		}
	}
	switch {
	case abbrev && len(prefixed) == 1:
		return byName[prefixed[0]], nil
	case abbrev && len(prefixed) > 1:
		return flagSpec{}, &AmbiguousFlagError{Given: given, Candidates: prefixed}
	case len(prefixed) > 0:
		return flagSpec{}, fmt.Errorf("unknown flag %s: the Rust command line (clap) takes no abbreviations, so it refused it too; spell the flag out (%s), or start the line with python -m sglang_router.launch_router if it came from the Python launcher, whose argparse reads unique prefixes",
			given, strings.Join(prefixed, ", "))
	}
	msg := "unknown flag " + given + ": it is not a flag of sgl-router or SMG that migrate knows, so it cannot be carried over"
	if near := nearest(given, all); near != "" {
		msg += "; did you mean " + near + "?"
	}
	return flagSpec{}, errors.New(msg)
}

// AmbiguousFlagError is an abbreviation that starts more than one flag; argparse refused it
// with the candidates, and so does migrate.
type AmbiguousFlagError struct {
	Given      string
	Candidates []string
}

func (e *AmbiguousFlagError) Error() string {
	return fmt.Sprintf("ambiguous flag %s: it abbreviates %s; spell the one you mean further", e.Given, strings.Join(e.Candidates, ", "))
}

// nearest is the flag of names closest to given by edit distance, when it is close enough to
// be a typo (at most 2 edits, and at most a third of the flag's length), else "".
func nearest(given string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(given, n); d < bestD && d*3 <= len(n) {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes (flags are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// takeValues reads the values of one occurrence of spec, whose name was args[i-1], and
// returns them with the index of the next unread argument.
func takeValues(spec flagSpec, args []string, i int, inline string, hasInline bool) ([]string, int, error) {
	next := func() (string, bool) {
		if hasInline {
			hasInline = false
			return inline, true
		}
		if i < len(args) && !isFlag(args[i]) {
			i++
			return args[i-1], true
		}
		return "", false
	}
	switch spec.arity {
	case switchFlag:
		if hasInline {
			return nil, i, fmt.Errorf("%s takes no value, got %q", spec.name, inline)
		}
		return nil, i, nil
	case oneValue, commaList:
		v, ok := next()
		if !ok {
			return nil, i, fmt.Errorf("%s needs a value", spec.name)
		}
		if spec.arity == commaList {
			return strings.Split(v, ","), i, nil
		}
		return []string{v}, i, nil
	case someValues:
		var vs []string
		for v, ok := next(); ok; v, ok = next() {
			vs = append(vs, v)
		}
		if len(vs) == 0 {
			return nil, i, fmt.Errorf("%s needs at least one value", spec.name)
		}
		return vs, i, nil
	case prefillValues:
		url, ok := next()
		if !ok {
			return nil, i, fmt.Errorf("%s needs a worker URL and an optional bootstrap port: %s URL [BOOTSTRAP_PORT|none]", spec.name, spec.name)
		}
		if port, ok := next(); ok {
			return []string{url, port}, i, nil
		}
		return []string{url}, i, nil
	}
	panic(fmt.Sprintf("internal error: unknown arity %d", spec.arity))
}

// controlIn returns the first of values that contains a control character (a line break,
// a tab, ...). Values are quoted in the comments of the migrated configuration, where such
// a character would end a comment line or hide what the value is.
func controlIn(values []string) (string, bool) {
	for _, v := range values {
		if strings.ContainsFunc(v, unicode.IsControl) {
			return v, true
		}
	}
	return "", false
}

// isFlag reports whether an argument starts a new flag rather than being a value. As in
// clap, a value that starts with "-" must be attached with "=": --ratio=-1; a negative
// number is a value as argparse reads it (--max-concurrent-requests -1), a line clap would
// have refused.
func isFlag(arg string) bool {
	if _, err := strconv.ParseFloat(arg, 64); err == nil {
		return false
	}
	return strings.HasPrefix(arg, "-") && arg != "-"
}

// The setters below bind a flag's values to a field of the parsed command line, with
// sgl-router's value validation: an optional flag stays nil until it is given.

func text(p **string) setter {
	return func(_ string, vs []string) error {
		*p = &vs[0]
		return nil
	}
}

func texts(p *[]string) setter {
	return func(_ string, vs []string) error {
		*p = append(*p, vs...)
		return nil
	}
}

func switchOn(p *bool) setter {
	return func(string, []string) error {
		*p = true
		return nil
	}
}

// count parses a non-negative integer (sgl-router's u64 and usize flags), bounded by what
// the configuration's 64-bit integers hold.
func count(p **int64) setter {
	return func(flag string, vs []string) error {
		n, err := strconv.ParseInt(vs[0], 10, 64)
		if errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(vs[0], "-") {
			return fmt.Errorf("invalid value %q for %s: above %d, the largest integer the configuration holds", vs[0], flag, int64(math.MaxInt64))
		}
		if err != nil || n < 0 {
			return fmt.Errorf("invalid value %q for %s: not a non-negative integer", vs[0], flag)
		}
		*p = &n
		return nil
	}
}

func number(p **float64) setter {
	return func(flag string, vs []string) error {
		f, err := strconv.ParseFloat(vs[0], 64)
		if err != nil {
			return fmt.Errorf("invalid value %q for %s: not a number", vs[0], flag)
		}
		*p = &f
		return nil
	}
}

// oneOf lets set store the values only when each is one of values. A value the target
// design dropped is rejected with the shared explanation of what to use instead.
func oneOf(values []string, dropped map[string]compiler.Dropped, set setter) setter {
	return func(flag string, vs []string) error {
		for _, v := range vs {
			if d, ok := dropped[v]; ok {
				return fmt.Errorf("%s", d.Message(flag+" "+v, flagVocabulary))
			}
			if !slices.Contains(values, v) {
				return fmt.Errorf("invalid value %q for %s: possible values are %s", v, flag, strings.Join(values, ", "))
			}
		}
		return set(flag, vs)
	}
}

// isFinite reports whether f is neither infinite nor NaN; sgl-router rejects both for its
// ratio and threshold flags.
func isFinite(f float64) bool {
	return !math.IsInf(f, 0) && !math.IsNaN(f)
}

package legacy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Two programs are called sgl-router, with different flags and defaults
// (reference/sglang-router.md §0): the classic router that SGLang's documentation launches
// with `python -m sglang_router.launch_router` (PyPI sglang-router, later the SGLang Model
// Gateway), and the experimental router of sglang's experimental/sgl-router. A command line
// is read as the one it came from, because the same absent flag means different things:
// without --policy the classic router used cache_aware and the experimental one round_robin.

// Dialect names the sgl-router whose command line is migrated.
type Dialect string

const (
	// DialectAuto picks the dialect from the program name and the flags (see detect).
	DialectAuto Dialect = ""
	// DialectClassic is the classic router, sglang-router v0.3.2 (the last release hosted in
	// sglang: smg@c7f9bf9f5 src/main.rs and bindings/python/src/sglang_router/router_args.py).
	DialectClassic Dialect = "classic"
	// DialectExperimental is sglang's experimental/sgl-router, its grouped CLI
	// (src/config/cli.rs, eras 3 and 4 of reference/sglang-router.md §1.3).
	DialectExperimental Dialect = "experimental"
)

// defaultsSource says, in the output's header, whose defaults fill the absent flags.
func (d Dialect) defaultsSource() string {
	if d == DialectClassic {
		return "the classic sglang-router v0.3.2 (python -m sglang_router.launch_router; sglang sgl-model-gateway/src/main.rs and router_args.py at release 0.3.2, smg@c7f9bf9f5)"
	}
	return "the experimental sgl-router (sglang experimental/sgl-router/src/config/cli.rs, grouped CLI)"
}

// programs are the ways a command line may start, with the dialect each names ("" when
// the name is shared) and whether argparse read its flags. They are stripped before the
// flags are read, so a line can be pasted from a shell script as it is.
//
// Python launchers parse with argparse, whose allow_abbrev (on by default: smg
// bindings/python/src/smg/launch_router.py parse_router_args) reads a unique prefix of a flag
// as the flag. The Rust binaries parse with clap without infer_long_args
// (smg model_gateway/src/main.rs), so they refused prefixes. `smg launch` and `amg launch`
// are both the Python console script (pyproject [project.scripts] smg = "smg.cli:main") and
// the Rust binary's subcommand; a prefix only ran under the Python one, so prefixes are read
// there. Bare `smg FLAGS` is the Rust binary: the Python script requires a subcommand.
var programs = []program{
	{[]string{"python3", "-u", "-m", "sglang_router.launch_router"}, DialectClassic, true},
	{[]string{"python", "-u", "-m", "sglang_router.launch_router"}, DialectClassic, true},
	{[]string{"python3", "-m", "sglang_router.launch_router"}, DialectClassic, true},
	{[]string{"python", "-m", "sglang_router.launch_router"}, DialectClassic, true},
	{[]string{"python3", "-m", "smg.launch_router"}, DialectClassic, true},
	{[]string{"python", "-m", "smg.launch_router"}, DialectClassic, true},
	{[]string{"sglang_router.launch_router"}, DialectClassic, true},
	{[]string{"sglang-router", "launch"}, DialectClassic, true},
	{[]string{"smg", "launch"}, DialectClassic, true},
	{[]string{"smg", "start"}, DialectClassic, false},
	{[]string{"amg", "launch"}, DialectClassic, true},
	{[]string{"amg", "start"}, DialectClassic, false},
	{[]string{"smg"}, DialectClassic, false},
	{[]string{"amg"}, DialectClassic, false},
	{[]string{"shepherd-model-gateway", "launch"}, DialectClassic, false},
	{[]string{"shepherd-model-gateway"}, DialectClassic, false},
	{[]string{"sgl-model-gateway", "launch"}, DialectClassic, false},
	{[]string{"sgl-model-gateway"}, DialectClassic, false},
	{[]string{"sgl-router"}, DialectAuto, false},
}

// program is one way a command line may start.
type program struct {
	words   []string
	dialect Dialect
	abbrev  bool // argparse read the flags: unique prefixes are flags
}

// binaries are the Rust binaries' names as a path may end in (./target/release/smg).
var binaries = []string{"sgl-model-gateway", "smg", "amg", "shepherd-model-gateway", "sgl-router"}

// onlyIn lists the spellings of the flags of one dialect's table that the other's lacks;
// one of them tells the dialect of a line that does not name its program.
func onlyIn(d, other Dialect) []string {
	theirs := map[string]bool{}
	for _, s := range (&cli{dialect: other}).flags() {
		for _, n := range s.names() {
			theirs[n] = true
		}
	}
	var out []string
	for _, s := range (&cli{dialect: d}).flags() {
		for _, n := range s.names() {
			if !theirs[n] {
				out = append(out, n)
			}
		}
	}
	return out
}

// splitProgram strips a leading program name from args and returns the dialect it names,
// the program's words, and whether its flags were read by argparse. A path to a built binary
// (./target/release/sgl-model-gateway) is read as the binary's name, and `cargo run ... --`
// as a Rust binary of either router.
func splitProgram(args []string) (Dialect, []string, string, bool) {
	if len(args) >= 2 && args[0] == "cargo" && args[1] == "run" {
		// cargo run [--release] [--bin NAME] -- FLAGS: SMG's or the experimental router's
		// checkout, which only the flags tell apart.
		if k := slices.Index(args, "--"); k > 0 {
			return DialectAuto, args[k+1:], strings.Join(args[:k+1], " "), false
		}
	}
	words := args
	if len(args) > 0 && strings.Contains(args[0], "/") && slices.Contains(binaries, filepath.Base(args[0])) {
		words = append([]string{filepath.Base(args[0])}, args[1:]...)
	}
	for _, p := range programs {
		if len(words) >= len(p.words) && slices.Equal(words[:len(p.words)], p.words) {
			return p.dialect, args[len(p.words):], strings.Join(args[:len(p.words)], " "), p.abbrev
		}
	}
	return DialectAuto, args, "", false
}

// detect decides the dialect of args: the one asked for, else the one the program names,
// else classic when a classic-only flag appears and no experimental-only one does.
func detect(asked, named Dialect, args []string) (Dialect, string) {
	if asked != DialectAuto {
		return asked, "router migrate --from " + string(asked)
	}
	if named != DialectAuto {
		return named, "the program name"
	}
	has := func(names []string) string {
		for _, a := range args {
			name, _, _ := strings.Cut(a, "=")
			if slices.Contains(names, name) {
				return name
			}
		}
		return ""
	}
	if f := has(onlyIn(DialectClassic, DialectExperimental)); f != "" && has(onlyIn(DialectExperimental, DialectClassic)) == "" {
		return DialectClassic, f + ", a flag of the classic router only"
	}
	return DialectExperimental, "no classic-only flag (pass --from classic to router migrate for a classic command line)"
}

// classicPolicies are the classic router's and SMG's --policy values that have a router
// policy (smgPolicies says which).
var classicPolicies = []string{"random", "round_robin", "cache_aware", "power_of_two", "least_load", "consistent_hashing", "manual"}

// smgPolicies are the SMG policies the router spells differently: consistent_hashing and
// manual pin a routing key to a worker, as sticky does; least_load picks the least loaded
// worker, as load_based does (the header says what differs).
var smgPolicies = map[string]string{"consistent_hashing": "sticky", "manual": "sticky", "least_load": "load_based"}

// routerPolicy is the router's policy type for a legacy --policy value.
func routerPolicy(v string) string {
	if r, ok := smgPolicies[v]; ok {
		return r
	}
	return v
}

// refuseClassicPolicy explains the classic policies the router has no equivalent for.
func refuseClassicPolicy(flag string, vs []string) error {
	switch vs[0] {
	case "prefix_hash":
		return fmt.Errorf("%s prefix_hash cannot be migrated: the router does not hash the first --prefix-token-count tokens onto a ring; the closest is --policy cache_aware, whose prefix index sends a prompt to the engine that holds its longest prefix, learned from the router's own dispatches (use it, and remove the --prefix-token-count and --prefix-hash-* flags)", flag)
	case "passthrough":
		return fmt.Errorf("%s passthrough cannot be migrated: it forwards to a single OpenAI-compatible upstream without choosing; list the engines and use --policy round_robin, or route to that upstream without the router", flag)
	case "bucket":
		return fmt.Errorf("%s bucket cannot be migrated: the classic bucket policy re-computed load boundaries every few seconds; the router's buckets are static length ranges (models.M.buckets): remove it", flag)
	}
	return oneOf(classicPolicies, nil, func(string, []string) error { return nil })(flag, vs)
}

// classicPolicy stores a classic --policy, --prefill-policy or --decode-policy value.
func classicPolicy(p **string) setter {
	return func(flag string, vs []string) error {
		if err := refuseClassicPolicy(flag, vs); err != nil {
			return err
		}
		*p = &vs[0]
		return nil
	}
}

// refuseWith makes a refusal that names the flag, why and what to do.
func refuseWith(why string) func(string, []string) string {
	return func(flag string, _ []string) string { return flag + " cannot be migrated: " + why }
}

// classicTable is the classic router's flags (v0.3.2), bound to the fields of c.
func (c *cli) classicTable() []flagSpec {
	return append([]flagSpec{
		{name: "--host", arity: oneValue, set: text(&c.host)},
		{name: "--port", arity: oneValue, set: portNumber(&c.port)},
		{name: "--worker-urls", arity: someValues, repeat: true, set: texts(&c.workerURLs)},
		{name: "--pd-disaggregation", arity: switchFlag, set: switchOn(&c.pdDisaggregation)},
		{name: "--prefill", arity: prefillValues, repeat: true, set: c.addPrefill},
		{name: "--decode", arity: oneValue, repeat: true, set: texts(&c.decode)},
		{name: "--policy", arity: oneValue, set: classicPolicy(&c.policy)},
		{name: "--prefill-policy", arity: oneValue, set: classicPolicy(&c.prefillPolicy)},
		{name: "--decode-policy", arity: oneValue, set: classicPolicy(&c.decodePolicy)},

		// Model and tokenizer.
		// The classic router has no --model-id; one added to a pasted line is taken as the
		// model's name, as migrate's own --model-id would be, rather than refused.
		{name: "--model-id", arity: oneValue, set: text(&c.modelID)},
		{name: "--model-path", aliases: []string{"--model"}, arity: oneValue, set: text(&c.modelPath)},
		{name: "--tokenizer-path", arity: oneValue, set: text(&c.tokenizerPath)},
		{name: "--chat-template", arity: oneValue, set: text(&c.chatTemplate)},

		// Timeouts, retries, circuit breaker, limits.
		{name: "--request-timeout-secs", arity: oneValue, set: count(&c.requestTimeoutSecs)},
		{name: "--max-payload-size", arity: oneValue, refuse: refuseWith("the router's request body limit is fixed at 32 MiB (413 body_too_large above it) and has no setting: remove it")},
		{name: "--disable-retries", arity: switchFlag, set: switchOn(&c.disableRetries)},
		{name: "--retry-max-retries", arity: oneValue, refuse: refuseRetries},
		{name: "--retry-initial-backoff-ms", arity: oneValue, refuse: refuseRetries},
		{name: "--retry-max-backoff-ms", arity: oneValue, refuse: refuseRetries},
		{name: "--retry-backoff-multiplier", arity: oneValue, refuse: refuseRetries},
		{name: "--retry-jitter-factor", arity: oneValue, refuse: refuseRetries},
		{name: "--cb-failure-threshold", arity: oneValue, set: count(&c.cbFailures)},
		{name: "--cb-timeout-duration-secs", arity: oneValue, set: count(&c.cbOpenSecs)},
		{name: "--cb-success-threshold", arity: oneValue, refuse: refuseWith("an open breaker here lets one probe request through after breaker.open_ms, and that probe's success closes it; there is no count of successes to set: remove it")},
		{name: "--cb-window-duration-secs", arity: oneValue, refuse: refuseWith("the router's breaker counts consecutive failures (breaker.failure_threshold), not failures within a window: remove it")},
		{name: "--disable-circuit-breaker", arity: switchFlag, refuse: refuseWith("the router's per-engine breaker cannot be turned off; a large breaker.failure_threshold makes it open rarely: remove the flag and set that by hand if you need it")},

		// Operations: logging, metrics, startup, health, discovery.
		{name: "--log-level", arity: oneValue, refuse: refuseLogging("debug, info, warn or error")},
		{name: "--log-dir", arity: oneValue, refuse: refuseWith("`router serve` logs to stderr (--log-format text or json); redirect it to a file: remove it")},
		{name: "--worker-startup-timeout-secs", arity: oneValue, unsupported: "waiting for workers at startup (the router starts at once and health-checks engines as it runs)"},
		{name: "--worker-startup-check-interval", arity: oneValue, unsupported: "waiting for workers at startup (the router starts at once and health-checks engines as it runs)"},
		{name: "--health-failure-threshold", arity: oneValue, set: count(&c.smg.healthFailures)},
		{name: "--health-success-threshold", arity: oneValue, set: count(&c.smg.healthSuccesses)},
		{name: "--health-check-timeout-secs", arity: oneValue, set: count(&c.smg.healthTimeoutSecs)},
		{name: "--health-check-interval-secs", arity: oneValue, set: count(&c.smg.healthIntervalSecs)},
		{name: "--health-check-endpoint", arity: oneValue, set: text(&c.smg.healthEndpoint)},
		{name: "--dp-aware", arity: switchFlag, unsupported: "routing to data-parallel ranks (each engine is one URL; its ranks are reported in its load, not addressed)"},
		{name: "--backend", aliases: []string{"--runtime"}, arity: oneValue, unsupported: "backends other than SGLang and vLLM engines (engines[].kind)"},
		{name: "--history-backend", arity: oneValue, unsupported: "conversation history storage"},
		{name: "--reasoning-parser", arity: oneValue, unsupported: "reasoning parsers (the router forwards the engines' answers as they are)"},
		{name: "--tool-call-parser", arity: oneValue, unsupported: "tool-call parsers (the router forwards the engines' answers as they are)"},
		{name: "--cors-allowed-origins", arity: someValues, unsupported: "CORS"},
		{name: "--mini-lb", arity: switchFlag, unsupported: "the Python mini load balancer"},
		{name: "--enable-igw", arity: switchFlag, unsupported: "the multi-model gateway mode (list each model's engines under models instead)"},
	}, slices.Concat(c.classicFlags(), c.smgFlags(), c.gatewayFlags(), c.discoveryFlags(true))...)
}

// refuseRetries explains why the classic retry tuning does not carry over.
func refuseRetries(flag string, _ []string) string {
	return flag + " cannot be migrated: sgl-router retried failed requests (408, 429 and 5xx answers included) with exponential backoff, while the router retries only attempts an engine never received (retries.max_attempts, default 2, no backoff), " +
		"so a generation is never run twice: remove it (--disable-retries is migrated, as retries.max_attempts: 1)"
}

// resolveModel decides the served model's name: migrate's --model-id, else the command
// line's --model-id (experimental), else its --model-path (classic: SGLang serves a model
// under its path unless --served-model-name says otherwise).
func (c *cli) resolveModel(in Input, p *Errors) {
	switch {
	case in.ModelID != "" && c.modelID != nil && *c.modelID != in.ModelID:
		p.addf("router migrate --model-id %s and the command line's --model-id %s differ: give one", in.ModelID, *c.modelID)
	case in.ModelID != "":
		c.model, c.modelFrom = in.ModelID, "router migrate --model-id"
	case c.modelID != nil:
		c.model, c.modelFrom = *c.modelID, "--model-id"
	case c.modelPath != nil:
		c.model, c.modelFrom = *c.modelPath, "--model-path: SGLang serves a model under its path unless --served-model-name renames it"
	default:
		p.addf("the command line names no model: pass --model-id NAME to router migrate, before the --, with the name clients send as \"model\" (the engines' --served-model-name, or their --model-path)")
	}
	if c.modelID != nil && *c.modelID == "" {
		p.addf("--model-id must not be empty")
	}
	if in.ModelID == "" && c.modelID == nil && c.modelPath != nil && *c.modelPath == "" {
		p.addf("--model-path must not be empty")
	}
}

// tokenizerFile finds the tokenizer.json a --model-path or --tokenizer-path names: the file
// itself, or the one in the directory. An HuggingFace repository id, or a path that is not
// here, gives "", since the router reads tokenizers from local files only.
func tokenizerFile(p string) string {
	st, err := os.Stat(p)
	switch {
	case err != nil:
		return ""
	case !st.IsDir():
		return p
	}
	for _, name := range []string{"tokenizer.json", "tokenizer.json.gz"} {
		if _, err := os.Stat(filepath.Join(p, name)); err == nil {
			return filepath.Join(p, name)
		}
	}
	return ""
}

// tokenizer sets the model's tokenizer from --tokenizer-path or --model-path and
// --chat-template, and returns a header note when the tokenizer cannot be set here.
func (t *translator) tokenizer(model *node) string {
	c := t.c
	var src, flag string
	switch {
	case c.tokenizerPath != nil:
		src, flag = *c.tokenizerPath, "--tokenizer-path"
	case c.modelPath != nil:
		src, flag = *c.modelPath, "--model-path"
	default:
		return ""
	}
	file := tokenizerFile(src)
	if file == "" {
		return fmt.Sprintf("%s %s is not a local tokenizer.json or a directory holding one (an HuggingFace repository id, or a path on another machine), and the router reads tokenizers from local files: "+
			"fetch it (e.g. huggingface-cli download %s tokenizer.json tokenizer_config.json --local-dir tok) and add tokenizer: {path: \"tok/tokenizer.json\"} to models.%q; "+
			"until then the model uses the built-in stand-in vocabulary, whose token counts are approximate (docs/config.md, Tokenizers).", flag, src, src, t.c.model)
	}
	tok := model.child("tokenizer")
	tok.set("path", file, flag+" "+src)
	if c.chatTemplate != nil {
		if _, err := os.Stat(*c.chatTemplate); err == nil {
			tok.set("chat_template_file", *c.chatTemplate, "--chat-template")
		} else {
			return "--chat-template " + *c.chatTemplate + " is not a file here (a template name, or a path on another machine): set tokenizer.chat_template_file to the engines' template by hand, or leave it out to use the tokenizer_config.json's."
		}
	}
	return ""
}

// hardening sets the timeouts, retries and breaker the command line gives, and the
// classic router's breaker defaults, which are not the router's.
func (t *translator) hardening(root *node) {
	c := t.c
	switch {
	case c.requestTimeoutSecs != nil:
		root.child("timeouts").set("total_ms", *c.requestTimeoutSecs*1000, "--request-timeout-secs "+strconv.FormatInt(*c.requestTimeoutSecs, 10))
	case c.dialect == DialectExperimental:
		// The experimental router's default is 300 s; the router's total_ms default is the
		// classic router's 1800 s.
		root.child("timeouts").set("total_ms", int64(300_000), "sgl-router's default --request-timeout-secs 300")
	}
	if n := c.streamIdleSecs; n != nil {
		root.child("timeouts").set("stream_idle_ms", *n*1000, "--stream-idle-timeout-secs")
	}
	if n := c.shutdownDrainSecs; n != nil {
		// Both keep serving with /readyz answering 503 before the drain starts.
		root.set("shutdown_delay_secs", *n, "--shutdown-drain-secs")
	}
	if c.disableRetries {
		root.child("retries").set("max_attempts", int64(1), "--disable-retries")
	}
	failures, open := c.cbFailures, c.cbOpenSecs
	failFrom, openFrom := "--cb-failure-threshold", "--cb-timeout-duration-secs"
	if c.dialect == DialectClassic {
		// v0.3.2's CircuitBreakerConfig defaults: 10 failures, 60 s open.
		if failures == nil {
			n := int64(10)
			failures, failFrom = &n, "the classic router's default --cb-failure-threshold 10"
		}
		if open == nil {
			n := int64(60)
			open, openFrom = &n, "the classic router's default --cb-timeout-duration-secs 60"
		}
	} else if c.cbThreshold != nil {
		failures, failFrom = c.cbThreshold, "--cb-threshold"
		n := orDefault(c.cbCoolDownSecs, 30)
		open, openFrom = &n, "--cb-cool-down-secs (sgl-router's default 30 with --cb-threshold)"
		if c.cbCoolDownSecs != nil {
			openFrom = "--cb-cool-down-secs"
		}
	}
	if failures != nil {
		root.child("breaker").set("failure_threshold", *failures, failFrom)
	}
	if open != nil {
		root.child("breaker").set("open_ms", *open*1000, openFrom)
	}
}

// hardeningRules checks the timeout and breaker values against what the configuration holds.
func (c *cli) hardeningRules(p *Errors) {
	if n := c.requestTimeoutSecs; n != nil {
		p.check(*n >= 1 && *n <= 86400, "--request-timeout-secs %d cannot be migrated: timeouts.total_ms holds 1 s to a day (86400 s)", *n)
	}
	for _, f := range []struct {
		flag string
		n    *int64
	}{{"--cb-failure-threshold", c.cbFailures}, {"--cb-threshold", c.cbThreshold}} {
		if f.n != nil {
			p.check(*f.n > 0, "%s must be greater than 0", f.flag)
		}
	}
	for _, f := range []struct {
		flag string
		n    *int64
	}{{"--cb-timeout-duration-secs", c.cbOpenSecs}, {"--cb-cool-down-secs", c.cbCoolDownSecs}} {
		if f.n != nil {
			p.check(*f.n >= 1 && *f.n <= 86400, "%s %d cannot be migrated: breaker.open_ms holds 1 s to a day (86400 s)", f.flag, *f.n)
		}
	}
	p.check(c.cbCoolDownSecs == nil || c.cbThreshold != nil, "--cb-cool-down-secs requires --cb-threshold")
	if n := c.shutdownDrainSecs; n != nil {
		p.check(*n >= 0 && *n <= 600, "--shutdown-drain-secs %d cannot be migrated: shutdown_delay_secs holds 0 to 600 s", *n)
	}
	if n := c.streamIdleSecs; n != nil {
		p.check(*n >= 1 && *n <= 86400, "--stream-idle-timeout-secs %d cannot be migrated: timeouts.stream_idle_ms holds 1 s to a day (86400 s)", *n)
	}
	if c.dialect == DialectClassic {
		p.check(!c.pdDisaggregation || c.pdMode() || len(c.discovery.flags) > 0, "--pd-disaggregation without --prefill and --decode: sgl-router then discovered workers in Kubernetes, which the router does not do; list them with --prefill URL [BOOTSTRAP_PORT] and --decode URL")
		p.check(c.pdDisaggregation || !c.pdMode(), "--prefill and --decode need --pd-disaggregation in the classic router's command line: add it")
		p.check(c.prefillPolicy == nil || c.pdMode(), "--prefill-policy selects prefill workers, but the command line has none: remove it")
		p.check(c.decodePolicy == nil || *c.decodePolicy != "cache_aware", "--decode-policy cache_aware cannot be migrated: a prefix is reused where it is prefilled, so the router's decode groups take no cache_aware: use --decode-policy power_of_two, or remove it")
	}
}

// coLaunch reports whether args start sglang_router.launch_server or `smg serve`, which
// start SGLang workers and a router in one process.
func coLaunch(args []string) bool {
	if len(args) >= 2 && (args[0] == "smg" || args[0] == "amg") && args[1] == "serve" {
		return true
	}
	for i, a := range args {
		if a == "sglang_router.launch_server" {
			return i <= 3
		}
		if strings.HasPrefix(a, "--") {
			return false
		}
	}
	return false
}

// errCoLaunch explains why a co-launch line is not migrated as a whole.
var errCoLaunch = errors.New("python -m sglang_router.launch_server (and smg serve) starts SGLang workers and a router together; the router only routes: " +
	"start the workers with python -m sglang.launch_server, and migrate the router part as a launch_router line, " +
	"its --router-* flags without the prefix and the workers' URLs with --worker-urls")

// errNoDialect reports an unknown --from.
var errNoDialect = errors.New("--from must be classic or experimental")

// experimentalNotes are the experimental router's behaviours the configuration changes.
func experimentalNotes(c *cli) []string {
	if c.cbThreshold != nil {
		return nil
	}
	return []string{"sgl-router ran without a circuit breaker unless --cb-threshold was given; the router's per-engine breaker is always on, opening after 5 consecutive dispatch failures for 10 s (breaker.failure_threshold, open_ms): raise failure_threshold to make it open rarely."}
}

// classicNotes are the classic router's behaviours the configuration changes, for every
// classic command line.
func classicNotes(c *cli) []string {
	var out []string
	if c.usesCacheAware() {
		out = append(out, "The classic cache_aware left the prefix holder for the least-loaded worker whenever the router's in-flight counts were imbalanced (--balance-abs-threshold 64 and --balance-rel-threshold 1.5 by default); "+
			"here a holder is kept while it is admissible, and the pressure guard moves off it when its reported prefill work is larger by 1024 tokens and 1.5 times (pressure_guard).")
	}
	if c.pdMode() && c.decodeFallbackReplaced() {
		out = append(out, "Decode workers were picked by cache_aware too, the classic --decode-policy falling back to --policy; a prefix is reused where it is prefilled, so the router's decode groups take no cache_aware, and decode is power_of_two here: the least loaded of two engines.")
	}
	if !c.disableRetries {
		out = append(out, "sgl-router retried failed requests up to 5 times with backoff, 408, 429 and 5xx answers included; the router retries only attempts an engine never received (retries.max_attempts 2), so a generation is never run twice.")
	}
	out = append(out, "The breaker keeps sgl-router's thresholds, but counts consecutive failures rather than failures within --cb-window-duration-secs, and closes after one successful probe rather than --cb-success-threshold successes.")
	if c.requestTimeoutSecs == nil {
		out = append(out, "timeouts.total_ms keeps the classic --request-timeout-secs default, 1800 s; the router also bounds connecting (5 s), the first byte (300 s) and stream gaps (60 s): see docs/config.md.")
	}
	return out
}

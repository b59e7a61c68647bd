package legacy

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/routerkit/router/compiler"
)

// legacyRules applies sgl-router's own startup validation of its flags, so that a command
// line sgl-router refused to start with is refused here too, with sgl-router's reasons.
func (c *cli) legacyRules() Errors {
	var p Errors
	if c.powerOfNChoices != nil {
		p.check(c.reorg(), "--power-of-n-choices requires --chat-routing reorg")
		p.check(*c.powerOfNChoices == 2, "--power-of-n-choices %d cannot be migrated: the router's power_of_two samples 2 engines, and the sample size has no setting: remove it", *c.powerOfNChoices)
	}
	c.workerRules(&p)

	policy := c.policyType()
	seen := map[string]bool{}
	for _, f := range c.filters {
		p.check(!seen[f], "--filter: `%s` is listed more than once", f)
		seen[f] = true
	}
	p.check((c.maxInFlight != nil) == seen["overloaded"], "--max-in-flight and `--filter overloaded` require each other")
	p.check(c.maxInFlight == nil || *c.maxInFlight > 0, "--max-in-flight must be greater than 0")
	p.check(policy != "sticky" || len(c.filters) == 0, "--filter cannot be combined with --policy sticky")

	c.cacheRules(&p, policy)
	c.classicRules(&p, policy)
	c.affinityRules(&p, policy)
	c.stickyRules(&p, policy)
	return p
}

// workerRules checks the worker lists: exactly one kind of fleet, complete, with http(s)
// URLs, each worker listed once.
func (c *cli) workerRules(p *Errors) {
	switch {
	case len(c.workerURLs) == 0 && !c.pdMode():
		p.addf("no workers: pass --worker-urls URL... for plain workers, or --prefill URL [BOOTSTRAP_PORT] and --decode URL for prefill/decode workers")
	case len(c.workerURLs) > 0 && c.pdMode():
		p.addf("--worker-urls cannot be combined with --prefill or --decode: a router's workers are all plain or all prefill/decode")
	case len(c.prefill) == 0 && len(c.decode) > 0:
		p.addf("--decode needs --prefill: prefill/decode mode requires both prefill and decode workers")
	case len(c.prefill) > 0 && len(c.decode) == 0:
		p.addf("--prefill needs --decode: prefill/decode mode requires both prefill and decode workers")
	}
	c.dedupeWorkers(p)
	for _, w := range c.workers() {
		if err := checkWorkerURL(w.url); err != nil {
			p.addf("%s %s: %v", w.flag, w.url, err)
		}
	}
}

// dedupeWorkers lists each worker once, as sgl-router's static list did after dropping
// trailing slashes: a repeat of a worker with the same role (and, for prefill, the same
// bootstrap port) is dropped and noted. A URL given with two roles, or as prefill with two
// bootstrap ports, is contradictory and an error.
func (c *cli) dedupeWorkers(p *Errors) {
	type first struct {
		flag, url string
		port      *int64
	}
	seen := map[string]first{}
	// keep reports whether the worker is new, noting or reporting a repeat.
	keep := func(flag, raw string, port *int64) bool {
		key := normalizeURL(raw)
		f, dup := seen[key]
		switch {
		case !dup:
			seen[key] = first{flag, raw, port}
			return true
		case f.flag != flag:
			p.addf("worker URL %s is given with %s and %s: a worker has one role", raw, f.flag, flag)
		case !samePort(f.port, port):
			p.addf("--prefill %s is given twice with different bootstrap ports (%s and %s): list it once", raw, portText(f.port), portText(port))
		default:
			c.duplicates = append(c.duplicates, fmt.Sprintf("%s %s (the same worker as %s)", flag, raw, f.url))
		}
		return false
	}
	var plain, decode []string
	var prefill []prefillWorker
	for _, u := range c.workerURLs {
		if keep("--worker-urls", u, nil) {
			plain = append(plain, u)
		}
	}
	for _, w := range c.prefill {
		if keep("--prefill", w.url, w.port) {
			prefill = append(prefill, w)
		}
	}
	for _, u := range c.decode {
		if keep("--decode", u, nil) {
			decode = append(decode, u)
		}
	}
	c.workerURLs, c.prefill, c.decode = plain, prefill, decode
}

func samePort(a, b *int64) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

func portText(p *int64) string {
	if p == nil {
		return "none"
	}
	return strconv.FormatInt(*p, 10)
}

// checkWorkerURL accepts what sgl-router's static discovery accepts: an absolute http or
// https URL.
func checkWorkerURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "":
		return fmt.Errorf("not a valid URL: give an absolute http:// or https:// URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("unsupported scheme %q: workers are reached over http or https", u.Scheme)
	}
	return nil
}

// normalizeURL is a worker URL as sgl-router identifies it, without trailing slashes.
func normalizeURL(raw string) string {
	return strings.TrimRight(raw, "/")
}

// cacheRules checks the prefix-provider flag. Its indexer value and the --kv-indexer-*
// flags are refused while parsing: sgl-router's indexer speaks gRPC.
func (c *cli) cacheRules(p *Errors, policy string) {
	p.check(c.cachePrefixProvider == nil || policy == "cache_aware", "--cache-prefix-provider requires --policy cache_aware")
}

// affinityRules checks the session, cache-candidate and pressure-guard flags, in
// sgl-router's order: a value wrong under every policy is reported as such before a
// missing --policy is.
func (c *cli) affinityRules(p *Errors, policy string) {
	affinity := policy == "session_aware" || policy == "cache_aware"
	sessionTuned := c.sessionIDHeader != nil || c.sessionIdleSecs != nil || c.sessionEvictionSecs != nil ||
		c.affinityMode != nil || c.sessionAffinityMode != nil
	p.check(!sessionTuned || policy == "session_aware",
		"--session-id-header, --session-*-secs, --affinity-mode, and --session-affinity-mode require --policy session_aware")
	p.check(!c.disablePressureGuard || affinity, "--disable-pressure-guard requires --policy session_aware or cache_aware")

	p.check(c.workerQueueLimit == nil || *c.workerQueueLimit >= 1, "--worker-queue-limit must be at least 1")
	if floor, limit := c.saturationQueueFloor, c.workerQueueLimit; floor != nil {
		p.check(limit != nil, "--saturation-queue-floor requires --worker-queue-limit (there is no diversion to cancel without it)")
		p.check(*floor >= 1, "--saturation-queue-floor must be at least 1")
		if limit != nil {
			p.check(*floor <= *limit, "--saturation-queue-floor (%d) must be at most --worker-queue-limit (%d)", *floor, *limit)
		}
	}
	p.check(c.minLoadChoices == nil || *c.minLoadChoices >= 1, "--min-load-choices must be at least 1")
	cacheTuned := c.minMatchedTokens != nil || c.minMatchRatio != nil || c.candidateMinWorkers != nil ||
		c.candidateRatio != nil || c.candidateMaxWorkers != nil || c.switchMarginTokens != nil ||
		c.workerQueueLimit != nil || c.saturationQueueFloor != nil || c.minLoadChoices != nil
	p.check(!cacheTuned || policy == "cache_aware", "cache candidate tuning flags require --policy cache_aware")
	pressureTuned := c.pressureAbsTokens != nil || c.pressureAbsMS != nil || c.pressureRelThreshold != nil
	p.check(!pressureTuned || affinity, "pressure guard tuning requires --policy session_aware or cache_aware")
	if !affinity {
		return
	}

	if c.sessionIDHeader != nil {
		p.check(validHeaderName(*c.sessionIDHeader), "--session-id-header %q is not a valid HTTP header name", *c.sessionIDHeader)
	}
	if r := c.pressureRelThreshold; r != nil {
		p.check(isFinite(*r) && *r > 1, "--pressure-rel-threshold must be finite and greater than 1")
	}
	if ms := c.pressureAbsMS; ms != nil {
		p.check(isFinite(*ms) && *ms >= 0, "--pressure-abs-threshold-ms must be finite and non-negative")
	}
	if r := c.minMatchRatio; r != nil {
		p.check(isFinite(*r) && *r >= 0 && *r <= 1, "--cache-affinity-min-match-ratio must be finite and in [0, 1]")
	}
	if r := c.candidateRatio; r != nil {
		p.check(isFinite(*r) && *r >= 0 && *r <= 1, "--cache-candidate-ratio must be finite and in [0, 1]")
	}
	minWorkers, maxWorkers := orDefault(c.candidateMinWorkers, 8), orDefault(c.candidateMaxWorkers, 32)
	p.check(minWorkers > 0 && maxWorkers > 0 && minWorkers <= maxWorkers,
		"--cache-candidate-min-workers and --cache-candidate-max-workers must be positive and min must not exceed max")
	p.check(orDefault(c.sessionIdleSecs, 600) != 0, "--session-idle-secs must be greater than 0")
	p.check(orDefault(c.sessionEvictionSecs, 60) != 0, "--session-eviction-interval-secs must be greater than 0")
}

// stickyRules checks the routing-key flags of --policy sticky.
func (c *cli) stickyRules(p *Errors, policy string) {
	tuned := c.routingKeyHeader != nil || c.stickyFallback != nil || c.stickyIdleSecs != nil || c.stickyEvictionSecs != nil
	p.check(!tuned || policy == "sticky",
		"--routing-key-header / --sticky-fallback-policy / --sticky-idle-secs / --sticky-eviction-interval-secs require --policy sticky")
	if policy != "sticky" {
		return
	}
	if c.routingKeyHeader != nil {
		p.check(validHeaderName(*c.routingKeyHeader), "--routing-key-header %q is not a valid HTTP header name", *c.routingKeyHeader)
	}
	p.check(orDefault(c.stickyEvictionSecs, 60) != 0, "--sticky-eviction-interval-secs must be greater than 0")
	p.check(orDefault(c.stickyIdleSecs, 600) != 0, "--sticky-idle-secs must be greater than 0 (0 would evict every assignment immediately, defeating sticky routing)")
}

// targetRules rejects what sgl-router accepted but the router configuration cannot
// express: a setting is never silently dropped or approximated.
func (c *cli) targetRules() Errors {
	var p Errors
	if c.policyType() == "session_aware" {
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"--disable-pressure-guard", c.disablePressureGuard},
			{"--pressure-abs-threshold-tokens", c.pressureAbsTokens != nil},
			{"--pressure-abs-threshold-ms", c.pressureAbsMS != nil},
			{"--pressure-rel-threshold", c.pressureRelThreshold != nil},
		} {
			if f.set {
				p.addf("%s", compiler.SessionPressureGuard.Message(f.name, flagVocabulary))
			}
		}
	}
	if m := c.sessionAffinityMode; m != nil && *m != "bucket" {
		p.addf("--session-affinity-mode %s cannot be migrated: session bindings are scoped to the selected bucket, and global session modes have no setting yet; remove it to keep bindings per bucket (--session-affinity-mode bucket)", *m)
	}
	if c.pressureAbsMS != nil && *c.pressureAbsMS == 0 {
		p.addf("--pressure-abs-threshold-ms 0 cannot be migrated: the configuration's abs_threshold_ms must be greater than 0")
	}
	if c.candidateRatio != nil && *c.candidateRatio == 0 {
		p.addf("--cache-candidate-ratio 0 cannot be migrated: the configuration's candidate_ratio must be greater than 0; choose a positive ratio")
	}
	if c.host != nil {
		_, _, err := net.SplitHostPort(net.JoinHostPort(*c.host, "0"))
		p.check(err == nil && *c.host != "", "--host %q is not a host name or IP address", *c.host)
	}
	if c.decodePolicy != nil && !c.pdMode() {
		p.addf("--decode-policy selects decode workers, but the command line has none (--worker-urls lists plain workers): remove it")
	}
	return p
}

// validHeaderName reports whether s is an HTTP header field name (an RFC 9110 token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return true
}

func orDefault(p *int64, def int64) int64 {
	if p == nil {
		return def
	}
	return *p
}

package legacy

import "strings"

// The classic sgl-router's cache_aware tuning (reference/sglang-router.md §1.2, §2.1.1;
// sgl-router/src/policies/cache_aware.rs and src/tree.rs): one approximate radix tree of
// request text per model, fed by the router's own routing decisions. Its --cache-threshold
// keeps its meaning as the configuration's min_match_ratio; its other flags tune mechanisms
// the router replaced, so they are refused, each with what does the job here.

// speculativeTTLMS is how long a migrated approximate index counts a dispatched prompt as
// held before the dispatch succeeds. sgl-router inserted a request into its tree when it
// picked the worker, so requests sharing a prefix followed it while the first one still
// ran; the index learns on success, and this entry bridges the wait. 30 s covers most
// requests; a longer one is learned when it succeeds.
const speculativeTTLMS int64 = 30_000

// classicFlags are the classic cache-aware flags, bound to the fields of c.
func (c *cli) classicFlags() []flagSpec {
	return []flagSpec{
		{name: "--cache-threshold", aliases: []string{"--cache-match-threshold"}, arity: oneValue, set: number(&c.cacheThreshold)},
		{name: "--balance-abs-threshold", aliases: []string{"--spill-abs-threshold"}, arity: oneValue, refuse: refuseBalance},
		{name: "--balance-rel-threshold", aliases: []string{"--spill-rel-threshold"}, arity: oneValue, refuse: refuseBalance},
		// Under SMG's --policy manual the interval also sweeps expired routing keys.
		{name: "--eviction-interval", arity: oneValue, set: c.evictionSetter},
		{name: "--eviction-interval-secs", arity: oneValue, set: c.evictionSetter},
		{name: "--max-tree-size", arity: oneValue, refuse: refuseMaxTreeSize},
	}
}

// refuseBalance explains the classic load-imbalance switch, which has no equivalent.
func refuseBalance(flag string, _ []string) string {
	return flag + " cannot be migrated: sgl-router's classic cache_aware left the cache for the least-loaded worker whenever the router's in-flight counts were imbalanced " +
		"(max - min > --balance-abs-threshold and max > min x --balance-rel-threshold, over all workers); the router's cache_aware keeps the prefix holder while it is admissible, " +
		"its pressure guard moves off a holder whose reported prefill work is larger by --pressure-abs-threshold-tokens and --pressure-rel-threshold, " +
		"and --filter overloaded --max-in-flight caps each engine's in-flight requests: remove it and use those"
}

// refuseEvictionInterval explains why there is no eviction cadence to set.
func refuseEvictionInterval(flag string, _ []string) string {
	return flag + " cannot be migrated: sgl-router trimmed each worker's tree to --max-tree-size every --eviction-interval seconds, letting it grow in between; " +
		"the approximate prefix index evicts its least recently used blocks as it inserts, so it never exceeds its capacity and has no cadence to set " +
		"(entries also expire prefix_source.ttl_secs after their last use): remove it"
}

// refuseMaxTreeSize explains why a size in characters cannot become one in tokens.
func refuseMaxTreeSize(flag string, _ []string) string {
	return flag + " cannot be migrated: it counts characters of request text per worker, while the approximate prefix index counts tokens per engine " +
		"(prefix_source.capacity_tokens, by default the KV capacity each engine reports); characters per token depend on the tokenizer, so the value cannot be converted: " +
		"remove it, and set capacity_tokens by hand only if the engines' reported capacity does not fit"
}

// classicRules checks --cache-threshold as sgl-router did (a ratio in [0, 1]) and against
// the era-3 ratio gate it would set twice.
func (c *cli) classicRules(p *Errors, policy string) {
	t := c.cacheThreshold
	if t == nil {
		return
	}
	p.check(policy == "cache_aware" || c.usesCacheAware(), "--cache-threshold requires --policy cache_aware")
	p.check(isFinite(*t) && *t >= 0 && *t <= 1, "--cache-threshold must be finite and in [0, 1]")
	p.check(c.minMatchRatio == nil, "--cache-threshold and --cache-affinity-min-match-ratio both set the minimum share of the prompt a prefix holder must match: give one")
}

// prefixNote says where the migrated cache_aware learns prefix ownership.
func prefixNote(in Input, c *cli) string {
	if in.EnginesPublishKVEvents {
		return "The local prefix index learns from the engines' KV-event publishers, which the command line does not name: add kv_events: {endpoint: \"tcp://HOST:PORT\"} to each engine that publishes KV events."
	}
	var b strings.Builder
	b.WriteString("The prefix index is approximate: like sgl-router's radix tree it learns from the router's own dispatches, over blocks of 16 tokens rather than characters, ")
	b.WriteString("up to the KV capacity each engine reports (else 500000 tokens), entries expiring 120 s after their last use (prefix_source.capacity_tokens, ttl_secs, block_size). ")
	b.WriteString("It learns when a dispatch succeeds; until then a dispatched prompt counts as held for up to 30 s (speculative_ttl_ms), as sgl-router inserted it when picking. ")
	b.WriteString("If every engine publishes KV events, migrate with --engines-publish-kv-events for the exact event-fed index instead.")
	if c.cacheThreshold != nil {
		b.WriteString(" --cache-threshold compared matched characters to the request's and followed the tree above the ratio; min_match_ratio compares matched tokens to input tokens and admits a holder at the ratio.")
	}
	return b.String()
}

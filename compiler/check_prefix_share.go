package compiler

import (
	"cuelang.org/go/cue"

	"github.com/routerkit/router/runtime/plan"
)

// checkPrefixShare checks an approximate prefix source that shares its entries between
// replicas: they go through the binding store, so there must be a Redis one, and Redis
// bounds them by their lifetime, so entries that never expire would grow without bound.
func (c *checker) checkPrefixShare(src *plan.PrefixSource, at []cue.Selector) {
	if src == nil || src.Type != "approximate" || src.Share != plan.ShareStore {
		return
	}
	share := append(at[:len(at):len(at)], cue.Str("share"))
	if b := c.p.Bindings; b == nil || b.Store != plan.BindingsRedis {
		c.at(share, "prefix_source.share \"store\" shares the approximate index through the binding store, and there is none: set bindings: {store: \"redis\", address: \"HOST:PORT\"} or remove share")
	}
	if src.TTLSecs <= 0 {
		c.at(append(at[:len(at):len(at)], cue.Str("ttl_secs")), "prefix_source.share \"store\" needs ttl_secs above 0: it is how long the store keeps a shared entry, and entries that never expire would fill it")
	}
}

package policy

import (
	"github.com/routerkit/router/runtime/state/affinity"
	"github.com/routerkit/router/runtime/state/load"
)

// SessionAware keeps a session on the engine it was first placed on (docs/design.md,
// Policies): it reuses the admitted binding of the request's session key, scoped by model,
// bucket and stage, and places new, keyless or displaced sessions with power-of-two. Reuse
// ignores pressure, because the engine holds the session's KV cache; only hard admission
// can refuse it, and a refusal moves the request to the next bucket without rewriting the
// binding. The binding rules are those of binder.
type SessionAware struct {
	binder
}

// NewSessionAware returns a session policy binding in store, which the caller owns along
// with its idle expiry and sweeping. Its power-of-two fallback runs with default (no)
// limits; limits apply to every engine this policy returns.
func NewSessionAware(store affinity.Bindings, table *load.Table, rnd Rand, limits Limits) *SessionAware {
	return &SessionAware{binder{
		store:    store,
		load:     table,
		limits:   limits,
		fallback: NewPowerOfTwo(table, rnd, Limits{}),
		key:      func(r *Request) string { return r.SessionKey },
		reasons: bindReasons{
			noKey:      "no session key; power-of-two, not bound",
			reused:     "session binding reused",
			bound:      "new session bound to the power-of-two choice",
			rebound:    "session rebound: its engine left the group",
			concurrent: "session bound by a concurrent request first",
			unbound:    "session binding contended; power-of-two choice not bound",
			dryRun:     "new session; power-of-two choice (dry run, not bound)",
		},
	}}
}

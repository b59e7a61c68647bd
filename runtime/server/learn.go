package server

import (
	"net/http"

	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/policy"
	"github.com/routerkit/router/runtime/request"
)

// learnPrefix feeds the router's prefix indexes with a dispatch, in two steps: it records
// speculative entries for the local index at once, as the dispatch starts, and returns
// the step to run when the dispatch has ended, which teaches the approximate indexes
// what the request left in its engine's KV cache. Each dispatch attempt defers the
// returned step, so a request retried on another selection is learned for the engines
// that served it, never for those that did not receive it:
//
//	defer s.learnPrefix(p, sel, rec)()
//
// The engine is the plain one, or the prefill one for a PD request, since prefill is
// where the prompt's pages are computed and reused. The approximate indexes learn only
// from a request the engine served in full (a 200 whose stream did not fail), so an
// engine that refuses or drops work does not attract more of the same prompts; a burst
// of identical prompts sent before the first one finishes is placed by the load fallback
// (docs/config.md, "Prefix sources"). Speculative entries are guesses that expire unless
// the engine's KV events confirm them, so they are recorded before the outcome is known.
func (s *Server) learnPrefix(p *request.Prepared, sel bucket.Selection, rec *recorder) func() {
	pick := sel.Plain
	if sel.Bucket.PD() {
		pick = sel.Prefill
	}
	if pick.Engine == nil || !s.deps.Learns() {
		return func() {}
	}
	id, hashes := pick.Engine.ID(), policy.NewBlockHashes(p.Facts.TokenIDs) // hashed once for both steps
	s.deps.RecordSpeculative(id, hashes)
	return func() {
		if rec.status == http.StatusOK && rec.failure == "" {
			s.deps.RecordDispatch(id, hashes)
		}
	}
}

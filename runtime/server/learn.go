package server

import (
	"net/http"

	"github.com/routerkit/router/runtime/bucket"
)

// learnPrefix teaches the approximate prefix indexes what a finished request left in its
// engine's KV cache: the plain engine's, or the prefill engine's for a PD request, since
// prefill is where the prompt's pages are computed and reused. Only a request the engine
// served in full counts (a 200 whose stream did not fail), so an engine that refuses or
// drops work does not attract more of the same prompts.
//
// It runs when the dispatch has ended, not when the pick was made: a burst of identical
// prompts sent before the first one finishes is placed by the load fallback (docs/config.md,
// "approximate").
func (s *Server) learnPrefix(p *prepared, sel bucket.Selection, rec *recorder) {
	if rec.status != http.StatusOK || rec.failure != "" || len(s.deps.Approx) == 0 {
		return
	}
	pick := sel.Plain
	if sel.Bucket.PD() {
		pick = sel.Prefill
	}
	if pick.Engine != nil {
		s.deps.RecordDispatch(pick.Engine.ID(), p.facts.TokenIDs)
	}
}

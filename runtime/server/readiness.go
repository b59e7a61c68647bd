package server

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/routerkit/router/runtime/control"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
)

// ready answers GET /readyz. A draining router is unready whatever its engines. With
// ?model=NAME it answers for one model: 404 for a model it does not serve, 503 naming
// what the model lacks, 200. Without, by the plan's readiness policy: any_model keeps a
// replica in its Service while one model is servable, so one model without engines does
// not take the others down with it; every_model asks for all of them.
//
// A model is servable with a healthy, undrained engine of each role its buckets name. The
// roles come from the buckets, not from the engines, so a model whose engines were all
// removed at run time (admin API, DNS) is unready rather than vacuously ready.
func (s *generation) ready(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		http.Error(w, "draining", http.StatusServiceUnavailable)
		return
	}
	snap := s.reg.Snapshot()
	if r.URL.Query().Has("model") {
		name := r.URL.Query().Get("model")
		i := slices.IndexFunc(s.plan.Models, func(m plan.Model) bool { return m.Name == name })
		if i < 0 {
			http.Error(w, fmt.Sprintf("model %q is not served by this router; it serves %s", name, strings.Join(planModels(s.plan), ", ")), http.StatusNotFound)
			return
		}
		if missing := modelMissing(snap, &s.plan.Models[i]); len(missing) > 0 {
			http.Error(w, strings.Join(missing, "\n"), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
		return
	}
	var missing []string
	servable := 0
	for i := range s.plan.Models {
		m := modelMissing(snap, &s.plan.Models[i])
		if len(m) == 0 {
			servable++
		}
		missing = append(missing, m...)
	}
	if servable == 0 || (s.plan.Readiness == plan.ReadyEveryModel && len(missing) > 0) {
		if len(missing) == 0 {
			missing = []string{"no model is configured"}
		}
		http.Error(w, strings.Join(missing, "\n"), http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

// modelMissing lists, one phrase each, the roles m's buckets need that no healthy,
// undrained engine of m serves; nil when m is servable.
func modelMissing(snap *engine.Snapshot, m *plan.Model) []string {
	var missing []string
	for _, role := range control.BucketRoles(m) {
		healthy := false
		for _, w := range snap.Workers(m.Name, role) {
			healthy = healthy || (w.Healthy() && !w.Draining())
		}
		if !healthy {
			missing = append(missing, fmt.Sprintf("model %s has no healthy %s engine", m.Name, role))
		}
	}
	return missing
}

// delayShutdown starts a graceful rollout's first phase: /readyz answers 503 "draining"
// while the router keeps serving for the plan's shutdown_delay_secs, the time a load
// balancer polling readiness (a Kubernetes Service's endpoints) takes to stop sending.
// Closing the listener at once would refuse the requests already on their way. No
// preStop hook is needed for it.
func (s *Server) delayShutdown() {
	s.draining.Store(true)
	delay := time.Duration(s.current().plan.ShutdownDelaySecs) * time.Second
	if delay <= 0 {
		return
	}
	s.log.Info("shutting down: unready, still serving until load balancers stop sending", "delay", delay)
	time.Sleep(delay)
}

package monitor

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
)

// TestSetEnginesFollowsMembership: an added engine is polled, a removed one is no longer
// polled and loses its status, and a kept one keeps its status.
func TestSetEnginesFollowsMembership(t *testing.T) {
	f1 := &fakeEngine{}
	f1.healthStatus.Store(http.StatusServiceUnavailable)
	f1.loadBody.Store(`{"loads": []}`)
	h := plan.Health{IntervalMS: 5, TimeoutMS: 1000, FailureThreshold: 2, SuccessThreshold: 1}
	w1, _, m := startMonitor(t, f1, h)
	waitFor(t, "E1 down", func() bool { return !w1.Healthy() })

	f2 := &fakeEngine{}
	f2.healthStatus.Store(http.StatusOK)
	f2.loadBody.Store(`{"loads": []}`)
	srv2 := httptest.NewServer(f2)
	t.Cleanup(srv2.Close)
	e1 := m.engines[0]
	e2 := plan.Engine{ID: "E2", URL: srv2.URL, Model: "m", Role: plan.RolePlain, DPSize: 1, Load: plan.LoadSource{Source: "none"}}
	w2 := engine.New(e2)
	w2.SetHealthy(false)
	m.reg.Put(w2)
	m.SetEngines([]plan.Engine{e1, e2})
	waitFor(t, "E2 checked and healthy", func() bool { return f2.healthChecks.Load() > 0 && w2.Healthy() })
	if st := m.Status()["E1"]; st.Healthy || st.Failures < 2 {
		t.Errorf("E1's status was not kept: %+v", st)
	}

	m.SetEngines([]plan.Engine{e2})
	if _, ok := m.Status()["E1"]; ok {
		t.Error("a removed engine keeps its status")
	}
	// SetEngines returns after stopping the loops' contexts; a check already under way
	// may still land, then none.
	checks := f1.healthChecks.Load()
	seen := f2.healthChecks.Load()
	waitFor(t, "E2 checked five more times", func() bool { return f2.healthChecks.Load() >= seen+5 })
	if n := f1.healthChecks.Load(); n > checks+1 {
		t.Errorf("the removed engine got %d more health checks", n-checks)
	}
}

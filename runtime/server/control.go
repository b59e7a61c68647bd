package server

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/routerkit/router/runtime/control"
	"github.com/routerkit/router/runtime/explain"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
	"github.com/routerkit/router/runtime/request"
)

// A generation is the control.Router of its own routes: explain reads its models and
// policies; the router's methods it embeds (admin token, reload, membership, ...) act on
// the router as a whole.
var _ control.Router = (*generation)(nil)

// AdminToken is the current plan's admin_token: a reload that changes it applies to every
// request from then on, those on an older generation included.
func (s *Server) AdminToken() string { return s.current().plan.AdminToken }

// LoopbackOnly is whether Serve's listener is reachable from this host alone; false until
// Serve says so.
func (s *Server) LoopbackOnly() bool { return s.loopbackOnly.Load() }

// CanReload is whether the router was given its configuration files (Options.Reload).
func (s *Server) CanReload() bool { return s.opts.Reload != nil }

// CompileEngine validates one posted engine against the running plan with
// Options.CompileEngine; ok is false when none was given.
func (s *Server) CompileEngine(body []byte) (plan.Engine, bool, error) {
	if s.opts.CompileEngine == nil {
		return plan.Engine{}, false, nil
	}
	e, err := s.opts.CompileEngine(s.current().plan, body)
	return e, true, err
}

// Generation is the generation now serving.
func (s *Server) Generation() uint64 { return s.current().number }

// ReloadConfig compiles the configuration files again (Options.Reload) and reloads the
// result; a configuration that does not compile is refused with the compiler's errors
// and the running plan stays. SIGHUP and POST /admin/reload both come here.
func (s *Server) ReloadConfig() (control.ReloadResult, error) {
	if s.opts.Reload == nil {
		s.log.Error("reload refused: " + control.NoConfigFiles)
		return control.ReloadResult{}, &control.ReloadError{Errors: []string{control.NoConfigFiles}}
	}
	p, err := s.opts.Reload()
	if err != nil {
		return control.ReloadResult{}, s.RefuseReload(err)
	}
	return s.Reload(p)
}

// RefuseReload counts and wraps a configuration that did not compile, for callers that
// compile outside the server.
func (s *Server) RefuseReload(err error) error {
	s.fleet.metrics.Reloads.WithLabelValues("refused").Inc()
	re := &control.ReloadError{Errors: strings.Split(err.Error(), "\n")}
	s.log.Error("reload refused: the configuration does not compile; the running plan stays", "errors", strings.Join(re.Errors, "; "))
	return re
}

// Inflight is the requests a member engine is serving, 0 for another id.
func (s *Server) Inflight(id string) int64 {
	for _, m := range s.memberList() {
		if m.engine.ID == id && !m.leaving {
			return m.worker.Inflight()
		}
	}
	return 0
}

// Models are this generation's models.
func (s *generation) Models() *request.Models { return s.models }

// DryRun explains selection for m and facts with this generation's policies over the
// router's live registry and load table.
func (s *generation) DryRun(ctx context.Context, m *request.Model, facts *policy.Facts, peakErr error, tokens bool) *explain.Explanation {
	return s.previewQueue(explain.Run(ctx, m.Model, facts, peakErr, s.deps, s.reg, s.table, time.Now(), tokens))
}

// Members lists the member engines in fleet order, with their health, requests in flight
// and last usable load report.
func (s *Server) Members() []control.Member {
	list := s.memberList()
	out := make([]control.Member, len(list))
	for i, m := range list {
		out[i], _ = s.asMember(m)
	}
	return out
}

// asMember is m as the control plane reports it, and when its load report was taken
// (zero without one).
func (s *Server) asMember(m member) (control.Member, time.Time) {
	cm := control.Member{Engine: m.engine, Origin: m.origin, State: m.state(), Healthy: m.worker.Healthy(), Inflight: m.worker.Inflight()}
	r := s.table.LoadAt(m.worker, s.table.Now())
	if r == nil {
		return cm, time.Time{}
	}
	sample := r.Sample
	cm.Load = &sample
	return cm, r.At
}

// EngineClient is the client requests reach engines with.
func (s *Server) EngineClient() *http.Client { return s.client }

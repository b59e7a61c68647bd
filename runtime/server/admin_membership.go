package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/routerkit/router/runtime/answer"
	"github.com/routerkit/router/runtime/plan"
)

// Error codes of the reload and engine admin endpoints.
const (
	codeReloadRefused  = "reload_refused"
	codeReloadDisabled = "reload_unavailable"
	codeBadEngine      = "invalid_engine"
	codeEngineConflict = "engine_conflict"
	codeUnknownEngine  = "engine_not_found"
)

// noConfigFiles explains why a router started from an embedded plan cannot reload.
const noConfigFiles = "this router was started without --config (--demo serves an embedded config): there are no files to reload; " +
	"run `router serve --demo --print-config > router.yaml`, point it at your engines and serve --config router.yaml"

// maxEngineBody bounds a posted engine: one engine's settings are a few hundred bytes.
const maxEngineBody = 64 << 10

func (s *Server) membershipRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /admin/reload", s.admin(s.reloadHandler))
	mux.HandleFunc("POST /admin/engines", s.admin(s.addEngineHandler))
	mux.HandleFunc("POST /admin/engines/{id}/drain", s.admin(s.drainEngineHandler))
	mux.HandleFunc("DELETE /admin/engines/{id}", s.admin(s.removeEngineHandler))
}

// ReloadConfig compiles the configuration files again (Options.Reload) and reloads the
// result; a configuration that does not compile is refused with the compiler's errors
// and the running plan stays. SIGHUP and POST /admin/reload both come here.
func (s *Server) ReloadConfig() (ReloadResult, error) {
	if s.opts.Reload == nil {
		s.log.Error("reload refused: " + noConfigFiles)
		return ReloadResult{}, &ReloadError{Errors: []string{noConfigFiles}}
	}
	p, err := s.opts.Reload()
	if err != nil {
		return ReloadResult{}, s.RefuseReload(err)
	}
	return s.Reload(p)
}

// reloadHandler answers POST /admin/reload with what changed, or a 422 carrying every
// compiler error as a JSON list.
func (s *Server) reloadHandler(w http.ResponseWriter, _ *http.Request) {
	if s.opts.Reload == nil {
		writeError(w, http.StatusConflict, codeReloadDisabled, "reload refused: "+noConfigFiles)
		return
	}
	res, err := s.ReloadConfig()
	var re *ReloadError
	switch {
	case errors.As(err, &re):
		status := http.StatusUnprocessableEntity
		if re.Failed {
			status = http.StatusInternalServerError
		}
		body := answer.Body(status, codeReloadRefused, re.Error())
		body["errors"] = re.Errors
		w.Header().Set("X-Router-Error-Code", codeReloadRefused)
		writeJSON(w, status, body)
	case err != nil:
		writeError(w, http.StatusInternalServerError, codeReloadRefused, err.Error())
	default:
		writeJSON(w, http.StatusOK, res)
	}
}

// addEngineHandler answers POST /admin/engines: one engine in the configuration's engine
// shape, validated and defaulted as the compiler does the config's (Options.CompileEngine).
func (s *Server) addEngineHandler(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxEngineBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, codeBadEngine, fmt.Sprintf("reading the engine: %v (an engine is at most %d bytes of JSON)", err, maxEngineBody))
		return
	}
	if s.opts.CompileEngine == nil {
		writeError(w, http.StatusConflict, codeReloadDisabled, "this router cannot validate engines (no compiler given): add engines to the config and reload")
		return
	}
	e, err := s.opts.CompileEngine(s.current().plan, body)
	if err != nil {
		writeError(w, http.StatusBadRequest, codeBadEngine, "engine refused: "+err.Error())
		return
	}
	if err := s.Membership(OriginAdmin).Add(e); err != nil {
		writeMembershipError(w, err)
		return
	}
	e.URL = plan.RedactURL(e.URL)
	writeJSON(w, http.StatusCreated, map[string]any{"engine": e, "generation": s.current().generation})
}

func (s *Server) drainEngineHandler(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.Membership(OriginAdmin).Drain(id); err != nil {
		writeMembershipError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"engine": id, "state": "draining", "inflight": s.inflightOf(id)})
}

func (s *Server) removeEngineHandler(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	n := s.inflightOf(id)
	if err := s.Membership(OriginAdmin).Remove(id); err != nil {
		writeMembershipError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"engine": id, "state": "leaving", "inflight": n, "generation": s.current().generation})
}

// inflightOf is the requests a member engine is serving, 0 for another id.
func (s *Server) inflightOf(id string) int64 {
	for _, m := range s.memberList() {
		if m.engine.ID == id && !m.leaving {
			return m.worker.Inflight()
		}
	}
	return 0
}

func writeMembershipError(w http.ResponseWriter, err error) {
	var me *MembershipError
	if !errors.As(err, &me) {
		writeError(w, http.StatusInternalServerError, codeBadEngine, err.Error())
		return
	}
	code := codeBadEngine
	switch me.Status {
	case http.StatusNotFound:
		code = codeUnknownEngine
	case http.StatusConflict:
		code = codeEngineConflict
	}
	writeError(w, me.Status, code, me.Msg)
}

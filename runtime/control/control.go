// Package control is the router's control plane over HTTP: the guard in front of every
// admin endpoint, reloads, and engines added, drained and removed while the router
// serves, with the types those changes are told in. It holds no router state: it drives
// the router through Router, the few operations the control plane needs, so that
// runtime/server stays the HTTP edge and keeps its internals to itself.
package control

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/routerkit/router/runtime/answer"
	"github.com/routerkit/router/runtime/edge/apikey"
	"github.com/routerkit/router/runtime/explain"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
	"github.com/routerkit/router/runtime/request"
)

// Where a member engine came from, as /admin/state and the membership metrics say.
const (
	// OriginConfig: the configuration files, at startup or a reload.
	OriginConfig = "config"
	// OriginAdmin: POST /admin/engines.
	OriginAdmin = "admin"
	// OriginDNS: DNS discovery.
	OriginDNS = "dns"
)

// Origins are the origins a member engine can have, in the order metrics list them.
var Origins = []string{OriginConfig, OriginAdmin, OriginDNS}

// Membership adds, drains and removes engines while the router serves. Add takes an
// engine already validated and defaulted (the compiler's CompileEngine for one written by
// a person; discovery builds its own from a compiled template). The errors are
// *MembershipError.
type Membership interface {
	// Add registers an engine of a served model and role. Selection can pick it at once
	// in every group without worker_ids of its model and role; its health checks, load
	// polls and KV events start with it.
	Add(e plan.Engine) error
	// Drain stops new picks of the engine; what it is serving finishes.
	Drain(id string) error
	// Remove takes the engine out: no new picks, and its load slot, prefix index
	// entries, bindings, monitoring and KV-event subscription go at once; the requests
	// it is serving finish, then its metric series are deleted.
	Remove(id string) error
}

// MembershipError is a refused membership change: Status is the HTTP status that
// answers it (400 for a bad engine, 404 for an unknown id, 409 for a conflict).
type MembershipError struct {
	Status int
	Msg    string
}

func (e *MembershipError) Error() string { return e.Msg }

// ReloadResult says what a reload changed.
type ReloadResult struct {
	Generation uint64   `json:"generation"`
	Added      []string `json:"added"`
	Replaced   []string `json:"replaced"`
	Removed    []string `json:"removed"`
	Kept       []string `json:"kept"`
	// Dropped are run-time engines (admin, dns) the new plan no longer serves: their
	// model is gone or no longer uses their role.
	Dropped []string `json:"dropped,omitempty"`
}

// ReloadError is a refused reload: the configuration does not compile, or changes
// settings only a restart applies. The running plan stays.
type ReloadError struct {
	// Errors are the problems, one per line of the compiler's report.
	Errors []string
	// Failed is set when the plan compiled but the router could not build it (a
	// tokenizer that does not load): result "failed" rather than "refused".
	Failed bool
}

func (e *ReloadError) Error() string {
	return "reload refused, the running plan stays: " + strings.Join(e.Errors, "; ")
}

// Router is what the control plane needs of the router it controls, and no more: the
// generation whose routes are served, acting on the router as a whole.
type Router interface {
	// AdminToken is the admin_token of the plan whose routes are served ("" for none).
	AdminToken() string
	// LoopbackOnly is whether the router's listener is reachable from this host alone.
	LoopbackOnly() bool
	// CanReload is whether the router has configuration files to compile again.
	CanReload() bool
	// ReloadConfig compiles the configuration files again and reloads the result.
	ReloadConfig() (ReloadResult, error)
	// CompileEngine validates and defaults one engine posted in the configuration's
	// engine shape against the running plan; ok is false when the router has no
	// compiler to do it with.
	CompileEngine(body []byte) (e plan.Engine, ok bool, err error)
	// Membership changes engines with the given origin.
	Membership(origin string) Membership
	// Inflight is the requests a member engine is serving, 0 for another id.
	Inflight(id string) int64
	// Generation is the generation now serving.
	Generation() uint64
	// ReadBody reads a client's request body within the router's time and size limits.
	ReadBody(w http.ResponseWriter, r *http.Request) ([]byte, *answer.Error)
	// Models are the served models, their tokenizers and request readers.
	Models() *request.Models
	// DryRun runs selection for m and facts against live state, as serving would, and
	// explains it; nothing is dispatched, taken or bound.
	DryRun(ctx context.Context, m *request.Model, facts *policy.Facts, peakErr error, tokens bool) *explain.Explanation
	// Members lists the member engines in fleet order, leaving ones included.
	Members() []Member
	// EngineClient is the client the router reaches engines with; it follows no redirect.
	EngineClient() *http.Client
	// Handler serves the router's routes, as its listener does.
	Handler() http.Handler
}

// Error codes of the reload and engine admin endpoints.
const (
	codeReloadRefused  = "reload_refused"
	codeReloadDisabled = "reload_unavailable"
	codeBadEngine      = "invalid_engine"
	codeEngineConflict = "engine_conflict"
	codeUnknownEngine  = "engine_not_found"
)

// NoConfigFiles explains why a router started from an embedded plan cannot reload.
const NoConfigFiles = "this router was started without --config (--demo serves an embedded config): there are no files to reload; " +
	"run `router serve --demo --print-config > router.yaml`, point it at your engines and serve --config router.yaml"

// maxEngineBody bounds a posted engine: one engine's settings are a few hundred bytes.
const maxEngineBody = 64 << 10

// Routes adds the explain, membership and reload endpoints of r to mux, each behind Guard.
func Routes(mux *http.ServeMux, r Router) {
	mux.HandleFunc("POST /admin/explain", Guard(r, explainHandler(r)))
	mux.HandleFunc("POST /admin/reload", Guard(r, reloadHandler(r)))
	mux.HandleFunc("POST /admin/engines", Guard(r, addEngineHandler(r)))
	mux.HandleFunc("POST /admin/engines/{id}/drain", Guard(r, drainEngineHandler(r)))
	mux.HandleFunc("DELETE /admin/engines/{id}", Guard(r, removeEngineHandler(r)))
}

// Guard guards an admin endpoint. With admin_token set, every admin endpoint needs it.
// Without one, the read (GET /admin/state, what /metrics also shows) stays open and the
// rest (adding, draining and removing engines, reloads, and explain, which costs CPU) is
// served only on a loopback-only listener: on any other, whoever reaches the port could
// add an engine and steer traffic, and requests, to a host of their choosing.
func Guard(r Router, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		switch tok := r.AdminToken(); {
		case tok != "":
			got, ok := apikey.Bearer(req.Header.Get("Authorization"))
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(tok)) != 1 {
				answer.Write(w, http.StatusUnauthorized, answer.CodeUnauthorized, "admin endpoints need Authorization: Bearer <admin_token>")
				return
			}
		case req.Method != http.MethodGet && req.Method != http.MethodHead && !r.LoopbackOnly():
			answer.Write(w, http.StatusForbidden, answer.CodeForbidden, fmt.Sprintf(
				"%s %s refused: the router listens beyond loopback and has no admin_token; set admin_token in the config and send Authorization: Bearer <admin_token>, or listen on 127.0.0.1 only",
				req.Method, req.URL.Path))
			return
		}
		h(w, req)
	}
}

// LoopbackOnly reports whether a listener at addr can only be reached from this host: a
// loopback IP (127.0.0.0/8, ::1) or a Unix socket, guarded by its file permissions. A
// wildcard address (0.0.0.0, ::, "") listens on every interface and is not.
func LoopbackOnly(addr net.Addr) bool {
	switch a := addr.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	}
	return false
}

// reloadHandler answers POST /admin/reload with what changed, or a 422 carrying every
// compiler error as a JSON list.
func reloadHandler(r Router) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if !r.CanReload() {
			answer.Write(w, http.StatusConflict, codeReloadDisabled, "reload refused: "+NoConfigFiles)
			return
		}
		res, err := r.ReloadConfig()
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
			answer.JSON(w, status, body)
		case err != nil:
			answer.Write(w, http.StatusInternalServerError, codeReloadRefused, err.Error())
		default:
			answer.JSON(w, http.StatusOK, res)
		}
	}
}

// addEngineHandler answers POST /admin/engines: one engine in the configuration's engine
// shape, validated and defaulted as the compiler does the config's (Router.CompileEngine).
func addEngineHandler(r Router) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxEngineBody))
		if err != nil {
			answer.Write(w, http.StatusBadRequest, codeBadEngine, fmt.Sprintf("reading the engine: %v (an engine is at most %d bytes of JSON)", err, maxEngineBody))
			return
		}
		e, ok := addEngine(w, r, body)
		if !ok {
			return
		}
		e.URL = plan.RedactURL(e.URL)
		answer.JSON(w, http.StatusCreated, map[string]any{"engine": e, "generation": r.Generation()})
	}
}

// addEngine validates one engine in the configuration's engine shape and adds it with
// origin admin; when it cannot, it answers w and ok is false.
func addEngine(w http.ResponseWriter, r Router, body []byte) (e plan.Engine, ok bool) {
	e, ok, err := r.CompileEngine(body)
	switch {
	case !ok:
		answer.Write(w, http.StatusConflict, codeReloadDisabled, "this router cannot validate engines (no compiler given): add engines to the config and reload")
		return e, false
	case err != nil:
		answer.Write(w, http.StatusBadRequest, codeBadEngine, "engine refused: "+err.Error())
		return e, false
	}
	if err := r.Membership(OriginAdmin).Add(e); err != nil {
		writeMembershipError(w, err)
		return e, false
	}
	return e, true
}

func drainEngineHandler(r Router) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		id := req.PathValue("id")
		if err := r.Membership(OriginAdmin).Drain(id); err != nil {
			writeMembershipError(w, err)
			return
		}
		answer.JSON(w, http.StatusOK, map[string]any{"engine": id, "state": "draining", "inflight": r.Inflight(id)})
	}
}

func removeEngineHandler(r Router) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		id := req.PathValue("id")
		n := r.Inflight(id)
		if err := r.Membership(OriginAdmin).Remove(id); err != nil {
			writeMembershipError(w, err)
			return
		}
		answer.JSON(w, http.StatusOK, map[string]any{"engine": id, "state": "leaving", "inflight": n, "generation": r.Generation()})
	}
}

func writeMembershipError(w http.ResponseWriter, err error) {
	var me *MembershipError
	if !errors.As(err, &me) {
		answer.Write(w, http.StatusInternalServerError, codeBadEngine, err.Error())
		return
	}
	code := codeBadEngine
	switch me.Status {
	case http.StatusNotFound:
		code = codeUnknownEngine
	case http.StatusConflict:
		code = codeEngineConflict
	}
	answer.Write(w, me.Status, code, me.Msg)
}

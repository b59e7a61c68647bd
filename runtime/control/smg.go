package control

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/routerkit/router/runtime/answer"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/load"
)

// The operator endpoints of SGLang's model gateway (SMG, sgl-model-gateway, formerly
// sgl-router), so that scripts written for it run against this router unchanged. Their
// shapes follow lightseekorg/smg: model_gateway/src/server.rs (the routes),
// model_gateway/src/worker/service.rs (/workers), model_gateway/src/worker/manager.rs
// and crates/protocols/src/worker.rs (/flush_cache, /get_loads). They are thin: the
// engine endpoints reuse the admin API's membership changes and Guard, and the fan-out
// reaches the member engines with the router's own engine client.

// Member is one member engine as the control plane reports it.
type Member struct {
	Engine plan.Engine
	// Origin is config, admin or dns.
	Origin string
	// State is serving, draining or leaving.
	State    string
	Healthy  bool
	Inflight int64
	// Load is the engine's last usable load report, nil when it has none.
	Load *load.Sample
}

// Bounds of the fan-out to the engines (/flush_cache): SMG's (manager.rs REQUEST_TIMEOUT,
// MAX_CONCURRENT).
const (
	fanOutTimeout     = 5 * time.Second
	fanOutConcurrency = 32
	// maxWorkerBody bounds a posted worker: SMG's worker spec is a few hundred bytes.
	maxWorkerBody = maxEngineBody
	// probeBodyKept is how much of a failed /health_generate probe's answer is reported.
	probeBodyKept = 512
)

// SMGRoutes adds SMG's operator endpoints to mux: the engine ones behind Guard, as the
// admin API is; /health_generate is open, as /healthz and /readyz are.
func SMGRoutes(mux *http.ServeMux, r Router) {
	mux.HandleFunc("GET /workers", Guard(r, listWorkersHandler(r)))
	mux.HandleFunc("POST /workers", Guard(r, createWorkerHandler(r)))
	mux.HandleFunc("GET /workers/{worker}", Guard(r, getWorkerHandler(r)))
	mux.HandleFunc("DELETE /workers/{worker}", Guard(r, deleteWorkerHandler(r)))
	mux.HandleFunc("GET /get_loads", Guard(r, getLoadsHandler(r)))
	mux.HandleFunc("POST /flush_cache", Guard(r, flushCacheHandler(r)))
	mux.HandleFunc("GET /health_generate", healthGenerateHandler(r))
}

// workerType is SMG's name of a role.
func workerType(role plan.Role) string {
	if role == plan.RolePlain {
		return "regular"
	}
	return string(role)
}

// workerInfo is SMG's WorkerInfo of a member (crates/protocols/src/worker.rs): its id,
// url, model, type and health, and the router's state and origin beside them.
func workerInfo(m Member) map[string]any {
	e := m.Engine
	info := map[string]any{
		"id": e.ID, "url": plan.RedactURL(e.URL), "model_id": e.Model, "models": []map[string]string{{"id": e.Model}},
		"worker_type": workerType(e.Role), "connection_mode": "http", "runtime_type": string(e.Kind),
		"is_healthy": m.Healthy, "load": m.Inflight, "state": m.State, "origin": m.Origin,
	}
	if e.Role == plan.RolePrefill {
		info["bootstrap_port"] = e.BootstrapPort
	}
	return info
}

// inService lists the members serving or draining: the ones the engine endpoints act on.
func inService(r Router) []Member {
	return slices.DeleteFunc(r.Members(), func(m Member) bool { return m.State == "leaving" })
}

// memberNamed returns the member in service whose id, or url, is key: SMG's current API
// names a worker by id, its earlier one by url.
func memberNamed(r Router, key string) (Member, error) {
	ms := inService(r)
	ids := make([]string, len(ms))
	for i, m := range ms {
		if m.Engine.ID == key || strings.TrimRight(m.Engine.URL, "/") == strings.TrimRight(key, "/") {
			return m, nil
		}
		ids[i] = m.Engine.ID
	}
	return Member{}, &MembershipError{Status: http.StatusNotFound, Msg: fmt.Sprintf(
		"no engine has id or url %q (members: %s): see GET /workers", key, strings.Join(ids, ", "))}
}

// listWorkersHandler answers GET /workers as SMG's ListWorkersResult.
func listWorkersHandler(r Router) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		ms := inService(r)
		workers := make([]map[string]any, len(ms))
		count := map[plan.Role]int{}
		for i, m := range ms {
			workers[i] = workerInfo(m)
			count[m.Engine.Role]++
		}
		answer.JSON(w, http.StatusOK, map[string]any{"workers": workers, "total": len(ms), "stats": map[string]int{
			"prefill_count": count[plan.RolePrefill], "decode_count": count[plan.RoleDecode], "regular_count": count[plan.RolePlain]}})
	}
}

func getWorkerHandler(r Router) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		m, err := memberNamed(r, req.PathValue("worker"))
		if err != nil {
			writeMembershipError(w, err)
			return
		}
		answer.JSON(w, http.StatusOK, workerInfo(m))
	}
}

// workerSpec is the part of SMG's WorkerSpec (crates/protocols/src/worker.rs) this router
// acts on; its other fields (priority, cost, labels, health and pool settings) have no
// counterpart here and are ignored.
type workerSpec struct {
	URL string `json:"url"`
	// ID is this router's: SMG makes up a UUID, this router names the engine by the
	// URL's host:port unless the spec gives an id.
	ID         string `json:"id"`
	WorkerType string `json:"worker_type"`
	// RuntimeType is sglang or vllm ("runtime" is SMG's alias).
	RuntimeType    string `json:"runtime_type"`
	Runtime        string `json:"runtime"`
	ConnectionMode string `json:"connection_mode"`
	ModelID        string `json:"model_id"`
	Models         []struct {
		ID string `json:"id"`
	} `json:"models"`
	BootstrapPort *int   `json:"bootstrap_port"`
	APIKey        string `json:"api_key"`
}

// engineJSON translates a worker spec into one engine in the configuration's engine
// shape, for the compiler to validate and default as it does POST /admin/engines.
func (s workerSpec) engineJSON(models []string) ([]byte, error) {
	if s.APIKey != "" {
		return nil, errors.New("api_key: this router sends engines no API key: put the engine behind a network the router reaches without one")
	}
	if s.ConnectionMode != "" && s.ConnectionMode != "http" {
		return nil, fmt.Errorf("connection_mode %q: this router reaches engines over HTTP only: omit it or send \"http\"", s.ConnectionMode)
	}
	u, err := url.Parse(s.URL)
	if s.URL == "" || err != nil || u.Host == "" {
		return nil, fmt.Errorf("url %q: send the engine's absolute URL, like http://10.0.0.5:30000", plan.RedactURL(s.URL))
	}
	e := map[string]any{"url": s.URL, "id": s.ID}
	if s.ID == "" {
		e["id"] = u.Host
	}
	switch s.WorkerType {
	case "", "regular":
		e["role"] = plan.RolePlain
	case "prefill", "decode":
		e["role"] = s.WorkerType
	default:
		return nil, fmt.Errorf("worker_type %q: use regular, prefill or decode", s.WorkerType)
	}
	switch kind := cmp.Or(s.RuntimeType, s.Runtime); kind {
	case "", "unspecified":
	case string(plan.KindSGLang), string(plan.KindVLLM):
		e["kind"] = kind
	default:
		return nil, fmt.Errorf("runtime_type %q: this router serves sglang and vllm engines", kind)
	}
	switch {
	case len(s.Models) > 0:
		e["model"] = s.Models[0].ID
	case s.ModelID != "":
		e["model"] = s.ModelID
	case len(models) == 1:
		e["model"] = models[0]
	default:
		return nil, fmt.Errorf("no model: this router serves %s; send models: [{\"id\": \"<model>\"}]", strings.Join(models, ", "))
	}
	if s.BootstrapPort != nil {
		e["bootstrap_port"] = *s.BootstrapPort
	}
	return json.Marshal(e)
}

// createWorkerHandler answers POST /workers: SMG's worker spec becomes one engine of the
// admin API (its id the URL's host:port). SMG answers 202 and adds the worker in the
// background; this router answers 202 in SMG's shape once the engine is a member.
func createWorkerHandler(r Router) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		var spec workerSpec
		if err := json.NewDecoder(http.MaxBytesReader(w, req.Body, maxWorkerBody)).Decode(&spec); err != nil {
			answer.Write(w, http.StatusBadRequest, codeBadEngine, fmt.Sprintf("reading the worker: %v (send SMG's worker spec as JSON, at most %d bytes)", err, maxWorkerBody))
			return
		}
		models := make([]string, 0, len(r.Models().All()))
		for name := range r.Models().All() {
			models = append(models, name)
		}
		slices.Sort(models)
		body, err := spec.engineJSON(models)
		if err != nil {
			answer.Write(w, http.StatusBadRequest, codeBadEngine, "worker refused: "+err.Error())
			return
		}
		e, ok := addEngine(w, r, body)
		if !ok {
			return
		}
		w.Header().Set("Location", "/workers/"+url.PathEscape(e.ID))
		answer.JSON(w, http.StatusAccepted, map[string]any{"status": "accepted", "worker_id": e.ID, "url": plan.RedactURL(e.URL),
			"location": "/workers/" + url.PathEscape(e.ID), "generation": r.Generation(),
			"message": fmt.Sprintf("engine %s added: a member now, serving model %s as %s", e.ID, e.Model, e.Role)})
	}
}

// deleteWorkerHandler answers DELETE /workers/{id or url} as SMG's DeleteWorkerResult,
// once the engine is out: no new picks, its requests in flight finish.
func deleteWorkerHandler(r Router) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		m, err := memberNamed(r, req.PathValue("worker"))
		if err == nil {
			err = r.Membership(OriginAdmin).Remove(m.Engine.ID)
		}
		if err != nil {
			writeMembershipError(w, err)
			return
		}
		answer.JSON(w, http.StatusAccepted, map[string]any{"status": "accepted", "worker_id": m.Engine.ID, "url": plan.RedactURL(m.Engine.URL),
			"generation": r.Generation(), "message": fmt.Sprintf("engine %s removed: no new picks; its %d requests in flight finish", m.Engine.ID, m.Inflight)})
	}
}

// getLoadsHandler answers GET /get_loads in SMG's shape, {"workers": [{"worker", "load"}]},
// the load being the engine's committed KV tokens (SGLang's num_total_tokens), -1 when
// unknown. SMG asks every engine at the call; this router answers from the load its
// monitor last polled, which is what its policies see, and asks no engine.
func getLoadsHandler(r Router) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		ms := inService(r)
		workers := make([]map[string]any, len(ms))
		for i, m := range ms {
			n := int64(-1)
			if l := m.Load; l != nil && (l.Native || l.KVKnown) {
				n = l.TotalKVTokens
			}
			workers[i] = map[string]any{"worker": plan.RedactURL(m.Engine.URL), "load": n}
		}
		answer.JSON(w, http.StatusOK, map[string]any{"workers": workers})
	}
}

// flushPath is the engine's endpoint that empties its prefix cache.
func flushPath(e plan.Engine) string {
	if e.Kind == plan.KindVLLM {
		return "/reset_prefix_cache"
	}
	return "/flush_cache"
}

// flushCacheHandler answers POST /flush_cache: every member engine in service is asked to
// empty its prefix cache (SGLang's POST /flush_cache, vLLM's POST /reset_prefix_cache),
// at most fanOutConcurrency at once and each within fanOutTimeout, and the answer is
// SMG's FlushCacheResult: 200 when all succeeded, 206 with the failures otherwise.
func flushCacheHandler(r Router) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		ms := inService(r)
		errs := make([]string, len(ms))
		sem := make(chan struct{}, fanOutConcurrency)
		var wg sync.WaitGroup
		for i, m := range ms {
			wg.Go(func() {
				select {
				case sem <- struct{}{}:
					defer func() { <-sem }()
					errs[i] = flushOne(req.Context(), r.EngineClient(), m.Engine)
				case <-req.Context().Done():
					errs[i] = "the client left before the flush was sent"
				}
			})
		}
		wg.Wait()
		successful, failed := []string{}, []map[string]string{}
		for i, m := range ms {
			if errs[i] == "" {
				successful = append(successful, plan.RedactURL(m.Engine.URL))
			} else {
				failed = append(failed, map[string]string{"worker": plan.RedactURL(m.Engine.URL), "error": errs[i]})
			}
		}
		status, body := http.StatusOK, map[string]any{"status": "success", "workers_flushed": len(successful),
			"total_http_workers": len(ms), "total_workers": len(ms),
			"message": fmt.Sprintf("Successfully flushed cache on all %d HTTP workers", len(ms))}
		if len(ms) == 0 {
			body["message"] = "No HTTP workers available for cache flush"
		}
		if len(failed) > 0 {
			status = http.StatusPartialContent
			body["status"], body["successful"], body["failed"] = "partial_success", successful, failed
			body["message"] = fmt.Sprintf("Cache flush: %d succeeded, %d failed", len(successful), len(failed))
		}
		answer.JSON(w, status, body)
	}
}

// flushOne asks one engine to empty its prefix cache and says why it did not, or "".
func flushOne(ctx context.Context, client *http.Client, e plan.Engine) string {
	ctx, cancel := context.WithTimeout(ctx, fanOutTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(e.URL, "/")+flushPath(e), nil)
	if err != nil {
		return err.Error()
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL may carry credentials
		}
		return err.Error()
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode/100 == 2:
		return ""
	case resp.StatusCode == http.StatusBadRequest && e.Kind != plan.KindVLLM:
		return "HTTP 400 Bad Request: SGLang flushes only when no request is running or waiting; retry when the engine is idle"
	}
	return "HTTP " + resp.Status
}

// healthGenerateHandler answers GET /health_generate as SMG does: 503 when no engine is
// healthy, otherwise a one-token chat request for the first healthy engine's model sent
// through the router's own routes (selection, admission, dispatch), 200 when it is
// answered. The probe is what any client may already send to /v1/chat/completions, under
// the same limits, and stops when the caller leaves.
func healthGenerateHandler(r Router) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		ms := inService(r)
		var healthy, all []string
		model := ""
		for _, m := range ms {
			all = append(all, fmt.Sprintf("%s (%s)", m.Engine.ID, plan.RedactURL(m.Engine.URL)))
			if m.Healthy && m.State == "serving" {
				healthy = append(healthy, m.Engine.ID)
				model = cmp.Or(model, m.Engine.Model)
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		switch {
		case len(ms) == 0:
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "no engines are members: add engines to the config or POST /workers\n")
			return
		case len(healthy) == 0:
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, "0/%d engines healthy: %s\n", len(ms), strings.Join(all, ", "))
			return
		}
		body, _ := json.Marshal(map[string]any{"model": model, "messages": []map[string]string{{"role": "user", "content": "ping"}},
			"max_tokens": 1, "stream": false, "temperature": 0})
		probe, err := http.NewRequestWithContext(req.Context(), http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = fmt.Fprintf(w, "building the probe: %v\n", err)
			return
		}
		probe.Header.Set("Content-Type", "application/json")
		probe.RemoteAddr = req.RemoteAddr
		start := time.Now()
		pw := &probeWriter{header: http.Header{}}
		r.Handler().ServeHTTP(pw, probe)
		took := time.Since(start).Milliseconds()
		if pw.code/100 != 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, "probe failed: the router answered %d in %dms: %s\n", pw.code, took, strings.TrimSpace(pw.body.String()))
			return
		}
		_, _ = fmt.Fprintf(w, "OK - %d engines healthy, probe succeeded in %dms (model: %s)\n", len(healthy), took, model)
	}
}

// probeWriter takes the router's answer to the /health_generate probe: its status and the
// start of its body.
type probeWriter struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (p *probeWriter) Header() http.Header { return p.header }

func (p *probeWriter) WriteHeader(code int) {
	if p.code == 0 {
		p.code = code
	}
}

func (p *probeWriter) Write(b []byte) (int, error) {
	p.WriteHeader(http.StatusOK)
	if room := probeBodyKept - p.body.Len(); room > 0 {
		p.body.Write(b[:min(len(b), room)])
	}
	return len(b), nil
}

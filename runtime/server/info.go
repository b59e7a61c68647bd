package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/routerkit/router/runtime/answer"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/request"
)

// maxInfoBytes bounds an engine's answer to an info request the router relays.
const maxInfoBytes = 1 << 20

// getModel answers GET /v1/models/{id} in OpenAI's shape, so SDKs' models.retrieve works.
func (s *generation) getModel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	m := s.models.Get(id)
	if m == nil {
		answer.WriteErr(w, s.models.Unknown(id))
		return
	}
	answer.JSON(w, http.StatusOK, s.modelCard(m.Plan))
}

// tokenizer serves POST /v1/tokenize or /v1/detokenize with the model's tokenizer.
func (s *generation) tokenizer(reply func(r *http.Request, body []byte) (map[string]any, *request.Error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, herr := s.ReadBody(w, r)
		if herr != nil {
			answer.WriteErr(w, herr)
			return
		}
		out, rerr := reply(r, body)
		if rerr != nil {
			answer.WriteErr(w, rerr)
			return
		}
		answer.JSON(w, http.StatusOK, out)
	}
}

func (s *generation) modelCard(m *plan.Model) map[string]any {
	return map[string]any{"id": m.Name, "object": "model", "created": s.started.Unix(), "owned_by": "router"}
}

// engineInfo relays a GET of SGLang's info endpoints (/get_model_info, /get_server_info)
// to a healthy engine of the model named by the query's model parameter, or of the only
// model: the answer describes the engines, which the router does not know by itself.
// /get_server_info loses the engine's addresses on the way (serverInfo).
func (s *generation) engineInfo(w http.ResponseWriter, r *http.Request) {
	m, herr := s.models.Named(r.URL.Query().Get("model"))
	if herr != nil {
		answer.WriteErr(w, herr)
		return
	}
	var id, base string
	for _, e := range s.plan.Engines {
		if wk := s.reg.Get(e.ID); e.Model == m.Plan.Name && wk != nil && wk.Healthy() {
			id, base = e.ID, wk.URL()
			break
		}
	}
	if base == "" {
		answer.Write(w, http.StatusServiceUnavailable, answer.CodeNoHealthyEngine, fmt.Sprintf("model %q has no healthy engine to ask", m.Plan.Name))
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, base+r.URL.Path, nil)
	if err != nil {
		answer.Write(w, http.StatusInternalServerError, answer.CodeEngineError, fmt.Sprintf("engine %s: %v", id, unwrapURL(err)))
		return
	}
	resp, err := s.client.Do(req)
	if err != nil {
		answer.Write(w, http.StatusBadGateway, answer.CodeEngineError, fmt.Sprintf("asking engine %s of model %q: %v", id, m.Plan.Name, unwrapURL(err)))
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxInfoBytes))
	if err != nil {
		answer.Write(w, http.StatusBadGateway, answer.CodeEngineError, fmt.Sprintf("reading the answer of engine %s of model %q: %v", id, m.Plan.Name, unwrapURL(err)))
		return
	}
	if resp.StatusCode/100 != 2 {
		answer.Write(w, http.StatusBadGateway, answer.CodeEngineError, fmt.Sprintf("engine %s of model %q answered %s", id, m.Plan.Name, resp.Status))
		return
	}
	if r.URL.Path == "/get_server_info" {
		if body, err = serverInfo(body); err != nil {
			answer.Write(w, http.StatusBadGateway, answer.CodeEngineError, fmt.Sprintf("engine %s of model %q: %v", id, m.Plan.Name, err))
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// unwrapURL drops the request line net/http puts around a client error ("Get
// \"http://10.0.0.7:8000/...\": ..."): a client is told which engine failed by id, never
// where it listens.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// serverInfo is an engine's /get_server_info answer as the router relays it. SGLang answers
// its whole launch configuration (every ServerArgs field, the scheduler's info, the
// internal states and the version); what clients read of it is the model and its limits
// (model_path, context_length, max_total_num_tokens, max_running_requests, ...), the
// parallelism, internal_states and version. Where the engine listens and how to reach
// its internals (host, port, the KV-event publisher's endpoint and topic, the PD
// bootstrap port, the distributed init address, API keys, launch configs that name
// storage backends) is for the router alone: a client that learns it can subscribe to
// the engine's events or go around the router. The fields are dropped by the shape of
// their names, so one that a later SGLang adds is dropped too.
func serverInfo(body []byte) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, fmt.Errorf("/get_server_info is not a JSON object: %w", err)
	}
	for key := range fields {
		if internalInfo(key) {
			delete(fields, key)
		}
	}
	return json.Marshal(fields)
}

// internalInfo reports whether a /get_server_info field says where an engine or one of its
// parts listens, or holds a credential (serverInfo).
func internalInfo(key string) bool {
	switch key {
	case "host", "port", "api_key", "admin_api_key", "dist_init_addr", "nccl_port", "kv_events":
		return true
	}
	for _, suffix := range []string{"_host", "_port", "_ports", "_url", "_addr", "_address", "_endpoint", "_endpoints", "_api_key", "_token", "_config", "_ib_device"} {
		if strings.HasSuffix(key, suffix) {
			return true
		}
	}
	return false
}

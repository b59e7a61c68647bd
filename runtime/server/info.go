package server

import (
	"fmt"
	"io"
	"net/http"

	"github.com/routerkit/router/runtime/answer"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/request"
)

// maxInfoBytes bounds an engine's answer to an info request the router relays.
const maxInfoBytes = 1 << 20

// getModel answers GET /v1/models/{id} in OpenAI's shape, so SDKs' models.retrieve works.
func (s *Server) getModel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	m := s.models.Get(id)
	if m == nil {
		writeErr(w, s.models.Unknown(id))
		return
	}
	writeJSON(w, http.StatusOK, s.modelCard(m.Plan))
}

// tokenizer serves POST /v1/tokenize or /v1/detokenize with the model's tokenizer.
func (s *Server) tokenizer(answer func(body []byte) (map[string]any, *request.Error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, herr := s.readBody(w, r)
		if herr != nil {
			writeErr(w, herr)
			return
		}
		out, rerr := answer(body)
		if rerr != nil {
			writeErr(w, rerr)
			return
		}
		writeJSON(w, http.StatusOK, out)
	}
}

func (s *Server) modelCard(m *plan.Model) map[string]any {
	return map[string]any{"id": m.Name, "object": "model", "created": s.started.Unix(), "owned_by": "router"}
}

// engineInfo relays a GET of SGLang's info endpoints (/get_model_info, /get_server_info)
// to a healthy engine of the model named by the query's model parameter, or of the only
// model: the answer describes the engines, which the router does not know by itself.
func (s *Server) engineInfo(w http.ResponseWriter, r *http.Request) {
	m, herr := s.models.Named(r.URL.Query().Get("model"))
	if herr != nil {
		writeErr(w, herr)
		return
	}
	var url string
	for _, e := range s.plan.Engines {
		if wk := s.reg.Get(e.ID); e.Model == m.Plan.Name && wk != nil && wk.Healthy() {
			url = wk.URL()
			break
		}
	}
	if url == "" {
		writeError(w, http.StatusServiceUnavailable, answer.CodeNoHealthyEngine, fmt.Sprintf("model %q has no healthy engine to ask", m.Plan.Name))
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, url+r.URL.Path, nil)
	if err != nil {
		writeError(w, http.StatusInternalServerError, answer.CodeEngineError, err.Error())
		return
	}
	resp, err := s.client.Do(req)
	if err != nil {
		writeError(w, http.StatusBadGateway, answer.CodeEngineError, fmt.Sprintf("asking an engine of model %q: %v", m.Plan.Name, err))
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxInfoBytes))
	if err != nil {
		writeError(w, http.StatusBadGateway, answer.CodeEngineError, fmt.Sprintf("reading the answer of an engine of model %q: %v", m.Plan.Name, err))
		return
	}
	if resp.StatusCode/100 != 2 {
		writeError(w, http.StatusBadGateway, answer.CodeEngineError, fmt.Sprintf("an engine of model %q answered %s", m.Plan.Name, resp.Status))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

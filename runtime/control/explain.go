package control

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/routerkit/router/runtime/answer"
	"github.com/routerkit/router/runtime/explain"
	"github.com/routerkit/router/runtime/policy"
	"github.com/routerkit/router/runtime/request"
	"github.com/routerkit/router/runtime/strictjson"
)

// explainHandler answers POST /admin/explain: it runs selection for the posted request exactly as serving would, against live
// state, and returns the shared explanation. A body with messages is a chat request; any
// other is an explain.Request giving the routing facts directly. It is a dry run: nothing is
// dispatched, no in-flight count is taken and no affinity binding is written.
func explainHandler(s Router) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, herr := s.ReadBody(w, r)
		if herr != nil {
			answer.WriteErr(w, herr)
			return
		}
		var (
			facts   policy.Facts
			m       *request.Model
			peakErr error
			err     error
		)
		var probe struct {
			Messages    json.RawMessage `json:"messages"`
			InputTokens json.RawMessage `json:"input_tokens"`
		}
		if strictjson.Unmarshal(body, &probe) == nil && (probe.Messages == nil || probe.InputTokens != nil) {
			m, facts, peakErr, err = explainFacts(s.Models(), r, body)
		} else {
			p, err := s.Models().Chat(r, body)
			if err != nil {
				answer.WriteErr(w, err)
				return
			}
			m, facts = s.Models().Get(p.Facts.Model), p.Facts
		}
		if err != nil {
			if _, ok := errors.AsType[*request.Error](err); !ok {
				err = &request.Error{Kind: request.Invalid, Msg: err.Error()}
			}
			answer.WriteErr(w, err)
			return
		}
		answer.JSON(w, http.StatusOK, s.DryRun(r.Context(), m, &facts, peakErr, facts.TokenIDs != nil))
	}
}

// explainFacts reads r, an explain.Request with body, into its model and routing facts
// (its text tokenized under the request's meter), or the expected-peak failure that
// stops selection before it starts.
func explainFacts(ms *request.Models, r *http.Request, body []byte) (_ *request.Model, _ policy.Facts, peakErr, err error) {
	var req explain.Request
	if err := strictjson.Check(body, &req); err != nil {
		return nil, policy.Facts{}, nil, fmt.Errorf("explain request: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, policy.Facts{}, nil, fmt.Errorf("explain request: %w", err)
	}
	if all := ms.All(); req.Model == "" && len(all) == 1 {
		for name := range all {
			req.Model = name
		}
	}
	m := ms.Get(req.Model)
	if m == nil {
		return nil, policy.Facts{}, nil, ms.Unknown(req.Model)
	}
	if req.InputTokens < 0 || (req.MaxTokens != nil && *req.MaxTokens < 0) {
		return nil, policy.Facts{}, nil, &request.Error{Kind: request.Invalid, Msg: "input_tokens and max_tokens must not be negative"}
	}
	facts, _, peakErr, err := req.Facts(ms.Meter(r), req.Model, m.Tok)
	if err != nil {
		return nil, policy.Facts{}, nil, request.Tokenizing(r, err, req.Model, "")
	}
	return m, facts, peakErr, nil
}

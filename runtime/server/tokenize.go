package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"

	"github.com/routerkit/router/runtime/token"
)

// tokenizeRequest is SGLang's and vLLM's tokenize request: a prompt (one string or a
// batch), or a conversation rendered with the model's chat template.
type tokenizeRequest struct {
	Model               string          `json:"model"`
	Prompt              json.RawMessage `json:"prompt"`
	AddSpecialTokens    *bool           `json:"add_special_tokens"`
	Messages            json.RawMessage `json:"messages"`
	Tools               json.RawMessage `json:"tools"`
	ChatTemplateKwargs  json.RawMessage `json:"chat_template_kwargs"`
	AddGenerationPrompt *bool           `json:"add_generation_prompt"`
}

// tokenize answers POST /v1/tokenize with the ids the router routes on, which are the ids
// the engines compute when the model's tokenizer is configured: {"tokens", "count",
// "max_model_len"}, with a list of lists and a list of counts for a batch of prompts.
func (s *Server) tokenize(w http.ResponseWriter, r *http.Request) {
	var req tokenizeRequest
	m, herr := s.readModelRequest(w, r, &req, &req.Model)
	if herr != nil {
		writeHTTPError(w, herr)
		return
	}
	hasPrompt, hasMessages := present(req.Prompt), present(req.Messages)
	if hasPrompt == hasMessages {
		writeHTTPError(w, badRequest("give exactly one of prompt (text) or messages (a chat)"))
		return
	}
	out := map[string]any{}
	if n := maxModelLen(m); n > 0 {
		out["max_model_len"] = n
	}
	if hasMessages {
		msgs, herr := validateMessages(req.Messages)
		if herr != nil {
			writeHTTPError(w, herr)
			return
		}
		ids, err := m.Tok.EncodeChat(s.meter(r), token.Chat{Messages: req.Messages, Tools: req.Tools, Kwargs: req.ChatTemplateKwargs,
			NoGenerationPrompt: req.AddGenerationPrompt != nil && !*req.AddGenerationPrompt, Decoded: msgs})
		if err != nil {
			writeHTTPError(w, tokenizeFailed(r, err, "rendering the chat template"))
			return
		}
		out["tokens"], out["count"] = nonNil(ids), len(ids)
		writeJSON(w, http.StatusOK, out)
		return
	}
	// Engines add the tokenizer's template tokens (Llama's BOS) to a prompt by default.
	special := req.AddSpecialTokens == nil || *req.AddSpecialTokens
	var one string
	meter := s.meter(r)
	if json.Unmarshal(req.Prompt, &one) == nil {
		ids, err := m.Tok.Encode(meter, one, special)
		if err != nil {
			writeHTTPError(w, tokenizeFailed(r, err, "prompt"))
			return
		}
		out["tokens"], out["count"] = nonNil(ids), len(ids)
		writeJSON(w, http.StatusOK, out)
		return
	}
	var batch []string
	if err := json.Unmarshal(req.Prompt, &batch); err != nil {
		writeHTTPError(w, badRequest("prompt: a string or an array of strings, not %.40s", req.Prompt))
		return
	}
	lists, counts := make([][]uint32, len(batch)), make([]int, len(batch))
	for i, text := range batch {
		ids, err := m.Tok.Encode(meter, text, special)
		if err != nil {
			writeHTTPError(w, tokenizeFailed(r, err, "prompt"))
			return
		}
		lists[i], counts[i] = nonNil(ids), len(ids)
	}
	out["tokens"], out["count"] = lists, counts
	writeJSON(w, http.StatusOK, out)
}

// detokenize answers POST /v1/detokenize: {"tokens": [ids]} gives the text under both
// names in use, SGLang's "text" and vLLM's "prompt"; a list of lists gives a list of texts.
func (s *Server) detokenize(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model  string          `json:"model"`
		Tokens json.RawMessage `json:"tokens"`
	}
	m, herr := s.readModelRequest(w, r, &req, &req.Model)
	if herr != nil {
		writeHTTPError(w, herr)
		return
	}
	if !present(req.Tokens) {
		writeHTTPError(w, badRequest("tokens: required, an array of token ids"))
		return
	}
	var one []int64
	if json.Unmarshal(req.Tokens, &one) == nil {
		text, herr := decodeIDs(m.Tok, one)
		if herr != nil {
			writeHTTPError(w, herr)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"text": text, "prompt": text})
		return
	}
	var batch [][]int64
	if err := json.Unmarshal(req.Tokens, &batch); err != nil {
		writeHTTPError(w, badRequest("tokens: an array of token ids or an array of such arrays"))
		return
	}
	texts := make([]string, len(batch))
	for i, ids := range batch {
		var herr *httpError
		if texts[i], herr = decodeIDs(m.Tok, ids); herr != nil {
			writeHTTPError(w, herr)
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"text": texts, "prompt": texts})
}

func decodeIDs(tok token.Tokenizer, ids []int64) (string, *httpError) {
	u := make([]uint32, len(ids))
	for i, id := range ids {
		if id < 0 || id > math.MaxUint32 {
			return "", badRequest("tokens[%d]: %d is not a token id", i, id)
		}
		u[i] = uint32(id)
	}
	text, err := tok.Decode(u)
	switch {
	case errors.Is(err, token.ErrNoDecode):
		return "", &httpError{status: http.StatusNotImplemented, code: codeNoTokenizer, msg: err.Error()}
	case err != nil:
		return "", badRequest("tokens: %v", err)
	}
	return text, nil
}

// readModelRequest reads a JSON body into v and returns the model its *model field names.
func (s *Server) readModelRequest(w http.ResponseWriter, r *http.Request, v any, model *string) (*served, *httpError) {
	if _, herr := s.readRequest(w, r, v); herr != nil {
		return nil, herr
	}
	return s.modelNamed(*model)
}

// modelNamed is the named model, or the only one when the request names none, as an
// engine serving one model answers.
func (s *Server) modelNamed(name string) (*served, *httpError) {
	if name == "" {
		if len(s.models) == 1 {
			for _, m := range s.models {
				return m, nil
			}
		}
		return nil, badRequest("model: required, one of %s", s.modelList)
	}
	if m := s.models[name]; m != nil {
		return m, nil
	}
	return nil, &httpError{status: http.StatusNotFound, code: codeModelNotFound, model: name,
		msg: fmt.Sprintf("model %q is not served by this router (served: %s)", name, s.modelList)}
}

// maxModelLen is the longest input plus output a bucket of the model accepts, or 0 when
// some bucket has no bound.
func maxModelLen(m *served) int64 {
	var n int64
	for _, b := range m.Plan.Buckets {
		if b.MaxContextTokens == nil {
			return 0
		}
		n = max(n, *b.MaxContextTokens)
	}
	return n
}

func present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// nonNil makes an empty result encode as [] rather than null.
func nonNil(ids []uint32) []uint32 {
	if ids == nil {
		return []uint32{}
	}
	return ids
}

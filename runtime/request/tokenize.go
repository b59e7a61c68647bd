package request

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"

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

// Tokenize answers a tokenize request with the ids the router routes on, which are the
// ids the engines compute when the model's tokenizer is configured: {"tokens", "count",
// "max_model_len"}, with a list of lists and a list of counts for a batch of prompts.
func (ms *Models) Tokenize(body []byte) (map[string]any, *Error) {
	var req tokenizeRequest
	m, herr := ms.decodeModelRequest(body, &req, &req.Model)
	if herr != nil {
		return nil, herr
	}
	hasPrompt, hasMessages := Present(req.Prompt), Present(req.Messages)
	if hasPrompt == hasMessages {
		return nil, invalid("give exactly one of prompt (text) or messages (a chat)")
	}
	out := map[string]any{}
	if n := maxModelLen(m); n > 0 {
		out["max_model_len"] = n
	}
	if hasMessages {
		msgs, herr := validateMessages(req.Messages)
		if herr != nil {
			return nil, herr
		}
		ids, err := m.Tok.EncodeChat(token.Chat{Messages: req.Messages, Tools: req.Tools, Kwargs: req.ChatTemplateKwargs,
			NoGenerationPrompt: req.AddGenerationPrompt != nil && !*req.AddGenerationPrompt, Decoded: msgs})
		if err != nil {
			return nil, invalid("rendering the chat template: %v", err)
		}
		out["tokens"], out["count"] = nonNil(ids), len(ids)
		return out, nil
	}
	// Engines add the tokenizer's template tokens (Llama's BOS) to a prompt by default.
	special := req.AddSpecialTokens == nil || *req.AddSpecialTokens
	var one string
	if json.Unmarshal(req.Prompt, &one) == nil {
		ids := m.Tok.Encode(one, special)
		out["tokens"], out["count"] = nonNil(ids), len(ids)
		return out, nil
	}
	var batch []string
	if err := json.Unmarshal(req.Prompt, &batch); err != nil {
		return nil, invalid("prompt: a string or an array of strings, not %.40s", req.Prompt)
	}
	lists, counts := make([][]uint32, len(batch)), make([]int, len(batch))
	for i, text := range batch {
		lists[i] = nonNil(m.Tok.Encode(text, special))
		counts[i] = len(lists[i])
	}
	out["tokens"], out["count"] = lists, counts
	return out, nil
}

// Detokenize answers a detokenize request: {"tokens": [ids]} gives the text under both
// names in use, SGLang's "text" and vLLM's "prompt"; a list of lists gives a list of texts.
func (ms *Models) Detokenize(body []byte) (map[string]any, *Error) {
	var req struct {
		Model  string          `json:"model"`
		Tokens json.RawMessage `json:"tokens"`
	}
	m, herr := ms.decodeModelRequest(body, &req, &req.Model)
	if herr != nil {
		return nil, herr
	}
	if !Present(req.Tokens) {
		return nil, invalid("tokens: required, an array of token ids")
	}
	var one []int64
	if json.Unmarshal(req.Tokens, &one) == nil {
		text, herr := decodeIDs(m.Tok, one)
		if herr != nil {
			return nil, herr
		}
		return map[string]any{"text": text, "prompt": text}, nil
	}
	var batch [][]int64
	if err := json.Unmarshal(req.Tokens, &batch); err != nil {
		return nil, invalid("tokens: an array of token ids or an array of such arrays")
	}
	texts := make([]string, len(batch))
	for i, ids := range batch {
		var herr *Error
		if texts[i], herr = decodeIDs(m.Tok, ids); herr != nil {
			return nil, herr
		}
	}
	return map[string]any{"text": texts, "prompt": texts}, nil
}

func decodeIDs(tok token.Tokenizer, ids []int64) (string, *Error) {
	u := make([]uint32, len(ids))
	for i, id := range ids {
		if id < 0 || id > math.MaxUint32 {
			return "", invalid("tokens[%d]: %d is not a token id", i, id)
		}
		u[i] = uint32(id)
	}
	text, err := tok.Decode(u)
	switch {
	case errors.Is(err, token.ErrNoDecode):
		return "", &Error{Kind: NoTokenizer, Msg: err.Error()}
	case err != nil:
		return "", invalid("tokens: %v", err)
	}
	return text, nil
}

// decodeModelRequest decodes a JSON body strictly into v and returns the model its
// *model field names.
func (ms *Models) decodeModelRequest(body []byte, v any, model *string) (*Model, *Error) {
	if herr := decodeBody(body, v); herr != nil {
		return nil, herr
	}
	return ms.Named(*model)
}

// maxModelLen is the longest input plus output a bucket of the model accepts, or 0 when
// some bucket has no bound.
func maxModelLen(m *Model) int64 {
	var n int64
	for _, b := range m.Plan.Buckets {
		if b.MaxContextTokens == nil {
			return 0
		}
		n = max(n, *b.MaxContextTokens)
	}
	return n
}

// Present reports whether a JSON value was given (not absent, not null).
func Present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// nonNil makes an empty result encode as [] rather than null.
func nonNil(ids []uint32) []uint32 {
	if ids == nil {
		return []uint32{}
	}
	return ids
}

// withoutField returns body, a JSON object, without its top-level key; other fields keep
// their values and keys come out sorted.
func withoutField(body []byte, key string) ([]byte, *Error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, &Error{Kind: InvalidJSON, Msg: "request body is not a JSON object: " + err.Error()}
	}
	delete(fields, key)
	out, err := EncodeFields(fields)
	if err != nil {
		return nil, &Error{Kind: Internal, Msg: err.Error()}
	}
	return out, nil
}

// EncodeFields encodes a JSON object without escaping <, > and &, so prompts reach the
// engine as the client wrote them.
func EncodeFields(fields map[string]json.RawMessage) ([]byte, error) {
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(fields); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

package request

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"

	"github.com/routerkit/router/runtime/strictjson"
	"github.com/routerkit/router/runtime/token"
)

// prompts is a request's input in any shape the completion, generate and embedding APIs
// accept: one text, several texts, one list of token ids or several.
type prompts struct {
	texts []string
	ids   [][]uint32
	// batch is set when the request gave several prompts (an array of texts or of id
	// lists), even a batch of one: engines answer batches in their own shape.
	batch bool
}

// parsePrompts reads raw, the value of the named field, into prompts. Token ids must be
// unsigned 32-bit integers.
func parsePrompts(raw json.RawMessage, field string) (prompts, *Error) {
	raw = bytes.TrimSpace(raw)
	var p prompts
	if len(raw) == 0 || string(raw) == "null" {
		return p, invalid("%s: required", field)
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		p.texts = []string{one}
		return p, nil
	}
	var many []json.RawMessage
	if err := json.Unmarshal(raw, &many); err != nil || len(many) == 0 {
		return p, invalid("%s: a string, an array of strings, an array of token ids or an array of such arrays", field)
	}
	if ids, ok := tokenIDs(raw); ok {
		p.ids = [][]uint32{ids}
		return p, nil
	}
	return batch(len(many), field, func(i int) (*string, []uint32, bool) {
		if json.Unmarshal(many[i], &one) == nil {
			return &one, nil, true
		}
		ids, ok := tokenIDs(many[i])
		return nil, ids, ok
	})
}

// batch reads the n items of a batch: item returns the i-th as a text, or as token ids,
// or ok false for anything else.
func batch(n int, field string, item func(i int) (text *string, ids []uint32, ok bool)) (prompts, *Error) {
	p := prompts{batch: true}
	for i := range n {
		text, ids, ok := item(i)
		switch {
		case !ok:
			return p, invalid("%s[%d]: a string or an array of token ids (integers from 0 to %d)", field, i, uint32(math.MaxUint32))
		case text != nil:
			p.texts = append(p.texts, *text)
		default:
			p.ids = append(p.ids, ids)
		}
	}
	if len(p.texts) > 0 && len(p.ids) > 0 {
		return p, invalid("%s: a batch is all strings or all token id arrays, not both", field)
	}
	return p, nil
}

// promptsOf reads the prompts of the named field from root, the body as decodeOnePass
// parsed it, as parsePrompts reads them from raw, which it does when the body was not
// parsed in one pass (root nil): a long prompt is then not decoded a second time.
// FuzzPromptsOf checks that both agree.
func promptsOf(root *strictjson.Value, raw json.RawMessage, field string) (prompts, *Error) {
	if root == nil {
		return parsePrompts(raw, field)
	}
	var p prompts
	v := root.Get(field)
	switch {
	case v == nil || v.Kind == strictjson.Null:
		return p, invalid("%s: required", field)
	case v.Kind == strictjson.String:
		p.texts = []string{v.Str}
		return p, nil
	case v.Kind != strictjson.Array || len(v.Elems) == 0:
		return p, invalid("%s: a string, an array of strings, an array of token ids or an array of such arrays", field)
	}
	if ids, ok := idsOf(v); ok {
		p.ids = [][]uint32{ids}
		return p, nil
	}
	one := "" // as parsePrompts: a null item repeats the text before it
	return batch(len(v.Elems), field, func(i int) (*string, []uint32, bool) {
		switch item := &v.Elems[i]; item.Kind {
		case strictjson.String:
			one = item.Str
			return &one, nil, true
		case strictjson.Null:
			return &one, nil, true
		}
		ids, ok := idsOf(&v.Elems[i])
		return nil, ids, ok
	})
}

// idsOf reads v as a list of token ids as tokenIDs does: null items are 0.
func idsOf(v *strictjson.Value) ([]uint32, bool) {
	if v.Kind != strictjson.Array {
		return nil, false
	}
	ids := make([]uint32, len(v.Elems))
	for i := range v.Elems {
		switch e := &v.Elems[i]; e.Kind {
		case strictjson.Null:
		case strictjson.Number:
			n, err := strconv.ParseUint(e.Str, 10, 32)
			if err != nil {
				return nil, false
			}
			ids[i] = uint32(n)
		default:
			return nil, false
		}
	}
	return ids, true
}

// tokenIDs decodes raw as a list of token ids.
func tokenIDs(raw json.RawMessage) ([]uint32, bool) {
	var ids []uint32
	if err := json.Unmarshal(raw, &ids); err != nil {
		return nil, false
	}
	return ids, true
}

// count is the number of prompts.
func (p prompts) count() int { return len(p.texts) + len(p.ids) }

// longest returns the ids of the longest prompt, tokenizing texts with tok (adding its
// special tokens, as engines do for a text prompt). A batch is routed as one request by
// its longest input: the engine prefills every prompt, and the longest bounds the bucket.
func (p prompts) longest(tok token.Tokenizer) []uint32 {
	var best []uint32
	for _, ids := range p.ids {
		if len(ids) > len(best) || best == nil {
			best = ids
		}
	}
	for _, text := range p.texts {
		if ids := tok.Encode(text, true); len(ids) > len(best) || best == nil {
			best = ids
		}
	}
	if best == nil {
		best = []uint32{}
	}
	return best
}

package request

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"

	"github.com/routerkit/router/runtime/arena"
	"github.com/routerkit/router/runtime/strictjson"
)

var fuzzSeeds = []string{
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":3}`,
	`{"model":"m","Model":"x","messages":[]}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"bootstrap_room":7}`,
	`{ "model" : "m" , "messages" : [ ] }`, `{}`, `{"model":"m","max_tokens":1,"max_tokens":2}`,
	`{"model":"m","messages":[{"role":"user","content":"\u00e9<&>"}],"stream":true,"n":2}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},null,{"type":"image_url"},{"type":"text","text":null},{"text":"b"}]},{"role":"assistant","content":null,"tool_calls":[]}],"temperature":0.5,"top_p":1,"top_k":-1,"min_p":0,"frequency_penalty":-1.5e0,"presence_penalty":2,"repetition_penalty":1,"max_completion_tokens":9,"add_generation_prompt":false,"tools":[{"type":"function","function":{"name":"f"}}],"chat_template_kwargs":{"enable_thinking":false},"stream":null}`,
	`{"model":null,"messages":[{"role":"user"}],"max_tokens":1.0}`, `{"model":"m","messages":[{"role":"user","Content":"x"}]}`,
	`{"model":"m","messages":[{"role":1}]}`, `{"model":"m","Temperature":3,"messages":[{"role":"u"}]}`, `{"model":"m","messages":{}}`,
	`{"model":"m","messages":[{"role":"user","content":5}]}`, `{"model":"m","messages":[{"role":"u","content":[{"type":1}]}]}`,
}

// FuzzDecodeChat feeds the chat request path: preparation never panics, and the one-pass
// decoding agrees with the general strict decoder.
func FuzzDecodeChat(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	ms := testModels(f, nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		// The whole preparation step (decode, validate, tokenize, expected peak).
		r, _ := http.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
		if p, err := ms.Chat(r, body); err == nil && p.Facts.InputTokens < 0 {
			t.Fatalf("negative input tokens: %+v", p.Facts)
		}
		var req chatRequest
		herr := decodeBody(body, &req)
		checkOnePass(t, body, req, herr)
		if herr == nil {
			_ = validate(&req)
		}
	})
}

// checkOnePass checks decodeChat against the general strict decoder, whose result on
// body is req and herr: the same error, and for a body decoded in one pass the same
// fields and the messages validateMessages decodes.
func checkOnePass(t *testing.T, body []byte, req chatRequest, herr *Error) {
	t.Helper()
	a := arena.Get() // the strings with escapes are cut from it, as Chat cuts them
	defer a.Release()
	fast, msgs, _, fastErr := decodeChat(body, a)
	switch {
	case (fastErr == nil) != (herr == nil):
		t.Fatalf("one pass: error %v, strict decoder: %v", fastErr, herr)
	case herr != nil && *fastErr != *herr:
		t.Fatalf("one pass: error %+v, strict decoder: %+v", *fastErr, *herr)
	case herr != nil || msgs == nil:
		return
	}
	if !reflect.DeepEqual(fast, req) {
		t.Fatalf("one pass decoded %+v, the strict decoder %+v", fast, req)
	}
	want, verr := validateMessages(req.Messages)
	if verr != nil || !reflect.DeepEqual(msgs, want) {
		t.Fatalf("one pass read messages %q, validateMessages %q (%v)", msgs, want, verr)
	}
}

// FuzzDecodeRequests checks that the one-pass decoding of completions, generate and the
// inputs endpoints (decodeOnePass) agrees with the general strict decoder: the same
// error, or the same request.
func FuzzDecodeRequests(f *testing.F) {
	for _, s := range append(fuzzSeeds,
		`{"model":"m","prompt":"hi","max_tokens":3,"n":2,"stream":true,"temperature":0.5,"echo":true}`,
		`{"model":"m","prompt":[[1,2],[3]],"max_tokens":null,"top_k":-1,"top_p":1e0}`,
		`{"model":"m","prompt":"x","Prompt":"y"}`, `{"model":"m","prompt":"x","max_tokens":1.5}`,
		`{"model":"m","prompt":"x","n":"2"}`, `{"model":"m","prompt":"x","stream":1}`, `{"model":5}`,
		`{"text":"hi","sampling_params":{"max_new_tokens":4},"stream":false}`,
		`{"model":"m","input_ids":[[1,2]],"sampling_params":[{"max_new_tokens":1}]}`, `{"text":"a","text":"b"}`,
		`{"model":"m","input":["a","b"]}`, `{"model":"m","query":"q","documents":["d"]}`, `{"query":"q","items":[1]}`,
		`{"model":"m","input_ids":[1],"Text":"x"}`, `null`, `[]`, `"x"`, `{"model":"m","top_p":1e400}`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		agree(t, body, completionFields)
		agree(t, body, generateFields)
		agree(t, body, inputsFields)
	})
}

// agree decodes body into a T both ways and fails when they differ.
func agree[T any](t *testing.T, body []byte, fields map[string]fieldSetter[T]) {
	t.Helper()
	var fast, slow T
	_, fastErr := decodeOnePass(body, &fast, fields)
	slowErr := decodeBody(body, &slow)
	switch {
	case (fastErr == nil) != (slowErr == nil):
		t.Fatalf("%T: one pass: error %v, strict decoder: %v", fast, fastErr, slowErr)
	case slowErr != nil && *fastErr != *slowErr:
		t.Fatalf("%T: one pass: error %+v, strict decoder: %+v", fast, *fastErr, *slowErr)
	case slowErr == nil && !reflect.DeepEqual(fast, slow):
		t.Fatalf("one pass decoded %+v, the strict decoder %+v", fast, slow)
	}
}

// FuzzPromptsOf checks that prompts read from the one-pass parse (promptsOf) are those
// parsePrompts reads from the field's bytes.
func FuzzPromptsOf(f *testing.F) {
	for _, s := range []string{`"hi"`, `null`, `[]`, `[1,2,3]`, `[1,null,4294967295]`, `[4294967296]`, `[-1]`, `[1.0]`, `[1e2]`,
		`["a","b"]`, `["a",null,"b"]`, `[null,"a"]`, `[[1,2],[3]]`, `[[]]`, `[[1],"a"]`, `[{"a":1}]`, `[true]`, `{}`, `5`, `"\ud800"`, `[[1,null]]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, field string) {
		body := []byte(`{"prompt":` + field + `}`)
		root, err := strictjson.Parse(body, nil)
		if err != nil || root.Kind != strictjson.Object {
			return
		}
		var raw json.RawMessage
		if v := root.Get("prompt"); v != nil {
			raw = body[v.Start:v.End]
		}
		fast, fastErr := promptsOf(&root, raw, "prompt")
		slow, slowErr := parsePrompts(raw, "prompt")
		if (fastErr == nil) != (slowErr == nil) || fastErr != nil && *fastErr != *slowErr || !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%s: from the parse %+v %v, parsePrompts %+v %v", field, fast, fastErr, slow, slowErr)
		}
	})
}

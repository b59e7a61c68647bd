package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestPDChatChoicesBootstrap: a PD chat with n above 1 gets bootstrap arrays of n, one
// room per choice, as SGLang's PD router sends them (sgl-project/sglang
// sgl-router/src/routers/http/pd_router.rs at 0105f2a3: get_chat_batch_size is n when
// above 1, and inject_bootstrap_into_value writes arrays of that length); both halves
// get the same fields and the client all n choices.
func TestPDChatChoicesBootstrap(t *testing.T) {
	fc := startFleet(t, mixedPlan())
	status, _, body := fc.post(t, chat("pd", "Three ways to say it.", `, "max_tokens": 3, "n": 3`))
	var answer struct {
		Choices []struct {
			Index int `json:"index"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(body), &answer); err != nil || status != http.StatusOK || len(answer.Choices) != 3 {
		t.Fatalf("pd chat with n=3: %d %s", status, body)
	}
	type boot struct {
		Hosts []string `json:"bootstrap_host"`
		Ports []int    `json:"bootstrap_port"`
		Rooms []uint64 `json:"bootstrap_room"`
	}
	var got [2]boot
	for i, url := range []string{fc.srv.current().plan.Engines[2].URL, fc.srv.current().plan.Engines[3].URL} {
		sent := fc.sent.bodies(url)
		if len(sent) != 1 {
			t.Fatalf("engine %s got %d requests", url, len(sent))
		}
		if err := json.Unmarshal(sent[0], &got[i]); err != nil {
			t.Fatalf("bootstrap fields are not arrays: %v: %s", err, sent[0])
		}
	}
	b := got[0]
	if len(b.Hosts) != 3 || len(b.Ports) != 3 || len(b.Rooms) != 3 || b.Ports[0] != 8998 || b.Hosts[0] != "127.0.0.1" ||
		b.Rooms[0] == b.Rooms[1] || b.Rooms[1] == b.Rooms[2] {
		t.Errorf("prefill bootstrap fields: %+v", b)
	}
	if d := got[1]; len(d.Rooms) != 3 || d.Rooms[0] != b.Rooms[0] || d.Rooms[2] != b.Rooms[2] {
		t.Errorf("decode bootstrap fields %+v differ from the prefill's %+v", d, b)
	}

	status, _, body = fc.post(t, chat("pd", "x", `, "n": 4097`))
	if status != http.StatusBadRequest {
		t.Errorf("n above the router's bound: %d %s", status, body)
	}
	fc.inflightZero(t)
}

// TestPDGenerateLogprobs: a PD /generate with return_logprob answers the prompt's
// input_token_logprobs although the decode engine, which ran no prefill, answers none: the
// prefill engine's go in front of the decode's, as SGLang's PD router merges them
// (sgl-project/sglang sgl-router/src/routers/http/pd_router.rs at 0105f2a3,
// merge_logprobs_in_json and merge_streaming_logprobs). The expected list is a plain
// engine's answer to the same prompt; the merge holds for JSON and for every event of a
// stream that carries the list, and a request without return_logprob is left alone.
func TestPDGenerateLogprobs(t *testing.T) {
	fc := startFleet(t, mixedPlan())
	req := func(model, extra string) string {
		return `{"model": "` + model + `", "text": "The capital of France is", "return_logprob": true, "sampling_params": {"max_new_tokens": 2}` + extra + `}`
	}
	type answer struct {
		MetaInfo struct {
			InputTokenLogprobs json.RawMessage `json:"input_token_logprobs"`
		} `json:"meta_info"`
	}
	var plain, pd answer
	status, body := fc.postJSON(t, "/generate", req("m", ""))
	if err := json.Unmarshal(body, &plain); err != nil || status != http.StatusOK || len(plain.MetaInfo.InputTokenLogprobs) < 10 {
		t.Fatalf("plain generate with return_logprob: %d %s", status, body)
	}
	status, body = fc.postJSON(t, "/generate", req("pd", ""))
	if err := json.Unmarshal(body, &pd); err != nil || status != http.StatusOK {
		t.Fatalf("pd generate with return_logprob: %d %s", status, body)
	}
	if !bytes.Equal(pd.MetaInfo.InputTokenLogprobs, plain.MetaInfo.InputTokenLogprobs) {
		t.Errorf("pd input_token_logprobs %s, want the prompt's %s", pd.MetaInfo.InputTokenLogprobs, plain.MetaInfo.InputTokenLogprobs)
	}

	status, body = fc.postJSON(t, "/generate", req("pd", `, "stream": true`))
	events := 0
	for line := range strings.SplitSeq(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev answer
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("stream event %q: %v", data, err)
		}
		events++
		if !bytes.Equal(ev.MetaInfo.InputTokenLogprobs, plain.MetaInfo.InputTokenLogprobs) {
			t.Errorf("stream event's input_token_logprobs %s, want %s", ev.MetaInfo.InputTokenLogprobs, plain.MetaInfo.InputTokenLogprobs)
		}
	}
	if status != http.StatusOK || events < 2 {
		t.Errorf("pd stream with return_logprob: %d, %d events: %s", status, events, body)
	}

	status, body = fc.postJSON(t, "/generate", `{"model": "pd", "text": "No logprobs.", "sampling_params": {"max_new_tokens": 2}}`)
	if status != http.StatusOK || strings.Contains(string(body), "input_token_logprobs") {
		t.Errorf("pd generate without return_logprob: %d %s", status, body)
	}
	fc.inflightZero(t)
}

package server

import (
	"encoding/json"
	"net/http"
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
	for i, url := range []string{fc.srv.plan.Engines[2].URL, fc.srv.plan.Engines[3].URL} {
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

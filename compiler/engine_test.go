package compiler

import (
	"strings"
	"testing"

	"github.com/routerkit/router/runtime/plan"
)

func TestCompileEngineFillsDefaults(t *testing.T) {
	running, err := Compile([]string{"../testdata/config/spec-example.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := CompileEngine(running, Source{Name: "engine.json", Data: []byte(`{"id": "P9", "url": "http://10.0.0.9:8000", "model": "llama", "role": "prefill"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if e.Kind != plan.KindSGLang || e.DPSize != 1 || e.Load.Source != "loads" || e.BootstrapPort != 8998 || e.PDProtocol != plan.PDBootstrap {
		t.Errorf("defaults not filled as the config's engines get them: %+v", e)
	}
}

func TestCompileEngineRefusals(t *testing.T) {
	running, err := Compile([]string{"../testdata/config/spec-example.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	first, n := running.Engines[0], len(running.Engines)
	for name, tc := range map[string]struct{ body, want string }{
		"unknown model":  {`{"id": "x", "url": "http://10.0.0.9:8000", "model": "lama", "role": "prefill"}`, `serves model "lama", which has no entry under models`},
		"role mismatch":  {`{"id": "x", "url": "http://10.0.0.9:8000", "model": "llama", "role": "plain"}`, "mixes plain engines (x) with prefill/decode engines"},
		"duplicate id":   {`{"id": "` + first.ID + `", "url": "http://10.0.0.9:8000", "model": "llama", "role": "prefill"}`, "duplicate engine id"},
		"duplicate url":  {`{"id": "x", "url": "` + first.URL + `", "model": "llama", "role": "prefill"}`, "has the same url as engine"},
		"unknown field":  {`{"id": "x", "url": "http://10.0.0.9:8000", "model": "llama", "role": "prefill", "weight": 2}`, "weight"},
		"bad url":        {`{"id": "x", "url": "10.0.0.9:8000", "model": "llama", "role": "prefill"}`, "absolute http:// or https:// URL"},
		"missing role":   {`{"id": "x", "url": "http://10.0.0.9:8000", "model": "llama"}`, "role"},
		"malformed json": {`{"id": `, "engine.json"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := CompileEngine(running, Source{Name: "engine.json", Data: []byte(tc.body)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if len(running.Engines) != n {
		t.Errorf("the running plan changed: %d engines", len(running.Engines))
	}
}

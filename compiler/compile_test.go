package compiler

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/routerkit/router/runtime/plan"
)

func TestSpecExampleYAMLAndCUEAgree(t *testing.T) {
	fromYAML, err := Compile([]string{"../testdata/config/spec-example.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	fromCUE, err := Compile([]string{"../testdata/config/spec-example.cue"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromYAML, fromCUE) {
		t.Fatalf("YAML and CUE spellings of the design example compile differently:\n%+v\n%+v", fromYAML, fromCUE)
	}
	m := fromYAML.Model("llama")
	if m == nil || len(m.Buckets) != 2 {
		t.Fatalf("want model llama with 2 buckets, got %+v", m)
	}
	short := m.Buckets[0]
	if short.ID != "short-context" || short.Rank != 10 || short.Limits.Min != 0 || *short.Limits.Max != 4096 || *short.MaxContextTokens != 8192 {
		t.Errorf("short-context bucket compiled wrong: %+v", short)
	}
	pd := short.Groups.PD
	if pd == nil || short.Groups.Plain != nil {
		t.Fatalf("short-context must be a PD bucket: %+v", short.Groups)
	}
	if !reflect.DeepEqual(pd.Prefill.WorkerIDs, []string{"P1", "P2"}) || !reflect.DeepEqual(pd.Decode.WorkerIDs, []string{"D1", "D2"}) {
		t.Errorf("membership: prefill %v decode %v", pd.Prefill.WorkerIDs, pd.Decode.WorkerIDs)
	}
	want := plan.Admission{MaxRunningRequests: 64, MaxKVTokens: 1048576}
	if pd.Prefill.Policy.Admission != want || pd.Decode.Policy.Admission != want {
		t.Errorf("admission: %+v / %+v", pd.Prefill.Policy.Admission, pd.Decode.Policy.Admission)
	}
	if pd.Prefill.Policy.Type != plan.CacheAware || pd.Decode.Policy.Type != plan.PowerOfTwo {
		t.Errorf("policy types: %s / %s", pd.Prefill.Policy.Type, pd.Decode.Policy.Type)
	}
}

func TestWorkerIDsAbsentVersusEmpty(t *testing.T) {
	p, err := CompileSources([]Source{{Name: "c.yaml", Data: []byte(`
engines: [{id: E1, url: "http://127.0.0.1:1", model: m, role: plain}]
models:
  m:
    buckets:
      - {id: all, groups: {plain: {policy: {type: random}}}}
      - {id: none, groups: {plain: {worker_ids: [], policy: {type: random}}}}
`)}})
	if err != nil {
		t.Fatal(err)
	}
	b := p.Models[0].Buckets
	if b[0].Groups.Plain.WorkerIDs != nil {
		t.Errorf("absent worker_ids must compile to nil (every engine), got %#v", b[0].Groups.Plain.WorkerIDs)
	}
	if ids := b[1].Groups.Plain.WorkerIDs; ids == nil || len(ids) != 0 {
		t.Errorf("worker_ids: [] must compile to an empty, non-nil list (no engine), got %#v", ids)
	}
}

// Every broken example fails with positioned errors in the broken file itself, never in
// the schema, and produces no plan.
func TestBrokenConfigsArePositioned(t *testing.T) {
	files, err := filepath.Glob("../testdata/config/broken/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no broken configs: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			p, err := Compile([]string{f})
			if p != nil {
				t.Errorf("a broken config must not produce a plan")
			}
			var errs Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("want Errors, got %v", err)
			}
			for _, e := range errs {
				if e.File != f || e.Line < 1 || e.Col < 1 {
					t.Errorf("error not positioned in %s: %v", f, e)
				}
				if e.Msg == "" || e.Msg != strings.ToLower(e.Msg[:1])+e.Msg[1:] {
					t.Errorf("message must start lowercase: %q", e.Msg)
				}
			}
		})
	}
}

func TestReadError(t *testing.T) {
	_, err := Compile([]string{filepath.Join(t.TempDir(), "missing.yaml")})
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("want a wrapped not-exist error, got %v", err)
	}
	if _, err := Compile(nil); err == nil {
		t.Fatal("compiling no files must fail")
	}
}

// FuzzCompile feeds random bytes and mutated valid configs to the compiler in every
// format: it must return errors, never panic, and never return both a plan and an error.
func FuzzCompile(f *testing.F) {
	seeds, _ := filepath.Glob("../testdata/config/*.*")
	broken, _ := filepath.Glob("../testdata/config/broken/*.yaml")
	for _, name := range append(seeds, broken...) {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, uint8(0))
	}
	f.Add([]byte("{"), uint8(2))
	f.Add([]byte("models: m: buckets: [{id: \"\"}]"), uint8(1))
	exts := []string{".yaml", ".cue", ".json"}
	f.Fuzz(func(t *testing.T, data []byte, ext uint8) {
		p, err := CompileSources([]Source{{Name: "fuzz" + exts[int(ext)%len(exts)], Data: data}})
		if (p == nil) == (err == nil) {
			t.Fatalf("want exactly one of plan and error, got %v and %v", p, err)
		}
	})
}

// A DNS source compiles with its defaults, a derived id and a template that carries the
// source's model and role, and a model may have no written engines when one supplies them.
func TestEnginesFromDNS(t *testing.T) {
	p, err := CompileSources([]Source{{Name: "c.yaml", Data: []byte(`
engines_from_dns:
  - {srv: _sglang._tcp.prefill.ns.svc.cluster.local., model: m, role: prefill}
  - {id: dec, name: decode.ns.svc, port: 8000, scheme: https, model: m, role: decode,
     interval_secs: 2, max_engines: 8, empty_grace: 0, engine: {dp_size: 2}}
models:
  m: {buckets: [{id: a, groups: {pd: {prefill: {}, decode: {}}}}]}
`)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Engines) != 0 || len(p.EnginesFromDNS) != 2 {
		t.Fatalf("want no written engines and two sources, got %d and %d", len(p.Engines), len(p.EnginesFromDNS))
	}
	pre, dec := p.EnginesFromDNS[0], p.EnginesFromDNS[1]
	if pre.ID != "prefill.ns.svc.cluster.local" || pre.Scheme != "http" || pre.IntervalSecs != 10 || pre.MaxEngines != 64 || pre.EmptyGrace != 3 || pre.TimeoutMS != 2000 {
		t.Errorf("prefill source defaults: %+v", pre)
	}
	if e := pre.Engine; e.Model != "m" || e.Role != plan.RolePrefill || e.BootstrapPort != 8998 || e.Kind != plan.KindSGLang || e.Load.Source != "loads" || e.ID != "" || e.URL != "" {
		t.Errorf("prefill template: %+v", e)
	}
	if dec.ID != "dec" || dec.Port != 8000 || dec.Scheme != "https" || dec.IntervalSecs != 2 || dec.MaxEngines != 8 || dec.EmptyGrace != 0 {
		t.Errorf("decode source: %+v", dec)
	}
	if e := dec.Engine; e.Role != plan.RoleDecode || e.BootstrapPort != 0 || e.DPSize != 2 || e.PDProtocol != plan.PDBootstrap {
		t.Errorf("decode template: %+v", e)
	}
}
